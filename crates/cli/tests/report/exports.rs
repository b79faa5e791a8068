//! Issue 43, part 5: every exported chart carries its context. An SVG names its run, chart,
//! workloads and (for a step's charts) step in `<title>`, `<desc>` and `<metadata>` (JSON); a
//! PNG the same in text chunks (tEXt, or iTXt where the text is not Latin-1), read back here
//! byte by byte with their CRCs checked.

use serde_json::Value;

use crate::browser::Browser;
use crate::util::*;

/// A label with markup, an ampersand, quotes, a non-Latin-1 sign and another script.
const LABEL: &str = "7 of 8 <ctrl> & \"µ\" 控制器";

#[test]
fn exported_charts_carry_their_run_workload_and_step() {
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "64m", "--workload", "random-read", "--ramp", "1,2"];
    let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--label", LABEL]));
    assert!(o.status.success(), "{}", stderr(&o));
    super::report(dir.path(), &["1", "-o", "one.html"]);
    let page = dir.path().join("one.html");
    let mut b = Browser::launch();
    b.open(&page);
    super::assert_clean(&b, &page);

    let step = b.eval("document.querySelector('.step-select').selectedOptions[0].textContent");
    let step = step.as_str().unwrap().to_string();
    assert!(step.ends_with("worker") || step.ends_with("workers"), "{step}");
    let run_title = format!("run 1 \"{LABEL}\"");
    for chart in ["throughput", "timeline"] {
        let svg = b.eval(&format!(
            "(() => {{ const text = iocurveExport.svg(document.querySelector('[data-chart={chart}]'));
               const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
               const one = (s) => {{ const e = doc.querySelector(s); return e ? e.textContent : null; }};
               return {{ error: one('parsererror'), title: one('svg > title'), desc: one('svg > desc'), metadata: one('svg > metadata') }}; }})()"
        ));
        assert_eq!(svg["error"], Value::Null, "{chart}: the SVG parses as XML: {svg}");
        let title = svg["title"].as_str().unwrap();
        let desc = svg["desc"].as_str().unwrap();
        assert!(title.starts_with(&format!("iocurve {run_title} — random read, 4k, qd 1 — {chart}")), "{title}");
        assert!(!title.contains('\n'), "one line: {title}");
        for want in
            [run_title.as_str(), "random-read", "random, 100 % read, 4k, qd 1", "working set backend", "back-end "]
        {
            assert!(desc.contains(want), "{chart}: {want:?} in the SVG's desc: {desc}");
        }
        let meta: Value = serde_json::from_str(svg["metadata"].as_str().unwrap()).expect("the metadata is JSON");
        assert_context(chart, &meta, if chart == "timeline" { Some(&step) } else { None });
        if chart == "timeline" {
            assert!(title.ends_with(&format!(" — {step}")) && desc.contains(&step), "the step: {title} / {desc}");
        }

        let png = b.eval(&format!(
            "(async () => {{ const url = await iocurveExport.png(document.querySelector('[data-chart={chart}]'));
               const img = new Image(); img.src = url; await img.decode(); return [url, img.naturalWidth, img.naturalHeight]; }})()"
        ));
        assert!(png[1].as_u64().unwrap() > 0 && png[2].as_u64().unwrap() > 0, "{chart}: the PNG decodes");
        let url = png[0].as_str().unwrap();
        let bytes = base64(url.strip_prefix("data:image/png;base64,").expect("a PNG data URL"));
        let text = png_text(&bytes);
        let get = |k: &str| text.iter().find(|(key, _, _)| key == k).unwrap_or_else(|| panic!("{k} in {text:?}"));
        assert_eq!(get("Title").1, title, "{chart}: the PNG's title is the SVG's");
        assert_eq!(get("Description").1, desc);
        assert!(get("Software").1.starts_with("iocurve "), "{:?}", get("Software"));
        assert!(text.iter().any(|(k, _, _)| k == "Source"));
        // Text that is not Latin-1 (the label's µ is, its 控制器 is not) goes into iTXt.
        assert_eq!(get("Title").2, "iTXt");
        assert_eq!(get("Software").2, "tEXt", "Latin-1 text stays tEXt");
        let comment: Value = serde_json::from_str(&get("Comment").1).unwrap();
        assert_eq!(comment, meta, "the PNG's JSON is the SVG's");
    }
    assert!(b.errors().is_empty(), "{:#?}", b.errors());
}

/// The JSON context of an exported chart: the run with its facts, the chart, each series with
/// its parameters, and the step of a step's chart.
fn assert_context(chart: &str, meta: &Value, step: Option<&str>) {
    assert_eq!(meta["chart"], chart, "{meta}");
    assert_eq!(meta["pattern"], "random read, 4k, qd 1", "{meta}");
    let run = &meta["runs"][0];
    assert_eq!(run["label"], LABEL, "{meta}");
    assert_eq!(run["id"], 1);
    for key in ["started", "host", "backend", "version", "plan"] {
        assert!(run[key].as_str().is_some_and(|v| !v.is_empty()), "{key}: {meta}");
    }
    let series = meta["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "frontend and backend: {meta}");
    for s in series {
        assert_eq!(
            (&s["kind"], &s["bs"], &s["qd"], &s["read_pct"]),
            (&"random".into(), &"4k".into(), &1.into(), &100.into())
        );
        assert!(s["workload"].as_str().unwrap().contains("random-read"), "{s}");
    }
    match step {
        Some(step) => assert_eq!(meta["step"]["name"], step, "{meta}"),
        None => assert_eq!(meta["step"], Value::Null, "{meta}"),
    }
}

/// Standard base64 (RFC 4648, with padding) decoded.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for quad in digits.chunks(4) {
        let n = quad.iter().enumerate().fold(0u32, |n, (i, &d)| n | (u32::from(d) << (18 - 6 * i)));
        out.extend(n.to_be_bytes()[1..quad.len()].iter());
    }
    out
}

/// CRC-32 (ISO 3309, reflected, 0xEDB88320), bit by bit: a second implementation beside the
/// report's table-driven one.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// The text chunks of a PNG as (keyword, text, chunk type), every chunk's CRC checked and the
/// text chunks found between IHDR and IDAT.
fn png_text(png: &[u8]) -> Vec<(String, String, String)> {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the PNG signature");
    let (mut at, mut types, mut text) = (8, Vec::new(), Vec::new());
    while at < png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = String::from_utf8(png[at + 4..at + 8].to_vec()).unwrap();
        let data = &png[at + 8..at + 8 + len];
        let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
        assert_eq!(crc, crc32(&png[at + 4..at + 8 + len]), "the CRC of chunk {kind} at {at}");
        let nul = |d: &[u8]| d.iter().position(|&b| b == 0).expect("a keyword ends with NUL");
        let latin1 = |d: &[u8]| d.iter().map(|&b| b as char).collect::<String>();
        match kind.as_str() {
            "tEXt" => {
                let k = nul(data);
                text.push((latin1(&data[..k]), latin1(&data[k + 1..]), kind.clone()));
            }
            "iTXt" => {
                let k = nul(data);
                assert_eq!(&data[k + 1..k + 3], [0, 0], "uncompressed");
                let lang = k + 3 + nul(&data[k + 3..]);
                let translated = lang + 1 + nul(&data[lang + 1..]);
                let t = String::from_utf8(data[translated + 1..].to_vec()).expect("iTXt text is UTF-8");
                text.push((latin1(&data[..k]), t, kind.clone()));
            }
            _ => {}
        }
        types.push(kind);
        at += 12 + len;
    }
    assert_eq!(types.first().map(String::as_str), Some("IHDR"), "{types:?}");
    assert_eq!(types.last().map(String::as_str), Some("IEND"), "{types:?}");
    let first_data = types.iter().position(|t| t == "IDAT").expect("image data");
    assert!(types[1..first_data].iter().filter(|t| *t == "tEXt" || *t == "iTXt").count() == 5, "{types:?}");
    text
}
