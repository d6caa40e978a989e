//! Placement by memory over real processes (issue 25 points 3 and 4): three animators on one
//! simulated GPU and no declared conflict — memory, not `conflict_domains`, forces the
//! eviction; the plan weighs the callers' priorities; the footprint measured after WARM
//! replaces the declared estimate; a model that cannot fit beside a resident is declined with
//! nothing stopped; and the simulated host itself refuses a load past the
//! device's capacity, so the world the plan leaves is the only one that fits.

use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::preview_plan_response::Outcome;

use crate::common::{Decl, Stack, eventually, stack_actuated};

const DEVICE: &str = "gpu0";

/// a and b serve (declared 4,000 MiB each), c is down (declared 3,000; it really takes 5,000)
/// on one 10,000 MiB device.
async fn memory_stack() -> Stack {
    let decls = [
        Decl {
            name: "a",
            extra: "dedicated = true\ndevice = \"gpu0\"\nmemory_mib = 4000",
            serving: true,
        },
        Decl {
            name: "b",
            extra: "dedicated = true\ndevice = \"gpu0\"\nmemory_mib = 4000",
            serving: true,
        },
        Decl {
            name: "c",
            extra: "dedicated = true\ndevice = \"gpu0\"\nmemory_mib = 3000",
            serving: false,
        },
    ];
    let s = stack_actuated(&decls, "", |host, _| {
        format!(
            "[office.actuator]\nkind = \"simulated\"\nendpoint = \"{}\"\n\n[[office.devices]]\nname = \"{DEVICE}\"\nmemory_mib = 10000\n",
            host.control_endpoint()
        )
    })
    .await;
    s.host.set_device(DEVICE, 10_000).await;
    for (unit, mib) in [("a", 4000), ("b", 4000), ("c", 5000)] {
        s.host.set_memory(unit, mib, DEVICE).await;
    }
    s
}

async fn preview(s: &Stack, key: &str) -> Outcome {
    s.client
        .clone()
        .preview_plan(pb::PreviewPlanRequest {
            capability_key: key.into(),
        })
        .await
        .expect("preview")
        .into_inner()
        .outcome
        .expect("an outcome")
}

fn plan(o: Outcome) -> pb::Plan {
    match o {
        Outcome::Plan(p) => p,
        Outcome::Declined(d) => panic!("declined: {d:?}"),
    }
}

fn freed(m: &pb::MemoryArithmetic) -> Vec<(String, u64, String)> {
    m.freed
        .iter()
        .map(|f| (f.animator.clone(), f.mib, f.cause.clone()))
        .collect()
}

#[tokio::test]
async fn memory_not_a_declared_conflict_forces_the_eviction() {
    let s = memory_stack().await;
    let topology = s
        .client
        .clone()
        .get_topology(pb::GetTopologyRequest {})
        .await
        .expect("topology")
        .into_inner();
    assert!(topology.edges.is_empty(), "no declared conflict at all");

    // A caller at priority 50 uses a; nobody asked for b.
    let a = s.transition("a:chat:m", 50, None).await.expect("a warm");
    assert_eq!(a.phase, pb::TransitionPhase::Completed as i32);

    // 4,000 + 4,000 held, 3,000 needed, 10,000 on the device: one must stop, and it is b
    // (priority 0 before 50).
    let p = plan(preview(&s, "c:chat:m").await);
    assert_eq!(p.action, pb::PlanAction::HardSwap as i32);
    assert_eq!(p.evict, ["b"]);
    let m = p.memory.expect("the memory arithmetic");
    assert_eq!(
        (m.device.as_str(), m.capacity_mib, m.used_mib, m.needed_mib),
        (DEVICE, 10_000, 8_000, 3_000)
    );
    assert_eq!(m.needed_source, "DECLARED");
    assert_eq!(freed(&m), [("b".into(), 4000, "MEMORY".into())]);
    assert_eq!((m.freed_mib, m.free_after_mib), (4000, 3000));

    let c = s.transition("c:chat:m", 10, None).await.expect("c warm");
    assert_eq!(
        c.phase,
        pb::TransitionPhase::Completed as i32,
        "{}",
        c.detail
    );
    let kept = c
        .plan
        .expect("the plan it ran")
        .memory
        .expect("its arithmetic");
    assert_eq!(freed(&kept), [("b".into(), 4000, "MEMORY".into())]);
    assert!(s.host.ready("c").await && s.host.ready("a").await);
    assert!(!s.host.running("b").await, "b was evicted");
    // The host's own accounting: a 4,000 + c's real 5,000.
    assert_eq!(s.host.device_used(DEVICE).await, 9_000);

    // c is measured once WARM (5,000, not the declared 3,000). Bringing b back now needs
    // 4,000 of the 1,000 free: c (priority 10) stops before a (priority 50), and frees what
    // was measured.
    eventually("c's footprint measured", || async {
        let Outcome::Plan(p) = preview(&s, "b:chat:m").await else {
            return false;
        };
        p.memory
            .as_ref()
            .is_some_and(|m| freed(m) == [("c".into(), 5000, "MEMORY".into())])
    })
    .await;
    let p = plan(preview(&s, "b:chat:m").await);
    assert_eq!(p.evict, ["c"]);
    let m = p.memory.expect("arithmetic");
    assert_eq!(
        (m.used_mib, m.needed_mib, m.free_after_mib),
        (9_000, 4_000, 2_000)
    );
}

#[tokio::test]
async fn a_model_that_cannot_fit_is_declined_with_nothing_stopped() {
    // A resident holds 8,000 of 10,000 and is never evicted; even with a (4,000) stopped, c's
    // 3,000 do not fit.
    let decls = [
        Decl {
            name: "res",
            extra: "dedicated = true\nresident = true\ndevice = \"gpu0\"\nmemory_mib = 8000",
            serving: true,
        },
        Decl {
            name: "a",
            extra: "dedicated = true\ndevice = \"gpu0\"\nmemory_mib = 1000",
            serving: true,
        },
        Decl {
            name: "c",
            extra: "dedicated = true\ndevice = \"gpu0\"\nmemory_mib = 3000",
            serving: false,
        },
    ];
    let s = stack_actuated(&decls, "", |host, _| {
        format!(
            "[office.actuator]\nkind = \"simulated\"\nendpoint = \"{}\"\n\n[[office.devices]]\nname = \"{DEVICE}\"\nmemory_mib = 10000\n",
            host.control_endpoint()
        )
    })
    .await;
    let Outcome::Declined(d) = preview(&s, "c:chat:m").await else {
        panic!("a plan that overcommits the device");
    };
    assert_eq!(
        (d.code.as_str(), d.animator.as_str()),
        ("MEMORY_INSUFFICIENT", "c")
    );
    let m = d.memory.expect("the arithmetic");
    assert_eq!((m.used_mib, m.needed_mib), (9_000, 3_000));
    assert_eq!(
        freed(&m),
        [("a".into(), 1000, "MEMORY".into())],
        "never the resident"
    );
    assert!(m.free_after_mib < 0);
    let out = s
        .transition("c:chat:m", 90, None)
        .await
        .expect("an outcome");
    assert_eq!(out.phase, pb::TransitionPhase::DeclinedNoEffect as i32);
    assert_eq!(out.detail, "MEMORY_INSUFFICIENT");
    assert!(
        s.host.ready("a").await && s.host.ready("res").await,
        "nothing stopped"
    );
    assert_eq!(s.host.counts("a").await, (0, 0));
}
