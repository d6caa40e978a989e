//! A real host's footprint gauge (issue 25 point 3): the NVIDIA driver's per-process query
//!
//! ```text
//! nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits
//! ```
//!
//! answers one `pid, MiB` line per process holding GPU memory (a process on two GPUs appears
//! twice). A process belongs to an animator when its cgroup (`/proc/<pid>/cgroup`) lies in the
//! animator's runtime unit, `lychd-animator-<name>.service` (its Quadlet container's processes
//! stay under that unit's cgroup): the animator holds the sum of its processes' lines.
//!
//! Invariant: anything short of a clean, complete, believable answer is "unmeasured" — never
//! a crash, never a partial sum. The tool not found, a non-zero exit, a timeout (the child is
//! killed), output past [`MAX_OUTPUT`], a line of the animator's that says `[N/A]` (or anything
//! but a number), a figure past [`MAX_PLAUSIBLE_MIB`] or a sum that overflows: unmeasured, and
//! placement keeps the previous value or the declared estimate. Lines of no recognisable
//! `pid, value` shape (a warning, "No running processes found") are ignored; an animator with
//! no line holds nothing measurable (also unmeasured: the trait's `None`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::Gauge;
use crate::domain::host::service_unit;

/// The query's arguments, exactly.
pub const QUERY: [&str; 2] = [
    "--query-compute-apps=pid,used_memory",
    "--format=csv,noheader,nounits",
];

/// Most output read from the tool (a host with thousands of GPU processes answers less).
pub const MAX_OUTPUT: usize = 64 * 1024;

/// Largest per-process figure believed: 16 TiB, in MiB (no GPU holds more; a larger number is
/// the driver's or the tool's garbage).
pub const MAX_PLAUSIBLE_MIB: u64 = 16 * 1024 * 1024;

/// One process's line: what it uses, when the driver says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Used {
    Mib(u64),
    /// `[N/A]`, `[Insufficient Permissions]`, a non-number or an implausible figure.
    Unknown,
}

/// The `pid, used_memory` lines of the query's output, in order. A line whose first field is
/// not a pid is not a process line and is skipped.
pub fn parse(output: &str) -> Vec<(u32, Used)> {
    output
        .lines()
        .filter_map(|line| {
            let (pid, used) = line.split_once(',')?;
            let pid: u32 = pid.trim().parse().ok().filter(|p| *p > 0)?;
            let used = used
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|m| *m <= MAX_PLAUSIBLE_MIB)
                .map_or(Used::Unknown, Used::Mib);
            Some((pid, used))
        })
        .collect()
}

/// What the processes `belongs` selects hold together: `None` when none has a line, one of
/// theirs is unknown, or the sum overflows.
pub fn held(rows: &[(u32, Used)], mut belongs: impl FnMut(u32) -> bool) -> Option<u64> {
    let mut sum: Option<u64> = None;
    for (pid, used) in rows {
        if !belongs(*pid) {
            continue;
        }
        match used {
            Used::Unknown => return None,
            Used::Mib(m) => sum = Some(sum.unwrap_or(0).checked_add(*m)?),
        }
    }
    sum.filter(|m| *m > 0)
}

/// Whether a `/proc/<pid>/cgroup` text places the process in `unit` (or below it): a path
/// component of one of its lines equals the unit's name.
pub fn in_unit(cgroup: &str, unit: &str) -> bool {
    cgroup.lines().any(|line| {
        line.splitn(3, ':')
            .nth(2)
            .is_some_and(|path| path.split('/').any(|c| c == unit))
    })
}

/// The gauge: the tool (a bare name is looked up on `PATH`), one budget for a query, and where
/// the processes' cgroups are read.
pub struct NvidiaSmi {
    program: PathBuf,
    timeout: Duration,
    proc_root: PathBuf,
    path: Option<OsString>,
}

impl NvidiaSmi {
    pub fn new(program: impl Into<PathBuf>, timeout: Duration) -> NvidiaSmi {
        NvidiaSmi {
            program: program.into(),
            timeout,
            proc_root: PathBuf::from("/proc"),
            path: None,
        }
    }

    /// The tool's `PATH` (a bare name is looked up on it) instead of the office's own.
    pub fn with_path(mut self, path: impl Into<OsString>) -> NvidiaSmi {
        self.path = Some(path.into());
        self
    }

    /// Read the processes' cgroups under `root` instead of `/proc` (a test's fixture tree).
    pub fn with_proc_root(mut self, root: impl Into<PathBuf>) -> NvidiaSmi {
        self.proc_root = root.into();
        self
    }

    /// The tool's output: `None` unless it exits 0 within the budget with at most
    /// [`MAX_OUTPUT`] bytes of UTF-8.
    pub async fn query(&self) -> Option<String> {
        let mut cmd = tokio::process::Command::new(&self.program);
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        let mut child = cmd
            .args(QUERY)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let mut stdout = child.stdout.take()?;
        let run = async {
            let mut buf = Vec::new();
            // One byte past the bound tells a complete answer from a cut one.
            (&mut stdout)
                .take(MAX_OUTPUT as u64 + 1)
                .read_to_end(&mut buf)
                .await
                .ok()?;
            if buf.len() > MAX_OUTPUT {
                return None;
            }
            let status = child.wait().await.ok()?;
            status.success().then_some(buf)
        };
        let out = tokio::time::timeout(self.timeout, run).await.ok()??;
        String::from_utf8(out).ok()
    }

    fn cgroup(&self, pid: u32) -> Option<String> {
        std::fs::read_to_string(self.proc_root.join(pid.to_string()).join("cgroup")).ok()
    }
}

#[tonic::async_trait]
impl Gauge for NvidiaSmi {
    async fn measure(&self, animator: &str) -> Option<u64> {
        let out = self.query().await?;
        let unit = service_unit(animator);
        held(&parse(&out), |pid| {
            self.cgroup(pid).is_some_and(|c| in_unit(&c, &unit))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_answer_is_read_line_by_line() {
        // Captured from a driver 550 host: two llama-server processes, one on two GPUs.
        let out = "2417, 9523\n3108, 4100\n2417, 812\n";
        let rows = parse(out);
        assert_eq!(
            rows,
            [
                (2417, Used::Mib(9523)),
                (3108, Used::Mib(4100)),
                (2417, Used::Mib(812))
            ]
        );
        assert_eq!(held(&rows, |p| p == 2417), Some(10_335), "both GPUs summed");
        assert_eq!(held(&rows, |p| p == 3108), Some(4100));
        assert_eq!(held(&rows, |_| false), None, "no process of its own");
    }

    #[test]
    fn empty_and_no_process_answers_measure_nothing() {
        for out in ["", "\n", "No running processes found\n"] {
            assert!(parse(out).is_empty(), "{out:?}");
            assert_eq!(held(&parse(out), |_| true), None);
        }
    }

    #[test]
    fn not_available_is_unmeasured_for_that_process_only() {
        // A container without the PID namespace mapped, or an unprivileged query.
        let rows = parse("2417, [N/A]\n3108, 4100\n4000, [Insufficient Permissions]\n");
        assert_eq!(held(&rows, |p| p == 2417), None);
        assert_eq!(held(&rows, |p| p == 4000), None);
        assert_eq!(held(&rows, |p| p == 3108), Some(4100));
        // One unknown line of an animator's spoils its whole sum: never a partial figure.
        let rows = parse("2417, 9000\n2418, [N/A]\n");
        assert_eq!(held(&rows, |p| p == 2417 || p == 2418), None);
    }

    #[test]
    fn junk_lines_are_skipped_and_junk_values_are_unknown() {
        let out = "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n\
                   pid, used_gpu_memory [MiB]\n\
                   -1, 5\n0, 7\n, 9\n2417 9000\n\u{0}\u{1}\n3108, 4100 MiB\n5000,  123  \n";
        let rows = parse(out);
        assert_eq!(rows, [(3108, Used::Unknown), (5000, Used::Mib(123))]);
    }

    #[test]
    fn huge_numbers_are_not_believed_and_sums_do_not_overflow() {
        let rows = parse(&format!(
            "1, {}\n2, 99999999999999999999999\n3, {MAX_PLAUSIBLE_MIB}\n",
            MAX_PLAUSIBLE_MIB + 1
        ));
        assert_eq!(
            rows,
            [
                (1, Used::Unknown),
                (2, Used::Unknown),
                (3, Used::Mib(MAX_PLAUSIBLE_MIB))
            ]
        );
        let many = vec![
            (7, Used::Mib(u64::MAX / 2 + 1)),
            (7, Used::Mib(u64::MAX / 2 + 1)),
        ];
        assert_eq!(held(&many, |_| true), None, "overflow is unmeasured");
    }

    #[test]
    fn a_process_belongs_to_the_unit_its_cgroup_lies_in() {
        let unit = service_unit("gpu-a");
        let direct = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/lychd-animator-gpu-a.service\n";
        let container = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/lychd-animator-gpu-a.service/libpod-payload-1f2e\n";
        let v1 = "12:memory:/system.slice/lychd-animator-gpu-a.service\n1:name=systemd:/system.slice/lychd-animator-gpu-a.service\n";
        for c in [direct, container, v1] {
            assert!(in_unit(c, &unit), "{c}");
        }
        for c in [
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/lychd-animator-gpu-ab.service\n",
            "0::/system.slice/other.service\n",
            "lychd-animator-gpu-a.service\n",
            "",
        ] {
            assert!(!in_unit(c, &unit), "{c}");
        }
    }
}
