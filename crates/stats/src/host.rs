//! What a load host is: the one type of these facts, for the coordinator's host and every
//! agent's alike (read by `iocurve_engine::host::facts`, carried in results and the store).

use serde::{Deserialize, Serialize};

impl HostFacts {
    /// `, SMT on, governor powersave` — what is known of SMT and the frequency governor (they
    /// explain latency a benchmark on another host does not reproduce); empty when neither is.
    pub fn cpu_extras(&self) -> String {
        let mut s = String::new();
        if let Some(on) = self.smt {
            s.push_str(if on { ", SMT on" } else { ", SMT off" });
        }
        if let Some(g) = &self.governor {
            s.push_str(&format!(", governor {g}"));
        }
        s
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
    /// Simultaneous multithreading on (two logical CPUs per core share it); None: not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt: Option<bool>,
    /// The CPU frequency governor (`performance`, `powersave`, …; several joined by `,`);
    /// None: no cpufreq (many virtual machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<String>,
}
