//! Ward's paged lists, each with its own token namespace; the paging itself (sizes, tokens
//! accepted only as issued) is [`lychd_runtime::paging`]'s, as in every office.

use lychd_runtime::paging::{PageSize, Seq, Tokens};
use uuid::Uuid;

pub use lychd_runtime::paging::DEFAULT_PAGE_SIZE;
/// The cap on a requested page size (a larger one is lowered to it).
pub const MAX_PAGE_SIZE: u32 = 1_000;

const SIZES: PageSize = PageSize::lowered(MAX_PAGE_SIZE);
const BAD_TOKEN: &str = lychd_runtime::paging::BadToken::DESCRIPTION;

/// The page size to use for `requested` (0: default; capped).
pub fn page_size(requested: u32) -> u32 {
    SIZES.of(requested).unwrap_or(MAX_PAGE_SIZE)
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
    /// By sequence number, ascending (a revision after what it revises).
    Proposals,
    /// By record number, ascending.
    ProposalRecords,
}

impl List {
    const fn tokens(self) -> Tokens {
        Tokens::Tagged(match self {
            List::Principals => "p1",
            List::Assignments => "a1",
            List::Audit => "u1",
            List::Consents => "c1",
            List::Proposals => "r1",
            List::ProposalRecords => "h1",
        })
    }
}

/// Token after the item with `id` (lists keyed by UUID).
pub fn uuid_token(list: List, id: Uuid) -> String {
    list.tokens().token(&id)
}

/// The last UUID key of the previous page, `None` for the first page.
pub fn uuid_after(list: List, token: &str) -> Result<Option<Uuid>, &'static str> {
    list.tokens().after(token).map_err(|_| BAD_TOKEN)
}

/// Token after the item with `seq` (lists keyed by sequence number: the audit, consents,
/// proposals and their records; [`seq_before`] decodes it whichever way the list runs).
pub fn seq_token(list: List, seq: i64) -> String {
    list.tokens().token(&Seq(seq))
}

/// The last sequence number of the previous page, `None` for the first page.
pub fn seq_before(list: List, token: &str) -> Result<Option<i64>, &'static str> {
    list.tokens()
        .after::<Seq>(token)
        .map(|seq| seq.map(|Seq(n)| n))
        .map_err(|_| BAD_TOKEN)
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
