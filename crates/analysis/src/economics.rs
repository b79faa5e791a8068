//! What a measured throughput costs (issue 42): the figures tenders set side by side — cost and
//! power per TB and per 1,000 IOPS, IOPS per rack unit — and how many arrays a load needs when
//! each may run at only part of its maximum (headroom for a failed controller, growth,
//! rebuilds). Pure arithmetic; `iocurve size economics` prints it.

use serde::Serialize;

/// One array as offered: its throughput (measured or claimed) and whatever else is known of it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Offer {
    /// The array's maximum (or SLA maximum), IOPS.
    pub iops: f64,
    /// Price, in any currency.
    pub cost: Option<f64>,
    pub power_w: Option<f64>,
    /// Usable capacity, TB (decimal).
    pub capacity_tb: Option<f64>,
    pub rack_units: Option<f64>,
}

/// The figures an offer allows: each None when an input it needs was not given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Economics {
    pub cost_per_tb: Option<f64>,
    pub cost_per_kiops: Option<f64>,
    pub watts_per_tb: Option<f64>,
    pub watts_per_kiops: Option<f64>,
    pub iops_per_rack_unit: Option<f64>,
}

/// Arrays serving a load at no more than a share of each one's maximum, and what they take
/// together (None where the offer does not say).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fleet {
    pub arrays: u64,
    pub cost: Option<f64>,
    pub power_w: Option<f64>,
    pub rack_units: Option<f64>,
}

/// The most arrays [`fleet`] counts: beyond any data centre, so the inputs are wrong.
pub const MAX_ARRAYS: u64 = 1_000_000;

/// Cost and power per TB and per 1,000 IOPS, IOPS per rack unit.
pub fn economics(o: &Offer) -> Economics {
    let per = |v: Option<f64>, by: Option<f64>| v.zip(by).map(|(v, by)| v / by);
    let kiops = Some(o.iops / 1000.0);
    Economics {
        cost_per_tb: per(o.cost, o.capacity_tb),
        cost_per_kiops: per(o.cost, kiops),
        watts_per_tb: per(o.power_w, o.capacity_tb),
        watts_per_kiops: per(o.power_w, kiops),
        iops_per_rack_unit: o.rack_units.map(|ru| o.iops / ru),
    }
}

/// The arrays that carry `load_iops` with each at most `headroom` (a share, above 0 up to 1)
/// of its maximum: ⌈load / (headroom × maximum)⌉ (1,500,000 IOPS on arrays of 1,000,000 at
/// 50 %: 3). None when that is more than [`MAX_ARRAYS`].
pub fn fleet(o: &Offer, load_iops: f64, headroom: f64) -> Option<Fleet> {
    // A hair below whole numbers, as `raid_disks_for`: 3.0000000000000004 is 3 arrays.
    let n = (load_iops / (headroom * o.iops) - 1e-9).ceil().max(1.0);
    let times = |v: Option<f64>| v.map(|v| v * n);
    (n <= MAX_ARRAYS as f64).then(|| Fleet {
        arrays: n as u64,
        cost: times(o.cost),
        power_w: times(o.power_w),
        rack_units: times(o.rack_units),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figures_of_one_array_and_of_a_fleet() {
        let o = Offer {
            iops: 1_000_000.0,
            cost: Some(250_000.0),
            power_w: Some(1800.0),
            capacity_tb: Some(200.0),
            rack_units: Some(4.0),
        };
        let e = economics(&o);
        assert_eq!(e.cost_per_tb, Some(1250.0));
        assert_eq!(e.cost_per_kiops, Some(250.0));
        assert_eq!(e.watts_per_tb, Some(9.0));
        assert_eq!(e.watts_per_kiops, Some(1.8));
        assert_eq!(e.iops_per_rack_unit, Some(250_000.0));
        // 1.5 M IOPS, each array at most at half its maximum: 3 arrays.
        let f = fleet(&o, 1_500_000.0, 0.5).unwrap();
        assert_eq!(f, Fleet { arrays: 3, cost: Some(750_000.0), power_w: Some(5400.0), rack_units: Some(12.0) });
        // One IOPS more needs a fourth; a load below one array's share, one.
        assert_eq!(fleet(&o, 1_500_001.0, 0.5).unwrap().arrays, 4);
        assert_eq!(fleet(&o, 10.0, 0.5).unwrap().arrays, 1);
        // At full use, exactly the maximum is one array.
        assert_eq!(fleet(&o, 1_000_000.0, 1.0).unwrap().arrays, 1);
        // Only what was given: a throughput alone gives no cost nor power figures.
        let bare = Offer { iops: 1000.0, ..Default::default() };
        assert_eq!(economics(&bare), Economics::default());
        assert_eq!(
            fleet(&bare, 3000.0, 1.0).unwrap(),
            Fleet { arrays: 3, cost: None, power_w: None, rack_units: None }
        );
        // Absurd loads are no fleet (no u64::MAX arrays).
        assert_eq!(fleet(&bare, 1e300, 0.5), None);
    }
}
