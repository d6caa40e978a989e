//! Text checks shared by the parser and [`crate::Value`]: UTF-8 validity and
//! Unicode Normalization Form C in one pass (resolutions §A), with an ASCII
//! fast path eight bytes at a time.

use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Whether `s` is in Unicode Normalization Form C (ASCII fast path).
pub fn is_nfc(s: &str) -> bool {
    matches!(check_text(s.as_bytes()), Ok(()))
}

/// Characters that are NFC quick-check `Yes` with canonical combining class 0
/// (tested exhaustively against the tables): for the quick check they act like
/// ASCII and reset its state.
#[inline]
pub(crate) fn is_plain_starter(c: char) -> bool {
    matches!(
        c,
        '\0'..='\u{2FF}'
            | '\u{3041}'..='\u{3096}'
            | '\u{30A1}'..='\u{30FA}'
            | '\u{3400}'..='\u{9FFF}'
            | '\u{AC00}'..='\u{D7A3}'
            | '\u{1F300}'..='\u{1FAFF}'
    )
}

/// Why a string body was refused by [`check_text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextError {
    Utf8,
    NotNfc,
}

/// Decodes the UTF-8 character at `b[i]` (a byte >= 0x80), validating it per
/// Unicode table 3-7 (no overlongs, no surrogates, nothing above U+10FFFF).
#[inline]
fn decode_utf8(b: &[u8], i: usize) -> Option<(char, usize)> {
    #[inline]
    fn cont(b: &[u8], i: usize) -> Option<u32> {
        match b.get(i) {
            Some(&c @ 0x80..=0xBF) => Some(u32::from(c & 0x3F)),
            _ => None,
        }
    }
    let lead = *b.get(i)?;
    let (cp, len) = match lead {
        0xC2..=0xDF => ((u32::from(lead & 0x1F) << 6) | cont(b, i + 1)?, 2),
        0xE0..=0xEF => {
            let second = *b.get(i + 1)?;
            let ok = match lead {
                0xE0 => (0xA0..=0xBF).contains(&second),
                0xED => (0x80..=0x9F).contains(&second),
                _ => (0x80..=0xBF).contains(&second),
            };
            if !ok {
                return None;
            }
            let cp =
                (u32::from(lead & 0x0F) << 12) | (u32::from(second & 0x3F) << 6) | cont(b, i + 2)?;
            (cp, 3)
        }
        0xF0..=0xF4 => {
            let second = *b.get(i + 1)?;
            let ok = match lead {
                0xF0 => (0x90..=0xBF).contains(&second),
                0xF4 => (0x80..=0x8F).contains(&second),
                _ => (0x80..=0xBF).contains(&second),
            };
            if !ok {
                return None;
            }
            let cp = (u32::from(lead & 0x07) << 18)
                | (u32::from(second & 0x3F) << 12)
                | (cont(b, i + 2)? << 6)
                | cont(b, i + 3)?;
            (cp, 4)
        }
        _ => return None,
    };
    Some((char::from_u32(cp)?, len))
}

/// Checks that `b` is valid UTF-8 and in NFC, in one pass.
///
/// The NFC part is the quick check of UAX #15 (combining-class order plus the
/// NFC_QC property); a `Maybe` answer falls back to full normalization.
pub(crate) fn check_text(b: &[u8]) -> Result<(), TextError> {
    let mut maybe = false;
    let mut last_cc = 0u8;
    let mut i = 0;
    while i < b.len() {
        // ASCII: starters with NFC_QC=Yes; skip them eight at a time.
        let ascii_start = i;
        while let Some(w) = load8(b, i) {
            let high = w & HI;
            if high != 0 {
                i += (high.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while i < b.len() && b[i] < 0x80 {
            i += 1;
        }
        if i > ascii_start {
            last_cc = 0;
        }
        if i >= b.len() {
            break;
        }
        let (c, len) = decode_utf8(b, i).ok_or(TextError::Utf8)?;
        i += len;
        if is_plain_starter(c) {
            last_cc = 0;
            continue;
        }
        let cc = canonical_combining_class(c);
        if cc != 0 && last_cc > cc {
            return Err(TextError::NotNfc);
        }
        match is_nfc_quick(std::iter::once(c)) {
            IsNormalized::Yes => {}
            IsNormalized::No => return Err(TextError::NotNfc),
            IsNormalized::Maybe => maybe = true,
        }
        last_cc = cc;
    }
    if maybe {
        let chars = Utf8Chars { b, i: 0 };
        if !chars.clone().eq(chars.nfc()) {
            return Err(TextError::NotNfc);
        }
    }
    Ok(())
}

/// Characters of bytes already validated by [`check_text`].
#[derive(Clone)]
struct Utf8Chars<'b> {
    b: &'b [u8],
    i: usize,
}

impl Iterator for Utf8Chars<'_> {
    type Item = char;
    fn next(&mut self) -> Option<char> {
        let lead = *self.b.get(self.i)?;
        if lead < 0x80 {
            self.i += 1;
            return Some(char::from(lead));
        }
        let (c, len) = decode_utf8(self.b, self.i)?;
        self.i += len;
        Some(c)
    }
}

pub(crate) const LO: u64 = 0x0101_0101_0101_0101;
pub(crate) const HI: u64 = 0x8080_8080_8080_8080;

/// Loads 8 bytes at `i` (little-endian), if there are 8.
#[inline]
pub(crate) fn load8(bytes: &[u8], i: usize) -> Option<u64> {
    bytes
        .get(i..i + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_starters_are_nfc_yes_with_combining_class_zero() {
        use unicode_normalization::char::canonical_combining_class;
        let ranges = [
            ('\0', '\u{2FF}'),
            ('\u{3041}', '\u{3096}'),
            ('\u{30A1}', '\u{30FA}'),
            ('\u{3400}', '\u{9FFF}'),
            ('\u{AC00}', '\u{D7A3}'),
            ('\u{1F300}', '\u{1FAFF}'),
        ];
        let mut checked = 0;
        for (lo, hi) in ranges {
            for c in lo..=hi {
                assert!(is_plain_starter(c));
                assert_eq!(canonical_combining_class(c), 0, "{c:?}");
                assert_eq!(is_nfc_quick(std::iter::once(c)), IsNormalized::Yes, "{c:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 0x300 + 0x56 + 0x5A + 0x6C00 + 0x2BA4 + 0x800);
        assert!(!is_plain_starter('\u{300}') && !is_plain_starter('\u{3099}'));
    }

    #[test]
    fn nfc_fast_path_agrees_with_full_check() {
        let samples = [
            "caf\u{e9}",
            "cafe\u{301}",
            "\u{e9}\u{301}",
            "\u{1100}\u{1161}",
            "\u{ac00}\u{11a8}",
            "\u{d55c}\u{ad6d}\u{c5b4}",
            "\u{4e2d}\u{6587}\u{3099}",
            "\u{30ab}\u{3099}",
            "a\u{323}\u{307}",
            "a\u{307}\u{323}",
            "\u{212b}",
            "\u{1f600}x\u{e000}",
            "\u{f900}",
        ];
        for s in samples {
            assert_eq!(is_nfc(s), s.chars().eq(s.nfc()), "{s:?}");
        }
    }

    #[test]
    fn utf8_validation_agrees_with_std() {
        let tails = [
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xF5,
        ];
        let mut checked = 0;
        for lead in 0x80..=0xFFu8 {
            for second in 0..=0xFFu8 {
                for &third in &tails {
                    for &fourth in &tails {
                        for len in 1..=4 {
                            let seq = [lead, second, third, fourth];
                            let b = &seq[..len];
                            // Accepted text is valid UTF-8; valid UTF-8 is never called
                            // invalid (an NFC error may be found first in broken text:
                            // the parser then re-checks the whole input).
                            let ours = check_text(b);
                            let valid = std::str::from_utf8(b).is_ok();
                            assert!(ours.is_err() || valid, "{b:02x?}");
                            assert!(!valid || ours != Err(TextError::Utf8), "{b:02x?}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 1_000_000);
        for c in [
            '\u{80}',
            '\u{7ff}',
            '\u{800}',
            '\u{d7ff}',
            '\u{e000}',
            '\u{ffff}',
            '\u{10000}',
            '\u{10ffff}',
        ] {
            let mut buf = [0u8; 4];
            let b = c.encode_utf8(&mut buf).as_bytes();
            assert_eq!(decode_utf8(b, 0), Some((c, b.len())));
        }
    }
}
