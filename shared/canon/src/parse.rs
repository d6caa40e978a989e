//! The strict HL-C14N-1 parser (resolutions §A), written for this profile.
//!
//! A general JSON parser keeps the last of two duplicate names and accepts
//! fractions, so it cannot be the front end of a canonical digest. This parser
//! checks every rule of the profile and reports the first violation with its
//! code and byte offset, in this precedence:
//!
//! 1. `C14N_TOO_LARGE` when the input exceeds the size cap (offset = the cap);
//! 2. `C14N_BOM` for a leading UTF-8 (`EF BB BF`) or UTF-16 (`FE FF`, `FF FE`)
//!    byte-order mark (offset 0);
//! 3. `C14N_INVALID_UTF8` at the first byte that is not valid UTF-8, wherever
//!    it is in the input;
//! 4. otherwise the first violation in document order.
//!
//! Outside strings the grammar admits only ASCII, so UTF-8 is validated inside
//! strings, fused with the NFC check; when parsing fails for any reason the
//! whole input is checked with `std::str::from_utf8` so that rule 3 keeps its
//! precedence.
//!
//! The grammar is driven through a [`Sink`], so the same checks feed both the
//! tree builder ([`parse`]) and the streaming canonicalizer
//! ([`crate::canonicalize`]).

use std::collections::HashSet;
use std::hash::BuildHasher;

use crate::error::{C14nError, ErrorCode};
use crate::text::{HI, LO, TextError, check_text, load8};
use crate::utf16::cmp_utf16_bytes;
use crate::value::{MAX_DEPTH, MAX_SAFE_INTEGER, Map, Value};

/// Default input size cap: 8 MiB.
pub const DEFAULT_MAX_BYTES: usize = 8 * 1024 * 1024;

/// Parser settings. Only the size cap is configurable; the depth limit is part
/// of the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Inputs longer than this many bytes are `C14N_TOO_LARGE`.
    pub max_bytes: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Where the nesting limit restarts: the depth of a record is counted inside
/// the record itself, wherever the record travels (resolutions §H.8), so a
/// record accepted on its own is accepted inside an evaluation input, a
/// bundle or a conformance case alike. Everything outside those records
/// keeps the limit counted from the document root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordRoots {
    /// The whole document counts from its root (the plain profile).
    #[default]
    None,
    /// Each element of the top-level `records` array is a record
    /// (an evaluation input).
    InputRecords,
    /// Each element of `input.records` is a record (a conformance case).
    CaseRecords,
    /// Each element of a top-level array (a bundle), or of the top-level
    /// `records` array (an evaluation input), is a record (`validate`).
    Document,
}

/// Where a reader or writer is relative to the record roots of a
/// [`RecordRoots`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum At {
    Off,
    Root,
    UnderInput,
    /// The array whose elements are records.
    Records,
}

impl RecordRoots {
    /// Where the document root is.
    pub(crate) fn root(self) -> At {
        if self == RecordRoots::None {
            At::Off
        } else {
            At::Root
        }
    }

    /// Where a member named `k` of an object at `at` is.
    pub(crate) fn member_at(self, at: At, k: &[u8]) -> At {
        match (self, at, k) {
            (RecordRoots::InputRecords | RecordRoots::Document, At::Root, b"records") => {
                At::Records
            }
            (RecordRoots::CaseRecords, At::Root, b"input") => At::UnderInput,
            (RecordRoots::CaseRecords, At::UnderInput, b"records") => At::Records,
            _ => At::Off,
        }
    }

    /// Whether the elements of an array at `at` are records.
    pub(crate) fn elements_are_records(self, at: At) -> bool {
        at == At::Records || (self == RecordRoots::Document && at == At::Root)
    }
}

/// Parses `input` strictly into a [`Value`] with the default options.
pub fn parse(input: &[u8]) -> Result<Value, C14nError> {
    parse_with(input, ParseOptions::default())
}

/// Parses `input` strictly into a [`Value`].
pub fn parse_with(input: &[u8], options: ParseOptions) -> Result<Value, C14nError> {
    parse_records(input, options, RecordRoots::None)
}

/// Parses `input` strictly into a [`Value`], counting the nesting limit
/// inside each record found at `roots` (resolutions §H.8).
pub fn parse_records(
    input: &[u8],
    options: ParseOptions,
    roots: RecordRoots,
) -> Result<Value, C14nError> {
    let mut sink = TreeSink::default();
    run_with(input, options, roots, &mut sink)?;
    Ok(sink.root.unwrap_or(Value::Null))
}

/// Non-zero when one of the 8 bytes of `w` is `"`, `\` or below 0x20; the
/// lowest set bit marks the first such byte (SWAR: higher bits may be false
/// positives after a true one, never before it).
#[inline]
pub(crate) fn stop_mask(w: u64) -> u64 {
    #[inline]
    fn zero_bytes(x: u64) -> u64 {
        x.wrapping_sub(LO) & !x & HI
    }
    let control = w.wrapping_sub(LO * 0x20) & !w & HI;
    control | zero_bytes(w ^ (LO * u64::from(b'"'))) | zero_bytes(w ^ (LO * u64::from(b'\\')))
}

/// Index of the first byte at or after `i` that is `"`, `\` or a control
/// character (or `bytes.len()`), and the OR of the bytes skipped.
#[inline]
pub(crate) fn scan_plain(bytes: &[u8], mut i: usize) -> (usize, u8) {
    let mut high = 0u64;
    while let Some(w) = load8(bytes, i) {
        let m = stop_mask(w);
        if m != 0 {
            let n = (m.trailing_zeros() / 8) as usize;
            let keep = if n == 0 { 0 } else { u64::MAX >> (64 - 8 * n) };
            high |= w & keep;
            i += n;
            return (i, fold_high(high));
        }
        high |= w;
        i += 8;
    }
    let mut tail = 0u8;
    while let Some(&b) = bytes.get(i) {
        if STRING_STOP[b as usize] {
            break;
        }
        tail |= b;
        i += 1;
    }
    (i, fold_high(high) | tail)
}

#[inline]
fn fold_high(w: u64) -> u8 {
    if w & HI != 0 { 0x80 } else { 0 }
}

/// Receives the parse events of one well-formed value, in document order.
///
/// Strings and names arrive as valid, NFC UTF-8 bytes. `token` is the raw
/// quoted token when it had no escape: then it is also the canonical
/// serialization of the string. `raw` of an integer is its token, which the grammar
/// makes canonical.
pub(crate) trait Sink {
    fn null(&mut self);
    fn boolean(&mut self, b: bool);
    fn int(&mut self, n: i64, raw: &[u8]);
    fn string(&mut self, s: &[u8], token: Option<&[u8]>);
    fn begin_array(&mut self);
    fn end_array(&mut self);
    fn begin_object(&mut self);
    fn key(&mut self, k: &[u8], token: Option<&[u8]>);
    /// `keys` are the decoded member names in document order.
    fn end_object(&mut self, keys: FrameKeys<'_>);
}

/// Runs the strict parser over `input`, feeding `sink`.
pub(crate) fn run<S: Sink>(
    input: &[u8],
    options: ParseOptions,
    sink: &mut S,
) -> Result<(), C14nError> {
    run_with(input, options, RecordRoots::None, sink)
}

/// [`run`] with the nesting limit restarting at each record of `roots`.
pub(crate) fn run_with<S: Sink>(
    input: &[u8],
    options: ParseOptions,
    roots: RecordRoots,
    sink: &mut S,
) -> Result<(), C14nError> {
    if input.len() > options.max_bytes {
        return Err(C14nError::at(ErrorCode::TooLarge, options.max_bytes));
    }
    if input.starts_with(&[0xEF, 0xBB, 0xBF])
        || input.starts_with(&[0xFE, 0xFF])
        || input.starts_with(&[0xFF, 0xFE])
    {
        return Err(C14nError::at(ErrorCode::Bom, 0));
    }
    let mut p = Parser {
        bytes: input,
        pos: 0,
        scratch: Vec::new(),
        keys: KeyTracker::default(),
        roots,
    };
    let result = p.document(sink);
    if result.is_err()
        && let Err(e) = std::str::from_utf8(input)
    {
        return Err(C14nError::at(ErrorCode::InvalidUtf8, e.valid_up_to()));
    }
    result
}

/// Bytes that end the fast scan of a string body: `"`, `\` and U+0000..U+001F.
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Where a decoded string lives: a slice of the input, or the scratch buffer.
enum Decoded {
    Input(usize, usize),
    Scratch,
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    scratch: Vec<u8>,
    keys: KeyTracker,
    roots: RecordRoots,
}

impl<'a> Parser<'a> {
    fn document<S: Sink>(&mut self, sink: &mut S) -> Result<(), C14nError> {
        self.skip_ws();
        self.value(0, self.roots.root(), sink)?;
        self.skip_ws();
        if self.pos < self.bytes.len() {
            return Err(C14nError::at(ErrorCode::TrailingInput, self.pos));
        }
        Ok(())
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn syntax(&self) -> C14nError {
        C14nError::at(ErrorCode::Syntax, self.pos)
    }

    fn value<S: Sink>(&mut self, depth: usize, at: At, sink: &mut S) -> Result<(), C14nError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1, at, sink),
            Some(b'[') => self.array(depth + 1, at, sink),
            Some(b'"') => {
                let (s, token) = match self.string_token()? {
                    Decoded::Input(a, b) => (&self.bytes[a..b], Some(&self.bytes[a - 1..b + 1])),
                    Decoded::Scratch => (self.scratch.as_slice(), None),
                };
                sink.string(s, token);
                Ok(())
            }
            Some(b't') => self.literal(b"true", || sink.boolean(true)),
            Some(b'f') => self.literal(b"false", || sink.boolean(false)),
            Some(b'n') => self.literal(b"null", || sink.null()),
            Some(b'-' | b'0'..=b'9') => self.number(sink),
            _ => Err(self.syntax()),
        }
    }

    fn literal(&mut self, word: &[u8], emit: impl FnOnce()) -> Result<(), C14nError> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            emit();
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    fn object<S: Sink>(
        &mut self,
        depth: usize,
        at_path: At,
        sink: &mut S,
    ) -> Result<(), C14nError> {
        if depth > MAX_DEPTH {
            return Err(C14nError::at(ErrorCode::DepthExceeded, self.pos));
        }
        self.pos += 1;
        sink.begin_object();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            sink.end_object(FrameKeys {
                input: &[],
                buf: &[],
                spans: &[],
            });
            return Ok(());
        }
        self.keys.push_frame();
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.syntax());
            }
            let key_offset = self.pos;
            let bytes = self.bytes;
            let (k, token, at) = match self.string_token()? {
                Decoded::Input(a, b) => (&bytes[a..b], Some(&bytes[a - 1..b + 1]), Some(a)),
                Decoded::Scratch => (self.scratch.as_slice(), None, None),
            };
            if !self.keys.insert(k, bytes, at) {
                return Err(C14nError::at(ErrorCode::DuplicateKey, key_offset));
            }
            let child = if at_path == At::Off {
                At::Off
            } else {
                self.roots.member_at(at_path, k)
            };
            sink.key(k, token);
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.syntax());
            }
            self.pos += 1;
            self.skip_ws();
            self.value(depth, child, sink)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.syntax()),
            }
        }
        sink.end_object(self.keys.current(self.bytes));
        self.keys.pop_frame();
        Ok(())
    }

    fn array<S: Sink>(&mut self, depth: usize, at: At, sink: &mut S) -> Result<(), C14nError> {
        if depth > MAX_DEPTH {
            return Err(C14nError::at(ErrorCode::DepthExceeded, self.pos));
        }
        self.pos += 1;
        sink.begin_array();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            sink.end_array();
            return Ok(());
        }
        // The elements of a records array count their nesting from themselves.
        let element_depth = if self.roots.elements_are_records(at) {
            0
        } else {
            depth
        };
        loop {
            self.value(element_depth, At::Off, sink)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.syntax()),
            }
        }
        sink.end_array();
        Ok(())
    }

    fn number<S: Sink>(&mut self, sink: &mut S) -> Result<(), C14nError> {
        let bytes = self.bytes;
        let start = self.pos;
        let mut i = start;
        let negative = bytes[i] == b'-';
        if negative {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => {
                i += 1;
                if matches!(bytes.get(i), Some(b'0'..=b'9')) {
                    return Err(C14nError::at(ErrorCode::Syntax, i));
                }
            }
            Some(b'1'..=b'9') => {
                i += 1;
                while matches!(bytes.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return Err(C14nError::at(ErrorCode::Syntax, i)),
        }
        let int_end = i;
        let mut integer = true;
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            if !matches!(bytes.get(i), Some(b'0'..=b'9')) {
                return Err(C14nError::at(ErrorCode::Syntax, i));
            }
            while matches!(bytes.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            integer = false;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(bytes.get(i), Some(b'0'..=b'9')) {
                return Err(C14nError::at(ErrorCode::Syntax, i));
            }
            while matches!(bytes.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            integer = false;
        }
        if !integer {
            return Err(C14nError::at(ErrorCode::NonIntegerNumber, start));
        }
        let digits = &bytes[start + usize::from(negative)..int_end];
        if negative && digits == b"0" {
            return Err(C14nError::at(ErrorCode::NegativeZero, start));
        }
        // 2^53 - 1 has 16 digits; anything longer is unsafe without overflow risk.
        if digits.len() > 16 {
            return Err(C14nError::at(ErrorCode::UnsafeInteger, start));
        }
        let magnitude = digits
            .iter()
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
        if magnitude > MAX_SAFE_INTEGER {
            return Err(C14nError::at(ErrorCode::UnsafeInteger, start));
        }
        self.pos = int_end;
        let n = if negative { -magnitude } else { magnitude };
        sink.int(n, &bytes[start..int_end]);
        Ok(())
    }

    /// Reads the string token at `self.pos` (which is `"`), decoding escapes
    /// into the scratch buffer when there are any. Checks control characters,
    /// escapes, surrogate pairs, UTF-8 and NFC.
    fn string_token(&mut self) -> Result<Decoded, C14nError> {
        let bytes = self.bytes;
        let start = self.pos;
        // Fast path: no escape.
        let (mut i, high) = scan_plain(bytes, start + 1);
        match bytes.get(i) {
            None => return Err(C14nError::at(ErrorCode::Syntax, bytes.len())),
            Some(b'"') => {
                self.pos = i + 1;
                if high >= 0x80 {
                    check_text(&bytes[start + 1..i]).map_err(|e| text_error(e, start))?;
                }
                return Ok(Decoded::Input(start + 1, i));
            }
            Some(b'\\') => {}
            Some(_) => return Err(C14nError::at(ErrorCode::ControlCharacter, i)),
        }
        // Slow path: decode into scratch.
        let scratch = &mut self.scratch;
        scratch.clear();
        scratch.extend_from_slice(&bytes[start + 1..i]);
        let mut high = high;
        loop {
            match bytes.get(i) {
                None => return Err(C14nError::at(ErrorCode::Syntax, bytes.len())),
                Some(b'"') => break,
                Some(b'\\') => i = decode_escape(bytes, i, scratch)?,
                Some(0x00..=0x1F) => return Err(C14nError::at(ErrorCode::ControlCharacter, i)),
                Some(_) => {
                    let (end, h) = scan_plain(bytes, i);
                    high |= h;
                    scratch.extend_from_slice(&bytes[i..end]);
                    i = end;
                }
            }
        }
        self.pos = i + 1;
        // Escapes can produce non-ASCII too: check the decoded bytes unless
        // they are all ASCII. (Raw runs are validated as part of the decoded
        // bytes: escapes never emit continuation bytes, so a broken raw
        // sequence cannot be completed by one.)
        if (high >= 0x80 || !scratch.is_ascii())
            && let Err(e) = check_text(scratch)
        {
            return Err(text_error(e, start));
        }
        Ok(Decoded::Scratch)
    }
}

/// Maps a text error of the string starting at `start`. An invalid UTF-8
/// error is refined to its exact offset by [`run`], which re-checks the whole
/// input on any failure.
fn text_error(e: TextError, start: usize) -> C14nError {
    match e {
        TextError::Utf8 => C14nError::at(ErrorCode::InvalidUtf8, start),
        TextError::NotNfc => C14nError::at(ErrorCode::NotNfc, start),
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let h = bytes.get(at..at + 4)?;
    let mut n = 0u32;
    for &c in h {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        n = n * 16 + u32::from(d);
    }
    Some(n)
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// Decodes the escape starting at `bytes[i] == '\\'` into `out`; returns the
/// index after it.
fn decode_escape(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> Result<usize, C14nError> {
    let invalid = C14nError::at(ErrorCode::InvalidEscape, i);
    let c = match bytes.get(i + 1) {
        Some(b'"') => b'"',
        Some(b'\\') => b'\\',
        Some(b'/') => b'/',
        Some(b'b') => 0x08,
        Some(b'f') => 0x0C,
        Some(b'n') => b'\n',
        Some(b'r') => b'\r',
        Some(b't') => b'\t',
        Some(b'u') => {
            let unit = hex4(bytes, i + 2).ok_or(invalid)?;
            return match unit {
                0xD800..=0xDBFF => {
                    let lone = C14nError::at(ErrorCode::LoneSurrogate, i);
                    if bytes.get(i + 6..i + 8) != Some(b"\\u") {
                        return Err(lone);
                    }
                    let low =
                        hex4(bytes, i + 8).ok_or(C14nError::at(ErrorCode::InvalidEscape, i + 6))?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return Err(lone);
                    }
                    let cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    push_char(out, char::from_u32(cp).ok_or(lone)?);
                    Ok(i + 12)
                }
                0xDC00..=0xDFFF => Err(C14nError::at(ErrorCode::LoneSurrogate, i)),
                _ => {
                    push_char(out, char::from_u32(unit).ok_or(invalid)?);
                    Ok(i + 6)
                }
            };
        }
        _ => return Err(invalid),
    };
    out.push(c);
    Ok(i + 2)
}

/// A member name's place in the key buffer plus its sort prefix.
#[derive(Clone, Copy)]
pub(crate) struct KeySpan {
    start: usize,
    end: usize,
    /// The name is `input[start..end]` (an unescaped token) rather than in the
    /// key buffer.
    in_input: bool,
    /// First 8 bytes, big-endian, with lead bytes `F0..F4` moved below `EE..EF`
    /// so that comparing prefixes agrees with UTF-16 code-unit order; ties are
    /// broken by a full comparison of the names.
    prefix: u64,
}

/// The sort prefix of a name (see [`KeySpan::prefix`]).
#[inline]
fn sort_prefix(k: &[u8]) -> u64 {
    let w = match k.get(..8) {
        Some(head) => head.iter().fold(0u64, |p, &b| (p << 8) | u64::from(b)),
        None => {
            // Shorter than 8 bytes: left-align, padding with zero bytes (an
            // empty name is all padding).
            let short = k.iter().fold(0u64, |p, &b| (p << 8) | u64::from(b));
            short.checked_shl(8 * (8 - k.len() as u32)).unwrap_or(0)
        }
    };
    if w & HI == 0 {
        return w;
    }
    let word = w.to_be_bytes();
    let mut p = 0u64;
    for b in word {
        let t = match b {
            0xF0..=0xF4 => b - 2,
            0xEE..=0xEF => b + 5,
            _ => b,
        };
        p = (p << 8) | u64::from(t);
    }
    p
}

/// Decoded member names of the innermost open object, in document order.
pub(crate) struct FrameKeys<'k> {
    input: &'k [u8],
    buf: &'k [u8],
    spans: &'k [KeySpan],
}

impl<'k> FrameKeys<'k> {
    /// Name of the `i`-th member.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> &'k [u8] {
        self.name(self.spans[i])
    }

    #[inline]
    fn name(&self, s: KeySpan) -> &'k [u8] {
        if s.in_input {
            &self.input[s.start..s.end]
        } else {
            &self.buf[s.start..s.end]
        }
    }

    /// Number of members.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Compares names `a` and `b` in UTF-16 code-unit order.
    #[inline]
    pub(crate) fn cmp(&self, a: usize, b: usize) -> std::cmp::Ordering {
        let (x, y) = (self.spans[a], self.spans[b]);
        x.prefix
            .cmp(&y.prefix)
            .then_with(|| cmp_utf16_bytes(self.name(x), self.name(y)))
    }
}

/// Member names of all open objects; detects duplicates object by object.
#[derive(Default)]
struct KeyTracker {
    buf: Vec<u8>,
    spans: Vec<KeySpan>,
    frames: Vec<KeyFrame>,
    hasher: Option<std::collections::hash_map::RandomState>,
}

struct KeyFrame {
    span_base: usize,
    buf_base: usize,
    /// One bit per name, indexed by a hash of its sort prefix: a clear bit
    /// proves a name is new without scanning the others.
    seen: [u64; 4],
    /// Randomly keyed hashes of the names, built once an object has more than
    /// `LINEAR_LIMIT` members (so wide objects stay linear, even adversarial ones).
    hashes: Option<HashSet<u64>>,
}

const LINEAR_LIMIT: usize = 32;

impl KeyTracker {
    fn push_frame(&mut self) {
        self.frames.push(KeyFrame {
            span_base: self.spans.len(),
            buf_base: self.buf.len(),
            seen: [0; 4],
            hashes: None,
        });
    }

    fn pop_frame(&mut self) {
        if let Some(f) = self.frames.pop() {
            self.spans.truncate(f.span_base);
            self.buf.truncate(f.buf_base);
        }
    }

    /// Names of the innermost open object.
    fn current<'k>(&'k self, input: &'k [u8]) -> FrameKeys<'k> {
        let base = self.frames.last().map_or(0, |f| f.span_base);
        FrameKeys {
            input,
            buf: &self.buf,
            spans: &self.spans[base..],
        }
    }

    /// Records name `k` in the innermost object; false when it was already
    /// there. `at` is where `k` lies in `input` when it was not unescaped.
    fn insert(&mut self, k: &[u8], input: &[u8], at: Option<usize>) -> bool {
        let Some(frame) = self.frames.last_mut() else {
            return true;
        };
        let prefix = sort_prefix(k);
        let existing = &self.spans[frame.span_base..];
        let linear_dup = |buf: &[u8]| {
            let names = FrameKeys {
                input,
                buf,
                spans: existing,
            };
            existing
                .iter()
                .any(|&s| s.prefix == prefix && s.end - s.start == k.len() && names.name(s) == k)
        };
        if let Some(hashes) = frame.hashes.as_mut() {
            let state = self.hasher.get_or_insert_with(Default::default);
            // A repeated hash is a duplicate unless it is a 64-bit collision.
            if !hashes.insert(state.hash_one(k)) && linear_dup(&self.buf) {
                return false;
            }
        } else {
            let bit = (prefix ^ (k.len() as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
            let (word, mask) = ((bit >> 6) as usize, 1u64 << (bit & 63));
            if frame.seen[word] & mask != 0 && linear_dup(&self.buf) {
                return false;
            }
            frame.seen[word] |= mask;
            if existing.len() >= LINEAR_LIMIT {
                let state = self.hasher.get_or_insert_with(Default::default);
                let names = FrameKeys {
                    input,
                    buf: &self.buf,
                    spans: existing,
                };
                let mut hashes: HashSet<u64> = existing
                    .iter()
                    .map(|&s| state.hash_one(names.name(s)))
                    .collect();
                hashes.insert(state.hash_one(k));
                frame.hashes = Some(hashes);
            }
        }
        let span = match at {
            Some(start) => KeySpan {
                start,
                end: start + k.len(),
                in_input: true,
                prefix,
            },
            None => {
                let start = self.buf.len();
                self.buf.extend_from_slice(k);
                KeySpan {
                    start,
                    end: self.buf.len(),
                    in_input: false,
                    prefix,
                }
            }
        };
        self.spans.push(span);
        true
    }
}

/// Builds a [`Value`] tree.
#[derive(Default)]
struct TreeSink {
    stack: Vec<Partial>,
    root: Option<Value>,
}

enum Partial {
    Array(Vec<Value>),
    Object(Vec<(String, Value)>, Option<String>),
}

/// Text the parser has validated as UTF-8 (the lossy path never replaces).
fn owned(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

impl TreeSink {
    fn push(&mut self, v: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(v),
            Some(Partial::Array(items)) => items.push(v),
            Some(Partial::Object(members, key)) => {
                if let Some(k) = key.take() {
                    members.push((k, v));
                }
            }
        }
    }
}

impl Sink for TreeSink {
    fn null(&mut self) {
        self.push(Value::Null);
    }
    fn boolean(&mut self, b: bool) {
        self.push(Value::Bool(b));
    }
    fn int(&mut self, n: i64, _raw: &[u8]) {
        self.push(Value::Int(n));
    }
    fn string(&mut self, s: &[u8], _token: Option<&[u8]>) {
        self.push(Value::String(owned(s)));
    }
    fn begin_array(&mut self) {
        self.stack.push(Partial::Array(Vec::new()));
    }
    fn end_array(&mut self) {
        if let Some(Partial::Array(items)) = self.stack.pop() {
            self.push(Value::Array(items));
        }
    }
    fn begin_object(&mut self) {
        self.stack.push(Partial::Object(Vec::new(), None));
    }
    fn key(&mut self, k: &[u8], _token: Option<&[u8]>) {
        if let Some(Partial::Object(_, key)) = self.stack.last_mut() {
            *key = Some(owned(k));
        }
    }
    fn end_object(&mut self, _keys: FrameKeys<'_>) {
        if let Some(Partial::Object(members, _)) = self.stack.pop() {
            // The parser has rejected duplicate names already.
            self.push(Value::Object(Map::from_unique(members)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::Omit;
    use crate::canon::canonicalize_with;

    /// Parses with both sinks and asserts they fail identically; returns the error.
    fn err(input: &[u8], max_bytes: usize) -> C14nError {
        let opts = ParseOptions { max_bytes };
        let tree = parse_with(input, opts).expect_err("input must be refused");
        let stream = canonicalize_with(input, opts, Omit::Nothing).expect_err("refused too");
        assert_eq!(tree, stream, "tree and streaming parsers disagree");
        tree
    }

    fn assert_code(input: &[u8], code: ErrorCode, offset: usize) {
        let e = err(input, DEFAULT_MAX_BYTES);
        assert_eq!((e.code(), e.offset()), (code, Some(offset)));
        assert!(e.to_string().starts_with(code.as_str()));
    }

    #[test]
    fn invalid_utf8() {
        assert_code(b"[\"ok\", \"\xC3\x28\"]", ErrorCode::InvalidUtf8, 8);
    }

    #[test]
    fn bom() {
        assert_code(b"\xEF\xBB\xBF[]", ErrorCode::Bom, 0);
        assert_code(b"\xFF\xFE[\x00]\x00", ErrorCode::Bom, 0);
    }

    #[test]
    fn syntax() {
        assert_code(b"[1,,2]", ErrorCode::Syntax, 3);
        assert_code(b"NaN", ErrorCode::Syntax, 0);
        assert_code(b"", ErrorCode::Syntax, 0);
    }

    #[test]
    fn trailing_input() {
        assert_code(b"{} []", ErrorCode::TrailingInput, 3);
    }

    #[test]
    fn invalid_escape() {
        assert_code(br#"{"k":"a\qb"}"#, ErrorCode::InvalidEscape, 7);
        assert_code(br#""\u00""#, ErrorCode::InvalidEscape, 1);
    }

    #[test]
    fn control_character() {
        assert_code(b"[\"a\x07\"]", ErrorCode::ControlCharacter, 3);
    }

    #[test]
    fn lone_surrogate() {
        assert_code(br#"["\uDBFF"]"#, ErrorCode::LoneSurrogate, 2);
        assert_code(br#""\uDC00\uD800""#, ErrorCode::LoneSurrogate, 1);
    }

    #[test]
    fn not_nfc() {
        assert_code(br#"{"a":"o\u0308"}"#, ErrorCode::NotNfc, 5);
        assert_code("{\"o\u{308}\":1}".as_bytes(), ErrorCode::NotNfc, 1);
    }

    #[test]
    fn duplicate_key() {
        assert_code(br#"{"a":1,"b":2,"a":3}"#, ErrorCode::DuplicateKey, 13);
        // Past the linear-scan limit the hash set path must agree.
        let mut wide = String::from("{");
        for i in 0..40 {
            wide.push_str(&format!("\"k{i}\":{i},"));
        }
        let at = wide.len();
        wide.push_str("\"k3\":0}");
        assert_code(wide.as_bytes(), ErrorCode::DuplicateKey, at);
    }

    #[test]
    fn non_integer_number() {
        assert_code(b"[0, 2.0]", ErrorCode::NonIntegerNumber, 4);
        assert_code(b"5e0", ErrorCode::NonIntegerNumber, 0);
    }

    #[test]
    fn negative_zero() {
        assert_code(b"[0,-0]", ErrorCode::NegativeZero, 3);
    }

    #[test]
    fn unsafe_integer() {
        assert_code(b"[9007199254740992]", ErrorCode::UnsafeInteger, 1);
        assert_code(b"-99999999999999999999", ErrorCode::UnsafeInteger, 0);
        assert_eq!(
            parse(b"[9007199254740991,-9007199254740991]").unwrap(),
            Value::Array(vec![
                Value::Int(MAX_SAFE_INTEGER),
                Value::Int(-MAX_SAFE_INTEGER)
            ])
        );
    }

    #[test]
    fn depth_exceeded() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(ok.as_bytes()).is_ok());
        let deep = "[".repeat(100_000);
        assert_code(deep.as_bytes(), ErrorCode::DepthExceeded, MAX_DEPTH);
    }

    /// Resolutions §H.8: the nesting limit is counted inside each record.
    #[test]
    fn record_roots_count_depth_inside_each_record() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let opts = ParseOptions::default();
        // A record (object) with 127 more containers inside: 128 deep.
        let record = format!(r#"{{"p":{}}}"#, deep(MAX_DEPTH - 1));
        assert!(parse(record.as_bytes()).is_ok());
        let input = format!(r#"{{"context":{{}},"records":[{{"a":1}},{record}]}}"#);
        assert_eq!(
            parse(input.as_bytes()).unwrap_err().code(),
            ErrorCode::DepthExceeded
        );
        let v = parse_records(input.as_bytes(), opts, RecordRoots::InputRecords).unwrap();
        assert_eq!(
            crate::canon::to_canonical_vec_records(&v, RecordRoots::InputRecords).unwrap(),
            input.as_bytes()
        );
        assert!(crate::to_canonical_vec(&v).is_err());
        // The same record inside a conformance case and (validate) a bundle.
        let case = format!(r#"{{"input":{input}}}"#);
        assert!(parse_records(case.as_bytes(), opts, RecordRoots::CaseRecords).is_ok());
        assert!(parse_records(case.as_bytes(), opts, RecordRoots::InputRecords).is_err());
        let bundle = format!("[{record}]");
        assert!(parse_records(bundle.as_bytes(), opts, RecordRoots::Document).is_ok());
        assert!(parse(bundle.as_bytes()).is_err());
        // One container more inside the record is refused, at that bracket.
        let too_deep = format!(r#"{{"records":[{{"p":{}}}]}}"#, deep(MAX_DEPTH));
        let e = parse_records(too_deep.as_bytes(), opts, RecordRoots::InputRecords).unwrap_err();
        assert_eq!(e.code(), ErrorCode::DepthExceeded);
        assert_eq!(e.offset(), Some(17 + MAX_DEPTH - 1));
        // Outside the records the limit still counts from the root.
        let context = format!(r#"{{"context":{},"records":[]}}"#, deep(MAX_DEPTH));
        assert_eq!(
            parse_records(context.as_bytes(), opts, RecordRoots::InputRecords)
                .unwrap_err()
                .code(),
            ErrorCode::DepthExceeded
        );
        // Only the top-level `records` member holds records.
        let nested = format!(r#"{{"x":{{"records":[{record}]}}}}"#);
        assert!(parse_records(nested.as_bytes(), opts, RecordRoots::InputRecords).is_err());
    }

    #[test]
    fn too_large() {
        let e = err(b"[1,2,3]", 6);
        assert_eq!((e.code(), e.offset()), (ErrorCode::TooLarge, Some(6)));
        assert!(parse_with(b"[1,2,3]", ParseOptions { max_bytes: 7 }).is_ok());
    }

    #[test]
    fn every_code_has_a_distinct_name_and_round_trips() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for c in ErrorCode::ALL {
            assert!(c.as_str().starts_with("C14N_"));
            assert_eq!(ErrorCode::from_code(c.as_str()), Some(c));
        }
    }

    #[test]
    fn messages_never_echo_input() {
        let secret = "TOPSECRET";
        let inputs = [
            format!("{{\"{secret}\":1,\"{secret}\":2}}"),
            format!("[\"{secret}\\q\"]"),
            secret.to_string(),
            format!("[\"{secret}\"] {secret}"),
            format!("[\"{secret}e\u{301}\"]"),
        ];
        for input in inputs {
            let e = parse(input.as_bytes()).unwrap_err();
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains(secret), "message echoes input: {shown}");
        }
    }

    #[test]
    fn invalid_utf8_keeps_precedence_over_earlier_errors() {
        // A syntax error comes first in document order, but invalid UTF-8
        // anywhere wins, at its exact offset.
        assert_code(b"[1,,\"ok\xFF\"]", ErrorCode::InvalidUtf8, 7);
        assert_code(b"{\"a\":1,\"a\":2} \xC0", ErrorCode::InvalidUtf8, 14);
        assert_code(
            b"[\"e\xCC\x81\", \"\xED\xA0\x80\"]",
            ErrorCode::InvalidUtf8,
            9,
        );
        assert_code(b"[\"\\n\xF0\x9F\x98\"]", ErrorCode::InvalidUtf8, 4);
    }

    #[test]
    fn sort_prefix_agrees_with_utf16_order() {
        let names = [
            "",
            "\0",
            "a",
            "a\0",
            "ab",
            "abcdefgh",
            "abcdefghi",
            "abcdefgh\u{e000}",
            "abcdefgh\u{1f600}",
            "\u{e000}",
            "\u{ffff}",
            "\u{1f600}",
            "\u{10000}",
            "\u{d7ff}",
            "\u{7f}",
            "\u{80}",
            "\u{e9}",
            "10",
            "9",
            "1",
            "\u{e000}a",
            "\u{1f600}a",
        ];
        let mut buf = String::new();
        let mut spans = Vec::new();
        for n in names {
            let start = buf.len();
            buf.push_str(n);
            spans.push(KeySpan {
                start,
                end: buf.len(),
                in_input: false,
                prefix: sort_prefix(n.as_bytes()),
            });
        }
        let keys = FrameKeys {
            input: &[],
            buf: buf.as_bytes(),
            spans: &spans,
        };
        for a in 0..names.len() {
            for b in 0..names.len() {
                let want = names[a].encode_utf16().cmp(names[b].encode_utf16());
                assert_eq!(keys.cmp(a, b), want, "{:?} vs {:?}", names[a], names[b]);
                if want.is_ne() && keys.spans[a].prefix != keys.spans[b].prefix {
                    assert_eq!(keys.spans[a].prefix.cmp(&keys.spans[b].prefix), want);
                }
            }
        }
    }

    #[test]
    fn swar_scan_finds_the_first_stop_byte() {
        for len in 0..40 {
            for stop in [b'"', b'\\', 0x00, 0x1F, 0x0A] {
                for at in 0..=len {
                    let mut v = vec![b'a'; len];
                    v.extend_from_slice("\u{e9}".as_bytes());
                    if at < len {
                        v[at] = stop;
                    }
                    let (i, high) = scan_plain(&v, 0);
                    let want = if at < len { at } else { v.len() };
                    assert_eq!(i, want, "len {len} stop {stop} at {at}");
                    assert_eq!(
                        high >= 0x80,
                        at >= len,
                        "non-ascii seen only when scanned past"
                    );
                }
            }
        }
    }

    #[test]
    fn tree_members_are_sorted_and_values_decoded() {
        let v = parse(br#"{"b":"\u00e9\n","a":[1,{"d":null,"c":true}]}"#).unwrap();
        let m = v.as_object().unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(m.get("b").and_then(Value::as_str), Some("\u{e9}\n"));
    }
}
