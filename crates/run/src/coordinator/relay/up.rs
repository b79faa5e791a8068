//! Where a relay's events go up to its coordinator, for a step or a pass: in order, never
//! waiting in the callbacks that send them (they are called inside the step's loop or the
//! pass's), so they queue and a task sends them on at the coordinator's pace. A coordinator
//! gone, or one that reads nothing while `max_queued` events wait, stops the step or pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use iocurve_net::agent::relay::PassEvents;
use tokio::sync::mpsc;
use tonic::Status;

pub(super) struct Up<E> {
    tx: mpsc::UnboundedSender<Result<E, Status>>,
    /// Events queued and not sent yet.
    waiting: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    max_queued: usize,
}

impl<E: Send + 'static> Up<E> {
    pub(super) fn new(events: PassEvents<E>, stop: Arc<AtomicBool>, max_queued: usize) -> Up<E> {
        let (tx, mut queued) = mpsc::unbounded_channel::<Result<E, Status>>();
        let waiting = Arc::new(AtomicUsize::new(0));
        let (sent, gone) = (waiting.clone(), stop.clone());
        tokio::spawn(async move {
            let mut closed = false;
            while let Some(e) = queued.recv().await {
                sent.fetch_sub(1, Ordering::Relaxed);
                if !closed && events.send(e).await.is_err() {
                    closed = true;
                    gone.store(true, Ordering::Relaxed);
                }
            }
        });
        Up { tx, waiting, stop, max_queued }
    }

    pub(super) fn send(&self, e: E) {
        self.push(Ok(e));
    }

    /// The last word: the `Done`, or the status the call ends with.
    pub(super) fn end(&self, last: Result<E, Status>) {
        self.push(last);
    }

    fn push(&self, e: Result<E, Status>) {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.max_queued {
            // A coordinator that reads nothing: the step or pass ends, as if it were gone.
            self.stop.store(true, Ordering::Relaxed);
        }
        let _ = self.tx.send(e);
    }
}
