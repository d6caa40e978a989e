//! What arrives on the wire (issue 22.5 and 22.6), against every office as a real process.
//!
//! - Undecodable bodies — invalid UTF-8 in a string field, a wrong wire type, a truncated
//!   message, random bytes, and broken gRPC framing — sent to every method of every office,
//!   enumerated from `lychd_proto::FILE_DESCRIPTOR_SET` (a new RPC is covered without editing
//!   this file), and to gRPC health's methods: a stranger is answered `UNAUTHENTICATED`, the
//!   operator (and anyone, on open health) `INVALID_ARGUMENT` `MESSAGE_UNDECODABLE` with a
//!   message naming no field; never `INTERNAL` or `UNKNOWN`.
//! - Extreme values — 0, negative, `i64::MAX`, `i64::MIN`, `u32::MAX`, far future — in every
//!   numeric, enum and timestamp field of every request (at any depth of nested messages), the
//!   messages built from the descriptors: never `INTERNAL` or `UNKNOWN`, the bytes always decode
//!   (the handler, not the wire check, answers), and every office still answers afterwards.
//! - Every `INTERNAL` an office answers is logged with the request id.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use lychd_runtime::Office;
use lychd_testkit::Sandbox;
use lychd_testkit::refusal::reason_and_domain as reason;
use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorSet};
use tonic::Code;
use tonic::codegen::Service;
use tonic_types::StatusExt;

/// One method of an office's service.
struct Method {
    office: Office,
    /// `/<package>.<Service>/<Method>`.
    path: String,
    /// Full name of its request message, `.lychd.<office>.v1.<Name>`.
    input: String,
    /// Served without a credential (gRPC health).
    open: bool,
}

/// Every message of the descriptor set by full name (nested ones included).
type Messages = BTreeMap<String, DescriptorProto>;

fn descriptors() -> (Vec<Method>, Messages) {
    let fds = FileDescriptorSet::decode(lychd_proto::FILE_DESCRIPTOR_SET).expect("descriptor set");
    let mut methods = Vec::new();
    let mut messages = Messages::new();
    fn add(messages: &mut Messages, scope: &str, m: &DescriptorProto) {
        let name = format!("{scope}.{}", m.name());
        for nested in &m.nested_type {
            add(messages, &name, nested);
        }
        messages.insert(name, m.clone());
    }
    for file in &fds.file {
        for m in &file.message_type {
            add(&mut messages, &format!(".{}", file.package()), m);
        }
        for service in &file.service {
            let full = format!("{}.{}", file.package(), service.name());
            let office = Office::ALL
                .into_iter()
                .find(|o| o.grpc_service() == full)
                .unwrap_or_else(|| panic!("service {full} belongs to no office"));
            for m in &service.method {
                methods.push(Method {
                    office,
                    path: format!("/{full}/{}", m.name()),
                    input: m.input_type().to_owned(),
                    open: false,
                });
            }
        }
    }
    // gRPC health, served by every office.
    let health = FileDescriptorSet::decode(tonic_health::pb::FILE_DESCRIPTOR_SET).expect("health");
    for file in &health.file {
        for m in &file.message_type {
            add(&mut messages, &format!(".{}", file.package()), m);
        }
        for service in &file.service {
            for m in &service.method {
                for office in Office::ALL {
                    methods.push(Method {
                        office,
                        path: format!("/{}.{}/{}", file.package(), service.name(), m.name()),
                        input: m.input_type().to_owned(),
                        open: true,
                    });
                }
            }
        }
    }
    assert!(methods.len() >= 60, "only {} methods found", methods.len());
    for office in Office::ALL {
        assert!(
            methods.iter().any(|m| m.office == office),
            "{office} has no methods"
        );
    }
    (methods, messages)
}

// ---- protobuf wire encoding, by hand (the point is to send what prost would not) ----

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn tag(number: i32, wire: u8, out: &mut Vec<u8>) {
    varint(
        (u64::try_from(number).expect("field numbers are positive") << 3) | u64::from(wire),
        out,
    );
}

fn len_field(number: i32, payload: &[u8], out: &mut Vec<u8>) {
    tag(number, LEN, out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// `leaf` (a field's encoding) inside the messages of `path` (outermost first).
fn nest(path: &[i32], leaf: Vec<u8>) -> Vec<u8> {
    path.iter().rev().fold(leaf, |inner, number| {
        let mut out = Vec::new();
        len_field(*number, &inner, &mut out);
        out
    })
}

fn frame(message: &[u8]) -> Vec<u8> {
    let mut b = vec![0];
    b.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    b.extend_from_slice(message);
    b
}

fn is_len(f: &FieldDescriptorProto) -> bool {
    matches!(f.r#type(), Type::String | Type::Bytes | Type::Message)
}

fn is_message(f: &FieldDescriptorProto) -> bool {
    matches!(f.r#type(), Type::Message)
}

/// The path (field numbers) to the first string field of `m`, searching nested messages.
fn string_field(
    m: &DescriptorProto,
    messages: &Messages,
    depth: usize,
) -> Option<(Vec<i32>, String)> {
    if let Some(f) = m.field.iter().find(|f| f.r#type() == Type::String) {
        return Some((vec![f.number()], f.name().to_owned()));
    }
    if depth == 0 {
        return None;
    }
    m.field.iter().filter(|f| is_message(f)).find_map(|f| {
        let inner = messages.get(f.type_name())?;
        let (mut path, name) = string_field(inner, messages, depth - 1)?;
        path.insert(0, f.number());
        Some((path, format!("{}.{name}", f.name())))
    })
}

/// Bodies that are not one well-formed request message of `method`, each with what it is.
fn undecodable(method: &Method, messages: &Messages, seed: u64) -> Vec<(String, Vec<u8>)> {
    let m = &messages[&method.input];
    let decode = lychd_runtime::wire::decoder(&method.path).expect("a decoder");
    let mut cases = Vec::new();
    if let Some((path, name)) = string_field(m, messages, 3) {
        let mut leaf = Vec::new();
        len_field(
            *path.last().expect("a field"),
            &[b'a', 0xff, 0xfe, b'z'],
            &mut leaf,
        );
        cases.push((
            format!("invalid UTF-8 in {name}"),
            frame(&nest(&path[..path.len() - 1], leaf)),
        ));
    }
    if let Some(f) = m.field.first() {
        // A length-delimited field sent as a varint; a scalar sent as a fixed32 (or a fixed32
        // or float as a varint): prost refuses every one of these.
        let mut b = Vec::new();
        if is_len(f) || matches!(f.r#type(), Type::Fixed32 | Type::Sfixed32 | Type::Float) {
            tag(f.number(), VARINT, &mut b);
            varint(1, &mut b);
        } else {
            tag(f.number(), FIXED32, &mut b);
            b.extend_from_slice(&[1, 0, 0, 0]);
        }
        cases.push((format!("wrong wire type of {}", f.name()), frame(&b)));
    }
    // A length-delimited field announcing 100 bytes and carrying 3.
    let number = m
        .field
        .iter()
        .find(|f| is_len(f))
        .map_or(15, |f| f.number());
    let mut truncated = Vec::new();
    tag(number, LEN, &mut truncated);
    varint(100, &mut truncated);
    truncated.extend_from_slice(b"abc");
    cases.push(("truncated message".to_owned(), frame(&truncated)));
    // Random bytes (xorshift), re-drawn until they do not decode.
    let mut x = seed | 1;
    let random = loop {
        let bytes: Vec<u8> = (0..48)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        if decode(bytes.clone().into()).is_err() {
            break bytes;
        }
    };
    cases.push(("random bytes".to_owned(), frame(&random)));
    // Broken framing around an otherwise valid (empty) message.
    cases.push(("no message at all".to_owned(), Vec::new()));
    let mut short = frame(b"");
    short[4] = 10;
    cases.push(("a frame shorter than its length".to_owned(), short));
    let mut compressed = frame(b"");
    compressed[0] = 1;
    cases.push(("a compressed frame".to_owned(), compressed));
    let mut two = frame(b"");
    two.extend(frame(b""));
    cases.push(("two messages for one".to_owned(), two));
    for (what, body) in &cases {
        let message = lychd_runtime::wire::single_frame(body);
        assert!(
            message.is_none() || message.is_some_and(|m| decode(m.to_vec().into()).is_err()),
            "{}: the {what} case decodes",
            method.path
        );
    }
    cases
}

/// Send `body` as is to `path`; the status answered (`Ok` when the call succeeded or a stream
/// was still open after 2 s).
async fn send(
    endpoint: &str,
    path: &str,
    token: &str,
    request_id: &str,
    body: Vec<u8>,
) -> tonic::Status {
    let mut channel = lychd_runtime::client::channel(endpoint).expect("channel");
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("{endpoint}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .header("x-request-id", request_id)
        .body(tonic::body::Body::new(Full::new(bytes::Bytes::from(body))))
        .expect("request");
    futures::future::poll_fn(|cx| channel.poll_ready(cx))
        .await
        .expect("ready");
    let response = channel.call(request).await.expect("a response");
    if let Some(status) = tonic::Status::from_header_map(response.headers()) {
        return status;
    }
    match tokio::time::timeout(Duration::from_secs(2), response.into_body().collect()).await {
        Err(_) => tonic::Status::ok("a stream still open"),
        Ok(collected) => {
            let collected = collected.expect("the body");
            collected
                .trailers()
                .and_then(tonic::Status::from_header_map)
                .unwrap_or_else(|| tonic::Status::unknown("no grpc-status"))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn undecodable_bodies_to_every_method_are_caller_errors_never_internal() {
    use futures::StreamExt;
    let sandbox = Sandbox::builder().all_offices().start().await;
    let (methods, messages) = descriptors();
    let unknown_session = format!("lws_{}", "0".repeat(64));
    let callers = [
        ("operator", sandbox.token.as_str()),
        ("stranger", unknown_session.as_str()),
        ("junk bearer", "junk"),
    ];
    let mut calls = Vec::new();
    for (i, method) in methods.iter().enumerate() {
        for (what, body) in undecodable(method, &messages, 0x9e37_79b9_7f4a_7c15 ^ i as u64) {
            for (who, token) in callers {
                calls.push((method, what.clone(), body.clone(), who, token));
            }
        }
    }
    let total = calls.len();
    let failures: Vec<String> = futures::stream::iter(calls)
        .map(|(method, what, body, who, token)| {
            let endpoint = sandbox.office(method.office).endpoint();
            async move {
                let status = send(&endpoint, &method.path, token, "fuzz", body).await;
                let (reason, domain) = reason(&status);
                let ok = match who {
                    _ if method.open || who == "operator" => {
                        status.code() == Code::InvalidArgument
                            && reason == "MESSAGE_UNDECODABLE"
                            && domain == "lychd.wire"
                            && status.message()
                                == lychd_runtime::wire::reasons::MESSAGE_UNDECODABLE.meaning
                    }
                    _ => status.code() == Code::Unauthenticated && reason == "SESSION_UNKNOWN",
                };
                (!ok).then(|| {
                    format!(
                        "{} as {who}, {what}: {:?} {reason} {:?}",
                        method.path,
                        status.code(),
                        status.message()
                    )
                })
            }
        })
        .buffer_unordered(16)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{} of {total} calls answered wrongly:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every office still serves a well-formed call.
    for office in Office::ALL {
        let p = sandbox.office(office);
        let path = format!("/{}/Describe", office.grpc_service());
        let status = send(&p.endpoint(), &path, &sandbox.token, "after", frame(b"")).await;
        assert_eq!(status.code(), Code::Ok, "{office}: {status:?}");
    }
}

/// A numeric, enum or timestamp field, by its path of field numbers from the request message.
struct Leaf {
    path: Vec<i32>,
    name: String,
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Varint,
    Zigzag,
    Fixed32,
    Fixed64,
    Instant,
}

fn leaves(
    m: &DescriptorProto,
    messages: &Messages,
    depth: usize,
    out: &mut Vec<Leaf>,
    prefix: (&[i32], &str),
) {
    for f in &m.field {
        let mut path = prefix.0.to_vec();
        path.push(f.number());
        let name = if prefix.1.is_empty() {
            f.name().to_owned()
        } else {
            format!("{}.{}", prefix.1, f.name())
        };
        let kind = match f.r#type() {
            Type::Int32 | Type::Int64 | Type::Uint32 | Type::Uint64 | Type::Enum | Type::Bool => {
                Some(Kind::Varint)
            }
            Type::Sint32 | Type::Sint64 => Some(Kind::Zigzag),
            Type::Fixed32 | Type::Sfixed32 | Type::Float => Some(Kind::Fixed32),
            Type::Fixed64 | Type::Sfixed64 | Type::Double => Some(Kind::Fixed64),
            Type::Message
                if matches!(
                    f.type_name(),
                    ".google.protobuf.Timestamp" | ".google.protobuf.Duration"
                ) =>
            {
                Some(Kind::Instant)
            }
            Type::Message if depth > 0 => {
                if let Some(inner) = messages.get(f.type_name()) {
                    leaves(inner, messages, depth - 1, out, (&path, &name));
                }
                None
            }
            _ => None,
        };
        if let Some(kind) = kind {
            // A repeated scalar is sent unpacked: one element.
            out.push(Leaf { path, name, kind });
        }
    }
}

/// The field `number` set to each extreme value of `kind`, encoded.
fn extremes(number: i32, kind: Kind) -> Vec<(String, Vec<u8>)> {
    const FAR: i64 = 10_000_000_000_000;
    let ints: [(&str, i64); 7] = [
        ("0", 0),
        ("-1", -1),
        ("i64::MAX", i64::MAX),
        ("i64::MIN", i64::MIN),
        ("u32::MAX", i64::from(u32::MAX)),
        ("i32::MIN", i64::from(i32::MIN)),
        ("10^13", FAR),
    ];
    let mut out = Vec::new();
    match kind {
        Kind::Varint | Kind::Zigzag => {
            for (what, n) in ints {
                let mut b = Vec::new();
                tag(number, VARINT, &mut b);
                let raw = match kind {
                    Kind::Zigzag => ((n << 1) ^ (n >> 63)) as u64,
                    _ => n as u64,
                };
                varint(raw, &mut b);
                out.push((what.to_owned(), b));
            }
        }
        Kind::Fixed32 => {
            for (what, bits) in [
                ("0", 0u32),
                ("-1", u32::MAX),
                ("-1.0", (-1.0f32).to_bits()),
                ("f32::MAX", f32::MAX.to_bits()),
                ("NaN", f32::NAN.to_bits()),
                ("inf", f32::INFINITY.to_bits()),
            ] {
                let mut b = Vec::new();
                tag(number, FIXED32, &mut b);
                b.extend_from_slice(&bits.to_le_bytes());
                out.push((what.to_owned(), b));
            }
        }
        Kind::Fixed64 => {
            for (what, bits) in [
                ("0", 0u64),
                ("-1", u64::MAX),
                ("-1.0", (-1.0f64).to_bits()),
                ("f64::MAX", f64::MAX.to_bits()),
                ("NaN", f64::NAN.to_bits()),
                ("inf", f64::INFINITY.to_bits()),
            ] {
                let mut b = Vec::new();
                tag(number, FIXED64, &mut b);
                b.extend_from_slice(&bits.to_le_bytes());
                out.push((what.to_owned(), b));
            }
        }
        Kind::Instant => {
            let mut pairs: Vec<(String, i64, i64)> = ints
                .iter()
                .map(|(what, s)| (format!("{what} s"), *s, 0))
                .collect();
            pairs.push(("year 10000".into(), 253_402_300_800, 0));
            pairs.push(("nanos -1".into(), 1_700_000_000, -1));
            pairs.push(("nanos 10^9".into(), 1_700_000_000, 1_000_000_000));
            for (what, seconds, nanos) in pairs {
                let mut inner = Vec::new();
                tag(1, VARINT, &mut inner);
                varint(seconds as u64, &mut inner);
                tag(2, VARINT, &mut inner);
                varint(nanos as u64, &mut inner);
                let mut b = Vec::new();
                len_field(number, &inner, &mut b);
                out.push((what, b));
            }
        }
    }
    out
}

/// A well-formed request for the methods where one reaches past the first checks (the operator
/// may propose on `effect:runner` and administer principals); others start empty. Appended
/// fields override a base's (protobuf merge: the last scalar wins, messages merge).
fn base(path: &str, operator_id: &str) -> Vec<u8> {
    use lychd_proto::ward::v1 as pb;
    match path {
        "/lychd.ward.v1.Ward/ProposeEffect" => pb::ProposeEffectRequest {
            run_id: "run-1".into(),
            effect_owner: "runner".into(),
            effect_id: "write-file".into(),
            effect_revision: 1,
            tool_name: "fs.write".into(),
            deferred_call_id: "call-1".into(),
            arguments_json: br#"{"a":1}"#.to_vec(),
            effect_class: pb::EffectClass::Standard as i32,
            binding: Some(pb::ConsentBinding {
                nonce: "n-1".into(),
                ..Default::default()
            }),
        }
        .encode_to_vec(),
        "/lychd.ward.v1.Ward/Assign" => pb::AssignRequest {
            principal_id: operator_id.to_owned(),
            action: "ward:describe".into(),
            object: "office:ward".into(),
            audience: "ward".into(),
            purpose: "describe".into(),
            expires_at: None,
        }
        .encode_to_vec(),
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn extreme_values_in_every_numeric_and_timestamp_field_never_fail_an_office() {
    use futures::StreamExt;
    let sandbox = Sandbox::builder().all_offices().start().await;
    sandbox
        .admin()
        .ensure_assignment(
            &sandbox.operator_id,
            "ward:propose",
            "effect:runner",
            "ward",
            "propose",
        )
        .await
        .expect("the operator may propose");
    let (methods, messages) = descriptors();
    let mut calls = Vec::new();
    for method in methods.iter().filter(|m| !m.open) {
        let mut found = Vec::new();
        leaves(
            &messages[&method.input],
            &messages,
            4,
            &mut found,
            (&[], ""),
        );
        for leaf in found {
            let (last, outer) = leaf.path.split_last().expect("a field");
            for (what, encoded) in extremes(*last, leaf.kind) {
                let mut message = base(&method.path, &sandbox.operator_id);
                message.extend(nest(outer, encoded));
                calls.push((method, format!("{} = {what}", leaf.name), message));
            }
        }
    }
    assert!(calls.len() >= 100, "only {} extreme calls", calls.len());
    let total = calls.len();
    let token = sandbox.token.clone();
    let answers: BTreeMap<String, tonic::Status> = futures::stream::iter(calls)
        .map(|(method, what, message)| {
            let endpoint = sandbox.office(method.office).endpoint();
            let token = token.clone();
            async move {
                let decode = lychd_proto::request_decoder(&method.path).expect("decoder");
                assert!(
                    decode(message.clone().into()).is_ok(),
                    "{}: {what} does not decode",
                    method.path
                );
                let status =
                    send(&endpoint, &method.path, &token, "extreme", frame(&message)).await;
                (format!("{} {what}", method.path), status)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let failures: Vec<String> = answers
        .iter()
        .filter_map(|(call, status)| {
            let (reason, _) = reason(status);
            let bad = matches!(
                status.code(),
                Code::Internal | Code::Unknown | Code::DataLoss
            ) || reason == "MESSAGE_UNDECODABLE";
            bad.then(|| {
                format!(
                    "{call}: {:?} {reason} {:?}",
                    status.code(),
                    status.message()
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {total} calls failed the office:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The calls reach the range checks: out-of-range values are refused naming their field.
    for (call, field) in [
        (
            "/lychd.ward.v1.Ward/ProposeEffect binding.expiry = 10^13 s",
            "binding.expiry",
        ),
        (
            "/lychd.ward.v1.Ward/ProposeEffect binding.expiry = i64::MAX s",
            "binding.expiry",
        ),
        (
            "/lychd.ward.v1.Ward/Assign expires_at = year 10000",
            "expires_at",
        ),
        (
            "/lychd.ward.v1.Ward/Assign expires_at = i64::MIN s",
            "expires_at",
        ),
        (
            "/lychd.ward.v1.Ward/ProposeEffect effect_revision = -1",
            "effect_revision",
        ),
    ] {
        let status = &answers[call];
        let fields: Vec<String> = status
            .get_error_details()
            .bad_request()
            .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
            .unwrap_or_default();
        assert_eq!(status.code(), Code::InvalidArgument, "{call}: {status:?}");
        assert!(fields.iter().any(|f| f == field), "{call}: {fields:?}");
    }
    // What was accepted fails nothing later: every office answers, Ward lists what it stored.
    for office in Office::ALL {
        let p = sandbox.office(office);
        let path = format!("/{}/Describe", office.grpc_service());
        let status = send(&p.endpoint(), &path, &sandbox.token, "after", frame(b"")).await;
        assert_eq!(status.code(), Code::Ok, "{office}: {status:?}");
    }
    let ward = sandbox.office(Office::Ward).endpoint();
    for (path, message) in [
        (
            "/lychd.ward.v1.Ward/ListAssignments",
            lychd_proto::ward::v1::ListAssignmentsRequest {
                principal_id: sandbox.operator_id.clone(),
                page: None,
            }
            .encode_to_vec(),
        ),
        ("/lychd.ward.v1.Ward/ListAudit", Vec::new()),
    ] {
        let status = send(&ward, path, &sandbox.token, "after", frame(&message)).await;
        assert_eq!(status.code(), Code::Ok, "{path}: {status:?}");
    }
}

/// An `INTERNAL` (here: Ward's table of preauthorization rules gone from under it) is logged as
/// an error with the request id the caller sent.
#[tokio::test(flavor = "multi_thread")]
async fn an_internal_answer_is_logged_with_its_request_id() {
    let sandbox = Sandbox::builder().office(Office::Ward).start().await;
    sandbox
        .admin()
        .ensure_assignment(
            &sandbox.operator_id,
            "ward:administer",
            "preauth:*",
            "ward",
            "administer",
        )
        .await
        .expect("the operator may list rules");
    let mut db = sandbox.db.superuser().await;
    sqlx::query("ALTER TABLE ward.preauth_rules RENAME TO preauth_rules_gone")
        .execute(&mut db)
        .await
        .expect("rename");
    let request_id = format!("wire-{}", uuid::Uuid::new_v4());
    let ward = sandbox.office(Office::Ward);
    let path = "/lychd.ward.v1.Ward/ListPreauthRules";
    let status = send(
        &ward.endpoint(),
        path,
        &sandbox.token,
        &request_id,
        frame(b""),
    )
    .await;
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    let logged = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let log = ward.log();
            if let Some(line) = log
                .lines()
                .find(|l| l.contains("answered with a server error") && l.contains(&request_id))
            {
                return line.to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the INTERNAL is logged with its request id");
    assert!(logged.contains("\"level\":\"ERROR\""), "{logged}");
    assert!(logged.contains(path), "{logged}");
}
