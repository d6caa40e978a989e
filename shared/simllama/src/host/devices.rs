//! The simulated host's devices: capacities, what the running units on each hold, and the
//! control API's `/devices` calls (see the parent module).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use tokio::sync::Mutex;

use super::{Units, body_json};
use crate::json;

/// Device capacities by name, in MiB.
pub(super) type Devices = Arc<Mutex<BTreeMap<String, u64>>>;

/// Memory the running units on `device` hold, but `except`'s.
pub(super) async fn used_on(units: &Units, device: &str, except: &str) -> u64 {
    let mut used = 0;
    for (name, u) in units.iter() {
        if name == except {
            continue;
        }
        let u = u.lock().await;
        if u.device.as_deref() == Some(device) {
            used += u.holds();
        }
    }
    used
}

/// `GET /devices`, `PUT /devices/{name}`.
pub(super) async fn device_call(
    req: Request<Incoming>,
    units: &Units,
    devices: &Devices,
    path: &str,
) -> Response<Full<Bytes>> {
    if req.method() == Method::GET && path == "/devices" {
        let table = devices.lock().await.clone();
        let mut all = serde_json::Map::new();
        for (name, cap) in table {
            let used = used_on(units, &name, "").await;
            all.insert(
                name,
                serde_json::json!({ "memory_mib": cap, "used_mib": used }),
            );
        }
        return json(200, serde_json::json!({ "devices": all }).to_string());
    }
    let name = path.trim_start_matches("/devices/").to_owned();
    if req.method() != Method::PUT || name.is_empty() || name.contains('/') {
        return json(404, r#"{"error":"not found"}"#.into());
    }
    let Some(mib) = body_json(req)
        .await
        .and_then(|v| v.get("memory_mib").and_then(serde_json::Value::as_u64))
    else {
        return json(400, r#"{"error":"memory_mib missing"}"#.into());
    };
    devices.lock().await.insert(name, mib);
    json(200, r#"{}"#.into())
}
