//! The `[office]` section of the Orchestrator's configuration: the animator registry — the
//! same `[[office.animators]]` and `[[office.capabilities]]` declarations the Dispatcher reads,
//! parsed and validated by the one shared registry (`lychd-registry`) — compiled into the
//! conflict graph. Validated once at start; every error names the file and the field and
//! refuses start-up (exit 2).

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::{AnimatorDecl, CapabilityDecl, Registry};
use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorSection {
    #[serde(default)]
    pub animators: Vec<AnimatorDecl>,
    #[serde(default)]
    pub capabilities: Vec<CapabilityDecl>,
}

/// What the office runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub registry: Registry,
    pub graph: ConflictGraph,
}

/// Read and validate `[office]`.
pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let section: OrchestratorSection = cfg.office_section()?;
    let origin = cfg
        .source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "configuration".into());
    let bad = |field: &str, message: &str| ConfigError::Invalid {
        origin: origin.clone(),
        field: format!("office.{field}"),
        message: message.into(),
    };
    let registry = Registry::build(&section.animators, &section.capabilities)
        .map_err(|e| bad(&e.field, &e.message))?;
    let graph = ConflictGraph::compile(&registry).map_err(|e| bad(&e.field, &e.message))?;
    Ok(Settings { registry, graph })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lychd_runtime::Office;

    use super::*;

    fn load_text(dir: &Path, text: &str) -> Result<Settings, String> {
        let p = dir.join("orchestrator.toml");
        std::fs::write(&p, text).expect("write");
        let cfg = OfficeConfig::load(Office::Orchestrator, Some(&p), Vec::new())
            .map_err(|e| e.to_string())?;
        load(&cfg).map_err(|e| e.to_string())
    }

    const A: &str = "[[office.animators]]\nname = \"a\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"http://127.0.0.1:1\"\ndedicated = true\n";
    const B: &str = "[[office.animators]]\nname = \"b\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"http://127.0.0.1:2\"\ndedicated = true\n";

    #[test]
    fn the_registry_compiles_into_the_graph() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = load_text(dir.path(), &format!("{A}{B}")).expect("valid");
        assert_eq!(s.graph.edges().count(), 1);
        assert_eq!(s.graph.digest().len(), 64);
    }

    #[test]
    fn a_coven_with_an_internal_conflict_refuses_start_up_naming_file_and_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let text = format!("{A}groups = [\"duo\"]\n{B}groups = [\"duo\"]\n");
        let e = load_text(dir.path(), &text).expect_err("refused");
        assert!(e.contains("office.groups.duo"), "{e}");
        assert!(e.contains("orchestrator.toml"), "{e}");
        let text = format!("{A}resident = true\nconflict_domains = [\"gpu0\"]\n");
        let e = load_text(dir.path(), &text).expect_err("refused");
        assert!(e.contains("office.animators[0].conflict_domains"), "{e}");
    }
}
