//! Any bytes as the request head a scraper sends the live metrics endpoint: never a panic, one
//! well-formed answer, the figures only to a request that may have them, in the format its
//! `Accept` chose.

#![no_main]

use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "a-read-only-token-for-prometheus-scrapes";

fuzz_target!(|data: &[u8]| {
    let (token, head) = match data.split_first() {
        Some((b, rest)) if b & 1 == 1 => (Some(TOKEN), rest),
        Some((_, rest)) => (None, rest),
        None => (None, data),
    };
    let mut served = None;
    let out = iocurve_metrics::response(head, token, |format| {
        served = Some(format);
        match format {
            iocurve_metrics::Format::Text => b"iocurve_io_ops_total 1\n# EOF\n".to_vec(),
            iocurve_metrics::Format::Protobuf => vec![0x0a, 0x02, b'x', b'y'],
        }
    });
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let (resp_head, body) = (std::str::from_utf8(&out[..split]).expect("an ASCII head"), &out[split + 4..]);
    assert!(resp_head.starts_with("HTTP/1.1 "), "{resp_head}");
    let length: usize = resp_head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse().ok())
        .expect("a Content-Length");
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let is_head = line.split(|&b| b == b' ').next() == Some(b"HEAD".as_slice());
    assert_eq!(body.len(), if is_head { 0 } else { length }, "{resp_head}");
    if let Some(format) = served {
        assert!(line.starts_with(b"GET /metrics") || line.starts_with(b"HEAD /metrics"));
        assert!(resp_head.starts_with("HTTP/1.1 200"));
        // The answer says the format it is in, and it is the one the request's Accept chose.
        assert_eq!(format, iocurve_metrics::format(head));
        let protobuf = resp_head.contains(iocurve_metrics::proto::CONTENT_TYPE);
        assert_eq!(protobuf, format == iocurve_metrics::Format::Protobuf, "{resp_head}");
        if token.is_some() {
            let text = String::from_utf8_lossy(head);
            assert!(text.contains(&format!("Bearer {TOKEN}")), "served without the token");
        }
    } else {
        assert!(!resp_head.starts_with("HTTP/1.1 200"), "200 without the figures");
    }
});
