//! An agent as a relay (issue 46, `iocurve agent --relay`; docs/relays.md): it drives a group
//! of agents for one run and merges their intervals exactly, so that one coordinator drives
//! tens of relays instead of thousands of agents.
//!
//! The agent's service checks every call as it checks any (TLS, token proof, ownership, audit)
//! and then hands a relay's calls to its [`RelayHandler`]: the coordinator's own client drives
//! the children (it lives in `iocurve-run`, which depends on this crate, so the handler is a
//! trait object set by the command line).

use tokio::sync::mpsc;
use tonic::Status;

use crate::pb;

/// Where a relay's step events go: the stream of the `RunStep` call that asked for the step.
pub type StepEvents = mpsc::Sender<Result<pb::StepEvent, Status>>;

/// Where a relay sends a pass's events (a precondition or verification pass over its group).
pub type PassEvents<E> = mpsc::Sender<Result<E, Status>>;

/// What a relay does with the calls its coordinator makes.
#[tonic::async_trait]
pub trait RelayHandler: Send + Sync {
    /// `Relay`: dial the children with the grant, answer with their Hello facts and clocks.
    /// Called again (a coordinator reconnecting), the group is replaced.
    async fn join(&self, req: pb::RelayRequest) -> Result<pb::RelayReply, Status>;
    /// Whether `join` made this agent a group's relay: until then it serves as an agent.
    fn joined(&self) -> bool;
    /// The coordinator that made it a relay no longer owns it (another took it, its claim
    /// expired): the group goes, and its connections with it; it serves as an agent again.
    fn leave(&self);
    /// A step of the group runs.
    fn running(&self) -> bool;
    /// Whether the group this relay let go last (and has not replaced) was for run `run_key`:
    /// that run's calls are answered "unavailable" (its hosts lost), not as an agent's.
    fn let_go(&self, run_key: u32) -> bool;
    /// The run key of the group it relays for (None while it is no group's relay): a call of
    /// another run, even from its coordinator's certificate, is not that group's.
    fn group_run(&self) -> Option<u32>;
    /// `Targets` on every child, each with its own groups: their facts in the children's
    /// order, each child's after the one before (a step's intervals name them so).
    async fn targets(&self, req: pb::TargetsRequest) -> Result<pb::TargetsReply, Status>;
    /// `RunStep` on every child at the request's moment (on the relay's clock): the merged
    /// events go to `events` as they come, `Done` last. Returns once the step is under way.
    async fn run_step(&self, req: pb::StepRequest, events: StepEvents) -> Result<(), Status>;
    /// `Stop`: whether a step was running.
    fn stop(&self) -> bool;
    /// `EndAfter`, asked of every child of the step the request names.
    async fn end_after(&self, req: pb::EndAfterRequest) -> pb::EndAfterReply;
    /// `Precondition` on every child at once, each on its own targets: their events go to
    /// `events` as they come, each target by its place among the group's (as `targets` gave
    /// them), the group's `Done` last. Returns once the pass is under way.
    async fn precondition(
        &self,
        req: pb::PreconditionRequest,
        events: PassEvents<pb::PreconditionEvent>,
    ) -> Result<(), Status>;
    /// `VerifyPass` on every child at once, likewise: the group's progress and counts added up,
    /// each problem's target by its place among the group's.
    async fn verify_pass(
        &self,
        req: pb::VerifyPassRequest,
        events: PassEvents<pb::VerifyPassEvent>,
    ) -> Result<(), Status>;
}
