//! `[office.gauge]`: which footprint gauge the office measures with (docs/orchestrator.md,
//! "Placement by memory"). Unset, it follows the actuator; each kind takes only its own fields.

use std::path::PathBuf;
use std::time::Duration;

use lychd_runtime::config::ConfigError;

use super::types::{GaugeDecl, GaugeKind, GaugeSettings};

/// `[office.gauge]`: unset follows the actuator; `simulated` needs the simulated actuator; only
/// `nvidia-smi` takes `command` and `timeout_ms`.
pub(super) fn gauge(
    decl: Option<&GaugeDecl>,
    simulated_actuator: bool,
    bad: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<GaugeSettings, ConfigError> {
    let Some(g) = decl else {
        return Ok(if simulated_actuator {
            GaugeSettings::Simulated
        } else {
            GaugeSettings::None
        });
    };
    if g.kind != GaugeKind::NvidiaSmi {
        if g.command.is_some() {
            return Err(bad("gauge.command", "is not used by this gauge kind"));
        }
        if g.timeout_ms.is_some() {
            return Err(bad("gauge.timeout_ms", "is not used by this gauge kind"));
        }
    }
    match g.kind {
        GaugeKind::None => Ok(GaugeSettings::None),
        GaugeKind::Simulated if simulated_actuator => Ok(GaugeSettings::Simulated),
        GaugeKind::Simulated => Err(bad(
            "gauge.kind",
            "simulated needs the simulated actuator (its host reports the memory)",
        )),
        GaugeKind::NvidiaSmi => {
            let command = g
                .command
                .clone()
                .unwrap_or_else(|| PathBuf::from("nvidia-smi"));
            let bare = command.components().count() == 1 && command.is_relative();
            if command.as_os_str().is_empty() || !(bare || command.is_absolute()) {
                return Err(bad(
                    "gauge.command",
                    "must be an absolute path or a bare name looked up on PATH",
                ));
            }
            let ms = g.timeout_ms.unwrap_or(2_000);
            if !(1..=60_000).contains(&ms) {
                return Err(bad("gauge.timeout_ms", "must be between 1 and 60000"));
            }
            Ok(GaugeSettings::NvidiaSmi {
                command,
                timeout: Duration::from_millis(ms),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lychd_runtime::Office;
    use lychd_runtime::config::OfficeConfig;

    use super::*;
    use crate::config::{Settings, load};

    const A: &str = "[[office.animators]]\nname = \"a\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"http://127.0.0.1:1\"\ndedicated = true\n";

    fn load_text(dir: &Path, text: &str) -> Result<Settings, String> {
        let p = dir.join("orchestrator.toml");
        std::fs::write(&p, text).expect("write");
        let cfg = OfficeConfig::load(Office::Orchestrator, Some(&p), Vec::new())
            .map_err(|e| e.to_string())?;
        load(&cfg).map_err(|e| e.to_string())
    }

    #[test]
    fn the_gauge_follows_the_actuator_unless_chosen_and_takes_only_its_own_fields() {
        let dir = tempfile::tempdir().expect("tmp");
        let sim = "[office.actuator]\nkind = \"simulated\"\nendpoint = \"http://127.0.0.1:9\"\n";
        let s = load_text(dir.path(), &format!("{sim}{A}")).expect("simulated");
        assert_eq!(s.gauge, GaugeSettings::Simulated);
        let s = load_text(dir.path(), A).expect("no actuator");
        assert_eq!(s.gauge, GaugeSettings::None);
        let s = load_text(
            dir.path(),
            &format!("[office.gauge]\nkind = \"nvidia-smi\"\n{A}"),
        )
        .expect("nvidia-smi");
        assert_eq!(
            s.gauge,
            GaugeSettings::NvidiaSmi {
                command: PathBuf::from("nvidia-smi"),
                timeout: Duration::from_millis(2000)
            }
        );
        let s = load_text(
            dir.path(),
            &format!("[office.gauge]\nkind = \"nvidia-smi\"\ncommand = \"/usr/bin/nvidia-smi\"\ntimeout_ms = 500\n{A}"),
        )
        .expect("nvidia-smi at a path");
        assert_eq!(
            s.gauge,
            GaugeSettings::NvidiaSmi {
                command: PathBuf::from("/usr/bin/nvidia-smi"),
                timeout: Duration::from_millis(500)
            }
        );
        let s = load_text(
            dir.path(),
            &format!("{sim}[office.gauge]\nkind = \"none\"\n{A}"),
        )
        .expect("none");
        assert_eq!(s.gauge, GaugeSettings::None);
        for (text, field) in [
            ("kind = \"simulated\"\n", "office.gauge.kind"),
            (
                "kind = \"none\"\ntimeout_ms = 5\n",
                "office.gauge.timeout_ms",
            ),
            ("kind = \"none\"\ncommand = \"x\"\n", "office.gauge.command"),
            (
                "kind = \"nvidia-smi\"\ntimeout_ms = 0\n",
                "office.gauge.timeout_ms",
            ),
            (
                "kind = \"nvidia-smi\"\ntimeout_ms = 60001\n",
                "office.gauge.timeout_ms",
            ),
            (
                "kind = \"nvidia-smi\"\ncommand = \"bin/nvidia-smi\"\n",
                "office.gauge.command",
            ),
            (
                "kind = \"nvidia-smi\"\ncommand = \"\"\n",
                "office.gauge.command",
            ),
            ("kind = \"rocm-smi\"\n", "kind"),
            ("kind = \"none\"\nendpoint = \"x\"\n", "endpoint"),
        ] {
            let e = load_text(dir.path(), &format!("[office.gauge]\n{text}{A}")).expect_err(text);
            assert!(e.contains(field), "{text}: {e}");
        }
    }
}
