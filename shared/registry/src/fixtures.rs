//! Declarations for tests (of this crate and of the offices that read the registry): a
//! dedicated llama.cpp soulstone, a quarantined portal, a text capability.

use std::collections::BTreeMap;

use crate::registry::{AnimatorDecl, CapabilityDecl, Dialect, Modality, SourceKind};

/// A dedicated llama.cpp soulstone at `http://127.0.0.1:8080` (conflicts omitted).
pub fn soulstone(name: &str) -> AnimatorDecl {
    AnimatorDecl {
        name: name.into(),
        source: SourceKind::Soulstone,
        dialect: Dialect::LlamaCpp,
        endpoint: "http://127.0.0.1:8080".into(),
        dedicated: true,
        resident: false,
        dynamic: false,
        probe: None,
        ready_estimate_seconds: Some(30),
        aliases: BTreeMap::new(),
        conflict_domains: None,
        groups: Vec::new(),
        device: None,
        memory_mib: None,
    }
}

/// An unprobed OpenAI-dialect portal.
pub fn portal(name: &str) -> AnimatorDecl {
    AnimatorDecl {
        source: SourceKind::Portal,
        dialect: Dialect::OpenaiModelsV1,
        endpoint: "https://api.example.invalid/v1".into(),
        dedicated: false,
        ready_estimate_seconds: None,
        ..soulstone(name)
    }
}

/// A text capability of `family` with `model` on `animator`.
pub fn cap(animator: &str, family: &str, model: &str) -> CapabilityDecl {
    CapabilityDecl {
        animator: animator.into(),
        family: family.into(),
        model_id: model.into(),
        runtime_model: None,
        input_modalities: vec![Modality::Text],
        supports_tools: false,
        toolsets: vec![],
        context_tokens: 8192,
        max_output_tokens: 0,
        memory_mib: None,
    }
}
