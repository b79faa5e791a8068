//! What a load host is: the one type of these facts, for the coordinator's host and every
//! agent's alike (read by `iocurve_engine::host::facts`, carried in results and the store).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
}
