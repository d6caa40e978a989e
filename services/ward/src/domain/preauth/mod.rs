//! Standing preauthorization ("Codex", LychD design rules §25): rules an operator writes in TOML
//! files that settle a matching consent as granted without a live verdict. Pure: parsing and
//! validating rule text, the pattern grammar, matching a proposal, and the policy digest.
//!
//! Pattern grammar (principal names, tool names, effect owners): a pattern is segments joined
//! by the separators `:` `/` `.`; each segment is a literal or `*`, which matches exactly one
//! whole non-empty segment without separators. So `fs.*` matches `fs.write` but not
//! `fs.write.all` nor `fs`; `*` alone matches one segment. Nothing else is special: no partial
//! wildcards (`fs.wr*`), no `**`, no character classes — a wildcard never crosses `:`, `/` or `.`.

use std::collections::{BTreeMap, BTreeSet};

use lychd_helmloop::{Map, Value, binding_digest};
use serde::Deserialize;

use super::consent::{EffectClass, Proposal};

/// Longest slug.
pub const SLUG_MAX: usize = 64;
/// Most values in one argument allow-list, prefixes in one path constraint, constraints in a rule.
pub const LIST_MAX: usize = 64;

/// A rule file's content: `[[rule]]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    rule: Vec<RuleText>,
}

/// One rule as written. Unknown keys anywhere fail the file (an unknown constraint kind must
/// never be ignored).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleText {
    slug: String,
    effect_class: String,
    principal: String,
    tool: String,
    #[serde(default = "any")]
    effect_owner: String,
    #[serde(default)]
    priority: i32,
    expires_at: Option<toml::value::Datetime>,
    max_uses: Option<i64>,
    #[serde(default)]
    constraints: Constraints,
}

fn any() -> String {
    "*".to_owned()
}

/// The constraint kinds; any other key is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Constraints {
    /// Argument name → the values it may take (present and equal to one of them).
    #[serde(default)]
    arguments: BTreeMap<String, Vec<toml::Value>>,
    /// Argument name → absolute path prefixes (component-wise) its string value must lie under.
    #[serde(default)]
    path_prefixes: BTreeMap<String, Vec<String>>,
}

/// A pattern of the grammar above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

fn is_separator(c: char) -> bool {
    matches!(c, ':' | '/' | '.')
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, &'static str> {
        if s.is_empty() || s.len() > 128 {
            return Err("must be 1..128 characters");
        }
        for segment in s.split(is_separator) {
            if segment.is_empty() {
                return Err("has an empty segment");
            }
            if segment != "*" && segment.contains('*') {
                return Err("uses `*` inside a segment: `*` matches one whole segment only");
            }
            if !segment
                .chars()
                .all(|c| c == '*' || c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err("must be segments of [A-Za-z0-9_-] or `*`, joined by `:` `/` `.`");
            }
        }
        Ok(Pattern(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Does `name` match: the same separators in the same places, each literal segment equal,
    /// each `*` one non-empty segment?
    pub fn matches(&self, name: &str) -> bool {
        let pattern_seps: Vec<char> = self.0.chars().filter(|c| is_separator(*c)).collect();
        let name_seps: Vec<char> = name.chars().filter(|c| is_separator(*c)).collect();
        if pattern_seps != name_seps {
            return false;
        }
        self.0
            .split(is_separator)
            .zip(name.split(is_separator))
            .all(|(p, n)| !n.is_empty() && (p == "*" || p == n))
    }
}

/// A value an argument may take (TOML scalars; there is no TOML `null`, so an explicit JSON
/// `null` argument never matches, and an absent argument never matches either).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Allowed {
    String(String),
    Int(i64),
    Bool(bool),
}

impl Allowed {
    fn equals(&self, v: &Value) -> bool {
        match (self, v) {
            (Allowed::String(a), Value::String(b)) => a == b,
            (Allowed::Int(a), Value::Int(b)) => a == b,
            (Allowed::Bool(a), Value::Bool(b)) => a == b,
            _ => false,
        }
    }

    fn value(&self) -> Value {
        match self {
            Allowed::String(s) => Value::String(s.clone()),
            Allowed::Int(n) => Value::Int(*n),
            Allowed::Bool(b) => Value::Bool(*b),
        }
    }
}

/// One validated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub slug: String,
    /// The file it came from (for operators; not part of the policy).
    pub source: String,
    pub class: EffectClass,
    pub principal: Pattern,
    pub tool: Pattern,
    pub effect_owner: Pattern,
    pub priority: i32,
    /// Unix seconds.
    pub expires_at: Option<i64>,
    pub max_uses: Option<i64>,
    pub arguments: BTreeMap<String, BTreeSet<Allowed>>,
    pub path_prefixes: BTreeMap<String, Vec<String>>,
}

/// Why a rule file was refused: file, field, what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct RuleError {
    pub file: String,
    pub field: String,
    pub message: String,
}

/// Whether `p` is a normalized absolute path: starts with `/`, no empty, `.` or `..` component
/// (a trailing `/` is allowed only for `/` itself).
pub fn is_clean_absolute(p: &str) -> bool {
    if p == "/" {
        return true;
    }
    p.starts_with('/')
        && p[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Does `path` lie under `prefix`, component-wise (`/srv/a` is under `/srv` but `/srvx` is not)?
pub fn under(path: &str, prefix: &str) -> bool {
    prefix == "/"
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Parse the rule files `(name, text)` as ONE set: every rule valid, slugs unique across files.
pub fn parse_set(files: &[(String, String)]) -> Result<Vec<Rule>, RuleError> {
    let mut rules = Vec::new();
    let mut slugs = BTreeMap::new();
    for (file, text) in files {
        let err = |field: String, message: String| RuleError {
            file: file.clone(),
            field,
            message,
        };
        let parsed: RuleFile = serde_path_to_error::deserialize(
            toml::de::Deserializer::parse(text)
                .map_err(|e| err(String::new(), e.message().to_owned()))?,
        )
        .map_err(|e| err(e.path().to_string(), e.into_inner().message().to_owned()))?;
        for (i, r) in parsed.rule.into_iter().enumerate() {
            let at = |f: &str| format!("rule[{i}].{f}");
            let rule = validate(file, r).map_err(|(f, m)| err(at(&f), m.to_owned()))?;
            if let Some(first) = slugs.insert(rule.slug.clone(), file.clone()) {
                return Err(err(
                    at("slug"),
                    format!("duplicates the slug of a rule in {first}"),
                ));
            }
            rules.push(rule);
        }
    }
    Ok(rules)
}

fn validate(file: &str, r: RuleText) -> Result<Rule, (String, &'static str)> {
    let bad = |f: &str, m: &'static str| (f.to_owned(), m);
    if r.slug.is_empty()
        || r.slug.len() > SLUG_MAX
        || !r
            .slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(bad("slug", "must be 1..64 characters of [a-z0-9-]"));
    }
    let class = EffectClass::parse(&r.effect_class).ok_or(bad(
        "effect_class",
        "is not an effect class (standard, bounded, …)",
    ))?;
    if class.live_only() {
        return Err(bad(
            "effect_class",
            "is live-only: core mutation, migration, destructive deletion, secret or authority change and host lifecycle are never preauthorized",
        ));
    }
    let principal = Pattern::parse(&r.principal).map_err(|m| bad("principal", m))?;
    let tool = Pattern::parse(&r.tool).map_err(|m| bad("tool", m))?;
    let effect_owner = Pattern::parse(&r.effect_owner).map_err(|m| bad("effect_owner", m))?;
    let expires_at = match r.expires_at {
        None => None,
        Some(dt) => {
            if dt.offset.is_none() || dt.date.is_none() || dt.time.is_none() {
                return Err(bad(
                    "expires_at",
                    "must be a date and time with an explicit offset (e.g. 2027-01-01T00:00:00Z)",
                ));
            }
            let at = time::OffsetDateTime::parse(
                &dt.to_string(),
                &time::format_description::well_known::Rfc3339,
            )
            .map_err(|_| bad("expires_at", "is not an RFC 3339 instant"))?;
            Some(at.unix_timestamp())
        }
    };
    if r.max_uses.is_some_and(|n| n < 1) {
        return Err(bad("max_uses", "must be at least 1"));
    }
    let mut arguments = BTreeMap::new();
    for (name, values) in r.constraints.arguments {
        let field = format!("constraints.arguments.{name}");
        if values.is_empty() || values.len() > LIST_MAX {
            return Err((field, "must list 1..64 allowed values"));
        }
        let mut set = BTreeSet::new();
        for v in values {
            set.insert(match v {
                // Part of the canonical (HL-C14N-1) policy digest.
                toml::Value::String(s) if !lychd_helmloop::is_nfc(&s) => {
                    return Err((field, "strings must be in Unicode NFC"));
                }
                toml::Value::String(s) => Allowed::String(s),
                toml::Value::Integer(n) => Allowed::Int(n),
                toml::Value::Boolean(b) => Allowed::Bool(b),
                _ => return Err((field, "values must be strings, integers or booleans")),
            });
        }
        arguments.insert(name, set);
    }
    let mut path_prefixes = BTreeMap::new();
    for (name, prefixes) in r.constraints.path_prefixes {
        let field = format!("constraints.path_prefixes.{name}");
        if prefixes.is_empty() || prefixes.len() > LIST_MAX {
            return Err((field, "must list 1..64 prefixes"));
        }
        if !prefixes.iter().all(|p| lychd_helmloop::is_nfc(p)) {
            return Err((field, "prefixes must be in Unicode NFC"));
        }
        if !prefixes.iter().all(|p| is_clean_absolute(p)) {
            return Err((
                field,
                "prefixes must be absolute, without `.`, `..` or empty components",
            ));
        }
        path_prefixes.insert(name, prefixes);
    }
    if arguments.len() + path_prefixes.len() > LIST_MAX {
        return Err(bad("constraints", "has more than 64 constraints"));
    }
    if class == EffectClass::Bounded
        && (arguments.is_empty() && path_prefixes.is_empty()
            || expires_at.is_none()
            || r.max_uses.is_none())
    {
        return Err(bad(
            "effect_class",
            "bounded rules need at least one constraint, expires_at and max_uses",
        ));
    }
    Ok(Rule {
        slug: r.slug,
        source: file.to_owned(),
        class,
        principal,
        tool,
        effect_owner,
        priority: r.priority,
        expires_at,
        max_uses: r.max_uses,
        arguments,
        path_prefixes,
    })
}

impl Rule {
    /// The policy as one canonical object (everything but the source file and the use count).
    pub fn policy(&self) -> Value {
        let mut m = Map::new();
        m.insert("slug", Value::String(self.slug.clone()));
        m.insert(
            "effect_class",
            Value::String(self.class.as_str().to_owned()),
        );
        m.insert("principal", Value::String(self.principal.0.clone()));
        m.insert("tool", Value::String(self.tool.0.clone()));
        m.insert("effect_owner", Value::String(self.effect_owner.0.clone()));
        m.insert("priority", Value::Int(i64::from(self.priority)));
        if let Some(e) = self.expires_at {
            m.insert("expires_at", Value::Int(e));
        }
        if let Some(n) = self.max_uses {
            m.insert("max_uses", Value::Int(n));
        }
        let arguments: Map = self
            .arguments
            .iter()
            .map(|(k, vs)| {
                (
                    k.clone(),
                    Value::Array(vs.iter().map(Allowed::value).collect()),
                )
            })
            .collect();
        m.insert("arguments", Value::Object(arguments));
        let prefixes: Map = self
            .path_prefixes
            .iter()
            .map(|(k, ps)| {
                (
                    k.clone(),
                    Value::Array(ps.iter().map(|p| Value::String(p.clone())).collect()),
                )
            })
            .collect();
        m.insert("path_prefixes", Value::Object(prefixes));
        Value::Object(m)
    }

    /// `sha256:<hex>` of [`Rule::policy`] (HelmLoop binding domain).
    pub fn policy_digest(&self) -> String {
        binding_digest(&self.policy())
            .map(|d| d.to_string())
            .unwrap_or_else(|_| unreachable!("invariant: a rule's policy is canonical JSON"))
    }

    /// Does the proposal `p` by the principal named `principal` match this rule (class,
    /// patterns and every constraint)? Time and use limits are the database's to check.
    pub fn matches(&self, p: &Proposal, principal: &str) -> bool {
        if p.class != self.class
            || !self.principal.matches(principal)
            || !self.tool.matches(&p.tool_name)
            || !self.effect_owner.matches(&p.effect_owner)
        {
            return false;
        }
        let arg = |name: &str| p.arguments.get(name);
        let allowed = self
            .arguments
            .iter()
            .all(|(name, set)| arg(name).is_some_and(|v| set.iter().any(|a| a.equals(v))));
        let paths = self.path_prefixes.iter().all(|(name, prefixes)| {
            arg(name).and_then(Value::as_str).is_some_and(|path| {
                is_clean_absolute(path) && prefixes.iter().any(|pre| under(path, pre))
            })
        });
        allowed && paths
    }
}

#[cfg(test)]
mod tests;
