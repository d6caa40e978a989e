//! The simulated runtime's OpenAI-style chat completions: deterministic answers with `usage`
//! token counts from a served model; another model, a runtime not ready or a bad body refused.

use lychd_simllama::{RouterStatus, SimHealth, SimLlama, SimModel, chat_answer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POST `body` to `path` over a fresh connection: the status and the body.
async fn post(sim: &SimLlama, path: &str, body: &str) -> (u16, serde_json::Value) {
    let mut stream = tokio::net::TcpStream::connect(sim.addr())
        .await
        .expect("connect");
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.expect("read");
    let status = raw[9..12].parse().expect("status");
    let (_, body) = raw.split_once("\r\n\r\n").expect("head and body");
    (status, serde_json::from_str(body).expect("json body"))
}

const ASK: &str = r#"{"model":"m","messages":[{"role":"user","content":"say something"}]}"#;

#[tokio::test]
async fn a_served_model_answers_deterministically_with_usage() {
    let sim = SimLlama::serving("m").await;
    let (status, first) = post(&sim, "/v1/chat/completions", ASK).await;
    assert_eq!(status, 200);
    let (_, again) = post(&sim, "/v1/chat/completions", ASK).await;
    assert_eq!(first, again, "the same request, the same answer");
    assert_eq!(first, chat_answer("m", &["say something"]));
    let usage = &first["usage"];
    assert_eq!(usage["prompt_tokens"], 4);
    assert_eq!(usage["completion_tokens"], 5);
    assert_eq!(usage["total_tokens"], 9);
    let other = ASK.replace("something", "else");
    let (_, different) = post(&sim, "/v1/chat/completions", &other).await;
    assert_ne!(
        different["choices"][0]["message"]["content"],
        first["choices"][0]["message"]["content"]
    );
    assert_eq!(sim.chats(), 3);
}

#[tokio::test]
async fn another_model_a_runtime_not_ready_or_a_bad_body_is_refused_and_not_counted() {
    let sim = SimLlama::serving("m").await;
    let (status, _) = post(&sim, "/v1/chat/completions", &ASK.replace("\"m\"", "\"x\"")).await;
    assert_eq!(status, 404);
    let (status, _) = post(&sim, "/v1/chat/completions", "not json").await;
    assert_eq!(status, 400);
    sim.set_models(vec![SimModel::router("m", RouterStatus::Unloaded)]);
    let (status, _) = post(&sim, "/v1/chat/completions", ASK).await;
    assert_eq!(status, 404, "an unloaded router model does not answer");
    sim.set_models(vec![SimModel::served("m")]);
    sim.set_health(SimHealth::Loading);
    let (status, _) = post(&sim, "/v1/chat/completions", ASK).await;
    assert_eq!(status, 503);
    assert_eq!(sim.chats(), 0);
}

#[tokio::test]
async fn a_marker_makes_the_answer_empty_deterministically() {
    let sim = SimLlama::serving("m").await;
    let empty = r#"{"model":"m","messages":[{"role":"user","content":"x [simllama:empty] y"}]}"#;
    let (status, a) = post(&sim, "/v1/chat/completions", empty).await;
    assert_eq!(status, 200);
    assert_eq!(a["choices"][0]["message"]["content"], "");
    assert_eq!(a["usage"]["completion_tokens"], 0);
    assert_eq!(a, post(&sim, "/v1/chat/completions", empty).await.1);
    // Empty unless another message holds the text.
    let unless = |system: &str| {
        format!(
            r#"{{"model":"m","messages":[{{"role":"system","content":"{system}"}},{{"role":"user","content":"[simllama:empty-unless:round 2]"}}]}}"#
        )
    };
    let (_, first) = post(&sim, "/v1/chat/completions", &unless("step a")).await;
    assert_eq!(first["choices"][0]["message"]["content"], "");
    let (_, later) = post(&sim, "/v1/chat/completions", &unless("step a round 2")).await;
    assert_ne!(later["choices"][0]["message"]["content"], "");
    assert_eq!(
        later,
        chat_answer("m", &["step a round 2", "[simllama:empty-unless:round 2]"])
    );
    // Empty when another message is exactly the text.
    let marker = "[simllama:empty-if:step b]";
    let empty = |a: serde_json::Value| a["choices"][0]["message"]["content"] == "";
    assert!(empty(chat_answer("m", &["step b", marker])));
    assert!(!empty(chat_answer("m", &["step b (round 2)", marker])));
    assert!(!empty(chat_answer("m", &["step a", marker])));
}
