//! Probe adapters: observe an animator's requested capabilities over its runtime's HTTP API.
//!
//! - `llama_cpp`: `GET /health` (200 healthy, 503 loading), then `GET /v1/models` (on the same
//!   connection while the runtime keeps it open). In router
//!   mode every inventory entry carries `status.value` (`loaded`, `loading`, `downloading`,
//!   `unloaded`, `sleeping`; `failed: true` after a failed load) and each model is observed on
//!   its own; in single-model mode the listed model is WARM.
//! - `openai_models_v1`: `GET /v1/models` only; a listed model is WARM.
//! - a Portal with `probe = false`: no traffic, every key UNKNOWN (`PROBE_DISABLED`).
//!
//! Each dialect's GETs are its [`Plan`], chosen by one exhaustive `match` ([`plan`]).
//!
//! An adapter returns one observation per inventory entry that names a requested model, plus
//! COLD for each requested model the runtime does not list; [`crate::domain::observation`]
//! then checks totality (a model listed twice is a duplicate key and invalidates the batch).
//! Errors are safe codes; no response body is ever returned or logged.

pub mod client;

use serde::Deserialize;

use crate::domain::observation::{Observed, Phase};
use crate::domain::registry::{Animator, Capability, Dialect};
use client::{FetchError, Fetched, HttpGet};

/// Observe `requested` (capabilities of `animator`). `Err` is a failure code: the caller
/// invalidates the requested observations.
pub async fn probe(
    client: &HttpGet,
    animator: &Animator,
    requested: &[&Capability],
) -> Result<Vec<(String, Observed)>, String> {
    if !animator.probe {
        return Ok(requested
            .iter()
            .map(|c| {
                (
                    c.key_text.clone(),
                    Observed::with_reason(Phase::Unknown, "PROBE_DISABLED"),
                )
            })
            .collect());
    }
    let code = |e: FetchError| e.code().to_owned();
    let mut conn = client.connection(&animator.endpoint);
    let plan = plan(animator.dialect);
    // The dialect's health check, if it has one, comes before the inventory.
    if let Some(path) = plan.health {
        match conn.get(path).await.map_err(code)? {
            Fetched::Refused => return Ok(all(requested, Observed::new(Phase::Cold))),
            Fetched::Response { status, .. } => match health(status)? {
                Health::Ok => {}
                Health::Other(o) => return Ok(all(requested, o)),
            },
        }
    }
    match conn.get(plan.inventory).await.map_err(code)? {
        Fetched::Refused => Ok(all(requested, Observed::new(Phase::Cold))),
        Fetched::Response { status, body } => {
            if (300..400).contains(&status) {
                return Err("PROBE_REDIRECT_REFUSED".into());
            }
            if status != 200 {
                return Ok(all(
                    requested,
                    Observed::with_reason(Phase::Error, format!("INVENTORY_HTTP_{status}")),
                ));
            }
            let entries = parse_inventory(&body)?;
            map_inventory(animator, requested, &entries)
        }
    }
}

/// What a probe of one dialect GETs, in order, on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The health check before the inventory (200 healthy, 503 loading; see `health`), if the
    /// dialect has one.
    pub health: Option<&'static str>,
    /// The OpenAI-shaped model list (`{"data": [{"id": …}, …]}`, with llama.cpp router-mode
    /// statuses when present).
    pub inventory: &'static str,
}

/// The probe plan of each dialect: the one place a dialect's probe is chosen. The `match` is
/// exhaustive: a new [`Dialect`] does not compile until it has its plan here.
pub const fn plan(dialect: Dialect) -> Plan {
    match dialect {
        Dialect::LlamaCpp => Plan {
            health: Some("/health"),
            inventory: "/v1/models",
        },
        Dialect::OpenaiModelsV1 => Plan {
            health: None,
            inventory: "/v1/models",
        },
    }
}

fn all(requested: &[&Capability], o: Observed) -> Vec<(String, Observed)> {
    requested
        .iter()
        .map(|c| (c.key_text.clone(), o.clone()))
        .collect()
}

enum Health {
    Ok,
    Other(Observed),
}

/// llama.cpp `/health`: 200 healthy, 503 loading the model, redirect refused, other statuses
/// are an ERROR observation of every requested key.
fn health(status: u16) -> Result<Health, String> {
    match status {
        200 => Ok(Health::Ok),
        503 => Ok(Health::Other(Observed::new(Phase::Warming))),
        300..=399 => Err("PROBE_REDIRECT_REFUSED".into()),
        s => Ok(Health::Other(Observed::with_reason(
            Phase::Error,
            format!("HEALTH_HTTP_{s}"),
        ))),
    }
}

/// One inventory entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Entry {
    pub id: String,
    #[serde(default)]
    pub status: Option<RouterStatus>,
}

/// llama.cpp router-mode status of one model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RouterStatus {
    pub value: String,
    #[serde(default)]
    pub failed: Option<bool>,
}

#[derive(Deserialize)]
struct Inventory {
    data: Vec<Entry>,
}

/// Parse an OpenAI-shaped model list (`{"data": [{"id": …}, …]}`); unknown fields ignored.
pub fn parse_inventory(body: &[u8]) -> Result<Vec<Entry>, String> {
    serde_json::from_slice::<Inventory>(body)
        .map(|i| i.data)
        .map_err(|_| "PROBE_MALFORMED".to_owned())
}

/// Map inventory entries to observations of the requested capabilities. An entry names a
/// capability by its runtime model name or by an alias the animator declares for it; entries
/// naming nothing requested are someone else's business and ignored.
pub fn map_inventory(
    animator: &Animator,
    requested: &[&Capability],
    entries: &[Entry],
) -> Result<Vec<(String, Observed)>, String> {
    let router = entries.iter().any(|e| e.status.is_some());
    if router && entries.iter().any(|e| e.status.is_none()) {
        return Err("PROBE_MALFORMED".into());
    }
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        let named = requested.iter().find(|c| {
            c.runtime_model == e.id
                || animator
                    .aliases
                    .get(&e.id)
                    .is_some_and(|m| *m == c.key.model_id)
        });
        let Some(cap) = named else { continue };
        let observed = match &e.status {
            None => Observed::new(Phase::Warm),
            Some(s) => router_phase(animator, s)?,
        };
        seen.insert(cap.key_text.as_str());
        out.push((cap.key_text.clone(), observed));
    }
    for c in requested {
        if !seen.contains(c.key_text.as_str()) {
            out.push((c.key_text.clone(), Observed::new(Phase::Cold)));
        }
    }
    Ok(out)
}

fn router_phase(animator: &Animator, s: &RouterStatus) -> Result<Observed, String> {
    Ok(match s.value.as_str() {
        "loaded" => Observed::new(Phase::Warm),
        "loading" | "downloading" => Observed::new(Phase::Warming),
        "unloaded" if s.failed == Some(true) => {
            Observed::with_reason(Phase::Error, "MODEL_LOAD_FAILED")
        }
        "unloaded" if animator.dynamic => Observed::new(Phase::Activatable),
        "unloaded" => Observed::new(Phase::Cold),
        // The supported profile disables engine idle sleep; a sleeping model breaks it.
        "sleeping" => Observed::with_reason(Phase::Error, "RUNTIME_SLEEPING"),
        _ => return Err("PROBE_MALFORMED".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::observation::validate_total;
    use crate::domain::registry::Registry;
    use crate::domain::registry::tests::{cap, soulstone};

    fn reg(dynamic: bool) -> Registry {
        let mut a = soulstone("a");
        a.dynamic = dynamic;
        a.aliases.insert("gpt-4o".into(), "m1".into());
        Registry::build(&[a], &[cap("a", "chat", "m1"), cap("a", "chat", "m2")]).expect("valid")
    }

    fn entry(id: &str, status: Option<(&str, Option<bool>)>) -> Entry {
        Entry {
            id: id.into(),
            status: status.map(|(v, f)| RouterStatus {
                value: v.into(),
                failed: f,
            }),
        }
    }

    fn run(
        r: &Registry,
        entries: &[Entry],
    ) -> Result<std::collections::BTreeMap<String, Observed>, String> {
        let a = r.animator("a").expect("a");
        let req: Vec<_> = r.capabilities().collect();
        let keys: Vec<String> = req.iter().map(|c| c.key_text.clone()).collect();
        let obs = map_inventory(a, &req, entries)?;
        validate_total(&keys, obs).map_err(|e| e.code().to_owned())
    }

    #[test]
    fn single_model_listed_is_warm_others_cold() {
        let r = reg(false);
        let got = run(&r, &[entry("m1", None), entry("someone-else", None)]).expect("ok");
        assert_eq!(got["a:chat:m1"].phase, Phase::Warm);
        assert_eq!(got["a:chat:m2"].phase, Phase::Cold);
        // An alias names its model.
        let got = run(&r, &[entry("gpt-4o", None)]).expect("ok");
        assert_eq!(got["a:chat:m1"].phase, Phase::Warm);
    }

    #[test]
    fn router_mode_observes_each_model() {
        let r = reg(true);
        let got = run(
            &r,
            &[
                entry("m1", Some(("loaded", None))),
                entry("m2", Some(("unloaded", None))),
            ],
        )
        .expect("ok");
        assert_eq!(got["a:chat:m1"].phase, Phase::Warm);
        assert_eq!(got["a:chat:m2"].phase, Phase::Activatable);
        let got = run(
            &r,
            &[
                entry("m1", Some(("loading", None))),
                entry("m2", Some(("unloaded", Some(true)))),
            ],
        )
        .expect("ok");
        assert_eq!(got["a:chat:m1"].phase, Phase::Warming);
        assert_eq!(
            got["a:chat:m2"],
            Observed::with_reason(Phase::Error, "MODEL_LOAD_FAILED")
        );
        let got = run(&r, &[entry("m1", Some(("sleeping", None)))]).expect("ok");
        assert_eq!(got["a:chat:m1"].reason, "RUNTIME_SLEEPING");
        assert_eq!(got["a:chat:m2"].phase, Phase::Cold);
        // Not dynamic: an unloaded model cannot be loaded by the running runtime.
        let got = run(&reg(false), &[entry("m2", Some(("unloaded", None)))]).expect("ok");
        assert_eq!(got["a:chat:m2"].phase, Phase::Cold);
    }

    #[test]
    fn duplicates_and_malformed_inventories_fail() {
        let r = reg(true);
        assert_eq!(
            run(&r, &[entry("m1", None), entry("m1", None)]),
            Err("PROBE_DUPLICATE_KEY".into())
        );
        // Model listed under its id and its alias: two entries for one key.
        assert_eq!(
            run(&r, &[entry("m1", None), entry("gpt-4o", None)]),
            Err("PROBE_DUPLICATE_KEY".into())
        );
        assert_eq!(
            run(
                &r,
                &[entry("m1", Some(("loaded", None))), entry("m2", None)]
            ),
            Err("PROBE_MALFORMED".into())
        );
        assert_eq!(
            run(&r, &[entry("m1", Some(("exploded", None)))]),
            Err("PROBE_MALFORMED".into())
        );
        assert!(parse_inventory(b"{\"data\": 3}").is_err());
        assert!(parse_inventory(b"not json").is_err());
        assert_eq!(
            parse_inventory(
                br#"{"object":"list","data":[{"id":"m","object":"model","meta":{"n":1}}]}"#
            ),
            Ok(vec![entry("m", None)])
        );
    }

    #[test]
    fn each_dialect_has_its_plan() {
        assert_eq!(
            plan(Dialect::LlamaCpp),
            Plan {
                health: Some("/health"),
                inventory: "/v1/models"
            }
        );
        assert_eq!(
            plan(Dialect::OpenaiModelsV1),
            Plan {
                health: None,
                inventory: "/v1/models"
            }
        );
    }

    #[test]
    fn health_statuses() {
        assert!(matches!(health(200), Ok(Health::Ok)));
        assert!(matches!(health(503), Ok(Health::Other(o)) if o.phase == Phase::Warming));
        assert!(matches!(health(500), Ok(Health::Other(o)) if o.reason == "HEALTH_HTTP_500"));
        assert_eq!(health(302).err().as_deref(), Some("PROBE_REDIRECT_REFUSED"));
    }
}
