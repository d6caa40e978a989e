//! Requests into validated commands: every bad field reported with a stable reason.

use super::*;

/// `LeaseRequest` → command.
pub fn lease_request(req: pb::LeaseRequest, ttl: &TtlPolicy) -> Decoded<LeaseCommand> {
    let mut v = Violations::new();
    let has_demand = req.demand.is_some();
    let d = match req.demand {
        Some(d) => d,
        None => {
            v.push("demand", DEMAND_MISSING, "is required");
            pb::Demand::default()
        }
    };
    let family = match family_from_pb(d.family) {
        Ok(f) => f,
        Err(()) => {
            v.push("demand.family", FAMILY_UNKNOWN, "unknown family value");
            None
        }
    };
    let key = if d.capability_key.is_empty() {
        None
    } else {
        match parse_v1(&d.capability_key) {
            Ok(k) => Some(k),
            Err(e) => {
                v.push(
                    "demand.capability_key",
                    CAPABILITY_KEY_MALFORMED,
                    e.describe(),
                );
                None
            }
        }
    };
    if has_demand && d.family == pb::Family::Unspecified as i32 && d.capability_key.is_empty() {
        v.push(
            "demand.family",
            DEMAND_UNDERSPECIFIED,
            "give a family or a capability_key",
        );
    }
    let model = if d.model_id.is_empty() {
        None
    } else {
        if let Err(e) = check_model(&d.model_id) {
            v.push("demand.model_id", MODEL_ID_INVALID, e);
        }
        Some(d.model_id.clone())
    };
    let mut modalities = BTreeSet::new();
    for (i, m) in d.input_modalities.iter().enumerate() {
        match modality_from_pb(*m) {
            Some(m) => {
                modalities.insert(m);
            }
            None => v.push(
                format!("demand.input_modalities[{i}]"),
                MODALITY_UNKNOWN,
                "unknown or unspecified input modality",
            ),
        }
    }
    label(&mut v, "holder", HOLDER_INVALID, &req.holder, 128, false);
    label(&mut v, "run_id", RUN_ID_INVALID, &req.run_id, 128, true);
    label(
        &mut v,
        "attempt_id",
        ATTEMPT_ID_INVALID,
        &req.attempt_id,
        128,
        true,
    );
    label(
        &mut v,
        "request_id",
        REQUEST_ID_INVALID,
        &req.request_id,
        128,
        true,
    );
    if let Err(e) = check_priority(req.priority) {
        v.push("priority", PRIORITY_OUT_OF_RANGE, e);
    }
    let ttl_seconds = match ttl.resolve(req.ttl_seconds) {
        Ok(t) => t,
        Err(e) => {
            v.push("ttl_seconds", TTL_OUT_OF_BOUNDS, e);
            0
        }
    };
    finish(v, || LeaseCommand {
        demand: Demand {
            family,
            key,
            model,
            modalities,
            tools_required: d.tools_required,
        },
        holder: req.holder,
        run_id: req.run_id,
        attempt_id: req.attempt_id,
        priority: req.priority,
        ttl_seconds,
        request_id: (!req.request_id.is_empty()).then_some(req.request_id),
    })
}

fn lease_id(v: &mut Violations, s: &str) -> Uuid {
    match Uuid::parse_str(s) {
        Ok(u) => u,
        Err(_) => {
            v.push("lease_id", LEASE_ID_MALFORMED, "must be a UUID");
            Uuid::nil()
        }
    }
}

/// `RenewLeaseRequest` → (id, holder, ttl).
pub fn renew_request(req: &pb::RenewLeaseRequest, ttl: &TtlPolicy) -> Decoded<(Uuid, String, u32)> {
    let mut v = Violations::new();
    let id = lease_id(&mut v, &req.lease_id);
    label(&mut v, "holder", HOLDER_INVALID, &req.holder, 128, false);
    let t = match ttl.resolve(req.ttl_seconds) {
        Ok(t) => t,
        Err(e) => {
            v.push("ttl_seconds", TTL_OUT_OF_BOUNDS, e);
            0
        }
    };
    finish(v, || (id, req.holder.clone(), t))
}

/// `ReleaseLeaseRequest` → (id, holder).
pub fn release_request(req: &pb::ReleaseLeaseRequest) -> Decoded<(Uuid, String)> {
    let mut v = Violations::new();
    let id = lease_id(&mut v, &req.lease_id);
    label(&mut v, "holder", HOLDER_INVALID, &req.holder, 128, false);
    finish(v, || (id, req.holder.clone()))
}

/// A list of animators longer than [`ANIMATORS_MAX`], refused as a whole.
fn too_many(v: &mut Violations, names: &[String]) -> bool {
    if names.len() <= ANIMATORS_MAX {
        return false;
    }
    v.push(
        "animators",
        ANIMATORS_TOO_MANY,
        format!("must name at most {ANIMATORS_MAX} animators"),
    );
    true
}

/// Declared, distinct animators (sorted), at most [`ANIMATORS_MAX`]. `allow_empty` for "all".
pub fn animators(reg: &Registry, names: &[String], allow_empty: bool) -> Decoded<Vec<String>> {
    let mut v = Violations::new();
    if too_many(&mut v, names) {
        return Err(v.into());
    }
    if names.is_empty() && !allow_empty {
        v.push("animators", ANIMATORS_EMPTY, "name at least one animator");
    }
    let mut seen = BTreeSet::new();
    for (i, n) in names.iter().enumerate() {
        let field = format!("animators[{i}]");
        if check_slug(n).is_err() {
            v.push(field, ANIMATOR_INVALID, "must be an animator name");
        } else if reg.animator(n).is_none() {
            v.push(field, ANIMATOR_UNKNOWN, "names no declared animator");
        } else if !seen.insert(n.clone()) {
            v.push(field, ANIMATOR_DUPLICATE, "named twice");
        }
    }
    finish(v, || seen.into_iter().collect())
}

/// `CloseAdmissionRequest` → (request id, animators, reason).
pub fn close_request(
    reg: &Registry,
    req: &pb::CloseAdmissionRequest,
) -> Decoded<(String, Vec<String>, String)> {
    let mut v = Violations::new();
    label(
        &mut v,
        "request_id",
        REQUEST_ID_INVALID,
        &req.request_id,
        128,
        false,
    );
    let names = match animators(reg, &req.animators, false) {
        Ok(n) => n,
        Err(DispatcherError::InvalidArgument(more)) => {
            v.extend(more);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    label(&mut v, "reason", REASON_INVALID, &req.reason, 256, false);
    finish(v, || (req.request_id.clone(), names, req.reason.clone()))
}

/// `AwaitDrainRequest` → (animators, wait in ms).
pub fn drain_request(
    reg: &Registry,
    req: &pb::AwaitDrainRequest,
    max_ms: u32,
) -> Decoded<(Vec<String>, u32)> {
    let mut v = Violations::new();
    let names = match animators(reg, &req.animators, false) {
        Ok(n) => n,
        Err(DispatcherError::InvalidArgument(more)) => {
            v.extend(more);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    if req.wait_ms > max_ms {
        v.push(
            "wait_ms",
            WAIT_OUT_OF_BOUNDS,
            format!("must be at most {max_ms}"),
        );
    }
    finish(v, || (names, req.wait_ms))
}

/// A `ListLeases` request, decoded.
#[derive(Debug, Clone)]
pub struct ListCommand {
    /// Distinct animator names (sorted): a filter, so declared or not.
    pub animators: Vec<String>,
    pub include_inactive: bool,
    pub after: Option<Cursor>,
    pub request_id: Option<String>,
}

/// `ListLeasesRequest` → command: each filter an animator name (at most [`ANIMATORS_MAX`]),
/// the page token, the request id.
pub fn list_request(req: &pb::ListLeasesRequest) -> Decoded<ListCommand> {
    let mut v = Violations::new();
    let mut names = BTreeSet::new();
    if !too_many(&mut v, &req.animators) {
        for (i, a) in req.animators.iter().enumerate() {
            if check_slug(a).is_err() {
                v.push(
                    format!("animators[{i}]"),
                    ANIMATOR_INVALID,
                    "must be an animator name",
                );
            } else {
                names.insert(a.clone());
            }
        }
    }
    let page = req.page.clone().unwrap_or_default();
    let after = match page_token(&page.page_token) {
        Ok(a) => a,
        Err(DispatcherError::InvalidArgument(more)) => {
            v.extend(more);
            None
        }
        Err(e) => return Err(e),
    };
    label(
        &mut v,
        "request_id",
        REQUEST_ID_INVALID,
        &req.request_id,
        128,
        true,
    );
    finish(v, || ListCommand {
        animators: names.into_iter().collect(),
        include_inactive: req.include_inactive,
        after,
        request_id: (!req.request_id.is_empty()).then(|| req.request_id.clone()),
    })
}

/// `GetLeaseRequest` → which lease.
pub fn get_request(req: &pb::GetLeaseRequest) -> Decoded<Lookup<'_>> {
    use pb::get_lease_request::Lookup as L;
    let mut v = Violations::new();
    let lookup = match &req.lookup {
        Some(L::LeaseId(id)) => Lookup::Id(lease_id(&mut v, id)),
        Some(L::RequestId(r)) => {
            label(&mut v, "request_id", REQUEST_ID_INVALID, r, 128, false);
            Lookup::Request(r)
        }
        None => {
            v.push(
                "lookup",
                LEASE_LOOKUP_MISSING,
                "give a lease_id or a request_id",
            );
            Lookup::Id(Uuid::nil())
        }
    };
    finish(v, || lookup)
}

/// A closure token.
pub fn closure_token(s: &str) -> Decoded<Uuid> {
    Uuid::parse_str(s).map_err(|_| {
        DispatcherError::invalid("closure_token", CLOSURE_TOKEN_MALFORMED, "must be a UUID")
    })
}

/// Page token: `<issued_at unix nanos>.<lease uuid>` (plain, exactly as issued).
impl paging::Key for Cursor {
    fn render(&self) -> String {
        format!("{}.{}", self.issued_at.unix_timestamp_nanos(), self.id)
    }

    fn parse(text: &str) -> Option<Self> {
        let (n, id) = text.split_once('.')?;
        let issued_at = OffsetDateTime::from_unix_timestamp_nanos(n.parse().ok()?).ok()?;
        Some(Cursor {
            issued_at,
            id: <Uuid as paging::Key>::parse(id)?,
        })
    }
}

/// The page of `ListLeases` after the cursor `s` names.
pub fn page_token(s: &str) -> Decoded<Option<Cursor>> {
    paging::Tokens::Plain.after(s).map_err(|_| {
        DispatcherError::invalid(
            "page.page_token",
            PAGE_TOKEN_INVALID,
            "not a token this office issued",
        )
    })
}
