//! The running coordinator's mark endpoint (issue 44): `iocurve mark TEXT` from another terminal
//! reaches the run through a Unix socket that only this user can reach — in a directory of the
//! user's own with mode 0700 (`$XDG_RUNTIME_DIR/iocurve`, else `/tmp/iocurve-UID`), the socket
//! itself 0600, and every peer's credentials checked (`SO_PEERCRED`: its effective user must be
//! this process's). Over the network a mark goes as any command to the coordinator's host does
//! (`ssh HOST iocurve mark …`): this endpoint never listens on a network.
//!
//! A mark is stored as it comes (a connection of the endpoint's own to the results database:
//! a killed run keeps it) and queued for the run's observers (the terminal prints it, live
//! metrics serve it as an annotation), which hear of it at the next progress tick. One JSON
//! line in, one out; every read and write has a deadline, a request is at most 4 KiB.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use iocurve_stats::Mark;
use serde_json::{Value, json};

/// How long the endpoint waits for a peer's whole request line.
const DEADLINE: Duration = Duration::from_secs(2);
/// How long `mark` waits for the answer: longer than the endpoint may take to store a mark (the
/// database's busy timeout, 5 s, on storage that stalls in a failover test), so that a mark
/// said failed was not stored.
const ANSWER: Duration = Duration::from_secs(10);
/// The longest request line.
const REQUEST_BYTES: u64 = 4096;
/// How often the accepting thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The endpoint of a running run: serving until dropped, its socket removed then.
pub struct MarkEndpoint {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    inbox: Receiver<(Mark, f64)>,
}

/// What an endpoint says of its run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunAtEndpoint {
    pub socket: PathBuf,
    pub run: i64,
    pub plan: String,
    /// The results database, as the run opened it.
    pub db: String,
    pub pid: u32,
}

/// What the run answered to a mark: the mark as stored, and when it came after the run began.
#[derive(Debug, Clone, PartialEq)]
pub struct Marked {
    pub run: i64,
    pub mark: Mark,
    pub after_start_s: f64,
}

/// The directory of the running runs' sockets, made if missing: refused when it is not a
/// directory of this user's that only this user can reach (another user could make it first
/// in `/tmp` and listen there in a run's name).
pub fn socket_dir() -> Result<PathBuf, String> {
    let dir = candidates().remove(0);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    checked(dir)
}

/// Where runs keep their sockets: `$XDG_RUNTIME_DIR/iocurve` where that is set, and
/// `/tmp/iocurve-UID` (a run started under sudo, cron or another session has no or another
/// `XDG_RUNTIME_DIR`: `mark` looks in both).
fn candidates() -> Vec<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut out: Vec<PathBuf> = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .map(|p| p.join("iocurve"))
        .into_iter()
        .collect();
    out.push(std::env::temp_dir().join(format!("iocurve-{uid}")));
    out
}

/// `dir`, when it is a directory of this user's that only this user can reach.
fn checked(dir: PathBuf) -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let md = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !md.file_type().is_dir() || md.uid() != uid || md.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a directory of yours that only you can reach (owner uid {}, mode {:o}, {}): remove it; iocurve keeps the sockets of running runs there",
            dir.display(),
            md.uid(),
            md.mode() & 0o7777,
            if md.file_type().is_symlink() {
                "a symlink"
            } else if md.is_dir() {
                "a directory"
            } else {
                "not a directory"
            }
        ));
    }
    Ok(dir)
}

impl MarkEndpoint {
    /// Starts serving run `run` of database `db` (its plan `plan`, begun at `started_unix_ns`).
    pub fn start(db: &str, run: i64, plan: &str, started_unix_ns: i64) -> Result<MarkEndpoint, String> {
        // A process may run several runs at once (the in-process tests do): each its own socket.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = socket_dir()?.join(format!("run-{}-{n}.sock", std::process::id()));
        if path.as_os_str().len() > 100 {
            return Err(format!(
                "{}: too long a path for a socket (set XDG_RUNTIME_DIR to a shorter directory)",
                path.display()
            ));
        }
        // A socket left by a process of this id that died: ours now.
        let _ = std::fs::remove_file(&path);
        // (Another run that ended may have removed the directory, empty, between: once more.)
        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(_) => {
                socket_dir()?;
                UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?
            }
        };
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        listener.set_nonblocking(true).map_err(|e| format!("{}: {e}", path.display()))?;
        let store = iocurve_store::Store::open_existing(Path::new(db)).map_err(|e| e.to_string())?;
        let (tx, inbox) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        // The database as `mark --db` names it from any directory.
        let db = std::fs::canonicalize(db).map_or_else(|_| db.to_string(), |p| p.display().to_string());
        let run_facts = Serving { run, plan: plan.to_string(), db, started_unix_ns, store, tx };
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("iocurve-marks".into())
            .spawn(move || serve(listener, run_facts, &flag))
            .map_err(|e| format!("the mark endpoint's thread: {e}"))?;
        Ok(MarkEndpoint { path, stop, thread: Some(thread), inbox })
    }

    /// The marks that came since the last call, each with its seconds after the run's start.
    pub fn drain(&self) -> Vec<(Mark, f64)> {
        self.inbox.try_iter().collect()
    }

    pub fn socket(&self) -> &Path {
        &self.path
    }
}

impl Drop for MarkEndpoint {
    /// No mark after this: the socket goes, a peer still being answered is refused ("the run has
    /// ended") or its mark is stored before this returns — the run's result reads the marks
    /// right after (each peer is done within its deadline and the store's busy timeout).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::fs::remove_file(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The directory too when no other run's socket is in it: a run leaves nothing in the
        // temporary directory behind (found by the Slurm test, whose copies' directory it is).
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// What the serving thread holds.
struct Serving {
    run: i64,
    plan: String,
    db: String,
    started_unix_ns: i64,
    store: iocurve_store::Store,
    tx: Sender<(Mark, f64)>,
}

/// Peers served at once at most: each within its deadlines, on a thread of its own, so that a
/// peer that connects and says nothing holds up no other; beyond these, a peer is told to try
/// again.
const PEERS: usize = 8;

fn serve(listener: UnixListener, s: Serving, stop: &Arc<AtomicBool>) {
    let s = Arc::new(std::sync::Mutex::new(s));
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut peers: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        peers.retain(|p| !p.is_finished());
        match listener.accept() {
            Ok((mut conn, _)) => {
                if busy.fetch_add(1, Ordering::AcqRel) >= PEERS {
                    busy.fetch_sub(1, Ordering::AcqRel);
                    let _ = conn.set_write_timeout(Some(DEADLINE));
                    let _ = writeln!(conn, "{}", json!({ "error": "the run is answering other peers: try again" }));
                    continue;
                }
                let (s, b, stop) = (s.clone(), busy.clone(), stop.clone());
                let spawned = std::thread::Builder::new().name("iocurve-mark-peer".into()).spawn(move || {
                    if let Err(e) = answer(conn, &s, &stop) {
                        tracing::debug!(error = %e, "mark endpoint");
                    }
                    b.fetch_sub(1, Ordering::AcqRel);
                });
                match spawned {
                    Ok(p) => peers.push(p),
                    Err(e) => {
                        busy.fetch_sub(1, Ordering::AcqRel);
                        tracing::warn!(error = %e, "mark endpoint: no thread for a peer");
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                tracing::warn!(error = %e, "mark endpoint: accept");
                std::thread::sleep(POLL);
            }
        }
    }
    // The peers being answered finish (within their deadlines) before the run reads its marks.
    for p in peers {
        let _ = p.join();
    }
}

/// A peer's request line: at most [`REQUEST_BYTES`], all of it within [`DEADLINE`] (a peer
/// that sends a byte at a time holds its slot no longer). None: it closed without a word.
fn request(conn: &mut UnixStream) -> Result<Option<String>, String> {
    let until = std::time::Instant::now() + DEADLINE;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(format!("no whole request within {} s", DEADLINE.as_secs()));
        }
        conn.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match conn.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("no whole request within {} s: {e}", DEADLINE.as_secs())),
        }
        if buf.contains(&b'\n') {
            break;
        }
        if buf.len() as u64 > REQUEST_BYTES {
            return Err(format!("a request is one line of at most {REQUEST_BYTES} bytes"));
        }
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    String::from_utf8(line.to_vec()).map(Some).map_err(|_| "a request is UTF-8 text".to_string())
}

/// The effective user id of the peer of a Unix socket.
fn peer_uid(conn: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor and a buffer of the size given.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

fn answer(mut conn: UnixStream, s: &std::sync::Mutex<Serving>, stop: &AtomicBool) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_write_timeout(Some(DEADLINE))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let reply = match peer_uid(&conn) {
        Some(uid) if uid == me => match request(&mut conn) {
            // A peer that only looked whether anyone listens.
            Ok(None) => return Ok(()),
            Ok(Some(line)) => {
                // The mark's time: when it arrived, before it waits for the store.
                let now = iocurve_stats::date::unix_ns();
                let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
                if stop.load(Ordering::SeqCst) {
                    json!({ "error": format!("run {} has ended: mark it with --run {} --at TIME", s.run, s.run) })
                } else {
                    act(&line, now, &mut s)
                }
            }
            Err(e) => json!({ "error": e }),
        },
        uid => json!({ "error": format!("this run takes marks only from user {me}; this peer is {uid:?}") }),
    };
    writeln!(conn, "{reply}")
}

/// One request: `{"hello": true}` or `{"mark": TEXT}` (arrived at `now`).
fn act(line: &str, now: i64, s: &mut Serving) -> Value {
    let req: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(e) => return json!({ "error": format!("a request is one line of JSON: {e}") }),
    };
    if req.get("hello").is_some() {
        return json!({ "run": s.run, "plan": s.plan, "db": s.db, "pid": std::process::id() });
    }
    let Some(text) = req.get("mark").and_then(Value::as_str) else {
        return json!({ "error": "a request is {\"hello\": true} or {\"mark\": TEXT}" });
    };
    let mark = match Mark::new(now, text, "live") {
        Ok(m) => m,
        Err(e) => return json!({ "error": e }),
    };
    if let Err(e) = s.store.add_marks(s.run, std::slice::from_ref(&mark)) {
        return json!({ "error": e.to_string() });
    }
    let after = (mark.at_unix_ns - s.started_unix_ns) as f64 / 1e9;
    let reply = json!({ "run": s.run, "at_unix_ns": mark.at_unix_ns, "text": mark.text, "after_start_s": after });
    // The run's observers hear of it at their next tick (gone: the run is ending).
    let _ = s.tx.send((mark, after));
    reply
}

/// One request to the endpoint at `socket`, its answer.
fn ask(socket: &Path, req: &Value) -> Result<Value, String> {
    let mut conn = UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    conn.set_read_timeout(Some(ANSWER)).map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(DEADLINE)).map_err(|e| e.to_string())?;
    writeln!(conn, "{req}").map_err(|e| format!("{}: {e}", socket.display()))?;
    let mut line = String::new();
    BufReader::new(conn.take(1 << 16))
        .read_line(&mut line)
        .map_err(|e| format!("{}: no answer within {} s: {e}", socket.display(), ANSWER.as_secs()))?;
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| format!("{}: {e}", socket.display()))?;
    match v.get("error").and_then(Value::as_str) {
        Some(e) => Err(e.to_string()),
        None => Ok(v),
    }
}

/// The runs of this user running on this host now: each endpoint that answers.
pub fn running() -> Result<Vec<RunAtEndpoint>, String> {
    let mut out = Vec::new();
    let mut refused = None;
    for dir in candidates().into_iter().filter(|d| std::fs::symlink_metadata(d).is_ok()) {
        match checked(dir) {
            Ok(dir) => scan(&dir, &mut out),
            Err(e) => refused = refused.or(Some(e)),
        }
    }
    match refused {
        // Where no run answered, a directory refused may be why.
        Some(e) if out.is_empty() => Err(e),
        _ => {
            out.sort_by_key(|r| (r.run, r.pid));
            Ok(out)
        }
    }
}

/// The runs answering in `dir`.
fn scan(dir: &Path, out: &mut Vec<RunAtEndpoint>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("run-") && name.ends_with(".sock")) {
            continue;
        }
        // A socket whose run was killed answers nothing: no running run; one nobody listens on
        // any more goes (the directory is this user's alone).
        if let Err(e) = UnixStream::connect(&p)
            && e.kind() == std::io::ErrorKind::ConnectionRefused
        {
            let _ = std::fs::remove_file(&p);
            continue;
        }
        if let Ok(v) = ask(&p, &json!({ "hello": true })) {
            out.push(RunAtEndpoint {
                socket: p,
                run: v["run"].as_i64().unwrap_or(0),
                plan: v["plan"].as_str().unwrap_or("").into(),
                db: v["db"].as_str().unwrap_or("").into(),
                pid: v["pid"].as_u64().unwrap_or(0) as u32,
            });
        }
    }
}

/// Sends a mark to the run at `at`.
pub fn send(at: &RunAtEndpoint, text: &str) -> Result<Marked, String> {
    let v = ask(&at.socket, &json!({ "mark": text }))?;
    let at_unix_ns = v["at_unix_ns"].as_i64().ok_or("the run's answer has no time")?;
    let text = v["text"].as_str().unwrap_or(text);
    Ok(Marked {
        run: v["run"].as_i64().unwrap_or(at.run),
        mark: Mark::new(at_unix_ns, text, "live")?,
        after_start_s: v["after_start_s"].as_f64().unwrap_or(0.0),
    })
}

/// The run a mark goes to: the one running (of those given), the one `run` names, or, where
/// several runs of databases of their own have that id, the one of `db`.
pub fn pick<'a>(running: &'a [RunAtEndpoint], run: Option<i64>, db: &Path) -> Result<&'a RunAtEndpoint, String> {
    let list = |r: &[&RunAtEndpoint]| {
        r.iter()
            .map(|e| format!("run {} (plan {}, {}, pid {})", e.run, e.plan, e.db, e.pid))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let all: Vec<&RunAtEndpoint> = running.iter().collect();
    let named: Vec<&RunAtEndpoint> = all.iter().copied().filter(|e| run.is_none_or(|r| e.run == r)).collect();
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    let mine = canon(db);
    match (named.as_slice(), run) {
        ([one], _) => Ok(one),
        ([], None) => Err(
            "no run of yours is running on this host; a stored run takes a mark with --run ID --at TIME (or --events FILE)"
                .into(),
        ),
        ([], Some(r)) if all.is_empty() => Err(format!(
            "run {r} is not running on this host (no run of yours is); a stored run takes a mark with --at TIME (or --events FILE)"
        )),
        ([], Some(r)) => Err(format!("run {r} is not running on this host; running: {}", list(&all))),
        (several, _) => {
            let same: Vec<&RunAtEndpoint> =
                several.iter().copied().filter(|e| mine.is_some() && canon(Path::new(&e.db)) == mine).collect();
            match (same.as_slice(), run) {
                ([one], Some(_)) => Ok(one),
                _ if run.is_some() => Err(format!(
                    "{} runs of that id are running: {}; say which with --db",
                    several.len(),
                    list(several)
                )),
                _ => Err(format!("{} runs are running: {}; say which with --run ID", several.len(), list(several))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(run: i64, db: &str) -> RunAtEndpoint {
        RunAtEndpoint { socket: "/x".into(), run, plan: "p".into(), db: db.into(), pid: 1 }
    }

    #[test]
    fn a_mark_goes_to_the_one_run_or_the_run_named() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
        std::fs::write(&a, b"").unwrap();
        std::fs::write(&b, b"").unwrap();
        let one = [at(3, a.to_str().unwrap())];
        assert_eq!(pick(&one, None, &b).unwrap().run, 3);
        assert!(pick(&one, Some(4), &a).unwrap_err().contains("run 4 is not running on this host; running: run 3"));
        assert!(pick(&[], None, &a).unwrap_err().contains("no run of yours is running"));
        let two = [at(3, a.to_str().unwrap()), at(3, b.to_str().unwrap())];
        assert!(pick(&two, None, &a).unwrap_err().contains("say which with --run ID"));
        assert_eq!(pick(&two, Some(3), &b).unwrap().db, b.to_str().unwrap());
        assert!(pick(&two, Some(3), Path::new("/nowhere.db")).unwrap_err().contains("say which with --db"));
    }
}
