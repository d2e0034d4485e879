//! Metric families encoded from values read at scrape time (a coordinator
//! snapshot, `/proc`), for the collectors behind `/metrics`. The values
//! already exist, so nothing is kept in prometheus-client's live metrics:
//! each family is written through its encoder from constants
//! (`ConstGauge`, `ConstCounter`, and [`ConstHistogram`] for a snapshot
//! histogram). The encoder writes `# HELP` and `# TYPE`, escapes label
//! values, appends `_total` to a counter's name (so counters are named here
//! without it) and writes a histogram's cumulative `_bucket`s (with `+Inf`),
//! `_sum` and `_count`.

use crate::scheduler::metrics::Histogram;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric,
    MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::fmt;

/// A family of one unlabelled gauge.
pub fn gauge(
    out: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: impl EncodeGaugeValue,
) -> fmt::Result {
    single(out, name, help, &ConstGauge::new(value))
}

/// A family of one unlabelled counter; `name` without the `_total` the
/// encoder appends.
pub fn counter(
    out: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: impl EncodeCounterValue,
) -> fmt::Result {
    single(out, name, help, &ConstCounter::new(value))
}

/// A family of one unlabelled metric.
pub fn single(
    out: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> fmt::Result {
    metric.encode(out.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A family of `kind` with one series per `(labels, metric)`; its `# HELP`
/// and `# TYPE` lines are written even when there is none.
pub fn labelled<L: EncodeLabelSet, M: EncodeMetric>(
    out: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (L, M)>,
) -> fmt::Result {
    let mut family = out.encode_descriptor(name, help, None, kind)?;
    for (labels, metric) in series {
        metric.encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A snapshot [`Histogram`] as prometheus-client encodes a histogram, its
/// bucket bounds unchanged.
#[derive(Debug, Clone, Copy)]
pub struct ConstHistogram<'a>(pub &'a Histogram);

impl EncodeMetric for ConstHistogram<'_> {
    fn encode(&self, mut out: MetricEncoder) -> fmt::Result {
        let h = self.0;
        // Counts per bound, as the encoder wants them: it sums them into
        // the cumulative `_bucket`s and adds `+Inf` (every observation).
        let buckets: Vec<(f64, u64)> = h
            .bounds
            .iter()
            .copied()
            .zip(h.buckets.iter().copied())
            .collect();
        out.encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::metrics::BATCH_BUCKETS;
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::prometheus_text;
    use prometheus_client::registry::Registry;

    /// Encodes what `write` writes, as `/metrics` does.
    fn encoded(write: fn(&mut DescriptorEncoder) -> fmt::Result) -> String {
        #[derive(Debug)]
        struct Families(fn(&mut DescriptorEncoder) -> fmt::Result);
        impl Collector for Families {
            fn encode(&self, mut out: DescriptorEncoder) -> fmt::Result {
                (self.0)(&mut out)
            }
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Families(write)));
        let mut text = String::new();
        prometheus_text::encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn a_counter_keeps_its_total_name_in_help_type_and_sample() {
        let text = encoded(|out| counter(out, "x_events", "Events seen.", 3u64));
        assert_eq!(
            text,
            "# HELP x_events_total Events seen.\n# TYPE x_events_total counter\nx_events_total 3\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let text = encoded(|out| {
            let series = [([("a", "x\"y\\z\nw"), ("b", "c")], ConstGauge::new(1i64))];
            labelled(out, "g", "A gauge.", MetricType::Gauge, series)
        });
        assert!(
            text.contains("g{a=\"x\\\"y\\\\z\\nw\",b=\"c\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn a_labelled_histogram_puts_le_last_and_counts_cumulatively() {
        let text = encoded(|out| {
            let mut h = Histogram::new(&BATCH_BUCKETS);
            h.observe(1.0);
            h.observe(3.0);
            h.observe(5000.0);
            let series = [([("task_type", "echo")], ConstHistogram(&h))];
            labelled(out, "x", "Sizes.", MetricType::Histogram, series)
        });
        for line in [
            "# TYPE x histogram\n",
            "x_bucket{task_type=\"echo\",le=\"1\"} 1\n",
            "x_bucket{task_type=\"echo\",le=\"5\"} 2\n",
            "x_bucket{task_type=\"echo\",le=\"1000\"} 2\n",
            "x_bucket{task_type=\"echo\",le=\"+Inf\"} 3\n",
            "x_sum{task_type=\"echo\"} 5004.0\n",
            "x_count{task_type=\"echo\"} 3\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
