//! UTF-16 code-unit ordering of strings (resolutions §A).

use std::cmp::Ordering;

/// Compares two strings by their UTF-16 code units, the HL-C14N-1 member order.
///
/// Equivalent to `a.encode_utf16().cmp(b.encode_utf16())`, computed on the UTF-8
/// bytes: UTF-8 byte order equals code-point order, which equals UTF-16 order
/// except between a supplementary character (lead byte `F0..F4`, first unit
/// `D800..DBFF`) and a character in `U+E000..U+FFFF` (lead byte `EE`/`EF`), where
/// the supplementary one sorts first. The first differing byte of two valid UTF-8
/// strings with a common prefix is either inside one character (continuation
/// bytes, same lead byte) or a lead byte in both, so one fix-up at that byte is
/// enough.
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    cmp_utf16_bytes(a.as_bytes(), b.as_bytes())
}

/// [`cmp_utf16`] on the UTF-8 bytes of two valid strings.
#[inline]
pub(crate) fn cmp_utf16_bytes(a: &[u8], b: &[u8]) -> Ordering {
    // Fast path: distinct ASCII first bytes decide (most key comparisons).
    if let (Some(&x), Some(&y)) = (a.first(), b.first())
        && x != y
        && x < 0x80
        && y < 0x80
    {
        return x.cmp(&y);
    }
    match mismatch(a, b) {
        None => a.len().cmp(&b.len()),
        Some(i) => {
            let (x, y) = (a[i], b[i]);
            if x >= 0xEE && y >= 0xEE {
                let (x_astral, y_astral) = (x >= 0xF0, y >= 0xF0);
                if x_astral != y_astral {
                    return if x_astral {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    };
                }
            }
            x.cmp(&y)
        }
    }
}

/// Byte equality of two short strings (object member names), compared in
/// place eight bytes at a time rather than through a `memcmp` call.
#[inline]
#[doc(hidden)]
pub fn eq_short(a: &str, b: &str) -> bool {
    a.len() == b.len() && mismatch(a.as_bytes(), b.as_bytes()).is_none()
}

/// Index of the first differing byte within the common length, compared
/// eight bytes at a time (object keys and map lookups compare constantly).
#[inline]
fn mismatch(a: &[u8], b: &[u8]) -> Option<usize> {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or_default());
        let diff = word(x) ^ word(y);
        if diff != 0 {
            // Little-endian: the lowest set bit is in the first differing byte.
            return Some(i + (diff.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    a[i..]
        .iter()
        .zip(&b[i..])
        .position(|(x, y)| x != y)
        .map(|j| i + j)
}

#[cfg(test)]
mod tests {
    use super::cmp_utf16;
    use std::cmp::Ordering;

    #[test]
    fn astral_sorts_before_private_use() {
        assert_eq!(cmp_utf16("\u{1F600}", "\u{E000}"), Ordering::Less);
        assert_eq!(cmp_utf16("\u{FFFF}", "\u{10000}"), Ordering::Greater);
        assert_eq!(cmp_utf16("\u{D7FF}", "\u{10000}"), Ordering::Less);
    }

    #[test]
    fn integer_like_keys_sort_as_strings() {
        let mut keys = vec!["10", "9", "1", "100", "01"];
        keys.sort_by(|a, b| cmp_utf16(a, b));
        assert_eq!(keys, vec!["01", "1", "10", "100", "9"]);
    }

    #[test]
    fn long_common_prefixes_compare_at_the_first_difference() {
        let base = "abcdefghijklmnopqrstuvwxyz0123456789";
        for i in 0..base.len() {
            let mut other = base.as_bytes().to_vec();
            other[i] = b'~';
            let other = std::str::from_utf8(&other).unwrap();
            assert_eq!(cmp_utf16(base, other), Ordering::Less, "{i}");
            assert_eq!(cmp_utf16(other, base), Ordering::Greater, "{i}");
            assert_eq!(cmp_utf16(&base[..i], base), Ordering::Less, "{i}");
        }
        let astral = format!("{}\u{1F600}", &base[..9]);
        let private = format!("{}\u{E000}", &base[..9]);
        assert_eq!(cmp_utf16(&astral, &private), Ordering::Less);
    }

    #[test]
    fn short_equality_is_byte_equality() {
        let words = [
            "",
            "a",
            "ab",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "bcdefghi",
            "é",
            "e",
        ];
        for a in words {
            for b in words {
                assert_eq!(super::eq_short(a, b), a == b, "{a} {b}");
            }
        }
    }

    #[test]
    fn prefix_sorts_first() {
        assert_eq!(cmp_utf16("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16("", "a"), Ordering::Less);
        assert_eq!(cmp_utf16("ab", "ab"), Ordering::Equal);
    }
}
