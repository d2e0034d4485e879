//! The `exec` task: runs an allowed program without a shell, in a process
//! group of its own, and succeeds with its stdout.
//!
//! Guarantees:
//! - only programs whose canonical path is on the allow-list run; anything
//!   else (and an invalid payload) fails permanently;
//! - the environment is cleared, then `PATH` is set to the worker's and the
//!   payload's `env` is added (it may override `PATH`); nothing else of the
//!   worker's environment (tokens, credentials) reaches the program;
//! - memory is bounded: stdout up to `max-output-bytes`, stderr's tail;
//! - when the attempt is cancelled (coordinator cancel, deadline, drain
//!   timeout) the whole group gets SIGTERM, then SIGKILL after
//!   `exec-kill-grace-millis`, and the task ends only once no live process
//!   of the group is left; when the program exits by itself, whatever it
//!   left running in its group is killed too;
//! - if the supervising future is dropped (worker runtime shut down), the
//!   group is SIGKILLed;
//! - if the worker process dies, even by SIGKILL, the group is SIGKILLed
//!   within milliseconds: every program starts through the supervisor of
//!   `exec_supervisor`, whose watchdog outlives the worker just long enough.

use crate::worker::allow::{AllowList, ResolveError};
use crate::worker::exec_supervisor::{Lifeline, Supervisor, SupervisorError};
use crate::worker::output::{HeadCapture, StderrCapture, STDERR_TAIL_BYTES};
use crate::worker::process_group::{signal_group, wait_until_gone, GroupGuard};
use crate::worker::tasks::TaskContext;
use crate::worker::WorkerConfig;
use slog::{info, warn};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use taskyard_protocol::payloads::{decode_builtin, BuiltinTask, ExecSpec, EXEC_TASK_TYPE};
use taskyard_protocol::TaskOutcome;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// How long to wait for a group to disappear after SIGKILL before giving up
/// (and logging it): only a process stuck in the kernel survives that long.
const KILL_WAIT: Duration = Duration::from_secs(5);
const READ_CHUNK: usize = 16 * 1024;

/// The longest a cancelled `exec` attempt may take to clean up: the grace
/// period, then the wait after SIGKILL.
pub fn cleanup_time(config: &WorkerConfig) -> Duration {
    Duration::from_millis(config.exec_kill_grace_millis) + KILL_WAIT
}

/// Why `exec` cannot be offered as configured.
#[derive(Debug, Error)]
pub enum ExecSetupError {
    #[error("key `exec-allow`: {0}")]
    Allow(#[from] ResolveError),
    #[error("key `exec-supervisor`: {0}")]
    Supervisor(#[from] SupervisorError),
}

/// The `exec` task's settings, shared by all its attempts.
#[derive(Debug, Clone)]
pub struct ExecTask {
    allow: AllowList,
    supervisor: Supervisor,
    max_output_bytes: usize,
    kill_grace: Duration,
}

impl ExecTask {
    /// `None` when `exec-allow` is empty (the worker does not offer `exec`).
    /// Otherwise the allow-list must resolve, and so must the supervisor
    /// (see [`Supervisor::resolve`]): `exec` is never offered without one.
    pub fn from_config(config: &WorkerConfig) -> Result<Option<ExecTask>, ExecSetupError> {
        let allow = AllowList::resolve(&config.exec_allow)?;
        if allow.is_empty() {
            return Ok(None);
        }
        Ok(Some(ExecTask {
            allow,
            supervisor: Supervisor::resolve(&config.exec_supervisor)?,
            max_output_bytes: config.max_output_bytes,
            kill_grace: Duration::from_millis(config.exec_kill_grace_millis),
        }))
    }

    /// Runs one attempt; see the module documentation.
    pub async fn run(&self, ctx: TaskContext, payload: Vec<u8>) -> TaskOutcome {
        let spec = match decode_builtin(EXEC_TASK_TYPE, &payload) {
            Ok(Some(BuiltinTask::Exec(spec))) => spec,
            Ok(_) => return TaskOutcome::failed_permanently("not an exec payload"),
            Err(e) => return TaskOutcome::failed_permanently(e.to_string()),
        };
        let program = match self.allow.check(&spec.program) {
            Ok(program) => program,
            Err(e) => return TaskOutcome::failed_permanently(e.to_string()),
        };
        let (child, lifeline) = match self.spawn(&program, &spec) {
            Ok(started) => started,
            Err(e) => {
                return TaskOutcome::failed(format!("cannot start {}: {e}", program.display()))
            }
        };
        self.supervise(child, lifeline, &program, spec.stdin, &ctx)
            .await
    }

    /// Starts `program` through the supervisor, which becomes it (same pid,
    /// pipes and exit status) once its watchdog holds the lifeline.
    fn spawn(&self, program: &Path, spec: &ExecSpec) -> std::io::Result<(Child, Lifeline)> {
        let (lifeline, reader) = Lifeline::new()?;
        let mut cmd = self
            .supervisor
            .command(program, &spec.program, &spec.args, &reader);
        configure(&mut cmd, spec);
        let child = cmd.spawn()?;
        // Only the supervisor's copy of the read end may stay open.
        drop(reader);
        Ok((child, lifeline))
    }

    /// Runs the attempt to its end. The lifeline is released only once the
    /// group is known to be gone; otherwise dropping it makes the watchdog
    /// SIGKILL the group once more.
    async fn supervise(
        &self,
        mut child: Child,
        lifeline: Lifeline,
        program: &Path,
        stdin: Option<String>,
        ctx: &TaskContext,
    ) -> TaskOutcome {
        let pgid = child.id().map_or(0, |pid| pid as i32);
        let mut guard = GroupGuard::new(pgid);
        info!(ctx.log, "exec started"; "program" => %program.display(), "pgid" => pgid);
        let io = collect_output(&mut child, stdin, self.max_output_bytes, ctx);
        let finished = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => None,
            done = io => Some(done),
        };
        let (outcome, gone) = match finished {
            Some((stdout, stderr, status)) => {
                // The rest of the group was sent SIGKILL when the program exited.
                let gone = tokio::time::timeout(KILL_WAIT, wait_until_gone(pgid)).await;
                (outcome(program, status, stdout, stderr), gone.is_ok())
            }
            None => {
                let gone = self.terminate(&mut child, pgid, ctx).await;
                (TaskOutcome::failed("cancelled"), gone)
            }
        };
        guard.disarm();
        if gone {
            lifeline.release();
        }
        outcome
    }

    /// SIGTERM to the group; SIGKILL if it is still there after the grace
    /// period; returns once it is gone (true) or after `KILL_WAIT` more.
    async fn terminate(&self, child: &mut Child, pgid: i32, ctx: &TaskContext) -> bool {
        signal_group(pgid, libc::SIGTERM);
        let gone = tokio::time::timeout(self.kill_grace, reap(child, pgid)).await;
        if gone.is_err() {
            signal_group(pgid, libc::SIGKILL);
            if tokio::time::timeout(KILL_WAIT, reap(child, pgid))
                .await
                .is_err()
            {
                warn!(ctx.log, "exec process group survived SIGKILL"; "pgid" => pgid);
                return false;
            }
        }
        info!(ctx.log, "exec process group stopped"; "pgid" => pgid, "killed" => gone.is_err());
        true
    }
}

/// The program's environment, directory and stdio, set on the supervisor
/// (which passes them on), and a new process group for both.
fn configure(cmd: &mut Command, spec: &ExecSpec) {
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd.envs(&spec.env);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let stdin = if spec.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The worker runs with huge pages off (`crate::memory`), which
    // programs would inherit; they get the system's setting back.
    // SAFETY: the closure makes one async-signal-safe system call.
    unsafe {
        cmd.pre_exec(|| {
            crate::memory::allow_transparent_huge_pages();
            Ok(())
        });
    }
}

/// Feeds stdin, reads both pipes to their end and reaps the program. Once
/// the program has exited, the rest of its group is killed: a background
/// child would otherwise hold the pipes open and the task would never end.
async fn collect_output(
    child: &mut Child,
    stdin: Option<String>,
    limit: usize,
    ctx: &TaskContext,
) -> (Vec<u8>, StderrCapture, std::io::Result<ExitStatus>) {
    let pgid = child.id().map_or(0, |pid| pid as i32);
    let input = child.stdin.take();
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let feed = async move {
        if let (Some(mut pipe), Some(text)) = (input, stdin) {
            // A program that exits without reading its input is not an error.
            let _ = pipe.write_all(text.as_bytes()).await;
        }
    };
    let wait = async {
        let status = child.wait().await;
        signal_group(pgid, libc::SIGKILL);
        status
    };
    let (_, out, err, status) = tokio::join!(
        feed,
        read_stdout(stdout, limit),
        read_stderr(stderr, limit.min(STDERR_TAIL_BYTES), ctx),
        wait
    );
    (out, err, status)
}

async fn read_stdout(pipe: Option<impl AsyncRead + Unpin>, limit: usize) -> Vec<u8> {
    let mut head = HeadCapture::new(limit);
    if let Some(mut pipe) = pipe {
        let mut buf = vec![0; READ_CHUNK];
        while let Ok(n @ 1..) = pipe.read(&mut buf).await {
            head.push(&buf[..n]);
        }
    }
    head.finish()
}

async fn read_stderr(
    pipe: Option<impl AsyncRead + Unpin>,
    limit: usize,
    ctx: &TaskContext,
) -> StderrCapture {
    let mut capture = StderrCapture::new(limit);
    if let Some(mut pipe) = pipe {
        let mut buf = vec![0; READ_CHUNK];
        while let Ok(n @ 1..) = pipe.read(&mut buf).await {
            for line in capture.push(&buf[..n]) {
                ctx.progress(line.percent, line.message);
            }
        }
    }
    capture
}

/// Reaps the leader, then waits until no live process of its group is left.
async fn reap(child: &mut Child, pgid: i32) {
    let _ = child.wait().await;
    wait_until_gone(pgid).await;
}

fn outcome(
    program: &Path,
    status: std::io::Result<ExitStatus>,
    stdout: Vec<u8>,
    stderr: StderrCapture,
) -> TaskOutcome {
    let (tail, _) = stderr.finish();
    let stderr = if tail.is_empty() {
        String::new()
    } else {
        format!("; stderr: {tail}")
    };
    let program = program.display();
    match status {
        Ok(status) if status.success() => TaskOutcome::Succeeded(stdout),
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => {
                TaskOutcome::failed(format!("{program} exited with code {code}{stderr}"))
            }
            (_, Some(signal)) => {
                TaskOutcome::failed(format!("{program} was killed by signal {signal}{stderr}"))
            }
            _ => TaskOutcome::failed(format!("{program} ended with {status}{stderr}")),
        },
        Err(e) => TaskOutcome::failed(format!("cannot wait for {program}: {e}")),
    }
}
