//! Following an append-only table in sequence order across uncommitted inserts (the
//! Dispatcher's dispatch events, Ward's consent changes).
//!
//! A sequence number is allocated when a statement inserts an event, but the row is only seen
//! when the statement commits; a reader that sees `n + 2` before `n + 1` may be looking at a
//! slow commit (deliver nothing yet) or at a rolled-back insert (the number never appears).
//! The rule: hold delivery at a gap for at most [`GAP_GRACE`]; a gap that outlives it is
//! taken as rolled back and skipped. Pure: the caller passes the time.

use std::time::{Duration, Instant};

/// How long a sequence gap may stay open before it is taken as a rolled-back insert.
pub const GAP_GRACE: Duration = Duration::from_secs(2);

/// The reader's position and the gap it waits at, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last sequence delivered.
    pub delivered: i64,
    gap_since: Option<Instant>,
}

impl Cursor {
    pub fn after(delivered: i64) -> Self {
        Cursor {
            delivered,
            gap_since: None,
        }
    }

    /// May the event numbered `sequence` (the next one read, in order) be delivered at `now`?
    /// `true` advances the cursor to it; `false` holds delivery (read again later).
    pub fn admit(&mut self, sequence: i64, now: Instant) -> bool {
        let contiguous = sequence == self.delivered + 1;
        let gap_expired = self
            .gap_since
            .is_some_and(|since| now.duration_since(since) >= GAP_GRACE);
        if !contiguous && !gap_expired {
            self.gap_since.get_or_insert(now);
            return false;
        }
        self.gap_since = None;
        self.delivered = sequence;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_events_are_delivered_at_once() {
        let t = Instant::now();
        let mut c = Cursor::after(4);
        assert!(c.admit(5, t));
        assert!(c.admit(6, t));
        assert_eq!(c.delivered, 6);
    }

    #[test]
    fn a_gap_holds_delivery_until_the_grace_runs_out() {
        let t = Instant::now();
        let mut c = Cursor::after(1);
        assert!(!c.admit(3, t), "2 may be a slow commit");
        assert!(!c.admit(3, t + GAP_GRACE - Duration::from_millis(1)));
        assert_eq!(c.delivered, 1);
        assert!(c.admit(3, t + GAP_GRACE), "2 was rolled back");
        assert_eq!(c.delivered, 3);
        // A later gap waits its own full grace.
        assert!(!c.admit(5, t + GAP_GRACE * 3));
        assert!(c.admit(4, t + GAP_GRACE * 3), "the slow commit arrived");
        assert!(c.admit(5, t + GAP_GRACE * 3));
    }
}
