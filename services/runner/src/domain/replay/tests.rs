use super::*;

#[test]
fn every_kind_has_one_stored_name_that_parses_back() {
    let names: std::collections::BTreeSet<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), Kind::ALL.len());
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.name()), Some(k));
        // The migration's check on `run_inputs.kind`.
        assert!(
            k.name().len() <= 32 && k.name().chars().all(|c| c.is_ascii_lowercase() || c == '_')
        );
    }
    assert_eq!(Kind::parse("effect_response"), None);
}

#[test]
fn inputs_carry_their_fields_and_a_response_its_bytes() {
    let c = Input::clock_loop(1_700_000_000_123_456_789, 1_700_000_000_000_000_000);
    assert_eq!(c.kind, Kind::Clock);
    assert_eq!(c.str("read"), Some("loop"));
    assert_eq!(c.i64("now_ns"), Some(1_700_000_000_123_456_789));
    assert_eq!(c.i64("wait_from_ns"), Some(1_700_000_000_000_000_000));
    assert_eq!(Input::random(7).u64("seed"), Some(7));
    let m = Input::model_response(b"{}".to_vec(), "l-1", 5);
    assert_eq!(
        (m.body.as_slice(), m.u64("price_milli_per_1k")),
        (&b"{}"[..], Some(5))
    );
    assert_eq!(Input::failed(true).str("failure"), Some("permanent"));
    assert_eq!(Input::cold(2000).u64("wait_ms"), Some(2000));
    assert!(Input::tree([1; 9], [0; 4]).meta["budgets"].is_array());
}

mod rerun {
    use super::super::rerun::*;
    use super::super::{Input, RULES_VERSION};
    use crate::domain::budgets::Budgets;
    use crate::domain::checkpoint::{Envelope, Snapshot};
    use crate::domain::fsm::{FSM_SHA256, Fsm};
    use crate::domain::progress::Progress;
    use crate::domain::workflow::Workflow;

    const W: &[u8] = br#"{"schema":"lychd.runner.workflow/v1","name":"w","version":"0.1.0",
      "obligations":[{"id":"done","evidence":["task_result"]}],
      "steps":[{"id":"a","kind":"task","closes":["done"]}],"verification":{"owner":"o"}}"#;
    const ENVELOPE: Envelope<'static> = Envelope {
        workflow_name: "w",
        workflow_version: "0.1.0",
        workflow_sha256: "a",
        state_schema_version: "0.1.0",
        fsm_sha256: FSM_SHA256,
    };
    const CREATED_NS: i128 = 1_700_000_000_000_000_000;

    /// A recorded transition `trigger` into `state` at `version` with `p` and `inputs`.
    fn recorded(
        version: i64,
        trigger: &str,
        state: &str,
        p: &Progress,
        inputs: Vec<Input>,
    ) -> Recorded {
        let c = Snapshot {
            run_id: "r",
            version,
            generation: 1,
            state,
            budgets: Budgets::contract(),
            interrupt_pending: false,
            progress: p,
            envelope: ENVELOPE,
        }
        .checkpoint();
        Recorded {
            version,
            generation: 1,
            trigger: trigger.into(),
            actor: "runner".into(),
            target_state: state.into(),
            checksum: c.checksum,
            body: c.body,
            inputs,
        }
    }

    fn run(record: &[Recorded]) -> Report {
        let fsm = Fsm::bound().expect("fsm");
        let w = Workflow::parse(W).expect("workflow");
        let f = Frozen {
            fsm: &fsm,
            workflow: &w,
            budgets: Budgets::contract(),
            run_id: "r",
            created_ns: CREATED_NS,
            deadline_ns: None,
            envelope: ENVELOPE,
        };
        replay(&f, record)
    }

    #[test]
    fn a_recorded_start_replays_and_a_missing_or_extra_input_or_another_checkpoint_diverges() {
        let fresh = Progress::default();
        let clocks = || {
            vec![
                Input::clock_loop(CREATED_NS + 1_000_000, CREATED_NS),
                Input::clock("boundary", CREATED_NS + 2_000_000),
            ]
        };
        let good = vec![
            recorded(1, "created", "CREATED", &fresh, Vec::new()),
            recorded(2, "start", "PLAN", &fresh, clocks()),
        ];
        let r = run(&good);
        assert_eq!(
            (r.replayed, r.total, r.inputs_read, r.divergence),
            (2, 2, 2, None)
        );
        assert!(!RULES_VERSION.is_empty());
        // No input recorded: the loop's clock read finds none.
        let mut bare = good.clone();
        bare[1].inputs.clear();
        let d = run(&bare).divergence.expect("diverges");
        assert_eq!((d.index, d.version), (1, 2));
        assert_eq!(d.reason, "read a clock input that was not recorded");
        // An input recorded beyond what the rules read.
        let mut extra = good.clone();
        extra[1].inputs.push(Input::random(1));
        assert_eq!(
            run(&extra).divergence.expect("diverges").reason,
            "1 recorded input(s) not read"
        );
        // Another recorded checkpoint (its checksum) at the creation.
        let mut other = good.clone();
        other[0].checksum = "0".repeat(64);
        let d = run(&other).divergence.expect("diverges");
        assert_eq!((d.index, d.reason.as_str()), (0, "another checkpoint"));
        assert_eq!(run(&other).replayed, 0);
        // A caller's interrupt recorded in the checkpoint (an external input) replays.
        let mut interrupted = good.clone();
        let c = Snapshot {
            run_id: "r",
            version: 2,
            generation: 1,
            state: "PLAN",
            budgets: Budgets::contract(),
            interrupt_pending: true,
            progress: &fresh,
            envelope: ENVELOPE,
        }
        .checkpoint();
        (interrupted[1].checksum, interrupted[1].body) = (c.checksum, c.body);
        assert_eq!(run(&interrupted).divergence, None);
        // Another recorded event than the rules take.
        let mut event = good;
        event[1].trigger = "cancel_requested".into();
        let d = run(&event).divergence.expect("diverges");
        assert_eq!(d.replayed_trigger, "start");
    }
}
