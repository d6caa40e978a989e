//! Ward's database gauges (issue 30 item 2): the statement the runtime's poller runs counts the
//! consents waiting for a verdict by class, with the oldest one's age, and a verdict takes a
//! consent out of them.

use lychd_proto::ward::v1 as pb;
use lychd_ward::store::metrics::{PENDING, PENDING_AGE, read};

use crate::consent::{cast_with, decide, propose};

/// The value of `gauge` for `class` in `readings`.
fn value(readings: &[lychd_runtime::metrics::Reading], gauge: &str, class: &str) -> f64 {
    let found: Vec<f64> = readings
        .iter()
        .filter(|r| {
            r.gauge == gauge
                && r.attributes
                    .iter()
                    .any(|kv| kv.key.as_str() == "class" && kv.value.as_str() == class)
        })
        .map(|r| r.value)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {gauge} reading for {class}: {readings:?}"
    );
    found[0]
}

#[tokio::test]
async fn pending_consents_are_counted_by_class_with_the_oldest_age_until_decided() {
    let mut c = cast_with(|_| {}).await;
    let pool = c.s.ctx.pool.clone();
    let before = read(pool.clone()).await.expect("read");
    assert_eq!(value(&before, PENDING, "standard"), 0.0);
    assert_eq!(value(&before, PENDING_AGE, "standard"), 0.0);
    // Every class is reported, with none pending.
    assert_eq!(value(&before, PENDING, "host_lifecycle"), 0.0);

    let first = propose(&mut c.proposer, "call-1", r#"{"path":"/srv/a"}"#).await;
    propose(&mut c.proposer, "call-2", r#"{"path":"/srv/b"}"#).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let waiting = read(pool.clone()).await.expect("read");
    assert_eq!(value(&waiting, PENDING, "standard"), 2.0);
    assert!(value(&waiting, PENDING_AGE, "standard") > 0.0);
    assert_eq!(value(&waiting, PENDING, "bounded"), 0.0);

    decide(&mut c.approver, &first, pb::Verdict::Approve)
        .await
        .expect("approved");
    let decided = read(pool).await.expect("read");
    assert_eq!(value(&decided, PENDING, "standard"), 1.0);
}
