//! The lifecycle of a note revision (design rule 27, "The Archive record"):
//!
//! ```text
//! candidate → promoted → archived
//!     │           │          │
//!     └───────────┴──────────┴→ revoked
//! ```
//!
//! Only a promoted revision is recalled. Every change is a compare-and-set on the revision's
//! lifecycle version, which each change increments; a revoked revision changes no more.

use std::fmt;

/// Where a revision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    Candidate,
    Promoted,
    Archived,
    Revoked,
}

impl State {
    pub const ALL: [State; 4] = [
        State::Candidate,
        State::Promoted,
        State::Archived,
        State::Revoked,
    ];

    /// The stored name (`archive.lifecycle.state`).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Candidate => "candidate",
            State::Promoted => "promoted",
            State::Archived => "archived",
            State::Revoked => "revoked",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Eligible for ordinary recall.
    pub fn recallable(self) -> bool {
        self == State::Promoted
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An explicit lifecycle change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    Promote,
    Archive,
    Revoke,
}

/// Why a change is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The revision's version is not the one the caller saw.
    VersionMismatch,
    /// The change does not apply to the revision's state.
    Transition,
}

/// The state `change` leads to from `from`, or `None` when it does not apply.
pub fn next(from: State, change: Change) -> Option<State> {
    match (from, change) {
        (State::Candidate, Change::Promote) => Some(State::Promoted),
        (State::Promoted, Change::Archive) => Some(State::Archived),
        (State::Candidate | State::Promoted | State::Archived, Change::Revoke) => {
            Some(State::Revoked)
        }
        _ => None,
    }
}

/// The compare-and-set: `change` on a revision at (`state`, `version`) expected at
/// `expected`; the new (state, version) or why not. The version is compared first: a stale
/// retry is told it is stale, never whether the change would have applied.
pub fn decide(
    state: State,
    version: i64,
    expected: i64,
    change: Change,
) -> Result<(State, i64), Refused> {
    if version != expected {
        return Err(Refused::VersionMismatch);
    }
    next(state, change)
        .map(|to| (to, version + 1))
        .ok_or(Refused::Transition)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_exactly_the_diagram() {
        let mut allowed = Vec::new();
        for from in State::ALL {
            for change in [Change::Promote, Change::Archive, Change::Revoke] {
                if let Some(to) = next(from, change) {
                    allowed.push((from, change, to));
                }
            }
        }
        assert_eq!(
            allowed,
            [
                (State::Candidate, Change::Promote, State::Promoted),
                (State::Candidate, Change::Revoke, State::Revoked),
                (State::Promoted, Change::Archive, State::Archived),
                (State::Promoted, Change::Revoke, State::Revoked),
                (State::Archived, Change::Revoke, State::Revoked),
            ]
        );
    }

    #[test]
    fn a_stale_version_is_refused_before_the_transition_is_judged() {
        assert_eq!(
            decide(State::Revoked, 3, 2, Change::Promote),
            Err(Refused::VersionMismatch)
        );
        assert_eq!(
            decide(State::Revoked, 3, 3, Change::Promote),
            Err(Refused::Transition)
        );
        assert_eq!(
            decide(State::Candidate, 1, 1, Change::Promote),
            Ok((State::Promoted, 2))
        );
    }

    #[test]
    fn only_promoted_is_recallable_and_names_round_trip() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(s));
            assert_eq!(s.recallable(), s == State::Promoted);
        }
        assert_eq!(State::parse("deleted"), None);
    }
}
