//! The stack in containers (issue 26, point 4): the image built from `deploy/Containerfile` as
//! shipped, PostgreSQL and every office started as containers with exactly the settings their
//! Quadlet units declare (each `[Container]` key translated to `podman run`; a key this test
//! does not know fails it), the provisioning and migration units run, Ward bootstrapped as
//! deploy/README.md says, every office waited for until healthy (its `HealthCmd`, what
//! `Notify=healthy` waits for), then flows 1 (warm grant) and 5 (memory) of the design brief
//! walked with grpcurl from the host through the loopback ports. Then the same flows against
//! `lychd dev`, for the ratio deploy/README.md reports.
//!
//! Where podman cannot run containers the test prints why and returns (skipped, never
//! silently); with `LYCHD_REQUIRE_PODMAN=1` (`.ci/run` sets it once podman runs) it fails
//! instead. Everything it creates carries a name unique to the run and is removed however the
//! test ends ([`Run`]'s `Drop`). Deviations from the units, each forced by the test's setting
//! (deploy/README.md, "Tests in containers"): host ports are free ports instead of 5005x
//! (tests pick free ports), `UserNS=keep-id` is dropped (rootful podman refuses it; it only
//! maps the rootless user), `Notify=healthy` and `HealthOnFailure=kill` are the test's own
//! wait on `podman healthcheck run` (podman 4.3 has neither), a `Tmpfs=` owned by the container's
//! user is given `U` (podman 4.3's tmpfs takes no `uid=`/`gid=`), secrets get a
//! `/run/secrets` tmpfs of their own (podman 4.3 with runc mounts them before the read-only
//! root's `/run` tmpfs), `Restart=` is
//! systemd's and not
//! applied, and the shipped animator `gpu0-qwen` is a simulated llama.cpp runtime on the host
//! side of the run's `lychd` network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use lychd_e2e::quadlet::{Unit, load};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repository root")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .output()
        .expect("run podman")
}

/// `podman …`, which must succeed; its stdout.
fn podman_ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(
        out.status.success(),
        "podman {}: {}{}",
        args.join(" "),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Why podman cannot run this test's containers here (None: it can).
fn podman_missing() -> Option<String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Some(
            "the test runs rootful podman (and builds the base images with debootstrap): run it as root"
                .into(),
        );
    }
    match Command::new("podman")
        .args(["info", "--format", "{{.Host.OCIRuntime.Name}}"])
        .output()
    {
        Err(e) => Some(format!(
            "podman not found ({e}); deploy/dev/podman-setup.sh installs it"
        )),
        Ok(o) if !o.status.success() => Some(format!("podman info fails: {}", text(&o.stderr))),
        Ok(_) => None,
    }
}

/// Everything one run created, removed however the test ends.
struct Run {
    id: String,
    containers: Vec<String>,
    secrets: Vec<String>,
    networks: Vec<String>,
    volumes: Vec<String>,
}

impl Run {
    fn name(&self, base: &str) -> String {
        format!("{}-{base}", self.id)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for c in self.containers.iter().rev() {
            let _ = podman(&["rm", "-f", "-t", "2", c]);
        }
        for s in &self.secrets {
            let _ = podman(&["secret", "rm", s]);
        }
        for v in &self.volumes {
            let _ = podman(&["volume", "rm", "-f", v]);
        }
        for n in &self.networks {
            let _ = podman(&["network", "rm", "-f", n]);
        }
    }
}

/// The services a unit needs started first (`Requires=`/`After=` of `.service` names), as
/// unit file names.
fn dependencies(unit: &Unit) -> BTreeSet<String> {
    unit.list("Unit", "Requires")
        .into_iter()
        .chain(unit.list("Unit", "After"))
        .filter_map(|s| s.strip_suffix(".service"))
        .map(|s| format!("{s}.container"))
        .collect()
}

/// The container units in an order that starts every dependency first.
fn start_order(units: &BTreeMap<String, Unit>) -> Vec<String> {
    let mut done: Vec<String> = Vec::new();
    let containers: Vec<&String> = units.keys().filter(|n| n.ends_with(".container")).collect();
    while done.len() < containers.len() {
        let before = done.len();
        for name in &containers {
            if done.contains(name) {
                continue;
            }
            let deps = dependencies(&units[*name]);
            if deps.iter().all(|d| done.contains(d)) {
                done.push((*name).clone());
            }
        }
        assert!(done.len() > before, "the units' dependencies form a cycle");
    }
    done
}

/// What the translation needs to know about the run.
struct Ctx<'a> {
    run: &'a Run,
    units: &'a BTreeMap<String, Unit>,
    /// Where `/etc/lychd/<file>` comes from.
    config_dir: PathBuf,
    /// Extra `--add-host` entries (the simulated animator runtime).
    hosts: Vec<String>,
}

/// A unit's `[Container]` as `podman run` arguments (without `run` and `-d`), and the host
/// ports chosen for its `PublishPort=`s (container port → host port).
fn run_args(ctx: &Ctx, unit_name: &str) -> (Vec<String>, BTreeMap<u16, u16>) {
    let unit = &ctx.units[unit_name];
    let c = unit
        .sections
        .get("Container")
        .unwrap_or_else(|| panic!("{unit_name}: no [Container]"));
    let mut args: Vec<String> = Vec::new();
    let mut ports = BTreeMap::new();
    let one = |key: &str| unit.one("Container", key).map(str::to_owned);
    let name = one("ContainerName").unwrap_or_else(|| panic!("{unit_name}: ContainerName="));
    args.extend(["--name".into(), ctx.run.name(&name)]);
    let mut health = Vec::new();
    for (key, values) in c {
        for value in values {
            match key.as_str() {
                "Image" | "ContainerName" | "Exec" => {}
                "User" => args.extend(["--user".into(), value.clone()]),
                "ReadOnly" => args.push(format!("--read-only={value}")),
                "NoNewPrivileges" => {
                    if value == "true" {
                        args.extend(["--security-opt".into(), "no-new-privileges".into()]);
                    }
                }
                "DropCapability" => args.extend(["--cap-drop".into(), value.clone()]),
                "AddCapability" => args.extend(["--cap-add".into(), value.clone()]),
                "Environment" => args.extend(["--env".into(), value.clone()]),
                "Tmpfs" => args.extend([
                    "--tmpfs".into(),
                    tmpfs(value, unit.one("Container", "User")),
                ]),
                "Network" => {
                    let file = value.as_str();
                    let net = ctx
                        .units
                        .get(file)
                        .unwrap_or_else(|| panic!("{unit_name}: Network={file} has no unit"));
                    let base = net
                        .one("Network", "NetworkName")
                        .unwrap_or_else(|| panic!("{file}: NetworkName="));
                    args.extend(["--network".into(), ctx.run.name(base)]);
                }
                "Volume" => {
                    let (source, rest) = value.split_once(':').expect("Volume=source:target");
                    let source = if let Some(vol) = source.strip_suffix(".volume") {
                        let v = &ctx.units[&format!("{vol}.volume")];
                        let base = v.one("Volume", "VolumeName").expect("VolumeName=");
                        ctx.run.name(base)
                    } else if let Some(file) = source.strip_prefix("/etc/lychd/") {
                        ctx.config_dir.join(file).display().to_string()
                    } else {
                        panic!("{unit_name}: Volume={value}: a source this test cannot provide")
                    };
                    args.extend(["--volume".into(), format!("{source}:{rest}")]);
                }
                "Secret" => {
                    let (secret, opts) = value.split_once(',').unwrap_or((value, ""));
                    let mut spec = format!("{},target={secret}", ctx.run.name(secret));
                    if !opts.is_empty() {
                        spec.push(',');
                        spec.push_str(opts);
                    }
                    args.extend(["--secret".into(), spec]);
                }
                "PublishPort" => {
                    let parts: Vec<&str> = value.split(':').collect();
                    let [ip, _host, container] = parts[..] else {
                        panic!("{unit_name}: PublishPort={value}: ip:host:container")
                    };
                    let container: u16 = container.parse().expect("container port");
                    let host = lychd_pg::free_port().expect("free port");
                    ports.insert(container, host);
                    args.extend(["--publish".into(), format!("{ip}:{host}:{container}")]);
                }
                "HealthCmd" => args.extend(["--health-cmd".into(), value.clone()]),
                "HealthInterval" => health.push(format!("--health-interval={value}")),
                "HealthRetries" => health.push(format!("--health-retries={value}")),
                "HealthStartPeriod" => health.push(format!("--health-start-period={value}")),
                "HealthOnFailure" => health.push(format!("--health-on-failure={value}")),
                "StopTimeout" => args.push(format!("--stop-timeout={value}")),
                // Rootful podman refuses keep-id (it maps the rootless user to the container's).
                "UserNS" => assert!(value.starts_with("keep-id"), "{unit_name}: UserNS={value}"),
                // The test waits for healthy itself (podman 4.3 has no --sdnotify=healthy).
                "Notify" => assert_eq!(value, "healthy", "{unit_name}: Notify="),
                other => panic!("{unit_name}: [Container] {other}= is not translated by this test"),
            }
        }
    }
    args.extend(health);
    // Podman 4.3 with runc mounts the secrets before the read-only root's /run tmpfs, onto the
    // read-only root, and fails: a tmpfs of their own first (podman 5 needs none; /run is a
    // tmpfs either way).
    if unit.one("Container", "ReadOnly") == Some("true")
        && !unit.all("Container", "Secret").is_empty()
    {
        args.extend(["--tmpfs".into(), "/run/secrets:rw,mode=0755".into()]);
    }
    for h in &ctx.hosts {
        args.extend(["--add-host".into(), h.clone()]);
    }
    // The container's name as its units and configurations know it (peers, database host).
    args.extend(["--network-alias".into(), name]);
    args.push(one("Image").unwrap_or_else(|| panic!("{unit_name}: Image=")));
    if let Some(exec) = one("Exec") {
        args.extend(exec.split_whitespace().map(str::to_owned));
    }
    (args, ports)
}

/// A `Tmpfs=` for podman 4.3, whose tmpfs takes no `uid=`/`gid=` (podman 5 does): owned by
/// the container's user instead (`U`), which must be that same user.
fn tmpfs(value: &str, user: Option<&str>) -> String {
    let (path, opts) = value.split_once(':').unwrap_or((value, ""));
    let opts: Vec<&str> = opts.split(',').filter(|o| !o.is_empty()).collect();
    let uid = opts.iter().find_map(|o| o.strip_prefix("uid="));
    let gid = opts.iter().find_map(|o| o.strip_prefix("gid="));
    if uid.is_none() && gid.is_none() {
        return value.to_owned();
    }
    assert_eq!(
        Some(format!("{}:{}", uid.unwrap_or("0"), gid.unwrap_or("0")).as_str()),
        user,
        "Tmpfs={value}: owned by the container's User= (the only owner podman 4.3 can give it)"
    );
    let mut kept: Vec<&str> = opts
        .into_iter()
        .filter(|o| !o.starts_with("uid=") && !o.starts_with("gid="))
        .collect();
    kept.push("U");
    format!("{path}:{}", kept.join(","))
}

/// Wait until `container` is healthy by its `HealthCmd` (what `Notify=healthy` waits for),
/// within the unit's `TimeoutStartSec`.
fn wait_healthy(container: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let out = podman(&["healthcheck", "run", container]);
        if out.status.success() {
            return;
        }
        let state = podman_ok(&["inspect", "--format", "{{.State.Status}}", container]);
        if state.trim() != "running" || Instant::now() > deadline {
            let logs = podman(&["logs", container]);
            panic!(
                "{container} not healthy ({}): {}{}\nlogs:\n{}{}",
                state.trim(),
                text(&out.stdout),
                text(&out.stderr),
                text(&logs.stdout),
                text(&logs.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn timeout_start(unit: &Unit) -> Duration {
    Duration::from_secs(
        unit.one("Service", "TimeoutStartSec")
            .and_then(|s| s.parse().ok())
            .unwrap_or(90),
    )
}

/// Start one unit: a one-shot runs to completion (and must succeed), a service is started and
/// waited for until healthy.
fn start_unit(ctx: &Ctx, unit_name: &str, ports: &mut BTreeMap<String, u16>) {
    let (args, published) = run_args(ctx, unit_name);
    let unit = &ctx.units[unit_name];
    let name = ctx
        .run
        .name(unit.one("Container", "ContainerName").expect("name"));
    let oneshot = unit.one("Service", "Type") == Some("oneshot");
    let mut cmd: Vec<&str> = vec!["run"];
    if !oneshot {
        cmd.push("-d");
    }
    cmd.extend(args.iter().map(String::as_str));
    let timeout = timeout_start(unit);
    let out = podman(&cmd);
    assert!(
        out.status.success(),
        "{unit_name}: podman {}: {}{}",
        cmd.join(" "),
        text(&out.stdout),
        text(&out.stderr)
    );
    if !oneshot {
        if unit.one("Container", "HealthCmd").is_some() {
            wait_healthy(&name, timeout);
        }
        let base = unit.one("Container", "ContainerName").expect("name");
        // The service's own port: the lowest published (an office's metrics endpoint is its
        // port + 1000).
        if let Some(host) = published.values().next() {
            ports.insert(base.to_owned(), *host);
        }
    }
}

/// `lychd provision …` in the image, as deploy/README.md runs it (rootful here: the secrets
/// directory belongs to the image's user instead of `--userns=keep-id`).
fn provision_in_image(run: &Run, secrets: &Path, extra: &[&str], command: &[&str]) {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--rm".into(),
        "--name".into(),
        run.name("lychd-provision-cli"),
        "--user".into(),
        "10001:10001".into(),
        "--volume".into(),
        format!("{}:/secrets:rw,Z", secrets.display()),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push(IMAGE.into());
    args.push("lychd".into());
    args.extend(command.iter().map(|s| (*s).to_owned()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    podman_ok(&refs);
}

const IMAGE: &str = "localhost/lychd:latest";

/// Where the image build keeps its release outputs: `LYCHD_IMAGE_CACHE`, else the user's cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache`, then `lychd/image-build`) — per machine, outside
/// the checkout, so a fresh clone (CI's) pays the cold release build only once per machine.
fn image_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("LYCHD_IMAGE_CACHE") {
        return PathBuf::from(dir);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("lychd").join("image-build"))
        .unwrap_or_else(|| lychd_testkit::target_dir().join("lychd-image-cache"))
}

/// Build the image from the shipped Containerfile; the cargo registry and the release build's
/// intermediate outputs are mounted from caches (the Containerfile is unchanged: its
/// `cargo build` finds them and rebuilds only what changed).
fn build_image() -> Duration {
    let cache = image_cache();
    let registry = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME")
        .join("registry");
    let mut mounts = vec![format!(
        "{}:/usr/local/cargo/registry:rw",
        registry.display()
    )];
    for (dir, at) in [
        ("deps", "deps"),
        ("build", "build"),
        ("fingerprint", ".fingerprint"),
    ] {
        let host = cache.join(dir);
        std::fs::create_dir_all(&host).expect("image cache dir");
        mounts.push(format!("{}:/src/target/release/{at}:rw", host.display()));
    }
    let previous = podman(&["image", "inspect", "--format", "{{.Id}}", IMAGE]);
    let started = Instant::now();
    let mut cmd = Command::new("podman");
    // No layer cache: the cargo caches above make a rebuild quick, and a cached build stage
    // would leave a >1 GB image behind at every changed context.
    cmd.args([
        "build",
        "--layers=false",
        "-f",
        "deploy/Containerfile",
        "-t",
        IMAGE,
    ]);
    for m in &mounts {
        cmd.args(["-v", m]);
    }
    let out = cmd
        .arg(".")
        .current_dir(repo())
        .output()
        .expect("podman build");
    assert!(
        out.status.success(),
        "podman build: {}",
        text(&out.stderr)
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let built = started.elapsed();
    // The image this build replaced under the tag is no one's any more (it stays if in use).
    let previous = text(&previous.stdout);
    let now = podman_ok(&["image", "inspect", "--format", "{{.Id}}", IMAGE]);
    if !previous.trim().is_empty() && previous.trim() != now.trim() {
        let _ = podman(&["rmi", previous.trim()]);
    }
    built
}

fn grpcurl(args: &[&str]) -> Output {
    Command::new(lychd_testkit::grpcurl())
        .args(args)
        .output()
        .expect("run grpcurl")
}

/// An office as grpcurl reaches it: its address, and over TLS the CA that verifies it (the
/// containers serve TLS as shipped; `lychd dev` serves plaintext on loopback).
struct Target {
    addr: String,
    ca: Option<PathBuf>,
}

impl Target {
    fn grpcurl(&self, bearer: &str, body: &str, method: &str) -> Output {
        let ca = self.ca.as_ref().map(|p| p.display().to_string());
        let mut args = match &ca {
            Some(ca) => vec!["-cacert", ca.as_str()],
            None => vec!["-plaintext"],
        };
        args.extend(["-H", bearer, "-d", body, &self.addr, method]);
        grpcurl(&args)
    }
}

fn call(target: &Target, token: &str, method: &str, body: &str) -> serde_json::Value {
    let bearer = format!("authorization: Bearer {token}");
    let out = target.grpcurl(&bearer, body, method);
    assert!(
        out.status.success(),
        "{method}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON")
}

/// Flow 1 (warm grant): the capability is listed, a lease for its model is granted with the
/// runtime's route (retried while the Dispatcher's first probe has not seen it WARM yet), the
/// lease is listed, then released.
fn warm_grant(dispatcher: &Target, token: &str, key: &str, model: &str, route: &str) {
    let caps = call(
        dispatcher,
        token,
        "lychd.dispatcher.v1.Dispatcher/ListCapabilities",
        "{}",
    );
    assert!(caps.to_string().contains(key), "{key} listed: {caps}");
    let demand = format!(
        r#"{{"demand": {{"family": "FAMILY_CHAT", "model_id": "{model}"}}, "holder": "operator"}}"#
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let answer = call(
            dispatcher,
            token,
            "lychd.dispatcher.v1.Dispatcher/Lease",
            &demand,
        );
        if answer.get("granted").is_some() || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let grant = &answer["granted"];
    assert_eq!(grant["capabilityKey"], key, "{answer}");
    assert!(
        grant["route"]["endpoint"]
            .as_str()
            .is_some_and(|e| e.starts_with(route)),
        "{answer}"
    );
    let lease_id = grant["leaseId"].as_str().expect("lease id");
    let listed = call(
        dispatcher,
        token,
        "lychd.dispatcher.v1.Dispatcher/ListLeases",
        "{}",
    );
    assert!(listed.to_string().contains(lease_id), "{listed}");
    let released = call(
        dispatcher,
        token,
        "lychd.dispatcher.v1.Dispatcher/ReleaseLease",
        &format!(r#"{{"lease_id": "{lease_id}", "holder": "operator"}}"#),
    );
    assert_eq!(released["lease"]["leaseId"], lease_id, "{released}");
}

/// Flow 5 (memory): the walk of docs/archive.md, as written there (intake → promote → recall
/// with receipt → revoke → the receipt's resolution refuses).
fn memory(archive: &Target, token: &str) {
    let doc = std::fs::read_to_string(repo().join("docs/archive.md")).expect("docs/archive.md");
    let block = doc
        .split("<!-- archive-walk -->\n```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the walk's command block");
    let bearer = format!("authorization: Bearer {token}");
    let mut revision = String::new();
    let mut states = Vec::new();
    for line in block.lines().filter(|l| l.starts_with("grpcurl ")) {
        let body = line
            .split_once("-d '")
            .and_then(|(_, rest)| rest.rsplit_once("' \"$ARCHIVE\""))
            .map(|(body, _)| body.replace("'$REVISION'", &revision))
            .expect("-d '<body>' \"$ARCHIVE\"");
        let method = line.rsplit(' ').next().expect("method");
        let out = archive.grpcurl(&bearer, &body, method);
        if method.ends_with("/ResolveReceipt") {
            let err = text(&out.stderr);
            assert!(
                !out.status.success() && err.contains("RECEIPT_NOTE_REVOKED"),
                "resolving after revoke refuses: {err}"
            );
            states.push("refused".to_owned());
            continue;
        }
        assert!(
            out.status.success(),
            "{method}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        if method.ends_with("/Intake") {
            revision = answer["note"]["revisionId"]
                .as_str()
                .expect("revision")
                .to_owned();
        }
        if method.ends_with("/Recall") {
            assert_eq!(answer["notes"][0]["note"]["revisionId"], revision.as_str());
            assert!(answer["receipt"]["receiptId"].is_string(), "{answer}");
            states.push("recalled".to_owned());
        } else {
            states.push(answer["note"]["state"].as_str().unwrap_or("?").to_owned());
        }
    }
    assert_eq!(
        states,
        [
            "LIFECYCLE_STATE_CANDIDATE",
            "LIFECYCLE_STATE_PROMOTED",
            "recalled",
            "LIFECYCLE_STATE_REVOKED",
            "refused"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_runs_in_containers_as_its_units_declare_and_walks_flows_1_and_5() {
    if let Some(why) = podman_missing() {
        assert!(
            std::env::var("LYCHD_REQUIRE_PODMAN").as_deref() != Ok("1"),
            "LYCHD_REQUIRE_PODMAN=1 but {why}"
        );
        eprintln!("SKIPPED the stack in containers: podman cannot run containers here: {why}");
        return;
    }
    let script = repo().join("deploy/dev/base-images.sh");
    let out = Command::new(&script).output().expect("base-images.sh");
    assert!(
        out.status.success(),
        "deploy/dev/base-images.sh: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    let build = build_image();
    let size: u64 = podman_ok(&["image", "inspect", "--format", "{{.Size}}", IMAGE])
        .trim()
        .parse()
        .expect("image size");

    let mut problems = Vec::new();
    let units = load(&repo().join("deploy/quadlet"), &mut problems);
    assert!(problems.is_empty(), "{problems:?}");

    let cold = Instant::now();
    let mut run = Run {
        id: format!("lt{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
        containers: Vec::new(),
        secrets: Vec::new(),
        networks: Vec::new(),
        volumes: Vec::new(),
    };
    // Networks and volumes as their units declare them.
    for (name, unit) in &units {
        if name.ends_with(".network") {
            let net = run.name(unit.one("Network", "NetworkName").expect("NetworkName="));
            let mut args = vec!["network", "create"];
            if unit.one("Network", "Internal") == Some("true") {
                args.push("--internal");
            }
            args.push(&net);
            podman_ok(&args);
            run.networks.push(net);
        } else if name.ends_with(".volume") {
            let vol = run.name(unit.one("Volume", "VolumeName").expect("VolumeName="));
            podman_ok(&["volume", "create", &vol]);
            run.volumes.push(vol);
        }
    }
    // The register of containers: every container unit's name, before any starts.
    for name in units.keys().filter(|n| n.ends_with(".container")) {
        let base = units[name].one("Container", "ContainerName").expect("name");
        run.containers.push(run.name(base));
    }
    run.containers.push(run.name("lychd-provision-cli"));

    // The animator runtime the shipped Dispatcher configuration names (`gpu0-qwen` at
    // http://lychd-gpu0-qwen:8080), simulated on the host side of the run's outside network.
    let outside = run.name("lychd");
    let gateway = podman_ok(&[
        "network",
        "inspect",
        &outside,
        "--format",
        "{{range .Subnets}}{{.Gateway}}{{end}}",
    ]);
    let gateway: std::net::IpAddr = gateway.trim().parse().expect("gateway address");

    // Secrets: the role passwords (`lychd provision secrets`), each a Podman secret.
    let secrets = tempfile::tempdir().expect("secrets dir");
    let chown = |path: &Path| {
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(10001)),
            Some(nix::unistd::Gid::from_raw(10001)),
        )
        .expect("chown the secrets dir to the image's user");
    };
    chown(secrets.path());
    provision_in_image(
        &run,
        secrets.path(),
        &[],
        &["provision", "secrets", "--dir", "/secrets"],
    );
    let create_secrets = |run: &mut Run, suffix: &str| {
        for entry in std::fs::read_dir(secrets.path()).expect("secrets") {
            let file = entry.expect("entry").path();
            let base = file
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            if !base.ends_with(suffix) || base == "lychd-operator-credential" {
                continue;
            }
            let name = run.name(&base);
            podman_ok(&["secret", "create", &name, &file.display().to_string()]);
            run.secrets.push(name);
        }
    };
    create_secrets(&mut run, "-password");
    // TLS (deploy/README.md, step 0): a CA, a certificate per office naming
    // `<office>.lychd.internal` and `lychd-<office>` (and loopback, for grpcurl from the host),
    // one for PostgreSQL naming `lychd-postgres`; each a Podman secret.
    let tls = tempfile::tempdir().expect("tls dir");
    let ca = lychd_runtime::devca::DevCa::new("lychd stack test CA").expect("CA");
    let ca_file = ca.write_ca(tls.path()).expect("write CA");
    let tls_secret = |run: &mut Run, name: &str, file: &Path| {
        let name = run.name(name);
        podman_ok(&["secret", "create", &name, &file.display().to_string()]);
        run.secrets.push(name);
    };
    tls_secret(&mut run, "lychd-tls-ca", &ca_file);
    let mut issued = Vec::new();
    for office in lychd_runtime::Office::ALL {
        let host = format!("lychd-{}", office.name());
        let cert = ca
            .issue_office(office, &[host])
            .expect("office certificate");
        issued.push((office.name().to_owned(), cert));
    }
    let now = time::OffsetDateTime::now_utc();
    let postgres = ca
        .issue_for(
            &["lychd-postgres".to_owned()],
            now - time::Duration::hours(1),
            now + time::Duration::days(1),
        )
        .expect("PostgreSQL certificate");
    issued.push(("postgres".to_owned(), postgres));
    for (name, cert) in &issued {
        let files = cert.write(tls.path(), name).expect("write certificate");
        tls_secret(
            &mut run,
            &format!("lychd-{name}-tls-cert"),
            &files.cert_file,
        );
        tls_secret(&mut run, &format!("lychd-{name}-tls-key"), &files.key_file);
    }

    let order = start_order(&units);
    let (first, offices): (Vec<String>, Vec<String>) = order.iter().cloned().partition(|n| {
        n == "lychd-postgres.container"
            || n == "lychd-provision.container"
            || n.ends_with("-migrate.container")
    });
    let mut ports = BTreeMap::new();
    let ctx = Ctx {
        run: &run,
        units: &units,
        config_dir: repo().join("deploy/config"),
        hosts: vec![format!("lychd-gpu0-qwen:{gateway}")],
    };
    // PostgreSQL, provisioning and every office's migrations.
    for unit in &first {
        start_unit(&ctx, unit, &mut ports);
    }
    // Ward's bootstrap (deploy/README.md, "Create the secrets and bootstrap").
    let internal = run.name("lychd-internal");
    let ward_pw = format!(
        "{},type=mount,target=lychd-ward-app-password,uid=10001",
        run.name("lychd-ward-app-password")
    );
    let ca_secret = format!(
        "{},type=mount,target=lychd-tls-ca,uid=10001",
        run.name("lychd-tls-ca")
    );
    let ward_toml = format!(
        "{}:/etc/lychd/ward.toml:ro,Z",
        repo().join("deploy/config/ward.toml").display()
    );
    provision_in_image(
        &run,
        secrets.path(),
        &[
            "--network",
            &internal,
            "--secret",
            &ward_pw,
            "--secret",
            &ca_secret,
            "--volume",
            &ward_toml,
        ],
        &[
            "provision",
            "bootstrap",
            "--config",
            "/etc/lychd/ward.toml",
            "--secrets-dir",
            "/secrets",
        ],
    );
    create_secrets(&mut run, "-credential");
    let ctx = Ctx {
        run: &run,
        units: &units,
        config_dir: repo().join("deploy/config"),
        hosts: vec![format!("lychd-gpu0-qwen:{gateway}")],
    };
    let mut runtime = None;
    for unit in &offices {
        start_unit(&ctx, unit, &mut ports);
        // The network's bridge (and the gateway address) exists once a container joined it.
        if runtime.is_none() {
            let sim = lychd_testkit::simllama::SimLlama::start_on((gateway, 8080).into()).await;
            sim.set_models(vec![lychd_testkit::simllama::SimModel::served(
                "Qwen3-8B-Q4_K_M.gguf",
            )]);
            runtime = Some(sim);
        }
    }
    let cold_start = cold.elapsed();
    let credential = std::fs::read_to_string(secrets.path().join("lychd-operator-credential"))
        .expect("operator credential")
        .trim()
        .to_owned();

    // Every office is reachable from the host on loopback only, and serving.
    let offices_up: Vec<&String> = ports.keys().collect();
    assert_eq!(
        offices_up,
        [
            "lychd-archive",
            "lychd-console",
            "lychd-dispatcher",
            "lychd-helmloop",
            "lychd-orchestrator",
            "lychd-runner",
            "lychd-ward"
        ]
    );
    let addr = |office: &str| format!("127.0.0.1:{}", ports[office]);
    let at = |office: &str| Target {
        addr: addr(office),
        ca: Some(ca_file.clone()),
    };
    // The console (a client of the offices, no authority of its own) answers its sign-in page.
    {
        use std::io::{Read as _, Write as _};
        let mut c = std::net::TcpStream::connect(addr("lychd-console")).expect("console");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        c.write_all(b"GET /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .expect("request");
        let mut page = String::new();
        c.read_to_string(&mut page).expect("response");
        assert!(
            page.starts_with("HTTP/1.1 200"),
            "console sign-in: {}",
            &page[..page.len().min(200)]
        );
    }
    let flows = Instant::now();
    // The operator's sessions, one per office (docs/operations.md, "Bootstrap").
    let session = |office: &str| {
        let answer = call(
            &at("lychd-ward"),
            &credential,
            "lychd.ward.v1.Ward/ExchangeCredential",
            &format!(r#"{{"ttl_seconds": 3600, "audiences": ["{office}"]}}"#),
        );
        answer["sessionToken"]
            .as_str()
            .expect("session token")
            .to_owned()
    };
    warm_grant(
        &at("lychd-dispatcher"),
        &session("dispatcher"),
        "gpu0-qwen:chat:qwen3-8b-q4-k-m",
        "qwen3-8b-q4-k-m",
        "http://lychd-gpu0-qwen:8080",
    );
    memory(&at("lychd-archive"), &session("archive"));
    let flows_containers = flows.elapsed();

    // Each container runs as its unit says (read back from podman, not from the arguments).
    for unit in order.iter().filter(|n| !n.ends_with("-migrate.container")) {
        let u = &units[unit];
        if u.one("Service", "Type") == Some("oneshot") {
            continue;
        }
        let name = run.name(u.one("Container", "ContainerName").expect("name"));
        let seen = podman_ok(&[
            "inspect",
            "--format",
            "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.SecurityOpt}} {{len .EffectiveCaps}}",
            &name,
        ]);
        let want_user = u.one("Container", "User").expect("User=");
        assert_eq!(
            seen.trim(),
            format!("{want_user} true [no-new-privileges] 0"),
            "{name}"
        );
    }
    drop(ctx);
    drop(run);

    // The same flows against `lychd dev`.
    let (dev_cold, flows_dev) = dev_flows().await;
    let report = format!(
        "image {size} bytes, built in {:.0} s; containers: cold start {:.1} s, flows 1+5 {:.2} s; \
         lychd dev: cold start {:.1} s, flows 1+5 {:.2} s; flows ratio containers/dev {:.2}",
        build.as_secs_f64(),
        cold_start.as_secs_f64(),
        flows_containers.as_secs_f64(),
        dev_cold.as_secs_f64(),
        flows_dev.as_secs_f64(),
        flows_containers.as_secs_f64() / flows_dev.as_secs_f64()
    );
    eprintln!("containers: {report}");
    let _ = std::fs::write(
        lychd_testkit::target_dir().join("lychd-containers-report.txt"),
        report + "\n",
    );
}

/// `lychd dev` (the built binaries, an ephemeral cluster, free ports): its cold start to every
/// endpoint written, and flows 1 and 5 with its simulated model.
async fn dev_flows() -> (Duration, Duration) {
    let state = tempfile::tempdir().expect("tmp");
    let base_port = lychd_pg::free_port().expect("port");
    let started = Instant::now();
    let child = tokio::process::Command::new(lychd_testkit::bin_path("lychd"))
        .args([
            "dev",
            "--ephemeral",
            "--no-build",
            "--base-port",
            &base_port.to_string(),
            "--state-dir",
        ])
        .arg(state.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start lychd dev");
    let stack = Interrupted(Some(child));
    let endpoints_file = state.path().join("dev/endpoints.json");
    let deadline = Instant::now() + Duration::from_secs(90);
    while !endpoints_file.is_file() {
        assert!(Instant::now() < deadline, "lychd dev not up within 90 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cold = started.elapsed();
    let endpoints: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&endpoints_file).expect("read"))
            .expect("endpoints");
    let token = |office: &str| {
        std::fs::read_to_string(state.path().join(format!("dev/operator.{office}.token")))
            .expect("token")
            .trim()
            .to_owned()
    };
    let flows = Instant::now();
    let at = |office: &str| Target {
        addr: endpoints[office].clone(),
        ca: None,
    };
    warm_grant(
        &at("dispatcher"),
        &token("dispatcher"),
        "sim0:chat:qwen3-0.6b",
        "qwen3-0.6b",
        "http://127.0.0.1:",
    );
    memory(&at("archive"), &token("archive"));
    let elapsed = flows.elapsed();
    drop(stack);
    (cold, elapsed)
}

/// `lychd dev` stopped with Ctrl-C (so it stops its offices and PostgreSQL) however the test
/// ends.
struct Interrupted(Option<tokio::process::Child>);

impl Drop for Interrupted {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.start_kill();
    }
}

/// The translation (no podman needed): a unit's keys become their `podman run` arguments.
fn translated(unit_text: &str) -> Vec<String> {
    let mut units = BTreeMap::new();
    units.insert(
        "lychd-internal.network".to_owned(),
        Unit::parse("[Network]\nNetworkName=lychd-internal\nInternal=true\n").expect("network"),
    );
    units.insert(
        "x.container".to_owned(),
        Unit::parse(unit_text).expect("unit"),
    );
    let run = Run {
        id: "lt0".into(),
        containers: Vec::new(),
        secrets: Vec::new(),
        networks: Vec::new(),
        volumes: Vec::new(),
    };
    let ctx = Ctx {
        run: &run,
        units: &units,
        config_dir: PathBuf::from("/cfg"),
        hosts: Vec::new(),
    };
    run_args(&ctx, "x.container").0
}

#[test]
fn units_translate_key_by_key_with_names_unique_to_the_run() {
    let args = translated(
        "[Container]\nImage=localhost/lychd:latest\nContainerName=lychd-x\nUser=10001:10001\n\
         Exec=lychd-x serve\nNetwork=lychd-internal.network\nReadOnly=true\nNoNewPrivileges=true\n\
         DropCapability=all\nSecret=lychd-x-credential,type=mount,uid=10001,gid=10001,mode=0400\n\
         Volume=/etc/lychd/x.toml:/etc/lychd/x.toml:ro,Z\nTmpfs=/var/run/x:rw,mode=0775,uid=10001,gid=10001\n",
    )
    .join(" ");
    for want in [
        "--name lt0-lychd-x",
        "--user 10001:10001",
        "--network lt0-lychd-internal",
        "--read-only=true",
        "--security-opt no-new-privileges",
        "--cap-drop all",
        "--secret lt0-lychd-x-credential,target=lychd-x-credential,type=mount,uid=10001,gid=10001,mode=0400",
        "--volume /cfg/x.toml:/etc/lychd/x.toml:ro,Z",
        "--tmpfs /var/run/x:rw,mode=0775,U",
        "--network-alias lychd-x localhost/lychd:latest lychd-x serve",
    ] {
        assert!(args.contains(want), "`{want}` in {args}");
    }
}

#[test]
#[should_panic(expected = "is not translated by this test")]
fn a_unit_key_the_translation_does_not_know_fails() {
    translated("[Container]\nImage=i\nContainerName=c\nPodmanArgs=--privileged\n");
}
