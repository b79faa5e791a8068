//! Which process a run being written belongs to (schema v21), so that a later run can tell a
//! run whose process is gone — killed, or ended while the database could take none of its last
//! writes (issue 36, finding 5) — from one still going, and settle its status.
//!
//! An owner is `HOST PID START`: the host name, the process id and the process's start time in
//! clock ticks since boot (`/proc/PID/stat`, field 22), which tells a reused pid apart.

/// This process, as a run's owner.
pub fn this_process() -> String {
    let pid = std::process::id();
    format!("{} {pid} {}", host(), start_ticks(pid).unwrap_or(0))
}

/// Whether the owner's process is known to be gone: it ran on this host and no process with its
/// pid and start time is there now. A run of another host is not known to be gone.
pub fn is_gone(owner: &str) -> bool {
    let mut parts = owner.split(' ');
    let (Some(h), Some(pid), Some(start)) = (parts.next(), parts.next(), parts.next()) else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    if h != host() || pid == std::process::id() {
        return false;
    }
    start_ticks(pid) != Some(start)
}

/// This host's name, as runs' owners and rooms beside the database carry it (only the
/// characters a file name keeps).
pub(crate) fn host() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    h.trim().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.').collect()
}

fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, which may hold spaces and parentheses: the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 22 of the line is the 20th after the name.
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_gone_and_a_dead_one_is() {
        let me = this_process();
        assert!(!is_gone(&me), "{me}");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let owner = format!("{} {pid} {}", host(), start_ticks(pid).unwrap_or(1));
        child.wait().unwrap();
        assert!(is_gone(&owner), "{owner}");
        assert!(!is_gone(&format!("another-host {pid} 1")), "another host's run is not known to be gone");
        assert!(!is_gone("garbage"));
    }
}
