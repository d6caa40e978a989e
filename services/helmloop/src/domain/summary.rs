//! The typed summary of a `ReductionResult`: disposition, the six axes, both channels, input
//! digest and target transition; from the reducer's result, or from stored result bytes.

use lychd_helmloop::{ReductionResult, Value};

/// Axis names in spec order (HelmLoop Protocol v0.1 §5).
pub const AXES: [&str; 6] = [
    "execution",
    "evidence",
    "authority",
    "promotion",
    "reconciliation",
    "observedOutcome",
];

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// `PASS`, `HOLD` or `REJECT`.
    pub disposition: String,
    /// The six states, in [`AXES`] order.
    pub axes: [String; 6],
    pub reject: Vec<String>,
    pub hold: Vec<String>,
    pub input_digest: String,
    pub target_transition: String,
}

impl Summary {
    pub fn of(r: &ReductionResult) -> Summary {
        let pairs = r.axes.pairs();
        Summary {
            disposition: r.disposition.as_str().to_owned(),
            axes: pairs.map(|(_, state)| state.to_owned()),
            reject: r.reject.iter().map(|c| c.as_str().to_owned()).collect(),
            hold: r.hold.iter().map(|c| c.as_str().to_owned()).collect(),
            input_digest: r.input_digest.render(),
            target_transition: r.target_transition.clone().unwrap_or_default(),
        }
    }

    /// From a `ReductionResult` as JSON (a stored evaluation).
    pub fn from_value(v: &Value) -> Summary {
        let s = |x: Option<&Value>| x.and_then(Value::as_str).unwrap_or("").to_owned();
        let codes = |k: &str| {
            v.get("reasonCodes")
                .and_then(|c| c.get(k))
                .and_then(Value::as_array)
                .unwrap_or(&[])
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        Summary {
            disposition: s(v.get("disposition")),
            axes: AXES.map(|a| s(v.get("axes").and_then(|x| x.get(a)))),
            reject: codes("reject"),
            hold: codes("hold"),
            input_digest: s(v.get("inputDigest")),
            target_transition: s(v.get("targetTransition")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_of_a_result_equals_the_summary_of_its_json() {
        let input = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/helmloop/bundles/evaluation-input.json"),
        )
        .expect("bundle");
        let r = lychd_helmloop::reduce_bytes(&input).expect("parses");
        let v = lychd_helmloop::parse(r.to_json().as_bytes()).expect("json");
        assert_eq!(Summary::of(&r), Summary::from_value(&v));
        assert_eq!(Summary::of(&r).disposition, r.disposition.as_str());
        assert_eq!(Summary::of(&r).axes[5], r.axes.pairs()[5].1);
    }
}
