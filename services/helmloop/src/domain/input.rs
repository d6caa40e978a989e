//! The evaluation input of a stored reduction: the caller's context and every stored body bound
//! to its subject id and revision id, as the reducer's value and as the exact canonical bytes
//! that value serializes to.

use lychd_helmloop::{
    C14nError, EvaluationInput, Map, PROTOCOL_VERSION, ParseOptions, Value, parse_with,
    to_canonical_vec,
};

use super::record::is_identifier;

/// What selects the stored records of a context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub subject_id: String,
    pub revision_id: String,
}

/// The context's `subject.id` and `revision.id`, when both are identifiers.
pub fn binding(context: &Value) -> Option<Binding> {
    let id = |k: &str| {
        context
            .get(k)
            .and_then(|s| s.get("id"))
            .and_then(Value::as_str)
            .filter(|s| is_identifier(s))
            .map(str::to_owned)
    };
    Some(Binding {
        subject_id: id("subject")?,
        revision_id: id("revision")?,
    })
}

/// `{protocolVersion: "0.1", context, records}` from stored canonical bodies: the value to
/// reduce and its canonical bytes (members in UTF-16 order: `context`, `protocolVersion`,
/// `records`; the bodies are canonical already and are copied, not re-serialized).
pub fn assemble(
    context: Value,
    bodies: &[Vec<u8>],
) -> Result<(EvaluationInput, Vec<u8>), C14nError> {
    let context_bytes = to_canonical_vec(&context)?;
    let mut records = Vec::with_capacity(bodies.len());
    let total: usize = bodies.iter().map(|b| b.len() + 1).sum();
    let mut bytes = Vec::with_capacity(context_bytes.len() + total + 64);
    bytes.extend_from_slice(b"{\"context\":");
    bytes.extend_from_slice(&context_bytes);
    bytes.extend_from_slice(b",\"protocolVersion\":\"");
    bytes.extend_from_slice(PROTOCOL_VERSION.as_bytes());
    bytes.extend_from_slice(b"\",\"records\":[");
    for (i, body) in bodies.iter().enumerate() {
        records.push(parse_with(
            body,
            ParseOptions {
                max_bytes: body.len().max(1),
            },
        )?);
        if i > 0 {
            bytes.push(b',');
        }
        bytes.extend_from_slice(body);
    }
    bytes.extend_from_slice(b"]}");
    let mut m = Map::new();
    m.insert("protocolVersion", PROTOCOL_VERSION.into());
    m.insert("context", context);
    m.insert("records", Value::Array(records));
    Ok((EvaluationInput::from_value(Value::Object(m)), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assembled_bytes_are_the_canonical_form_of_the_assembled_value() {
        let context = lychd_helmloop::parse(
            br#"{"subject":{"id":"s-1","kind":"k","ownerId":"o"},"revision":{"id":"r-1","digest":"x"}}"#,
        )
        .expect("json");
        let bodies = vec![br#"{"a":1}"#.to_vec(), br#"{"b":[2,3]}"#.to_vec()];
        let (input, bytes) = assemble(context.clone(), &bodies).expect("assemble");
        assert_eq!(to_canonical_vec(input.value()).expect("c14n"), bytes);
        assert_eq!(
            binding(&context),
            Some(Binding {
                subject_id: "s-1".into(),
                revision_id: "r-1".into()
            })
        );
        let (_, empty) = assemble(context, &[]).expect("assemble");
        assert!(empty.ends_with(b"\"records\":[]}"));
    }

    #[test]
    fn a_context_without_identifiers_binds_nothing() {
        for text in [
            &br#"{}"#[..],
            br#"{"subject":{"id":"s"}}"#,
            br#"{"subject":{"id":"s"},"revision":{"id":" bad"}}"#,
            br#"[]"#,
        ] {
            let v = lychd_helmloop::parse(text).expect("json");
            assert_eq!(binding(&v), None);
        }
    }
}
