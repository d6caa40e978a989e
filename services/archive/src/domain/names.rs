//! The grammar and bounds of Archive input. Each check answers the fixed description of what
//! is wrong (never the value).

/// Longest request id (intake and recall), in bytes.
pub const MAX_REQUEST_ID: usize = 128;
/// Longest source key, in characters.
pub const MAX_SOURCE_KEY: usize = 256;
/// Longest source revision, in characters.
pub const MAX_SOURCE_REVISION: usize = 128;
/// Longest producer, in characters.
pub const MAX_PRODUCER: usize = 128;

/// `[a-z0-9][a-z0-9._-]{0,63}`: a namespace, a classification, a purpose (a Ward slug, so
/// `namespace:<name>` is an object Ward decides on).
pub fn slug(s: &str) -> Result<&str, &'static str> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        });
    if ok {
        Ok(s)
    } else {
        Err(
            "must be 1..64 lowercase letters, digits, `.`, `-` or `_`, starting with a letter or digit",
        )
    }
}

/// 1..128 printable ASCII characters (no spaces).
pub fn request_id(s: &str) -> Result<&str, &'static str> {
    let ok = !s.is_empty() && s.len() <= MAX_REQUEST_ID && s.bytes().all(|c| c.is_ascii_graphic());
    if ok {
        Ok(s)
    } else {
        Err("must be 1..128 printable ASCII characters without spaces")
    }
}

/// 1..`max` characters, none of them a control character, no surrounding spaces.
pub fn label(s: &str, max: usize) -> Result<&str, &'static str> {
    let n = s.chars().count();
    if n == 0 || n > max {
        return Err("is empty or too long");
    }
    if s.chars().any(char::is_control) || s.trim() != s {
        return Err("must be printable without surrounding spaces");
    }
    Ok(s)
}

/// A note text: 1..`max` characters, no NUL (PostgreSQL text cannot hold it).
pub fn text(s: &str, max: usize) -> Result<(&str, usize), &'static str> {
    let n = s.chars().count();
    if n == 0 {
        return Err("is required");
    }
    if n > max {
        return Err("is longer than the office's note bound");
    }
    if s.contains('\0') {
        return Err("must not contain NUL");
    }
    Ok((s, n))
}

/// A query: 1..`max` characters with at least one letter or digit, no NUL.
pub fn query(s: &str, max: usize) -> Result<&str, &'static str> {
    let n = s.chars().count();
    if n == 0 || s.trim().is_empty() {
        return Err("is required");
    }
    if n > max {
        return Err("is longer than the office's query bound");
    }
    if s.contains('\0') {
        return Err("must not contain NUL");
    }
    Ok(s)
}

/// A count in `1..=max`.
pub fn bounded(n: u32, max: u32) -> Result<u32, &'static str> {
    if n == 0 || n > max {
        Err("is outside 1 and the office's bound")
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        for ok in ["notes", "a", "0x", "team.notes_v1-2"] {
            assert!(slug(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Notes", "-x", "a b", "a:b", &"x".repeat(65)] {
            assert!(slug(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn request_ids_labels_texts_and_queries() {
        assert!(request_id("req-1/2").is_ok());
        assert!(request_id("a b").is_err());
        assert!(request_id(&"r".repeat(129)).is_err());
        assert!(label("doc://a b", 10).is_ok());
        assert!(label(" x", 10).is_err());
        assert!(label("a\nb", 10).is_err());
        assert!(label("ééé", 3).is_ok());
        assert!(label("éééé", 3).is_err());
        assert_eq!(text("héllo", 5), Ok(("héllo", 5)));
        assert!(text("", 5).is_err());
        assert!(text("a\0b", 5).is_err());
        assert!(text("abcdef", 5).is_err());
        assert!(query("  ", 5).is_err());
        assert!(query("cats", 5).is_ok());
        assert!(bounded(0, 5).is_err());
        assert!(bounded(6, 5).is_err());
        assert_eq!(bounded(5, 5), Ok(5));
    }
}
