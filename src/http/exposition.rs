//! Writing the Prometheus text exposition format (version 0.0.4) by hand:
//! a family's `# HELP` and `# TYPE` lines, samples with escaped label
//! values, and histograms as cumulative `_bucket`, `_sum` and `_count`.

use crate::scheduler::metrics::Histogram;
use std::fmt::Write;

/// The `# HELP` and `# TYPE` lines that open a family.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A family with one unlabelled sample.
pub fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// `{k="v",…}` for `labels`, values escaped; empty for no labels.
pub fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A label value as the text format wants it: backslash, double quote and
/// line feed escaped.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The samples of one histogram series labelled `pairs` (the family
/// lines are the caller's, once for all series).
pub fn histogram_series(out: &mut String, name: &str, pairs: &[(&str, &str)], h: &Histogram) {
    let le = |bound: &str| {
        let mut all = pairs.to_vec();
        all.push(("le", bound));
        labels(&all)
    };
    for (bound, count) in h.cumulative() {
        let _ = writeln!(out, "{name}_bucket{} {count}", le(&bound.to_string()));
    }
    let _ = writeln!(out, "{name}_bucket{} {}", le("+Inf"), h.count);
    let tags = labels(pairs);
    let _ = writeln!(out, "{name}_sum{tags} {}", h.sum);
    let _ = writeln!(out, "{name}_count{tags} {}", h.count);
}

/// A whole unlabelled histogram family.
pub fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    family(out, name, "histogram", help);
    histogram_series(out, name, &[], h);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::metrics::BATCH_BUCKETS;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            labels(&[("a", "x\"y\\z\nw"), ("b", "c")]),
            "{a=\"x\\\"y\\\\z\\nw\",b=\"c\"}"
        );
        assert_eq!(labels(&[]), "");
    }

    #[test]
    fn a_labelled_histogram_puts_le_last_and_counts_cumulatively() {
        let mut h = Histogram::new(&BATCH_BUCKETS);
        h.observe(1.0);
        h.observe(3.0);
        let mut out = String::new();
        histogram_series(&mut out, "x", &[("task_type", "echo")], &h);
        assert!(
            out.contains("x_bucket{task_type=\"echo\",le=\"1\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{task_type=\"echo\",le=\"5\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{task_type=\"echo\",le=\"+Inf\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("x_sum{task_type=\"echo\"} 4\n"), "{out}");
        assert!(out.contains("x_count{task_type=\"echo\"} 2\n"), "{out}");
    }
}
