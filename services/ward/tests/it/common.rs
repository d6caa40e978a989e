//! A Ward database and shortcuts to its store.

use lychd_runtime::Office;
use lychd_testkit::TestDb;
use lychd_ward::domain::grammar::PrincipalName;
use lychd_ward::domain::grammar::{Action, Audience, Object, Purpose, Question};
use lychd_ward::domain::kinds::{CredentialKind, PrincipalKind};
use lychd_ward::domain::lifetime;
use lychd_ward::store::PrincipalRecord;
use lychd_ward::store::assignments::{self, Assigned};
use lychd_ward::store::credentials::{self, IssuedCredential, NewSession};
use lychd_ward::store::decision_log::DecisionLog;
use lychd_ward::store::decisions::{self, DecisionRecord};
use lychd_ward::store::principals::{self, Enrollment};
use secrecy::ExposeSecret;
use sqlx::postgres::{PgConnection, PgPool};
use uuid::Uuid;

pub struct Ward {
    pub db: TestDb,
    pub pool: PgPool,
    /// Decisions batched as the office batches them.
    pub resolver: decisions::Resolver,
    /// Where the decisions' records go (as the verifier's own log).
    pub log: DecisionLog,
}

pub async fn runtime_pool(db: &TestDb, size: u32) -> PgPool {
    let opts =
        lychd_runtime::db::connect_options(&db.runtime_url(Office::Ward), None, Office::Ward)
            .expect("runtime url");
    lychd_runtime::db::pool(opts, size)
        .await
        .expect("runtime role connects")
}

/// A grammatical question (panics on a typo in a test).
pub fn question(action: &str, object: &str, audience: &str, purpose: &str) -> Question {
    Question {
        action: Action::parse(action).expect("action"),
        object: Object::parse(object).expect("object"),
        audience: Audience::parse(audience).expect("audience"),
        purpose: Purpose::parse(purpose).expect("purpose"),
    }
}

impl Ward {
    pub async fn new() -> Self {
        Self::with_pool(8).await
    }

    pub async fn with_pool(size: u32) -> Self {
        let db = lychd_testkit::test_db().await;
        let pool = runtime_pool(&db, size).await;
        let resolver = decisions::Resolver::start(pool.clone());
        let (log, _writer) = DecisionLog::start(pool.clone());
        Ward {
            db,
            pool,
            resolver,
            log,
        }
    }

    pub async fn superuser(&self) -> PgConnection {
        self.db.superuser().await
    }

    pub async fn principal(&self, kind: PrincipalKind, name: &str) -> PrincipalRecord {
        principals::enroll(
            &self.pool,
            None,
            &Enrollment {
                kind,
                name: PrincipalName::parse(name).expect("name"),
                display_name: None,
            },
        )
        .await
        .expect("enroll")
    }

    pub async fn service(&self, name: &str) -> PrincipalRecord {
        self.principal(PrincipalKind::Service, name).await
    }

    pub async fn credential(&self, principal: Uuid, kind: CredentialKind) -> IssuedCredential {
        let ttl = lifetime::credential_ttl(kind, 0).expect("default ttl");
        credentials::issue(&self.pool, None, principal, kind, ttl)
            .await
            .expect("issue")
    }

    pub async fn exchange(&self, credential: &IssuedCredential) -> NewSession {
        credentials::exchange(
            &self.pool,
            credential.secret.expose_secret(),
            0,
            &everywhere(),
        )
        .await
        .expect("exchange")
    }

    /// A standing credential and a session from it.
    pub async fn session(&self, principal: Uuid) -> (IssuedCredential, NewSession) {
        let c = self.credential(principal, CredentialKind::Standing).await;
        let s = self.exchange(&c).await;
        (c, s)
    }

    pub async fn grant(
        &self,
        principal: Uuid,
        action: &str,
        object: &str,
        audience: &str,
        purpose: &str,
    ) -> Assigned {
        assignments::assign(
            &self.pool,
            None,
            principal,
            &question(action, object, audience, purpose),
            None,
        )
        .await
        .expect("assign")
    }

    pub async fn ask(
        &self,
        token: &str,
        (action, object, audience, purpose): (&str, &str, &str, &str),
        expected_policy_generation: Option<i64>,
    ) -> DecisionRecord {
        let d = decisions::authorize(
            &self.resolver,
            &self.log,
            &decisions::Question {
                token,
                action,
                object,
                audience,
                purpose,
                expected_policy_generation,
                asked_by: None,
            },
        )
        .await
        .expect("decision");
        // Its record is written before the test reads the audit.
        self.log.flush().await.expect("decision record written");
        d
    }

    /// Run `sql` as a superuser with triggers off (to age rows in ways the guards refuse).
    pub async fn force(&self, sql: &str, id: Uuid) {
        let mut su = self.superuser().await;
        sqlx::query("SET session_replication_role = replica")
            .execute(&mut su)
            .await
            .expect("replica mode");
        let n = sqlx::query(sql)
            .bind(id)
            .execute(&mut su)
            .await
            .expect("forced update")
            .rows_affected();
        assert_eq!(n, 1, "{sql}");
    }
}

/// The question the tests grant and ask most.
pub const LEASE: (&str, &str, &str, &str) =
    ("dispatcher:lease", "lease:l-1", "dispatcher", "lease");

/// Sessions that may be presented to every office (tests about audiences make narrower ones).
pub fn everywhere() -> lychd_ward::domain::grammar::Audiences {
    lychd_ward::domain::grammar::Audiences::parse(&lychd_runtime::Office::ALL.map(|o| o.name()))
        .expect("office names are audiences")
}
