//! Places for long-lived response streams (Ward's `WatchConsents`, the Dispatcher's
//! `WatchDispatchEvents`, the Orchestrator's `WatchTransitions`), fair between principals.
//!
//! An office serves at most `limit` open streams, and one principal holds at most `share` of
//! them, so a principal that opens streams as fast as it can fills its share and no more: the
//! rest of the places stay open to everyone else (the operator first of all). A place is held
//! by a [`StreamPlace`] until it is dropped, whatever ends the stream. Both refusals are
//! `RESOURCE_EXHAUSTED`, with the shared reasons `STREAM_LIMIT_REACHED` and
//! `STREAM_SHARE_REACHED` (`lychd_refusal::shared`): [`Refused`] says which, and an office whose
//! `refusals!` names `streams [Limit, Share]` turns it into its error with `?`.
//!
//! Counting is O(1) per open and close; at most `limit` principals are held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Most streams an office may be configured to serve at once.
pub const MAX_LIMIT: usize = 10_000;

/// The share a principal gets when the configuration names none: a quarter of the places,
/// rounded up (16 of the default 64), at least one.
pub fn default_share(limit: usize) -> usize {
    limit.div_ceil(4).max(1)
}

/// Checks a configured `limit` (1..=[`MAX_LIMIT`]) and `share` (1..=`limit`, or
/// [`default_share`] when unset); the error names the field and what it must be.
pub fn check(limit: usize, share: Option<usize>) -> Result<(usize, usize), (&'static str, String)> {
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(("stream_limit", format!("must be 1..={MAX_LIMIT}")));
    }
    let share = share.unwrap_or_else(|| default_share(limit));
    if !(1..=limit).contains(&share) {
        return Err(("stream_share", "must be 1..=stream_limit".to_owned()));
    }
    Ok((limit, share))
}

/// Why a stream was refused its place (`Limit`: every place of the office is taken; `Share`:
/// the caller holds its whole share already, others may still open).
pub use lychd_refusal::shared::StreamRefused as Refused;

#[derive(Debug, Default)]
struct Places {
    open: usize,
    by: HashMap<String, usize>,
}

/// The places of one office's streams (all its streaming RPCs share them).
#[derive(Debug, Clone)]
pub struct StreamLimit {
    places: Arc<Mutex<Places>>,
    limit: usize,
    share: usize,
}

impl StreamLimit {
    /// `limit` places, at most `share` per principal (`share` is clamped to 1..=`limit`).
    pub fn new(limit: usize, share: usize) -> Self {
        StreamLimit {
            places: Arc::default(),
            limit: limit.max(1),
            share: share.clamp(1, limit.max(1)),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn share(&self) -> usize {
        self.share
    }

    /// A place for a stream of `principal` (its id), or why not. A full office is reported
    /// before a full share: the caller cannot open one anywhere either way.
    pub fn open(&self, principal: &str) -> Result<StreamPlace, Refused> {
        let mut places = self.lock();
        if places.open >= self.limit {
            return Err(Refused::Limit);
        }
        let held = places.by.get(principal).copied().unwrap_or(0);
        if held >= self.share {
            return Err(Refused::Share);
        }
        places.open += 1;
        places.by.insert(principal.to_owned(), held + 1);
        Ok(StreamPlace {
            places: self.places.clone(),
            principal: principal.to_owned(),
        })
    }

    /// Open streams now (all principals).
    pub fn open_now(&self) -> usize {
        self.lock().open
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Places> {
        self.places.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One stream's place, given back when dropped.
#[derive(Debug)]
pub struct StreamPlace {
    places: Arc<Mutex<Places>>,
    principal: String,
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        let mut places = self.places.lock().unwrap_or_else(PoisonError::into_inner);
        places.open -= 1;
        if let Some(held) = places.by.get_mut(&self.principal) {
            *held -= 1;
            if *held == 0 {
                places.by.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_fills_its_share_and_others_keep_theirs() {
        let l = StreamLimit::new(4, 2);
        let a1 = l.open("a").expect("a1");
        let _a2 = l.open("a").expect("a2");
        assert_eq!(l.open("a").unwrap_err(), Refused::Share);
        let _b1 = l.open("b").expect("b1");
        let _b2 = l.open("b").expect("b2");
        // Full: the office's limit is named first, whoever asks.
        assert_eq!(l.open("c").unwrap_err(), Refused::Limit);
        assert_eq!(l.open("a").unwrap_err(), Refused::Limit);
        drop(a1);
        assert_eq!(l.open_now(), 3);
        assert_eq!(l.open("b").unwrap_err(), Refused::Share);
        let _c = l.open("c").expect("a freed place is anyone's");
    }

    #[test]
    fn places_are_given_back_and_no_principal_is_kept() {
        let l = StreamLimit::new(3, 3);
        let held: Vec<_> = (0..3).map(|_| l.open("a").expect("open")).collect();
        assert_eq!(l.open("a").unwrap_err(), Refused::Limit);
        drop(held);
        assert_eq!(l.open_now(), 0);
        assert!(l.lock().by.is_empty());
    }

    #[test]
    fn configuration_is_checked() {
        assert_eq!(check(64, None), Ok((64, 16)));
        assert_eq!(check(1, None), Ok((1, 1)));
        assert_eq!(check(2, None), Ok((2, 1)));
        assert_eq!(check(8, Some(8)), Ok((8, 8)));
        assert_eq!(check(0, None).unwrap_err().0, "stream_limit");
        assert_eq!(check(MAX_LIMIT + 1, None).unwrap_err().0, "stream_limit");
        assert_eq!(check(8, Some(0)).unwrap_err().0, "stream_share");
        assert_eq!(check(8, Some(9)).unwrap_err().0, "stream_share");
    }
}
