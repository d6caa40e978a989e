//! Authority at the write: a stored reduction whose caller's policy changed while it reduced
//! is not stored (Ward is asked again with the first decision's policy generation).

use std::time::Duration;

use lychd_helmloop::Value;
use lychd_proto::helmloop::v1 as pb;
use lychd_proto::ward::v1::PrincipalKind;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_reduction_whose_caller_lost_its_policy_while_reducing_is_not_stored() {
    let mut s = stack().await;
    let input = baseline().input.value().clone();
    append(&mut s.client, records_of(&input))
        .await
        .expect("append");
    let evidence = input
        .get("records")
        .and_then(Value::as_array)
        .expect("records")
        .iter()
        .find(|r| r.get("recordType").and_then(Value::as_str) == Some("EvidenceRecordV1"))
        .expect("evidence")
        .clone();
    // Enough stored records that the reduction takes a while (debug build: most of a second).
    for batch in 0..5 {
        // 4,800 records of about 1.6 kB: under the 8 MiB a stored reduction may take.
        let records = (0..960)
            .map(|i| {
                bytes(&reseal(&evidence, |m| {
                    m.insert("id", format!("evidence-pad-{batch}-{i}").into());
                }))
            })
            .collect();
        append(&mut s.client, records).await.expect("pad");
    }
    let (id, token) = s.spawned.principal(PrincipalKind::Service, "host").await;
    let mut admin = s.spawned.admin.clone();
    admin
        .ensure_assignment(
            &id,
            "helmloop:reduce",
            "subject:svc-payments",
            "helmloop",
            "reduce",
        )
        .await
        .expect("assign");
    let mut host = s.client_with(&token);
    let context = bytes(input.get("context").expect("context"));
    let started = std::time::Instant::now();
    let call = tokio::spawn(async move {
        host.reduce_stored(pb::ReduceStoredRequest {
            context,
            return_input: false,
        })
        .await
    });
    // The reduction is under way: change the caller's policy (a new assignment moves its
    // policy generation).
    tokio::time::sleep(Duration::from_millis(200)).await;
    admin
        .ensure_assignment(
            &id,
            "helmloop:read",
            "subject:svc-payments",
            "helmloop",
            "read",
        )
        .await
        .expect("assign");
    let refused = call.await.expect("join").expect_err("refused at the write");
    eprintln!(
        "the stored reduction answered after {:?}",
        started.elapsed()
    );
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert_eq!(reason(&refused), "POLICY_GENERATION_STALE");
    let mut c = s.spawned.db.superuser().await;
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM helmloop.evaluations")
        .fetch_one(&mut c)
        .await
        .expect("count");
    assert_eq!(stored, 0, "nothing was stored");
}
