//! The Prometheus text exposition format (0.0.4) of what the SDK collected, following the
//! OpenTelemetry → Prometheus compatibility rules: dots and other characters become `_`, the
//! unit is a suffix (`s` → `_seconds`, `By` → `_bytes`; an annotation like `{request}` adds
//! none), a monotonic sum is a `counter` with `_total`, a non-monotonic sum or a gauge is a
//! `gauge`, a histogram has cumulative `_bucket{le=…}`, `_sum` and `_count`. Series are sorted
//! (by name, then labels), so two scrapes of the same state are the same text.

use std::collections::BTreeMap;
use std::fmt::Write;

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};

/// One metric family: its help, type and sample lines.
#[derive(Default)]
struct Family {
    help: String,
    kind: &'static str,
    samples: Vec<String>,
}

pub(super) fn render(rm: &ResourceMetrics) -> String {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for scope in rm.scope_metrics() {
        for metric in scope.metrics() {
            add(&mut families, metric);
        }
    }
    let mut out = String::new();
    for (name, mut family) in families {
        family.samples.sort();
        let _ = writeln!(out, "# HELP {name} {}", escape_help(&family.help));
        let _ = writeln!(out, "# TYPE {name} {}", family.kind);
        for line in family.samples {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

fn add(families: &mut BTreeMap<String, Family>, metric: &Metric) {
    match metric.data() {
        AggregatedMetrics::F64(data) => add_data(families, metric, data, |v| number(*v)),
        AggregatedMetrics::U64(data) => add_data(families, metric, data, u64::to_string),
        AggregatedMetrics::I64(data) => add_data(families, metric, data, i64::to_string),
    }
}

fn add_data<T>(
    families: &mut BTreeMap<String, Family>,
    metric: &Metric,
    data: &MetricData<T>,
    value: impl Fn(&T) -> String,
) where
    T: Copy,
{
    let base = base_name(metric.name(), metric.unit());
    let (name, kind) = match data {
        MetricData::Sum(sum) if sum.is_monotonic() => (format!("{base}_total"), "counter"),
        MetricData::Sum(_) | MetricData::Gauge(_) => (base, "gauge"),
        MetricData::Histogram(_) => (base, "histogram"),
        // Never configured here (no exponential aggregation is asked for).
        MetricData::ExponentialHistogram(_) => return,
    };
    let family = families.entry(name.clone()).or_insert_with(|| Family {
        help: metric.description().to_owned(),
        kind,
        samples: Vec::new(),
    });
    match data {
        MetricData::Sum(sum) => {
            for p in sum.data_points() {
                let labels = labels(p.attributes(), None);
                family
                    .samples
                    .push(format!("{name}{labels} {}", value(&p.value())));
            }
        }
        MetricData::Gauge(gauge) => {
            for p in gauge.data_points() {
                let labels = labels(p.attributes(), None);
                family
                    .samples
                    .push(format!("{name}{labels} {}", value(&p.value())));
            }
        }
        MetricData::Histogram(histogram) => {
            for p in histogram.data_points() {
                let mut cumulative = 0u64;
                for (bound, count) in p.bounds().zip(p.bucket_counts()) {
                    cumulative += count;
                    let labels = labels(p.attributes(), Some(&number(bound)));
                    family
                        .samples
                        .push(format!("{name}_bucket{labels} {cumulative}"));
                }
                let inf = labels(p.attributes(), Some("+Inf"));
                family
                    .samples
                    .push(format!("{name}_bucket{inf} {}", p.count()));
                let labels = labels(p.attributes(), None);
                family
                    .samples
                    .push(format!("{name}_sum{labels} {}", value(&p.sum())));
                family
                    .samples
                    .push(format!("{name}_count{labels} {}", p.count()));
            }
        }
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// The metric's name with its unit's suffix (`lychd.rpc.server.duration`, `s` →
/// `lychd_rpc_server_duration_seconds`).
pub(super) fn base_name(name: &str, unit: &str) -> String {
    let mut base = sanitize(name);
    let suffix = match unit {
        "" | "1" => None,
        u if u.starts_with('{') => None,
        "s" => Some("seconds".to_owned()),
        "ms" => Some("milliseconds".to_owned()),
        "By" => Some("bytes".to_owned()),
        u => Some(sanitize(u)),
    };
    if let Some(suffix) = suffix
        && !base.ends_with(&format!("_{suffix}"))
    {
        base.push('_');
        base.push_str(&suffix);
    }
    base
}

fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// `{a="x",b="y"}` sorted by label name, with `le` last; empty when there are none.
fn labels<'a>(attributes: impl Iterator<Item = &'a KeyValue>, le: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = attributes
        .map(|kv| (sanitize(kv.key.as_str()), escape_value(&kv.value.as_str())))
        .collect();
    pairs.sort();
    if let Some(le) = le {
        pairs.push(("le".into(), le.into()));
    }
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", inner.join(","))
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

fn escape_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use opentelemetry::KeyValue;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::SdkMeterProvider;

    use super::base_name;
    use crate::metrics::Scrape;

    #[test]
    fn units_become_suffixes_once() {
        assert_eq!(
            base_name("lychd.rpc.server.duration", "s"),
            "lychd_rpc_server_duration_seconds"
        );
        assert_eq!(
            base_name("lychd.rpc.server.requests", "{request}"),
            "lychd_rpc_server_requests"
        );
        assert_eq!(base_name("a.b_seconds", "s"), "a_b_seconds");
        assert_eq!(base_name("x.size", "By"), "x_size_bytes");
        assert_eq!(base_name("9lives", ""), "_9lives");
    }

    #[test]
    fn counters_gauges_and_histograms_are_exposed_in_the_text_format() {
        let scrape = Scrape::new();
        let provider = SdkMeterProvider::builder()
            .with_reader(scrape.clone())
            .build();
        let meter = provider.meter("test");
        let counter = meter
            .u64_counter("lychd.test.things")
            .with_unit("{thing}")
            .with_description("things \"counted\"\nhere")
            .build();
        counter.add(2, &[KeyValue::new("kind.name", "a\"b")]);
        counter.add(1, &[KeyValue::new("kind.name", "c")]);
        let histogram = crate::metrics::seconds_histogram(&meter, "lychd.test.wait", "waits");
        histogram.record(0.25, &[]);
        histogram.record(7.0, &[]);
        let _gauge = meter
            .i64_observable_gauge("lychd.test.level")
            .with_callback(|o| o.observe(-4, &[]))
            .build();
        let text = scrape.render();
        for line in [
            "# HELP lychd_test_things_total things \"counted\"\\nhere",
            "# TYPE lychd_test_things_total counter",
            "lychd_test_things_total{kind_name=\"a\\\"b\"} 2",
            "lychd_test_things_total{kind_name=\"c\"} 1",
            "# TYPE lychd_test_wait_seconds histogram",
            "lychd_test_wait_seconds_bucket{le=\"0.1\"} 0",
            "lychd_test_wait_seconds_bucket{le=\"0.25\"} 1",
            "lychd_test_wait_seconds_bucket{le=\"5\"} 1",
            "lychd_test_wait_seconds_bucket{le=\"10\"} 2",
            "lychd_test_wait_seconds_bucket{le=\"+Inf\"} 2",
            "lychd_test_wait_seconds_sum 7.25",
            "lychd_test_wait_seconds_count 2",
            "# TYPE lychd_test_level gauge",
            "lychd_test_level -4",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in:\n{text}"
            );
        }
        assert_eq!(
            text,
            scrape.render(),
            "the same state renders the same text"
        );
    }
}
