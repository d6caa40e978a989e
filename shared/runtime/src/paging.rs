//! Keyset paging, the same in every office: a page size read from the request ([`PageSize`])
//! and a page token that is an opaque rendering of the last key a page returned ([`Tokens`]).
//!
//! A token is accepted only if it is exactly what the office would issue for the key it decodes
//! to (so `05`, an upper-case UUID or a token of another list are bad input, `PAGE_TOKEN_INVALID`
//! or the office's reason, never a silently different page). An empty token is the first page.
//!
//! Page sizes: 0 takes the default; a size beyond the maximum is lowered to it
//! ([`Oversize::Lower`]: Ward, the Dispatcher, HelmLoop) or refused ([`Oversize::Refuse`]: the
//! Archive, `PAGE_SIZE_OUT_OF_RANGE`). Both are kept because callers rely on each.

use std::borrow::Cow;

use uuid::Uuid;

/// Items per page when the request says 0.
pub const DEFAULT_PAGE_SIZE: u32 = 100;

/// What a requested page size beyond the maximum does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    /// It is lowered to the maximum.
    Lower,
    /// It is bad input.
    Refuse,
}

/// A list's page sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSize {
    pub default: u32,
    pub max: u32,
    pub oversize: Oversize,
}

impl PageSize {
    /// [`DEFAULT_PAGE_SIZE`], at most `max`, a larger size lowered to `max`.
    pub const fn lowered(max: u32) -> Self {
        PageSize {
            default: DEFAULT_PAGE_SIZE,
            max,
            oversize: Oversize::Lower,
        }
    }

    /// [`DEFAULT_PAGE_SIZE`], at most `max`, a larger size refused.
    pub const fn refused(max: u32) -> Self {
        PageSize {
            default: DEFAULT_PAGE_SIZE,
            max,
            oversize: Oversize::Refuse,
        }
    }

    /// The page size for `requested` (0: the default), or why it is bad input (the
    /// description of a `page.page_size` violation).
    pub fn of(&self, requested: u32) -> Result<u32, Cow<'static, str>> {
        match requested {
            0 => Ok(self.default),
            n if n <= self.max => Ok(n),
            _ => match self.oversize {
                Oversize::Lower => Ok(self.max),
                Oversize::Refuse => Err(format!("is beyond the page bound ({})", self.max).into()),
            },
        }
    }
}

/// A token that does not decode to a key of its list (bad input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadToken;

impl BadToken {
    /// The description of a `page.page_token` violation.
    pub const DESCRIPTION: &'static str = "is not a token this office issued";
}

impl std::fmt::Display for BadToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Self::DESCRIPTION)
    }
}

impl From<BadToken> for Cow<'static, str> {
    fn from(_: BadToken) -> Self {
        Cow::Borrowed(BadToken::DESCRIPTION)
    }
}

/// A key a list pages by, rendered into its tokens.
pub trait Key: Sized {
    fn render(&self) -> String;
    /// The key `text` renders, if any (need not check that it is the exact rendering: the
    /// token check does).
    fn parse(text: &str) -> Option<Self>;
}

impl Key for Uuid {
    fn render(&self) -> String {
        self.hyphenated().to_string()
    }

    fn parse(text: &str) -> Option<Self> {
        Uuid::try_parse(text).ok()
    }
}

/// A positive sequence number (logs, records), rendered in decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seq(pub i64);

impl Key for Seq {
    fn render(&self) -> String {
        self.0.to_string()
    }

    fn parse(text: &str) -> Option<Self> {
        text.parse::<i64>().ok().filter(|n| *n > 0).map(Seq)
    }
}

/// How a list's keys become tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokens {
    /// The key's rendering itself.
    Plain,
    /// Hex of `<tag>|<key>`: opaque, and bound to the list named by the tag (a token of another
    /// list is bad input).
    Tagged(&'static str),
}

impl Tokens {
    /// The token of the page after `key`.
    pub fn token<K: Key>(self, key: &K) -> String {
        match self {
            Tokens::Plain => key.render(),
            Tokens::Tagged(tag) => hex::encode(format!("{tag}|{}", key.render())),
        }
    }

    /// The key after which the page of `token` starts (`None`: the first page).
    pub fn after<K: Key>(self, token: &str) -> Result<Option<K>, BadToken> {
        if token.is_empty() {
            return Ok(None);
        }
        let key = match self {
            Tokens::Plain => K::parse(token),
            Tokens::Tagged(tag) => hex::decode(token)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .and_then(|text| {
                    let (t, key) = text.split_once('|')?;
                    (t == tag).then(|| K::parse(key))?
                }),
        }
        .ok_or(BadToken)?;
        if self.token(&key) == token {
            Ok(Some(key))
        } else {
            Err(BadToken)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_lowered_or_refused() {
        let lowered = PageSize::lowered(1000);
        assert_eq!(lowered.of(0), Ok(DEFAULT_PAGE_SIZE));
        assert_eq!(lowered.of(1), Ok(1));
        assert_eq!(lowered.of(1000), Ok(1000));
        assert_eq!(lowered.of(1001), Ok(1000));
        assert_eq!(lowered.of(u32::MAX), Ok(1000));
        let refused = PageSize::refused(500);
        assert_eq!(refused.of(0), Ok(DEFAULT_PAGE_SIZE));
        assert_eq!(refused.of(500), Ok(500));
        assert_eq!(
            refused.of(501),
            Err("is beyond the page bound (500)".into())
        );
    }

    #[test]
    fn plain_tokens_round_trip_and_only_their_exact_rendering_is_accepted() {
        let id = Uuid::new_v4();
        let t = Tokens::Plain.token(&id);
        assert_eq!(Tokens::Plain.after::<Uuid>(&t), Ok(Some(id)));
        assert_eq!(Tokens::Plain.after::<Uuid>(""), Ok(None));
        for bad in [
            t.to_uppercase(),
            id.simple().to_string(),
            format!("{{{t}}}"),
            "junk".into(),
        ] {
            assert_eq!(Tokens::Plain.after::<Uuid>(&bad), Err(BadToken), "{bad}");
        }
        assert_eq!(Tokens::Plain.after::<Seq>("42"), Ok(Some(Seq(42))));
        for bad in ["0", "-1", "+1", "05", "x", "1 ", "99999999999999999999"] {
            assert_eq!(Tokens::Plain.after::<Seq>(bad), Err(BadToken), "{bad}");
        }
    }

    #[test]
    fn tagged_tokens_are_opaque_and_bound_to_their_list() {
        let id = Uuid::new_v4();
        let principals = Tokens::Tagged("p1");
        let t = principals.token(&id);
        assert!(!t.contains(&id.to_string()), "opaque");
        assert_eq!(principals.after::<Uuid>(&t), Ok(Some(id)));
        assert_eq!(Tokens::Tagged("a1").after::<Uuid>(&t), Err(BadToken));
        assert_eq!(principals.after::<Seq>(&t), Err(BadToken));
        assert_eq!(principals.after::<Uuid>(&t.to_uppercase()), Err(BadToken));
        let audit = Tokens::Tagged("u1");
        assert_eq!(
            audit.after::<Seq>(&audit.token(&Seq(i64::MAX))),
            Ok(Some(Seq(i64::MAX)))
        );
        for bad in [
            "zz".to_owned(),
            hex::encode("u1"),
            hex::encode("u1|"),
            hex::encode("u1|05"),
            hex::encode("u1|-5"),
            hex::encode([0xff, 0xfe]),
        ] {
            assert_eq!(audit.after::<Seq>(&bad), Err(BadToken), "{bad}");
        }
    }
}
