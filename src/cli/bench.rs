//! `taskyard bench`: flags, progress on a terminal, and the report.

use crate::bench::{self, BenchOptions};
use crate::cli::{CliError, Context, Exit};
use crate::config::{LogFormat, LogLevel, StoreKind, Synchronous};
use clap::{Args, Subcommand};
use std::io::{IsTerminal, Write};
use std::time::Duration;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: Option<BenchWhat>,
    /// No-op jobs to submit and drain.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub jobs: u64,
    /// In-process workers.
    #[arg(long, value_name = "W", default_value_t = 4)]
    pub workers: u32,
    /// Task slots per worker.
    #[arg(long, value_name = "C", default_value_t = 8)]
    pub capacity: u32,
    /// Jobs each worker takes beyond its slots, waiting for one (the
    /// worker's `prefetch`).
    #[arg(long, value_name = "P", default_value_t = 0)]
    pub prefetch: u32,
    /// With --store postgres: the coordinator's
    /// `postgres-write-connections`.
    #[arg(long, value_name = "N", default_value_t = crate::config::defaults::POSTGRES_WRITE_CONNECTIONS)]
    pub write_connections: usize,
    /// Submit every job first, then start the workers: the drain is timed
    /// from their start (a backlog), not from the first submission.
    #[arg(long)]
    pub backlog: bool,
    /// Submitting connections, one thread each.
    #[arg(long, value_name = "K", default_value_t = 4)]
    pub clients: u32,
    /// Jobs per SubmitBatch; 1 sends one Submit per job.
    #[arg(long, value_name = "B", default_value_t = 100)]
    pub batch: u32,
    /// Jobs each client keeps in flight (written ahead of their answers).
    #[arg(long, value_name = "N", default_value_t = 400)]
    pub window: u32,
    /// Size of each job's MessagePack payload.
    #[arg(long, value_name = "BYTES", default_value_t = 32)]
    pub payload_bytes: usize,
    /// Give the jobs concurrency keys bench:0 .. bench:N-1, in turn
    /// (flow control's cost); 0: no key.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub concurrency_keys: u32,
    /// The coordinator started here limits each bench: key to N running
    /// jobs (`[[limit]]` pattern "bench:*"); 0: no limit.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub limit: u32,
    /// SQLite synchronous mode of the coordinator started here.
    #[arg(long, default_value = "full")]
    pub synchronous: Synchronous,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Queue this many LOW jobs of a type no worker runs before measuring.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preload: u64,
    /// Also connect N raw workers that only heartbeat, and report the
    /// coordinator thread's CPU while they do.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub idle_workers: u32,
    /// How long to measure the idle workers' cost.
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub idle_secs: u64,
    /// Jobs in the paced latency phase (0 skips it).
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub latency_jobs: u32,
    /// Pause between paced jobs.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    pub latency_interval_ms: u64,
    /// At the end, restart the coordinator on its database and time recovery.
    #[arg(long)]
    pub recovery: bool,
    /// Before starting the coordinator, store this many finished jobs in
    /// its database (one transaction), as months of running would leave.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed_finished: u64,
    /// Make the --seed-finished jobs 8 days old, past the default
    /// job-retention (7 days), so expiry deletes them during the run.
    #[arg(long, requires = "seed_finished")]
    pub seed_expired: bool,
    /// With --coordinator: where the in-process workers connect (default:
    /// the client port plus one).
    #[arg(long, value_name = "ADDR")]
    pub worker_addr: Option<String>,
    /// Log level of the in-process coordinator and workers (stderr). The
    /// default keeps the expected "worker lost" lines of the final stop quiet.
    #[arg(long, default_value = "error")]
    pub log_level: LogLevel,
}

/// Which store the coordinator started here uses.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// `sqlite` (a temporary file) or `postgres`: the coordinator starts
    /// as `taskyard-coordinator` does with `store = "postgres"` (it wins
    /// the leader lease and writes under its fence).
    #[arg(long, default_value = "sqlite")]
    pub store: StoreKind,
    /// With --store postgres: the database to use (else
    /// $TASKYARD_POSTGRES_URL, else a throwaway cluster started and
    /// stopped by the bench). Its `taskyard` schema is dropped first
    /// (refused when a coordinator other than a bench's checked in there).
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,
}

/// Benchmarks other than the default throughput run.
#[derive(Debug, Subcommand)]
pub enum BenchWhat {
    /// Time coordinator start-up on a database holding many finished jobs.
    Recovery(RecoveryArgs),
    /// Time a standby's takeover after the leader is killed (PostgreSQL).
    Takeover(TakeoverArgs),
    /// What schedules cost: idle CPU with many schedules, and ordinary
    /// jobs' latency while all of them fire at once.
    Schedules(ScheduleBenchArgs),
    /// What a history page costs on a large database: each
    /// filter's first and tenth page, both orders, and a plain page while
    /// 8 readers run the slowest filter.
    History(HistoryBenchArgs),
}

#[derive(Debug, Args)]
pub struct HistoryBenchArgs {
    /// Finished jobs to store first (1% FAILED, four task types, three priorities).
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    pub finished: u64,
    /// Keep the SQLite database in this (new) file instead of a temporary one.
    #[arg(long, value_name = "FILE")]
    pub db: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub struct ScheduleBenchArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Schedules to create.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub schedules: u32,
    /// Every schedule's cron expression (all fire at the same moments).
    #[arg(long, value_name = "EXPR", default_value = "* * * * *")]
    pub cron: String,
    /// Whole minutes the idle coordinator's CPU is measured over.
    #[arg(long, value_name = "M", default_value_t = 2)]
    pub minutes: u32,
    /// Slots the ordinary job stream runs across.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub bursts: u32,
    /// Workers running the scheduled jobs.
    #[arg(long, value_name = "W", default_value_t = 4)]
    pub workers: u32,
    /// Task slots per worker.
    #[arg(long, value_name = "C", default_value_t = 8)]
    pub capacity: u32,
    /// Pause between the ordinary stream's jobs. At 1 ms some 400 of them
    /// fall within a slot's firing, so its p99 is not just its worst job.
    #[arg(long, value_name = "MS", default_value_t = 1)]
    pub latency_interval_ms: u64,
}

#[derive(Debug, Args)]
pub struct TakeoverArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Times the leader is killed.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: u32,
    /// leader-lease of both coordinators, in milliseconds (default: the config's).
    #[arg(long, value_name = "MS",
          default_value_t = crate::config::CoordinatorConfig::default().leader_lease_millis)]
    pub lease_millis: u64,
    /// In-process workers (given both coordinators' worker addresses).
    #[arg(long, value_name = "W", default_value_t = 2)]
    pub workers: u32,
    /// Task slots per worker.
    #[arg(long, value_name = "C", default_value_t = 8)]
    pub capacity: u32,
    /// Pause between the job stream's submissions.
    #[arg(long, value_name = "MS", default_value_t = 2)]
    pub interval_ms: u64,
}

#[derive(Debug, Args)]
pub struct RecoveryArgs {
    /// Finished (SUCCEEDED) jobs to store first.
    #[arg(long, value_name = "N", default_value_t = 5_000_000)]
    pub finished: u64,
    /// Active (QUEUED) jobs to store first.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    pub active: u64,
    /// Give every stored job an idempotency key.
    #[arg(long)]
    pub keyed: bool,
    /// Timed start-ups.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: u32,
    /// Keep the database in this (new) file, e.g. to start
    /// `taskyard-coordinator` on it.
    #[arg(long, value_name = "FILE")]
    pub db: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs the benchmark and prints its report.
pub fn run(ctx: &Context, args: BenchArgs) -> Result<Exit, CliError> {
    match args.what {
        Some(BenchWhat::Recovery(recovery)) => return run_recovery(ctx, recovery, args.log_level),
        Some(BenchWhat::Takeover(takeover)) => return run_takeover(ctx, takeover, args.log_level),
        Some(BenchWhat::Schedules(ref schedules)) => {
            return run_schedules(ctx, &args, schedules, args.log_level)
        }
        Some(BenchWhat::History(history)) => return run_history(ctx, history),
        None => {}
    }
    if ctx.coordinator_given && args.store.store == StoreKind::Postgres {
        return Err(CliError::BadArgument(
            "--store postgres starts a coordinator here; it cannot be used with --coordinator"
                .into(),
        ));
    }
    if ctx.coordinator_given && args.limit > 0 {
        return Err(CliError::BadArgument(
            "--limit sets the limit of the coordinator started here; with --coordinator, declare \
             [[limit]] in that coordinator's config"
                .into(),
        ));
    }
    if args.jobs == 0
        || args.workers == 0
        || args.capacity == 0
        || args.clients == 0
        || args.batch == 0
    {
        return Err(CliError::BadArgument(
            "--jobs, --workers, --capacity, --clients and --batch must be at least 1".into(),
        ));
    }
    if args.seed_finished > 0 && ctx.coordinator_given {
        return Err(CliError::BadArgument(
            "--seed-finished writes the database of the coordinator bench starts; \
             it cannot be used with --coordinator"
                .into(),
        ));
    }
    let log = crate::logging::build_logger(args.log_level, LogFormat::Text);
    let opts = options(ctx, &args);
    let tty = std::io::stderr().is_terminal();
    let progress = |phase: &str, done: u64, total: u64| {
        if tty {
            draw(phase, done, total);
        }
    };
    let report = bench::run(&opts, log, &progress);
    if tty {
        eprint!("\r\x1b[2K");
    }
    let report = report.map_err(|e| CliError::Setup(format!("bench: {e}")))?;
    print(ctx, &report, || report.to_text())
}

/// Writes `report` to stdout: one JSON document with `--json`, else `text`.
fn print<R: serde::Serialize>(
    ctx: &Context,
    report: &R,
    text: impl FnOnce() -> String,
) -> Result<Exit, CliError> {
    let text = if ctx.json {
        serde_json::to_string_pretty(report).map_err(|e| CliError::Setup(e.to_string()))? + "\n"
    } else {
        text()
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(CliError::Output)?;
    Ok(Exit::Success)
}

fn options(ctx: &Context, args: &BenchArgs) -> BenchOptions {
    BenchOptions {
        coordinator: ctx.coordinator_given.then(|| ctx.coordinator.clone()),
        client: ctx.options.clone(),
        worker_addr: args.worker_addr.clone(),
        jobs: args.jobs,
        workers: args.workers,
        capacity: args.capacity,
        prefetch: args.prefetch,
        write_connections: args.write_connections,
        backlog: args.backlog,
        clients: args.clients,
        batch: args.batch,
        window: args.window,
        payload_bytes: args.payload_bytes,
        synchronous: args.synchronous,
        store: args.store.store,
        postgres_url: args.store.postgres_url.clone(),
        preload: args.preload,
        idle_workers: args.idle_workers,
        idle_window: Duration::from_secs(args.idle_secs.max(1)),
        latency_jobs: args.latency_jobs,
        latency_interval: Duration::from_millis(args.latency_interval_ms),
        recovery: args.recovery,
        seed_finished: args.seed_finished,
        seed_expired: args.seed_expired,
        schedules: 0,
        concurrency_keys: args.concurrency_keys,
        limit: args.limit,
    }
}

/// `bench history`: seeds a database, times history pages on it, reports.
fn run_history(ctx: &Context, args: HistoryBenchArgs) -> Result<Exit, CliError> {
    let setup = |e: bench::BenchError| CliError::Setup(format!("bench history: {e}"));
    // Removed on drop, with the database when no --db was given.
    let temp = bench::TempDir::create().map_err(setup)?;
    let db = match args.db {
        Some(db) if db.exists() => {
            return Err(CliError::BadArgument(format!(
                "--db {}: the file exists; bench history seeds a new one",
                db.display()
            )))
        }
        Some(db) => db,
        None => temp.0.join("history.db"),
    };
    let store = match args.store.store {
        StoreKind::Sqlite => bench::history::HistoryStore::Sqlite(db),
        StoreKind::Postgres => bench::history::HistoryStore::Postgres(
            bench::postgres::BenchPostgres::prepare(args.store.postgres_url.as_deref())
                .map_err(setup)?,
        ),
    };
    let report = bench::history::run(&store, args.finished).map_err(setup)?;
    print(ctx, &report, || report.to_text())
}

/// `bench recovery`: seeds a database, times start-ups on it, reports.
fn run_recovery(ctx: &Context, args: RecoveryArgs, level: LogLevel) -> Result<Exit, CliError> {
    let opts = bench::startup::StartupOptions {
        finished: args.finished,
        active: args.active,
        keyed: args.keyed,
        runs: args.runs,
        db: args.db,
        store: args.store.store,
        postgres_url: args.store.postgres_url,
    };
    let log = crate::logging::build_logger(level, LogFormat::Text);
    let report = bench::startup::run(&opts, log)
        .map_err(|e| CliError::Setup(format!("bench recovery: {e}")))?;
    print(ctx, &report, || report.to_text())
}

/// `bench takeover`: two coordinator processes on PostgreSQL, the leader
/// killed `--runs` times.
fn run_takeover(ctx: &Context, args: TakeoverArgs, level: LogLevel) -> Result<Exit, CliError> {
    if args.store.store != StoreKind::Postgres {
        return Err(CliError::BadArgument(
            "bench takeover needs --store postgres (a takeover needs a shared database)".into(),
        ));
    }
    if args.runs == 0 || args.workers == 0 || args.capacity == 0 || args.lease_millis == 0 {
        return Err(CliError::BadArgument(
            "--runs, --workers, --capacity and --lease-millis must be at least 1".into(),
        ));
    }
    let program = std::env::current_exe()
        .map_err(|e| CliError::Setup(format!("bench takeover: cannot find this program: {e}")))?
        .with_file_name("taskyard-coordinator");
    let opts = bench::takeover::TakeoverOptions {
        runs: args.runs,
        lease_millis: args.lease_millis,
        workers: args.workers,
        capacity: args.capacity,
        interval: Duration::from_millis(args.interval_ms),
        postgres_url: args.store.postgres_url,
        coordinator_program: program,
    };
    let log = crate::logging::build_logger(level, LogFormat::Text);
    let report = bench::takeover::run(&opts, log)
        .map_err(|e| CliError::Setup(format!("bench takeover: {e}")))?;
    print(ctx, &report, || report.to_text())
}

/// `bench schedules`: a coordinator started here, many schedules firing
/// at once, and an ordinary job stream across their slots.
fn run_schedules(
    ctx: &Context,
    args: &BenchArgs,
    schedules: &ScheduleBenchArgs,
    level: LogLevel,
) -> Result<Exit, CliError> {
    if ctx.coordinator_given {
        return Err(CliError::BadArgument(
            "bench schedules measures a coordinator it starts (its CPU is read in this \
             process); it cannot be used with --coordinator"
                .into(),
        ));
    }
    if schedules.schedules == 0
        || schedules.minutes == 0
        || schedules.workers == 0
        || schedules.capacity == 0
    {
        return Err(CliError::BadArgument(
            "--schedules, --minutes, --workers and --capacity must be at least 1".into(),
        ));
    }
    let opts = bench::schedules::ScheduleBenchOptions {
        base: BenchOptions {
            store: schedules.store.store,
            postgres_url: schedules.store.postgres_url.clone(),
            workers: schedules.workers,
            capacity: schedules.capacity,
            latency_interval: Duration::from_millis(schedules.latency_interval_ms),
            schedules: schedules.schedules,
            ..options(ctx, args)
        },
        cron: schedules.cron.clone(),
        minutes: schedules.minutes,
        bursts: schedules.bursts,
    };
    let log = crate::logging::build_logger(level, LogFormat::Text);
    let report = bench::schedules::run(&opts, log)
        .map_err(|e| CliError::Setup(format!("bench schedules: {e}")))?;
    print(ctx, &report, || report.to_text())
}

/// One line, redrawn in place: `drain [#####.....] 12000/20000`.
fn draw(phase: &str, done: u64, total: u64) {
    const WIDTH: u64 = 30;
    let filled = (done.min(total) * WIDTH)
        .checked_div(total)
        .unwrap_or(WIDTH) as usize;
    eprint!(
        "\r{phase} [{}{}] {done}/{total}",
        "#".repeat(filled),
        ".".repeat(WIDTH as usize - filled)
    );
}
