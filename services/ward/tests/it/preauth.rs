//! Standing preauthorization over real gRPC and PostgreSQL: rules from a rule directory named
//! in Ward's configuration, uses consumed with the consent in one transaction, grants honoured
//! only while their rule still stands.

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_ward::domain::preauth::parse_set;
use tonic::Code;

use crate::consent::{Cast, cast_with, consume, decide, proposal, propose, reason};

/// A rule for the test cast's proposer: `fs.write` of standard effects under `/srv/reports`.
pub(crate) fn rule(slug: &str, extra: &str) -> String {
    format!(
        r#"
[[rule]]
slug = "{slug}"
effect_class = "standard"
principal = "proposer"
tool = "fs.write"
{extra}
[rule.constraints.path_prefixes]
path = ["/srv/reports"]
"#
    )
}

/// Ward with `files` in its preauthorization directory.
pub(crate) async fn with_rules(files: &[(&str, String)]) -> (Cast, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tmp");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("rule file");
    }
    let path = dir.path().display().to_string();
    let c = cast_with(move |cfg| {
        cfg.office = toml::from_str(&format!("preauth_dir = {path:?}")).expect("toml");
    })
    .await;
    (c, dir)
}

/// The uses `ListPreauthRules` reports for `slug`: the consents it granted.
async fn uses(c: &Cast, slug: &str) -> i64 {
    lychd_ward::store::preauth::list(&c.s.ctx.pool)
        .await
        .expect("rules")
        .into_iter()
        .find(|r| r.slug == slug)
        .expect("rule")
        .uses
}

/// The use counter on a limited rule's row (what the limit is checked against).
async fn counter(c: &Cast, slug: &str) -> i64 {
    sqlx::query_scalar("SELECT uses FROM ward.preauth_rules WHERE slug = $1")
        .bind(slug)
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("rule row")
}

pub(crate) const IN_REPORTS: &str = r#"{"path":"/srv/reports/q4.txt"}"#;

#[tokio::test]
async fn a_matching_proposal_is_granted_by_the_rule_and_consumable_once() {
    let (mut c, _dir) = with_rules(&[("a.toml", rule("reports", ""))]).await;
    let granted = propose(&mut c.proposer, "call-1", IN_REPORTS).await;
    assert_eq!(granted.state, pb::ConsentState::Granted as i32);
    assert_eq!(granted.granted_by_rule, "reports");
    assert!(granted.rule_policy_digest.starts_with("sha256:"));
    assert_eq!(granted.decided_by, "", "no human decided it");
    assert_eq!(uses(&c, "reports").await, 1);
    // A replay returns the same consent and consumes no second use.
    let again = propose(&mut c.proposer, "call-1", IN_REPORTS).await;
    assert_eq!(again.consent_id, granted.consent_id);
    assert_eq!(uses(&c, "reports").await, 1);
    // Outside the prefix (component-wise), another tool or a live-only class: pending.
    for (call, args) in [
        ("call-2", r#"{"path":"/srv/reportsX/q4.txt"}"#),
        ("call-3", r#"{"path":"/srv/reports/../etc/passwd"}"#),
        ("call-4", r#"{"other":"/srv/reports/q4.txt"}"#),
    ] {
        let pending = propose(&mut c.proposer, call, args).await;
        assert_eq!(pending.state, pb::ConsentState::Pending as i32, "{args}");
    }
    let mut live_only = proposal("call-5", IN_REPORTS);
    live_only.effect_class = pb::EffectClass::DestructiveDeletion as i32;
    let live = c
        .proposer
        .propose_effect(live_only)
        .await
        .expect("propose")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(live.state, pb::ConsentState::Pending as i32);
    assert_eq!(uses(&c, "reports").await, 1);
    consume(&mut c.owner, &granted, &granted.binding_digest)
        .await
        .expect("consumed");
}

#[tokio::test]
async fn max_uses_under_sixty_four_concurrent_proposals_grants_exactly_that_many() {
    let (c, _dir) = with_rules(&[("a.toml", rule("five", "max_uses = 5"))]).await;
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let mut proposer = c.proposer.clone();
            tokio::spawn(
                async move { propose(&mut proposer, &format!("call-{i}"), IN_REPORTS).await },
            )
        })
        .collect();
    let mut granted = 0;
    let mut pending = 0;
    for t in tasks {
        let consent = t.await.expect("task");
        match pb::ConsentState::try_from(consent.state) {
            Ok(pb::ConsentState::Granted) => granted += 1,
            Ok(pb::ConsentState::Pending) => pending += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((granted, pending), (5, 59));
    assert_eq!((uses(&c, "five").await, counter(&c, "five").await), (5, 5));
}

#[tokio::test]
async fn a_consent_that_fails_to_be_recorded_consumes_no_use() {
    let (mut c, _dir) = with_rules(&[("a.toml", rule("reports", "max_uses = 3"))]).await;
    let mut su = c.s.db.superuser().await;
    sqlx::query(
        "CREATE FUNCTION ward.test_refuse_run() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.run_id = 'doomed' THEN RAISE EXCEPTION 'refused by the test'; END IF;
             RETURN NEW;
         END $$",
    )
    .execute(&mut su)
    .await
    .expect("function");
    sqlx::query(
        "CREATE TRIGGER test_refuse_run BEFORE INSERT ON ward.consents
         FOR EACH ROW EXECUTE FUNCTION ward.test_refuse_run()",
    )
    .execute(&mut su)
    .await
    .expect("trigger");
    let mut doomed = proposal("call-1", IN_REPORTS);
    doomed.run_id = "doomed".into();
    let status = c
        .proposer
        .propose_effect(doomed)
        .await
        .expect_err("insert fails");
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert_eq!(
        (uses(&c, "reports").await, counter(&c, "reports").await),
        (0, 0),
        "the use went back with the failed insert"
    );
    let granted = propose(&mut c.proposer, "call-2", IN_REPORTS).await;
    assert_eq!(granted.state, pb::ConsentState::Granted as i32);
    assert_eq!(
        (uses(&c, "reports").await, counter(&c, "reports").await),
        (1, 1)
    );
}

#[tokio::test]
async fn a_disabled_changed_or_expired_rule_voids_its_grants_but_not_a_human_verdict() {
    let files = [
        ("a.toml", rule("disabled", "priority = 3")),
        ("b.toml", rule("changed", "priority = 2")),
        ("c.toml", rule("expiring", "priority = 1")),
    ];
    let (mut c, _dir) = with_rules(&files).await;
    // Each rule grants one call (the higher priority first, each then disabled for the next).
    let first = propose(&mut c.proposer, "call-1", IN_REPORTS).await;
    assert_eq!(first.granted_by_rule, "disabled");
    let mut admin = WardClient::new(c.s.channel());
    c.s.allow("ward:administer", "preauth:*").await;
    let disabled = admin
        .disable_preauth_rule(pb::DisablePreauthRuleRequest {
            slug: "disabled".into(),
        })
        .await
        .expect("disable")
        .into_inner()
        .rule
        .expect("rule");
    assert!(disabled.disabled_at.is_some());
    let second = propose(&mut c.proposer, "call-2", IN_REPORTS).await;
    assert_eq!(second.granted_by_rule, "changed");
    let mut su = c.s.db.superuser().await;
    sqlx::query("UPDATE ward.preauth_rules SET max_uses = 1 WHERE slug = 'changed'")
        .execute(&mut su)
        .await
        .expect("exhaust");
    let third = propose(&mut c.proposer, "call-3", IN_REPORTS).await;
    assert_eq!(third.granted_by_rule, "expiring");
    // A human verdict on another call, for comparison.
    let human = propose(&mut c.proposer, "call-4", r#"{"path":"/tmp/x"}"#).await;
    decide(&mut c.approver, &human, pb::Verdict::Approve)
        .await
        .expect("approve");

    // Restart with `changed` changed and `expiring` expired; `disabled` stays disabled.
    let rules = parse_set(&[
        ("a.toml".into(), rule("disabled", "priority = 3")),
        (
            "b.toml".into(),
            rule("changed", "priority = 2\nmax_uses = 9"),
        ),
        (
            "c.toml".into(),
            rule(
                "expiring",
                "priority = 1\nexpires_at = 2020-01-01T00:00:00Z",
            ),
        ),
    ])
    .expect("rules");
    lychd_ward::store::preauth::sync(&c.s.ctx.pool, &rules)
        .await
        .expect("sync");
    for (consent, rule) in [
        (&first, "disabled"),
        (&second, "changed"),
        (&third, "expiring"),
    ] {
        let status = consume(&mut c.owner, consent, &consent.binding_digest)
            .await
            .expect_err(rule);
        assert_eq!(
            reason(&status),
            "CONSENT_RULE_INVALID",
            "{rule}: {status:?}"
        );
    }
    consume(&mut c.owner, &human, &human.binding_digest)
        .await
        .expect("a human verdict stays");
    // The listing shows what the restart kept: uses and the manual disable.
    let listed = admin
        .list_preauth_rules(pb::ListPreauthRulesRequest {})
        .await
        .expect("list")
        .into_inner()
        .rules;
    let by_slug = |s: &str| listed.iter().find(|r| r.slug == s).expect("rule").clone();
    assert!(by_slug("disabled").disabled_at.is_some());
    assert_eq!(by_slug("disabled").uses, 1);
    assert_eq!(by_slug("changed").max_uses, 9);
    assert_eq!(by_slug("changed").uses, 1);
}

#[tokio::test]
async fn a_rule_removed_from_the_files_is_disabled_and_grants_nothing() {
    let (mut c, _dir) = with_rules(&[("a.toml", rule("reports", ""))]).await;
    lychd_ward::store::preauth::sync(&c.s.ctx.pool, &[])
        .await
        .expect("sync");
    // The running Ward still holds the rule in memory; the database refuses its use.
    let pending = propose(&mut c.proposer, "call-1", IN_REPORTS).await;
    assert_eq!(pending.state, pb::ConsentState::Pending as i32);
    assert_eq!(uses(&c, "reports").await, 0);
}

#[tokio::test]
async fn a_bad_rule_file_refuses_the_set_naming_file_and_field() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("a.toml"), rule("good", "")).expect("file");
    std::fs::write(
        dir.path().join("b.toml"),
        rule("bad", "expires_at = 2027-01-01T00:00:00"),
    )
    .expect("file");
    let mut config = lychd_runtime::config::OfficeConfig::defaults(lychd_runtime::Office::Ward);
    config.office = toml::from_str(&format!(
        "preauth_dir = {:?}",
        dir.path().display().to_string()
    ))
    .expect("toml");
    let settings = lychd_ward::config::Settings::load(&config).expect("settings");
    let e = settings.preauth_rules().expect_err("refused");
    assert!(e.file.ends_with("b.toml"), "{e}");
    assert_eq!(e.field, "rule[0].expires_at", "{e}");
}

/// A rule without a limit grants without a counter on its row; its uses are the consents it
/// granted, and a limit it gains at a later start counts those grants.
#[tokio::test]
async fn a_limit_added_to_an_unlimited_rule_counts_its_earlier_grants() {
    let (c, dir) = with_rules(&[("a.toml", rule("reports", ""))]).await;
    let granted = futures::future::join_all(["call-1", "call-2", "call-3"].map(|call| {
        let mut proposer = c.proposer.clone();
        async move { propose(&mut proposer, call, IN_REPORTS).await }
    }))
    .await;
    assert!(granted.iter().all(|g| g.granted_by_rule == "reports"));
    assert_eq!(
        (uses(&c, "reports").await, counter(&c, "reports").await),
        (3, 0)
    );

    // Ward starts again with the rule limited to four uses.
    std::fs::write(dir.path().join("a.toml"), rule("reports", "max_uses = 4")).expect("rule file");
    let restarted =
        lychd_runtime::server::InProcess::start(c.s.ctx.clone(), lychd_ward::spec().start)
            .await
            .expect("ward starts again");
    assert_eq!(
        (uses(&c, "reports").await, counter(&c, "reports").await),
        (3, 3)
    );
    let mut proposer = WardClient::new(lychd_testkit::channel_with(
        &restarted.endpoint(),
        &c.proposer_token,
    ));
    let fourth = propose(&mut proposer, "call-4", IN_REPORTS).await;
    assert_eq!(fourth.granted_by_rule, "reports");
    let fifth = propose(&mut proposer, "call-5", IN_REPORTS).await;
    assert_eq!(
        fifth.state,
        pb::ConsentState::Pending as i32,
        "the limit counts the earlier grants"
    );
    assert_eq!(
        (uses(&c, "reports").await, counter(&c, "reports").await),
        (4, 4)
    );
    restarted.stop().await.expect("stops");
}
