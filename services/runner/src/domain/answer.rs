//! A model answer read from the runtime's HTTP body (pure): the OpenAI-style chat completion's
//! `choices[0].message.content` (digested, never kept as text) and `usage.total_tokens`. The
//! step loop reads a live answer with it and a replay reads the recorded body with it, so both
//! decide from the same reading.

use super::run::sha256;

/// What a model answer says: its content's digest, the tokens it used, and whether its content
/// is empty (whitespace only): an empty answer is no `model_answer` evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub digest: String,
    pub tokens: u64,
    pub empty: bool,
}

/// The answer `body` holds, if it is a chat completion with content and token usage.
pub fn read(body: &[u8]) -> Option<Read> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let content = v.pointer("/choices/0/message/content")?.as_str()?;
    let tokens = v.pointer("/usage/total_tokens")?.as_u64()?;
    Some(Read {
        digest: sha256(content.as_bytes()),
        tokens,
        empty: content.trim().is_empty(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_completion_reads_as_its_digest_tokens_and_emptiness() {
        let body = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"total_tokens":7}}"#;
        let r = read(body).expect("a chat completion");
        assert_eq!(r.digest, sha256(b"hi"));
        assert_eq!(r.tokens, 7);
        assert!(!r.empty);
        let blank = br#"{"choices":[{"message":{"content":"  "}}],"usage":{"total_tokens":1}}"#;
        assert!(read(blank).expect("blank").empty);
        assert_eq!(read(br#"{"choices":[]}"#), None);
        assert_eq!(read(b"not json"), None);
    }
}
