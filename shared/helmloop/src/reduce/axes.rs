//! The six orthogonal state dimensions (spec §5) and their pass states
//! (resolutions §E).

macro_rules! axis_enum {
    ($(#[$doc:meta])* $name:ident { $( $variant:ident = $text:literal ),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $( #[doc = $text] $variant, )* }

        impl $name {
            /// Every state, in spec order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The state text, e.g. `COMPLETED`.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// The state named `s`.
            pub fn from_name(s: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }
    };
}

axis_enum!(
    /// What the executor did.
    Execution { NotStarted = "NOT_STARTED", Reserved = "RESERVED", Running = "RUNNING",
        Completed = "COMPLETED", Failed = "FAILED", Unknown = "UNKNOWN", Invalid = "INVALID" }
);
axis_enum!(
    /// Whether required claims are currently supported.
    Evidence { Missing = "MISSING", Fresh = "FRESH", Stale = "STALE",
        Conflicting = "CONFLICTING", Invalid = "INVALID" }
);
axis_enum!(
    /// Whether the exact action was authorized.
    Authority { Missing = "MISSING", Active = "ACTIVE", Expired = "EXPIRED", Revoked = "REVOKED",
        WrongBinding = "WRONG_BINDING", Consumed = "CONSUMED", Ambiguous = "AMBIGUOUS",
        Invalid = "INVALID" }
);
axis_enum!(
    /// What the accountable owner decided.
    Promotion { NotRequested = "NOT_REQUESTED", Pending = "PENDING", Approved = "APPROVED",
        Rejected = "REJECTED", Hold = "HOLD", Ambiguous = "AMBIGUOUS", Invalid = "INVALID" }
);
axis_enum!(
    /// What the provider and observed external state show.
    Reconciliation { NotRequired = "NOT_REQUIRED", Pending = "PENDING", Matched = "MATCHED",
        Diverged = "DIVERGED", Unknown = "UNKNOWN", Invalid = "INVALID" }
);
axis_enum!(
    /// What independent outcome evidence shows.
    ObservedOutcome { NotDue = "NOT_DUE", NotObserved = "NOT_OBSERVED", Met = "MET",
        NotMet = "NOT_MET", Mixed = "MIXED", Unknown = "UNKNOWN", Invalid = "INVALID" }
);

/// All six axes; a result always carries every one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Axes {
    /// `execution`
    pub execution: Execution,
    /// `evidence`
    pub evidence: Evidence,
    /// `authority`
    pub authority: Authority,
    /// `promotion`
    pub promotion: Promotion,
    /// `reconciliation`
    pub reconciliation: Reconciliation,
    /// `observedOutcome`
    pub observed_outcome: ObservedOutcome,
}

impl Axes {
    /// The axes reported when the evaluation frame (version, context, policy
    /// digest, transition) is unusable and no record was evaluated against it
    /// (design-inference): nothing is known, so nothing is in a pass state.
    pub const UNEVALUATED: Axes = Axes {
        execution: Execution::Unknown,
        evidence: Evidence::Missing,
        authority: Authority::Missing,
        promotion: Promotion::Hold,
        reconciliation: Reconciliation::Unknown,
        observed_outcome: ObservedOutcome::Unknown,
    };

    /// The six `(name, state)` pairs in spec order.
    pub fn pairs(&self) -> [(&'static str, &'static str); 6] {
        [
            ("execution", self.execution.as_str()),
            ("evidence", self.evidence.as_str()),
            ("authority", self.authority.as_str()),
            ("promotion", self.promotion.as_str()),
            ("reconciliation", self.reconciliation.as_str()),
            ("observedOutcome", self.observed_outcome.as_str()),
        ]
    }

    /// Whether every axis is in its pass state (resolutions §E). `authority`
    /// `MISSING` and `reconciliation` `NOT_REQUIRED` pass only when the
    /// reducer established them as such, which it reports through
    /// `authority_not_required` and `reconciliation_not_required`.
    pub fn all_pass(
        &self,
        authority_not_required: bool,
        reconciliation_not_required: bool,
    ) -> bool {
        self.execution == Execution::Completed
            && self.evidence == Evidence::Fresh
            && (self.authority == Authority::Consumed
                || (authority_not_required && self.authority == Authority::Missing))
            && self.promotion == Promotion::Approved
            && (self.reconciliation == Reconciliation::Matched
                || (reconciliation_not_required
                    && self.reconciliation == Reconciliation::NotRequired))
            && self.observed_outcome == ObservedOutcome::Met
    }
}
