//! The grammar of names Ward decides over, defined once for every office. No shell globs: an
//! action is `<office>:<verb>`; an object is `<type>:<id>` or `<type>:*` (every object of one
//! type); audience is an office name; purpose and principal names are slugs. Nothing else is a
//! wildcard.
//!
//! Invariant: pure parsing, no I/O; a refusal is a fixed description that never echoes the
//! refused value. The same rules are `CHECK` constraints in Ward's migration
//! `0002_identity.sql`.

use std::fmt;

/// Longest office, verb-less identifier (`<office>`, object `<type>`, audience).
pub const MAX_IDENT: usize = 32;
/// Longest verb.
pub const MAX_VERB: usize = 64;
/// Longest object identifier (after `<type>:`).
pub const MAX_OBJECT_ID: usize = 128;
/// Longest slug (principal name, purpose).
pub const MAX_SLUG: usize = 64;
/// Longest display name, in characters.
pub const MAX_DISPLAY_NAME: usize = 128;

const ACTION_RULE: &str = "must be `<office>:<verb>`: lowercase letters, digits, `-` and `_`, each starting with a letter";
const OBJECT_RULE: &str = "must be `<type>:<id>` or `<type>:*`: type in lowercase letters, digits, \
     `-` and `_` starting with a letter; id of 1..128 letters, digits or `._:/@+-`";
const AUDIENCE_RULE: &str =
    "must be an office name: lowercase letters, digits, `-` and `_`, starting with a letter";
const SLUG_RULE: &str =
    "must be 1..64 lowercase letters, digits, `.`, `-` or `_`, starting with a letter or digit";
const DISPLAY_NAME_RULE: &str =
    "must be 1..128 characters without control characters or surrounding spaces";
const REQUIRED: &str = "is required";

/// `[a-z][a-z0-9_-]{0,max-1}`.
fn is_ident(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// `[a-z0-9][a-z0-9._-]{0,63}`.
fn is_slug(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_SLUG
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

/// `[A-Za-z0-9._:/@+-]{1,128}`.
fn is_object_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_OBJECT_ID
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'/' | b'@' | b'+' | b'-')
        })
}

macro_rules! text_newtype {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

/// `<office>:<verb>`, e.g. `dispatcher:lease`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Action(String);
text_newtype!(Action);

impl Action {
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        if s.is_empty() {
            return Err(REQUIRED);
        }
        match s.split_once(':') {
            Some((office, verb)) if is_ident(office, MAX_IDENT) && is_ident(verb, MAX_VERB) => {
                Ok(Action(s.to_owned()))
            }
            _ => Err(ACTION_RULE),
        }
    }

    /// The verb: the default purpose of a question about this action.
    pub fn verb(&self) -> &str {
        self.0.split_once(':').map(|(_, v)| v).unwrap_or_default()
    }
}

/// `<type>:<id>` or `<type>:*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Object(String);
text_newtype!(Object);

impl Object {
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        if s.is_empty() {
            return Err(REQUIRED);
        }
        match s.split_once(':') {
            Some((ty, id)) if is_ident(ty, MAX_IDENT) && (id == "*" || is_object_id(id)) => {
                Ok(Object(s.to_owned()))
            }
            _ => Err(OBJECT_RULE),
        }
    }

    pub fn object_type(&self) -> &str {
        self.0.split_once(':').map(|(t, _)| t).unwrap_or_default()
    }

    pub fn is_type_wildcard(&self) -> bool {
        self.0.ends_with(":*") && self.0.len() == self.object_type().len() + 2
    }

    /// `<type>:*` for this object's type: the only other assignment object that covers it.
    pub fn type_wildcard(&self) -> String {
        format!("{}:*", self.object_type())
    }
}

/// The office a question is addressed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Audience(String);
text_newtype!(Audience);

impl Audience {
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        if s.is_empty() {
            Err(REQUIRED)
        } else if is_ident(s, MAX_IDENT) {
            Ok(Audience(s.to_owned()))
        } else {
            Err(AUDIENCE_RULE)
        }
    }
}

/// The audiences a session is bound to: 1 to [`Audiences::MAX`] audiences, sorted, without
/// duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Audiences(Vec<String>);

impl Audiences {
    pub const MAX: usize = 16;

    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, &'static str> {
        if names.is_empty() {
            return Err("name at least one audience (the offices the session may be presented to)");
        }
        if names.len() > Self::MAX {
            return Err("at most 16 audiences");
        }
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            out.push(Audience::parse(n.as_ref())?.0);
        }
        out.sort();
        out.dedup();
        Ok(Audiences(out))
    }

    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

/// Why an action is asked for (a slug).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Purpose(String);
text_newtype!(Purpose);

impl Purpose {
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        if s.is_empty() {
            Err(REQUIRED)
        } else if is_slug(s) {
            Ok(Purpose(s.to_owned()))
        } else {
            Err(SLUG_RULE)
        }
    }
}

/// A principal's unique name (a slug).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PrincipalName(String);
text_newtype!(PrincipalName);

impl PrincipalName {
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        if s.is_empty() {
            Err(REQUIRED)
        } else if is_slug(s) {
            Ok(PrincipalName(s.to_owned()))
        } else {
            Err(SLUG_RULE)
        }
    }
}

/// A user's display name: free text, bounded, no control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DisplayName(String);
text_newtype!(DisplayName);

impl DisplayName {
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        let chars = s.chars().count();
        if s.is_empty() {
            Err(REQUIRED)
        } else if chars > MAX_DISPLAY_NAME || s.chars().any(char::is_control) || s.trim() != s {
            Err(DISPLAY_NAME_RULE)
        } else {
            Ok(DisplayName(s.to_owned()))
        }
    }
}

/// A question's four names, each checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub action: Action,
    pub object: Object,
    pub audience: Audience,
    pub purpose: Purpose,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_are_one_to_sixteen_sorted_distinct_audiences() {
        assert_eq!(
            Audiences::parse(&["ward", "dispatcher", "ward"])
                .unwrap()
                .as_slice(),
            ["dispatcher", "ward"]
        );
        assert!(Audiences::parse::<&str>(&[]).is_err());
        assert!(Audiences::parse(&["Ward"]).is_err());
        assert!(Audiences::parse(&["a"; 17]).is_err());
        assert!(Audiences::parse(&["a"; 16]).is_ok());
    }

    #[test]
    fn actions() {
        for ok in [
            "dispatcher:lease",
            "ward:administer",
            "a:b",
            "ward-2:do_it",
            "x9:y-9",
        ] {
            assert_eq!(Action::parse(ok).unwrap().as_str(), ok);
        }
        assert_eq!(Action::parse("").unwrap_err(), REQUIRED);
        for bad in [
            "ward",
            "ward:",
            ":lease",
            "ward:*",
            "*:lease",
            "*",
            "Ward:lease",
            "ward:Lease",
            "ward:lease:x",
            "9ward:lease",
            "ward:9lease",
            "ward :lease",
            "ward:lea se",
            "ward:lease\n",
            "wa*d:lease",
            "ward:le?se",
            "ward:léase",
        ] {
            assert_eq!(Action::parse(bad).unwrap_err(), ACTION_RULE, "{bad:?}");
        }
        let long_office = format!("{}:x", "a".repeat(MAX_IDENT));
        assert!(Action::parse(&long_office).is_ok());
        let too_long_office = format!("{}:x", "a".repeat(MAX_IDENT + 1));
        assert!(Action::parse(&too_long_office).is_err());
        assert!(Action::parse(&format!("a:{}", "v".repeat(MAX_VERB))).is_ok());
        assert!(Action::parse(&format!("a:{}", "v".repeat(MAX_VERB + 1))).is_err());
        assert_eq!(Action::parse("dispatcher:lease").unwrap().verb(), "lease");
    }

    #[test]
    fn objects() {
        for ok in [
            "principal:*",
            "principal:0b6f3f2e-6c2a-4a4e-9d59-0f7d4c8c5b1a",
            "lease:abc",
            "file:/a/b.txt",
            "user:me@example.org",
            "model:llama+3:8b",
            "x:Y",
        ] {
            assert_eq!(Object::parse(ok).unwrap().as_str(), ok);
        }
        assert_eq!(Object::parse("").unwrap_err(), REQUIRED);
        for bad in [
            "*",
            "*:*",
            "principal",
            "principal:",
            ":x",
            "principal:a*",
            "principal:*a",
            "principal:**",
            "principal:a b",
            "Principal:x",
            "prin*:x",
            "principal:x?",
            "principal:x\u{0}",
            "principal:é",
            "9type:x",
        ] {
            assert_eq!(Object::parse(bad).unwrap_err(), OBJECT_RULE, "{bad:?}");
        }
        assert!(Object::parse(&format!("t:{}", "i".repeat(MAX_OBJECT_ID))).is_ok());
        assert!(Object::parse(&format!("t:{}", "i".repeat(MAX_OBJECT_ID + 1))).is_err());
        assert!(Object::parse(&format!("{}:i", "t".repeat(MAX_IDENT + 1))).is_err());
    }

    #[test]
    fn type_wildcards() {
        let exact = Object::parse("principal:abc").unwrap();
        assert_eq!(exact.object_type(), "principal");
        assert!(!exact.is_type_wildcard());
        assert_eq!(exact.type_wildcard(), "principal:*");
        let any = Object::parse("principal:*").unwrap();
        assert!(any.is_type_wildcard());
        assert_eq!(any.type_wildcard(), "principal:*");
        // An id that contains `:` belongs to the type before the first colon.
        let nested = Object::parse("model:llama:8b").unwrap();
        assert_eq!(nested.object_type(), "model");
        assert_eq!(nested.type_wildcard(), "model:*");
        assert!(!nested.is_type_wildcard());
    }

    #[test]
    fn audiences_purposes_names() {
        for ok in ["ward", "dispatcher", "helm-loop", "a_b"] {
            assert!(Audience::parse(ok).is_ok());
        }
        assert_eq!(Audience::parse("").unwrap_err(), REQUIRED);
        for bad in ["Ward", "ward:x", "9ward", "ward.x", "*", "w ard"] {
            assert_eq!(Audience::parse(bad).unwrap_err(), AUDIENCE_RULE, "{bad:?}");
        }
        for ok in ["administer", "decide", "a", "9", "read.v2", "x-y_z"] {
            assert!(Purpose::parse(ok).is_ok());
            assert!(PrincipalName::parse(ok).is_ok());
        }
        assert_eq!(Purpose::parse("").unwrap_err(), REQUIRED);
        assert_eq!(PrincipalName::parse("").unwrap_err(), REQUIRED);
        for bad in [".a", "-a", "_a", "A", "a b", "a:b", "a*", "é", "a/b"] {
            assert_eq!(Purpose::parse(bad).unwrap_err(), SLUG_RULE, "{bad:?}");
            assert_eq!(PrincipalName::parse(bad).unwrap_err(), SLUG_RULE, "{bad:?}");
        }
        assert!(PrincipalName::parse(&"a".repeat(MAX_SLUG)).is_ok());
        assert!(PrincipalName::parse(&"a".repeat(MAX_SLUG + 1)).is_err());
    }

    #[test]
    fn display_names() {
        for ok in ["Ada Lovelace", "É", "x", &"é".repeat(MAX_DISPLAY_NAME)] {
            assert!(DisplayName::parse(ok).is_ok(), "{ok:?}");
        }
        assert_eq!(DisplayName::parse("").unwrap_err(), REQUIRED);
        for bad in [
            " Ada",
            "Ada ",
            "A\nda",
            "A\u{7}",
            &"x".repeat(MAX_DISPLAY_NAME + 1),
        ] {
            assert_eq!(
                DisplayName::parse(bad).unwrap_err(),
                DISPLAY_NAME_RULE,
                "{bad:?}"
            );
        }
    }
}
