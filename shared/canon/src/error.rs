//! Error codes of the strict HL-C14N-1 parser and serializer (resolutions §A).
//!
//! Every rule of the profile has its own stable code. Errors carry a byte offset
//! into the input (when they come from parsing) and never any input content:
//! HelmLoop payloads may be confidential, so messages are codes and offsets only.

use std::fmt;

/// One rule of the HL-C14N-1 profile that an input broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// The input is not valid UTF-8.
    InvalidUtf8,
    /// The input starts with a byte-order mark.
    Bom,
    /// The input is not JSON (grammar error, `NaN`, `Infinity`, empty input...).
    Syntax,
    /// Something other than whitespace follows the top-level value.
    TrailingInput,
    /// A backslash escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`.
    InvalidEscape,
    /// A raw U+0000..U+001F inside a string.
    ControlCharacter,
    /// A `\uD800..\uDFFF` escape that is not part of a high+low pair.
    LoneSurrogate,
    /// A decoded string (member names included) that is not in NFC.
    NotNfc,
    /// Two members of one object with the same decoded name.
    DuplicateKey,
    /// A number with a fraction or an exponent.
    NonIntegerNumber,
    /// The number `-0`.
    NegativeZero,
    /// An integer whose magnitude exceeds 2^53 - 1.
    UnsafeInteger,
    /// More than [`crate::MAX_DEPTH`] nested arrays/objects.
    DepthExceeded,
    /// The input is larger than the configured size cap.
    TooLarge,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::InvalidUtf8,
        ErrorCode::Bom,
        ErrorCode::Syntax,
        ErrorCode::TrailingInput,
        ErrorCode::InvalidEscape,
        ErrorCode::ControlCharacter,
        ErrorCode::LoneSurrogate,
        ErrorCode::NotNfc,
        ErrorCode::DuplicateKey,
        ErrorCode::NonIntegerNumber,
        ErrorCode::NegativeZero,
        ErrorCode::UnsafeInteger,
        ErrorCode::DepthExceeded,
        ErrorCode::TooLarge,
    ];

    /// The stable machine-readable code, e.g. `C14N_DUPLICATE_KEY`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidUtf8 => "C14N_INVALID_UTF8",
            ErrorCode::Bom => "C14N_BOM",
            ErrorCode::Syntax => "C14N_SYNTAX",
            ErrorCode::TrailingInput => "C14N_TRAILING_INPUT",
            ErrorCode::InvalidEscape => "C14N_INVALID_ESCAPE",
            ErrorCode::ControlCharacter => "C14N_CONTROL_CHARACTER",
            ErrorCode::LoneSurrogate => "C14N_LONE_SURROGATE",
            ErrorCode::NotNfc => "C14N_NOT_NFC",
            ErrorCode::DuplicateKey => "C14N_DUPLICATE_KEY",
            ErrorCode::NonIntegerNumber => "C14N_NON_INTEGER_NUMBER",
            ErrorCode::NegativeZero => "C14N_NEGATIVE_ZERO",
            ErrorCode::UnsafeInteger => "C14N_UNSAFE_INTEGER",
            ErrorCode::DepthExceeded => "C14N_DEPTH_EXCEEDED",
            ErrorCode::TooLarge => "C14N_TOO_LARGE",
        }
    }

    /// The code named by `s`, if any.
    pub fn from_code(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// A short fixed description of the rule (never input content).
    pub const fn rule(self) -> &'static str {
        match self {
            ErrorCode::InvalidUtf8 => "input is not valid utf-8",
            ErrorCode::Bom => "input starts with a byte-order mark",
            ErrorCode::Syntax => "input is not json",
            ErrorCode::TrailingInput => "input continues after the top-level value",
            ErrorCode::InvalidEscape => "invalid escape sequence",
            ErrorCode::ControlCharacter => "raw control character in string",
            ErrorCode::LoneSurrogate => "lone utf-16 surrogate escape",
            ErrorCode::NotNfc => "string is not in unicode normalization form c",
            ErrorCode::DuplicateKey => "duplicate member name",
            ErrorCode::NonIntegerNumber => "number is not an integer",
            ErrorCode::NegativeZero => "negative zero",
            ErrorCode::UnsafeInteger => "integer outside +/-9007199254740991",
            ErrorCode::DepthExceeded => "nesting deeper than 128",
            ErrorCode::TooLarge => "input larger than the size cap",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A violation of the HL-C14N-1 profile.
///
/// `offset` is the byte offset in the parsed input where the offending token
/// starts; it is `None` when the error comes from serializing an in-memory
/// [`crate::Value`]. `Display` starts with the code and never echoes input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct C14nError {
    code: ErrorCode,
    offset: Option<usize>,
}

impl C14nError {
    pub(crate) const fn at(code: ErrorCode, offset: usize) -> Self {
        C14nError {
            code,
            offset: Some(offset),
        }
    }

    pub(crate) const fn in_value(code: ErrorCode) -> Self {
        C14nError { code, offset: None }
    }

    /// The rule that was broken.
    pub const fn code(&self) -> ErrorCode {
        self.code
    }

    /// Byte offset of the offending token in the input, when parsing.
    pub const fn offset(&self) -> Option<usize> {
        self.offset
    }
}

impl fmt::Display for C14nError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(off) => write!(f, "{} at byte {}: {}", self.code, off, self.code.rule()),
            None => write!(f, "{} in value: {}", self.code, self.code.rule()),
        }
    }
}

impl std::error::Error for C14nError {}
