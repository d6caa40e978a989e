//! Unit tests of `domain::promotion`.

use super::*;

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn terms() -> Terms {
    let subject =
        lychd_helmloop::parse(br#"{"id":"svc-payments","kind":"service","ownerId":"owner-alice"}"#)
            .expect("subject");
    let policy = lychd_helmloop::parse(
        br#"{"id":"policy-deploy","revision":"3","digest":"sha256:dec4e7aa881d98bc7b5a81db30b16227ae427d743c7d17b5b4aabc1fea517c4d"}"#,
    )
    .expect("policy");
    Terms {
        contract: Ref {
            id: "contract-payments-1".into(),
            digest: digest('a'),
        },
        subject,
        policy,
        owner: "owner-alice".into(),
        target: Ref {
            id: "rev-42".into(),
            digest: digest('b'),
        },
        assurance: Ref {
            id: "assurance-1".into(),
            digest: digest('c'),
        },
        evidence: vec![Ref {
            id: "evidence-1".into(),
            digest: digest('d'),
        }],
        grantee: "release-host".into(),
        scope: scope_set(vec!["release/payments".into()]),
        not_after_ms: 1_800_000_000_000,
    }
}

#[test]
fn identifiers_and_digests_follow_the_helmloop_grammar() {
    assert!(is_identifier("rev-42"));
    assert!(is_identifier("a:b.c_d-e"));
    assert!(!is_identifier(""));
    assert!(!is_identifier("-leading"));
    assert!(!is_identifier("has space"));
    assert!(!is_identifier(&"x".repeat(129)));
    assert!(is_digest(&digest('0')));
    assert!(!is_digest(&digest('A')));
    assert!(!is_digest("sha256:00"));
}

#[test]
fn timestamps_are_utc_milliseconds() {
    assert_eq!(
        timestamp(1_737_540_000_123).as_deref(),
        Some("2025-01-22T10:00:00.123Z")
    );
    assert_eq!(timestamp(0).as_deref(), Some("1970-01-01T00:00:00.000Z"));
    assert_eq!(timestamp(i64::MAX), None);
}

#[test]
fn terms_round_trip_through_their_value() {
    let t = terms();
    assert_eq!(Terms::from_value(&t.to_value()), Some(t));
}

#[test]
fn the_issued_records_validate_and_chain_by_exact_digest() {
    let records = issue(&terms(), "0123abcd", 1_737_540_000_000).expect("issued");
    let kinds: Vec<_> = records.iter().map(|r| r.record_type).collect();
    assert_eq!(
        kinds,
        [
            "AuthorityGrantV1",
            "AuthorityGrantV1",
            "PromotionDecisionV1",
            "AuthorityGrantV1"
        ]
    );
    let bundle = format!(
        "[{}]",
        records
            .iter()
            .map(|r| r.body.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    let report = lychd_helmloop::validate::validate_document(bundle.as_bytes());
    assert!(report.is_valid(), "{}", report.to_json());
    for r in &records {
        let body = lychd_helmloop::parse(r.body.as_bytes()).expect("body");
        assert_eq!(record_digest(&body).expect("digest").to_string(), r.digest);
        assert_eq!(
            body.get("issuerId")
                .or(body.get("ownerId"))
                .and_then(Value::as_str),
            Some("owner-alice")
        );
    }
    let decision = lychd_helmloop::parse(records[2].body.as_bytes()).expect("decision");
    assert_eq!(
        decision
            .get("grantRef")
            .and_then(|g| g.get("digest"))
            .and_then(Value::as_str),
        Some(records[1].digest.as_str())
    );
    let consumed = lychd_helmloop::parse(records[3].body.as_bytes()).expect("consumed");
    assert_eq!(
        consumed
            .get("consumedBy")
            .and_then(|g| g.get("digest"))
            .and_then(Value::as_str),
        Some(records[2].digest.as_str())
    );
}

#[test]
fn an_ended_validity_window_issues_nothing() {
    let mut t = terms();
    t.not_after_ms = 1_737_540_000_000;
    assert_eq!(
        issue(&t, "k", 1_737_540_000_000),
        Err(IssueError::ValidityEnded)
    );
}
