//! [`refusals!`](crate::refusals): an office's refusals declared once.

/// Declares an office's refusals, one row per reason: the reason constants (`reasons::*` and
/// `reasons::OWN`, as [`reasons!`](crate::reasons) makes them), the office's catalogue
/// (`REFUSALS`), its error enum (a variant per row that names one), `Result`, and the one
/// mapping of the enum to a `tonic::Status`.
///
/// ```
/// lychd_refusal::refusals! {
///     /// The office's one error type.
///     #[derive(Debug, thiserror::Error)]
///     pub enum SampleError in "lychd.sample";
///     // Variants every office may share, defined once (see below).
///     common [InvalidArgument, invalid, Refused, Conflict, Interrupted, Database];
///     // Reasons declared once in `lychd_refusal::shared`, answered here too.
///     shared [STREAM_LIMIT_REACHED, STREAM_SHARE_REACHED, PAGE_TOKEN_INVALID];
///     // `From<shared::StreamRefused>`: which variants a refused stream place becomes.
///     streams [StreamLimit, StreamShare];
///     reasons {
///         /// no lease has this id
///         LEASE_NOT_FOUND = NotFound => LeaseNotFound;
///         /// the lease has expired
///         LEASE_EXPIRED = FailedPrecondition => LeaseExpired;
///         /// `holder` is empty, too long or not printable
///         HOLDER_INVALID = InvalidArgument;
///         /// the principal is revoked: nothing more may be issued to it
///         PRINCIPAL_REVOKED_ADMIN("PRINCIPAL_REVOKED") = FailedPrecondition => PrincipalRevoked;
///     }
///     // Variants answered with a reason declared elsewhere (own, shared or common).
///     answers {
///         /// Another principal's lease: answered as missing (no existence leak).
///         LeaseNotOwned => LEASE_NOT_FOUND;
///         StreamLimit => STREAM_LIMIT_REACHED with "the office serves as many event streams as it may";
///         StreamShare => STREAM_SHARE_REACHED;
///         FirstBodiesChanged => CONCURRENT_CHANGE;
///     }
///     // The escape hatch: a variant carrying data, mapped explicitly.
///     custom {
///         #[error("refused: {0}")]
///         Stale(u8) => |n| REFUSALS.refuse_with(reasons::LEASE_EXPIRED, if n > 1 { "long expired" } else { "just expired" });
///     }
/// }
/// use lychd_refusal::{Code, Violations};
/// use tonic::Status;
///
/// # fn main() {
/// assert_eq!(REFUSALS.domain, "lychd.sample");
/// assert_eq!(reasons::OWN.len(), 4);
/// assert!(REFUSALS.knows(&reasons::PAGE_TOKEN_INVALID) && REFUSALS.knows(&reasons::LEASE_EXPIRED));
/// let s = Status::from(SampleError::LeaseNotOwned);
/// assert_eq!((s.code(), s.message()), (Code::NotFound, "no lease has this id"));
/// let s = Status::from(SampleError::from(lychd_refusal::shared::StreamRefused::Limit));
/// assert_eq!(s.message(), "the office serves as many event streams as it may");
/// assert_eq!(Status::from(SampleError::Conflict).code(), Code::Aborted);
/// assert_eq!(Status::from(SampleError::Stale(2)).message(), "long expired");
/// let bad = SampleError::invalid("holder", reasons::HOLDER_INVALID, "must be printable");
/// assert_eq!(Status::from(bad).message(), "holder: must be printable");
/// assert_eq!(SampleError::LeaseExpired.to_string(), "the lease has expired");
/// assert_eq!(Status::from(SampleError::PrincipalRevoked).code(), Code::FailedPrecondition);
/// let _: Result<(), SampleError> = Err(Violations::one("x", lychd_refusal::common::INVALID_ARGUMENT, "bad").into());
/// # }
/// ```
///
/// A reason row is `/// meaning` then `NAME = Code;` (or `NAME("WIRE") = Code;` for a wire
/// name answered with two codes), optionally `=> Variant` and `with "message"` (the status
/// message when it is not the meaning): adding a reason is one row.
///
/// The `common` variants, each defined here once:
/// - `InvalidArgument(Violations)`: bad input (`REFUSALS.invalid`), with `From<Violations>`;
///   `invalid` adds the constructor `invalid(field, reason, description)`.
/// - `Refused(Box<Status>)`: another authority's refusal (Ward's), relayed as it was.
/// - `Conflict`: `CONCURRENT_CHANGE`.
/// - `Interrupted`: the task doing the work ended without an answer: `OUTCOME_UNKNOWN` (logged).
/// - `Internal(&'static str)`: a broken invariant, named in the log only: `INTERNAL`.
/// - `Database(sqlx::Error)`: classified by [`Refusals::database`](crate::Refusals::database),
///   with `From<sqlx::Error>`.
///
/// The enum derives `thiserror::Error` (written in the header, so a `custom` row's `#[error]`
/// may name its field); a row's `Display` is its reason's meaning. `custom` rows are `#[error(..)] Variant(Type) => map;` (one field)
/// where `map` is a closure or function `Type -> Status`.
#[macro_export]
macro_rules! refusals {
    // The common variants, one at a time: variants, status arms, impls.
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [InvalidArgument $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E
            [$($var)*
                /// Bad input; nothing changed. The status reason is the first violation's.
                #[error("invalid request")]
                InvalidArgument($crate::Violations),
            ]
            [$($arm)* $E::InvalidArgument(v) => REFUSALS.invalid(v),]
            [$($imp)*
                impl From<$crate::Violations> for $E {
                    fn from(v: $crate::Violations) -> Self {
                        $E::InvalidArgument(v)
                    }
                }
            ]
            [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [invalid $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E [$($var)*] [$($arm)*]
            [$($imp)*
                impl $E {
                    /// Bad input in one field.
                    pub fn invalid(
                        field: impl Into<String>,
                        reason: $crate::Reason,
                        description: impl Into<std::borrow::Cow<'static, str>>,
                    ) -> Self {
                        $E::InvalidArgument($crate::Violations::one(field, reason, description))
                    }
                }
            ]
            [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [Refused $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E
            [$($var)*
                /// Another authority's refusal (Ward's decision), relayed as it was.
                #[error("refused by ward")]
                Refused(Box<$crate::__private::Status>),
            ]
            [$($arm)* $E::Refused(status) => *status,]
            [$($imp)*] [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [Conflict $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E
            [$($var)*
                /// State changed under the call; nothing changed; the caller may retry.
                #[error("concurrent change; retry")]
                Conflict,
            ]
            [$($arm)* $E::Conflict => REFUSALS.refuse($crate::common::CONCURRENT_CHANGE),]
            [$($imp)*] [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [Interrupted $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E
            [$($var)*
                /// The task doing the work ended without an answer (the office is stopping, or
                /// a bug): whether it took effect is unknown — never reported as done.
                #[error("interrupted before it answered; its outcome is unknown")]
                Interrupted,
            ]
            [$($arm)* $E::Interrupted => {
                $crate::__private::tracing::error!(
                    domain = REFUSALS.domain,
                    "a task ended without an answer"
                );
                REFUSALS.refuse($crate::common::OUTCOME_UNKNOWN)
            }]
            [$($imp)*] [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [Internal $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E
            [$($var)*
                /// A broken invariant, named in the log only.
                #[error("internal invariant broken")]
                Internal(&'static str),
            ]
            [$($arm)* $E::Internal(what) => {
                $crate::__private::tracing::error!(what, domain = REFUSALS.domain, "invariant broken");
                REFUSALS.refuse($crate::common::INTERNAL)
            }]
            [$($imp)*] [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [Database $($more:ident)*] $($rest:tt)*) => {
        $crate::refusals! {
            @common $E
            [$($var)*
                /// A database failure, answered as [`lychd_refusal::DbFailure`] classifies it.
                #[error("database error")]
                Database(#[from] $crate::__private::SqlxError),
            ]
            [$($arm)* $E::Database(db) => REFUSALS.database(&db),]
            [$($imp)*] [$($more)*] $($rest)*
        }
    };
    (@common $E:ident [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*] [] $($rest:tt)*) => {
        $crate::refusals! { @emit [$($var)*] [$($arm)*] [$($imp)*] $($rest)* }
    };

    (
        @emit [$($var:tt)*] [$($arm:tt)*] [$($imp:tt)*]
        $(#[$attr:meta])*
        $vis:vis enum $Error:ident in $domain:expr;
        $(shared [$($shared:ident),* $(,)?];)?
        $(streams [$limit:ident, $share:ident $(,)?];)?
        reasons {
            $(
                #[doc = $meaning:literal]
                $name:ident $(($wire:literal))? = $code:ident $(=> $variant:ident $(with $message:literal)?)?;
            )*
        }
        $(answers {
            $(
                $(#[doc = $adoc:literal])*
                $avariant:ident => $areason:ident $(with $amessage:literal)?;
            )*
        })?
        $(custom {
            $(
                $(#[$cattr:meta])*
                $cvariant:ident $cfield:tt => $cmap:expr;
            )*
        })?
    ) => {
        /// The refusal reasons of this catalogue: its own (`OWN`, in declaration order) and
        /// the shared ones it answers (`SHARED`); the common ones belong to every catalogue.
        pub mod reasons {
            $crate::reasons! {
                $(
                    #[doc = $meaning]
                    $name $(($wire))? = $code;
                )*
            }
            $(pub use $crate::shared::{$($shared),*};)?
            /// The shared reasons this catalogue answers.
            pub const SHARED: &[$crate::Reason] = &[$($($shared),*)?];
        }

        #[doc(hidden)]
        #[allow(unused_imports)]
        mod __refusal_scope {
            pub(super) use super::reasons::*;
            pub(super) use $crate::common::*;
        }

        /// This catalogue: its domain, its shared reasons and its own.
        pub const REFUSALS: $crate::Refusals =
            $crate::Refusals::with_shared($domain, reasons::SHARED, reasons::OWN);

        $(#[$attr])*
        $vis enum $Error {
            $($var)*
            $($(
                #[doc = $meaning]
                #[error("{}", reasons::$name.meaning)]
                $variant,
            )?)*
            $($(
                $(#[doc = $adoc])*
                #[error("{}", __refusal_scope::$areason.meaning)]
                $avariant,
            )*)?
            $($(
                $(#[$cattr])*
                $cvariant $cfield,
            )*)?
        }

        /// The result of this office's work.
        pub type Result<T, E = $Error> = std::result::Result<T, E>;

        $($imp)*

        $(
            impl From<$crate::shared::StreamRefused> for $Error {
                fn from(refused: $crate::shared::StreamRefused) -> Self {
                    match refused {
                        $crate::shared::StreamRefused::Limit => $Error::$limit,
                        $crate::shared::StreamRefused::Share => $Error::$share,
                    }
                }
            }
        )?

        impl From<$Error> for $crate::__private::Status {
            fn from(e: $Error) -> Self {
                match e {
                    $($arm)*
                    $($(
                        $Error::$variant => REFUSALS.refuse_with(
                            reasons::$name,
                            $crate::__refusal_message!(reasons::$name $(, $message)?),
                        ),
                    )?)*
                    $($(
                        $Error::$avariant => REFUSALS.refuse_with(
                            __refusal_scope::$areason,
                            $crate::__refusal_message!(__refusal_scope::$areason $(, $amessage)?),
                        ),
                    )*)?
                    $($(
                        $Error::$cvariant(x) => $crate::__private::apply(x, $cmap),
                    )*)?
                }
            }
        }
    };

    (
        $(#[$attr:meta])*
        $vis:vis enum $Error:ident in $domain:expr;
        common [$($common:ident),* $(,)?];
        $($rest:tt)*
    ) => {
        $crate::refusals! {
            @common $Error [] [] [] [$($common)*]
            $(#[$attr])* $vis enum $Error in $domain; $($rest)*
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __refusal_message {
    ($reason:path) => {
        $reason.meaning
    };
    ($reason:path, $message:literal) => {
        $message
    };
}
