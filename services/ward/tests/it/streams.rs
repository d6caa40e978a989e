//! `WatchConsents` places are fair: one principal holds at most its share of them.

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use tonic::Code;
use tonic_types::StatusExt;

use crate::consent::cast_with;

/// The approver opening watches as fast as it can fills its share (`stream_share`) and is
/// refused beyond it, `RESOURCE_EXHAUSTED STREAM_SHARE_REACHED`, while the operator (another
/// principal allowed to review) still opens one.
#[tokio::test]
async fn one_watcher_fills_only_its_share_and_the_operator_still_watches() {
    let c = cast_with(|cfg| {
        cfg.office = toml::from_str("stream_limit = 4\nstream_share = 2").expect("toml");
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(
            c.approver
                .clone()
                .watch_consents(pb::WatchConsentsRequest::default())
                .await
                .expect("within its share"),
        );
    }
    let refused = c
        .approver
        .clone()
        .watch_consents(pb::WatchConsentsRequest::default())
        .await
        .expect_err("beyond its share");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(
        refused.get_details_error_info().map(|i| i.reason),
        Some("STREAM_SHARE_REACHED".to_owned())
    );
    c.s.allow("ward:review", "consent:*").await;
    let operator = WardClient::new(c.s.channel())
        .watch_consents(pb::WatchConsentsRequest::default())
        .await
        .expect("the operator still opens one");
    drop((held, operator));
}
