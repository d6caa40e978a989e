//! The ranges every office checks its requests' numbers and instants against at intake, so that
//! nothing accepted can fail later (a value that PostgreSQL, `time` or a BIGINT column cannot
//! hold is refused when it arrives, naming its field, never met as an `INTERNAL` afterwards).
//! The maxima are documented in `docs/refusals.md` ("Bounded fields"); an office may bound a
//! field tighter (its own maximum, documented on its page), never looser.
//!
//! Descriptions are fixed and lowercase and never repeat the refused value.

use time::OffsetDateTime;

/// The earliest instant accepted: 0001-01-01T00:00:00Z.
pub const EARLIEST_UNIX_SECONDS: i64 = -62_135_596_800;
/// The latest instant accepted: 9999-12-31T23:59:59Z (PostgreSQL `timestamptz` and `time` hold
/// every instant between the two exactly, to the microsecond).
pub const LATEST_UNIX_SECONDS: i64 = 253_402_300_799;
/// The largest count, sequence number or revision stored (a PostgreSQL `bigint`).
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// A `google.protobuf.Timestamp` of years 1..=9999 with valid nanos (at most microsecond
/// precision is kept by PostgreSQL; offices that compare replays exactly ask [`instant_micros`]).
pub fn instant(seconds: i64, nanos: i32) -> Result<OffsetDateTime, &'static str> {
    if !(0..1_000_000_000).contains(&nanos) {
        return Err("must have nanos in 0..999999999");
    }
    if !(EARLIEST_UNIX_SECONDS..=LATEST_UNIX_SECONDS).contains(&seconds) {
        return Err("must be an instant of years 1..9999");
    }
    OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(seconds) * 1_000_000_000 + i128::from(nanos),
    )
    .map_err(|_| "must be an instant of years 1..9999")
}

/// [`instant`] in whole microseconds (what PostgreSQL keeps), so a stored value reads back equal.
pub fn instant_micros(seconds: i64, nanos: i32) -> Result<OffsetDateTime, &'static str> {
    let at = instant(seconds, nanos)?;
    if nanos % 1_000 != 0 {
        return Err("must be in whole microseconds");
    }
    Ok(at)
}

/// An absolute instant in whole Unix seconds after the epoch, at most [`LATEST_UNIX_SECONDS`].
pub fn unix_seconds(seconds: i64) -> Result<i64, &'static str> {
    if seconds <= 0 {
        Err("must be a positive whole second")
    } else if seconds > LATEST_UNIX_SECONDS {
        Err("must be at most 253402300799 (9999-12-31T23:59:59Z)")
    } else {
        Ok(seconds)
    }
}

/// A count, sequence number or revision as the `bigint` it is stored as: at most 2^63-1.
pub fn count(n: u64) -> Result<i64, &'static str> {
    i64::try_from(n).map_err(|_| "must be at most 2^63-1")
}

/// `n`, when at most `max` (the description names the maximum, never `n`).
pub fn at_most<T: PartialOrd + std::fmt::Display>(n: T, max: T) -> Result<T, String> {
    if n > max {
        Err(format!("must be at most {max}"))
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_years_1_to_9999() {
        assert!(instant(EARLIEST_UNIX_SECONDS, 0).is_ok());
        assert!(instant(LATEST_UNIX_SECONDS, 999_999_999).is_ok());
        assert!(instant(EARLIEST_UNIX_SECONDS - 1, 0).is_err());
        assert!(instant(LATEST_UNIX_SECONDS + 1, 0).is_err());
        assert!(instant(i64::MAX, 0).is_err());
        assert!(instant(i64::MIN, 0).is_err());
        assert!(instant(0, -1).is_err());
        assert!(instant(0, 1_000_000_000).is_err());
        assert!(instant_micros(0, 1_000).is_ok());
        assert!(instant_micros(0, 1).is_err());
        assert_eq!(instant(LATEST_UNIX_SECONDS, 0).map(|t| t.year()), Ok(9999));
        assert_eq!(instant(EARLIEST_UNIX_SECONDS, 0).map(|t| t.year()), Ok(1));
    }

    #[test]
    fn unix_seconds_counts_and_maxima() {
        assert_eq!(unix_seconds(1), Ok(1));
        assert_eq!(unix_seconds(LATEST_UNIX_SECONDS), Ok(LATEST_UNIX_SECONDS));
        assert!(unix_seconds(0).is_err());
        assert!(unix_seconds(-1).is_err());
        assert!(unix_seconds(10_000_000_000_000).is_err());
        assert_eq!(count(MAX_COUNT), Ok(i64::MAX));
        assert!(count(MAX_COUNT + 1).is_err());
        assert_eq!(at_most(3u32, 3), Ok(3));
        assert_eq!(at_most(4u32, 3), Err("must be at most 3".to_owned()));
    }
}
