use super::*;
use proptest::prelude::*;

fn err(text: &str) -> String {
    match text.parse::<Distribution>() {
        Ok(d) => panic!("`{text}` parsed as {d:?}"),
        Err(e) => e,
    }
}

/// The error for `text` mentions every one of `parts`.
fn refused(text: &str, parts: &[&str]) {
    let e = err(text);
    for part in parts {
        assert!(e.contains(part), "error for `{text}` lacks `{part}`: {e}");
    }
}

#[test]
fn reads_every_law() {
    let d = |text: &str| text.parse::<Distribution>().unwrap();
    assert_eq!(d("uniform"), Distribution { law: Law::Uniform, centre: None });
    assert_eq!(d(" random "), Distribution { law: Law::Uniform, centre: None });
    assert_eq!(d("zipf:1.2"), Distribution { law: Law::Zipf { theta: 1.2 }, centre: None });
    assert_eq!(d("Zipf:1:0.25"), Distribution { law: Law::Zipf { theta: 1.0 }, centre: Some(0.25) });
    assert_eq!(d("pareto:0.9"), Distribution { law: Law::Pareto { h: 0.9 }, centre: None });
    assert_eq!(d("normal:5:0"), Distribution { law: Law::Normal { sigma_pct: 5.0 }, centre: Some(0.0) });
    let zones = vec![
        Zone { access_pct: 60.0, range_pct: 10.0 },
        Zone { access_pct: 30.0, range_pct: 20.0 },
        Zone { access_pct: 10.0, range_pct: 70.0 },
    ];
    assert_eq!(d("zoned:60/10:30/20:10/70").law, Law::Zoned(zones));
    let abs = vec![ZoneAbs { access_pct: 60.0, bytes: 20 << 30 }, ZoneAbs { access_pct: 40.0, bytes: 4096 }];
    assert_eq!(d("zoned_abs:60/20GiB:40/4096").law, Law::ZonedAbs(abs));
    let bands = vec![Band { access_pct: 50.0, start_pct: 0.0, end_pct: 10.0 }];
    assert_eq!(d("hotbands:50@0-10").law, Law::HotBands(bands));
    // Decimal shares that do not add up exactly in binary are accepted.
    assert!("zoned:33.3/10:33.3/10:33.4/80".parse::<Distribution>().is_ok());
    assert!(d("uniform").is_uniform() && !d("zipf:1").is_uniform());
}

#[test]
fn sizes_take_binary_suffixes() {
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size("4k"), Ok(4096));
    assert_eq!(parse_size("20g"), Ok(20 << 30));
    assert_eq!(parse_size("20G"), Ok(20 << 30));
    assert_eq!(parse_size("20GiB"), Ok(20 << 30));
    assert_eq!(parse_size("2tb"), Ok(2 << 40));
    assert_eq!(parse_size("512b"), Ok(512));
    assert!(parse_size("20x").is_err());
    assert!(parse_size("g").is_err());
    assert!(parse_size("16777216t").unwrap_err().contains("too large"));
    assert_eq!(fmt_size(20 << 30), "20g");
    assert_eq!(fmt_size(4097), "4097");
    assert_eq!(fmt_size(3 << 10), "3k");
}

#[test]
fn layouts_read_and_write() {
    assert_eq!("scattered".parse::<Layout>(), Ok(Layout::Scattered));
    assert_eq!(" Contiguous".parse::<Layout>(), Ok(Layout::Contiguous));
    assert_eq!(Layout::Scattered.to_string(), "scattered");
    assert_eq!(Layout::default(), Layout::Contiguous);
    let e = "striped".parse::<Layout>().unwrap_err();
    assert!(e.contains("striped") && e.contains("contiguous or scattered"), "{e}");
}

#[test]
fn bad_parameters_say_what_is_allowed() {
    refused("zipf:0", &["zipf theta is 0", "above 0 up to 10", "zipf:1.2"]);
    refused("zipf:-1", &["zipf theta is -1", "above 0 up to 10"]);
    refused("zipf:abc", &["`abc` is not a number", "above 0 up to 10"]);
    refused("zipf", &["zipf needs a theta", "above 0 up to 10"]);
    refused("zipf:", &["zipf needs a theta"]);
    refused("zipf:NaN", &["zipf theta is NaN"]);
    refused("zipf:inf", &["zipf theta is inf"]);
    refused("pareto:1", &["pareto h is 1", "above 0 and below 1", "pareto:0.9"]);
    refused("pareto:0", &["pareto h is 0", "above 0 and below 1"]);
    refused("normal:0", &["normal sigma is 0", "above 0 up to 100"]);
    refused("normal:101", &["normal sigma is 101", "above 0 up to 100"]);
    refused("zipf:1.2:1.5", &["zipf centre is 1.5", "from 0 to 1", "zipf:1.2:0.25"]);
    refused("normal:5:-0.1", &["normal centre is -0.1"]);
    refused("zipf:1.2:x", &["centre `x` is not a number"]);
    refused("zipf:1.2:0.5:3", &["at most two fields"]);
    refused("uniform:3", &["uniform takes no parameters"]);
    refused(
        "gamma:1",
        &["unknown distribution `gamma`", "uniform", "zipf", "pareto", "normal", "zoned_abs", "hotbands"],
    );
    refused("", &["no distribution given", "zipf"]);
}

#[test]
fn bad_zones_say_what_is_wrong() {
    refused("zoned:60/10:30/20", &["accesses add up to 90 percent", "must add up to 100"]);
    refused("zoned:60/10:40/95", &["ranges add up to 105 percent", "at most 100"]);
    refused("zoned:", &["zoned has no zones", "at least one"]);
    refused("zoned", &["zoned has no zones"]);
    let many = format!("zoned:{}", vec!["1/0.1"; 257].join(":"));
    refused(&many, &["257 zones", "at most 256"]);
    let max = format!("zoned:{}", ["0.5/0.25"; 200].join(":"));
    assert!(max.parse::<Distribution>().is_ok());
    refused("zoned:60/10:40/90:0.5", &["zoned takes no centre", "zipf, pareto and normal"]);
    refused("zoned:60:40/90", &["zoned takes no centre"]);
    refused("zoned:60/10:x/90", &["access `x` is not a number"]);
    refused("zoned:60/10:40/abc", &["range `abc` is not a number"]);
    refused("zoned:60/10::40/90", &["item 2 is empty"]);
    refused("zoned:110/10:-10/90", &["access is 110", "from 0 to 100"]);
    refused("zoned:100/0", &["range is 0", "above 0"]);
    refused("zoned:NaN/10:100/90", &["access is NaN"]);
    refused("zoned:60/10:40/90,50/50:50/50", &["commas", "not supported"]);
    refused("zoned_abs:60/20x", &["size `20x` is not a size", "k, m, g or t"]);
    refused("zoned_abs:60/20g:30/1g", &["accesses add up to 90 percent"]);
    refused("zoned_abs:100/0", &["size is 0 bytes"]);
    refused("zoned_abs:50/16777215t:50/16777215t", &["more than 2^64 bytes"]);
}

#[test]
fn bad_bands_say_what_is_wrong() {
    refused("hotbands:120@1-2", &["share is 120 percent", "above 0 up to 100"]);
    refused("hotbands:60@0-10:50@20-30", &["shares add up to 110 percent", "at most 100"]);
    refused("hotbands:10@5-20:20@10-30", &["10@5-20 and 20@10-30 overlap"]);
    refused("hotbands:20@10-30:10@5-20", &["overlap"]);
    refused("hotbands:10@5-5", &["10@5-5", "empty"]);
    refused("hotbands:10@6-5", &["empty or reversed"]);
    refused("hotbands:10@50-101", &["outside 0-100"]);
    refused("hotbands:0@5-10", &["share is 0 percent"]);
    refused("hotbands:10@5", &["no start-end range"]);
    refused("hotbands:10@5-20:0.5", &["hotbands takes no centre"]);
    refused("hotbands", &["hotbands has no bands"]);
    // Bands that only touch do not overlap.
    assert!("hotbands:10@0-10:10@10-20".parse::<Distribution>().is_ok());
}

#[test]
fn canonical_forms() {
    for (text, canonical) in [
        ("random", "uniform"),
        (" ZIPF : 1.20 ", "zipf:1.2"),
        ("zipf:1.2:0.25", "zipf:1.2:0.25"),
        ("normal:5.0", "normal:5"),
        ("zoned_abs:60/20GiB:40/4097", "zoned_abs:60/20g:40/4097"),
        ("hotbands:50@0-10:20@40-45", "hotbands:50@0-10:20@40-45"),
    ] {
        assert_eq!(text.parse::<Distribution>().unwrap().to_string(), canonical);
    }
}

/// Integer percentages that add up to `total`, in `parts` pieces (zeros allowed).
fn split_percent(parts: usize, total: u32) -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec(0..=total, parts - 1).prop_map(move |mut cuts| {
        cuts.push(0);
        cuts.push(total);
        cuts.sort_unstable();
        cuts.windows(2).map(|w| f64::from(w[1] - w[0])).collect()
    })
}

/// `count` positive percentages adding up to at most 100.
fn positive_percents(count: usize) -> impl Strategy<Value = Vec<f64>> {
    proptest::sample::subsequence((1..=100u32).collect::<Vec<_>>(), count).prop_map(|ends| {
        std::iter::once(0).chain(ends).collect::<Vec<_>>().windows(2).map(|w| f64::from(w[1] - w[0])).collect()
    })
}

fn zoned() -> impl Strategy<Value = Law> {
    (1usize..=8).prop_flat_map(|k| (split_percent(k, 100), positive_percents(k))).prop_map(|(access, range)| {
        Law::Zoned(
            access.into_iter().zip(range).map(|(access_pct, range_pct)| Zone { access_pct, range_pct }).collect(),
        )
    })
}

fn zoned_abs() -> impl Strategy<Value = Law> {
    (1usize..=8).prop_flat_map(|k| (split_percent(k, 100), proptest::collection::vec(1u64..u64::MAX / 16, k))).prop_map(
        |(access, sizes)| {
            let zones = access.into_iter().zip(sizes).map(|(access_pct, bytes)| ZoneAbs { access_pct, bytes });
            Law::ZonedAbs(zones.collect())
        },
    )
}

fn hot_bands() -> impl Strategy<Value = Law> {
    (1usize..=6)
        .prop_flat_map(|k| {
            (proptest::sample::subsequence((0..=100u32).collect::<Vec<_>>(), 2 * k), positive_percents(k))
        })
        .prop_map(|(points, shares)| {
            let bands = points.chunks(2).zip(shares).map(|(p, access_pct)| Band {
                access_pct,
                start_pct: f64::from(p[0]),
                end_pct: f64::from(p[1]),
            });
            bands.collect::<Vec<_>>()
        })
        // Bands may be written in any order.
        .prop_shuffle()
        .prop_map(Law::HotBands)
}

/// Any valid distribution, with arbitrary (not only round) parameters.
pub(crate) fn distribution() -> impl Strategy<Value = Distribution> {
    let centre = proptest::option::of(0.0..=1.0f64);
    prop_oneof![
        Just(Distribution { law: Law::Uniform, centre: None }),
        (1e-6..=10.0f64, centre.clone()).prop_map(|(theta, centre)| Distribution { law: Law::Zipf { theta }, centre }),
        (1e-6..1.0f64, centre.clone()).prop_map(|(h, centre)| Distribution { law: Law::Pareto { h }, centre }),
        (1e-3..=100.0f64, centre)
            .prop_map(|(sigma_pct, centre)| Distribution { law: Law::Normal { sigma_pct }, centre }),
        zoned().prop_map(|law| Distribution { law, centre: None }),
        zoned_abs().prop_map(|law| Distribution { law, centre: None }),
        hot_bands().prop_map(|law| Distribution { law, centre: None }),
    ]
}

proptest! {
    #[test]
    fn display_parses_back_to_the_same_value(d in distribution()) {
        prop_assert!(validate(&d).is_ok(), "generator made an invalid value: {:?}", d);
        let text = d.to_string();
        let back: Distribution = text.parse().map_err(|e| TestCaseError::fail(format!("`{text}`: {e}")))?;
        prop_assert_eq!(back, d);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = text.parse::<Distribution>();
        let _ = text.parse::<Layout>();
    }

    #[test]
    fn near_miss_text_never_panics(text in "(zipf|pareto|normal|uniform|zoned|zoned_abs|hotbands)?[:/@0-9.eE+kKgGiBt,-]{0,24}") {
        if let Ok(d) = text.parse::<Distribution>() {
            let canonical = d.to_string();
            prop_assert_eq!(canonical.parse::<Distribution>(), Ok(d));
        }
    }
}
