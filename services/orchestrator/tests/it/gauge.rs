//! The real-host footprint gauge (`nvidia-smi`'s per-process query) against a fake
//! `nvidia-smi` — a real executable the test writes and puts on the tool's `PATH` — and a
//! process tree whose cgroups place processes in animator units: what an animator's runtime
//! unit holds is summed; every failure of the tool (an error, a hang, `[N/A]`, too much
//! output, the tool missing, other arguments) is "unmeasured", never a crash.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use lychd_orchestrator::gauge::{Gauge, MAX_OUTPUT, NvidiaSmi};

/// A fake `nvidia-smi` whose body runs only when called with exactly the documented query.
fn fake_tool(dir: &Path, body: &str) {
    let script = format!(
        "#!/bin/sh\n\
         [ \"$#\" -eq 2 ] && [ \"$1\" = \"--query-compute-apps=pid,used_memory\" ] \
         && [ \"$2\" = \"--format=csv,noheader,nounits\" ] || exit 9\n{body}\n"
    );
    let file = dir.join("nvidia-smi");
    std::fs::write(&file, script).expect("write the fake tool");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `/proc/<pid>/cgroup` of a fixture tree.
fn process(proc_root: &Path, pid: u32, cgroup: &str) {
    let dir = proc_root.join(pid.to_string());
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("cgroup"), cgroup).expect("cgroup");
}

fn unit_cgroup(unit: &str) -> String {
    format!("0::/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}\n")
}

struct Host {
    tools: tempfile::TempDir,
    procs: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        let h = Host {
            tools: tempfile::tempdir().expect("tools"),
            procs: tempfile::tempdir().expect("proc"),
        };
        // gpu-a's llama-server (on two GPUs) and a helper in its container; gpu-b's runtime;
        // a desktop process on the GPU that belongs to no animator.
        process(
            h.procs.path(),
            2417,
            &unit_cgroup("lychd-animator-gpu-a.service"),
        );
        process(
            h.procs.path(),
            2500,
            &unit_cgroup("lychd-animator-gpu-a.service/libpod-payload-1f2e"),
        );
        process(
            h.procs.path(),
            3108,
            &unit_cgroup("lychd-animator-gpu-b.service"),
        );
        process(h.procs.path(), 777, "0::/user.slice/session-2.scope\n");
        h
    }

    /// The tool's PATH: the fake's directory first, then the system's (for `sh`, `sleep`, …).
    fn path(&self) -> OsString {
        let mut p = OsString::from(self.tools.path());
        p.push(":/usr/local/bin:/usr/bin:/bin");
        p
    }

    fn gauge(&self, timeout: Duration) -> NvidiaSmi {
        NvidiaSmi::new("nvidia-smi", timeout)
            .with_path(self.path())
            .with_proc_root(self.procs.path())
    }
}

const BUDGET: Duration = Duration::from_secs(5);

#[tokio::test]
async fn an_animator_holds_what_the_processes_of_its_runtime_unit_use() {
    let host = Host::new();
    fake_tool(
        host.tools.path(),
        "printf '2417, 9523\\n3108, 4100\\n2417, 812\\n777, 300\\n2500, 65\\n'",
    );
    let g = host.gauge(BUDGET);
    assert_eq!(g.measure("gpu-a").await, Some(9523 + 812 + 65));
    assert_eq!(g.measure("gpu-b").await, Some(4100));
    assert_eq!(g.measure("gpu-c").await, None, "no process of its own");
}

#[tokio::test]
async fn not_available_and_junk_are_unmeasured_for_their_animator_only() {
    let host = Host::new();
    fake_tool(
        host.tools.path(),
        "echo 'WARNING: infoROM is corrupted at gpu 0000:01:00.0'\n\
         printf '2417, 9000\\n2500, [N/A]\\n3108, 4100\\n9999, 7\\n'",
    );
    let g = host.gauge(BUDGET);
    assert_eq!(g.measure("gpu-a").await, None, "one [N/A] spoils the sum");
    assert_eq!(g.measure("gpu-b").await, Some(4100));
    fake_tool(host.tools.path(), "printf '3108, 18446744073709551616\\n'");
    assert_eq!(g.measure("gpu-b").await, None, "past u64");
    fake_tool(host.tools.path(), "printf 'No running processes found\\n'");
    assert_eq!(g.measure("gpu-b").await, None);
    fake_tool(host.tools.path(), "");
    assert_eq!(g.measure("gpu-b").await, None, "empty");
}

#[tokio::test]
async fn an_error_exit_other_arguments_or_a_missing_tool_are_unmeasured() {
    let host = Host::new();
    fake_tool(
        host.tools.path(),
        "printf '3108, 4100\\n'\necho 'NVIDIA-SMI has failed' >&2\nexit 6",
    );
    let g = host.gauge(BUDGET);
    assert_eq!(g.measure("gpu-b").await, None, "exit 6");
    // The fake refuses anything but the documented query: the gauge asks exactly that.
    fake_tool(host.tools.path(), "printf '3108, 4100\\n'");
    assert_eq!(g.measure("gpu-b").await, Some(4100));
    std::fs::remove_file(host.tools.path().join("nvidia-smi")).expect("rm");
    assert_eq!(g.measure("gpu-b").await, None, "no tool on PATH");
}

#[tokio::test]
async fn a_hung_tool_is_killed_at_the_budget_and_unmeasured() {
    let host = Host::new();
    let pid_file = host.tools.path().join("pid");
    fake_tool(
        host.tools.path(),
        &format!(
            "echo $$ > {}\nprintf '3108, 4100\\n'\nexec sleep 30",
            pid_file.display()
        ),
    );
    let g = host.gauge(Duration::from_millis(300));
    let measured = tokio::time::timeout(Duration::from_secs(10), g.measure("gpu-b"))
        .await
        .expect("the gauge answers at its budget, not when the tool ends");
    assert_eq!(measured, None);
    let pid = std::fs::read_to_string(&pid_file).expect("the tool ran");
    let proc_dir = Path::new("/proc").join(pid.trim());
    // The child is killed (and reaped by the runtime): it does not outlive the measurement.
    let mut gone = false;
    for _ in 0..50 {
        let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        if state.is_empty() || state.contains(") Z ") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the hung tool was killed");
}

#[tokio::test]
async fn output_past_the_bound_is_unmeasured() {
    let host = Host::new();
    // A valid first line, then more than MAX_OUTPUT bytes of process lines.
    let lines = MAX_OUTPUT / "3108, 1\n".len() + 10;
    fake_tool(
        host.tools.path(),
        &format!("i=0\nwhile [ $i -lt {lines} ]; do echo '3108, 1'; i=$((i+1)); done"),
    );
    assert_eq!(host.gauge(BUDGET).measure("gpu-b").await, None);
    fake_tool(host.tools.path(), "printf '3108, 1\\n3108, 2\\n'");
    assert_eq!(host.gauge(BUDGET).measure("gpu-b").await, Some(3));
}
