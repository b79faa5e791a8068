//! Regressions of the `metrics` subject.

use crate::metrics::free_port;
use crate::regression::agents::{Flood, networks};
use crate::util::cluster::{AgentProc, certs};

/// A scrape of `addr` with `token`: its HTTP status (0 when the connection was closed
/// without one) and how long it took.
fn scrape(addr: &str, token: &str) -> (u16, std::time::Duration) {
    use std::io::{Read, Write};
    let t = std::time::Instant::now();
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return (0, t.elapsed()) };
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    if write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n").is_err() {
        return (0, t.elapsed());
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    (out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), t.elapsed())
}

/// Issue 35, finding 2: 4 addresses × 2 silent connections filled the metrics endpoint's 8
/// places and every scraper, token and all, was closed on. The endpoint has a door of its own
/// now (the agent's kind, with its own caps): under that flood, and one from 16 more /24s, held
/// up by opening every cut connection again, every scrape with the token is answered.
#[test]
fn regression_an_idle_flood_does_not_keep_scrapes_from_the_metrics_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let token = dir.path().join("metrics-token");
    let secret = "a-read-only-token-for-prometheus-scrapes";
    std::fs::write(&token, secret).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let d = dir.path().join("a");
    std::fs::create_dir(&d).unwrap();
    let m = format!("127.0.0.1:{}", free_port());
    let extra = ["--metrics", m.as_str(), "--metrics-token-file", token.to_str().unwrap()];
    let _agent = AgentProc::start(&d, &c, &format!("{}/*", d.display()), &extra);
    let since = std::time::Instant::now();
    while scrape(&m, secret).0 != 200 {
        assert!(since.elapsed() < std::time::Duration::from_secs(30), "the endpoint answers");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let four: Vec<_> = (2..6).map(|i| std::net::Ipv4Addr::new(127, 0, 0, i)).collect();
    let same_net = Flood::start(&m, four, 2);
    let many_nets = Flood::start(&m, networks(50, 16), 2);
    same_net.wait_opened();
    many_nets.wait_opened();
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..20 {
        let (code, took) = scrape(&m, secret);
        assert_eq!(code, 200, "scrape {i} under the flood");
        slowest = slowest.max(took);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    eprintln!("20 scrapes under a flood of 40 idle connections from 20 addresses: the slowest took {slowest:?}");
    let (a, b) = (same_net.stop(), many_nets.stop());
    assert!(a > 0 && b > 0, "connections opened again: {a}, {b}");
}
