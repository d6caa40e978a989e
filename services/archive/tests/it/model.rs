//! A model-based property test: random sequences of intake, promote, archive, revoke, stale
//! changes, recall and receipt resolution, each answer checked against a simple reference
//! model. Whatever the interleaving, a recall or a resolution never shows a note that is not
//! promoted in the model (candidate, archived, superseded or revoked), and every refusal is the
//! one the model predicts.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use lychd_proto::archive::v1 as pb;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::common::*;

const WORDS: [&str; 4] = ["amber", "basalt", "cedar", "dune"];

#[derive(Debug, Clone)]
enum Op {
    Intake {
        source: u8,
        rev: u8,
        variant: u8,
    },
    Promote(usize),
    Archive(usize),
    Revoke(usize),
    Stale(usize),
    Recall(u8),
    Resolve(usize),
    /// A revocation and a recall sent at once: the recall sees the notes either before or
    /// after the revocation, never a mixture and never the revoked note after it.
    RevokeDuringRecall(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, 0u8..3, 0u8..2).prop_map(|(source, rev, variant)| Op::Intake { source, rev, variant }),
        3 => any::<usize>().prop_map(Op::Promote),
        1 => any::<usize>().prop_map(Op::Archive),
        2 => any::<usize>().prop_map(Op::Revoke),
        1 => any::<usize>().prop_map(Op::Stale),
        3 => (0u8..4).prop_map(Op::Recall),
        2 => any::<usize>().prop_map(Op::Resolve),
        2 => (any::<usize>(), 0u8..4).prop_map(|(i, w)| Op::RevokeDuringRecall(i, w)),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Candidate,
    Promoted,
    Archived { superseded: bool },
    Revoked,
}

#[derive(Debug, Clone)]
struct MNote {
    id: String,
    source: u8,
    rev: u8,
    text: String,
    state: St,
    version: u64,
}

#[derive(Default)]
struct Model {
    notes: Vec<MNote>,
    /// Receipts: request id and the selection (revision id, lifecycle version) in rank order.
    receipts: Vec<(String, Vec<(String, u64)>)>,
}

fn text_of(source: u8, rev: u8, variant: u8) -> String {
    let w1 = WORDS[usize::from(source + variant) % 4];
    let w2 = WORDS[usize::from(rev * 3 + variant + 1) % 4];
    format!("{w1} {w2} s{source}r{rev}v{variant}")
}

fn pb_state(s: St) -> i32 {
    (match s {
        St::Candidate => pb::LifecycleState::Candidate,
        St::Promoted => pb::LifecycleState::Promoted,
        St::Archived { .. } => pb::LifecycleState::Archived,
        St::Revoked => pb::LifecycleState::Revoked,
    }) as i32
}

async fn run(s: &Stack, ns: &str, ops: Vec<Op>) {
    let mut c = s.client.clone();
    let mut m = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        let at = format!("step {step} {op:?}");
        match op {
            Op::Intake {
                source,
                rev,
                variant,
            } => {
                let text = text_of(source, rev, variant);
                let req = note(
                    ns,
                    &format!("i{step}"),
                    &format!("src{source}"),
                    &format!("{rev}"),
                    &text,
                );
                let got = c.intake(req).await;
                match m.notes.iter().find(|n| n.source == source && n.rev == rev) {
                    Some(n) if n.state == St::Revoked => {
                        assert_eq!(
                            reason(&got.expect_err(&at)),
                            "SOURCE_REVISION_REVOKED",
                            "{at}"
                        )
                    }
                    Some(n) if n.text != text => {
                        assert_eq!(
                            reason(&got.expect_err(&at)),
                            "SOURCE_REVISION_CONFLICT",
                            "{at}"
                        )
                    }
                    Some(n) => {
                        let got = got.expect(&at).into_inner();
                        assert!(got.replayed, "{at}");
                        let g = got.note.expect("note");
                        assert_eq!(
                            (&g.revision_id, g.state, g.version),
                            (&n.id, pb_state(n.state), n.version),
                            "{at}"
                        );
                    }
                    None => {
                        let got = got.expect(&at).into_inner();
                        assert!(!got.replayed, "{at}");
                        let g = got.note.expect("note");
                        assert_eq!((g.state, g.version), (pb_state(St::Candidate), 1), "{at}");
                        m.notes.push(MNote {
                            id: g.revision_id,
                            source,
                            rev,
                            text,
                            state: St::Candidate,
                            version: 1,
                        });
                    }
                }
            }
            Op::Promote(i) | Op::Archive(i) | Op::Revoke(i) | Op::Stale(i) => {
                if m.notes.is_empty() {
                    continue;
                }
                let i = i % m.notes.len();
                let n = m.notes[i].clone();
                let mut req = pb::LifecycleRequest {
                    namespace: ns.into(),
                    revision_id: n.id.clone(),
                    expected_version: n.version,
                };
                let (got, next) = match op {
                    Op::Promote(_) => (
                        c.promote(req).await,
                        (n.state == St::Candidate).then_some(St::Promoted),
                    ),
                    Op::Archive(_) => (
                        c.archive_note(req).await,
                        (n.state == St::Promoted).then_some(St::Archived { superseded: false }),
                    ),
                    Op::Revoke(_) => (
                        c.revoke(req).await,
                        (n.state != St::Revoked).then_some(St::Revoked),
                    ),
                    _ => {
                        req.expected_version += 1;
                        let got = c.revoke(req).await;
                        assert_eq!(
                            reason(&got.expect_err(&at)),
                            "LIFECYCLE_VERSION_MISMATCH",
                            "{at}"
                        );
                        continue;
                    }
                };
                let Some(next) = next else {
                    assert_eq!(
                        reason(&got.expect_err(&at)),
                        "LIFECYCLE_TRANSITION_INVALID",
                        "{at}"
                    );
                    continue;
                };
                let got = got.expect(&at).into_inner();
                let previous = (next == St::Promoted)
                    .then(|| {
                        m.notes
                            .iter()
                            .position(|o| o.source == n.source && o.state == St::Promoted)
                    })
                    .flatten();
                match (previous, got.superseded) {
                    (Some(p), Some(sup)) => {
                        let o = &mut m.notes[p];
                        o.state = St::Archived { superseded: true };
                        o.version += 1;
                        assert_eq!((&sup.revision_id, sup.version), (&o.id, o.version), "{at}");
                    }
                    (None, None) => {}
                    other => panic!("{at}: supersession differs from the model: {other:?}"),
                }
                let me = &mut m.notes[i];
                me.state = next;
                me.version += 1;
                let g = got.note.expect("note");
                assert_eq!((g.state, g.version), (pb_state(next), me.version), "{at}");
            }
            Op::RevokeDuringRecall(i, w) => {
                if m.notes.is_empty() {
                    continue;
                }
                let i = i % m.notes.len();
                let n = m.notes[i].clone();
                let word = WORDS[usize::from(w)];
                let eligible = |m: &Model| -> BTreeSet<String> {
                    m.notes
                        .iter()
                        .filter(|n| n.state == St::Promoted && n.text.split(' ').any(|t| t == word))
                        .map(|n| n.id.clone())
                        .collect()
                };
                let before = eligible(&m);
                let (mut c1, mut c2) = (c.clone(), c.clone());
                let request_id = format!("q{step}");
                let (revoked, recalled) = tokio::join!(
                    c1.revoke(pb::LifecycleRequest {
                        namespace: ns.into(),
                        revision_id: n.id.clone(),
                        expected_version: n.version,
                    }),
                    c2.recall(recall_req(ns, &request_id, word))
                );
                if n.state == St::Revoked {
                    assert_eq!(
                        reason(&revoked.expect_err(&at)),
                        "LIFECYCLE_TRANSITION_INVALID",
                        "{at}"
                    );
                } else {
                    revoked.expect(&at);
                    m.notes[i].state = St::Revoked;
                    m.notes[i].version += 1;
                }
                let after = eligible(&m);
                let got = recalled.expect(&at).into_inner();
                let seen: BTreeSet<String> = ids(&got.notes).into_iter().collect();
                assert!(
                    seen == before || seen == after,
                    "{at}: {seen:?} is neither {before:?} nor {after:?}"
                );
                let selection = got
                    .notes
                    .iter()
                    .map(|r| {
                        let n = r.note.as_ref().expect("note");
                        (n.revision_id.clone(), n.version)
                    })
                    .collect();
                m.receipts.push((request_id, selection));
            }
            Op::Recall(w) => {
                let word = WORDS[usize::from(w)];
                let request_id = format!("q{step}");
                if m.notes.is_empty() {
                    // No intake yet: the namespace does not exist, which is not a miss.
                    let got = c.recall(recall_req(ns, &request_id, word)).await;
                    assert_eq!(reason(&got.expect_err(&at)), "NAMESPACE_NOT_FOUND", "{at}");
                    continue;
                }
                let got = recall(&mut c, ns, &request_id, word).await;
                let seen: BTreeSet<String> = ids(&got.notes).into_iter().collect();
                let want: BTreeSet<String> = m
                    .notes
                    .iter()
                    .filter(|n| n.state == St::Promoted && n.text.split(' ').any(|t| t == word))
                    .map(|n| n.id.clone())
                    .collect();
                assert_eq!(seen, want, "{at}: recall differs from the model");
                for r in &got.notes {
                    let note = r.note.as_ref().expect("note");
                    let mine = m
                        .notes
                        .iter()
                        .find(|n| n.id == note.revision_id)
                        .expect("known");
                    assert_eq!(
                        mine.state,
                        St::Promoted,
                        "{at}: an ineligible note was recalled"
                    );
                    assert_eq!((&r.text, note.version), (&mine.text, mine.version), "{at}");
                }
                let selection = got
                    .notes
                    .iter()
                    .map(|r| {
                        let n = r.note.as_ref().expect("note");
                        (n.revision_id.clone(), n.version)
                    })
                    .collect();
                m.receipts.push((request_id, selection));
            }
            Op::Resolve(i) => {
                if m.receipts.is_empty() {
                    continue;
                }
                let (request_id, selection) = m.receipts[i % m.receipts.len()].clone();
                let got = resolve(&mut c, ns, &request_id).await;
                let verdict = selection.iter().find_map(|(id, version)| {
                    let n = m.notes.iter().find(|n| &n.id == id).expect("known");
                    match n.state {
                        St::Revoked => Some("RECEIPT_NOTE_REVOKED"),
                        St::Archived { superseded: true } => Some("RECEIPT_NOTE_SUPERSEDED"),
                        St::Archived { superseded: false } => Some("RECEIPT_NOTE_ARCHIVED"),
                        St::Candidate => Some("RECEIPT_NOTE_CHANGED"),
                        St::Promoted if n.version != *version => Some("RECEIPT_NOTE_CHANGED"),
                        St::Promoted => None,
                    }
                });
                match verdict {
                    Some(want) => assert_eq!(reason(&got.expect_err(&at)), want, "{at}"),
                    None => {
                        let got = got.expect(&at);
                        let resolved: Vec<String> = ids(&got.notes);
                        let selected: Vec<String> =
                            selection.iter().map(|(id, _)| id.clone()).collect();
                        assert_eq!(
                            resolved, selected,
                            "{at}: resolution replaced the selection"
                        );
                        for r in &got.notes {
                            let id = &r.note.as_ref().expect("note").revision_id;
                            let mine = m.notes.iter().find(|n| &n.id == id).expect("known");
                            assert_eq!(
                                mine.state,
                                St::Promoted,
                                "{at}: an ineligible note resolved"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn random_interleavings_never_show_an_ineligible_note() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = rt.block_on(stack());
    let cases = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            let ns = format!("m{}", cases.fetch_add(1, Ordering::SeqCst));
            rt.block_on(run(&s, &ns, ops));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(cases.load(Ordering::SeqCst) >= 24);
}
