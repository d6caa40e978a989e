//! Keyset pagination. A page token is an opaque rendering of the last key a page returned,
//! bound to the list it came from; a token that does not decode to a key of that list is bad
//! input.

use uuid::Uuid;

/// Items per page when the request says 0.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// The cap on a requested page size.
pub const MAX_PAGE_SIZE: u32 = 1_000;

const BAD_TOKEN: &str = "is not a page token of this list";

/// The page size to use for `requested` (0: default; capped).
pub fn page_size(requested: u32) -> u32 {
    match requested {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

/// The lists that page, each with its own token namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// By principal id, ascending.
    Principals,
    /// By assignment id, ascending.
    Assignments,
    /// By sequence number, descending (newest first).
    Audit,
    /// By sequence number, descending (newest first).
    Consents,
}

impl List {
    const fn tag(self) -> &'static str {
        match self {
            List::Principals => "p1",
            List::Assignments => "a1",
            List::Audit => "u1",
            List::Consents => "c1",
        }
    }
}

fn encode(list: List, key: &str) -> String {
    hex::encode(format!("{}|{key}", list.tag()))
}

fn decode(list: List, token: &str) -> Result<Option<String>, &'static str> {
    if token.is_empty() {
        return Ok(None);
    }
    let bytes = hex::decode(token).map_err(|_| BAD_TOKEN)?;
    let text = String::from_utf8(bytes).map_err(|_| BAD_TOKEN)?;
    match text.split_once('|') {
        Some((tag, key)) if tag == list.tag() => Ok(Some(key.to_owned())),
        _ => Err(BAD_TOKEN),
    }
}

/// Token after the item with `id` (lists keyed by UUID).
pub fn uuid_token(list: List, id: Uuid) -> String {
    encode(list, &id.hyphenated().to_string())
}

/// The last UUID key of the previous page, `None` for the first page.
pub fn uuid_after(list: List, token: &str) -> Result<Option<Uuid>, &'static str> {
    match decode(list, token)? {
        None => Ok(None),
        Some(key) => Uuid::try_parse(&key).map(Some).map_err(|_| BAD_TOKEN),
    }
}

/// Token after the item with `seq` (lists keyed by sequence number: the audit, consents).
pub fn seq_token(list: List, seq: i64) -> String {
    encode(list, &seq.to_string())
}

/// The last sequence number of the previous page, `None` for the first page.
pub fn seq_before(list: List, token: &str) -> Result<Option<i64>, &'static str> {
    match decode(list, token)? {
        None => Ok(None),
        Some(key) => match key.parse::<i64>() {
            Ok(seq) if seq > 0 && key == seq.to_string() => Ok(Some(seq)),
            _ => Err(BAD_TOKEN),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(page_size(0), DEFAULT_PAGE_SIZE);
        assert_eq!(page_size(1), 1);
        assert_eq!(page_size(MAX_PAGE_SIZE), MAX_PAGE_SIZE);
        assert_eq!(page_size(MAX_PAGE_SIZE + 1), MAX_PAGE_SIZE);
        assert_eq!(page_size(u32::MAX), MAX_PAGE_SIZE);
    }

    #[test]
    fn uuid_tokens_round_trip_and_are_bound_to_their_list() {
        let id = Uuid::new_v4();
        for list in [List::Principals, List::Assignments] {
            let t = uuid_token(list, id);
            assert!(!t.contains(&id.to_string()), "opaque");
            assert_eq!(uuid_after(list, &t), Ok(Some(id)));
            assert_eq!(uuid_after(list, ""), Ok(None));
        }
        let t = uuid_token(List::Principals, id);
        assert_eq!(uuid_after(List::Assignments, &t), Err(BAD_TOKEN));
        assert_eq!(seq_before(List::Audit, &t), Err(BAD_TOKEN));
    }

    #[test]
    fn seq_tokens_round_trip() {
        for seq in [1, 42, i64::MAX] {
            assert_eq!(
                seq_before(List::Audit, &seq_token(List::Audit, seq)),
                Ok(Some(seq))
            );
        }
        assert_eq!(seq_before(List::Audit, ""), Ok(None));
        assert_eq!(
            uuid_after(List::Principals, &seq_token(List::Audit, 5)),
            Err(BAD_TOKEN)
        );
        assert_eq!(
            seq_before(List::Consents, &seq_token(List::Audit, 5)),
            Err(BAD_TOKEN),
            "an audit token does not page consents"
        );
    }

    #[test]
    fn bad_tokens() {
        for bad in [
            "zz",
            "0",
            "abc",
            &hex::encode("p1"),
            &hex::encode("p1|"),
            &hex::encode("p1|not-a-uuid"),
            &hex::encode("x1|00000000-0000-0000-0000-000000000000"),
            &hex::encode([0xff, 0xfe]),
        ] {
            assert_eq!(uuid_after(List::Principals, bad), Err(BAD_TOKEN), "{bad:?}");
        }
        for bad in [
            hex::encode("u1|"),
            hex::encode("u1|0"),
            hex::encode("u1|-5"),
            hex::encode("u1|+5"),
            hex::encode("u1|05"),
            hex::encode("u1|5x"),
            hex::encode("u1|99999999999999999999"),
        ] {
            assert_eq!(seq_before(List::Audit, &bad), Err(BAD_TOKEN), "{bad:?}");
        }
    }
}
