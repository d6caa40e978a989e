//! The one refusal vocabulary of every office and of `lychd-auth`.
//!
//! - [`Reason`]: one stable `ErrorInfo.reason` with its gRPC code and meaning. An office declares
//!   its refusals with [`refusals!`]: one row per reason makes its constant, its catalogue entry,
//!   its error variant and its status. [`COMMON`] are those every office answers (bad input,
//!   database failures, unknown outcomes); [`shared`] those several offices opt into (stream
//!   places, paging, request ids). [`reasons!`] declares bare reasons (`lychd-auth`, the wire).
//! - [`Refusals`]: an office's `ErrorInfo.domain` and catalogue; the only builder of refusal
//!   statuses ([`Refusals::refuse`], [`Refusals::invalid`], [`Refusals::database`]).
//! - [`Violations`]: every bad field of a request, collected while it is decoded into a typed
//!   command, so a refusal names them all at once (bounded: at most [`MAX_LISTED`] are listed).
//! - [`bounds`]: the ranges of numbers and instants every office checks at intake.
//! - [`DbFailure`]: the one classifier of database errors (by SQLSTATE and connection state).
//! - [`commit`], [`ambiguous`], [`AmbiguousWrite`]: how a write whose answer was lost (the
//!   connection failed after `COMMIT` or a single-statement write was sent) is told apart from a
//!   failure before anything was sent: the first is `OUTCOME_UNKNOWN`, the second
//!   `DATABASE_UNAVAILABLE`.
//!
//! Messages are lowercase and never carry a secret, a token or the refused value. The catalogue
//! of each domain is listed in `docs/refusals.md`, whose tables [`with_tables`] renders from the
//! catalogues; [`undocumented`] names what differs.
//!
//! Invariant: knows no office's business; builds statuses, decides nothing.

pub mod bounds;
mod declare;
mod docs;

pub use docs::{office_table, render_table, undocumented, with_tables};

#[doc(hidden)]
pub mod __private {
    pub use sqlx::Error as SqlxError;
    pub use tonic::Status;
    pub use tracing;

    /// `map(x)`, with `map`'s argument type taken from `x` (a `custom` row's closure).
    pub fn apply<T>(x: T, map: impl FnOnce(T) -> Status) -> Status {
        map(x)
    }
}

use std::borrow::Cow;
use std::collections::HashMap;

pub use tonic::Code;
use tonic::Status;
use tonic_types::{ErrorDetails, StatusExt};

/// One stable refusal reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reason {
    /// `ErrorInfo.reason`: `UPPER_SNAKE`, never renamed once published.
    pub name: &'static str,
    /// The gRPC status code it is answered with.
    pub code: Code,
    /// What it means for the caller (also its default message, lowercase).
    pub meaning: &'static str,
}

/// Declares reasons as constants plus `pub const OWN: &[Reason]`, their catalogue. A reason
/// answered with two codes (Ward's `PRINCIPAL_REVOKED`) names its wire name explicitly:
///
/// ```
/// lychd_refusal::reasons! {
///     /// no lease has this id
///     LEASE_NOT_FOUND = NotFound;
///     /// the principal is revoked: nothing more may be issued to it
///     PRINCIPAL_REVOKED_ADMIN("PRINCIPAL_REVOKED") = FailedPrecondition;
/// }
/// assert_eq!(OWN, [LEASE_NOT_FOUND, PRINCIPAL_REVOKED_ADMIN]);
/// assert_eq!(PRINCIPAL_REVOKED_ADMIN.name, "PRINCIPAL_REVOKED");
/// assert_eq!(LEASE_NOT_FOUND.meaning, "no lease has this id");
/// ```
#[macro_export]
macro_rules! reasons {
    ($( #[doc = $meaning:literal] $name:ident $(($wire:literal))? = $code:ident; )*) => {
        $(
            #[doc = $meaning]
            pub const $name: $crate::Reason = $crate::Reason {
                name: $crate::__wire_name!($name $($wire)?),
                code: $crate::Code::$code,
                meaning: $meaning.trim_ascii(),
            };
        )*
        /// This catalogue's own reasons, in declaration order.
        pub const OWN: &[$crate::Reason] = &[$($name),*];
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wire_name {
    ($name:ident) => {
        stringify!($name)
    };
    ($name:ident $wire:literal) => {
        $wire
    };
}

/// Reasons every office shares.
pub mod common {
    reasons! {
        /// the request has bad fields (each named in the field violations); nothing changed
        INVALID_ARGUMENT = InvalidArgument;
        /// a concurrent change conflicted with this one; nothing changed; retry
        CONCURRENT_CHANGE = Aborted;
        /// a lock was not available in time; nothing changed; retry
        LOCK_TIMEOUT = Aborted;
        /// the database cancelled the statement (statement timeout); nothing changed
        DATABASE_TIMEOUT = DeadlineExceeded;
        /// the database could not be reached; nothing changed; retry later
        DATABASE_UNAVAILABLE = Unavailable;
        /// the work ended without an answer; whether it took effect is unknown — look before retrying
        OUTCOME_UNKNOWN = Unavailable;
        /// a bug or a broken invariant (logged, never detailed)
        INTERNAL = Internal;
    }
}

/// The reasons every office's catalogue holds.
pub const COMMON: &[Reason] = common::OWN;

/// Reasons several offices answer, declared once here; an office opts into those it answers
/// (`shared [..]` in [`refusals!`]) and its catalogue holds them. Their messages are the
/// violation's description (bad input) or the office's own words (`with "…"`), so only the
/// name, the code and the meaning are shared.
pub mod shared {
    reasons! {
        /// the office serves as many streams as it may (`stream_limit`): close one, or retry later
        STREAM_LIMIT_REACHED = ResourceExhausted;
        /// the caller holds its whole share of the office's streams (`stream_share`): close one of its own; others may still open theirs
        STREAM_SHARE_REACHED = ResourceExhausted;
        /// `page.page_token` is not a token this office issued
        PAGE_TOKEN_INVALID = InvalidArgument;
        /// `page.page_size` is beyond the office's page bound
        PAGE_SIZE_OUT_OF_RANGE = InvalidArgument;
        /// `request_id` is empty, too long or not printable
        REQUEST_ID_INVALID = InvalidArgument;
        /// `priority` is outside 0..=100
        PRIORITY_OUT_OF_RANGE = InvalidArgument;
        /// a capability key (`capability_key`, `demand.capability_key`) is not a capability key
        CAPABILITY_KEY_MALFORMED = InvalidArgument;
    }

    /// Why a stream was refused its place (`lychd_runtime::streams`); an office declaring
    /// `streams [Limit, Share]` in [`refusals!`](crate::refusals) converts it into its error.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum StreamRefused {
        /// Every place of the office is taken ([`STREAM_LIMIT_REACHED`]).
        Limit,
        /// The caller holds its whole share already ([`STREAM_SHARE_REACHED`]); others may
        /// still open.
        Share,
    }

    impl StreamRefused {
        pub fn reason(self) -> crate::Reason {
            match self {
                StreamRefused::Limit => STREAM_LIMIT_REACHED,
                StreamRefused::Share => STREAM_SHARE_REACHED,
            }
        }
    }
}

/// Every shared reason (documented once under the heading `` `shared` ``).
pub const SHARED: &[Reason] = shared::OWN;

/// At most this many field violations are listed in one refusal; the count of the rest is
/// named, so a refusal of a 10,000-element list stays small.
pub const MAX_LISTED: usize = 16;

/// One bad field: its path, a stable reason and a fixed description (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub reason: Reason,
    pub description: Cow<'static, str>,
}

/// The bad fields of one request, collected while it is decoded.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[must_use = "violations are answered with `finish` or `Refusals::invalid`"]
pub struct Violations(Vec<Violation>);

impl Violations {
    pub fn new() -> Self {
        Violations(Vec::new())
    }

    /// Record `field` as bad for `reason`.
    pub fn push(
        &mut self,
        field: impl Into<String>,
        reason: Reason,
        description: impl Into<Cow<'static, str>>,
    ) {
        debug_assert_eq!(reason.code, Code::InvalidArgument, "{}", reason.name);
        self.0.push(Violation {
            field: field.into(),
            reason,
            description: description.into(),
        });
    }

    /// Keep `result`'s value, or record its error against `field` with `reason`.
    pub fn check<T, E: Into<Cow<'static, str>>>(
        &mut self,
        field: &str,
        reason: Reason,
        result: Result<T, E>,
    ) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(description) => {
                self.push(field, reason, description);
                None
            }
        }
    }

    /// [`Violations::check`] with the generic [`common::INVALID_ARGUMENT`] reason.
    pub fn require<T, E: Into<Cow<'static, str>>>(
        &mut self,
        field: &str,
        result: Result<T, E>,
    ) -> Option<T> {
        self.check(field, common::INVALID_ARGUMENT, result)
    }

    /// One bad field: how a single-field refusal is built.
    pub fn one(
        field: impl Into<String>,
        reason: Reason,
        description: impl Into<Cow<'static, str>>,
    ) -> Self {
        let mut v = Violations::new();
        v.push(field, reason, description);
        v
    }

    /// Take over `other`'s violations (a nested decoder's).
    pub fn extend(&mut self, other: Violations) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Violation> {
        self.0.iter()
    }

    /// `Ok(value())` when nothing was recorded, else the violations: how decoders end, so a
    /// typed command is only ever built from fields that all decoded.
    pub fn finish<T>(self, value: impl FnOnce() -> T) -> Result<T, Violations> {
        if self.0.is_empty() {
            Ok(value())
        } else {
            Err(self)
        }
    }
}

/// What kind of failure a database error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbFailure {
    /// 40001 serialization failure, 40P01 deadlock: nothing changed; retry.
    Conflict,
    /// 55P03 lock not available (`lock_timeout`, `NOWAIT`): nothing changed; retry.
    LockTimeout,
    /// 57014 query canceled (statement timeout).
    Timeout,
    /// Class 08 connection exceptions, 57P* operator intervention, 53300 too many connections,
    /// I/O, TLS, pool timeout or closure: the database could not be used.
    Unavailable,
    /// 23505 on the named constraint: the office decides whether it expected it.
    UniqueViolation(Option<String>),
    /// The connection failed after a `COMMIT` or a single-statement write was sent (tagged by
    /// [`ambiguous`]): it may or may not have taken effect.
    OutcomeUnknown,
    /// Anything else: a bug or a broken invariant.
    Other,
}

impl DbFailure {
    pub fn classify(e: &sqlx::Error) -> DbFailure {
        match e {
            sqlx::Error::Database(db) => match db.code().as_deref() {
                Some("40001" | "40P01") => DbFailure::Conflict,
                Some("55P03") => DbFailure::LockTimeout,
                Some("57014") => DbFailure::Timeout,
                Some("23505") => DbFailure::UniqueViolation(db.constraint().map(str::to_owned)),
                Some(c) if c.starts_with("08") || c.starts_with("57P") || c == "53300" => {
                    DbFailure::Unavailable
                }
                _ => DbFailure::Other,
            },
            sqlx::Error::Io(io) if io.get_ref().is_some_and(|e| e.is::<AmbiguousWrite>()) => {
                DbFailure::OutcomeUnknown
            }
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => DbFailure::Unavailable,
            _ => DbFailure::Other,
        }
    }

    /// The common reason a failure is answered with (an unexpected unique violation is a bug).
    pub fn reason(&self) -> Reason {
        match self {
            DbFailure::Conflict => common::CONCURRENT_CHANGE,
            DbFailure::LockTimeout => common::LOCK_TIMEOUT,
            DbFailure::Timeout => common::DATABASE_TIMEOUT,
            DbFailure::Unavailable => common::DATABASE_UNAVAILABLE,
            DbFailure::OutcomeUnknown => common::OUTCOME_UNKNOWN,
            DbFailure::UniqueViolation(_) | DbFailure::Other => common::INTERNAL,
        }
    }
}

/// A write was sent and the connection failed before its answer arrived: the database may
/// have applied it or not. Carried inside `sqlx::Error::Io` (so every store keeps returning
/// `sqlx::Error`) and recognised by [`DbFailure::classify`] as [`DbFailure::OutcomeUnknown`].
#[derive(Debug)]
pub struct AmbiguousWrite(pub sqlx::Error);

impl std::fmt::Display for AmbiguousWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connection lost after a write was sent: {}", self.0)
    }
}

impl std::error::Error for AmbiguousWrite {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// The error of a statement that writes on its own (autocommit) or of a `COMMIT`: a
/// connection-class failure ([`DbFailure::Unavailable`]) becomes [`DbFailure::OutcomeUnknown`],
/// because the write may have been applied before the answer was lost. Every other error is
/// definite (the statement failed, nothing changed) and returned as it is.
///
/// Only the statement itself may be wrapped: acquiring the connection (or `BEGIN`) sends no
/// write, so its failure stays `DATABASE_UNAVAILABLE` — acquire first, then wrap the write.
pub fn ambiguous(e: sqlx::Error) -> sqlx::Error {
    if DbFailure::classify(&e) == DbFailure::Unavailable {
        sqlx::Error::Io(std::io::Error::other(AmbiguousWrite(e)))
    } else {
        e
    }
}

/// Commit `tx`; a connection lost while the `COMMIT` was on its way is [`ambiguous`]. Every
/// office's store commits through this function.
pub async fn commit(tx: sqlx::Transaction<'_, sqlx::Postgres>) -> Result<(), sqlx::Error> {
    tx.commit().await.map_err(ambiguous)
}

/// Whether `e` is a unique violation of `constraint`.
pub fn is_unique_violation(e: &sqlx::Error, constraint: &str) -> bool {
    DbFailure::classify(e) == DbFailure::UniqueViolation(Some(constraint.to_owned()))
}

/// An office's (or `lychd-auth`'s) refusals: its `ErrorInfo.domain`, the [`shared`] reasons it
/// answers and its own catalogue (the [`COMMON`] reasons belong to every catalogue).
#[derive(Debug, Clone, Copy)]
pub struct Refusals {
    pub domain: &'static str,
    /// The [`shared`] reasons this domain answers.
    pub shared: &'static [Reason],
    pub own: &'static [Reason],
}

impl Refusals {
    pub const fn new(domain: &'static str, own: &'static [Reason]) -> Self {
        Refusals {
            domain,
            shared: &[],
            own,
        }
    }

    /// A catalogue that answers some [`shared`] reasons too (what [`refusals!`] builds).
    pub const fn with_shared(
        domain: &'static str,
        shared: &'static [Reason],
        own: &'static [Reason],
    ) -> Self {
        Refusals {
            domain,
            shared,
            own,
        }
    }

    /// Every reason this domain may answer with: common, shared, then its own.
    pub fn catalogue(&self) -> impl Iterator<Item = &'static Reason> + 'static {
        COMMON
            .iter()
            .chain(self.shared.iter())
            .chain(self.own.iter())
    }

    pub fn knows(&self, reason: &Reason) -> bool {
        self.catalogue().any(|r| r == reason)
    }

    /// A refusal for `reason` with its catalogue meaning as the message.
    pub fn refuse(&self, reason: Reason) -> Status {
        self.refuse_with(reason, reason.meaning)
    }

    /// A refusal for `reason` with a more specific (lowercase, value-free) message.
    pub fn refuse_with(&self, reason: Reason, message: &str) -> Status {
        debug_assert!(
            self.knows(&reason),
            "{} is not in {}",
            reason.name,
            self.domain
        );
        self.status(reason.code, reason.name, message, ErrorDetails::new())
    }

    /// `INVALID_ARGUMENT` naming every bad field (at most [`MAX_LISTED`], then a count); the
    /// `ErrorInfo.reason` is the first violation's.
    pub fn invalid(&self, violations: Violations) -> Status {
        let reason = violations
            .iter()
            .next()
            .map(|v| v.reason)
            .unwrap_or(common::INVALID_ARGUMENT);
        self.invalid_as(reason, violations)
    }

    /// [`Refusals::invalid`] with `reason` as the `ErrorInfo.reason` (e.g. the generic
    /// [`common::INVALID_ARGUMENT`] of an office whose field reasons are only in its violations).
    pub fn invalid_as(&self, reason: Reason, violations: Violations) -> Status {
        debug_assert!(
            self.knows(&reason),
            "{} is not in {}",
            reason.name,
            self.domain
        );
        let mut details = ErrorDetails::new();
        let mut message = String::new();
        for v in violations.iter().take(MAX_LISTED) {
            details.add_bad_request_violation(v.field.clone(), v.description.clone());
            if !message.is_empty() {
                message.push_str("; ");
            }
            message.push_str(&v.field);
            message.push_str(": ");
            message.push_str(&v.description);
        }
        let more = violations.len().saturating_sub(MAX_LISTED);
        if more > 0 {
            message.push_str(&format!("; and {more} more"));
        }
        self.status(Code::InvalidArgument, reason.name, &message, details)
    }

    /// A database failure: classified, logged (never the statement's values), answered with the
    /// common reason. Offices that expect a unique violation check [`DbFailure::classify`] first.
    pub fn database(&self, e: &sqlx::Error) -> Status {
        let failure = DbFailure::classify(e);
        let reason = failure.reason();
        match failure {
            DbFailure::Other | DbFailure::UniqueViolation(_) => {
                tracing::error!(error = %e, "database error")
            }
            DbFailure::OutcomeUnknown => {
                tracing::error!(error = %e, reason = reason.name, "write outcome unknown")
            }
            _ => tracing::warn!(error = %e, reason = reason.name, "database failure"),
        }
        self.refuse(reason)
    }

    /// A refusal whose reason is another authority's answer, passed on verbatim (`lychd-auth`
    /// relays Ward's decision reasons, which Ward's catalogue lists).
    pub fn relay(&self, code: Code, reason: &str, message: &str) -> Status {
        self.status(code, reason, message, ErrorDetails::new())
    }

    fn status(&self, code: Code, reason: &str, message: &str, mut details: ErrorDetails) -> Status {
        details.set_error_info(reason, self.domain, HashMap::new());
        Status::with_error_details(code, message, details)
    }
}

/// The status code's protocol name (`NOT_FOUND`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod sample {
        reasons! {
            /// no such thing
            THING_NOT_FOUND = NotFound;
            /// the thing's name is bad
            THING_NAME_INVALID = InvalidArgument;
        }
    }
    const SAMPLE: Refusals = Refusals::new("lychd.sample", sample::OWN);

    fn reason_of(s: &Status) -> String {
        s.get_error_details().error_info().unwrap().reason.clone()
    }

    #[test]
    fn a_refusal_carries_code_domain_reason_and_meaning() {
        let s = SAMPLE.refuse(sample::THING_NOT_FOUND);
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "no such thing");
        let info = s.get_error_details().error_info().unwrap().clone();
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("THING_NOT_FOUND", "lychd.sample")
        );
    }

    #[test]
    fn invalid_names_every_field_and_takes_the_first_reason() {
        let mut v = Violations::new();
        v.push("name", sample::THING_NAME_INVALID, "must be lowercase");
        assert_eq!(v.require("ttl", Err::<(), _>("must be positive")), None);
        let s = SAMPLE.invalid(v);
        assert_eq!(s.code(), Code::InvalidArgument);
        assert_eq!(reason_of(&s), "THING_NAME_INVALID");
        assert_eq!(
            s.message(),
            "name: must be lowercase; ttl: must be positive"
        );
        let fields: Vec<_> = s
            .get_error_details()
            .bad_request()
            .unwrap()
            .field_violations
            .iter()
            .map(|f| f.field.clone())
            .collect();
        assert_eq!(fields, ["name", "ttl"]);
    }

    #[test]
    fn a_refusal_of_ten_thousand_bad_elements_stays_small() {
        let mut v = Violations::new();
        for i in 0..10_000 {
            v.push(
                format!("names[{i}]"),
                common::INVALID_ARGUMENT,
                "is not a name",
            );
        }
        let s = SAMPLE.invalid(v);
        assert_eq!(
            s.get_error_details()
                .bad_request()
                .unwrap()
                .field_violations
                .len(),
            MAX_LISTED
        );
        assert!(s.message().ends_with("; and 9984 more"), "{}", s.message());
        assert!(s.details().len() < 2_000, "{} bytes", s.details().len());
    }

    #[test]
    fn finish_builds_only_from_clean_input() {
        assert_eq!(Violations::new().finish(|| 7), Ok(7));
        let mut v = Violations::new();
        v.require::<(), _>("x", Err("bad"));
        assert_eq!(v.clone().finish(|| 7), Err(v));
    }

    #[test]
    fn database_failures_are_classified_once() {
        assert_eq!(
            DbFailure::classify(&sqlx::Error::PoolTimedOut),
            DbFailure::Unavailable
        );
        assert_eq!(
            DbFailure::classify(&sqlx::Error::PoolClosed),
            DbFailure::Unavailable
        );
        assert_eq!(
            DbFailure::classify(&sqlx::Error::RowNotFound),
            DbFailure::Other
        );
        let s = SAMPLE.database(&sqlx::Error::PoolTimedOut);
        assert_eq!(
            (s.code(), reason_of(&s).as_str()),
            (Code::Unavailable, "DATABASE_UNAVAILABLE")
        );
        let s = SAMPLE.database(&sqlx::Error::RowNotFound);
        assert_eq!(
            (s.code(), reason_of(&s).as_str()),
            (Code::Internal, "INTERNAL")
        );
        assert_eq!(
            s.message(),
            "a bug or a broken invariant (logged, never detailed)"
        );
    }

    #[test]
    fn a_lost_answer_to_a_write_is_an_unknown_outcome() {
        let lost = || {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed",
            ))
        };
        // Before anything was sent: unavailable, nothing changed.
        assert_eq!(DbFailure::classify(&lost()), DbFailure::Unavailable);
        // After the write was sent: unknown.
        let tagged = ambiguous(lost());
        assert_eq!(DbFailure::classify(&tagged), DbFailure::OutcomeUnknown);
        let s = SAMPLE.database(&tagged);
        assert_eq!(
            (s.code(), reason_of(&s).as_str()),
            (Code::Unavailable, "OUTCOME_UNKNOWN")
        );
        // A definite failure of the write stays what it is (the statement failed).
        assert_eq!(
            DbFailure::classify(&ambiguous(sqlx::Error::RowNotFound)),
            DbFailure::Other
        );
        // Tagging twice changes nothing.
        assert_eq!(
            DbFailure::classify(&ambiguous(ambiguous(lost()))),
            DbFailure::OutcomeUnknown
        );
    }

    #[test]
    fn documentation_must_equal_the_catalogue() {
        let doc = "\
# Refusals
## `common`
| reason | code | meaning |
| --- | --- | --- |
| `INVALID_ARGUMENT` | `INVALID_ARGUMENT` | x |
| `CONCURRENT_CHANGE` | `ABORTED` | x |
| `LOCK_TIMEOUT` | `ABORTED` | x |
| `DATABASE_TIMEOUT` | `DEADLINE_EXCEEDED` | x |
| `DATABASE_UNAVAILABLE` | `UNAVAILABLE` | x |
| `OUTCOME_UNKNOWN` | `UNAVAILABLE` | x |
| `INTERNAL` | `INTERNAL` | x |
## `lychd.sample`
| reason | code | meaning |
| --- | --- | --- |
| `THING_NOT_FOUND` | `NOT_FOUND` | x |
| `THING_NAME_INVALID` | `INVALID_ARGUMENT` | x |
";
        assert_eq!(undocumented(doc, &SAMPLE), Vec::<String>::new());
        // A reason missing from the docs, one documented that the code lacks, a wrong code.
        let broken = doc
            .replace(
                "| `THING_NOT_FOUND` | `NOT_FOUND` | x |\n",
                "| `THING_GONE` | `NOT_FOUND` | x |\n",
            )
            .replace(
                "`DATABASE_TIMEOUT` | `DEADLINE_EXCEEDED`",
                "`DATABASE_TIMEOUT` | `UNAVAILABLE`",
            );
        assert_eq!(
            undocumented(&broken, &SAMPLE),
            [
                "lychd.sample: THING_NOT_FOUND (NOT_FOUND) is not documented",
                "lychd.sample: THING_GONE (NOT_FOUND) is documented but not answered",
                "common: DATABASE_TIMEOUT (DEADLINE_EXCEEDED) is not documented",
                "common: DATABASE_TIMEOUT (UNAVAILABLE) is documented but not answered",
            ]
        );
        assert_eq!(
            undocumented("# nothing", &SAMPLE),
            ["no section for `lychd.sample`", "no section for `common`"]
        );
    }
}
