//! `taskyard bench schedules`: what schedules cost a coordinator.
//!
//! It starts a coordinator here (as the default run does), with workers
//! that run the schedules' no-op jobs and one worker of its own for a
//! paced stream of ordinary jobs, and measures:
//! - CPU of the idle coordinator, first with no schedules, then with
//!   `schedules` schedules of `cron` (every minute by default) over whole
//!   minutes: each minute every schedule fires one job, which the workers
//!   run (so the figure includes running what fired);
//! - submit-to-start of the ordinary stream (one job every
//!   `latency_interval`, like the default run's paced phase) around `bursts`
//!   slots at which every schedule fires at once: its p99 while the slot's
//!   jobs are fired and started, against its p99 in the quiet seconds just
//!   before the slot.
//!
//! The stream's jobs run on a worker of their own, so they never wait for
//! a slot behind the scheduled jobs: what the comparison shows is what
//! firing costs the coordinator (deciding, committing and handing out
//! 10,000 jobs), not a lack of workers.

use crate::cluster::{Cluster, StartTimes, NOOP, TIMED};
use crate::cpu::{CpuSnapshot, CpuUsed};
use crate::latency::{paced_samples, Pace, PacedSample, Percentiles};
use crate::{cpu_snapshot, template, BenchError, BenchOptions};
use serde::Serialize;
use slog::Logger;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard_client::client::{Client, ClientOptions};
use taskyard_client::clock::{Clock, SystemClock};
use taskyard_client::worker::{TaskRegistry, Threads};
use taskyard_protocol::payloads::encode_json;
use taskyard_protocol::{Priority, ScheduleSpec, SubmitAnswer, SubmitRequest};

/// What `bench schedules` is parameterised by.
#[derive(Debug, Clone)]
pub struct ScheduleBenchOptions {
    /// The coordinator started here (its store; `schedules` sizes its
    /// `max-schedules`). Its `workers` run the scheduled jobs.
    pub base: BenchOptions,
    pub cron: String,
    /// Whole minutes the idle cost is measured over.
    pub minutes: u32,
    /// Slots the latency stream runs across.
    pub bursts: u32,
}

/// CPU over one window, as percentages of one core.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CpuShare {
    pub window_s: f64,
    /// The actor-system thread: the coordinator and every session.
    pub coordinator_percent: Option<f64>,
    /// The database thread.
    pub persistence_percent: Option<f64>,
    /// This whole process: coordinator, workers and the load generator.
    pub process_percent: Option<f64>,
    /// Scheduled jobs started during the window.
    pub scheduled_jobs_started: u64,
}

/// One slot at which every schedule fired, seen by the stream.
#[derive(Debug, Clone, Serialize)]
pub struct Burst {
    /// The slot, RFC 3339 UTC.
    pub slot: String,
    /// Scheduled jobs that started for this slot.
    pub started: u64,
    /// The slot's jobs' submission (the firing) after the slot, in ms.
    pub fired_after_ms: f64,
    /// The slot's first and last job start after the slot, in ms.
    pub first_start_ms: f64,
    pub last_start_ms: f64,
    /// Submit-to-start of the stream in the seconds before the slot.
    pub quiet: Percentiles,
    /// Submit-to-start of stream jobs submitted from just before the
    /// firing until the slot's last job started.
    pub during: Percentiles,
    #[serde(skip)]
    quiet_samples: Vec<f64>,
    #[serde(skip)]
    during_samples: Vec<f64>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleBenchReport {
    pub store: String,
    pub schedules: u32,
    pub cron: String,
    pub workers: u32,
    pub capacity: u32,
    pub create_s: f64,
    pub idle_without_schedules: CpuShare,
    pub idle_with_schedules: CpuShare,
    pub latency_interval_ms: u64,
    /// Connections the stream was dealt over (each job counted from when
    /// it fell due: see `latency::paced_samples`).
    pub stream_senders: u32,
    pub bursts: Vec<Burst>,
    /// Every burst's samples together.
    pub quiet: Percentiles,
    pub during: Percentiles,
    /// `during.p99_ms - quiet.p99_ms`.
    pub added_p99_ms: f64,
    /// The same number of jobs submitted by one client at once (frames of
    /// `CLIENT_FRAME`, schedules paused), as often as `bursts`.
    pub client_bursts: Vec<Burst>,
    pub client_during: Percentiles,
}

/// The idle window before any schedule exists.
const BASELINE: Duration = Duration::from_secs(10);
/// The stream runs from this long before a slot to this long after it.
const AROUND_SLOT: Duration = Duration::from_secs(5);
/// Stream jobs submitted this long before the firing count as "during":
/// they may share the firing's commit.
const BEFORE_FIRING: Duration = Duration::from_millis(100);
/// The stream is dealt over connections each sending at most one job this
/// often (the default run's paced phase), so a connection still waiting for
/// an answer when its next job falls due means a stall of this much.
const SENDER_PACE: Duration = Duration::from_millis(5);
/// Connections creating (and pausing) the schedules.
const CREATORS: u32 = 4;
/// Submissions per frame of the client burst.
const CLIENT_FRAME: usize = 100;
const MINUTE_MS: i64 = 60_000;

/// Scheduled jobs started so far, and the first and last start since the
/// last `reset`.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<StartsSeen>>);

#[derive(Debug, Clone, Copy, Default)]
struct StartsSeen {
    total: u64,
    since_reset: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Starts {
    fn note(&self) {
        if let Ok(mut seen) = self.0.lock() {
            let now = Instant::now();
            seen.total += 1;
            seen.since_reset += 1;
            seen.first.get_or_insert(now);
            seen.last = Some(now);
        }
    }

    fn seen(&self) -> StartsSeen {
        self.0.lock().map(|s| *s).unwrap_or_default()
    }

    fn reset(&self) {
        if let Ok(mut seen) = self.0.lock() {
            *seen = StartsSeen {
                total: seen.total,
                ..StartsSeen::default()
            };
        }
    }
}

/// Wall-clock milliseconds mapped onto `Instant`s (taken once, so slot
/// times and job times compare on one clock).
#[derive(Clone, Copy)]
struct WallClock {
    instant: Instant,
    wall_ms: i64,
}

impl WallClock {
    fn now() -> WallClock {
        WallClock {
            instant: Instant::now(),
            wall_ms: SystemClock.now_millis(),
        }
    }

    fn at(&self, wall_ms: i64) -> Instant {
        let offset = Duration::from_millis(wall_ms.abs_diff(self.wall_ms));
        match wall_ms >= self.wall_ms {
            true => self.instant + offset,
            false => self.instant - offset,
        }
    }

    /// The first whole minute at least `lead` from now.
    fn next_minute(&self, lead: Duration) -> i64 {
        let earliest = SystemClock.now_millis() + lead.as_millis() as i64;
        (earliest + MINUTE_MS - 1).div_euclid(MINUTE_MS) * MINUTE_MS
    }
}

fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    match to >= from {
        true => to.duration_since(from).as_secs_f64() * 1000.0,
        false => -(from.duration_since(to).as_secs_f64() * 1000.0),
    }
}

/// Runs the benchmark.
pub fn run(opts: &ScheduleBenchOptions, log: Logger) -> Result<ScheduleBenchReport, BenchError> {
    let base = BenchOptions {
        workers: 0,
        ..opts.base.clone()
    };
    let mut cluster = Cluster::start(&base, log)?;
    let starts = Starts::default();
    let noted = starts.clone();
    cluster.add_workers(opts.base.workers, opts.base.capacity, 0, "bench", || {
        scheduled_registry(&noted)
    })?;
    let stream_times = StartTimes::default();
    let times = stream_times.clone();
    cluster.add_workers(1, opts.base.capacity, 0, "bench-stream", || {
        stream_registry(&times)
    })?;
    let result = measure(opts, &cluster, &starts, &stream_times);
    cluster.stop();
    result
}

fn measure(
    opts: &ScheduleBenchOptions,
    cluster: &Cluster,
    starts: &Starts,
    stream_times: &StartTimes,
) -> Result<ScheduleBenchReport, BenchError> {
    let idle_without_schedules = cpu_over(BASELINE, starts);
    let created = Instant::now();
    create_schedules(opts, &cluster.client_addr, &cluster.client_options)?;
    let create_s = created.elapsed().as_secs_f64();

    // Whole minutes, from half a minute past a slot: each holds exactly
    // `minutes` firings.
    let clock = WallClock::now();
    let first = clock.next_minute(Duration::ZERO);
    sleep_until(clock.at(first + MINUTE_MS / 2));
    let idle_with_schedules = cpu_over(Duration::from_secs(60 * u64::from(opts.minutes)), starts);

    let mut client = Client::connect_with(&cluster.client_addr, &cluster.client_options)?;
    let interval = opts.base.latency_interval.max(Duration::from_millis(1));
    let stream = Stream {
        template: template(&opts.base, TIMED, Priority::Normal),
        interval,
        senders: (SENDER_PACE.as_millis() / interval.as_millis()).max(1) as u32,
        addr: &cluster.client_addr,
        options: &cluster.client_options,
        times: stream_times,
    };
    let mut bursts = Vec::new();
    for _ in 0..opts.bursts {
        let clock = WallClock::now();
        let slot = clock.next_minute(AROUND_SLOT + Duration::from_secs(1));
        let observed = stream.around(&mut client, clock.at(slot), starts, |client| {
            Ok(clock.at(fired_wall_ms(client)?))
        })?;
        bursts.push(observed.labelled(taskyard_server::scheduler::schedule::slot_label(slot)));
    }

    // The same number of jobs submitted by a client at once, with every
    // schedule paused: what the jobs cost without the firing.
    set_paused(opts, &cluster.client_addr, &cluster.client_options)?;
    let mut client_bursts = Vec::new();
    for i in 0..opts.bursts {
        let at = Instant::now() + AROUND_SLOT + Duration::from_secs(1);
        let (addr, options) = (cluster.client_addr.clone(), cluster.client_options.clone());
        let jobs = opts.base.schedules;
        let noop = template(&opts.base, NOOP, Priority::Normal);
        let producer = std::thread::spawn(move || submit_at(&addr, &options, at, jobs, &noop));
        let observed = stream.around(&mut client, at, starts, |_| {
            producer
                .join()
                .map_err(|_| BenchError::Failed("the producing thread panicked".into()))?
        })?;
        client_bursts.push(observed.labelled(format!("client burst {}", i + 1)));
    }
    let all = |bursts: &[Burst], during: bool| {
        Percentiles::of(bursts.iter().flat_map(|b| b.samples(during)).collect())
    };
    let (quiet, during) = (all(&bursts, false), all(&bursts, true));
    let client_during = all(&client_bursts, true);
    Ok(ScheduleBenchReport {
        store: opts.base.store.to_string(),
        schedules: opts.base.schedules,
        cron: opts.cron.clone(),
        workers: opts.base.workers,
        capacity: opts.base.capacity,
        create_s,
        idle_without_schedules,
        idle_with_schedules,
        latency_interval_ms: stream.interval.as_millis() as u64,
        stream_senders: stream.senders,
        bursts,
        quiet,
        during,
        added_p99_ms: during.p99_ms - quiet.p99_ms,
        client_bursts,
        client_during,
    })
}

/// The paced stream of ordinary jobs.
struct Stream<'a> {
    template: SubmitRequest,
    interval: Duration,
    /// Connections the stream is dealt over, each sending a job at most
    /// every `SENDER_PACE`.
    senders: u32,
    addr: &'a str,
    options: &'a ClientOptions,
    times: &'a StartTimes,
}

impl Stream<'_> {
    /// Runs the stream from `AROUND_SLOT` before `slot_at` to as long
    /// after; `fired_at` then tells when the burst's jobs were submitted.
    fn around(
        &self,
        client: &mut Client,
        slot_at: Instant,
        starts: &Starts,
        fired_at: impl FnOnce(&mut Client) -> Result<Instant, BenchError>,
    ) -> Result<Observed, BenchError> {
        let jobs = (2 * AROUND_SLOT.as_millis() / self.interval.as_millis()) as u32;
        sleep_until(slot_at - AROUND_SLOT);
        starts.reset();
        let pace = Pace {
            jobs,
            interval: self.interval,
            senders: self.senders,
            template: &self.template,
        };
        let samples = paced_samples(client, (self.addr, self.options), &pace, self.times)?;
        let seen = starts.seen();
        let fired_at = fired_at(client)?;
        let (first, last) = seen.first.zip(seen.last).ok_or_else(|| {
            BenchError::Failed(format!(
                "no burst job started within {AROUND_SLOT:?} of its moment"
            ))
        })?;
        Ok(Observed {
            started: seen.since_reset,
            fired_after_ms: ms_between(slot_at, fired_at),
            first_start_ms: ms_between(slot_at, first),
            last_start_ms: ms_between(slot_at, last),
            quiet: in_window(&samples, slot_at - AROUND_SLOT, slot_at),
            during: in_window(&samples, fired_at - BEFORE_FIRING, last),
        })
    }
}

/// One burst as the stream saw it, before it is labelled.
struct Observed {
    started: u64,
    fired_after_ms: f64,
    first_start_ms: f64,
    last_start_ms: f64,
    quiet: Vec<f64>,
    during: Vec<f64>,
}

impl Observed {
    fn labelled(self, slot: String) -> Burst {
        Burst {
            slot,
            started: self.started,
            fired_after_ms: self.fired_after_ms,
            first_start_ms: self.first_start_ms,
            last_start_ms: self.last_start_ms,
            quiet: Percentiles::of(self.quiet.clone()),
            during: Percentiles::of(self.during.clone()),
            quiet_samples: self.quiet,
            during_samples: self.during,
        }
    }
}

impl Burst {
    fn samples(&self, during: bool) -> impl Iterator<Item = f64> + '_ {
        match during {
            true => self.during_samples.iter().copied(),
            false => self.quiet_samples.iter().copied(),
        }
    }
}

/// At `at`, submits `jobs` jobs of `template` in frames of `CLIENT_FRAME`,
/// one after another as a producer would; returns when it began.
fn submit_at(
    addr: &str,
    options: &ClientOptions,
    at: Instant,
    jobs: u32,
    template: &SubmitRequest,
) -> Result<Instant, BenchError> {
    let mut client = Client::connect_with(addr, options)?;
    sleep_until(at);
    let began = Instant::now();
    let mut left = jobs as usize;
    while left > 0 {
        let frame = left.min(CLIENT_FRAME);
        let answers = client.submit_batch(vec![template.clone(); frame])?;
        for answer in answers {
            if let SubmitAnswer::Rejected(r) = answer {
                return Err(BenchError::Failed(format!(
                    "client burst refused: {}",
                    r.reason
                )));
            }
        }
        left -= frame;
    }
    Ok(began)
}

/// The scheduled jobs' workers: no-op jobs, each start noted.
fn scheduled_registry(starts: &Starts) -> TaskRegistry {
    let mut registry = TaskRegistry::empty();
    let starts = starts.clone();
    // A valid task type, so registering cannot fail; the handler does not
    // block, so it runs on the connection's thread.
    let _ = registry.register_on(NOOP, Threads::Connection, move |_, _| {
        starts.note();
        async { taskyard_protocol::TaskOutcome::Succeeded(Vec::new()) }
    });
    registry
}

/// The stream's worker: `TIMED` jobs only.
fn stream_registry(times: &StartTimes) -> TaskRegistry {
    let mut registry = TaskRegistry::empty();
    let times = times.clone();
    let _ = registry.register_on(TIMED, Threads::Connection, move |ctx, _| {
        times.record(ctx.job_id);
        async { taskyard_protocol::TaskOutcome::Succeeded(Vec::new()) }
    });
    registry
}

/// CPU over `window` from now.
fn cpu_over(window: Duration, starts: &Starts) -> CpuShare {
    let (before, started_before) = (cpu_snapshot(), starts.seen().total);
    std::thread::sleep(window);
    let (after, started_after): (CpuSnapshot, u64) = (cpu_snapshot(), starts.seen().total);
    let used = CpuUsed::between(&before, &after);
    let percent = |ms: Option<f64>| ms.map(|ms| 100.0 * ms / used.wall_ms.max(1.0));
    CpuShare {
        window_s: used.wall_ms / 1000.0,
        coordinator_percent: percent(used.coordinator_thread_ms),
        persistence_percent: percent(used.persistence_thread_ms),
        process_percent: percent(used.process_ms),
        scheduled_jobs_started: started_after - started_before,
    }
}

fn schedule_name(i: u32) -> String {
    format!("bench-{i:05}")
}

/// Creates the schedules over `CREATORS` connections at once.
fn create_schedules(
    opts: &ScheduleBenchOptions,
    addr: &str,
    options: &ClientOptions,
) -> Result<(), BenchError> {
    let payload = encode_json(&serde_json::json!({}));
    each_schedule(opts, addr, options, |client, name| {
        let spec = ScheduleSpec {
            cron: Some(opts.cron.clone()),
            ..ScheduleSpec::new(name, NOOP, payload.clone())
        };
        client.create_schedule(spec).map(|answer| answer.map(drop))
    })
}

/// Pauses every schedule.
fn set_paused(
    opts: &ScheduleBenchOptions,
    addr: &str,
    options: &ClientOptions,
) -> Result<(), BenchError> {
    each_schedule(opts, addr, options, |client, name| {
        client.pause_schedule(name).map(|answer| answer.map(drop))
    })
}

/// Does `action` to every schedule, over `CREATORS` connections at once.
fn each_schedule<E: std::fmt::Display>(
    opts: &ScheduleBenchOptions,
    addr: &str,
    options: &ClientOptions,
    action: impl Fn(&mut Client, &str) -> Result<Result<(), E>, taskyard_client::client::ClientError>
        + Sync,
) -> Result<(), BenchError> {
    let n = opts.base.schedules;
    let action = &action;
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CREATORS)
            .map(|c| {
                scope.spawn(move || -> Result<(), BenchError> {
                    let mut client = Client::connect_with(addr, options)?;
                    for i in (c..n).step_by(CREATORS as usize) {
                        let name = schedule_name(i);
                        action(&mut client, &name)?.map_err(|refused| {
                            BenchError::Failed(format!("schedule {name}: {refused}"))
                        })?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads.into_iter().try_for_each(|thread| {
            thread
                .join()
                .map_err(|_| BenchError::Failed("a schedule thread panicked".into()))?
        })
    })
}

/// When the first schedule's newest job was submitted (the firing), wall ms.
fn fired_wall_ms(client: &mut Client) -> Result<i64, BenchError> {
    let name = schedule_name(0);
    let view = client
        .show_schedule(&name)?
        .map_err(|refused| BenchError::Failed(format!("schedule {name}: {refused}")))?;
    let run = view
        .recent_runs
        .first()
        .ok_or_else(|| BenchError::Failed(format!("schedule {name} has not fired")))?;
    let job = client
        .status(run.job_id)?
        .ok_or_else(|| BenchError::Failed(format!("job {} not found", run.job_id)))?;
    Ok(job.submitted_at)
}

/// Submit-to-start of the samples submitted in `[from, to]`.
fn in_window(samples: &[PacedSample], from: Instant, to: Instant) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.submitted >= from && s.submitted <= to)
        .filter_map(|s| s.to_start_ms)
        .collect()
}

fn share(p: Option<f64>) -> String {
    p.map_or("n/a".into(), |p| format!("{p:.2}%"))
}

impl ScheduleBenchReport {
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let cpu = |c: &CpuShare| {
            format!(
                "coordinator thread {} of a core, persistence {}, whole process {} \
                 ({:.0} s, {} scheduled jobs started)",
                share(c.coordinator_percent),
                share(c.persistence_percent),
                share(c.process_percent),
                c.window_s,
                c.scheduled_jobs_started
            )
        };
        let _ = writeln!(
            out,
            "{} schedules of {:?} on {} ({} workers x {} slots), created in {:.1} s",
            self.schedules, self.cron, self.store, self.workers, self.capacity, self.create_s
        );
        let _ = writeln!(
            out,
            "idle, no schedules:   {}",
            cpu(&self.idle_without_schedules)
        );
        let _ = writeln!(
            out,
            "idle, with schedules: {}",
            cpu(&self.idle_with_schedules)
        );
        let p = |p: &Percentiles| {
            format!(
                "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} jobs)",
                p.p50_ms, p.p99_ms, p.max_ms, p.samples
            )
        };
        for b in &self.bursts {
            let _ = writeln!(
                out,
                "slot {}: {} fired at +{:.0} ms, started +{:.0}..+{:.0} ms",
                b.slot, b.started, b.fired_after_ms, b.first_start_ms, b.last_start_ms
            );
            let _ = writeln!(out, "  stream submit-to-start before: {}", p(&b.quiet));
            let _ = writeln!(out, "  stream submit-to-start during: {}", p(&b.during));
        }
        let _ = writeln!(
            out,
            "stream p99 submit-to-start (one job every {} ms over {} connections): \
             {:.2} ms before slots, {:.2} ms while firing: {:+.2} ms",
            self.latency_interval_ms,
            self.stream_senders,
            self.quiet.p99_ms,
            self.during.p99_ms,
            self.added_p99_ms
        );
        for b in &self.client_bursts {
            let _ = writeln!(
                out,
                "{}: {} jobs submitted by one client (frames of {CLIENT_FRAME}), \
                 started +{:.0}..+{:.0} ms",
                b.slot, b.started, b.first_start_ms, b.last_start_ms
            );
            let _ = writeln!(out, "  stream submit-to-start during: {}", p(&b.during));
        }
        let _ = writeln!(
            out,
            "stream p99 while the same jobs came from a client instead: {:.2} ms",
            self.client_during.p99_ms
        );
        out
    }
}
