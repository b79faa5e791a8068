//! `[claims.NAME]`: each claim names a workload of the plan by its name there and gives at least
//! one figure, each above zero; it goes with the label that workload runs as (a `--bs` override
//! renames the workload, not its claim). A claim of a workload `--workload` left out is dropped.

use super::Resolver;
use crate::claims::Claim;
use crate::error::PlanError;
use crate::locate::Seg;

impl Resolver<'_> {
    /// `workloads`: each workload's name in the plan, its label, and whether it runs.
    pub(super) fn claims(&self, workloads: &[(&str, &str, bool)]) -> Result<Vec<Claim>, PlanError> {
        let mut out = Vec::new();
        for (name, keys) in self.file.claims.iter().flatten() {
            let at = |k: Option<&'static str>| {
                let mut path = vec![Seg::Key("claims"), Seg::Key(name)];
                path.extend(k.map(Seg::Key));
                path
            };
            let key = |k: Option<&str>| format!("claims.{name}{}", k.map(|k| format!(".{k}")).unwrap_or_default());
            let Some(&(_, label, runs)) = workloads.iter().find(|(n, _, _)| n == name) else {
                let names: Vec<&str> = workloads.iter().map(|(n, _, _)| *n).collect();
                let hint = match crate::error::did_you_mean(name, names.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`? "),
                    None => String::new(),
                };
                return Err(self.err(
                    &at(None),
                    key(None),
                    format!(
                        "the claim names workload `{name}`, which the plan does not have: {hint}a claim names a workload as the plan's `name` does ({})",
                        names.join(", ")
                    ),
                ));
            };
            if keys.figures().iter().all(|(_, v)| v.is_none()) {
                return Err(self.err(
                    &at(None),
                    key(None),
                    "the claim gives no figure: give `iops`, `mbps` and/or `latency_ms`, e.g. iops = 500000 and latency_ms = 1",
                ));
            }
            for (k, v) in keys.figures() {
                if let Some(v) = v.filter(|v| !(*v > 0.0 && v.is_finite())) {
                    return Err(self.err(
                        &at(Some(k)),
                        key(Some(k)),
                        format!("{k} is {v}: a claimed figure is a positive number, e.g. {k} = {}", example(k)),
                    ));
                }
            }
            if runs {
                out.push(Claim {
                    workload: label.to_string(),
                    iops: keys.iops,
                    mbps: keys.mbps,
                    latency_ms: keys.latency_ms,
                });
            }
        }
        Ok(out)
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "iops" => "500000",
        "mbps" => "12000",
        _ => "1",
    }
}

#[cfg(test)]
mod tests {
    use crate::{Overrides, WorkloadKeys, parse_str};

    const PLAN: &str = "[[workloads]]\nname = \"rr-4k\"\nbs = \"4k\"\n\n[[workloads]]\nname = \"sw\"\npattern = \"sequential\"\n\n[claims.rr-4k]\niops = 500000\nlatency_ms = 1\n";

    #[test]
    fn claims_go_with_the_workloads_label() {
        let p = parse_str(PLAN, "p.toml", &Overrides::default()).unwrap();
        assert_eq!(p.claims.len(), 1);
        let c = &p.claims[0];
        assert_eq!((c.workload.as_str(), c.iops, c.mbps, c.latency_ms), ("rr-4k", Some(500_000.0), None, Some(1.0)));
        // --bs renames the workload: its claim follows it.
        let o = Overrides {
            keys: WorkloadKeys { bs: Some(crate::BlockSizeSpec::One(8192)), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(parse_str(PLAN, "p.toml", &o).unwrap().claims[0].workload, "rr-8k");
        // A workload left out by --workload: its claim too, without an error.
        let o = Overrides { workload_filter: Some("sw".into()), ..Default::default() };
        assert!(parse_str(PLAN, "p.toml", &o).unwrap().claims.is_empty());
        // Stored with the plan (JSON) and read back.
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["claims"][0]["workload"], "rr-4k");
        assert!(v["claims"][0].get("mbps").is_none());
    }

    #[test]
    fn bad_claims_say_where_and_what() {
        let bad = |text: &str| parse_str(&format!("{PLAN}{text}"), "p.toml", &Overrides::default()).unwrap_err();
        let e = bad("[claims.rr-4kk]\niops = 1\n");
        assert_eq!((e.line, e.key.as_deref()), (Some(12), Some("claims.rr-4kk")), "{e}");
        assert!(e.message.contains("did you mean `rr-4k`") && e.message.contains("(rr-4k, sw)"), "{e}");
        let e = bad("[claims.sw]\n");
        assert_eq!((e.line, e.key.as_deref()), (Some(12), Some("claims.sw")), "{e}");
        assert!(e.message.contains("no figure"), "{e}");
        for (text, key) in
            [("iops = 0", "iops"), ("mbps = -5", "mbps"), ("latency_ms = nan", "latency_ms"), ("iops = inf", "iops")]
        {
            let e = bad(&format!("[claims.sw]\n{text}\n"));
            assert_eq!((e.line, e.key.clone()), (Some(13), Some(format!("claims.sw.{key}"))), "{e}");
            assert!(e.message.contains("positive number"), "{e}");
        }
        let e = bad("[claims.sw]\niops = 1\nlatency = 1\n");
        assert_eq!(e.line, Some(14), "{e}");
        assert!(e.message.contains("unknown key `latency`") && e.message.contains("latency_ms"), "{e}");
    }
}
