use super::*;
use crate::testutil::{Bitset, Fit, Rng, chi_square};
use proptest::prelude::*;

const FIT_BLOCKS: u64 = 10_000;
const FIT_DRAWS: u64 = 1_000_000;

fn dist(text: &str) -> Distribution {
    text.parse().unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

fn access(text: &str, layout: Layout, blocks: u64) -> Access {
    Access::new(&dist(text), layout, blocks, 4096, 0x5eed).unwrap_or_else(|e| panic!("`{text}` on {blocks}: {e}"))
}

/// Counts per position of `draws` draws.
fn counts(a: &mut Access, draws: u64, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    let mut rand = || rng.next_u64();
    let mut counts = vec![0u64; a.blocks() as usize];
    for _ in 0..draws {
        counts[a.next(&mut rand) as usize] += 1;
    }
    counts
}

/// Chi-square of a million contiguous draws, position by position (which for zipf and pareto
/// without a centre is rank by rank), against `probability`.
fn fit(text: &str) -> Fit {
    let mut a = access(text, Layout::Contiguous, FIT_BLOCKS);
    let observed = counts(&mut a, FIT_DRAWS, 1);
    let expected: Vec<f64> = (0..FIT_BLOCKS).map(|i| a.probability(i) * FIT_DRAWS as f64).collect();
    let fit = chi_square(&observed, &expected);
    println!("fit {text}: chi2 {:.1} df {} p {:.4}", fit.statistic, fit.df, fit.p);
    fit
}

fn assert_fits(text: &str) {
    let fit = fit(text);
    assert!(fit.p > 0.01, "`{text}` does not fit its law: {fit:?}");
}

#[test]
fn zipf_0_8_fits() {
    assert_fits("zipf:0.8");
}

#[test]
fn zipf_1_2_fits() {
    assert_fits("zipf:1.2");
}

#[test]
fn pareto_0_9_fits() {
    assert_fits("pareto:0.9");
}

#[test]
fn normal_5_fits() {
    assert_fits("normal:5");
}

#[test]
fn other_shapes_fit() {
    // θ = 1 (the logarithmic hat), a steep zipf, pareto's other branch (hot end at v = 0), and a
    // bell wide enough to wrap around the circle several times.
    for text in ["zipf:1", "zipf:3", "pareto:0.2", "normal:60:0.9"] {
        assert_fits(text);
    }
}

#[test]
fn hot_bands_fit() {
    assert_fits("hotbands:50@10-20:20@60-65");
}

#[test]
fn zoned_fits_per_position_and_per_zone() {
    let text = "zoned:60/10:30/20:10/70";
    assert_fits(text);
    let mut a = access(text, Layout::Contiguous, FIT_BLOCKS);
    let observed = counts(&mut a, FIT_DRAWS, 2);
    let zone = |range: std::ops::Range<usize>| observed[range].iter().sum::<u64>();
    let per_zone = [zone(0..1000), zone(1000..3000), zone(3000..10_000)];
    let expected = [0.6, 0.3, 0.1].map(|share| share * FIT_DRAWS as f64);
    let fit = chi_square(&per_zone, &expected);
    println!("fit {text} per zone: {per_zone:?} chi2 {:.2} df {} p {:.4}", fit.statistic, fit.df, fit.p);
    assert!(fit.p > 0.01, "{fit:?}");
}

#[test]
fn the_fit_test_can_fail() {
    // Draws of zipf 1.2 judged by the probabilities of zipf 1.15: the test must notice.
    let mut a = access("zipf:1.2", Layout::Contiguous, FIT_BLOCKS);
    let observed = counts(&mut a, FIT_DRAWS, 1);
    let other = access("zipf:1.15", Layout::Contiguous, FIT_BLOCKS);
    let expected: Vec<f64> = (0..FIT_BLOCKS).map(|i| other.probability(i) * FIT_DRAWS as f64).collect();
    assert!(chi_square(&observed, &expected).p < 1e-6);
}

const LAWS: [&str; 10] = [
    "uniform",
    "zipf:0.8",
    "zipf:1.2:0.3",
    "zipf:1",
    "pareto:0.9",
    "pareto:0.2:0.5",
    "normal:5",
    "normal:100:0.999",
    "zoned:60/10:30/20:10/70",
    "hotbands:50@10-20:20@60-65",
];

#[test]
fn scattered_is_the_permutation_of_contiguous() {
    for text in LAWS {
        let n = 10_007;
        let mut contiguous = access(text, Layout::Contiguous, n);
        let mut scattered = access(text, Layout::Scattered, n);
        let pi = Permutation::new(n, 0x5eed);
        let (mut r1, mut r2) = (Rng::new(9), Rng::new(9));
        for _ in 0..20_000 {
            let c = contiguous.next(&mut || r1.next_u64());
            assert_eq!(scattered.next(&mut || r2.next_u64()), pi.apply(c), "{text}");
        }
        for j in (0..n).step_by(97) {
            assert_eq!(scattered.probability(pi.apply(j)), contiguous.probability(j), "{text}");
        }
    }
}

#[test]
fn probabilities_sum_to_one() {
    let laws = LAWS.iter().copied().chain(["zoned_abs:60/4k:40/4k", "zipf:10", "pareto:0.5"]);
    for text in laws {
        for n in [1u64, 2, 7, 1000, 100_000] {
            for layout in [Layout::Contiguous, Layout::Scattered] {
                let a = match Access::new(&dist(text), layout, n, 4096, 3) {
                    Ok(a) => a,
                    // Zones of a few percent have no position in a working set of a few blocks.
                    Err(e) if n < 10 && (e.contains("covers no position") || e.contains("zones need")) => continue,
                    Err(e) => panic!("`{text}` on {n}: {e}"),
                };
                let mut sum = crate::numeric::Sum::default();
                (0..n).for_each(|i| sum.add(a.probability(i)));
                assert!((sum.value() - 1.0).abs() < 1e-9, "`{text}` on {n} {layout}: {}", sum.value());
                assert_eq!(a.probability(n), 0.0);
            }
        }
    }
}

#[test]
fn centre_moves_the_hot_spot() {
    let n = 1000;
    let hottest = |text: &str| {
        let a = access(text, Layout::Contiguous, n);
        (0..n).max_by(|&x, &y| a.probability(x).total_cmp(&a.probability(y))).unwrap()
    };
    assert_eq!(hottest("zipf:1.2"), 0);
    assert_eq!(hottest("zipf:1.2:0.25"), 250);
    assert_eq!(hottest("zipf:1.2:1"), 0);
    assert_eq!(hottest("pareto:0.9:0.5"), 500);
    assert_eq!(hottest("pareto:0.1:0.5"), 500);
    assert_eq!(hottest("normal:5"), 500);
    assert!((99..=100).contains(&hottest("normal:5:0.1")));
    // The coldest zipf rank sits just before the hottest, wrapped.
    let a = access("zipf:1.2:0.25", Layout::Contiguous, n);
    let coldest = (0..n).min_by(|&x, &y| a.probability(x).total_cmp(&a.probability(y))).unwrap();
    assert_eq!(coldest, 249);
}

#[test]
fn same_seed_same_positions_other_seed_others() {
    let run = |text: &str, seed: u64| {
        let mut a = Access::new(&dist(text), Layout::Scattered, 1 << 20, 4096, seed).unwrap();
        let mut rng = Rng::new(77);
        (0..1000).map(|_| a.next(&mut || rng.next_u64())).collect::<Vec<_>>()
    };
    for text in LAWS {
        assert_eq!(run(text, 1), run(text, 1), "{text}");
        assert_ne!(run(text, 1), run(text, 2), "{text}");
    }
}

#[test]
fn new_refuses_what_cannot_be_placed() {
    let err =
        |text: &str, blocks: u64, unit: u64| Access::new(&dist(text), Layout::Contiguous, blocks, unit, 0).unwrap_err();
    let e = err("zoned_abs:60/20g:40/20g", 1_000_000, 4096);
    assert!(e.contains("need 40g") && e.contains("1000000 blocks of 4096 bytes"), "{e}");
    assert!(Access::new(&dist("zoned_abs:60/2g:40/2g"), Layout::Contiguous, 1 << 20, 4096, 0).is_ok());
    let e = err("zoned:60/10:30/20:10/70", 5, 4096);
    assert!(e.contains("zone 1 (60/10) covers no position") && e.contains("only 5 positions"), "{e}");
    let e = err("zoned_abs:50/1k:50/64k", 100, 4096);
    assert!(e.contains("zone 1 (50/1k) covers no position"), "{e}");
    let e = err("uniform", 0, 4096);
    assert!(e.contains("no blocks"), "{e}");
    let e = err("zoned_abs:100/4k", 10, 0);
    assert!(e.contains("block size"), "{e}");
    // A value built in code is checked too.
    let bad = Distribution { law: Law::Zipf { theta: 0.0 }, centre: None };
    assert!(Access::new(&bad, Layout::Contiguous, 10, 1, 0).unwrap_err().contains("zipf theta is 0"));
    let bad = Distribution { law: Law::Zoned(vec![]), centre: None };
    assert!(Access::new(&bad, Layout::Contiguous, 10, 1, 0).unwrap_err().contains("no zones"));
    // Hot bands always have a position, however small the working set.
    assert!(Access::new(&dist("hotbands:50@10-11:20@60-61"), Layout::Contiguous, 1, 1, 0).is_ok());
}

#[test]
fn extremes_stay_in_range() {
    let laws = [
        "zipf:10",
        "zipf:0.000001",
        "zipf:1:0.999",
        "pareto:0.999999",
        "pareto:0.000001:0.999",
        "normal:100:0.999",
        "normal:0.0001",
        "normal:100:1",
        "hotbands:100@99.9-100",
    ];
    for text in laws {
        for n in [1u64, 2, 3, (1 << 40) + 7, (1 << 63) + 3] {
            for layout in [Layout::Contiguous, Layout::Scattered] {
                let mut a = access(text, layout, n);
                let mut rng = Rng::new(n);
                for _ in 0..2000 {
                    assert!(a.next(&mut || rng.next_u64()) < n, "`{text}` on {n}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn next_stays_below_blocks(
        d in crate::text::tests::distribution(),
        n in prop_oneof![Just(1u64), Just(2), Just(3), Just((1 << 40) + 7), 1u64..1_000_000, 1u64..=u64::MAX],
        scattered in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let layout = if scattered { Layout::Scattered } else { Layout::Contiguous };
        let mut a = match Access::new(&d, layout, n, 4096, seed) {
            Ok(a) => a,
            Err(e) => {
                prop_assert!(e.contains("covers no position") || e.contains("zones need"), "{d}: {e}");
                return Ok(());
            }
        };
        let mut rng = Rng::new(seed);
        for _ in 0..200 {
            let p = a.next(&mut || rng.next_u64());
            prop_assert!(p < n, "{} on {}: {}", d, n, p);
        }
    }
}

/// Distinct positions a million draws touch on 2^24 blocks, against `expected_distinct`, in both
/// layouts (the permutation must not merge positions).
fn distinct(text: &str) {
    const BLOCKS: u64 = 1 << 24;
    const DRAWS: u64 = 1_000_000;
    let expected = access(text, Layout::Contiguous, BLOCKS).expected_distinct(DRAWS);
    for layout in [Layout::Contiguous, Layout::Scattered] {
        let mut a = access(text, layout, BLOCKS);
        // Independent draws for each layout: each count is checked on its own.
        let mut rng = Rng::new(if layout == Layout::Scattered { 5 } else { 4 });
        let mut touched = Bitset::new(BLOCKS);
        for _ in 0..DRAWS {
            touched.insert(a.next(&mut || rng.next_u64()));
        }
        let got = touched.count() as f64;
        println!(
            "distinct {text} {layout}: {got} vs expected {expected:.1} ({:+.3} %)",
            100.0 * (got / expected - 1.0)
        );
        assert!((got - expected).abs() <= 0.05 * expected, "`{text}` {layout}: {got} vs {expected}");
    }
}

#[test]
fn distinct_zipf_0_8() {
    distinct("zipf:0.8");
}

#[test]
fn distinct_zipf_1_2() {
    distinct("zipf:1.2");
}

#[test]
fn distinct_pareto_0_9() {
    distinct("pareto:0.9");
}

#[test]
fn distinct_normal_5() {
    distinct("normal:5");
}

#[test]
fn distinct_zoned_and_bands() {
    distinct("zoned:60/10:30/20:10/70");
    distinct("hotbands:50@10-20:20@60-65");
    distinct("uniform");
}

/// `cargo test --release -p iocurve-access -- --ignored --nocapture`: nanoseconds per `next`.
#[test]
#[ignore = "microbenchmark; run in release"]
fn next_cost() {
    const CALLS: u32 = 10_000_000;
    let blocks = 1u64 << 30;
    let mut rng = Rng::new(1);
    let start = std::time::Instant::now();
    let mut acc = 0u64;
    for _ in 0..CALLS {
        acc ^= rng.next_u64();
    }
    std::hint::black_box(acc);
    let base = start.elapsed().as_secs_f64() * 1e9 / f64::from(CALLS);
    println!("random source alone: {base:.2} ns/call");
    let laws = [
        "uniform",
        "zipf:0.8",
        "zipf:1.2",
        "pareto:0.9",
        "normal:5",
        "zoned:60/10:30/20:10/70",
        "hotbands:50@10-20:20@60-65",
    ];
    for text in laws {
        for layout in [Layout::Contiguous, Layout::Scattered] {
            let mut a = access(text, layout, blocks);
            let mut rand = || rng.next_u64();
            let start = std::time::Instant::now();
            let mut acc = 0u64;
            for _ in 0..CALLS {
                acc ^= a.next(&mut rand);
            }
            std::hint::black_box(acc);
            let ns = start.elapsed().as_secs_f64() * 1e9 / f64::from(CALLS);
            println!("{text:<28} {layout:<10}: {ns:6.2} ns/call");
        }
    }
}
