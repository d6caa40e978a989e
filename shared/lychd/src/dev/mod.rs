//! `lychd dev`: the local stack. PostgreSQL ([`cluster`]), each office's configuration and
//! ports ([`configuration`]), Ward's bootstrap and who may do what ([`bootstrap`]), the offices
//! as supervised child processes ([`supervision`]) and what the operator is told
//! ([`summary`]); this module puts them in order.

mod bootstrap;
mod cluster;
mod configuration;
mod console;
mod summary;
mod supervision;
mod tls;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use lychd_runtime::Office;

use crate::DevArgs;
use cluster::Postgres;
use configuration::{
    Configs, DEV_ANIMATOR, DEV_DEVICE, DEV_GPUS, DEV_MODEL, DEV_PLACED, Layout, loopback_url,
};
use supervision::Supervised;

/// How long Ward has to serve after a start.
const WARD_START: Duration = Duration::from_secs(30);
/// How long the other offices have to serve (each first exchanges its credential with Ward).
const OFFICE_START: Duration = Duration::from_secs(45);
/// How many times the offices' ports are chosen when one is taken between choosing and binding.
const PORT_ATTEMPTS: u32 = 5;

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let bin_dir = supervision::office_bin_dir(args.no_build)?;
    let layout = Layout::new(&args.state_dir)?;
    layout.prepare()?;
    let postgres_tls = if args.tls {
        Some(tls::prepare(&layout.tls())?)
    } else {
        None
    };
    let postgres = Postgres::start(&layout.pg, args.ephemeral, args.pg_port, postgres_tls)?;
    let result = run_offices(&args, &bin_dir, &layout, &postgres).await;
    postgres.stop();
    result
}

async fn run_offices(
    args: &DevArgs,
    bin_dir: &Path,
    layout: &Layout,
    postgres: &Postgres,
) -> anyhow::Result<()> {
    postgres.provision(&layout.secrets).await?;
    // No model runtime runs on a developer's machine: a simulated host stands in — the
    // resident animator's llama.cpp runtime and a simulated GPU of animators in conflict, whose
    // units the Orchestrator's `simulated` actuator starts and stops — and the Dispatcher's real
    // probe observes them — and a second simulated GPU with a capacity, whose two animators
    // declare no conflict but do not fit together, so memory decides what stops. It is its own
    // child process (`lychd-simhost`), as a host would be: stopped with the stack, and gone by
    // itself when `lychd dev` is.
    let mut units: Vec<(&str, &[&str])> = vec![(DEV_ANIMATOR, &[DEV_MODEL][..])];
    for (name, model) in DEV_GPUS {
        units.push((name, std::slice::from_ref(model)));
    }
    for (name, model, _, _) in DEV_PLACED {
        units.push((name, std::slice::from_ref(model)));
    }
    let held: Vec<(&str, u64, &str)> = DEV_PLACED
        .iter()
        .map(|(name, _, _, holds)| (*name, *holds, DEV_DEVICE.0))
        .collect();
    let host = lychd_simllama::SimHostProcess::spawn_placed(
        &bin_dir.join(supervision::SIMHOST),
        &units,
        &[DEV_ANIMATOR, DEV_GPUS[0].0, DEV_PLACED[0].0],
        &[DEV_DEVICE],
        &held,
    )
    .await
    .context("start the simulated host (lychd-simhost)")?;
    let runtime_endpoint = host.endpoint(DEV_ANIMATOR).await;
    let mut gpus = Vec::new();
    for (name, _) in DEV_GPUS {
        gpus.push(host.endpoint(name).await);
    }
    let mut placed = Vec::new();
    for (name, _, _, _) in DEV_PLACED {
        placed.push(host.endpoint(name).await);
    }
    let host_control = host.control_endpoint();
    // Ports are chosen free, but another process (another stack) may take one before the
    // office binds it: the office then fails to start, and the ports are chosen again. Nothing
    // is published before every office serves on its own listener, identified by its instance
    // id (`supervision`), so the endpoints file never names a port of anyone else's.
    let mut attempt = 1;
    let (sets, metrics, mut offices) = loop {
        let sets = configuration::choose_ports(args.base_port, usize::from(args.replicas))?;
        let metrics = configuration::metrics_ports(&sets)?;
        let configs: Vec<Configs> = sets
            .iter()
            .zip(&metrics)
            .enumerate()
            .map(|(replica, (ports, metrics))| Configs {
                layout,
                ports,
                metrics,
                replica,
                pg_port: postgres.port(),
                runtime: &runtime_endpoint,
                gpus: &gpus,
                placed: &placed,
                host_control: &host_control,
            })
            .collect();
        let mut offices = Vec::new();
        let started = start_offices(&configs, bin_dir, layout, &mut offices).await;
        match started {
            Ok(()) => break (sets, metrics, offices),
            Err(e) => {
                supervision::stop_all(&mut offices).await;
                match e.downcast_ref::<supervision::PortTaken>() {
                    Some(taken) if attempt < PORT_ATTEMPTS => {
                        eprintln!("{taken}; choosing the offices' ports again");
                        attempt += 1;
                    }
                    _ => return Err(e),
                }
            }
        }
    };

    let ports = &sets[0];
    // The operators' console, a client like grpcurl: it runs once Ward serves, before the
    // endpoints file says the stack is up.
    let console = match console::Console::start(bin_dir, layout, args.base_port, ports).await {
        Ok(c) => c,
        Err(e) => {
            supervision::stop_all(&mut offices).await;
            host.stop().await;
            return Err(e);
        }
    };
    std::fs::write(&layout.replicas, configuration::replicas_json(&sets)?)?;
    std::fs::write(
        layout.metrics(),
        configuration::endpoints_json(&metrics[0])?,
    )?;
    std::fs::write(&layout.endpoints, configuration::endpoints_json(ports)?)?;
    print!(
        "{}",
        summary::summary(
            layout,
            ports,
            &runtime_endpoint,
            &host_control,
            configuration::OPERATOR_SESSION
        )
    );
    print!("{}", summary::console(layout, &console.url));
    print!("{}", summary::metrics(layout, &metrics[0]));

    if sets.len() > 1 {
        print!("{}", summary::replicas(&sets));
    }

    supervision::supervise(&mut offices).await;
    console.stop(layout).await;
    supervision::stop_all(&mut offices).await;
    host.stop().await;
    let _ = std::fs::remove_file(&layout.endpoints);
    let _ = std::fs::remove_file(&layout.replicas);
    let _ = std::fs::remove_file(layout.metrics());
    Ok(())
}

/// Write each office's configuration and migrate it, start Ward (bootstrapped once; the
/// operator's sessions and every principal enrolled), then the others, and wait until each
/// serves as itself; then every further replica (`configs[1..]`: the same database, roles and
/// credentials, its own port and log), once the first replicas serve — so the first
/// Orchestrator holds the host lease and the others are its standbys. The offices started so
/// far are in `offices`, also on error.
async fn start_offices(
    replicas: &[Configs<'_>],
    bin_dir: &Path,
    layout: &Layout,
    offices: &mut Vec<Supervised>,
) -> anyhow::Result<()> {
    let configs = &replicas[0];
    for office in Office::ALL {
        let supervised = Supervised::new(
            office,
            bin_dir.join(office.binary()),
            configs.write(office)?,
            layout.log(office),
            configs.ports[&office],
        );
        print!("{}", supervised.run_once("migrate").await?);
        offices.push(supervised);
    }

    // Ward first: bootstrap once, then it decides for everyone.
    let ward = supervision::find(offices, Office::Ward);
    bootstrap::bootstrap_ward(ward, layout).await?;
    ward.start(WARD_START).await?;
    let ward_channel = lychd_runtime::client::channel_tls(
        &loopback_url(configs.ports[&Office::Ward]),
        tls::client().as_ref(),
    )?;
    let ward_had_credential = layout.credential(Office::Ward).is_file();
    bootstrap::operator_session(ward_channel.clone(), layout).await?;
    bootstrap::enrol(ward_channel, layout).await?;
    if !ward_had_credential {
        // First start: Ward ran without a credential of its own; now it has one.
        configs.write(Office::Ward)?;
        supervision::find(offices, Office::Ward)
            .restart(WARD_START)
            .await?;
    }
    for o in offices.iter_mut().filter(|o| o.office != Office::Ward) {
        o.spawn()?;
    }
    for o in offices.iter_mut().filter(|o| o.office != Office::Ward) {
        o.wait_serving(OFFICE_START).await?;
    }
    let first = offices.len();
    for configs in &replicas[1..] {
        for office in Office::ALL {
            let mut replica = Supervised::new(
                office,
                bin_dir.join(office.binary()),
                configs.write(office)?,
                layout.replica_log(office, configs.replica),
                configs.ports[&office],
            )
            .with_replica(configs.replica);
            replica.spawn()?;
            offices.push(replica);
        }
    }
    for o in &mut offices[first..] {
        o.wait_serving(OFFICE_START).await?;
    }
    Ok(())
}
