//! A real headless Chromium, driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: Chromium reads commands on fd 3 and writes replies and events on
//! fd 4, each a JSON message ended by a NUL byte). No WebDriver and no websocket: only what the
//! report tests need — open a page, evaluate script, collect console errors and network
//! requests, take a screenshot.

#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Browser {
    child: Child,
    commands: File,
    messages: Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    /// Every event received so far, in order.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    (fds[0], fds[1])
}

pub fn chromium() -> &'static str {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"] {
        if Path::new(p).exists() {
            return p;
        }
    }
    panic!("the report tests need Chromium: `apt-get install chromium` (bash scripts/test installs it)");
}

impl Browser {
    pub fn launch() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (cmd_r, cmd_w) = pipe();
        let (ev_r, ev_w) = pipe();
        let mut cmd = Command::new(chromium());
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--remote-debugging-pipe",
            "--window-size=1250,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec. The pipe ends are first
        // moved above 10 so that placing them at 3 and 4 cannot overwrite one with the other;
        // dup2 clears close-on-exec on the copies.
        unsafe {
            cmd.pre_exec(move || {
                let r = libc::fcntl(cmd_r, libc::F_DUPFD_CLOEXEC, 10);
                let w = libc::fcntl(ev_w, libc::F_DUPFD_CLOEXEC, 10);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("Chromium starts");
        // SAFETY: the descriptors are ours; each is wrapped exactly once (the child's copies
        // are closed here).
        let (commands, events) = unsafe {
            libc::close(cmd_r);
            libc::close(ev_w);
            (File::from_raw_fd(cmd_w), File::from_raw_fd(ev_r))
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(events);
            let mut buf = Vec::new();
            while matches!(r.read_until(0, &mut buf), Ok(n) if n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                    && tx.send(v).is_err()
                {
                    break;
                }
                buf.clear();
            }
        });
        Browser { child, commands, messages: rx, next_id: 0, session: None, events: Vec::new(), _profile: profile }
    }

    /// Sends a command (to the page once one is open) and returns its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("Chromium reads commands");
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let m = self.next_message(deadline, method);
            if m["id"] == json!(id) {
                assert!(m.get("error").is_none(), "{method} failed: {}", m["error"]);
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn next_message(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.messages.recv_timeout(left) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => panic!("Chromium did not answer {waiting_for} within {TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("Chromium exited while waiting for {waiting_for}"),
        }
    }

    /// Waits for the event `method` (one that arrived earlier counts).
    pub fn wait_event(&mut self, method: &str) -> Value {
        if let Some(e) = self.events.iter().find(|e| e["method"] == method) {
            return e.clone();
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let m = self.next_message(deadline, method);
            self.events.push(m.clone());
            if m["method"] == method {
                return m;
            }
        }
    }

    /// Opens `path` in a new page and waits for its load event; console, errors and network
    /// requests of the page are recorded from the start.
    pub fn open(&mut self, path: &Path) {
        let t = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let a = self.call("Target.attachToTarget", json!({"targetId": t["targetId"], "flatten": true}));
        self.session = Some(a["sessionId"].as_str().expect("a session").to_string());
        for domain in ["Page", "Runtime", "Log", "Network"] {
            self.call(&format!("{domain}.enable"), json!({}));
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1250, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
        self.events.clear();
        let url = format!("file://{}", path.canonicalize().unwrap().display());
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired");
    }

    /// Evaluates `expr` in the page (awaiting a promise) and returns its value as JSON.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": expr, "returnByValue": true, "awaitPromise": true}));
        assert!(r.get("exceptionDetails").is_none(), "script failed: {}\n{expr}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Console errors, uncaught exceptions and browser log errors of the page.
    pub fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| {
                let p = &e["params"];
                match e["method"].as_str()? {
                    "Runtime.exceptionThrown" => Some(format!("uncaught: {}", p["exceptionDetails"])),
                    "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert")) => {
                        Some(format!("console.{}: {}", p["type"], p["args"]))
                    }
                    "Log.entryAdded" if p["entry"]["level"] == "error" => Some(format!("log: {}", p["entry"]["text"])),
                    _ => None,
                }
            })
            .collect()
    }

    /// URLs of every request the page made (the document itself included).
    pub fn requests(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .map(|e| e["params"]["request"]["url"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// A PNG of the whole page.
    pub fn screenshot(&mut self, to: &Path) {
        let m = self.call("Page.getLayoutMetrics", json!({}));
        let size = &m["cssContentSize"];
        let clip = json!({"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1});
        let r =
            self.call("Page.captureScreenshot", json!({"format": "png", "clip": clip, "captureBeyondViewport": true}));
        let png = base64(r["data"].as_str().expect("screenshot data"));
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (RFC 4648, with padding), as DevTools sends binary data.
fn base64(text: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= u32::from(val(c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&acc.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(base64("aW9jdXJ2ZQ=="), b"iocurve");
    assert_eq!(base64("aW9j"), b"ioc");
    assert_eq!(base64("aW8="), b"io");
}

/// Pixels drawn per chart of the workloads and matrices (`.chart[data-chart]`; the run's own
/// timelines, `data-timeline`, are checked by their test), counted in the page: opaque pixels of the chart's canvas that have
/// the colour of the first series (`#1f77b4`), or of the p50 line (`#2ca02c`) in percentile
/// charts. Axes and grid alone do not count, so a chart without data fails.
pub const DRAWN: &str = r#"
Array.from(document.querySelectorAll('.chart[data-chart]')).map(el => {
  const c = el.querySelector('canvas');
  if (!c || !c.width || !c.height) return {chart: el.dataset.chart, pixels: 0};
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  // The first series' colour (green; p50 on the percentile chart), and the optimum's blue and
  // the maximum's orange marks.
  const count = (want) => {
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
      if (d[i + 3] > 200 && Math.abs(d[i] - want[0]) < 12 && Math.abs(d[i + 1] - want[1]) < 12 && Math.abs(d[i + 2] - want[2]) < 12) n++;
    return n;
  };
  // On the percentile chart a percentile's line may lie over p50's (a null back-end's p50 and
  // p90 a nanosecond apart): every percentile's colour counts there.
  const pixels = count([0x2c, 0xa0, 0x2c]) + (el.dataset.chart === 'percentiles'
    ? count([0x17, 0xbe, 0xcf]) + count([0x94, 0x67, 0xbd]) + count([0xd6, 0x27, 0x28]) : 0);
  return {chart: el.dataset.chart, pixels, optimum: count([0x1f, 0x77, 0xb4]), maximum: count([0xff, 0x7f, 0x0e])};
})"#;
