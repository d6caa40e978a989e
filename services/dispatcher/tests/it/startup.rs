//! A bad registry refuses start-up with a configuration error naming the field; the example
//! registries start.

use std::sync::Arc;

use lychd_runtime::config::ConfigError;
use lychd_runtime::server::{InProcess, ServeContext};

use crate::common::*;

async fn start_with(s: &Stack, office: &str) -> anyhow::Result<InProcess> {
    let mut config = (*s.spawned.ctx.config).clone();
    config.office = toml::from_str(office).expect("toml");
    let ctx = ServeContext {
        config: Arc::new(config),
        ..s.spawned.ctx.clone()
    };
    InProcess::start(ctx, lychd_dispatcher::spec().start).await
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_registries_refuse_start_up_with_the_field_named() {
    let s = stack("").await;
    let cases = [
        (
            animator("a", "http://127.0.0.1:1", "") + &capability("a", "chat", "m", "") + &capability("a", "chat", "m", ""),
            "office.capabilities[1].model_id",
        ),
        (
            "[[animators]]\nname = \"p\"\nsource = \"portal\"\ndialect = \"openai_models_v1\"\nendpoint = \"https://x\"\ndynamic = true\n".to_owned(),
            "office.animators[0].dynamic",
        ),
        (
            animator("a", "http://127.0.0.1:1", "aliases = { \"gpt\" = \"ghost\" }") + &capability("a", "chat", "m", ""),
            "office.animators[0].aliases.gpt",
        ),
        (animator("a", "http://127.0.0.1:1", "") + &capability("a", "chat", "Bad:Key", ""), "office.capabilities[0].model_id"),
        ("lease_ttl_max_seconds = 0\n".to_owned(), "office.lease_ttl_max_seconds"),
        ("mystery = true\n".to_owned(), "mystery"),
    ];
    for (office, field) in cases {
        let err = start_with(&s, &office).await.err().expect("refused");
        let config = err
            .downcast_ref::<ConfigError>()
            .unwrap_or_else(|| panic!("a config error: {err:#}"));
        let text = config.to_string();
        assert!(text.contains(field), "{field}: {text}");
    }
    // The deploy example's registry starts.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/config/dispatcher.toml"
    ))
    .expect("example");
    let table: toml::Table = toml::from_str(&example).expect("toml");
    let office = toml::to_string(table.get("office").expect("[office]")).expect("re-serialize");
    let server = start_with(&s, &office)
        .await
        .expect("example registry starts");
    server.stop().await.expect("stops");
    s.spawned.stop().await;
}
