//! Backup and restore (issue 30 item 4), as `docs/operations.md` ("Backup and restore") tells
//! operators: a backup taken while leases, consents and notes flow (`pg_dumpall --roles-only`,
//! `pg_dump -Fc`, no office stopped), restored into a fresh cluster (`psql` for the roles,
//! `pg_restore --create`), the offices started on it with nothing but their database URL
//! changed — and every lease, consent, HelmLoop record and Archive note acknowledged before the
//! backup began is there in the state it was acknowledged in, with the open containment.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lychd_proto::archive::v1 as ar;
use lychd_proto::dispatcher::v1 as di;
use lychd_proto::helmloop::v1 as hl;
use lychd_proto::orchestrator::v1 as or;
use lychd_proto::ward::v1 as wa;
use lychd_runtime::Office;
use lychd_testkit::Sandbox;
use lychd_testkit::backup::{FreshCluster, dump, dump_roles, restore_schema};
use lychd_testkit::simllama::SimLlama;
use nix::sys::signal::Signal;

use crate::channel_with;

/// What an office acknowledged, and when.
#[derive(Debug, Clone)]
enum Acked {
    Lease { id: String, released: bool },
    Consent { id: String, state: wa::ConsentState },
    Note { revision: String },
}

fn registry(endpoint: &str) -> String {
    format!(
        "[office]\n[[office.animators]]\nname = \"gpu0\"\nsource = \"soulstone\"\n\
         dialect = \"llama_cpp\"\nendpoint = \"{endpoint}\"\ndedicated = true\n\
         [[office.capabilities]]\nanimator = \"gpu0\"\nfamily = \"chat\"\nmodel_id = \"m\"\n"
    )
}

fn lease_request(n: u64) -> di::LeaseRequest {
    di::LeaseRequest {
        demand: Some(di::Demand {
            capability_key: "gpu0:chat:m".into(),
            ..Default::default()
        }),
        holder: "loader".into(),
        run_id: "run-1".into(),
        attempt_id: "1".into(),
        priority: 50,
        ttl_seconds: 600,
        request_id: format!("load-{n}"),
    }
}

fn proposal(n: u64) -> wa::ProposeEffectRequest {
    wa::ProposeEffectRequest {
        run_id: "run-1".into(),
        effect_owner: "runner".into(),
        effect_id: "write-report".into(),
        effect_revision: 1,
        tool_name: "fs.write".into(),
        deferred_call_id: format!("call-{n}"),
        arguments_json: format!("{{\"n\": {n}}}").into_bytes(),
        effect_class: wa::EffectClass::Standard as i32,
        binding: None,
    }
}

fn intake(n: u64) -> ar::IntakeRequest {
    ar::IntakeRequest {
        namespace: "ops".into(),
        request_id: format!("intake-{n}"),
        source_key: format!("doc://load/{n}"),
        source_revision: "1".into(),
        text: format!("note number {n} of the backup under load"),
        producer: "operator".into(),
        classification: "public".into(),
        observed_at: Some(prost_types::Timestamp {
            seconds: 1_796_000_000,
            nanos: 0,
        }),
    }
}

/// Leases, consents and notes, one each per turn, until `stop`; every acknowledgement with the
/// instant it arrived.
async fn load(
    sandbox_token: String,
    proposer_token: String,
    ends: Endpoints,
    stop: Arc<AtomicBool>,
) -> Vec<(Instant, Acked)> {
    let mut d = di::dispatcher_client::DispatcherClient::new(channel_with(
        &ends.dispatcher,
        &sandbox_token,
    ));
    let mut w = wa::ward_client::WardClient::new(channel_with(&ends.ward, &sandbox_token));
    let mut p = wa::ward_client::WardClient::new(channel_with(&ends.ward, &proposer_token));
    let mut a = ar::archive_client::ArchiveClient::new(channel_with(&ends.archive, &sandbox_token));
    let mut acked = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let granted = d.lease(lease_request(n)).await.expect("lease").into_inner();
        let Some(di::lease_response::Outcome::Granted(g)) = granted.outcome else {
            panic!("a warm capability is granted: {granted:?}");
        };
        acked.push((
            Instant::now(),
            Acked::Lease {
                id: g.lease_id.clone(),
                released: false,
            },
        ));
        if n.is_multiple_of(2) {
            d.release_lease(di::ReleaseLeaseRequest {
                lease_id: g.lease_id.clone(),
                holder: "loader".into(),
            })
            .await
            .expect("release");
            acked.push((
                Instant::now(),
                Acked::Lease {
                    id: g.lease_id,
                    released: true,
                },
            ));
        }
        let consent = p
            .propose_effect(proposal(n))
            .await
            .expect("propose")
            .into_inner()
            .consent
            .expect("consent");
        acked.push((
            Instant::now(),
            Acked::Consent {
                id: consent.consent_id.clone(),
                state: wa::ConsentState::Pending,
            },
        ));
        if n % 3 != 2 {
            let verdict = if n.is_multiple_of(3) {
                wa::Verdict::Approve
            } else {
                wa::Verdict::Deny
            };
            let state = if n.is_multiple_of(3) {
                wa::ConsentState::Granted
            } else {
                wa::ConsentState::Denied
            };
            w.decide(wa::DecideRequest {
                consent_id: consent.consent_id.clone(),
                verdict: verdict as i32,
                review_digest: consent.binding_digest.clone(),
            })
            .await
            .expect("decide");
            acked.push((
                Instant::now(),
                Acked::Consent {
                    id: consent.consent_id,
                    state,
                },
            ));
        }
        let note = a
            .intake(intake(n))
            .await
            .expect("intake")
            .into_inner()
            .note
            .expect("note");
        acked.push((
            Instant::now(),
            Acked::Note {
                revision: note.revision_id,
            },
        ));
        n += 1;
    }
    acked
}

#[derive(Clone)]
struct Endpoints {
    dispatcher: String,
    ward: String,
    archive: String,
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_taken_under_load_restores_into_a_fresh_cluster_with_everything_committed() {
    let sim = SimLlama::serving("m").await;
    let mut sandbox = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Orchestrator)
        .office(Office::Archive)
        .office(Office::HelmLoop)
        .peer(Office::Orchestrator, Office::Dispatcher)
        .config_text(Office::Dispatcher, registry(&sim.endpoint()))
        .start()
        .await;
    let mut admin = sandbox.admin();
    for (action, object) in lychd::grants::OPERATOR_GRANTS {
        let (audience, verb) = action.split_once(':').expect("office:verb");
        admin
            .ensure_assignment(&sandbox.operator_id, action, object, audience, verb)
            .await
            .expect("assign");
    }
    let proposer = admin
        .ensure_principal(wa::PrincipalKind::Service, "runner-1")
        .await
        .expect("proposer");
    admin
        .ensure_assignment(
            &proposer,
            "ward:propose",
            "effect:runner",
            "ward",
            "propose",
        )
        .await
        .expect("assign");
    let credential = admin.issue_standing(&proposer).await.expect("credential");
    let ward = sandbox.office(Office::Ward).endpoint();
    let proposer_token = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&ward).expect("endpoint"),
        &credential,
        0,
        &["ward"],
    )
    .await
    .expect("session")
    .token;

    // HelmLoop records, and an open containment left by a transition that could not be proved.
    let mut h = hl::helm_loop_client::HelmLoopClient::new(channel_with(
        &sandbox.office(Office::HelmLoop).endpoint(),
        &sandbox.token,
    ));
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/helmloop/records");
    let mut records = Vec::new();
    for name in [
        "evidence-record-v1.json",
        "execution-receipt-v1.json",
        "reconciliation-record-v1.json",
    ] {
        let body = std::fs::read(root.join(name)).expect("fixture");
        let appended = h
            .append_records(hl::AppendRecordsRequest {
                records: vec![body],
            })
            .await
            .expect("append")
            .into_inner();
        let r = &appended.results[0];
        records.push((r.record_type.clone(), r.id.clone()));
    }
    let mut su = sandbox.db.superuser().await;
    let contained = "c0ffee00c0ffee00c0ffee00c0ffee00";
    sqlx::query(
        "INSERT INTO orchestrator.transitions (id, capability_key, priority, requested_by, action,
             phase, config_digest, target_animator, evict, launch, expected_active, affected)
         VALUES ($1, 'gpu0:chat:m', 50, 'operator', 'HARD_SWAP', 'contained_uncertain',
                 'sha256:x', 'gpu0', '{}', '{gpu0}', '{}', '{gpu0}')",
    )
    .bind(contained)
    .execute(&mut su)
    .await
    .expect("transition");
    sqlx::query(
        "INSERT INTO orchestrator.containments (transition_id, cause) VALUES ($1, 'uncertain')",
    )
    .bind(contained)
    .execute(&mut su)
    .await
    .expect("containment");

    // Load, and the backup in the middle of it.
    let ends = Endpoints {
        dispatcher: sandbox.office(Office::Dispatcher).endpoint(),
        ward: ward.clone(),
        archive: sandbox.office(Office::Archive).endpoint(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let loader = tokio::spawn(load(
        sandbox.token.clone(),
        proposer_token.clone(),
        ends,
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let files = tempfile::tempdir().expect("temp dir");
    let (roles, data) = (
        files.path().join("roles.sql"),
        files.path().join("lychd.dump"),
    );
    let db = sandbox.db.clone();
    let began = Instant::now();
    let (r, d) = (roles.clone(), data.clone());
    tokio::task::spawn_blocking(move || {
        dump_roles(&db, &r);
        dump(&db, None, &d);
    })
    .await
    .expect("backup");
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = loader.await.expect("load");
    let before: Vec<&Acked> = acked
        .iter()
        .filter(|(t, _)| *t < began)
        .map(|(_, a)| a)
        .collect();
    assert!(
        before.len() > 20,
        "load flowed before the backup: {}",
        before.len()
    );
    assert!(acked.len() > before.len(), "and while it was taken");

    // A fresh cluster; the offices moved onto it by their database URL alone.
    let fresh = tokio::task::spawn_blocking(FreshCluster::start)
        .await
        .expect("cluster");
    let (r, d) = (roles.clone(), data.clone());
    let fresh = tokio::task::spawn_blocking(move || {
        fresh.restore(&r, &d);
        fresh
    })
    .await
    .expect("restore");
    let old = format!("@{}:{}/", sandbox.db.host, sandbox.db.port);
    let new = format!("@127.0.0.1:{}/", fresh.port);
    for office in [
        Office::Ward,
        Office::Dispatcher,
        Office::Orchestrator,
        Office::Archive,
        Office::HelmLoop,
    ] {
        let path = sandbox.office(office).config_path.clone();
        let text = std::fs::read_to_string(&path).expect("config");
        assert!(text.contains(&old), "{office} names its database");
        std::fs::write(&path, text.replace(&old, &new)).expect("config");
        sandbox.restart(office, Signal::SIGTERM).await;
    }
    let restored = |office| sandbox.office(office).endpoint();
    let mut d = di::dispatcher_client::DispatcherClient::new(channel_with(
        &restored(Office::Dispatcher),
        &sandbox.token,
    ));
    let mut w =
        wa::ward_client::WardClient::new(channel_with(&restored(Office::Ward), &sandbox.token));
    let mut a = ar::archive_client::ArchiveClient::new(channel_with(
        &restored(Office::Archive),
        &sandbox.token,
    ));
    let mut h = hl::helm_loop_client::HelmLoopClient::new(channel_with(
        &restored(Office::HelmLoop),
        &sandbox.token,
    ));
    let mut o = or::orchestrator_client::OrchestratorClient::new(channel_with(
        &restored(Office::Orchestrator),
        &sandbox.token,
    ));

    // Proof that the offices read the fresh cluster: rows written after the backup are absent.
    let mut fresh_db: sqlx::PgConnection = sqlx::Connection::connect(&fresh.url(&sandbox.db.name))
        .await
        .expect("fresh");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM archive.note_revisions")
        .fetch_one(&mut fresh_db)
        .await
        .expect("count");
    let notes_acked = acked
        .iter()
        .filter(|(_, a)| matches!(a, Acked::Note { .. }))
        .count() as i64;
    assert!(
        count < notes_acked,
        "the fresh cluster holds the backup, not what came after it"
    );

    for a_ in &before {
        match a_ {
            Acked::Lease { id, released } => {
                let lease = d
                    .get_lease(di::GetLeaseRequest {
                        lookup: Some(di::get_lease_request::Lookup::LeaseId(id.clone())),
                    })
                    .await
                    .unwrap_or_else(|e| panic!("lease {id}: {e}"))
                    .into_inner()
                    .lease
                    .expect("lease");
                if *released {
                    assert_eq!(lease.state, di::LeaseState::Released as i32, "{id}");
                }
            }
            Acked::Consent { id, state } => {
                let consent = w
                    .get_consent(wa::GetConsentRequest {
                        consent_id: id.clone(),
                    })
                    .await
                    .unwrap_or_else(|e| panic!("consent {id}: {e}"))
                    .into_inner()
                    .consent
                    .expect("consent");
                if *state != wa::ConsentState::Pending {
                    assert_eq!(consent.state, *state as i32, "{id}");
                }
            }
            Acked::Note { revision } => {
                a.get_note(ar::GetNoteRequest {
                    namespace: "ops".into(),
                    revision_id: revision.clone(),
                })
                .await
                .unwrap_or_else(|e| panic!("note {revision}: {e}"));
            }
        }
    }
    for (record_type, id) in &records {
        let found = h
            .get_record(hl::GetRecordRequest {
                record_type: record_type.clone(),
                id: id.clone(),
            })
            .await
            .expect("record")
            .into_inner();
        assert_eq!(found.records.len(), 1, "{record_type} {id}");
    }
    let open = o
        .list_containments(or::ListContainmentsRequest {
            include_recovered: false,
        })
        .await
        .expect("containments")
        .into_inner()
        .containments;
    assert!(
        open.iter().any(|c| c.transition_id == contained),
        "the open containment survived: {open:?}"
    );
    // The restored stack keeps working: a new lease and a new consent.
    let again = d
        .lease(lease_request(1_000_000))
        .await
        .expect("lease")
        .into_inner();
    assert!(
        matches!(again.outcome, Some(di::lease_response::Outcome::Granted(_))),
        "{again:?}"
    );
    let mut p =
        wa::ward_client::WardClient::new(channel_with(&restored(Office::Ward), &proposer_token));
    p.propose_effect(proposal(1_000_000))
        .await
        .expect("propose after restore");
    sandbox.stop().await;
}

/// One office's schema alone (`docs/operations.md`, "One office's schema alone"): dumped while
/// the Archive serves, restored after the office is stopped and its schema dropped. The notes
/// taken before the dump are back; the one taken after it is gone (the documented rollback);
/// the office serves again on its restored schema.
#[tokio::test(flavor = "multi_thread")]
async fn one_offices_schema_restores_alone_to_its_backups_moment() {
    let mut sandbox = Sandbox::builder().office(Office::Archive).start().await;
    let mut admin = sandbox.admin();
    for action in ["archive:intake", "archive:inspect"] {
        let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        admin
            .ensure_assignment(&sandbox.operator_id, action, "namespace:*", "archive", verb)
            .await
            .expect("assign");
    }
    let endpoint = sandbox.office(Office::Archive).endpoint();
    let mut a = ar::archive_client::ArchiveClient::new(channel_with(&endpoint, &sandbox.token));
    let mut before = Vec::new();
    for n in 0..3 {
        let note = a
            .intake(intake(n))
            .await
            .expect("intake")
            .into_inner()
            .note
            .expect("note");
        before.push(note.revision_id);
    }
    let files = tempfile::tempdir().expect("temp dir");
    let file = files.path().join("archive.dump");
    let (db, f) = (sandbox.db.clone(), file.clone());
    tokio::task::spawn_blocking(move || dump(&db, Some("archive"), &f))
        .await
        .expect("dump");
    let after = a
        .intake(intake(3))
        .await
        .expect("intake")
        .into_inner()
        .note
        .expect("note")
        .revision_id;

    let p = sandbox.office_mut(Office::Archive);
    p.signal(Signal::SIGTERM);
    p.wait_exit(Duration::from_secs(30))
        .await
        .expect("the archive stops");
    let (db, f) = (sandbox.db.clone(), file.clone());
    tokio::task::spawn_blocking(move || restore_schema(&db, "archive", &f))
        .await
        .expect("restore");
    let restarted = sandbox.start_another(Office::Archive).await;
    let mut a =
        ar::archive_client::ArchiveClient::new(channel_with(&restarted.endpoint(), &sandbox.token));
    let get = |revision: &str| ar::GetNoteRequest {
        namespace: "ops".into(),
        revision_id: revision.to_owned(),
    };
    for revision in &before {
        a.get_note(get(revision))
            .await
            .expect("a note from before the backup");
    }
    let gone = a
        .get_note(get(&after))
        .await
        .expect_err("taken after the backup");
    assert_eq!(lychd_testkit::refusal::reason(&gone), "NOTE_NOT_FOUND");
    // The restored schema serves writes again (its grants and default privileges came back).
    a.intake(intake(4)).await.expect("intake after the restore");
    restarted.stop().await.expect("stops");
    sandbox.stop().await;
}
