//! Prometheus' protobuf exposition format (`io.prometheus.client.MetricFamily`, length-delimited):
//! the only format a Prometheus scrapes native histograms in. The messages are declared here
//! with prost's derive from the field numbers of client_model's `metrics.proto` (proto2): only
//! the fields iocurve writes. Every scalar is `optional`, as in proto2, so that a zero is sent
//! when it is meant (a zero threshold, an empty count) rather than left out.

use prost::Message;

/// The `Content-Type` of an answer in this format (and what a scraper's `Accept` asks for).
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

#[derive(Clone, PartialEq, Message)]
pub struct LabelPair {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Gauge {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Counter {
    #[prost(double, optional, tag = "1")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Bucket {
    /// Cumulative, in increasing order of `upper_bound`.
    #[prost(uint64, optional, tag = "1")]
    pub cumulative_count: Option<u64>,
    /// Inclusive.
    #[prost(double, optional, tag = "2")]
    pub upper_bound: Option<f64>,
}

/// Consecutive native buckets: `offset` from the end of the previous span (from 0 for the
/// first), `length` buckets.
#[derive(Clone, PartialEq, Message)]
pub struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    pub offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    pub length: Option<u32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    pub sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    pub sample_sum: Option<f64>,
    /// The classic buckets.
    #[prost(message, repeated, tag = "3")]
    pub bucket: Vec<Bucket>,
    /// Native: every power of two is divided into 2^schema buckets.
    #[prost(sint32, optional, tag = "5")]
    pub schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    pub zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    pub zero_count: Option<u64>,
    #[prost(message, repeated, tag = "12")]
    pub positive_span: Vec<BucketSpan>,
    /// Each bucket's count minus the previous bucket's (the first: minus 0).
    #[prost(sint64, repeated, packed = "true", tag = "13")]
    pub positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Metric {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    pub counter: Option<Counter>,
    #[prost(message, optional, tag = "7")]
    pub histogram: Option<Histogram>,
}

/// `MetricType` of metrics.proto.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum MetricType {
    Counter = 0,
    Gauge = 1,
    Histogram = 4,
}

#[derive(Clone, PartialEq, Message)]
pub struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub help: Option<String>,
    #[prost(enumeration = "MetricType", optional, tag = "3")]
    pub r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    pub metric: Vec<Metric>,
}

/// Families as a scrape answer: each one length-delimited (a varint length, then the message).
pub fn delimited(families: &[MetricFamily]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in families {
        // Encoding into a Vec grows it as needed and cannot fail.
        f.encode_length_delimited(&mut out).expect("a Vec takes any length");
    }
    out
}
