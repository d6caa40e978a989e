//! Bad input of every kind: `INVALID_ARGUMENT` naming each bad field (never its value), and
//! nothing changed.

use lychd_proto::runner::v1 as pb;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn a_bad_start_names_every_bad_field_and_changes_nothing() {
    let mut s = stack().await;
    let e = refused(
        s.client
            .start_run(pb::StartRunRequest {
                request_id: "has space".into(),
                workflow: b"{\"schema\":\"lychd.runner.workflow/v1\"}".to_vec(),
                input: vec![b'x'; 64 * 1024 + 1],
                budgets: Some(pb::Budgets {
                    max_steps: 65,
                    max_cost_milli: 20_001,
                    max_parallelism: 5,
                    ..Default::default()
                }),
                timeout_seconds: 0,
                parent_run_id: String::new(),
            })
            .await,
        Code::InvalidArgument,
        "REQUEST_ID_INVALID",
    );
    assert_eq!(
        fields(&e),
        [
            "request_id",
            "workflow",
            "input",
            "budgets.max_steps",
            "budgets.max_cost_milli",
            "budgets.max_parallelism"
        ]
    );
    assert!(!e.message().contains("has space"), "never the value");
    assert_eq!(s.counts().await, (0, 0));
}

#[tokio::test]
async fn each_budget_above_the_contract_is_refused_by_name() {
    let mut s = stack().await;
    let contract = [64, 24, 3, 600, 86_400, 100_000, 20_000, 3, 4];
    let names = [
        "max_steps",
        "max_tool_calls",
        "max_retries_per_transition",
        "max_wall_seconds",
        "max_suspended_seconds",
        "max_tokens",
        "max_cost_milli",
        "max_recursion_depth",
        "max_parallelism",
    ];
    for i in 0..9 {
        let mut v = contract;
        v[i] += 1;
        let budgets = pb::Budgets {
            max_steps: v[0],
            max_tool_calls: v[1],
            max_retries_per_transition: v[2],
            max_wall_seconds: v[3],
            max_suspended_seconds: v[4],
            max_tokens: v[5],
            max_cost_milli: v[6],
            max_recursion_depth: v[7],
            max_parallelism: v[8],
        };
        let e = refused(
            s.client
                .start_run(pb::StartRunRequest {
                    budgets: Some(budgets),
                    ..start_req(&format!("b-{i}"), "")
                })
                .await,
            Code::InvalidArgument,
            "BUDGET_ABOVE_CONTRACT",
        );
        assert_eq!(fields(&e), [format!("budgets.{}", names[i])]);
    }
    // Exactly the contract's maxima are accepted.
    let at_max = pb::Budgets {
        max_steps: 64,
        max_tool_calls: 24,
        max_retries_per_transition: 3,
        max_wall_seconds: 600,
        max_suspended_seconds: 86_400,
        max_tokens: 100_000,
        max_cost_milli: 20_000,
        max_recursion_depth: 3,
        max_parallelism: 4,
    };
    s.client
        .start_run(pb::StartRunRequest {
            budgets: Some(at_max),
            ..start_req("at-max", "")
        })
        .await
        .expect("at the contract's maxima");
    assert_eq!(s.counts().await, (1, 1));
}

#[tokio::test]
async fn a_bad_workflow_is_refused_naming_the_json_path() {
    let mut s = stack().await;
    for (doc, path) in [
        (String::new(), "at : is required"),
        ("not json".to_owned(), "at : is not JSON"),
        (
            WORKFLOW.replace("\"chat\"", "\"poetry\""),
            "at /steps/0/family",
        ),
        // An effect step (Runner II) takes no capability family.
        (
            WORKFLOW.replace("\"model\"", "\"effect\""),
            "at /steps/0/family: is only for model steps",
        ),
        (
            WORKFLOW.replace("\"model\"", "\"mail\""),
            "at /steps/0/kind",
        ),
        (WORKFLOW.replace("\"summarize\"", "\"Sum Up\""), "at /name"),
        (
            WORKFLOW.replace("\"model_answer\"", "\"vibes\""),
            "at /obligations/0/evidence/0: must be an evidence kind",
        ),
        (
            WORKFLOW.replace("\"model_answer\"", "\"task_result\""),
            "at /obligations/0/evidence: no step that closes it can provide it",
        ),
    ] {
        let e = refused(
            s.client
                .start_run(pb::StartRunRequest {
                    workflow: doc.into_bytes(),
                    ..start_req("w", "")
                })
                .await,
            Code::InvalidArgument,
            "WORKFLOW_INVALID",
        );
        assert_eq!(fields(&e), ["workflow"]);
        assert!(e.message().contains(path), "{path}: {}", e.message());
        assert!(
            !e.message().contains("poetry")
                && !e.message().contains("Sum Up")
                && !e.message().contains("vibes")
        );
    }
    assert_eq!(s.counts().await, (0, 0));
}

/// A run succeeds only on a HelmLoop PASS it did not produce (issue 28 item 3): a workflow
/// without `verification` — one the runner's own obligation check would have had to judge —
/// is refused at start with its JSON path, and nothing is stored.
#[tokio::test]
async fn a_workflow_without_verification_is_refused_and_nothing_is_stored() {
    let mut s = stack().await;
    let plain = WORKFLOW.replace(",\n  \"verification\":{\"owner\":\"owner-alice\"}", "");
    assert!(!plain.contains("verification"), "{plain}");
    for doc in [
        plain.clone(),
        // A `verification` that names nothing is no verification either.
        WORKFLOW.replace(
            "\"verification\":{\"owner\":\"owner-alice\"}",
            "\"verification\":null",
        ),
    ] {
        let e = refused(
            s.client
                .start_run(pb::StartRunRequest {
                    workflow: doc.into_bytes(),
                    ..start_req("unverified", "")
                })
                .await,
            Code::InvalidArgument,
            "WORKFLOW_INVALID",
        );
        assert_eq!(fields(&e), ["workflow"]);
        assert!(e.message().contains("at /verification"), "{}", e.message());
    }
    let e = refused(
        s.client
            .start_run(pb::StartRunRequest {
                workflow: plain.into_bytes(),
                ..start_req("unverified", "")
            })
            .await,
        Code::InvalidArgument,
        "WORKFLOW_INVALID",
    );
    assert!(
        e.message().contains("at /verification: is required"),
        "{}",
        e.message()
    );
    assert_eq!(s.counts().await, (0, 0), "nothing stored");
    // The same request with the section is a run.
    start(&mut s.client, "unverified", "").await;
    assert_eq!(s.counts().await.0, 1);
}

#[tokio::test]
async fn bad_run_ids_and_page_tokens_are_named() {
    let mut s = stack().await;
    for bad in ["", "not-a-uuid", "6F9619FF-8B86-D011-B42D-00CF4FC964FF"] {
        refused(
            get(&mut s.client, bad).await,
            Code::InvalidArgument,
            "RUN_ID_MALFORMED",
        );
        refused(
            cancel(&mut s.client, bad).await,
            Code::InvalidArgument,
            "RUN_ID_MALFORMED",
        );
    }
    let e = refused(
        list(&mut s.client, 0, "zz").await,
        Code::InvalidArgument,
        "PAGE_TOKEN_INVALID",
    );
    assert_eq!(fields(&e), ["page.page_token"]);
    let e = refused(
        s.client
            .list_run_transitions(pb::ListRunTransitionsRequest {
                run_id: "nope".into(),
                page: Some(lychd_proto::common::v1::PageRequest {
                    page_size: 0,
                    page_token: "zz".into(),
                }),
            })
            .await,
        Code::InvalidArgument,
        "RUN_ID_MALFORMED",
    );
    assert_eq!(fields(&e), ["run_id", "page.page_token"]);
    // A token of the runs list is not one of a run's transitions.
    for i in 0..2 {
        start(&mut s.client, &format!("t-{i}"), "").await;
    }
    let token = list(&mut s.client, 1, "")
        .await
        .expect("list")
        .page
        .expect("page")
        .next_page_token;
    let run = list(&mut s.client, 1, "")
        .await
        .expect("list")
        .runs
        .remove(0);
    refused(
        s.client
            .list_run_transitions(pb::ListRunTransitionsRequest {
                run_id: run.run_id,
                page: Some(lychd_proto::common::v1::PageRequest {
                    page_size: 0,
                    page_token: token,
                }),
            })
            .await,
        Code::InvalidArgument,
        "PAGE_TOKEN_INVALID",
    );
}
