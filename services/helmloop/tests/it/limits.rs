//! Limits: record count, body size and total bytes per request, nesting depth, the input cap;
//! and a maximal bundle reduced on the bounded pool does not hold up a small reduction.

use std::time::{Duration, Instant};

use lychd_helmloop::Value;
use lychd_proto::helmloop::v1 as pb;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn request_limits_are_refused_with_field_violations() {
    let mut s = stack_with(
        "max_records_per_append = 3\nmax_record_bytes = 1500\nmax_append_bytes = 4096\nmax_input_bytes = 65536",
    )
    .await;
    let records = records_of(baseline().input.value());
    let too_many = append(&mut s.client, records[..4].to_vec())
        .await
        .expect_err("too many");
    assert_eq!(too_many.code(), tonic::Code::InvalidArgument);
    assert!(violations(&too_many).contains(&"records".to_owned()));
    assert!(reason(&too_many) == "RECORDS_TOO_MANY" || reason(&too_many) == "RECORDS_TOO_LARGE");

    let big = records
        .iter()
        .position(|r| r.len() > 1500)
        .expect("a record over 1500 bytes");
    let too_large = append(&mut s.client, vec![records[big].clone()])
        .await
        .expect_err("too large");
    assert_eq!(reason(&too_large), "C14N_TOO_LARGE");
    assert_eq!(violations(&too_large), vec!["records[0]".to_owned()]);

    let empty = append(&mut s.client, vec![]).await.expect_err("empty");
    assert_eq!(reason(&empty), "RECORDS_EMPTY");

    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let refused = append(&mut s.client, vec![deep.clone().into_bytes()])
        .await
        .expect_err("deep");
    assert_eq!(reason(&refused), "C14N_DEPTH_EXCEEDED");

    let input = bytes(baseline().input.value());
    let mut padded = input.clone();
    padded.extend(std::iter::repeat_n(b' ', 65536));
    let refused = s
        .client
        .reduce(pb::ReduceRequest {
            input: padded.into(),
            ..Default::default()
        })
        .await
        .expect_err("over the cap");
    assert_eq!(reason(&refused), "C14N_TOO_LARGE");
    assert_eq!(violations(&refused), vec!["input".to_owned()]);
    let unbound = s
        .client
        .reduce_stored(pb::ReduceStoredRequest {
            context: b"{\"subject\":{}}".to_vec(),
            return_input: false,
        })
        .await
        .expect_err("unbound");
    assert_eq!(reason(&unbound), "CONTEXT_UNBOUND");
}

/// The baseline input grown with distinct valid evidence records until it is just under the
/// 8 MiB cap of the reducer.
fn maximal_bundle() -> Vec<u8> {
    let base = baseline();
    let input = base.input.value();
    let records = input
        .get("records")
        .and_then(Value::as_array)
        .expect("records");
    let evidence = records
        .iter()
        .find(|r| r.get("recordType").and_then(Value::as_str) == Some("EvidenceRecordV1"))
        .expect("evidence")
        .clone();
    let cap = lychd_helmloop::DEFAULT_MAX_BYTES;
    let mut all = records.to_vec();
    let mut size = bytes(input).len();
    let mut i = 0;
    loop {
        let r = reseal(&evidence, |m| {
            m.insert("id", format!("evidence-pad-{i}").into());
        });
        let n = bytes(&r).len() + 1;
        if size + n > cap {
            break;
        }
        size += n;
        all.push(r);
        i += 1;
    }
    let Value::Object(mut m) = input.clone() else {
        panic!()
    };
    m.insert("records", Value::Array(all));
    let out = bytes(&Value::Object(m));
    assert!(out.len() <= cap && out.len() > cap - 4096, "{}", out.len());
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_maximal_bundle_does_not_hold_up_a_small_reduction() {
    let s = stack().await;
    let big = maximal_bundle();
    let small = bytes(baseline().input.value());
    let mut big_client = s.client.clone();
    let started = Instant::now();
    let big_call = tokio::spawn(async move {
        let r = reduce(&mut big_client, big).await;
        (r, started.elapsed())
    });
    // Let the big one be received and start reducing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut small_client = s.client.clone();
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), reduce(&mut small_client, small))
        .await
        .expect("the small reduction finished within 10 s");
    let small_took = t.elapsed();
    let small_done = started.elapsed();
    assert_eq!(
        r.summary.expect("summary").disposition,
        pb::Disposition::Pass as i32
    );
    let (big_result, big_done) = big_call.await.expect("big call");
    assert!(big_result.summary.is_some());
    eprintln!("maximal bundle took {big_done:?}; the small one {small_took:?}");
    assert!(
        small_done < big_done,
        "the small reduction ({small_took:?}) finished while the maximal one ({big_done:?}) was still running"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_set_beyond_the_caps_is_refused() {
    let context = bytes(baseline().input.value().get("context").expect("context"));
    for knobs in ["max_stored_records = 13", "max_input_bytes = 16384"] {
        let mut s = stack_with(knobs).await;
        append(&mut s.client, records_of(baseline().input.value()))
            .await
            .expect("append");
        let refused = s
            .client
            .reduce_stored(pb::ReduceStoredRequest {
                context: context.clone(),
                return_input: false,
            })
            .await
            .expect_err("too large");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{knobs}");
        assert_eq!(reason(&refused), "STORED_SET_TOO_LARGE", "{knobs}");
    }
}
