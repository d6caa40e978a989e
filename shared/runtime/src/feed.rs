//! Following an append-only table in sequence order across uncommitted inserts (the
//! Dispatcher's dispatch events, Ward's consent changes).
//!
//! A sequence number is allocated when a statement inserts an event, but the row is only seen
//! when its transaction commits; a reader that sees `n + 2` before `n + 1` may be looking at a
//! slow commit (deliver nothing yet) or at a rolled-back insert (the number never appears).
//! No clock decides which: a gap is held until every transaction that could own it has ended,
//! and the range is then read once more — what is still missing was rolled back.
//!
//! Why that is enough, given what the writers and the read promise:
//! - the numbers come from one sequence with cache 1 (an identity column's default), so `g`
//!   was allocated before `g + 1`;
//! - a writer's transaction holds a transaction id before it allocates a number (the event row
//!   is written after another row of the same transaction, or after `pg_current_xact_id()`),
//!   and holds a lock on the feed's table from its insert until it ends;
//! - every read is one statement that also returns [`SEEN_COLUMNS`] ([`seen_from`]): its own
//!   snapshot (`xmin`, `xmax`, the running ids `xip`) and the ids of the transactions that
//!   hold a lock on the table when it was read (`holders`, from `pg_locks`).
//!
//! So when a read shows `g + 1` but not `g`, `g + 1` committed before the read's snapshot, `g`
//! was allocated before that, and its owner already had an id: it was running in that snapshot
//! and still holds its table lock (it is among `holders` and running in the snapshot), or it
//! had ended before the snapshot and, `g` being invisible, rolled back. The gap waits on those
//! candidates only (no candidate: `g` was rolled back, skipped at once). A later read in whose
//! snapshot every candidate has ended shows the outcome: a number up to `g + 1` still missing
//! there was rolled back; one that is there is delivered in order. No clock is involved: a
//! stalled writer is bounded by the database's statement and idle-in-transaction timeouts, and
//! a rolled-back number holds readers only until its own transaction has ended.
//!
//! Pure: the caller passes what its read saw.

/// Columns to append to a feed read (one statement, so they describe that read's snapshot),
/// read into [`Seen`]; they need [`seen_from`] in the `FROM` list.
pub const SEEN_COLUMNS: &str =
    "feed_seen.feed_xmin, feed_seen.feed_xmax, feed_seen.feed_xip, feed_seen.feed_holders";

/// The `FROM` item (one row, evaluated once per statement) that [`SEEN_COLUMNS`] read, for the
/// feed stored in `table` (a table name as the office's SQL spells it; never caller input).
/// Transaction ids in `pg_locks` are 32-bit; each is widened to the epoch of the snapshot's
/// `xmax` (a running id is within 2^31 of it).
pub fn seen_from(table: &str) -> String {
    format!(
        "(SELECT pg_snapshot_xmin(c.snap)::text::bigint AS feed_xmin,
                 pg_snapshot_xmax(c.snap)::text::bigint AS feed_xmax,
                 ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(c.snap) x) AS feed_xip,
                 ARRAY(SELECT DISTINCT pg_snapshot_xmax(c.snap)::text::bigint
                              + ((t.transactionid::text::bigint
                                  - pg_snapshot_xmax(c.snap)::text::bigint % 4294967296
                                  + 6442450944) % 4294967296 - 2147483648)
                         FROM pg_locks r
                         JOIN pg_locks t ON t.virtualtransaction = r.virtualtransaction
                        WHERE r.locktype = 'relation' AND r.relation = '{table}'::regclass
                          AND r.database = (SELECT oid FROM pg_database
                                             WHERE datname = current_database())
                          AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock'
                          AND t.granted) AS feed_holders
            FROM (SELECT pg_current_snapshot() AS snap) c) feed_seen"
    )
}

/// What one read saw, beside its rows (the same for every row of the read).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Seen {
    /// The read's snapshot: the oldest running id, one past the newest completed one, and the
    /// ids running between them.
    pub xmin: i64,
    pub xmax: i64,
    pub xip: Vec<i64>,
    /// The ids of the transactions holding a lock on the feed's table (read after the
    /// snapshot was taken).
    pub holders: Vec<i64>,
}

impl Seen {
    /// Had transaction `xid` (assigned before the snapshot was taken) ended in it?
    fn ended(&self, xid: i64) -> bool {
        xid < self.xmin || (xid < self.xmax && !self.xip.contains(&xid))
    }
}

/// A gap held: the numbers below `upto` wait for the transactions of `waiting` to end.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hold {
    upto: i64,
    waiting: Vec<i64>,
}

/// The reader's position and the gap it waits at, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last sequence delivered.
    pub delivered: i64,
    hold: Option<Hold>,
}

impl Cursor {
    pub fn after(delivered: i64) -> Self {
        Cursor {
            delivered,
            hold: None,
        }
    }

    /// May the event numbered `sequence` (the next one of a read, in order) be delivered?
    /// `seen` is what that read saw. `true` advances the cursor to it; `false` holds delivery
    /// (read again later).
    pub fn admit(&mut self, sequence: i64, seen: &Seen) -> bool {
        if sequence <= self.delivered {
            return false;
        }
        let deliver = sequence == self.delivered + 1
            || match &self.hold {
                // Every transaction that could own a missing number up to `upto` has ended
                // before this read: what it does not show was rolled back.
                Some(h) if h.waiting.iter().all(|x| seen.ended(*x)) && sequence <= h.upto => true,
                Some(h) if !h.waiting.iter().all(|x| seen.ended(*x)) => false,
                // No gap held yet (or, which cannot happen since `upto` was committed, a read
                // past it): the candidates are the table's lock holders still running in this
                // read's snapshot. None: the missing numbers were rolled back already.
                _ => {
                    let waiting: Vec<i64> = seen
                        .holders
                        .iter()
                        .copied()
                        .filter(|x| !seen.ended(*x))
                        .collect();
                    let free = waiting.is_empty();
                    self.hold = Some(Hold {
                        upto: sequence,
                        waiting,
                    });
                    free
                }
            };
        if deliver {
            self.delivered = sequence;
            if self.hold.as_ref().is_some_and(|h| h.upto <= sequence) {
                self.hold = None;
            }
        }
        deliver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read whose snapshot runs `xip` (xmin its least, xmax 100) and whose table lock
    /// holders are `holders`.
    fn seen(xip: &[i64], holders: &[i64]) -> Seen {
        Seen {
            xmin: xip.iter().copied().min().unwrap_or(100),
            xmax: 100,
            xip: xip.to_vec(),
            holders: holders.to_vec(),
        }
    }

    #[test]
    fn contiguous_events_are_delivered_at_once() {
        let mut c = Cursor::after(4);
        assert!(c.admit(5, &seen(&[50], &[50])));
        assert!(c.admit(6, &seen(&[50], &[50])));
        assert_eq!(c.delivered, 6);
    }

    #[test]
    fn a_gap_holds_until_every_writer_running_at_first_sight_has_ended() {
        let mut c = Cursor::after(1);
        assert!(
            !c.admit(3, &seen(&[40, 50, 60], &[50, 60])),
            "2 may be a slow commit"
        );
        // However long it takes: 60 may still commit. 40 never wrote the table.
        assert!(!c.admit(3, &seen(&[40, 60], &[60])));
        assert_eq!(c.delivered, 1);
        assert!(
            c.admit(3, &seen(&[40, 70], &[70])),
            "every possible owner ended: 2 was rolled back"
        );
        assert_eq!(c.delivered, 3);
        // A later gap waits on the writers of its own first sight.
        assert!(!c.admit(5, &seen(&[70], &[70])));
        assert!(!c.admit(5, &seen(&[70, 80], &[70, 80])));
        assert!(c.admit(4, &seen(&[80], &[80])), "the slow commit arrived");
        assert!(c.admit(5, &seen(&[80], &[80])));
        assert_eq!(c.delivered, 5);
    }

    #[test]
    fn a_writer_that_ended_before_the_read_is_no_candidate() {
        let mut c = Cursor::after(1);
        // 55 still shows as a lock holder, but the snapshot has it ended (it rolled back
        // between the snapshot and the lock read); nothing else wrote: 2 is skipped at once.
        assert!(c.admit(3, &seen(&[40], &[55])));
        // A holder whose id is past xmax was running at the snapshot.
        assert!(!c.admit(5, &seen(&[40], &[120])));
        assert!(!c.admit(5, &seen(&[40], &[120])));
        assert!(c.admit(
            5,
            &Seen {
                xmax: 130,
                ..seen(&[40], &[])
            }
        ));
    }

    #[test]
    fn a_released_gap_covers_only_numbers_up_to_its_first_sight() {
        let mut c = Cursor::after(1);
        assert!(!c.admit(3, &seen(&[50], &[50])));
        // 2 still missing, 3 shown, 4 missing, 5 shown: 2 is released, 4 waits on 60.
        assert!(c.admit(3, &seen(&[60], &[60])));
        assert!(
            !c.admit(5, &seen(&[60], &[60])),
            "4 was allocated after the first sight"
        );
        assert!(c.admit(5, &seen(&[], &[])));
    }

    #[test]
    fn numbers_already_delivered_are_not_delivered_again() {
        let mut c = Cursor::after(3);
        assert!(!c.admit(3, &seen(&[], &[])));
        assert!(!c.admit(2, &seen(&[], &[])));
        assert_eq!(c.delivered, 3);
    }
}
