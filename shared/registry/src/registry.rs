//! The registry: animators and their capabilities as declared in configuration, validated as
//! one set before anything is served. Declarations are frozen values; nothing here probes.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::key::{CapabilityKey, Family, check_label, check_slug};

/// Where an animator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A local runtime.
    Soulstone,
    /// A remote provider (never dedicated, never dynamic, fails closed at issue).
    Portal,
}

/// The probe and call dialect of a runtime. "OpenAI-compatible" without a name is no dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// llama.cpp `llama-server` (`/health`, `/v1/models`; router mode per-model status).
    LlamaCpp,
    /// The named OpenAI-compatible dialect: `GET /v1/models` lists the served models.
    OpenaiModelsV1,
}

/// Input modalities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Modality {
    Text,
    Image,
    Audio,
    Video,
}

impl Modality {
    /// The configuration name (`text`, `image`, `audio`, `video`).
    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Text => "text",
            Modality::Image => "image",
            Modality::Audio => "audio",
            Modality::Video => "video",
        }
    }
}

/// One `[[office.animators]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnimatorDecl {
    pub name: String,
    pub source: SourceKind,
    pub dialect: Dialect,
    /// Base URL, e.g. `http://127.0.0.1:8080` (no credentials, query or fragment).
    pub endpoint: String,
    /// The Orchestrator may converge this runtime (only dedicated animators get the
    /// hardware-transition signal).
    #[serde(default)]
    pub dedicated: bool,
    /// Persistently resident (never evicted).
    #[serde(default)]
    pub resident: bool,
    /// A running runtime may load models on demand (llama.cpp router mode).
    #[serde(default)]
    pub dynamic: bool,
    /// Probe readiness. Soulstones are always probed; Portals default to `false` (UNKNOWN).
    pub probe: Option<bool>,
    /// Declared estimate of the time to WARM, in seconds (carried by the transition signal).
    pub ready_estimate_seconds: Option<u32>,
    /// OpenAI-shaped names the runtime answers to, each mapped to a model id declared on this
    /// animator (`alias = "model_id"`). An alias to an unregistered model refuses start-up.
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// Finite-hardware exclusion labels (`concurrency.conflict_domains` of the design): two
    /// animators sharing a label never run together. Omitted on a dedicated non-resident
    /// soulstone: the compiler's conservative `default-exclusive`; an explicit `[]` declares
    /// coexistence. Residents and shared runtimes may declare none.
    pub conflict_domains: Option<Vec<String>>,
    /// Covens (operator-facing groups) this animator belongs to: grouping only, never a
    /// conflict or a coexistence claim; a coven with an internal conflict refuses start-up.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The device (a `[[office.devices]]` name, slug grammar) whose memory the runtime uses:
    /// the Orchestrator places it by measured memory (see [`crate::memory`]). Soulstones only.
    pub device: Option<String>,
    /// Declared first estimate of one model's footprint on its device, in MiB (at least 1),
    /// for every model of this animator that declares none of its own; used until measured.
    pub memory_mib: Option<u64>,
}

/// One `[[office.capabilities]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityDecl {
    pub animator: String,
    pub family: String,
    pub model_id: String,
    /// The model name the runtime lists and accepts (default: `model_id`).
    pub runtime_model: Option<String>,
    #[serde(default = "default_modalities")]
    pub input_modalities: Vec<Modality>,
    #[serde(default)]
    pub supports_tools: bool,
    /// Toolsets the grant exposes (a `tool_execution` capability needs at least one).
    #[serde(default)]
    pub toolsets: Vec<String>,
    #[serde(default)]
    pub context_tokens: u32,
    #[serde(default)]
    pub max_output_tokens: u32,
    /// Declared first estimate of this model's footprint at `context_tokens`, in MiB (at
    /// least 1; overrides the animator's `memory_mib`); used until measured.
    pub memory_mib: Option<u64>,
}

fn default_modalities() -> Vec<Modality> {
    vec![Modality::Text]
}

/// A parsed endpoint: `http://host:port/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// As declared (without a trailing slash).
    pub url: String,
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash (may be empty).
    pub prefix: String,
}

/// Parse an endpoint base URL. Userinfo, query and fragment are refused (no credential ever
/// travels in a URL).
pub fn parse_endpoint(raw: &str) -> Result<Endpoint, &'static str> {
    let url = raw.trim_end_matches('/');
    let (https, rest) = if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else {
        return Err("must be an http:// or https:// URL");
    };
    if rest.contains(['?', '#']) {
        return Err("must not have a query or fragment");
    }
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters");
    }
    let (authority, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err("must not carry credentials");
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6.split_once(']').ok_or("has a malformed IPv6 host")?;
        (h, p.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("has no host");
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or("has a bad port")?,
        None if https => 443,
        None => 80,
    };
    Ok(Endpoint {
        url: url.to_owned(),
        https,
        host: host.to_owned(),
        port,
        prefix: prefix.to_owned(),
    })
}

/// A validated animator.
#[derive(Debug, Clone)]
pub struct Animator {
    pub name: String,
    pub source: SourceKind,
    pub dialect: Dialect,
    pub endpoint: Endpoint,
    pub dedicated: bool,
    pub resident: bool,
    pub dynamic: bool,
    pub probe: bool,
    pub ready_estimate_seconds: Option<u32>,
    pub aliases: BTreeMap<String, String>,
    /// Declared conflict labels, as written (`None`: omitted). The compiled graph
    /// ([`crate::conflict::ConflictGraph`]) derives the effective set.
    pub conflict_domains: Option<BTreeSet<String>>,
    /// Covens, sorted and distinct.
    pub groups: BTreeSet<String>,
    /// The device it is placed on (a slug; the Orchestrator checks it names a device).
    pub device: Option<String>,
    /// Declared footprint estimate of its models, in MiB.
    pub memory_mib: Option<u64>,
}

/// The label the compiler gives an omitted `conflict_domains` on a dedicated non-resident
/// soulstone; it conflicts with every animator whose effective set is non-empty.
pub const DEFAULT_EXCLUSIVE: &str = "default-exclusive";

/// A validated capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub key: CapabilityKey,
    /// `key` in canonical text.
    pub key_text: String,
    pub runtime_model: String,
    pub input_modalities: BTreeSet<Modality>,
    pub supports_tools: bool,
    pub toolsets: Vec<String>,
    pub context_tokens: u32,
    pub max_output_tokens: u32,
    /// Aliases the animator declares for this model id.
    pub aliases: Vec<String>,
    /// Declared footprint estimate of this model, in MiB (its own, else its animator's).
    pub memory_mib: Option<u64>,
}

impl Capability {
    pub fn animator(&self) -> &str {
        &self.key.animator
    }

    pub fn family(&self) -> Family {
        self.key.family
    }

    /// Whether a v1 grant can expose an executable surface: `chat`, or `tool_execution` with
    /// at least one toolset. Everything else is metadata only and fails closed.
    pub fn surface_executable(&self) -> bool {
        match self.key.family {
            Family::Chat => true,
            Family::ToolExecution => !self.toolsets.is_empty(),
            _ => false,
        }
    }

    /// Whether the grant would expose tools.
    pub fn exposes_tools(&self) -> bool {
        match self.key.family {
            Family::Chat => self.supports_tools,
            Family::ToolExecution => !self.toolsets.is_empty(),
            _ => false,
        }
    }
}

/// One problem with the declarations: the field (relative to `[office]`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclError {
    pub field: String,
    pub message: String,
}

/// The validated registry.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub(crate) animators: BTreeMap<String, Animator>,
    /// By canonical key text.
    pub(crate) capabilities: BTreeMap<String, Capability>,
    /// Keys of each animator, in key order.
    pub(crate) by_animator: BTreeMap<String, Vec<String>>,
    /// Devices by name (the Orchestrator's `[[office.devices]]`; see [`Registry::place`]).
    pub(crate) devices: BTreeMap<String, crate::device::Device>,
}

impl Registry {
    /// Validate the declarations as one set. The first problem found is returned, naming its
    /// field (`animators[2].endpoint`, `capabilities[0].model_id`, …).
    pub fn build(
        animators: &[AnimatorDecl],
        capabilities: &[CapabilityDecl],
    ) -> Result<Self, DeclError> {
        let bad = |field: String, message: &str| DeclError {
            field,
            message: message.to_owned(),
        };
        let mut reg = Registry::default();
        for (i, a) in animators.iter().enumerate() {
            let at = |f: &str| format!("animators[{i}].{f}");
            check_slug(&a.name).map_err(|e| bad(at("name"), e.describe()))?;
            if reg.animators.contains_key(&a.name) {
                return Err(bad(at("name"), "duplicate animator name"));
            }
            let endpoint = parse_endpoint(&a.endpoint).map_err(|e| bad(at("endpoint"), e))?;
            let probe = match a.source {
                SourceKind::Soulstone => {
                    if a.probe == Some(false) {
                        return Err(bad(at("probe"), "a soulstone is always probed"));
                    }
                    true
                }
                SourceKind::Portal => {
                    if a.dedicated {
                        return Err(bad(at("dedicated"), "a portal is never dedicated"));
                    }
                    if a.dynamic {
                        return Err(bad(at("dynamic"), "a portal is never dynamic"));
                    }
                    if a.resident {
                        return Err(bad(at("resident"), "a portal is never resident"));
                    }
                    a.probe.unwrap_or(false)
                }
            };
            if probe && endpoint.https {
                return Err(bad(
                    at("endpoint"),
                    "probing speaks plain http only; use an http:// endpoint or probe = false",
                ));
            }
            let local = match a.source {
                SourceKind::Soulstone => true,
                SourceKind::Portal => false,
            };
            if local && endpoint.https {
                return Err(bad(at("endpoint"), "a soulstone endpoint must be http://"));
            }
            if a.resident && a.dynamic {
                return Err(bad(at("dynamic"), "a resident animator is not dynamic"));
            }
            if let Some(0) = a.ready_estimate_seconds {
                return Err(bad(at("ready_estimate_seconds"), "must be at least 1"));
            }
            for alias in a.aliases.keys() {
                check_runtime_name(alias).map_err(|e| bad(at(&format!("aliases.{alias}")), e))?;
            }
            let conflict_domains = match &a.conflict_domains {
                None => None,
                Some(list) => {
                    let mut set = BTreeSet::new();
                    for (j, d) in list.iter().enumerate() {
                        let f = at(&format!("conflict_domains[{j}]"));
                        check_slug(d).map_err(|e| bad(f.clone(), e.describe()))?;
                        if d == DEFAULT_EXCLUSIVE {
                            return Err(bad(f, "default-exclusive is the compiler's label"));
                        }
                        if !set.insert(d.clone()) {
                            return Err(bad(f, "lists a conflict domain twice"));
                        }
                    }
                    Some(set)
                }
            };
            if conflict_domains.as_ref().is_some_and(|d| !d.is_empty()) {
                if a.resident {
                    return Err(bad(
                        at("conflict_domains"),
                        "a persistent resident may not declare conflicts",
                    ));
                }
                if !a.dedicated {
                    return Err(bad(
                        at("conflict_domains"),
                        "a shared (non-dedicated) runtime may not declare conflicts",
                    ));
                }
            }
            if let Some(d) = &a.device {
                check_slug(d).map_err(|e| bad(at("device"), e.describe()))?;
                if a.source == SourceKind::Portal {
                    return Err(bad(at("device"), "a portal holds no local device"));
                }
            }
            if a.memory_mib == Some(0) {
                return Err(bad(at("memory_mib"), "must be at least 1"));
            }
            let mut groups = BTreeSet::new();
            for (j, g) in a.groups.iter().enumerate() {
                let f = at(&format!("groups[{j}]"));
                check_slug(g).map_err(|e| bad(f.clone(), e.describe()))?;
                if !groups.insert(g.clone()) {
                    return Err(bad(f, "lists a group twice"));
                }
            }
            reg.animators.insert(
                a.name.clone(),
                Animator {
                    name: a.name.clone(),
                    source: a.source,
                    dialect: a.dialect,
                    endpoint,
                    dedicated: a.dedicated,
                    resident: a.resident,
                    dynamic: a.dynamic,
                    probe,
                    ready_estimate_seconds: a.ready_estimate_seconds,
                    aliases: a.aliases.clone(),
                    conflict_domains,
                    groups,
                    device: a.device.clone(),
                    memory_mib: a.memory_mib,
                },
            );
            reg.by_animator.insert(a.name.clone(), Vec::new());
        }

        let mut runtime_names: BTreeMap<(String, String), String> = BTreeMap::new();
        for (i, c) in capabilities.iter().enumerate() {
            let at = |f: &str| format!("capabilities[{i}].{f}");
            let Some(animator) = reg.animators.get(&c.animator) else {
                return Err(bad(at("animator"), "names no declared animator"));
            };
            let family = Family::parse(&c.family).ok_or_else(|| {
                bad(
                    at("family"),
                    "unknown family; one of chat, vision, embedding, stt, tts, tool_execution, rerank",
                )
            })?;
            check_slug(&c.model_id).map_err(|e| bad(at("model_id"), e.describe()))?;
            // The slugs are checked; what is left is the key's length (Ward's object bound).
            let key = CapabilityKey::new(&c.animator, family, &c.model_id).map_err(|_| {
                bad(
                    at("model_id"),
                    "makes the capability key longer than 128 characters (Ward's object bound)",
                )
            })?;
            let key_text = key.to_string();
            if reg.capabilities.contains_key(&key_text) {
                return Err(bad(at("model_id"), "duplicate capability key"));
            }
            let runtime_model = c
                .runtime_model
                .clone()
                .unwrap_or_else(|| c.model_id.clone());
            check_runtime_name(&runtime_model).map_err(|e| bad(at("runtime_model"), e))?;
            if c.input_modalities.is_empty() {
                return Err(bad(
                    at("input_modalities"),
                    "must name at least one modality",
                ));
            }
            let modalities: BTreeSet<Modality> = c.input_modalities.iter().copied().collect();
            if modalities.len() != c.input_modalities.len() {
                return Err(bad(at("input_modalities"), "lists a modality twice"));
            }
            if c.memory_mib == Some(0) {
                return Err(bad(at("memory_mib"), "must be at least 1"));
            }
            for (j, t) in c.toolsets.iter().enumerate() {
                check_slug(t).map_err(|e| bad(at(&format!("toolsets[{j}]")), e.describe()))?;
            }
            if c.supports_tools && !family.declares_tool_support() {
                return Err(bad(
                    at("supports_tools"),
                    "only a chat capability declares tool support",
                ));
            }
            if family.declares_tool_support() && !c.supports_tools && !c.toolsets.is_empty() {
                return Err(bad(
                    at("toolsets"),
                    "a chat model without tool support has no toolsets",
                ));
            }
            if !family.carries_toolsets() && !c.toolsets.is_empty() {
                return Err(bad(
                    at("toolsets"),
                    "only chat and tool_execution capabilities carry toolsets",
                ));
            }
            // One runtime name per animator names one model: the probe must map inventory
            // entries to exactly one declared model.
            let slot = (c.animator.clone(), runtime_model.clone());
            if runtime_names
                .get(&slot)
                .is_some_and(|other| other != &c.model_id)
            {
                return Err(bad(
                    at("runtime_model"),
                    "another model of this animator uses the same runtime name",
                ));
            }
            runtime_names.insert(slot, c.model_id.clone());
            let aliases = animator
                .aliases
                .iter()
                .filter(|(_, m)| *m == &c.model_id)
                .map(|(a, _)| a.clone())
                .collect();
            reg.by_animator
                .get_mut(&c.animator)
                .expect("invariant: every declared animator has a key list")
                .push(key_text.clone());
            reg.capabilities.insert(
                key_text.clone(),
                Capability {
                    key,
                    key_text,
                    runtime_model,
                    input_modalities: modalities,
                    supports_tools: c.supports_tools,
                    toolsets: c.toolsets.clone(),
                    context_tokens: c.context_tokens,
                    max_output_tokens: c.max_output_tokens,
                    aliases,
                    memory_mib: c.memory_mib.or(animator.memory_mib),
                },
            );
        }

        // Capability coverage: every alias names a model declared on its own animator, and no
        // alias shadows another model's runtime name.
        for (i, a) in animators.iter().enumerate() {
            for (alias, model) in &a.aliases {
                let field = format!("animators[{i}].aliases.{alias}");
                let declared = reg.by_animator[&a.name]
                    .iter()
                    .any(|k| reg.capabilities[k].key.model_id == *model);
                if !declared {
                    return Err(bad(
                        field,
                        "alias of a model not registered on this animator",
                    ));
                }
                if runtime_names
                    .get(&(a.name.clone(), alias.clone()))
                    .is_some_and(|owner| owner != model)
                {
                    return Err(bad(field, "alias shadows another model's runtime name"));
                }
            }
        }
        for keys in reg.by_animator.values_mut() {
            keys.sort();
        }
        Ok(reg)
    }

    pub fn animators(&self) -> impl Iterator<Item = &Animator> {
        self.animators.values()
    }

    pub fn animator(&self, name: &str) -> Option<&Animator> {
        self.animators.get(name)
    }

    pub fn capabilities(&self) -> impl Iterator<Item = &Capability> {
        self.capabilities.values()
    }

    pub fn capability(&self, key: &str) -> Option<&Capability> {
        self.capabilities.get(key)
    }

    /// Keys declared on `animator`, in key order (empty for an unknown animator).
    pub fn keys_of(&self, animator: &str) -> &[String] {
        self.by_animator
            .get(animator)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.capabilities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.capabilities.is_empty()
    }
}

/// Names the runtime uses (runtime model names and aliases): printable ASCII without
/// whitespace, 1..=256 characters. They are sent to the runtime, never interpreted as paths.
fn check_runtime_name(s: &str) -> Result<(), &'static str> {
    check_label(s, 256, false)?;
    if !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err("must be printable ASCII without whitespace");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{cap, portal, soulstone};

    fn err(a: &[AnimatorDecl], c: &[CapabilityDecl]) -> DeclError {
        Registry::build(a, c).expect_err("must refuse")
    }

    #[test]
    fn a_valid_registry_builds_with_keys_and_aliases() {
        let mut a = soulstone("gpu0");
        a.aliases.insert("gpt-4o".into(), "qwen3-8b".into());
        let reg = Registry::build(
            &[a, portal("cloud")],
            &[
                cap("gpu0", "chat", "qwen3-8b"),
                cap("gpu0", "embedding", "bge-m3"),
                cap("cloud", "chat", "gpt-4.1"),
            ],
        )
        .expect("valid");
        assert_eq!(reg.len(), 3);
        assert_eq!(
            reg.keys_of("gpu0"),
            ["gpu0:chat:qwen3-8b", "gpu0:embedding:bge-m3"]
        );
        let c = reg.capability("gpu0:chat:qwen3-8b").expect("declared");
        assert_eq!(c.aliases, ["gpt-4o"]);
        assert_eq!(c.runtime_model, "qwen3-8b");
        let cloud = reg.animator("cloud").expect("portal");
        assert!(!cloud.probe && !cloud.dedicated);
    }

    #[test]
    fn duplicate_keys_refuse() {
        let e = err(
            &[soulstone("a")],
            &[cap("a", "chat", "m"), cap("a", "chat", "m")],
        );
        assert_eq!(e.field, "capabilities[1].model_id");
        assert!(e.message.contains("duplicate"));
        let e = err(&[soulstone("a"), soulstone("a")], &[]);
        assert_eq!(e.field, "animators[1].name");
    }

    #[test]
    fn portals_cannot_be_dedicated_dynamic_or_resident() {
        let mut p = portal("p");
        p.dedicated = true;
        assert_eq!(err(&[p], &[]).field, "animators[0].dedicated");
        let mut p = portal("p");
        p.dynamic = true;
        assert_eq!(err(&[p], &[]).field, "animators[0].dynamic");
        let mut p = portal("p");
        p.resident = true;
        assert_eq!(err(&[p], &[]).field, "animators[0].resident");
    }

    #[test]
    fn unregistered_aliases_refuse() {
        let mut a = soulstone("a");
        a.aliases.insert("gpt-4o".into(), "other".into());
        let e = err(&[a], &[cap("a", "chat", "m")]);
        assert_eq!(e.field, "animators[0].aliases.gpt-4o");
        assert!(e.message.contains("not registered"));
        // An alias to a model on another animator is still unregistered here.
        let mut a = soulstone("a");
        a.aliases.insert("x".into(), "m2".into());
        let e = err(
            &[a, soulstone("b")],
            &[cap("a", "chat", "m"), cap("b", "chat", "m2")],
        );
        assert_eq!(e.field, "animators[0].aliases.x");
        // An alias may not shadow another model's runtime name.
        let mut a = soulstone("a");
        a.aliases.insert("m2".into(), "m".into());
        let e = err(&[a], &[cap("a", "chat", "m"), cap("a", "chat", "m2")]);
        assert!(e.message.contains("shadows"), "{e:?}");
    }

    #[test]
    fn grammar_and_shape_errors_name_their_field() {
        assert_eq!(err(&[soulstone("A")], &[]).field, "animators[0].name");
        assert_eq!(err(&[soulstone("a:b")], &[]).field, "animators[0].name");
        let e = err(&[soulstone("a")], &[cap("a", "audio", "m")]);
        assert_eq!(e.field, "capabilities[0].family");
        let e = err(&[soulstone("a")], &[cap("a", "chat", "m/x")]);
        assert_eq!(e.field, "capabilities[0].model_id");
        let e = err(&[soulstone("a")], &[cap("a", "chat", "m-latest")]);
        assert!(e.message.contains("floating"));
        let e = err(&[soulstone("a")], &[cap("b", "chat", "m")]);
        assert_eq!(e.field, "capabilities[0].animator");
        // Two valid 64-character slugs make a 130-character key: more than Ward can decide on.
        let long = "m".repeat(64);
        let e = err(&[soulstone(&long)], &[cap(&long, "chat", &long)]);
        assert_eq!(e.field, "capabilities[0].model_id");
        assert!(e.message.contains("128"), "{e:?}");
        let mut s = soulstone("a");
        s.endpoint = "http://user:pw@h:1".into();
        assert_eq!(err(&[s], &[]).field, "animators[0].endpoint");
        let mut s = soulstone("a");
        s.endpoint = "https://h:1".into();
        assert_eq!(err(&[s], &[]).field, "animators[0].endpoint");
        let mut s = soulstone("a");
        s.probe = Some(false);
        assert_eq!(err(&[s], &[]).field, "animators[0].probe");
        let mut c = cap("a", "embedding", "m");
        c.supports_tools = true;
        assert_eq!(
            err(&[soulstone("a")], &[c]).field,
            "capabilities[0].supports_tools"
        );
        let mut c = cap("a", "chat", "m");
        c.input_modalities = vec![];
        assert_eq!(
            err(&[soulstone("a")], &[c]).field,
            "capabilities[0].input_modalities"
        );
        let mut c = cap("a", "chat", "m");
        c.runtime_model = Some("has space".into());
        assert_eq!(
            err(&[soulstone("a")], &[c]).field,
            "capabilities[0].runtime_model"
        );
        let mut c1 = cap("a", "chat", "m1");
        c1.runtime_model = Some("same".into());
        let mut c2 = cap("a", "chat", "m2");
        c2.runtime_model = Some("same".into());
        assert_eq!(
            err(&[soulstone("a")], &[c1, c2]).field,
            "capabilities[1].runtime_model"
        );
    }

    #[test]
    fn surfaces() {
        let reg = Registry::build(
            &[soulstone("a")],
            &[
                cap("a", "chat", "m"),
                CapabilityDecl {
                    toolsets: vec!["shell".into()],
                    ..cap("a", "tool_execution", "t")
                },
                cap("a", "tool_execution", "empty"),
                cap("a", "vision", "v"),
            ],
        )
        .expect("valid");
        let s = |k: &str| reg.capability(k).expect(k).surface_executable();
        assert!(s("a:chat:m"));
        assert!(s("a:tool_execution:t"));
        assert!(!s("a:tool_execution:empty"));
        assert!(!s("a:vision:v"));
    }

    #[test]
    fn endpoints() {
        let e = parse_endpoint("http://127.0.0.1:8080/").expect("ok");
        assert_eq!(
            (e.host.as_str(), e.port, e.prefix.as_str()),
            ("127.0.0.1", 8080, "")
        );
        let e = parse_endpoint("http://[::1]:9/api").expect("ok");
        assert_eq!(
            (e.host.as_str(), e.port, e.prefix.as_str()),
            ("::1", 9, "/api")
        );
        assert_eq!(parse_endpoint("https://h").expect("ok").port, 443);
        for bad in [
            "ftp://h",
            "http://",
            "http://h:0",
            "http://h:x",
            "http://h?q",
            "http://a@h",
            "http://h /x",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
    }
}
