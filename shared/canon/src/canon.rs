//! The HL-C14N-1 canonical serializer (resolutions §A).
//!
//! No whitespace; object members in UTF-16 code-unit order of their decoded
//! names; arrays in order; integers in decimal; strings escape only `"`, `\`
//! and U+0000..U+001F (`\b \t \n \f \r`, else `\u00xx` with lowercase hex),
//! everything else is written literally as UTF-8.
//!
//! Two entry points produce the same bytes: [`to_canonical_vec`] serializes a
//! [`Value`], and [`canonicalize`] streams from JSON text straight to canonical
//! bytes without building a tree (the fast path used for digests of text).

use crate::error::{C14nError, ErrorCode};
use crate::parse::{self, FrameKeys, ParseOptions, Sink};
use crate::text::is_nfc;
use crate::value::{MAX_DEPTH, MAX_SAFE_INTEGER, Value};

/// The member a record digest leaves out (top level only).
pub const DIGEST_MEMBER: &str = "digest";

/// Which members to leave out of the canonical bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Omit {
    /// Serialize the value as it is (binding digests, canonical text).
    #[default]
    Nothing,
    /// Leave out the top-level `digest` member, if the value is an object
    /// (record digests). Nested `digest` members are kept.
    TopLevelDigest,
}

/// Canonical bytes of JSON `input` (strictly parsed, default options).
pub fn canonicalize(input: &[u8]) -> Result<Vec<u8>, C14nError> {
    canonicalize_with(input, ParseOptions::default(), Omit::Nothing)
}

/// Canonical bytes of JSON `input`, with the given parse options and omission.
pub fn canonicalize_with(
    input: &[u8],
    options: ParseOptions,
    omit: Omit,
) -> Result<Vec<u8>, C14nError> {
    let mut out = Vec::with_capacity(input.len());
    canonicalize_into(input, options, omit, &mut out)?;
    Ok(out)
}

/// Appends the canonical bytes of JSON `input` to `out`. On error `out` may
/// hold a partial result.
pub fn canonicalize_into(
    input: &[u8],
    options: ParseOptions,
    omit: Omit,
    out: &mut Vec<u8>,
) -> Result<(), C14nError> {
    let mut sink = CanonSink::new(std::mem::take(out), omit, false);
    let result = parse::run(input, options, &mut sink);
    *out = sink.out;
    result
}

/// Streams the canonical bytes of JSON `input` to `emit`, in order, without
/// materializing the reordered top-level object (the digest fast path).
pub(crate) fn canonicalize_chunks(
    input: &[u8],
    options: ParseOptions,
    omit: Omit,
    mut emit: impl FnMut(&[u8]),
) -> Result<(), C14nError> {
    let mut sink = CanonSink::new(Vec::with_capacity(input.len()), omit, true);
    parse::run(input, options, &mut sink)?;
    match &sink.top {
        None => emit(&sink.out),
        Some(top) => {
            emit(&sink.out[..top.body_start]);
            for (i, &(a, b)) in top.members.iter().enumerate() {
                if i > 0 {
                    emit(b",");
                }
                emit(&sink.out[a..b]);
            }
            emit(b"}");
        }
    }
    Ok(())
}

/// Canonical bytes of `value`.
///
/// Fails with `C14N_UNSAFE_INTEGER`, `C14N_NOT_NFC` or `C14N_DEPTH_EXCEEDED`
/// (without offset) when the in-memory value breaks the profile.
pub fn to_canonical_vec(value: &Value) -> Result<Vec<u8>, C14nError> {
    to_canonical_vec_omit(value, Omit::Nothing)
}

/// Canonical bytes of `value`, leaving out what `omit` says.
pub fn to_canonical_vec_omit(value: &Value, omit: Omit) -> Result<Vec<u8>, C14nError> {
    let mut out = Vec::new();
    match (value, omit) {
        (Value::Object(m), Omit::TopLevelDigest) => {
            out.push(b'{');
            let mut first = true;
            for (k, v) in m.iter().filter(|(k, _)| *k != DIGEST_MEMBER) {
                if !first {
                    out.push(b',');
                }
                first = false;
                write_key(&mut out, k)?;
                write_value(&mut out, v, 1)?;
            }
            out.push(b'}');
        }
        _ => write_value(&mut out, value, 0)?,
    }
    Ok(out)
}

/// Canonical bytes of `value` with the nesting limit counted inside each
/// record found at `roots` (resolutions §H.8), as [`parse::parse_records`]
/// reads them: an evaluation input assembled from records that serialize on
/// their own always serializes. With `RecordRoots::None` it is
/// [`to_canonical_vec`].
pub fn to_canonical_vec_records(
    value: &Value,
    roots: parse::RecordRoots,
) -> Result<Vec<u8>, C14nError> {
    let mut out = Vec::new();
    write_with_roots(&mut out, value, 0, roots.root(), roots)?;
    Ok(out)
}

fn write_with_roots(
    out: &mut Vec<u8>,
    value: &Value,
    depth: usize,
    at: parse::At,
    roots: parse::RecordRoots,
) -> Result<(), C14nError> {
    if at == parse::At::Off {
        return write_value(out, value, depth);
    }
    match value {
        Value::Array(items) => {
            if depth >= MAX_DEPTH {
                return Err(C14nError::in_value(ErrorCode::DepthExceeded));
            }
            let records = roots.elements_are_records(at);
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if records {
                    write_value(out, v, 0)?;
                } else {
                    write_value(out, v, depth + 1)?;
                }
            }
            out.push(b']');
        }
        Value::Object(m) => {
            if depth >= MAX_DEPTH {
                return Err(C14nError::in_value(ErrorCode::DepthExceeded));
            }
            out.push(b'{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_key(out, k)?;
                let child = roots.member_at(at, k.as_bytes());
                write_with_roots(out, v, depth + 1, child, roots)?;
            }
            out.push(b'}');
        }
        other => write_value(out, other, depth)?,
    }
    Ok(())
}

/// Writes the canonical bytes of `value` to `out` (cleared first) and returns
/// the byte range of its top-level `digest` member together with one adjacent
/// comma, if it has one: the bytes without that range are exactly
/// [`to_canonical_vec_omit`]`(value, Omit::TopLevelDigest)`. One serialization
/// then feeds both the binding and the record digest.
pub(crate) fn write_canonical_marking_digest(
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<Option<std::ops::Range<usize>>, C14nError> {
    out.clear();
    let Value::Object(m) = value else {
        write_value(out, value, 0)?;
        return Ok(None);
    };
    let mut digest = None;
    out.push(b'{');
    for (i, (k, v)) in m.iter().enumerate() {
        let comma = out.len();
        if i > 0 {
            out.push(b',');
        }
        let start = out.len();
        write_key(out, k)?;
        write_value(out, v, 1)?;
        if k == DIGEST_MEMBER {
            // Not the first member: drop its leading comma; the first member
            // drops the comma that follows it (if any), added below.
            digest = Some(if i > 0 {
                comma..out.len()
            } else {
                start..out.len()
            });
        }
    }
    if let Some(r) = &mut digest
        && r.start == 1
        && m.len() > 1
    {
        r.end += 1;
    }
    out.push(b'}');
    Ok(digest)
}

/// Canonical text of `value` (the canonical bytes are always UTF-8).
pub fn to_canonical_string(value: &Value) -> Result<String, C14nError> {
    let bytes = to_canonical_vec(value)?;
    String::from_utf8(bytes).map_err(|_| C14nError::in_value(ErrorCode::InvalidUtf8))
}

fn write_key(out: &mut Vec<u8>, k: &str) -> Result<(), C14nError> {
    write_nfc_string(out, k)?;
    out.push(b':');
    Ok(())
}

/// Writes `s` as a string literal after checking it is NFC; the escaping
/// scan already tells an ASCII string (always NFC) from one that needs the
/// check.
fn write_nfc_string(out: &mut Vec<u8>, s: &str) -> Result<(), C14nError> {
    if write_escaped(out, s.as_bytes()) && !is_nfc(s) {
        return Err(C14nError::in_value(ErrorCode::NotNfc));
    }
    Ok(())
}

/// Appends the canonical bytes of `value` as a member of a top-level object
/// or array (depth 1).
#[doc(hidden)]
pub fn write_member(out: &mut Vec<u8>, value: &Value) -> Result<(), C14nError> {
    write_value(out, value, 1)
}

fn write_value(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), C14nError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(n) => {
            if n.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
                return Err(C14nError::in_value(ErrorCode::UnsafeInteger));
            }
            write_int(out, *n);
        }
        Value::String(s) => write_nfc_string(out, s)?,
        Value::Array(items) => {
            if depth >= MAX_DEPTH {
                return Err(C14nError::in_value(ErrorCode::DepthExceeded));
            }
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, v, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(m) => {
            if depth >= MAX_DEPTH {
                return Err(C14nError::in_value(ErrorCode::DepthExceeded));
            }
            out.push(b'{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_key(out, k)?;
                write_value(out, v, depth + 1)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_int(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes `s` as a canonical JSON string literal; returns whether it has a
/// byte outside ASCII.
#[doc(hidden)]
pub fn write_escaped(out: &mut Vec<u8>, b: &[u8]) -> bool {
    out.reserve(b.len() + 2);
    out.push(b'"');
    let mut run = 0;
    let mut i = 0;
    let mut high = 0u8;
    loop {
        let (stop, h) = parse::scan_plain(b, i);
        high |= h;
        let Some(&c) = b.get(stop) else {
            break;
        };
        let short: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0A => b"\\n",
            0x0C => b"\\f",
            0x0D => b"\\r",
            _ => b"",
        };
        out.extend_from_slice(&b[run..stop]);
        if short.is_empty() {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 0xF)],
            ]);
        } else {
            out.extend_from_slice(short);
        }
        run = stop + 1;
        i = stop + 1;
    }
    out.extend_from_slice(&b[run..]);
    out.push(b'"');
    high & 0x80 != 0
}

/// Fills `order` with the member indices `0..n` in canonical order.
fn sort_order(order: &mut Vec<usize>, keys: &FrameKeys<'_>, n: usize, sorted: bool) {
    order.clear();
    order.extend(0..n);
    if !sorted {
        // Integer prefixes decide almost always; equal prefixes fall back to
        // the full comparison inside `FrameKeys::cmp`.
        order.sort_unstable_by(|&a, &b| keys.cmp(a, b));
    }
}

/// One member of an open object: its bytes in `out`.
#[derive(Clone, Copy)]
struct Member {
    start: usize,
    end: usize,
}

#[derive(Clone, Copy)]
struct Frame {
    is_object: bool,
    count: usize,
    body_start: usize,
    member_base: usize,
}

/// The top-level object left unreordered: members in canonical order as
/// ranges of `out` (the digest path hashes them in place).
struct TopObject {
    body_start: usize,
    members: Vec<(usize, usize)>,
}

/// Streams canonical bytes: members of each object are written in document
/// order, then reordered in place when the object closes (only when they were
/// not already in canonical order).
struct CanonSink {
    out: Vec<u8>,
    members: Vec<Member>,
    frames: Vec<Frame>,
    scratch: Vec<u8>,
    order: Vec<usize>,
    omit_top_digest: bool,
    defer_top: bool,
    top: Option<TopObject>,
}

impl CanonSink {
    fn new(out: Vec<u8>, omit: Omit, defer_top: bool) -> Self {
        CanonSink {
            out,
            members: Vec::new(),
            frames: Vec::new(),
            scratch: Vec::new(),
            order: Vec::new(),
            omit_top_digest: omit == Omit::TopLevelDigest,
            defer_top,
            top: None,
        }
    }

    #[inline]
    fn before_value(&mut self) {
        if let Some(f) = self.frames.last_mut()
            && !f.is_object
        {
            if f.count > 0 {
                self.out.push(b',');
            }
            f.count += 1;
        }
    }

    fn open(&mut self, is_object: bool, bracket: u8) {
        self.before_value();
        self.out.push(bracket);
        self.frames.push(Frame {
            is_object,
            count: 0,
            body_start: self.out.len(),
            member_base: self.members.len(),
        });
    }
}

impl Sink for CanonSink {
    #[inline]
    fn null(&mut self) {
        self.before_value();
        self.out.extend_from_slice(b"null");
    }

    #[inline]
    fn boolean(&mut self, b: bool) {
        self.before_value();
        self.out
            .extend_from_slice(if b { b"true" as &[u8] } else { b"false" });
    }

    #[inline]
    fn int(&mut self, _n: i64, raw: &[u8]) {
        self.before_value();
        self.out.extend_from_slice(raw);
    }

    #[inline]
    fn string(&mut self, s: &[u8], token: Option<&[u8]>) {
        self.before_value();
        match token {
            Some(t) => self.out.extend_from_slice(t),
            None => {
                write_escaped(&mut self.out, s);
            }
        }
    }

    #[inline]
    fn begin_array(&mut self) {
        self.open(false, b'[');
    }

    #[inline]
    fn end_array(&mut self) {
        self.frames.pop();
        self.out.push(b']');
    }

    #[inline]
    fn begin_object(&mut self) {
        self.open(true, b'{');
    }

    #[inline]
    fn key(&mut self, k: &[u8], token: Option<&[u8]>) {
        let out_len = self.out.len();
        if let Some(f) = self.frames.last_mut() {
            if f.count > 0 {
                if let Some(last) = self.members.last_mut() {
                    last.end = out_len;
                }
                self.out.push(b',');
            }
            f.count += 1;
        }
        let start = self.out.len();
        match token {
            Some(t) => self.out.extend_from_slice(t),
            None => {
                write_escaped(&mut self.out, k);
            }
        }
        self.out.push(b':');
        self.members.push(Member { start, end: 0 });
    }

    fn end_object(&mut self, keys: FrameKeys<'_>) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        let CanonSink {
            out,
            members,
            frames,
            scratch,
            order,
            omit_top_digest,
            defer_top,
            top,
        } = self;
        let ms = &mut members[frame.member_base..];
        if let Some(last) = ms.last_mut() {
            last.end = out.len();
        }
        debug_assert_eq!(ms.len(), keys.len());
        let n = ms.len().min(keys.len());
        let sorted = (1..n).all(|i| keys.cmp(i - 1, i).is_lt());
        let is_top = frames.is_empty();
        let has_digest =
            *omit_top_digest && is_top && (0..n).any(|i| keys.get(i) == DIGEST_MEMBER.as_bytes());
        if is_top && *defer_top {
            sort_order(order, &keys, n, sorted);
            *top = Some(TopObject {
                body_start: frame.body_start,
                members: order
                    .iter()
                    .filter(|&&i| !(has_digest && keys.get(i) == DIGEST_MEMBER.as_bytes()))
                    .map(|&i| (ms[i].start, ms[i].end))
                    .collect(),
            });
            members.truncate(frame.member_base);
            return;
        }
        if !sorted || has_digest {
            sort_order(order, &keys, n, sorted);
            let base = frame.body_start;
            scratch.clear();
            scratch.extend_from_slice(&out[base..]);
            out.truncate(base);
            let mut first = true;
            for &idx in order.iter() {
                if has_digest && keys.get(idx) == DIGEST_MEMBER.as_bytes() {
                    continue;
                }
                let m = ms[idx];
                if !first {
                    out.push(b',');
                }
                first = false;
                out.extend_from_slice(&scratch[m.start - base..m.end - base]);
            }
        }
        out.push(b'}');
        members.truncate(frame.member_base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Map;

    #[test]
    fn values_outside_nfc_are_refused_in_strings_and_names() {
        let not_nfc = "e\u{301}";
        let mut m = Map::new();
        m.insert("k", Value::from(not_nfc));
        let mut named = Map::new();
        named.insert(not_nfc, Value::Null);
        let mut scratch = Vec::new();
        for v in [
            Value::from(not_nfc),
            Value::Array(vec![Value::from("ok"), Value::from(not_nfc)]),
            Value::Object(m),
            Value::Object(named),
        ] {
            let err = to_canonical_vec(&v).unwrap_err();
            assert_eq!(err.code(), ErrorCode::NotNfc, "{v:?}");
            let err = write_canonical_marking_digest(&v, &mut scratch).unwrap_err();
            assert_eq!(err.code(), ErrorCode::NotNfc, "{v:?}");
        }
    }

    #[test]
    fn non_ascii_and_escapes_are_written_literally_or_escaped() {
        let v = Value::Array(vec![
            Value::from("é\u{1F600}\u{E000}"),
            Value::from("q\"b\\c\u{1}\n"),
        ]);
        assert_eq!(
            to_canonical_string(&v).unwrap(),
            "[\"é\u{1F600}\u{E000}\",\"q\\\"b\\\\c\\u0001\\n\"]"
        );
    }
}
