//! Latency measurement for the bench binaries: closed loop (N callers back to back) and open
//! loop (calls started at a fixed rate whatever answers take, as load arrives in service).
//! Timings never gate a test; the benches print them next to a baseline of the same run.

use std::future::Future;
use std::time::{Duration, Instant};

/// Percentiles of one case.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub p50: Duration,
    pub p99: Duration,
    /// Completed calls per second of wall time.
    pub per_second: f64,
    /// Calls completed.
    pub calls: usize,
    /// Lowest and highest p99 of five consecutive fifths of the calls (by start): a tail made
    /// by a few stalls shows as a wide spread.
    pub p99_of_fifths: (Duration, Duration),
}

impl Stats {
    /// `samples` in the order the calls started.
    fn of(samples: Vec<Duration>, wall: Duration) -> Stats {
        assert!(!samples.is_empty(), "a case with no sample");
        let fifths: Vec<Duration> = samples
            .chunks(samples.len().div_ceil(5))
            .map(|c| quantile(&mut c.to_vec(), 0.99))
            .collect();
        let mut all = samples;
        Stats {
            p50: quantile(&mut all, 0.50),
            p99: quantile(&mut all, 0.99),
            per_second: all.len() as f64 / wall.as_secs_f64(),
            calls: all.len(),
            p99_of_fifths: (
                fifths.iter().copied().min().unwrap_or_default(),
                fifths.iter().copied().max().unwrap_or_default(),
            ),
        }
    }
}

fn quantile(v: &mut [Duration], q: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `warmup` calls, then `concurrency` callers each calling back to back for `seconds`.
pub async fn closed<F, Fut>(concurrency: usize, warmup: usize, seconds: u64, call: F) -> Stats
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    for _ in 0..warmup {
        call().await;
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let call = call.clone();
            tokio::spawn(async move {
                let mut samples = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    call().await;
                    samples.push((t, t.elapsed()));
                }
                samples
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("caller"));
    }
    all.sort_by_key(|(start, _)| *start);
    Stats::of(all.into_iter().map(|(_, d)| d).collect(), started.elapsed())
}

/// Open loop: start `rate` calls per second for `seconds`, each in its own task. A call's
/// latency counts from the instant the generator issued it, not from when its task got to run:
/// the wait for a busy runtime to poll it is part of what a client arriving at that rate sees.
/// (Not from the tick's due instant: the timer's millisecond granularity would add up to a
/// millisecond of the harness's own lateness to every call — measured: health p50 0.15 → 0.9
/// ms.) Calls are never held back by slow answers, so a slow service cannot slow the offered
/// load.
pub async fn paced<F, Fut>(rate: u32, seconds: u64, call: F) -> Stats
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let total = u64::from(rate) * seconds;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for _ in 0..total {
        tick.tick().await;
        let issued = Instant::now();
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            call().await;
            issued.elapsed()
        }));
    }
    let mut all = Vec::with_capacity(tasks.len());
    for t in tasks {
        all.push(t.await.expect("call"));
    }
    Stats::of(all, started.elapsed())
}

/// A case's figures after its label, in the columns the benches print: concurrency, p50 and p99
/// (ms), calls/s, and CPU per call in µs (all of it, then this process + PostgreSQL).
pub fn figures(concurrency: usize, s: &Stats, cpu: &Cpu) -> String {
    format!(
        "{concurrency:>4} {:>8.3} {:>8.3} {:>10.0}   {:>6.0} ({:.0} + {:.0})",
        ms(s.p50),
        ms(s.p99),
        s.per_second,
        cpu.total().as_secs_f64() * 1e6,
        cpu.process.as_secs_f64() * 1e6,
        cpu.database.as_secs_f64() * 1e6
    )
}

/// CPU time spent so far by this process (every office the bench runs in-process, the
/// simulated runtimes and the bench's own clients), by the office processes it spawned (Ward's
/// binary, for every office but Ward: its live child processes and those it waited for) and by
/// the test kit's PostgreSQL cluster (the postmaster, its live backends and those that exited).
/// Read from `/proc`, in clock ticks of 10 ms: meaningful over cases of thousands of calls.
/// Unlike latency, CPU per call barely moves when other work shares the cores, so it compares
/// variants on a busy machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub process: Duration,
    /// The office processes this process started (e.g. `lychd-ward`), the cluster excluded.
    pub offices: Duration,
    pub database: Duration,
}

impl Cpu {
    pub fn now() -> Cpu {
        let own = stat_of("self").map(|s| s.own).unwrap_or_default();
        Cpu {
            process: ticks(own),
            offices: ticks(offices_ticks()),
            database: ticks(database_ticks()),
        }
    }

    /// CPU per call between `self` (taken before) and now, for `calls` calls.
    pub fn per_call_since(self, calls: usize) -> Cpu {
        let now = Cpu::now();
        let n = u32::try_from(calls.max(1)).unwrap_or(u32::MAX);
        Cpu {
            process: now.process.saturating_sub(self.process) / n,
            offices: now.offices.saturating_sub(self.offices) / n,
            database: now.database.saturating_sub(self.database) / n,
        }
    }

    /// Everything: this process, the offices it spawned and the database.
    pub fn total(&self) -> Duration {
        self.process + self.offices + self.database
    }
}

struct ProcStat {
    parent: u32,
    /// utime + stime.
    own: u64,
    /// cutime + cstime (children waited for).
    children: u64,
}

fn ticks(n: u64) -> Duration {
    // `/proc` reports in USER_HZ, which is 100 on Linux.
    Duration::from_millis(n * 10)
}

fn stat_of(pid: &str) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some(ProcStat {
        parent: u32::try_from(field(4)?).ok()?,
        own: field(14)? + field(15)?,
        children: field(16)? + field(17)?,
    })
}

/// The postmaster's pid, if the test kit's cluster runs.
fn postmaster() -> Option<u32> {
    let pid_file = crate::pg::active_cluster_dir().join("data/postmaster.pid");
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<u32>().ok()))
}

/// CPU of this process's children: live ones (not the cluster, counted as the database) and
/// those it waited for.
fn offices_ticks() -> u64 {
    let me = std::process::id();
    let waited = stat_of("self").map(|s| s.children).unwrap_or_default();
    let cluster = postmaster();
    let live: u64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| Some(*pid) != cluster)
        .filter_map(|pid| stat_of(&pid.to_string()))
        .filter(|s| s.parent == me)
        .map(|s| s.own + s.children)
        .sum();
    waited + live
}

fn database_ticks() -> u64 {
    let Some(postmaster) = postmaster() else {
        return 0;
    };
    let Some(root) = stat_of(&postmaster.to_string()) else {
        return 0;
    };
    let live: u64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|pid| stat_of(&pid.to_string()))
        .filter(|s| s.parent == postmaster)
        .map(|s| s.own)
        .sum();
    root.own + root.children + live
}
