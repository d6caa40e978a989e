//! Fitting ranked notes to a character budget, and judging a receipt's selection again.
//!
//! Notes are whole: a note that does not fit the remaining budget is omitted (and reported),
//! never cut; later, shorter notes may still fit. The rank order is the store's (score
//! descending, revision id ascending) and is kept.

use uuid::Uuid;

use super::lifecycle::State;

/// What the budget did with ranked notes of the given lengths: indexes kept, indexes omitted.
pub fn fit(chars: &[usize], max_chars: usize) -> (Vec<usize>, Vec<usize>) {
    let mut left = max_chars;
    let (mut kept, mut omitted) = (Vec::new(), Vec::new());
    for (i, &n) in chars.iter().enumerate() {
        if n <= left {
            left -= n;
            kept.push(i);
        } else {
            omitted.push(i);
        }
    }
    (kept, omitted)
}

/// One selected revision as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub revision: Uuid,
    pub state: State,
    pub version: i64,
    pub superseded: bool,
    /// The projection digest of its current text (`None`: no text held).
    pub projection: Option<[u8; 32]>,
}

/// Why a selection cannot be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    Revoked,
    Archived,
    Superseded,
    /// Still promoted, but not the version or projection selected (or gone).
    Changed,
}

/// Is `now` exactly what a receipt selected (`version`, `projection`)? The first reason in
/// rank order that is not, otherwise `Ok`. A selected revision that no longer exists is
/// `current = None`.
pub fn still_selected(
    current: Option<&Current>,
    version: i64,
    projection: &[u8; 32],
) -> Result<(), Stale> {
    let Some(c) = current else {
        return Err(Stale::Changed);
    };
    match c.state {
        State::Revoked => Err(Stale::Revoked),
        State::Archived if c.superseded => Err(Stale::Superseded),
        State::Archived => Err(Stale::Archived),
        State::Candidate => Err(Stale::Changed),
        State::Promoted if c.version != version || c.projection.as_ref() != Some(projection) => {
            Err(Stale::Changed)
        }
        State::Promoted => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_notes_are_fitted_and_omissions_reported() {
        assert_eq!(fit(&[5, 10, 3], 9), (vec![0, 2], vec![1]));
        assert_eq!(fit(&[5, 4], 9), (vec![0, 1], vec![]));
        assert_eq!(fit(&[10], 9), (vec![], vec![0]));
        assert_eq!(fit(&[], 9), (vec![], vec![]));
    }

    #[test]
    fn a_selection_is_refused_for_each_kind_of_change() {
        let p = [7u8; 32];
        let cur = |state, version, superseded, projection| Current {
            revision: Uuid::nil(),
            state,
            version,
            superseded,
            projection,
        };
        let ok = cur(State::Promoted, 2, false, Some(p));
        assert_eq!(still_selected(Some(&ok), 2, &p), Ok(()));
        assert_eq!(still_selected(None, 2, &p), Err(Stale::Changed));
        for (c, want) in [
            (cur(State::Revoked, 3, false, None), Stale::Revoked),
            (cur(State::Archived, 3, false, Some(p)), Stale::Archived),
            (cur(State::Archived, 3, true, Some(p)), Stale::Superseded),
            (cur(State::Promoted, 3, false, Some(p)), Stale::Changed),
            (
                cur(State::Promoted, 2, false, Some([8; 32])),
                Stale::Changed,
            ),
            (cur(State::Candidate, 2, false, Some(p)), Stale::Changed),
        ] {
            assert_eq!(still_selected(Some(&c), 2, &p), Err(want), "{c:?}");
        }
    }
}
