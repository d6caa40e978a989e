//! Names and keys: the closed slug grammar, families, and capability keys.
//!
//! v1 keys are `{animator}:{family}:{model_id}`. The designed v2 keys
//! `{animator}:{interface_id}:{profile_ref}` (e.g. `a:model.chat@1:qwen3-8b@r3`) parse into
//! their own variant so they can be carried without reinterpreting a v1 key, but nothing admits
//! them yet.
//!
//! A key is at most [`KEY_MAX`] characters as a whole: Ward decides (and an operator assigns)
//! `dispatcher:lease` on the object `capability:<key>`, whose id Ward bounds to 128 characters
//! of `[A-Za-z0-9._:/@+-]`. Every character of the key grammar is in that set, so the length is
//! the one bound to add; a property test in the Dispatcher's tests holds the two grammars
//! together with Ward's own parser.

use std::fmt;

/// Longest slug.
pub const SLUG_MAX: usize = 64;

/// Longest capability key (v1 or v2), in characters: Ward's longest object id, so that
/// `capability:<key>` can be authorized and assigned.
pub const KEY_MAX: usize = 128;

/// Revision words that float: a slug naming one of them (alone or as its last segment) does not
/// identify an immutable thing.
const FLOATING: &[&str] = &[
    "latest", "stable", "current", "head", "main", "master", "default", "newest", "nightly",
    "edge", "tip",
];

/// Why a string is not a slug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlugError {
    Empty,
    TooLong,
    /// Must start with a lowercase letter or digit.
    BadStart,
    /// Only `a-z 0-9 . _ -` (no colons, slashes, whitespace, controls, upper case).
    BadChar,
    /// `latest`, `stable`, … alone or as the last `-`/`_`/`.` segment.
    FloatingRevision,
}

impl SlugError {
    pub fn describe(self) -> &'static str {
        match self {
            SlugError::Empty => "must not be empty",
            SlugError::TooLong => "must be at most 64 characters",
            SlugError::BadStart => "must start with a lowercase letter or a digit",
            SlugError::BadChar => {
                "may contain only lowercase letters, digits, `.`, `_` and `-` (no colons, paths or whitespace)"
            }
            SlugError::FloatingRevision => {
                "must name an exact revision, not a floating one such as `latest`"
            }
        }
    }
}

/// Check the closed slug grammar.
pub fn check_slug(s: &str) -> Result<(), SlugError> {
    let first = s.chars().next().ok_or(SlugError::Empty)?;
    if s.len() > SLUG_MAX {
        return Err(SlugError::TooLong);
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Err(SlugError::BadStart);
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
    {
        return Err(SlugError::BadChar);
    }
    let last = s.rsplit(['-', '_', '.']).next().unwrap_or(s);
    if FLOATING.contains(&s) || FLOATING.contains(&last) {
        return Err(SlugError::FloatingRevision);
    }
    Ok(())
}

/// The closed capability families of v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    Chat,
    Vision,
    Embedding,
    Stt,
    Tts,
    ToolExecution,
    Rerank,
}

impl Family {
    pub const ALL: [Family; 7] = [
        Family::Chat,
        Family::Vision,
        Family::Embedding,
        Family::Stt,
        Family::Tts,
        Family::ToolExecution,
        Family::Rerank,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Chat => "chat",
            Family::Vision => "vision",
            Family::Embedding => "embedding",
            Family::Stt => "stt",
            Family::Tts => "tts",
            Family::ToolExecution => "tool_execution",
            Family::Rerank => "rerank",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// Whether v1 can issue an executable grant for this family at all (`chat`, and
    /// `tool_execution` with a non-empty toolset); the others are routing metadata.
    pub fn v1_executable(self) -> bool {
        self.carries_toolsets()
    }

    /// Only a chat capability declares (or denies) tool support.
    pub fn declares_tool_support(self) -> bool {
        match self {
            Family::Chat => true,
            Family::Vision
            | Family::Embedding
            | Family::Stt
            | Family::Tts
            | Family::ToolExecution
            | Family::Rerank => false,
        }
    }

    /// Chat and tool_execution capabilities carry toolsets.
    pub fn carries_toolsets(self) -> bool {
        match self {
            Family::Chat | Family::ToolExecution => true,
            Family::Vision | Family::Embedding | Family::Stt | Family::Tts | Family::Rerank => {
                false
            }
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A canonical v1 capability key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CapabilityKey {
    pub animator: String,
    pub family: Family,
    pub model_id: String,
}

impl CapabilityKey {
    pub fn new(animator: &str, family: Family, model_id: &str) -> Result<Self, KeyError> {
        check_slug(animator).map_err(|e| KeyError::Component("animator", e))?;
        check_slug(model_id).map_err(|e| KeyError::Component("model_id", e))?;
        let key = CapabilityKey {
            animator: animator.to_owned(),
            family,
            model_id: model_id.to_owned(),
        };
        if key.len() > KEY_MAX {
            return Err(KeyError::TooLong);
        }
        Ok(key)
    }

    /// Length of the key's text (ASCII: characters and bytes agree).
    pub fn len(&self) -> usize {
        self.animator.len() + 1 + self.family.as_str().len() + 1 + self.model_id.len()
    }

    /// Never: every component is non-empty.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Display for CapabilityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.animator, self.family, self.model_id)
    }
}

/// A designed v2 key (`{animator}:{interface_id}:{profile_ref}`); parsed, never admitted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceProfileKey {
    pub animator: String,
    /// `slug@N`, e.g. `model.chat@1`.
    pub interface_id: String,
    /// `slug@revision`, e.g. `qwen3-8b@r3`.
    pub profile_ref: String,
}

/// Any key the grammar knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyKey {
    V1(CapabilityKey),
    V2(InterfaceProfileKey),
}

/// Why a string is not a capability key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// Not three `:`-separated components.
    Shape,
    /// The middle component is neither a known family nor a v2 interface id.
    UnknownFamily,
    /// A component breaks the slug grammar.
    Component(&'static str, SlugError),
    /// A well-formed v2 key where only v1 is admitted.
    V2NotAdmitted,
    /// Longer than [`KEY_MAX`].
    TooLong,
}

impl KeyError {
    pub fn describe(self) -> String {
        match self {
            KeyError::Shape => "must be `{animator}:{family}:{model_id}`".into(),
            KeyError::UnknownFamily => format!(
                "unknown family; one of {}",
                Family::ALL.map(Family::as_str).join(", ")
            ),
            KeyError::Component(part, e) => format!("{part} {}", e.describe()),
            KeyError::V2NotAdmitted => "interface/profile (v2) keys are not admitted yet".into(),
            KeyError::TooLong => format!("must be at most {KEY_MAX} characters"),
        }
    }
}

fn versioned(s: &str, part: &'static str, numeric: bool) -> Result<(), KeyError> {
    let (name, rev) = s.split_once('@').ok_or(KeyError::Shape)?;
    check_slug(name).map_err(|e| KeyError::Component(part, e))?;
    if numeric {
        if rev.is_empty() || rev.len() > 9 || !rev.chars().all(|c| c.is_ascii_digit()) {
            return Err(KeyError::Component(part, SlugError::BadChar));
        }
    } else {
        check_slug(rev).map_err(|e| KeyError::Component(part, e))?;
    }
    Ok(())
}

/// Parse any key (v1 or v2).
pub fn parse_any(s: &str) -> Result<AnyKey, KeyError> {
    if s.len() > KEY_MAX {
        return Err(KeyError::TooLong);
    }
    let mut parts = s.split(':');
    let (Some(animator), Some(middle), Some(last), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(KeyError::Shape);
    };
    check_slug(animator).map_err(|e| KeyError::Component("animator", e))?;
    if middle.contains('@') {
        versioned(middle, "interface_id", true)?;
        versioned(last, "profile_ref", false)?;
        return Ok(AnyKey::V2(InterfaceProfileKey {
            animator: animator.to_owned(),
            interface_id: middle.to_owned(),
            profile_ref: last.to_owned(),
        }));
    }
    let family = Family::parse(middle).ok_or(KeyError::UnknownFamily)?;
    check_slug(last).map_err(|e| KeyError::Component("model_id", e))?;
    Ok(AnyKey::V1(CapabilityKey {
        animator: animator.to_owned(),
        family,
        model_id: last.to_owned(),
    }))
}

/// Parse a v1 key (what the registry and leases admit today).
pub fn parse_v1(s: &str) -> Result<CapabilityKey, KeyError> {
    match parse_any(s)? {
        AnyKey::V1(k) => Ok(k),
        AnyKey::V2(_) => Err(KeyError::V2NotAdmitted),
    }
}

/// Check free text that is recorded but not interpreted (holders, run ids, reasons): 1..=max
/// characters (or 0 when `optional`), printable, no control characters.
pub fn check_label(s: &str, max: usize, optional: bool) -> Result<(), &'static str> {
    if s.is_empty() {
        return if optional {
            Ok(())
        } else {
            Err("must not be empty")
        };
    }
    if s.chars().count() > max {
        return Err("is too long");
    }
    if s.chars().any(char::is_control) {
        return Err("must not contain control characters");
    }
    if s.trim() != s {
        return Err("must not start or end with whitespace");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slug_grammar_accepts_and_refuses() {
        for ok in [
            "a",
            "qwen3-8b-q4_k_m",
            "llama-3.1-8b",
            "0day",
            "m.v2",
            "a_b",
        ] {
            assert_eq!(check_slug(ok), Ok(()), "{ok}");
        }
        let cases: &[(&str, SlugError)] = &[
            ("", SlugError::Empty),
            ("-a", SlugError::BadStart),
            (".hidden", SlugError::BadStart),
            ("Qwen", SlugError::BadStart),
            ("qWen", SlugError::BadChar),
            ("a:b", SlugError::BadChar),
            ("a/b", SlugError::BadChar),
            ("../etc", SlugError::BadStart),
            ("a b", SlugError::BadChar),
            ("a\tb", SlugError::BadChar),
            ("a\u{0}", SlugError::BadChar),
            ("é", SlugError::BadStart),
            ("latest", SlugError::FloatingRevision),
            ("qwen3-latest", SlugError::FloatingRevision),
            ("qwen3.stable", SlugError::FloatingRevision),
            ("qwen3_main", SlugError::FloatingRevision),
        ];
        for (s, e) in cases {
            assert_eq!(check_slug(s), Err(*e), "{s:?}");
        }
        assert_eq!(check_slug(&"a".repeat(64)), Ok(()));
        assert_eq!(check_slug(&"a".repeat(65)), Err(SlugError::TooLong));
    }

    #[test]
    fn v1_keys_parse_and_print_canonically() {
        let k = parse_v1("gpu0:chat:qwen3-8b").expect("valid");
        assert_eq!(k.animator, "gpu0");
        assert_eq!(k.family, Family::Chat);
        assert_eq!(k.model_id, "qwen3-8b");
        assert_eq!(k.to_string(), "gpu0:chat:qwen3-8b");
        let t = parse_v1("gpu0:tool_execution:shell-tools").expect("valid");
        assert_eq!(t.family, Family::ToolExecution);
    }

    #[test]
    fn bad_keys_are_refused_with_their_cause() {
        assert_eq!(parse_v1("gpu0:chat"), Err(KeyError::Shape));
        assert_eq!(parse_v1("gpu0:chat:a:b"), Err(KeyError::Shape));
        assert_eq!(parse_v1("gpu0:audio:m"), Err(KeyError::UnknownFamily));
        assert_eq!(parse_v1("gpu0:Chat:m"), Err(KeyError::UnknownFamily));
        assert_eq!(
            parse_v1("GPU:chat:m"),
            Err(KeyError::Component("animator", SlugError::BadStart))
        );
        assert_eq!(
            parse_v1("gpu0:chat:models/q.gguf"),
            Err(KeyError::Component("model_id", SlugError::BadChar))
        );
        assert_eq!(
            parse_v1("gpu0:chat:qwen-latest"),
            Err(KeyError::Component("model_id", SlugError::FloatingRevision))
        );
        assert_eq!(
            parse_v1("gpu0:chat: m"),
            Err(KeyError::Component("model_id", SlugError::BadStart))
        );
    }

    #[test]
    fn keys_are_bounded_to_what_ward_can_decide_on() {
        let long = "m".repeat(64);
        // 64 + `:tool_execution:` + 48 = 128: the longest key.
        let k = CapabilityKey::new(&long, Family::ToolExecution, &"m".repeat(48)).expect("128");
        assert_eq!(k.len(), KEY_MAX);
        assert_eq!(k.to_string().len(), KEY_MAX);
        assert_eq!(parse_v1(&k.to_string()), Ok(k));
        assert_eq!(
            CapabilityKey::new(&long, Family::ToolExecution, &"m".repeat(49)),
            Err(KeyError::TooLong)
        );
        assert_eq!(
            parse_v1(&format!("{long}:chat:{long}")),
            Err(KeyError::TooLong),
            "130 characters of valid slugs"
        );
        assert_eq!(parse_any(&"a".repeat(10_000)), Err(KeyError::TooLong));
    }

    #[test]
    fn v2_keys_parse_but_are_not_admitted_as_v1() {
        let any = parse_any("gpu0:model.chat@1:qwen3-8b@r3").expect("v2");
        assert_eq!(
            any,
            AnyKey::V2(InterfaceProfileKey {
                animator: "gpu0".into(),
                interface_id: "model.chat@1".into(),
                profile_ref: "qwen3-8b@r3".into(),
            })
        );
        assert_eq!(
            parse_v1("gpu0:model.chat@1:qwen3-8b@r3"),
            Err(KeyError::V2NotAdmitted)
        );
        assert!(parse_any("gpu0:model.chat@x:q@r1").is_err());
        assert!(parse_any("gpu0:model.chat@1:q@latest").is_err());
        assert!(parse_any("gpu0:model.chat@1:q").is_err());
    }

    #[test]
    fn families_round_trip() {
        for f in Family::ALL {
            assert_eq!(Family::parse(f.as_str()), Some(f));
        }
        assert_eq!(Family::parse("audio"), None);
        let exec: Vec<_> = Family::ALL
            .into_iter()
            .filter(|f| f.v1_executable())
            .collect();
        assert_eq!(exec, vec![Family::Chat, Family::ToolExecution]);
    }

    #[test]
    fn labels() {
        assert_eq!(check_label("worker-1", 128, false), Ok(()));
        assert!(check_label("", 128, false).is_err());
        assert_eq!(check_label("", 128, true), Ok(()));
        assert!(check_label(" x", 128, false).is_err());
        assert!(check_label("a\nb", 128, false).is_err());
        assert!(check_label(&"x".repeat(129), 128, false).is_err());
    }

    proptest! {
        #[test]
        fn any_valid_key_round_trips(
            a in "[a-z0-9][a-z0-9._-]{0,20}",
            m in "[a-z0-9][a-z0-9._-]{0,20}",
            f in 0usize..7,
        ) {
            let family = Family::ALL[f];
            prop_assume!(check_slug(&a).is_ok() && check_slug(&m).is_ok());
            let key = CapabilityKey::new(&a, family, &m).expect("slugs");
            prop_assert_eq!(parse_v1(&key.to_string()), Ok(key));
        }

        #[test]
        fn parsing_never_panics_and_accepted_keys_are_canonical(s in "\\PC{0,80}") {
            if let Ok(k) = parse_v1(&s) {
                prop_assert_eq!(k.to_string(), s);
            }
        }
    }
}
