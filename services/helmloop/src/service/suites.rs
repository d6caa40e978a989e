//! The embedded conformance suites (core and adapters), run through the reducer and the oracle
//! exactly as the `helmloop conformance` CLI runs them.

use super::*;

/// The embedded core conformance suite.
mod core_suite {
    include!(concat!(env!("OUT_DIR"), "/core_suite.rs"));
}

/// The embedded adapter conformance suites.
mod adapter_suites {
    include!(concat!(env!("OUT_DIR"), "/adapter_suites.rs"));
}

/// The embedded core suite through the reducer and the oracle.
pub fn run_core_suite() -> Conformance {
    let (set_id, entries) = match parse_manifest(core_suite::MANIFEST) {
        Ok(m) => m,
        Err(e) => (
            String::new(),
            vec![(String::new(), e.to_string(), String::new())],
        ),
    };
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for (case_id, rel, digest) in entries {
        let bytes = core_suite::CASES
            .iter()
            .find(|(path, _)| *path == rel)
            .map(|(_, b)| *b);
        let case = bytes
            .ok_or_else(|| format!("{case_id}: cannot read {rel}: not embedded"))
            .and_then(|b| Case::parse(b).map_err(|e| format!("{case_id}: {e}")));
        match case {
            Ok(c) if c.case_id != case_id => {
                errors.push(format!("{rel}: caseId differs from manifest"))
            }
            Ok(c) if c.case_digest.render() != digest => {
                errors.push(format!("{case_id}: case digest differs from manifest"))
            }
            Ok(c) => cases.push(c),
            Err(e) => errors.push(e),
        }
    }
    let report = Report::run("core", &set_id, &cases, errors);
    let failed = report.results.iter().filter(|r| !r.passed()).count();
    Conformance {
        passed: report.all_passed(),
        total: report.results.len(),
        failed,
        fixture_set_digest: report.fixture_set_digest.render(),
        report: report.to_json().into_bytes(),
    }
}

/// An embedded adapter suite: mapped, reduced through the host path, reported.
pub fn run_adapter_suite(adapter: Adapter) -> Conformance {
    let (manifest, cases) = match adapter {
        Adapter::Standalone => (
            adapter_suites::STANDALONE_MANIFEST,
            adapter_suites::STANDALONE_CASES,
        ),
        Adapter::BetterWorkflows => (
            adapter_suites::BETTER_WORKFLOWS_MANIFEST,
            adapter_suites::BETTER_WORKFLOWS_CASES,
        ),
    };
    let read = |rel: &str| {
        cases
            .iter()
            .find(|(path, _)| *path == rel)
            .map(|(_, b)| b.to_vec())
            .ok_or_else(|| "not embedded".to_owned())
    };
    match AdapterReport::from_files(adapter, adapter_suites::SELECTION, manifest, &read) {
        Ok(report) => Conformance {
            passed: report.all_passed(),
            total: report.results.len(),
            failed: report.results.iter().filter(|r| !r.passed()).count(),
            fixture_set_digest: report.selection.fixture_set_digest().render(),
            report: report.to_json().into_bytes(),
        },
        Err(e) => Conformance {
            passed: false,
            total: 0,
            failed: 0,
            fixture_set_digest: String::new(),
            report: e.to_string().into_bytes(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_adapter_suites_pass() {
        for a in Adapter::ALL {
            let c = run_adapter_suite(a);
            assert!(c.total >= 20, "{}: {} cases", a.name(), c.total);
            assert!(c.passed, "{}: {} failed", a.name(), c.failed);
        }
    }

    #[test]
    fn the_embedded_core_suite_passes() {
        let c = run_core_suite();
        assert!(c.total >= 170, "{} cases", c.total);
        assert!(c.passed, "{} failed", c.failed);
    }
}
