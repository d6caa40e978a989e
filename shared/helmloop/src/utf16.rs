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
    match a.iter().zip(b).position(|(x, y)| x != y) {
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
    fn prefix_sorts_first() {
        assert_eq!(cmp_utf16("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16("", "a"), Ordering::Less);
        assert_eq!(cmp_utf16("ab", "ab"), Ordering::Equal);
    }
}
