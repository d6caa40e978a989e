//! The accountable owner of the dev stack's runs, with grpcurl (issue 28 item 3: every
//! workflow names one in `verification`, and a run succeeds only on HelmLoop's PASS, which
//! needs the owner's records and promotion): the operator enrolls the owner in Ward and lets it
//! approve `effect:helmloop`; the owner approves a run's owner records, then its promotion, as
//! each is pending (listed by the operator).

use std::time::{Duration, Instant};

use crate::grpcurl_json;

/// `method` of Ward at `ward` with `bearer` (a full `authorization: Bearer …` header).
fn ward(ward: &str, bearer: &str, method: &str, body: &str) -> serde_json::Value {
    grpcurl_json(ward, bearer, &format!("lychd.ward.v1.Ward/{method}"), body)
}

/// An owner enrolled at Ward, with its session.
pub(crate) struct Owner {
    pub name: String,
    bearer: String,
}

/// `doc` (a workflow document, JSON) with a `verification` section naming `owner`.
pub(crate) fn verified(doc: &str, owner: &str) -> String {
    let end = doc.rfind('}').expect("a workflow document is an object");
    format!(
        r#"{},
 "verification": {{"owner": "{owner}"}}}}"#,
        doc[..end].trim_end()
    )
}

impl Owner {
    /// Enroll human `name` at Ward `at` as the operator (`operator`: its bearer header), allowed
    /// to approve `effect:helmloop`, with a Ward session.
    pub(crate) fn enroll(at: &str, operator: &str, name: &str) -> Owner {
        let enrolled = ward(
            at,
            operator,
            "EnrollPrincipal",
            &format!(r#"{{"kind": "PRINCIPAL_KIND_HUMAN", "name": "{name}"}}"#),
        );
        let id = enrolled["principal"]["id"].as_str().expect("id").to_owned();
        ward(
            at,
            operator,
            "Assign",
            &format!(
                r#"{{"principal_id": "{id}", "action": "ward:approve", "object": "effect:helmloop", "audience": "ward", "purpose": "approve"}}"#
            ),
        );
        let issued = ward(
            at,
            operator,
            "IssueCredential",
            &format!(r#"{{"principal_id": "{id}", "kind": "CREDENTIAL_KIND_STANDING"}}"#),
        );
        let credential = issued["credential"].as_str().expect("credential");
        let session = ward(
            at,
            &format!("authorization: Bearer {credential}"),
            "ExchangeCredential",
            r#"{"audiences": ["ward"]}"#,
        );
        Owner {
            name: name.to_owned(),
            bearer: format!(
                "authorization: Bearer {}",
                session["sessionToken"].as_str().expect("session")
            ),
        }
    }

    /// The owner approves run `run_id`'s owner records, then its promotion, each once the
    /// operator sees it pending at Ward `at` (at most 90 s each).
    pub(crate) fn approve(&self, at: &str, operator: &str, run_id: &str) {
        for tool in ["helmloop.issue", "helmloop.promote"] {
            let t = Instant::now();
            let consent = loop {
                let listed = ward(
                    at,
                    operator,
                    "ListConsents",
                    &format!(r#"{{"run_id": "{run_id}", "state": "CONSENT_STATE_PENDING"}}"#),
                );
                let found = listed["consents"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["toolName"] == tool)
                    .cloned();
                if let Some(c) = found {
                    break c;
                }
                assert!(t.elapsed() < Duration::from_secs(90), "a pending {tool}");
                std::thread::sleep(Duration::from_millis(250));
            };
            ward(
                at,
                &self.bearer,
                "Decide",
                &format!(
                    r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
                    consent["consentId"].as_str().expect("id"),
                    consent["bindingDigest"].as_str().expect("digest")
                ),
            );
        }
    }
}
