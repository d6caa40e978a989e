//! Timestamps of the form `YYYY-MM-DDTHH:MM:SS.sssZ` as milliseconds since
//! the Unix epoch (resolutions §B). Pure arithmetic; the HelmLoop core never reads a
//! clock.

/// Milliseconds since 1970-01-01T00:00:00.000Z.
pub type Millis = i64;

/// Parses an exact `YYYY-MM-DDTHH:MM:SS.sssZ` instant; `None` for anything
/// else, including impossible dates (February 30) and leap seconds.
pub fn parse_timestamp(s: &str) -> Option<Millis> {
    let b = s.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let mut n = 0i64;
        for &c in &b[from..to] {
            if !c.is_ascii_digit() {
                return None;
            }
            n = n * 10 + i64::from(c - b'0');
        }
        Some(n)
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second, milli) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exact_instants() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(parse_timestamp("1970-01-01T00:00:01.234Z"), Some(1234));
        assert_eq!(
            parse_timestamp("2025-01-22T10:00:00.000Z"),
            Some(1_737_540_000_000)
        );
        assert_eq!(
            parse_timestamp("2024-02-29T00:00:00.000Z").map(|t| t % 86_400_000),
            Some(0)
        );
        assert_eq!(parse_timestamp("1969-12-31T23:59:59.999Z"), Some(-1));
    }

    #[test]
    fn refuses_everything_else() {
        for s in [
            "2025-02-29T00:00:00.000Z",
            "2025-02-30T00:00:00.000Z",
            "2025-13-01T00:00:00.000Z",
            "2025-01-01T24:00:00.000Z",
            "2025-01-01T00:00:60.000Z",
            "2025-01-01T00:00:00Z",
            "2025-01-01T00:00:00.000+00:00",
            "2025-01-01 00:00:00.000Z",
            "２025-01-01T00:00:00.000Z",
            "",
        ] {
            assert_eq!(parse_timestamp(s), None, "{s}");
        }
    }
}
