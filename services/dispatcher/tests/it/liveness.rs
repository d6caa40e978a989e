//! The one rule of a live lease (`lychd_dispatcher::store::leases::LIVE`): not released and not
//! expired by the database clock. The rule itself, the statements that use it agreeing on every
//! kind of lease, and no statement in `src/store/` spelling it out again.

use lychd_dispatcher::domain::lease::LeaseState;
use lychd_dispatcher::store::{admission, leases};
use lychd_runtime::Office;
use sqlx::{PgPool, Row};
use uuid::Uuid;

async fn pool(db: &lychd_testkit::TestDb) -> PgPool {
    let opts = lychd_runtime::db::connect_options(
        &db.runtime_url(Office::Dispatcher),
        None,
        Office::Dispatcher,
    )
    .expect("runtime url");
    lychd_runtime::db::pool(opts, 2)
        .await
        .expect("runtime role connects")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_is_live_exactly_when_unreleased_and_expiring_after_the_database_clock() {
    let db = lychd_testkit::test_db_for(&[lychd_dispatcher::spec()]).await;
    let pool = pool(&db).await;
    // (released_at, expires_at) relative to the statement's clock, and whether it is live.
    let cases = [
        ("NULL", "now() + interval '1 hour'", true),
        ("NULL", "now() + interval '1 millisecond'", true),
        ("NULL", "now()", false),
        ("NULL", "now() - interval '1 second'", false),
        (
            "now() - interval '1 second'",
            "now() + interval '1 hour'",
            false,
        ),
        ("now()", "now() + interval '1 hour'", false),
        (
            "now() - interval '2 hours'",
            "now() - interval '1 hour'",
            false,
        ),
    ];
    for (released_at, expires_at, want) in cases {
        let live: bool = sqlx::query_scalar(&format!(
            "SELECT {live} FROM (SELECT ({released_at})::timestamptz AS released_at,
                                        ({expires_at})::timestamptz AS expires_at) AS l",
            live = leases::LIVE
        ))
        .fetch_one(&pool)
        .await
        .expect("rule evaluates");
        assert_eq!(
            live, want,
            "released_at {released_at}, expires_at {expires_at}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listing_reading_and_the_drain_count_agree_on_which_leases_are_live() {
    let db = lychd_testkit::test_db_for(&[lychd_dispatcher::spec()]).await;
    let pool = pool(&db).await;
    let animator = "liveness-animator";
    sqlx::query("INSERT INTO admission (animator) VALUES ($1)")
        .bind(animator)
        .execute(&pool)
        .await
        .expect("admission row");
    // (issued_at, expires_at, released_at) and the state a read reports.
    let kinds = [
        (
            "now() - interval '1 minute'",
            "now() + interval '1 hour'",
            "NULL",
            LeaseState::Active,
        ),
        (
            "now() - interval '2 hours'",
            "now() - interval '1 hour'",
            "NULL",
            LeaseState::Expired,
        ),
        (
            "now() - interval '1 minute'",
            "now() + interval '1 hour'",
            "now()",
            LeaseState::Released,
        ),
        (
            "now() - interval '2 hours'",
            "now() - interval '1 hour'",
            "now() - interval '90 minutes'",
            LeaseState::Released,
        ),
    ];
    let mut ids = Vec::new();
    for (issued_at, expires_at, released_at, state) in kinds {
        let id = Uuid::new_v4();
        sqlx::query(&format!(
            "INSERT INTO leases (id, capability_key, family, model_id, animator, holder,
                                 principal_id, priority, admission_generation, issued_at,
                                 expires_at, released_at)
             VALUES ($1, 'liveness-key', 'chat', 'm', $2, 'holder', 'principal', 1, 0,
                     {issued_at}, {expires_at}, {released_at})"
        ))
        .bind(id)
        .bind(animator)
        .execute(&pool)
        .await
        .expect("lease written");
        let read = leases::find(&pool, leases::Lookup::Id(id), "principal", None)
            .await
            .expect("lease read");
        assert_eq!(read.state, state, "{issued_at} {expires_at} {released_at}");
        let live: bool = sqlx::query(&format!(
            "SELECT {} AS live FROM leases l WHERE l.id = $1",
            leases::LIVE
        ))
        .bind(id)
        .fetch_one(&pool)
        .await
        .expect("rule evaluates")
        .get("live");
        assert_eq!(live, state == LeaseState::Active);
        ids.push((id, state));
    }
    let filter = leases::Filter {
        animators: &[animator.to_owned()],
        include_inactive: false,
        owner: None,
        request_id: None,
    };
    let listed: Vec<Uuid> = leases::list(&pool, filter, None, 100)
        .await
        .expect("list")
        .into_iter()
        .map(|l| l.id)
        .collect();
    let live: Vec<Uuid> = ids
        .iter()
        .filter(|(_, s)| *s == LeaseState::Active)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(listed, live, "the live listing");
    let states = admission::states(&pool, &[animator.to_owned()])
        .await
        .expect("admission");
    assert_eq!(states[0].live_leases, 1, "the drain count");
}

/// Outside the one definition (the `live!` macro in `store/mod.rs`), no statement of the store
/// states when a lease is live or expired by itself.
#[test]
fn no_store_statement_spells_the_rule_out_again() {
    let store = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let definition = "(l.released_at IS NULL AND l.expires_at > now())";
    let mut found = Vec::new();
    let mut files = Vec::new();
    let mut dirs = vec![store];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/store") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read");
        let text = text.replacen(definition, "", usize::from(path.ends_with("store/mod.rs")));
        for (n, line) in text.lines().enumerate() {
            let spelled = [
                "expires_at >",
                "expires_at <",
                "released_at IS NULL",
                "released_at IS NOT NULL",
            ]
            .iter()
            .any(|rule| line.contains(rule));
            // The released flag of a read is a column, not a liveness rule.
            if spelled && !line.contains("IS NOT NULL AS released") {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "liveness spelled outside `live!`:\n{}",
        found.join("\n")
    );
}
