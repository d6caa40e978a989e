//! Censoring: the kept copy of a proposal's arguments, with every secret-like value (by its
//! member's name or by its own shape) replaced.
//!
//! Invariant: pure; censoring never changes what is digested (the digests are of the
//! uncensored arguments).

use lychd_helmloop::{Map, Value};

/// What replaces a secret-like argument's value in the kept copy.
pub const CENSORED: &str = "[censored]";

/// The words that mark a member name as holding a secret, in normalized spelling (see
/// [`normalize_name`]): a member whose normalized name CONTAINS one of them is censored.
pub const SECRET_NAME_MARKS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "signingkey",
    "credential",
    "authorization",
    "cookie",
    "session",
    "bearer",
    "jwt",
];

/// Normalized names that are censored only as the WHOLE name (as parts of longer names they
/// are ordinary words: `author`, `pinned`).
pub const SECRET_NAMES: &[&str] = &["auth", "pwd", "pin", "otp", "key"];

/// A member name in the spelling [`SECRET_NAME_MARKS`] is written in: lowercase, every
/// character that is not a letter or a digit (spaces, `-`, `_`, `.`, `:`, `/`…) dropped, so
/// `"API Key"`, `"api-key"`, `"X-Api-Key"`, `"apiKey"` and `"api.key"` all contain `apikey`.
/// A prefix such as `x-` needs no rule of its own: the marks match anywhere in the name.
pub fn normalize_name(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a member name looks like it holds a secret (after [`normalize_name`]).
pub fn is_secret_like(name: &str) -> bool {
    let n = normalize_name(name);
    SECRET_NAME_MARKS.iter().any(|m| n.contains(m))
        || SECRET_NAMES.contains(&n.as_str())
        || n.strip_prefix('x')
            .is_some_and(|rest| SECRET_NAMES.contains(&rest))
}

/// Whether a string VALUE is shaped like a known secret, whatever member holds it: Ward's own
/// credentials and session tokens (`lwc_`, `lws_`), an HTTP `Bearer`/`Basic` authorization
/// value, a PEM private key block, a JSON Web Token, a URL with a password, and well-known
/// provider key shapes (`AKIA…`/`ASIA…` AWS access keys, `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/
/// `github_pat_` GitHub tokens, `xox?-` Slack tokens, `sk-`/`sk_live_`/`rk_live_` API keys,
/// `AIza…` Google API keys). Matching is by shape only, so it also censors look-alikes (fail
/// closed).
pub fn is_secret_value(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    // Ward's own secrets (`lwc_`/`lws_` and hex), anywhere in the text.
    for prefix in [
        crate::domain::secret::CREDENTIAL_PREFIX,
        crate::domain::secret::SESSION_PREFIX,
    ] {
        if lower.match_indices(prefix).any(|(i, _)| {
            lower[i + prefix.len()..]
                .bytes()
                .take_while(u8::is_ascii_hexdigit)
                .count()
                >= 16
        }) {
            return true;
        }
    }
    // Authorization header values: `Bearer x` anywhere; `Basic`/`Token` then one long word.
    if lower.contains("bearer ") {
        return true;
    }
    let mut words = lower.split_whitespace();
    if let (Some("basic" | "token"), Some(credential), None) =
        (words.next(), words.next(), words.next())
        && credential.len() >= 8
    {
        return true;
    }
    // PEM private keys (RSA, EC, OPENSSH, ENCRYPTED, PGP…).
    if lower.contains("-----begin") && lower.contains("private key") {
        return true;
    }
    // A URL carrying a password: scheme://user:password@host.
    if let Some(i) = value.find("://") {
        let authority = value[i + 3..]
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo.contains(':')
        {
            return true;
        }
    }
    value
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '=' | '&'))
        .any(is_token_shaped)
}

/// One whitespace-free word shaped like a provider's key or a JSON Web Token.
fn is_token_shaped(word: &str) -> bool {
    let tail_len = |prefix: &str| {
        word.strip_prefix(prefix).map_or(0, |rest| {
            rest.bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
                .count()
        })
    };
    let upper_alnum = |prefix: &str, n: usize| {
        word.strip_prefix(prefix).is_some_and(|rest| {
            rest.len() >= n
                && rest
                    .bytes()
                    .take(n)
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        })
    };
    if upper_alnum("AKIA", 16) || upper_alnum("ASIA", 16) {
        return true;
    }
    if ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"]
        .iter()
        .any(|p| tail_len(p) >= 20)
    {
        return true;
    }
    if ["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"]
        .iter()
        .any(|p| tail_len(p) >= 10)
    {
        return true;
    }
    if ["sk-", "sk_live_", "sk_test_", "rk_live_", "rk_test_"]
        .iter()
        .any(|p| tail_len(p) >= 16)
    {
        return true;
    }
    if tail_len("AIza") >= 30 {
        return true;
    }
    // A JSON Web Token: three base64url parts, the first a JSON object (`eyJ`).
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts[1].len() >= 8
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// `value` with every member under a secret-like name, and every string shaped like a secret
/// (as a value or as a member name, anywhere), replaced by [`CENSORED`], at any depth. A member
/// whose NAME is secret-shaped is renamed `[censored]`, `[censored 2]`… (names stay distinct).
pub fn censor(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut out = Map::new();
            let mut renamed = 0usize;
            for (k, v) in m.iter() {
                let kept = if is_secret_like(k) {
                    Value::String(CENSORED.to_owned())
                } else {
                    censor(v)
                };
                let name = if is_secret_value(k) {
                    loop {
                        renamed += 1;
                        let candidate = if renamed == 1 {
                            CENSORED.to_owned()
                        } else {
                            format!("[censored {renamed}]")
                        };
                        if !m.contains_key(&candidate) && !out.contains_key(&candidate) {
                            break candidate;
                        }
                    }
                } else {
                    k.to_owned()
                };
                out.insert(name, kept);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(censor).collect()),
        Value::String(s) if is_secret_value(s) => Value::String(CENSORED.to_owned()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::proposal::parse_arguments;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn secret_like_values_are_censored_at_any_depth_and_nothing_else() {
        let args = parse_arguments(
            br#"{"path":"/tmp/a","auth":{"API_Key":"k","user":"u"},"list":[{"sessionId":"s"}],"Password":1,"conn":{"API Key":"k2","X-Private-Key":"k3","private-key":"k4","mode":"r"}}"#,
        )
        .expect("arguments");
        let censored = lychd_helmloop::to_canonical_string(&censor(&args)).expect("canonical");
        assert_eq!(
            censored,
            r#"{"Password":"[censored]","auth":"[censored]","conn":{"API Key":"[censored]","X-Private-Key":"[censored]","mode":"r","private-key":"[censored]"},"list":[{"sessionId":"[censored]"}],"path":"/tmp/a"}"#
        );
    }

    #[test]
    fn names_are_matched_after_normalizing_case_separators_and_prefixes() {
        for name in [
            "API Key",
            "api key",
            "private-key",
            "Private Key",
            "X-Private-Key",
            "x-api-key",
            "apiKey",
            "client.secret",
            "PASS_PHRASE",
            "Set-Cookie",
            "refresh_token",
            "Proxy-Authorization",
            "aws_access_key_id",
            "X-Auth",
            "pwd",
        ] {
            assert!(is_secret_like(name), "{name}");
        }
        for name in [
            "path",
            "author",
            "mode",
            "keyboard_layout",
            "pinned",
            "monkey",
        ] {
            assert!(!is_secret_like(name), "{name}");
        }
    }

    #[test]
    fn values_shaped_like_secrets_are_censored_under_any_name() {
        let token = format!("lws_{}", "ab".repeat(32));
        let credential = format!("lwc_{}", "0f".repeat(32));
        for value in [
            token.as_str(),
            &format!("prefix {credential} suffix"),
            "Bearer abc.def.ghi",
            "authorization: bearer xyz",
            "Basic dXNlcjpwYXNzd29yZA==",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "postgres://app:hunter2@db.internal:5432/x",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_0123456789abcdefghijABCDEFGHIJ",
            "xoxb-1234567890-abcdef",
            "sk-proj-0123456789abcdef0123",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ] {
            assert!(is_secret_value(value), "{value}");
        }
        for value in [
            "/srv/reports/q4.txt",
            "https://example.org/a?b=c",
            "a basic mode",
            "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "lws_short",
        ] {
            assert!(!is_secret_value(value), "{value}");
        }
        let args = parse_arguments(
            format!(r#"{{"note":"{token}","list":["ok","Bearer q"],"{credential}":1}}"#).as_bytes(),
        )
        .expect("arguments");
        let censored = lychd_helmloop::to_canonical_string(&censor(&args)).expect("canonical");
        assert_eq!(
            censored,
            r#"{"[censored]":1,"list":["ok","[censored]"],"note":"[censored]"}"#
        );
    }

    /// A secret-like name spelled with a random case per character, separators between its
    /// words and an optional prefix.
    fn spelling() -> impl Strategy<Value = String> {
        let words = prop::sample::select(vec![
            vec!["api", "key"],
            vec!["private", "key"],
            vec!["secret"],
            vec!["client", "secret"],
            vec!["password"],
            vec!["pass", "phrase"],
            vec!["access", "token"],
            vec!["token"],
            vec!["authorization"],
            vec!["cookie"],
            vec!["credential"],
            vec!["session", "id"],
            vec!["bearer"],
        ]);
        (
            words,
            prop::collection::vec(prop::sample::select(vec!["", " ", "-", "_", "."]), 3),
            prop::sample::select(vec!["", "x-", "X-", "x_", "X.", "my ", "Upstream-"]),
            prop::collection::vec(any::<bool>(), 32),
        )
            .prop_map(|(words, seps, prefix, upper)| {
                let mut name = prefix.to_owned();
                for (i, w) in words.iter().enumerate() {
                    if i > 0 {
                        name.push_str(seps[i % seps.len()]);
                    }
                    name.push_str(w);
                }
                name.chars()
                    .enumerate()
                    .map(|(i, c)| {
                        if upper[i % upper.len()] {
                            c.to_ascii_uppercase()
                        } else {
                            c
                        }
                    })
                    .collect()
            })
    }

    /// A string shaped like a known secret (kept under an innocent name).
    fn shaped() -> impl Strategy<Value = String> {
        (
            prop::sample::select(vec![
                "lws_",
                "lwc_",
                "Bearer ",
                "AKIA",
                "ghp_",
                "-----BEGIN EC PRIVATE KEY-----",
            ]),
            "[0-9a-f]{20}",
        )
            .prop_map(|(p, hex)| {
                if p == "AKIA" {
                    format!("{p}{}", hex.to_ascii_uppercase())
                } else {
                    format!("{p}{hex}{hex}")
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn no_secret_survives_censoring_whatever_its_spelling_and_depth(
            name in spelling(),
            marker in "[A-Za-z0-9]{12,24}",
            innocent in shaped(),
            depth in 0usize..5,
            in_array in any::<bool>(),
        ) {
            let secret = format!("S3cr3t-{marker}");
            let mut leaf = Map::new();
            leaf.insert(name.clone(), Value::String(secret.clone()));
            leaf.insert("harmless", Value::String(innocent.clone()));
            leaf.insert("path", Value::String("/srv/kept".into()));
            let mut v = Value::Object(leaf);
            for level in 0..depth {
                v = if in_array && level % 2 == 0 {
                    Value::Array(vec![Value::Int(1), v])
                } else {
                    let mut m = Map::new();
                    m.insert(format!("level{level}"), v);
                    Value::Object(m)
                };
            }
            let text = lychd_helmloop::to_canonical_string(&censor(&v)).expect("canonical");
            prop_assert!(!text.contains(&secret), "{name}: {text}");
            prop_assert!(!text.contains(&innocent), "{innocent}: {text}");
            prop_assert!(text.contains("/srv/kept"), "an ordinary value is kept: {text}");
        }
    }
}
