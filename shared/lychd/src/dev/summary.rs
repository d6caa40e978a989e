//! What `lychd dev` tells the operator once the stack serves: where each office listens and
//! logs, the simulated runtime, the endpoints file, the operator's credential and session, and
//! grpcurl calls to try. Every value is the one the stack was configured with.

use std::collections::BTreeMap;
use std::time::Duration;

use lychd_runtime::Office;

use super::configuration::{
    DEV_ANIMATOR, DEV_DEVICE, DEV_GPUS, DEV_MODEL, DEV_PLACED, Layout, loopback,
};
use crate::provision::secrets::SECRET_MODE;

/// The summary printed once every office serves; `session` is the operator session's lifetime.
pub(super) fn summary(
    layout: &Layout,
    ports: &BTreeMap<Office, u16>,
    runtime: &str,
    host_control: &str,
    session: Duration,
) -> String {
    let mut lines = vec![String::new()];
    for office in Office::ALL {
        lines.push(format!(
            "{:<13} {}  (log: {})",
            office.name(),
            loopback(ports[&office]),
            layout.log(office).display()
        ));
    }
    let token = layout.operator_token(Office::Dispatcher);
    let token = token.display();
    let tokens = layout.operator_token(Office::Ward);
    let tokens = tokens
        .display()
        .to_string()
        .replace("operator.ward.", "operator.<office>.");
    let dispatcher = loopback(ports[&Office::Dispatcher]);
    let orchestrator = loopback(ports[&Office::Orchestrator]);
    let orchestrator_token = layout.operator_token(Office::Orchestrator);
    let orchestrator_token = orchestrator_token.display();
    let gpus: Vec<&str> = DEV_GPUS.iter().map(|(name, _)| *name).collect();
    let (swap_to, swap_model) = DEV_GPUS[1];
    let helmloop = loopback(ports[&Office::HelmLoop]);
    let helmloop_token = layout.operator_token(Office::HelmLoop);
    let helmloop_token = helmloop_token.display();
    let transport = super::tls::grpcurl_transport();
    lines.extend([
        format!(
            "runtime       {runtime}  (simulated llama.cpp: animator {DEV_ANIMATOR}, model {DEV_MODEL})"
        ),
        format!(
            "gpu           {} in conflict on one simulated GPU ({} runs); host control {host_control}/units",
            gpus.join(", "),
            gpus[0]
        ),
        format!(
            "memory        {} on {} ({} MiB; no declared conflict, together they do not fit; {} runs)",
            DEV_PLACED.iter().map(|(name, _, _, _)| *name).collect::<Vec<_>>().join(", "),
            DEV_DEVICE.0,
            DEV_DEVICE.1,
            DEV_PLACED[0].0
        ),
        format!("endpoints     {}", layout.endpoints.display()),
        format!(
            "operator      {} (standing credential) and {tokens} (a session per office, {}), mode {SECRET_MODE:04o}",
            layout.operator_credential.display(),
            duration_text(session)
        ),
        String::new(),
        "try:".into(),
        format!("  grpcurl {transport} {dispatcher} list"),
        format!(
            "  grpcurl {transport} -H \"authorization: Bearer $(cat {token})\" -d '{{\"include_peers\": true}}' {dispatcher} lychd.dispatcher.v1.Dispatcher/Describe"
        ),
        format!(
            "  grpcurl {transport} -H \"authorization: Bearer $(cat {token})\" -d '{{\"demand\": {{\"family\": \"FAMILY_CHAT\", \"model_id\": \"{DEV_MODEL}\"}}, \"holder\": \"me\", \"request_id\": \"try-1\"}}' {dispatcher} lychd.dispatcher.v1.Dispatcher/Lease"
        ),
        format!(
            "  grpcurl {transport} -H \"authorization: Bearer $(cat {helmloop_token})\" -d \"{{\\\"document\\\": \\\"$(base64 -w0 fixtures/helmloop/records/outcome-contract-v1.json)\\\"}}\" {helmloop} lychd.helmloop.v1.HelmLoop/Digest"
        ),
        format!(
            "  grpcurl {transport} -H \"authorization: Bearer $(cat {orchestrator_token})\" {orchestrator} lychd.orchestrator.v1.Orchestrator/GetTopology"
        ),
        format!(
            "  grpcurl {transport} -H \"authorization: Bearer $(cat {orchestrator_token})\" -d '{{\"capability_key\": \"{swap_to}:chat:{swap_model}\", \"priority\": 50, \"request_id\": \"swap-1\", \"wait_ms\": 15000}}' {orchestrator} lychd.orchestrator.v1.Orchestrator/RequestTransition"
        ),
        String::new(),
        "Ctrl-C stops everything.".into(),
    ]);
    lines.join("\n") + "\n"
}

/// Where the operators' console is, printed after the summary.
pub(super) fn console(layout: &Layout, url: &str) -> String {
    format!(
        "console       {url}  (sign in with the credential in {}; it holds none of its own; log: {})\n",
        layout.operator_credential.display(),
        layout.console_log().display()
    )
}

/// Where each office's Prometheus scrape endpoint is, printed after the console.
pub(super) fn metrics(layout: &Layout, ports: &BTreeMap<Office, u16>) -> String {
    let mut lines = vec![format!(
        "metrics       {} (Prometheus text at GET /metrics; no session needed, loopback only)",
        layout.metrics().display()
    )];
    for (office, port) in ports {
        lines.push(format!(
            "  {:<11} http://{}/metrics",
            office.name(),
            loopback(*port)
        ));
    }
    lines.join("\n") + "\n"
}

/// The replicas, printed after the summary when there is more than one: each office's
/// addresses in order (the first is the one `endpoints.json` names).
pub(super) fn replicas(sets: &[BTreeMap<Office, u16>]) -> String {
    let mut lines = vec![format!(
        "replicas      {} of every office on one PostgreSQL (dev/replicas.json); the \
         Orchestrator's further replicas are standbys until the first's host lease lapses",
        sets.len()
    )];
    for office in Office::ALL {
        let addrs: Vec<String> = sets
            .iter()
            .map(|set| loopback(set[&office]).to_string())
            .collect();
        lines.push(format!("  {:<13} {}", office.name(), addrs.join(", ")));
    }
    lines.join("\n") + "\n"
}

/// A duration as an operator reads it: `12 h`, `1 h 30 min`, `15 s` (under a second: `250 ms`).
pub(super) fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    let parts: Vec<String> = [
        (secs / 3600, "h"),
        (secs / 60 % 60, "min"),
        (secs % 60, "s"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, unit)| format!("{n} {unit}"))
    .collect();
    if parts.is_empty() {
        format!("{} ms", d.as_millis())
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::configuration::OPERATOR_SESSION;
    use super::*;

    const RUNTIME: &str = "http://127.0.0.1:40000";

    fn ports() -> BTreeMap<Office, u16> {
        Office::ALL.into_iter().zip(61001..).collect()
    }

    fn layout() -> Layout {
        Layout::new(Path::new("/srv/lychd-state")).expect("layout")
    }

    #[test]
    fn every_replica_of_every_office_is_listed_in_order() {
        let second: BTreeMap<Office, u16> = Office::ALL.into_iter().zip(62001..).collect();
        let text = replicas(&[ports(), second]);
        assert!(
            text.starts_with("replicas      2 of every office"),
            "{text}"
        );
        assert!(
            text.contains("  dispatcher    127.0.0.1:61001, 127.0.0.1:62001\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1 + Office::ALL.len());
    }

    #[test]
    fn durations_read_in_hours_minutes_and_seconds() {
        let cases = [
            (12 * 3600, "12 h"),
            (90 * 60, "1 h 30 min"),
            (3600 + 60 + 1, "1 h 1 min 1 s"),
            (15, "15 s"),
            (45 * 60, "45 min"),
        ];
        for (secs, text) in cases {
            assert_eq!(duration_text(Duration::from_secs(secs)), text);
        }
        assert_eq!(duration_text(Duration::from_millis(250)), "250 ms");
    }

    #[test]
    fn the_summary_states_the_session_lifetime_the_operator_is_given() {
        let printed = summary(
            &layout(),
            &ports(),
            RUNTIME,
            "http://127.0.0.1:40009",
            OPERATOR_SESSION,
        );
        let expected = format!(
            "(a session per office, {})",
            duration_text(OPERATOR_SESSION)
        );
        assert!(printed.contains(&expected), "{expected} in {printed}");

        let shorter = summary(
            &layout(),
            &ports(),
            RUNTIME,
            "http://127.0.0.1:40009",
            Duration::from_secs(90 * 60),
        );
        assert!(
            shorter.contains("(a session per office, 1 h 30 min)"),
            "{shorter}"
        );
        assert!(!shorter.contains(&expected), "{shorter}");
    }

    #[test]
    fn the_summary_names_every_address_and_file_the_stack_uses() {
        let layout = layout();
        let printed = summary(
            &layout,
            &ports(),
            RUNTIME,
            "http://127.0.0.1:40009",
            OPERATOR_SESSION,
        );
        for (office, port) in ports() {
            let line = format!(
                "{:<13} 127.0.0.1:{port}  (log: {})",
                office.name(),
                layout.log(office).display()
            );
            assert!(printed.contains(&line), "{line} in {printed}");
        }
        assert!(
            printed.contains(&format!("runtime       {RUNTIME}  ")),
            "{printed}"
        );
        assert!(
            printed.contains("animator sim0, model qwen3-0.6b"),
            "{printed}"
        );
        assert!(
            printed.contains("endpoints     /srv/lychd-state/dev/endpoints.json\n"),
            "{printed}"
        );
        assert!(
            printed.contains(
                "operator      /srv/lychd-state/dev/operator.credential (standing credential) and /srv/lychd-state/dev/operator.<office>.token"
            ),
            "{printed}"
        );
        assert!(printed.contains("mode 0600"), "{printed}");
        assert!(
            printed.contains("grpcurl -plaintext 127.0.0.1:61001 list"),
            "{printed}"
        );
        let bearer =
            "\"authorization: Bearer $(cat /srv/lychd-state/dev/operator.dispatcher.token)\"";
        for call in ["Dispatcher/Describe", "Dispatcher/Lease"] {
            let line = printed
                .lines()
                .find(|l| l.ends_with(call))
                .unwrap_or_else(|| panic!("{call} in {printed}"));
            assert!(line.contains(bearer), "{line}");
            assert!(line.contains(" 127.0.0.1:61001 "), "{line}");
        }
        assert!(printed.contains(r#""model_id": "qwen3-0.6b""#), "{printed}");
    }
}
