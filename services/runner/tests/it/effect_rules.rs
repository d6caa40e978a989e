//! Ward's standing rules and the Runner's effects: a low-risk effect goes through Ward's
//! preauthorization like any caller's proposal (granted at once by a matching rule, consumed,
//! delivered); a high-risk effect needs a live human verdict, so a rule's grant is never
//! honoured for it (the step closes nothing, nothing is delivered).

use crate::effects::build_with;

/// Ward's `[office]` line naming `dir` as its rules directory.
fn preauth(dir: &std::path::Path) -> Option<String> {
    Some(format!("preauth_dir = {:?}", dir.display().to_string()))
}

fn rules(tool: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lychd-effect-rules-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("rules dir");
    std::fs::write(
        dir.join("runner.toml"),
        format!(
            "[[rule]]\nslug = \"runner-effects\"\neffect_class = \"standard\"\n\
             principal = \"runner\"\ntool = \"{tool}\"\neffect_owner = \"runner\"\npriority = 10\n"
        ),
    )
    .expect("rule file");
    dir
}

#[tokio::test]
async fn a_low_risk_effect_is_preauthorized_by_a_standing_rule() {
    let dir = rules("runner.effect.http.low");
    let mut s = build_with("", None, preauth(&dir)).await;
    let id = s.start("low-1", "low").await;
    let run = s.until(id, "SUCCEEDED").await;
    assert_eq!(run.terminal_category, "success");
    assert_eq!((s.sim.applied(), s.sim.deliveries()), (1, 1));
    s.no_duplicates();
    let i = s.inspect(id).await;
    let verdict = i
        .ledger
        .iter()
        .find(|e| e.kind == "policy_verdict")
        .expect("a policy verdict");
    assert!(
        verdict.detail_json.contains("runner-effects"),
        "{verdict:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_standing_rule_never_approves_a_high_risk_effect() {
    let dir = rules("runner.effect.http.*");
    let mut s = build_with("", None, preauth(&dir)).await;
    let id = s.start("high-by-rule-1", "high").await;
    let run = s.until(id, "NO_PROGRESS").await;
    assert_eq!(run.terminal_category, "pathology");
    assert_eq!(s.sim.deliveries(), 0, "nothing delivered on a rule's grant");
    let kinds = s.ledger(id).await;
    assert!(
        !kinds.iter().any(|k| k == "approval_consumption"),
        "{kinds:?}"
    );
    let i = s.inspect(id).await;
    assert!(
        i.ledger
            .iter()
            .any(|e| e.detail_json.contains("rule_grant_refused_for_high_risk")),
        "{:?}",
        i.ledger
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// An approval nobody gives before Ward's TTL expires (counts as a denial): nothing is
/// delivered, the step closes nothing, and each repair round asks a new approval.
#[tokio::test]
async fn an_expired_approval_is_never_consumed() {
    let mut s = build_with("", None, Some("consent_ttl_seconds = 1".into())).await;
    let id = s.start("expire-1", "high").await;
    s.until(id, "WAIT_APPROVAL").await;
    let first = s.consent(id).await;
    let client = s.client.clone();
    let old = first.consent_id.clone();
    crate::common::eventually("a new approval is asked after the first expired", || {
        let mut c = client.clone();
        let old = old.clone();
        async move {
            c.inspect_effect(lychd_proto::runner::v1::InspectEffectRequest {
                run_id: id.to_string(),
            })
            .await
            .map(|r| {
                let r = r.into_inner();
                !r.consent_id.is_empty() && r.consent_id != old
            })
            .unwrap_or(false)
        }
    })
    .await;
    let expired = s
        .ward
        .get_consent(lychd_proto::ward::v1::GetConsentRequest {
            consent_id: first.consent_id,
        })
        .await
        .expect("get")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(
        expired.state,
        lychd_proto::ward::v1::ConsentState::Expired as i32
    );
    assert!(expired.consumed_at.is_none());
    assert_eq!(
        s.sim.deliveries(),
        0,
        "nothing delivered without an approval"
    );
}
