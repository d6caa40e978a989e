//! The Dispatcher's names and Ward's object grammar agree: every capability key and animator
//! name the registry accepts forms an object (`capability:<key>`, `animator:<name>`) that
//! Ward's own parser accepts, so every one can be authorized and assigned.

use lychd_dispatcher::domain::key::{Family, KEY_MAX, parse_v1};
use lychd_dispatcher::domain::registry::{
    AnimatorDecl, CapabilityDecl, Dialect, Modality, Registry, SourceKind,
};
use lychd_ward::domain::grammar::Object;
use proptest::prelude::*;

fn animator(name: &str) -> AnimatorDecl {
    AnimatorDecl {
        name: name.to_owned(),
        source: SourceKind::Soulstone,
        dialect: Dialect::LlamaCpp,
        endpoint: "http://127.0.0.1:1".into(),
        dedicated: true,
        resident: false,
        dynamic: false,
        probe: None,
        ready_estimate_seconds: None,
        aliases: Default::default(),
        conflict_domains: None,
        groups: Vec::new(),
        device: None,
        memory_mib: None,
    }
}

fn capability(animator: &str, family: Family, model: &str) -> CapabilityDecl {
    CapabilityDecl {
        animator: animator.to_owned(),
        family: family.as_str().to_owned(),
        model_id: model.to_owned(),
        runtime_model: None,
        input_modalities: vec![Modality::Text],
        supports_tools: false,
        toolsets: if family == Family::ToolExecution {
            vec!["shell".into()]
        } else {
            vec![]
        },
        context_tokens: 0,
        max_output_tokens: 0,
        memory_mib: None,
    }
}

/// A slug of 1..=64 characters, long ones as likely as short ones (the bound is what matters).
fn slug() -> impl Strategy<Value = String> {
    (1usize..=64).prop_flat_map(|n| {
        proptest::string::string_regex(&format!("[a-z0-9][a-z0-9._-]{{{}}}", n - 1)).expect("regex")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_key_the_registry_accepts_is_an_object_ward_accepts(
        a in slug(),
        m in slug(),
        f in 0usize..7,
    ) {
        let family = Family::ALL[f];
        if let Ok(reg) = Registry::build(&[animator(&a)], &[capability(&a, family, &m)]) {
            for c in reg.capabilities() {
                prop_assert!(
                    Object::parse(&format!("capability:{}", c.key_text)).is_ok(),
                    "registry key {:?} ({} characters) is no Ward object", c.key_text, c.key_text.len()
                );
                prop_assert!(c.key_text.len() <= KEY_MAX);
            }
            for an in reg.animators() {
                let object = format!("animator:{}", an.name);
                prop_assert!(Object::parse(&object).is_ok(), "{} is no Ward object", object);
            }
        }
    }

    #[test]
    fn every_key_a_demand_may_name_is_an_object_ward_accepts(
        a in slug(),
        m in slug(),
        f in 0usize..7,
        junk in "\\PC{0,8}",
    ) {
        let family = Family::ALL[f];
        for text in [format!("{a}:{family}:{m}"), format!("{a}:{family}:{m}{junk}")] {
            if let Ok(k) = parse_v1(&text) {
                prop_assert!(
                    Object::parse(&format!("capability:{k}")).is_ok(),
                    "demanded key {text:?} is no Ward object"
                );
            }
        }
    }
}

#[test]
fn keys_at_the_bound_are_accepted_and_beyond_it_refused() {
    let a = "a".repeat(64);
    // 64 + `:chat:` + 58 = 128.
    let reg = Registry::build(
        &[animator(&a)],
        &[capability(&a, Family::Chat, &"m".repeat(58))],
    )
    .expect("128 characters");
    let key = &reg.capabilities().next().expect("one").key_text;
    assert_eq!(key.len(), 128);
    assert!(Object::parse(&format!("capability:{key}")).is_ok());
    assert!(
        Registry::build(
            &[animator(&a)],
            &[capability(&a, Family::Chat, &"m".repeat(59))]
        )
        .is_err()
    );
    assert!(Object::parse(&format!("capability:{a}:chat:{}", "m".repeat(59))).is_err());
}
