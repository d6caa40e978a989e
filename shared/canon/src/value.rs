//! The HL-C14N-1 value model: JSON restricted to safe integers, with objects
//! whose members are always held in canonical (UTF-16 code-unit) order.

use std::cmp::Ordering;

use crate::error::{C14nError, ErrorCode};
use crate::utf16::cmp_utf16;

/// Largest integer magnitude HL-C14N-1 accepts: 2^53 - 1.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Maximum nesting depth of arrays and objects: 128 nested containers parse,
/// the 129th is `C14N_DEPTH_EXCEEDED`.
pub const MAX_DEPTH: usize = 128;

/// A JSON value under the HL-C14N-1 profile.
///
/// Numbers are integers only; objects are [`Map`]s, which keep their members
/// sorted by UTF-16 code units and never hold a name twice. Values built in
/// memory may still break the profile (an unsafe integer, a non-NFC string);
/// [`crate::to_canonical_vec`] reports that instead of emitting bytes the strict
/// parser would refuse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Value {
    /// `null`
    #[default]
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer; canonical only when `|n| <= MAX_SAFE_INTEGER`.
    Int(i64),
    /// A string; canonical only when in NFC.
    String(String),
    /// An array; order is significant.
    Array(Vec<Value>),
    /// An object.
    Object(Map),
}

impl Value {
    /// The member `key` when this is an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.get(key),
            _ => None,
        }
    }

    /// The string when this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The integer when this is an integer.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The boolean when this is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The elements when this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The map when this is an object.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// Converts to a `serde_json::Value` (for schema validation and typed decoding).
    pub fn to_serde(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(n) => serde_json::Value::Number((*n).into()),
            Value::String(s) => serde_json::Value::String(s.clone()),
            Value::Array(a) => serde_json::Value::Array(a.iter().map(Value::to_serde).collect()),
            Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .map(|(k, v)| (k.to_owned(), v.to_serde()))
                    .collect(),
            ),
        }
    }

    /// Converts from a `serde_json::Value`, enforcing the profile: numbers must be
    /// safe integers (not `-0`, no fraction), every string must be NFC and
    /// nesting at most [`MAX_DEPTH`] deep.
    pub fn from_serde(v: &serde_json::Value) -> Result<Value, C14nError> {
        Value::from_serde_at(v, 0)
    }

    fn from_serde_at(v: &serde_json::Value, depth: usize) -> Result<Value, C14nError> {
        if matches!(
            v,
            serde_json::Value::Array(_) | serde_json::Value::Object(_)
        ) && depth >= MAX_DEPTH
        {
            return Err(C14nError::in_value(ErrorCode::DepthExceeded));
        }
        Ok(match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(check_int(i)?)
                } else if n.is_u64() {
                    return Err(C14nError::in_value(ErrorCode::UnsafeInteger));
                } else {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    if f == 0.0 && f.is_sign_negative() {
                        return Err(C14nError::in_value(ErrorCode::NegativeZero));
                    }
                    return Err(C14nError::in_value(ErrorCode::NonIntegerNumber));
                }
            }
            serde_json::Value::String(s) => Value::String(check_nfc(s)?.to_owned()),
            serde_json::Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| Value::from_serde_at(x, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            serde_json::Value::Object(o) => {
                let mut members = Vec::with_capacity(o.len());
                for (k, v) in o {
                    members.push((
                        check_nfc(k)?.to_owned(),
                        Value::from_serde_at(v, depth + 1)?,
                    ));
                }
                // serde_json maps cannot hold a name twice.
                Value::Object(Map::from_unique(members))
            }
        })
    }
}

fn check_int(n: i64) -> Result<i64, C14nError> {
    if n.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
        Err(C14nError::in_value(ErrorCode::UnsafeInteger))
    } else {
        Ok(n)
    }
}

fn check_nfc(s: &str) -> Result<&str, C14nError> {
    if crate::text::is_nfc(s) {
        Ok(s)
    } else {
        Err(C14nError::in_value(ErrorCode::NotNfc))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Object(m)
    }
}

/// An object: members sorted by UTF-16 code units of their names, names unique.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Map {
    members: Vec<(String, Value)>,
}

impl Map {
    /// An empty map.
    pub fn new() -> Self {
        Map::default()
    }

    /// Builds a map from members whose names are known to be distinct.
    pub(crate) fn from_unique(mut members: Vec<(String, Value)>) -> Self {
        members.sort_unstable_by(|a, b| cmp_utf16(&a.0, &b.0));
        Map { members }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.members.binary_search_by(|(k, _)| cmp_utf16(k, key))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the map has no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The value of member `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        // Records have a few dozen members at most: comparing lengths first,
        // a scan for the equal name is cheaper than ordered comparisons.
        if self.members.len() <= 32 {
            return self
                .members
                .iter()
                .find(|(k, _)| crate::utf16::eq_short(k, key))
                .map(|(_, v)| v);
        }
        self.find(key).ok().map(|i| &self.members[i].1)
    }

    /// The value of member `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        match self.find(key) {
            Ok(i) => Some(&mut self.members[i].1),
            Err(_) => None,
        }
    }

    /// Whether member `key` exists.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets member `key`, returning its previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Option<Value> {
        let key = key.into();
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.members[i].1, value)),
            Err(i) => {
                self.members.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes member `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        match self.find(key) {
            Ok(i) => Some(self.members.remove(i).1),
            Err(_) => None,
        }
    }

    /// Members in canonical order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.members.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Member names in canonical order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_str())
    }
}

impl FromIterator<(String, Value)> for Map {
    /// Collects members; a later member with a name already seen replaces it.
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        // One stable sort, then the last member of each run of equal names:
        // O(n log n) whatever the order of the members (resolutions §H.7).
        let mut members: Vec<(String, Value)> = iter.into_iter().collect();
        members.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
        let mut out: Vec<(String, Value)> = Vec::with_capacity(members.len());
        for m in members {
            match out.last_mut() {
                Some(last) if last.0 == m.0 => *last = m,
                _ => out.push(m),
            }
        }
        Map { members: out }
    }
}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.members.into_iter()
    }
}

impl PartialOrd for Map {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Map {
    fn cmp(&self, other: &Self) -> Ordering {
        for ((ka, va), (kb, vb)) in self.members.iter().zip(&other.members) {
            match cmp_utf16(ka, kb).then_with(|| va.cmp(vb)) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        self.members.len().cmp(&other.members.len())
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    /// A total order (type rank, then content; strings by UTF-16 code units),
    /// so values can be sorted deterministically.
    fn cmp(&self, other: &Self) -> Ordering {
        fn rank(v: &Value) -> u8 {
            match v {
                Value::Null => 0,
                Value::Bool(_) => 1,
                Value::Int(_) => 2,
                Value::String(_) => 3,
                Value::Array(_) => 4,
                Value::Object(_) => 5,
            }
        }
        match (self, other) {
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::String(a), Value::String(b)) => cmp_utf16(a, b),
            (Value::Array(a), Value::Array(b)) => a.cmp(b),
            (Value::Object(a), Value::Object(b)) => a.cmp(b),
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_utf16_order_and_replaces() {
        let mut m = Map::new();
        assert_eq!(m.insert("\u{E000}", Value::Int(1)), None);
        assert_eq!(m.insert("\u{1F600}", Value::Int(2)), None);
        assert_eq!(m.insert("10", Value::Int(3)), None);
        assert_eq!(m.insert("9", Value::Int(4)), None);
        assert_eq!(m.insert("9", Value::Int(5)), Some(Value::Int(4)));
        let keys: Vec<&str> = m.keys().collect();
        assert_eq!(keys, vec!["10", "9", "\u{1F600}", "\u{E000}"]);
        assert_eq!(m.remove("10"), Some(Value::Int(3)));
        assert_eq!(m.get("9"), Some(&Value::Int(5)));
    }

    #[test]
    fn collecting_members_keeps_the_last_of_a_name_in_utf16_order() {
        let m: Map = [
            ("b", 1),
            ("a", 2),
            ("b", 3),
            ("\u{E000}", 4),
            ("\u{1F600}", 5),
            ("a", 6),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::Int(v)))
        .collect();
        let members: Vec<(&str, &Value)> = m.iter().collect();
        assert_eq!(
            members,
            vec![
                ("a", &Value::Int(6)),
                ("b", &Value::Int(3)),
                ("\u{1F600}", &Value::Int(5)),
                ("\u{E000}", &Value::Int(4)),
            ]
        );
    }

    #[test]
    fn from_serde_enforces_profile() {
        let ok = serde_json::json!({"b": [1, "x", null, true], "a": {"c": -5}});
        let v = Value::from_serde(&ok).unwrap();
        assert_eq!(v.to_serde(), ok);
        let cases = [
            (serde_json::json!(1.5), ErrorCode::NonIntegerNumber),
            (serde_json::json!(-0.0), ErrorCode::NegativeZero),
            (
                serde_json::json!(9007199254740992_i64),
                ErrorCode::UnsafeInteger,
            ),
            (serde_json::json!(u64::MAX), ErrorCode::UnsafeInteger),
            (serde_json::json!("e\u{301}"), ErrorCode::NotNfc),
            (serde_json::json!({"e\u{301}": 1}), ErrorCode::NotNfc),
        ];
        for (input, code) in cases {
            assert_eq!(Value::from_serde(&input).unwrap_err().code(), code);
        }
        let mut deep = serde_json::json!(1);
        for _ in 0..MAX_DEPTH {
            deep = serde_json::json!([deep]);
        }
        assert!(Value::from_serde(&deep).is_ok());
        let deeper = serde_json::json!([deep]);
        assert_eq!(
            Value::from_serde(&deeper).unwrap_err().code(),
            ErrorCode::DepthExceeded
        );
    }
}
