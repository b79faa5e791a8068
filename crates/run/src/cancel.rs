//! Cancellation as a value: whoever holds a clone may ask the run to stop (Ctrl-C's handler,
//! a test, a server shutting down); the run checks it between steps and hands its flag to the
//! engine and the network, which check it between I/Os and messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request to stop, shared by clones. Once set it stays set.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks every holder to stop. Only an atomic store: safe from a signal handler.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag itself, for the engine and network calls that poll one.
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }

    /// Sleeps for `d`, or until cancelled (within 50 ms of it); true when cancelled.
    pub fn sleep(&self, d: std::time::Duration) -> bool {
        let end = std::time::Instant::now() + d;
        while !self.is_cancelled() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
        }
        self.is_cancelled()
    }

    /// The flag, shared, for work that outlives a borrow (a scratch file's preparation).
    pub fn shared(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_clone_sees_the_cancel() {
        let c = super::Cancel::new();
        let other = c.clone();
        assert!(!other.is_cancelled());
        c.cancel();
        assert!(other.is_cancelled() && other.flag().load(std::sync::atomic::Ordering::Relaxed));
    }
}
