//! Saving a running verification map so that what it says is on the storage's stable media.
//!
//! A save takes a snapshot of the map, flushes every target (`fdatasync`: a device's volatile
//! write cache written out), writes the snapshot, and starts the journal anew when there is one
//! ([`crate::journal`]). Every write the snapshot counts was acknowledged before the flush
//! began, so the flush covers it: after a power cut, the map names no write the cache lost
//! (issue 36, part 8; a map saved without the flush reported lost writes where the storage had
//! kept its promise).
//!
//! A flush waits for the storage, which may stop answering: the saves run on a thread of their
//! own, never on the step's, and one the storage holds up is given up when the step ends.

use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::journal::Journal;
use crate::verify::GenMap;

/// A run's verification map, where it is saved, and its journal.
#[derive(Clone)]
pub struct KeptMap {
    pub map: Arc<GenMap>,
    pub path: PathBuf,
    pub journal: Option<Arc<Journal>>,
}

impl KeptMap {
    pub fn new(map: Arc<GenMap>, path: PathBuf) -> KeptMap {
        KeptMap { map, path, journal: None }
    }
}

/// The targets a save flushes: each one's path (for messages) and a descriptor of its own.
pub struct Flushed(Vec<(String, File)>);

impl Flushed {
    /// Every target of the set (duplicated descriptors: they go when the keeper ends).
    pub fn of(targets: &iocurve_target::TargetSet) -> std::io::Result<Flushed> {
        targets
            .targets
            .iter()
            .map(|t| Ok((t.path.display().to_string(), t.file.try_clone()?)))
            .collect::<Result<_, _>>()
            .map(Flushed)
    }
}

/// Saves the map once, as described above.
pub fn save_durably(kept: &KeptMap, flushed: &Flushed) -> Result<(), String> {
    let snap = kept.map.snapshot();
    for (path, f) in &flushed.0 {
        f.sync_data().map_err(|e| {
            format!("cannot flush {path} before saving the verification map ({e}): the map keeps its last save")
        })?;
    }
    snap.write(&kept.path).map_err(|e| e.to_string())?;
    if let Some(j) = &kept.journal {
        j.restart(&snap, &kept.map).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[derive(Default)]
struct State {
    /// Saves finished, the first error of a save not yet told, and the last save's.
    finished: u64,
    error: Option<String>,
    last: Option<String>,
    exited: bool,
}

/// The thread that saves a running map whenever asked.
pub struct MapKeeper {
    ask: Option<SyncSender<()>>,
    state: Arc<(Mutex<State>, Condvar)>,
    /// Saves asked for (and not coalesced into one already waiting).
    asked: u64,
}

impl MapKeeper {
    pub fn start(kept: KeptMap, flushed: Flushed) -> std::io::Result<MapKeeper> {
        // One save waiting at most: asks while one waits are the same save.
        let (ask, asked) = std::sync::mpsc::sync_channel::<()>(1);
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let st = state.clone();
        std::thread::Builder::new().name("iocurve-map".into()).spawn(move || {
            while asked.recv().is_ok() {
                let r = save_durably(&kept, &flushed);
                let (lock, cv) = &*st;
                let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
                s.finished += 1;
                s.last = r.as_ref().err().cloned();
                if let Err(e) = r {
                    s.error.get_or_insert(e);
                }
                cv.notify_all();
            }
            // The targets' descriptors close here, before the step says it is done.
            drop(flushed);
            let (lock, cv) = &*st;
            lock.lock().unwrap_or_else(|e| e.into_inner()).exited = true;
            cv.notify_all();
        })?;
        Ok(MapKeeper { ask: Some(ask), state, asked: 0 })
    }

    /// Asks for a save (an interval ended); returns at once.
    pub fn request(&mut self) {
        if let Some(ask) = &self.ask {
            match ask.try_send(()) {
                Ok(()) => self.asked += 1,
                // One is waiting already: it saves what this one would.
                Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
            }
        }
    }

    /// The first error of a save since the last call (told as a warning: the map keeps its last
    /// good save).
    pub fn take_error(&self) -> Option<String> {
        self.state.0.lock().unwrap_or_else(|e| e.into_inner()).error.take()
    }

    /// A last save after everything this step wrote, then the end of the thread. Waits at most
    /// `wait`: a flush the storage holds longer is given up (the map keeps its last good save).
    pub fn finish(mut self, wait: Duration) -> Result<(), String> {
        if let Some(ask) = self.ask.take() {
            // A save waiting already starts after this call: it is the last one.
            if ask.try_send(()).is_ok() {
                self.asked += 1;
            }
        }
        let deadline = Instant::now() + wait;
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !s.exited {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "the verification map was not saved at the step's end: flushing the targets has not returned in {} s (the map keeps its last save)",
                    wait.as_secs()
                ));
            }
            s = cv.wait_timeout(s, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        debug_assert!(s.finished >= self.asked.min(1));
        // The last save decides: an interval's failed save that a later one made good is no
        // failure of the step (it was told as a warning).
        match s.last.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keeper_saves_what_was_acknowledged_and_ends_with_a_last_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.map");
        let target = dir.path().join("t");
        std::fs::write(&target, vec![0u8; 8192]).unwrap();
        let map = Arc::new(GenMap::new(4096, &[(target.display().to_string(), 8192)]));
        let kept = KeptMap::new(map.clone(), path.clone());
        let flushed = Flushed(vec![(target.display().to_string(), File::open(&target).unwrap())]);
        let mut k = MapKeeper::start(kept, flushed).unwrap();
        k.request();
        k.request();
        let g = map.claim(0, 1).unwrap();
        map.release(0, 1, crate::verify::next_gen(g));
        k.finish(Duration::from_secs(60)).unwrap();
        assert_eq!(GenMap::load(&path).unwrap().get(0, 1), 1, "the last save has the last write");
    }
}
