//! The host path (spec §8): the host owns the contract, every owner record,
//! trust policy and the evaluation context; the adapter only maps. A mapping
//! reaches the reducer only as [`ReadyObservations`], which exist only for a
//! READY result: an adapter REJECT is terminal for that input and a HOLD is
//! not reduced either.

use super::sdk::{AdapterReason, Candidate, ContractCapability};
use super::{Adapter, MappingResult, MappingStatus};
use crate::reduce::{Axes, EvaluationInput, ReductionResult, reduce};
use crate::utf16::cmp_utf16;
use crate::validate::Channel;
use crate::value::{Map, Value};

/// The candidates of a READY mapping. Only [`MappingResult::into_ready`]
/// makes one.
#[derive(Debug, Clone)]
pub struct ReadyObservations {
    candidates: Vec<Candidate>,
}

impl ReadyObservations {
    /// The candidates.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }
}

impl MappingResult {
    /// The candidates of a READY result; a HOLD or REJECT result is handed
    /// back unchanged, candidates preserved.
    pub fn into_ready(self) -> Result<ReadyObservations, Box<MappingResult>> {
        if self.status() == MappingStatus::Ready {
            Ok(ReadyObservations {
                candidates: self.candidates,
            })
        } else {
            Err(Box::new(self))
        }
    }
}

/// Reduces the host's owner records plus READY candidates under the host's
/// context. The candidates are unverified observations: the reducer verifies
/// their schema and digest and classifies their producers by the host's
/// `trustedProducers`, as for any record.
pub fn reduce_ready(
    ready: &ReadyObservations,
    context: &Value,
    owner_records: &[Value],
) -> ReductionResult {
    reduce_candidates(&ready.candidates, context, owner_records)
}

fn reduce_candidates(
    candidates: &[Candidate],
    context: &Value,
    owner_records: &[Value],
) -> ReductionResult {
    let mut records: Vec<Value> = Vec::with_capacity(owner_records.len() + candidates.len());
    records.extend_from_slice(owner_records);
    records.extend(candidates.iter().map(|c| c.record().clone()));
    let mut m = Map::new();
    m.insert("protocolVersion", crate::PROTOCOL_VERSION.into());
    m.insert("context", context.clone());
    m.insert("records", Value::Array(records));
    reduce(&EvaluationInput::from_value(Value::Object(m)))
}

/// What the host did with one source.
#[derive(Debug, Clone)]
pub enum HostOutcome {
    /// The host's contract or reference did not validate: nothing was mapped.
    ContractRefused(Vec<AdapterReason>),
    /// The mapping is HOLD: not reduced.
    AdapterHold(MappingResult),
    /// The mapping is REJECT: terminal, not reduced; the candidates are kept.
    AdapterReject(MappingResult),
    /// The mapping was READY and the host reduced it.
    Reduced(Box<ReductionResult>, MappingResult),
}

/// Validates the host contract, maps `source`, and reduces only a READY
/// result.
pub fn evaluate(
    adapter: Adapter,
    contract: &Value,
    contract_ref: &Value,
    context: &Value,
    owner_records: &[Value],
    source: &Value,
) -> HostOutcome {
    let cap = match ContractCapability::validate(contract, contract_ref) {
        Ok(cap) => cap,
        Err(reasons) => return HostOutcome::ContractRefused(reasons),
    };
    let mapped = adapter.map(&cap, source);
    match mapped.status() {
        MappingStatus::Reject => HostOutcome::AdapterReject(mapped),
        MappingStatus::Hold => HostOutcome::AdapterHold(mapped),
        // READY only: the same check `into_ready` makes, without copying the candidates.
        MappingStatus::Ready => HostOutcome::Reduced(
            Box::new(reduce_candidates(
                mapped.candidates(),
                context,
                owner_records,
            )),
            mapped,
        ),
    }
}

/// The semantic view of an outcome: disposition, six axes and both channels.
/// A refused input (contract, HOLD or REJECT mapping) is not reduced, so its
/// axes are the reducer's unevaluated axes and its channels hold the adapter
/// and protocol codes of the refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semantic {
    /// `PASS`, `HOLD` or `REJECT`.
    pub disposition: &'static str,
    /// The six axes.
    pub axes: Axes,
    /// Reject channel, sorted.
    pub reject: Vec<String>,
    /// Hold channel, sorted.
    pub hold: Vec<String>,
}

fn refusal_codes(reasons: &[AdapterReason], channel: Channel) -> Vec<String> {
    let mut v: Vec<String> = reasons
        .iter()
        .filter(|r| r.channel() == channel)
        .flat_map(|r| {
            std::iter::once(r.adapter.as_str().to_owned())
                .chain(r.protocol.map(|p| p.as_str().to_owned()))
        })
        .collect();
    v.sort_by(|a, b| cmp_utf16(a, b));
    v.dedup();
    v
}

impl Semantic {
    /// The semantic view of a reduction.
    pub fn of_reduction(r: &ReductionResult) -> Semantic {
        Semantic {
            disposition: r.disposition.as_str(),
            axes: r.axes,
            reject: r.reject.iter().map(|c| c.as_str().to_owned()).collect(),
            hold: r.hold.iter().map(|c| c.as_str().to_owned()).collect(),
        }
    }
}

impl HostOutcome {
    /// The semantic view.
    pub fn semantic(&self) -> Semantic {
        let refused = |reasons: &[AdapterReason]| {
            let reject = refusal_codes(reasons, Channel::Reject);
            let hold = refusal_codes(reasons, Channel::Hold);
            Semantic {
                disposition: if reject.is_empty() { "HOLD" } else { "REJECT" },
                axes: Axes::UNEVALUATED,
                reject,
                hold,
            }
        };
        match self {
            HostOutcome::ContractRefused(r) => refused(r),
            HostOutcome::AdapterHold(m) | HostOutcome::AdapterReject(m) => refused(m.reasons()),
            HostOutcome::Reduced(r, _) => Semantic::of_reduction(r),
        }
    }

    /// The mapping result, when the contract validated.
    pub fn mapping(&self) -> Option<&MappingResult> {
        match self {
            HostOutcome::ContractRefused(_) => None,
            HostOutcome::AdapterHold(m) | HostOutcome::AdapterReject(m) => Some(m),
            HostOutcome::Reduced(_, m) => Some(m),
        }
    }

    /// The reduction, when there was one.
    pub fn reduction(&self) -> Option<&ReductionResult> {
        match self {
            HostOutcome::Reduced(r, _) => Some(r),
            _ => None,
        }
    }
}
