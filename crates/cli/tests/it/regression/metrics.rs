//! Regressions of the `metrics` subject.
