//! Ward's rules, pure: grammar, kinds, secrets, lifetimes, decisions and paging.
//!
//! Invariant: no sqlx, no tonic, no clock, no I/O (secret generation reads the operating
//! system's random source, nothing else). Everything here is unit-tested exhaustively.

pub mod decision;
pub mod grammar;
pub mod kinds;
pub mod lifetime;
pub mod paging;
pub mod secret;

/// One bad input: the field and what is wrong with it. The description is a fixed text so that
/// a refusal can never echo the value it refuses (which might be a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub description: &'static str,
}

impl Violation {
    pub fn new(field: impl Into<String>, description: &'static str) -> Self {
        Violation {
            field: field.into(),
            description,
        }
    }
}

/// Collects violations while a request is decoded, so every bad field is named at once.
#[derive(Debug, Default)]
pub struct Violations(Vec<Violation>);

impl Violations {
    pub fn new() -> Self {
        Violations(Vec::new())
    }

    /// Keep `result`'s value, or record its description against `field`.
    pub fn check<T>(&mut self, field: &str, result: Result<T, &'static str>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(description) => {
                self.0.push(Violation::new(field, description));
                None
            }
        }
    }

    pub fn push(&mut self, field: &str, description: &'static str) {
        self.0.push(Violation::new(field, description));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_vec(self) -> Vec<Violation> {
        self.0
    }
}
