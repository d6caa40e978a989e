//! A structural validator compiled once from the embedded schemas: the
//! reducer's fast yes/no check of a record (or input) against its shape.
//!
//! The JSON Schema interpreter (`jsonschema`, see [`crate::schema`]) remains
//! the reference: it produces every issue list (`helmloop validate`, the
//! reducer's slow path for an invalid record) and the tests check that both
//! agree on every conformance input and on systematically mutated records.
//! This module compiles the same schema text into a small tree of checks that
//! runs on [`Value`] directly, with no conversion to `serde_json` and no
//! regular-expression engine.
//!
//! Only the keywords the bundle uses are compiled; a schema with any other
//! keyword, a `format` other than `date-time` beside the timestamp pattern,
//! or a `pattern` that is not one of the bundle's three, does not compile,
//! and the caller then falls back to the interpreter. A test requires every
//! shape to compile, so a schema change cannot silently lose the fast path.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::Value as Json;

use crate::time::parse_timestamp;
use crate::utf16::{cmp_utf16, eq_short};
use crate::value::{Map, Value};

/// The bundle's `Timestamp` pattern.
const TIMESTAMP_PATTERN: &str = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z$";
/// The bundle's `Identifier` pattern.
const IDENTIFIER_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$";
/// The bundle's `Digest` pattern.
const DIGEST_PATTERN: &str = "^sha256:[0-9a-f]{64}$";

/// Keywords that only annotate and never fail.
const ANNOTATIONS: [&str; 5] = ["title", "description", "$comment", "examples", "default"];

type NodeId = usize;

/// `type` names as bits.
const NULL: u8 = 1;
const BOOLEAN: u8 = 2;
const INTEGER: u8 = 4;
const NUMBER: u8 = 8;
const STRING: u8 = 16;
const ARRAY: u8 = 32;
const OBJECT: u8 = 64;

/// A pattern of the bundle, matched by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    Timestamp,
    Identifier,
    Digest,
}

impl Pattern {
    fn from_source(s: &str) -> Option<Pattern> {
        match s {
            TIMESTAMP_PATTERN => Some(Pattern::Timestamp),
            IDENTIFIER_PATTERN => Some(Pattern::Identifier),
            DIGEST_PATTERN => Some(Pattern::Digest),
            _ => None,
        }
    }

    fn matches(self, s: &str) -> bool {
        let b = s.as_bytes();
        match self {
            Pattern::Timestamp => timestamp_syntax(b),
            Pattern::Identifier => {
                (1..=128).contains(&b.len())
                    && b[0].is_ascii_alphanumeric()
                    && b[1..].iter().all(|&c| IDENTIFIER_TAIL[usize::from(c)])
            }
            Pattern::Digest => s.strip_prefix("sha256:").is_some_and(|hex| {
                hex.len() == 64 && hex.bytes().all(|c| LOWER_HEX[usize::from(c)])
            }),
        }
    }
}

/// A byte class as a table.
const fn class(ranges: &[(u8, u8)]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut r = 0;
    while r < ranges.len() {
        let (lo, hi) = ranges[r];
        let mut c = lo as usize;
        while c <= hi as usize {
            t[c] = true;
            c += 1;
        }
        r += 1;
    }
    t
}

/// `[A-Za-z0-9._:-]`
static IDENTIFIER_TAIL: [bool; 256] = class(&[
    (b'A', b'Z'),
    (b'a', b'z'),
    (b'0', b'9'),
    (b'.', b'.'),
    (b'_', b'_'),
    (b':', b':'),
    (b'-', b'-'),
]);
/// `[0-9a-f]`
static LOWER_HEX: [bool; 256] = class(&[(b'0', b'9'), (b'a', b'f')]);

/// `TIMESTAMP_PATTERN`: `YYYY-MM-DDTHH:MM:SS.sssZ` with month 01–12, day
/// 01–31, hour 00–23, minute and second 00–59.
fn timestamp_syntax(b: &[u8]) -> bool {
    if b.len() != 24 {
        return false;
    }
    let layout = b"dddd-dd-ddTdd:dd:dd.dddZ";
    if !b.iter().zip(layout).all(|(&c, &l)| match l {
        b'd' => c.is_ascii_digit(),
        l => c == l,
    }) {
        return false;
    }
    let two = |i: usize| (b[i] - b'0') * 10 + (b[i + 1] - b'0');
    (1..=12).contains(&two(5))
        && (1..=31).contains(&two(8))
        && two(11) <= 23
        && two(14) <= 59
        && two(17) <= 59
}

/// One compiled keyword.
#[derive(Debug)]
enum Check {
    Type(u8),
    Const(Value),
    Enum(Vec<Value>),
    Pattern(Pattern),
    /// `type: string` and `pattern` fused: a string that matches.
    StringPattern(Pattern),
    /// `format: date-time` beside the timestamp pattern: a real calendar day.
    CalendarDay,
    MinLength(u64),
    MaxLength(u64),
    Minimum(i64),
    Maximum(i64),
    Items(NodeId),
    MinItems(u64),
    MaxItems(u64),
    UniqueItems,
    /// `properties`, `required` and `additionalProperties: false` in one
    /// pass over the members (both sides in UTF-16 order).
    Object {
        properties: Vec<Property>,
        closed: bool,
        /// `type: object` fused in: anything else fails.
        strict: bool,
    },
    IfThenElse(NodeId, Option<NodeId>, Option<NodeId>),
    AllOf(Vec<NodeId>),
    AnyOf(Vec<NodeId>),
    Not(NodeId),
    Ref(NodeId),
    False,
}

/// A member name an object schema mentions.
#[derive(Debug)]
struct Property {
    name: String,
    /// Its schema under `properties`; `None` when only `required` names it.
    node: Option<NodeId>,
    required: bool,
}

/// The compiled checks of one shape; node 0 is its root.
#[derive(Debug)]
pub(crate) struct Program {
    nodes: Vec<Vec<Check>>,
}

/// The documents a schema may refer to.
struct Compiler<'a> {
    bundle: &'a Json,
    bundle_id: &'a str,
    nodes: Vec<Vec<Check>>,
    /// Compiled `$defs` of the bundle, by name.
    defs: HashMap<String, NodeId>,
}

impl Program {
    /// Compiles a root schema document (with its own `$id`) whose
    /// references name `$defs` of `bundle` (`$id` `bundle_id`). `None` when
    /// it uses anything this module does not know.
    pub(crate) fn compile_document(
        schema: &Json,
        bundle: &Json,
        bundle_id: &str,
    ) -> Option<Program> {
        let base = schema.get("$id")?.as_str()?;
        Program::build(bundle, bundle_id, |c| c.compile(schema, base, true))
    }

    /// Compiles a subschema found inside `bundle` (its references are
    /// relative to the bundle).
    pub(crate) fn compile_subschema(
        schema: &Json,
        bundle: &Json,
        bundle_id: &str,
    ) -> Option<Program> {
        Program::build(bundle, bundle_id, |c| c.compile(schema, bundle_id, false))
    }

    /// Compiles `$defs/name` of `bundle`.
    pub(crate) fn compile_def(name: &str, bundle: &Json, bundle_id: &str) -> Option<Program> {
        Program::build(bundle, bundle_id, |c| Some(vec![Check::Ref(c.def(name)?)]))
    }

    fn build(
        bundle: &Json,
        bundle_id: &str,
        root: impl FnOnce(&mut Compiler<'_>) -> Option<Vec<Check>>,
    ) -> Option<Program> {
        let mut c = Compiler {
            bundle,
            bundle_id,
            nodes: Vec::new(),
            defs: HashMap::new(),
        };
        let id = c.reserve();
        c.nodes[id] = root(&mut c)?;
        let mut program = Program { nodes: c.nodes };
        program.skip_aliases();
        program.nodes.iter_mut().for_each(fuse_type);
        Some(program)
    }

    /// Points every reference to a node that is only `$ref` at its target,
    /// so that `{"$ref": "#/$defs/Identifier"}` costs no extra step.
    fn skip_aliases(&mut self) {
        let alias = |nodes: &[Vec<Check>], mut n: NodeId| {
            // A cycle of pure references is bounded by the node count.
            for _ in 0..nodes.len() {
                match nodes[n].as_slice() {
                    [Check::Ref(m)] => n = *m,
                    _ => break,
                }
            }
            n
        };
        let targets: Vec<NodeId> = (0..self.nodes.len())
            .map(|n| alias(&self.nodes, n))
            .collect();
        for check in self.nodes.iter_mut().flatten() {
            match check {
                Check::Items(n) | Check::Not(n) | Check::Ref(n) => *n = targets[*n],
                Check::IfThenElse(a, b, c) => {
                    *a = targets[*a];
                    for n in [b, c].into_iter().flatten() {
                        *n = targets[*n];
                    }
                }
                Check::AllOf(ns) | Check::AnyOf(ns) => {
                    ns.iter_mut().for_each(|n| *n = targets[*n]);
                }
                Check::Object { properties, .. } => {
                    for n in properties.iter_mut().filter_map(|p| p.node.as_mut()) {
                        *n = targets[*n];
                    }
                }
                _ => {}
            }
        }
    }

    /// Whether `v` is valid.
    pub(crate) fn is_valid(&self, v: &Value) -> bool {
        self.valid(0, v)
    }

    fn valid(&self, node: NodeId, v: &Value) -> bool {
        self.nodes[node].iter().all(|check| self.check(check, v))
    }

    fn check(&self, check: &Check, v: &Value) -> bool {
        match (check, v) {
            (Check::Type(bits), v) => bits & type_bits(v) != 0,
            (Check::Const(c), v) => c == v,
            (Check::Enum(options), v) => options.contains(v),
            (Check::Pattern(p) | Check::StringPattern(p), Value::String(s)) => p.matches(s),
            (Check::StringPattern(_), _) => false,
            (Check::CalendarDay, Value::String(s)) => parse_timestamp(s).is_some(),
            (Check::MinLength(n), Value::String(s)) => chars_at_least(s, *n),
            (Check::MaxLength(n), Value::String(s)) => !chars_at_least(s, n.saturating_add(1)),
            (Check::Minimum(n), Value::Int(i)) => i >= n,
            (Check::Maximum(n), Value::Int(i)) => i <= n,
            (Check::Items(node), Value::Array(a)) => a.iter().all(|x| self.valid(*node, x)),
            (Check::MinItems(n), Value::Array(a)) => a.len() as u64 >= *n,
            (Check::MaxItems(n), Value::Array(a)) => a.len() as u64 <= *n,
            (Check::UniqueItems, Value::Array(a)) => all_unique(a),
            (
                Check::Object {
                    properties, closed, ..
                },
                Value::Object(m),
            ) => self.object(properties, *closed, m),
            (Check::Object { strict: true, .. }, _) => false,
            (Check::IfThenElse(cond, then, otherwise), v) => {
                let branch = if self.valid(*cond, v) {
                    then
                } else {
                    otherwise
                };
                branch.is_none_or(|b| self.valid(b, v))
            }
            (Check::AllOf(nodes), v) => nodes.iter().all(|&n| self.valid(n, v)),
            (Check::AnyOf(nodes), v) => nodes.iter().any(|&n| self.valid(n, v)),
            (Check::Not(node), v) => !self.valid(*node, v),
            (Check::Ref(node), v) => self.valid(*node, v),
            (Check::False, _) => false,
            // Type-specific keywords accept every other type.
            _ => true,
        }
    }
}

impl Program {
    /// Walks the members and the mentioned names side by side: a member is
    /// checked against its schema or refused as additional, and a required
    /// name passed over is missing.
    fn object(&self, properties: &[Property], closed: bool, m: &Map) -> bool {
        let mut next = properties.iter().peekable();
        for (k, x) in m.iter() {
            let mut node = None;
            while let Some(p) = next.peek() {
                // Mostly equal names: every required member is there.
                let order = if eq_short(&p.name, k) {
                    Ordering::Equal
                } else {
                    cmp_utf16(&p.name, k)
                };
                match order {
                    Ordering::Less if p.required => return false,
                    Ordering::Less => {}
                    Ordering::Equal => node = p.node,
                    Ordering::Greater => break,
                }
                next.next();
                if node.is_some() {
                    break;
                }
            }
            match node {
                Some(n) if !self.valid(n, x) => return false,
                None if closed => return false,
                _ => {}
            }
        }
        next.all(|p| !p.required)
    }
}

/// Whether no two items of `a` are equal (JSON Schema `uniqueItems`). Small
/// arrays are compared pairwise; larger ones are sorted by the total order of
/// [`Value`] (consistent with its equality) and neighbours compared, so the
/// cost is O(n log n) comparisons whatever an input holds (resolutions §H.7).
pub(crate) fn all_unique(a: &[Value]) -> bool {
    if a.len() <= 8 {
        return a.iter().enumerate().all(|(i, x)| !a[i + 1..].contains(x));
    }
    let mut sorted: Vec<&Value> = a.iter().collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

/// Folds a single-type `type` check into the check that already looks at
/// that type (`string` + `pattern`, `object` + properties), one step less
/// per value with the same verdict.
fn fuse_type(checks: &mut Vec<Check>) {
    let Some(t) = checks.iter().position(|c| matches!(c, Check::Type(_))) else {
        return;
    };
    let fused = match checks[t] {
        Check::Type(STRING) => checks.iter_mut().any(|c| match c {
            Check::Pattern(p) => {
                *c = Check::StringPattern(*p);
                true
            }
            _ => false,
        }),
        Check::Type(OBJECT) => checks.iter_mut().any(|c| match c {
            Check::Object { strict, .. } => {
                *strict = true;
                true
            }
            _ => false,
        }),
        _ => false,
    };
    if fused {
        checks.remove(t);
    }
}

fn type_bits(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        // Every number of the profile is an integer.
        Value::Int(_) => INTEGER | NUMBER,
        Value::String(_) => STRING,
        Value::Array(_) => ARRAY,
        Value::Object(_) => OBJECT,
    }
}

/// Whether `s` has at least `n` characters (JSON Schema lengths count code points).
fn chars_at_least(s: &str, n: u64) -> bool {
    // A character is at least one byte, so the byte length bounds the count.
    (s.len() as u64) >= n && (s.chars().count() as u64) >= n
}

impl Compiler<'_> {
    fn reserve(&mut self) -> NodeId {
        self.nodes.push(Vec::new());
        self.nodes.len() - 1
    }

    /// A subschema as a node of its own.
    fn node(&mut self, schema: &Json, base: &str) -> Option<NodeId> {
        let id = self.reserve();
        let checks = self.compile(schema, base, false)?;
        self.nodes[id] = checks;
        Some(id)
    }

    fn nodes_of(&mut self, list: &Json, base: &str) -> Option<Vec<NodeId>> {
        list.as_array()?
            .iter()
            .map(|s| self.node(s, base))
            .collect()
    }

    /// The node of `$defs/name` of the bundle, compiled once (references may
    /// be cyclic: the node is registered before its body is compiled).
    fn def(&mut self, name: &str) -> Option<NodeId> {
        if let Some(&id) = self.defs.get(name) {
            return Some(id);
        }
        let schema = self.bundle.get("$defs")?.get(name)?;
        let id = self.reserve();
        self.defs.insert(name.to_owned(), id);
        let checks = self.compile(schema, self.bundle_id, false)?;
        self.nodes[id] = checks;
        Some(id)
    }

    /// Resolves a `$ref` (against `base`, the `$id` of the document it is
    /// in) to a bundle definition `…#/$defs/X`.
    fn reference(&mut self, r: &str, base: &str) -> Option<NodeId> {
        let (doc, pointer) = r.split_once('#')?;
        let target = if doc.is_empty() {
            base.to_owned()
        } else if doc.contains("://") {
            doc.to_owned()
        } else if doc.starts_with(['/', '.']) {
            return None;
        } else {
            let dir = &base[..base.rfind('/')? + 1];
            format!("{dir}{doc}")
        };
        if target != self.bundle_id {
            return None;
        }
        let name = pointer.strip_prefix("/$defs/")?;
        if name.contains(['/', '~', '%']) {
            return None;
        }
        self.def(name)
    }

    fn compile(&mut self, schema: &Json, base: &str, root: bool) -> Option<Vec<Check>> {
        let obj = match schema {
            Json::Bool(true) => return Some(Vec::new()),
            Json::Bool(false) => return Some(vec![Check::False]),
            Json::Object(obj) => obj,
            _ => return None,
        };
        let mut checks = Vec::new();
        let pattern = match obj.get("pattern") {
            Some(p) => Some(Pattern::from_source(p.as_str()?)?),
            None => None,
        };
        let mut properties: Vec<Property> = Vec::new();
        let mut object = false;
        let mut closed = false;
        for (k, v) in obj {
            match k.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                "$schema" | "$id" if root => {}
                "type" => {
                    let names: Vec<&Json> = match v {
                        Json::Array(a) => a.iter().collect(),
                        one => vec![one],
                    };
                    let mut bits = 0;
                    for n in names {
                        bits |= match n.as_str()? {
                            "null" => NULL,
                            "boolean" => BOOLEAN,
                            "integer" => INTEGER,
                            "number" => NUMBER | INTEGER,
                            "string" => STRING,
                            "array" => ARRAY,
                            "object" => OBJECT,
                            _ => return None,
                        };
                    }
                    checks.push(Check::Type(bits));
                }
                "const" => checks.push(Check::Const(literal(v)?)),
                "enum" => checks.push(Check::Enum(
                    v.as_array()?.iter().map(literal).collect::<Option<_>>()?,
                )),
                "pattern" => checks.push(Check::Pattern(pattern?)),
                // The interpreter asserts `date-time`; beside the timestamp
                // pattern it adds exactly the calendar check.
                "format" if v == "date-time" && pattern == Some(Pattern::Timestamp) => {
                    checks.push(Check::CalendarDay)
                }
                "minLength" => checks.push(Check::MinLength(v.as_u64()?)),
                "maxLength" => checks.push(Check::MaxLength(v.as_u64()?)),
                "minimum" => checks.push(Check::Minimum(v.as_i64()?)),
                "maximum" => checks.push(Check::Maximum(v.as_i64()?)),
                "items" if v.is_object() || v.is_boolean() => {
                    checks.push(Check::Items(self.node(v, base)?))
                }
                "minItems" => checks.push(Check::MinItems(v.as_u64()?)),
                "maxItems" => checks.push(Check::MaxItems(v.as_u64()?)),
                "uniqueItems" => {
                    if v.as_bool()? {
                        checks.push(Check::UniqueItems);
                    }
                }
                "properties" => {
                    object = true;
                    for (name, s) in v.as_object()? {
                        let node = Some(self.node(s, base)?);
                        mention(&mut properties, name).node = node;
                    }
                }
                "additionalProperties" => {
                    object = true;
                    closed = !v.as_bool()?;
                }
                "required" => {
                    object = true;
                    for name in v.as_array()? {
                        mention(&mut properties, name.as_str()?).required = true;
                    }
                }
                "if" => {
                    let cond = self.node(v, base)?;
                    let then = match obj.get("then") {
                        Some(s) => Some(self.node(s, base)?),
                        None => None,
                    };
                    let otherwise = match obj.get("else") {
                        Some(s) => Some(self.node(s, base)?),
                        None => None,
                    };
                    checks.push(Check::IfThenElse(cond, then, otherwise));
                }
                // Without `if`, `then` and `else` are ignored.
                "then" | "else" => {}
                "allOf" => checks.push(Check::AllOf(self.nodes_of(v, base)?)),
                "anyOf" => checks.push(Check::AnyOf(self.nodes_of(v, base)?)),
                "not" => checks.push(Check::Not(self.node(v, base)?)),
                "$ref" => checks.push(Check::Ref(self.reference(v.as_str()?, base)?)),
                _ => return None,
            }
        }
        if object {
            properties.sort_by(|a, b| cmp_utf16(&a.name, &b.name));
            checks.push(Check::Object {
                properties,
                closed,
                strict: false,
            });
        }
        Some(checks)
    }
}

/// The entry for `name` in `properties`, added if new.
fn mention<'a>(properties: &'a mut Vec<Property>, name: &str) -> &'a mut Property {
    let i = match properties.iter().position(|p| p.name == name) {
        Some(i) => i,
        None => {
            properties.push(Property {
                name: name.to_owned(),
                node: None,
                required: false,
            });
            properties.len() - 1
        }
    };
    &mut properties[i]
}

/// A `const`/`enum` literal as a value; only literals the profile can hold
/// (a float could equal an integer under JSON Schema equality, so it does
/// not compile).
fn literal(v: &Json) -> Option<Value> {
    Value::from_serde(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_unique_agrees_with_pairwise_comparison() {
        let pairwise = |a: &[Value]| a.iter().enumerate().all(|(i, x)| !a[i + 1..].contains(x));
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for len in 0..40 {
            for _ in 0..50 {
                let items: Vec<Value> = (0..len)
                    .map(|_| match next() % 5 {
                        0 => Value::Int((next() % 6) as i64),
                        1 => Value::from(format!("s{}", next() % 6)),
                        2 => Value::Array(vec![Value::Int((next() % 3) as i64)]),
                        3 => {
                            let mut m = Map::new();
                            m.insert(format!("k{}", next() % 2), Value::Bool(next() % 2 == 0));
                            Value::Object(m)
                        }
                        _ => Value::Null,
                    })
                    .collect();
                assert_eq!(all_unique(&items), pairwise(&items), "{items:?}");
            }
        }
        let distinct: Vec<Value> = (0..10_000).map(|i| Value::from(format!("x{i}"))).collect();
        assert!(all_unique(&distinct));
        let mut dup = distinct;
        dup.push(Value::from("x5000"));
        assert!(!all_unique(&dup));
    }
}
