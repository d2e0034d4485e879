//! The `exec` supervisor: what makes an `exec` program's whole process group
//! die with its worker, however the worker dies (`kill -9` and the OOM
//! killer included).
//!
//! The worker does not start a program itself. It starts the supervisor,
//! `<supervisor> --supervise-exec <fd> <program> <argv0> <args>...`, in a
//! new process group, and passes it the read end of a pipe, the *lifeline*,
//! as `<fd>`; the worker keeps the only write end. The supervisor is
//! `taskyard-worker` itself (`/proc/self/exe`) or the binary named by
//! `exec-supervisor` (see [`Supervisor::resolve`]). It
//!
//! 1. forks a *watchdog*, twice over, into a session of its own with stdin,
//!    stdout and stderr on /dev/null: it holds none of the program's pipes,
//!    is not in its group, and is no process's child but init's (a shell's
//!    `wait` cannot wait for it);
//! 2. execs the program in its own place: the program keeps the pid the
//!    worker spawned, leads the group, and has the worker's pipes and exit
//!    status directly, exactly as if the worker had started it.
//!
//! The watchdog blocks reading the lifeline. The kernel closes the write end
//! when the worker exits in any way, so a dead worker means end-of-file, and
//! the watchdog then SIGKILLs the whole group at once: no grace period, as
//! the coordinator is already retrying the job elsewhere. When an attempt
//! ends, the worker waits until the group is gone and then writes one byte
//! (`Lifeline::release`): the watchdog exits without signalling anything.
//!
//! Why not `PR_SET_PDEATHSIG`: it fires when the *thread* that spawned the
//! child exits (task threads come and go), and it reaches one process, not
//! a shell script's children.
//!
//! Guarantees: once the supervisor has exec'd a program, every process of
//! its group gets SIGKILL within milliseconds of the worker's death, and the
//! watchdog outlives neither the worker nor the attempt. If the watchdog
//! cannot be started the program is not run (exit 127, the reason on
//! stderr). Not covered: a process that leaves the group (`setsid`), as
//! everywhere in `exec`.

use crate::worker::process_group::signal_group;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use thiserror::Error;

/// The first argument that makes a binary the `exec` supervisor.
pub const SUPERVISE_FLAG: &str = "--supervise-exec";

/// Set by [`run_if_requested`]: this binary can supervise its own programs.
static OFFERED: AtomicBool = AtomicBool::new(false);

/// Call first thing in `main`, before any thread starts, in a binary that
/// runs `exec` tasks (`taskyard-worker` does). Started as the supervisor,
/// the process becomes the program and this never returns (exit 127 with
/// the reason on stderr if that fails); otherwise it returns at once and
/// records that `exec-supervisor` may stay unset: the binary is its own.
pub fn run_if_requested() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(SUPERVISE_FLAG)) {
        OFFERED.store(true, Ordering::Relaxed);
        return;
    }
    let error = match Request::parse(args) {
        Ok(request) => become_program(request),
        Err(e) => e,
    };
    eprintln!("taskyard exec supervisor: {error}");
    std::process::exit(127);
}

/// Why the supervisor could not run the program.
#[derive(Debug, Error)]
enum SuperviseError {
    #[error("usage: {SUPERVISE_FLAG} <lifeline-fd> <program> <argv0> [args...]")]
    Usage,
    #[error("lifeline fd {fd}: {source}")]
    Lifeline { fd: RawFd, source: io::Error },
    #[error("cannot start the watchdog: {0}")]
    Watchdog(io::Error),
    #[error("cannot start {}: {source}", program.display())]
    Exec { program: PathBuf, source: io::Error },
}

/// The supervisor's command line after [`SUPERVISE_FLAG`].
#[derive(Debug, PartialEq)]
struct Request {
    lifeline: RawFd,
    program: PathBuf,
    arg0: OsString,
    args: Vec<OsString>,
}

impl Request {
    fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Request, SuperviseError> {
        let lifeline = args
            .next()
            .and_then(|fd| fd.to_str()?.parse().ok())
            .filter(|fd| *fd > 2)
            .ok_or(SuperviseError::Usage)?;
        let program = args.next().ok_or(SuperviseError::Usage)?.into();
        let arg0 = args.next().ok_or(SuperviseError::Usage)?;
        Ok(Request {
            lifeline,
            program,
            arg0,
            args: args.collect(),
        })
    }
}

/// Starts the watchdog, then execs the program; returns only on failure.
fn become_program(request: Request) -> SuperviseError {
    let fd = request.lifeline;
    let lifeline_error = |source| SuperviseError::Lifeline { fd, source };
    // A no-op when the worker made this process a group leader already; run
    // by hand, it makes the group the watchdog may kill this one, never the
    // caller's.
    // SAFETY: setpgid and getpgrp take and return plain integers.
    let pgid = unsafe {
        libc::setpgid(0, 0);
        libc::getpgrp()
    };
    if let Err(e) = set_fd_flags(fd, 0) {
        return lifeline_error(e);
    }
    if let Err(e) = start_watchdog(fd, pgid) {
        return SuperviseError::Watchdog(e);
    }
    // The program must not hold the lifeline: only the watchdog reads it.
    if let Err(e) = set_fd_flags(fd, libc::FD_CLOEXEC) {
        return lifeline_error(e);
    }
    let source = std::process::Command::new(&request.program)
        .arg0(&request.arg0)
        .args(&request.args)
        .exec();
    SuperviseError::Exec {
        program: request.program,
        source,
    }
}

/// Sets the fd's flags (`FD_CLOEXEC` or none); fails if it is not open.
/// Only makes a system call, so it may run between `fork` and `exec`.
fn set_fd_flags(fd: RawFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl(F_SETFD) takes plain integers and touches no memory.
    match unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// Forks an intermediate process that starts the watchdog and exits;
/// returns once it has exited, so the watchdog is running (and off the
/// program's pipes) before the program starts.
fn start_watchdog(lifeline: RawFd, pgid: libc::pid_t) -> io::Result<()> {
    // SAFETY: the supervisor is single-threaded (`run_if_requested` runs
    // first in `main`), so the child may run any code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let code = i32::from(detach_and_fork(lifeline, pgid).is_err());
            // SAFETY: _exit ends this forked copy without running the
            // supervisor's exit handlers a second time.
            unsafe { libc::_exit(code) }
        }
        intermediate => wait_for_success(intermediate),
    }
}

/// In the intermediate process: a new session, /dev/null for stdio, then
/// the watchdog as its child, which init adopts once this process exits.
fn detach_and_fork(lifeline: RawFd, pgid: libc::pid_t) -> io::Result<()> {
    // SAFETY: setsid takes no arguments; this process leads no group.
    if unsafe { libc::setsid() } == -1 {
        return Err(io::Error::last_os_error());
    }
    stdio_to_dev_null()?;
    // SAFETY: still single-threaded.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => watch(lifeline, pgid),
        _ => Ok(()),
    }
}

fn stdio_to_dev_null() -> io::Result<()> {
    let null = File::options().read(true).write(true).open("/dev/null")?;
    for stdio in 0..=2 {
        // SAFETY: dup2 takes plain integers; both fds are open.
        if unsafe { libc::dup2(null.as_raw_fd(), stdio) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The watchdog: SIGKILLs group `pgid` unless the worker releases it.
fn watch(lifeline: RawFd, pgid: libc::pid_t) -> ! {
    // Hold no directory (and so no mount) busy.
    let _ = std::env::set_current_dir("/");
    // SAFETY: the fd is open (checked by the supervisor) and owned by
    // nothing else in this process.
    let mut lifeline = unsafe { File::from_raw_fd(lifeline) };
    if !released(&mut lifeline) {
        signal_group(pgid, libc::SIGKILL);
    }
    // SAFETY: as in `start_watchdog`.
    unsafe { libc::_exit(0) }
}

/// Blocks until the worker writes its byte (true), or the lifeline ends or
/// fails (false: the worker is gone, or it can no longer be watched).
fn released(lifeline: &mut impl Read) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match lifeline.read(&mut byte) {
            Ok(n) => return n > 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
}

/// Reaps `pid`; an error unless it exited with status 0.
fn wait_for_success(pid: libc::pid_t) -> io::Result<()> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes only the status integer we pass.
        if unsafe { libc::waitpid(pid, &mut status, 0) } != -1 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    match libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        true => Ok(()),
        false => Err(io::Error::other("setsid, /dev/null or fork failed")),
    }
}

/// Why `exec` has no supervisor to start its programs with.
#[derive(Debug, Error)]
pub enum SupervisorError {
    #[error(
        "unset, and this program cannot be its own exec supervisor (its main does not call \
         taskyard::worker::exec_supervisor::run_if_requested first); set it to a \
         taskyard-worker binary"
    )]
    NotOffered,
    #[error("{} is not an executable file", path.display())]
    NotExecutable { path: PathBuf },
}

/// The binary that supervises `exec` programs, resolved once at start-up.
#[derive(Debug, Clone)]
pub struct Supervisor {
    path: PathBuf,
}

impl Supervisor {
    /// `configured` (the key `exec-supervisor`) if set, which must be an
    /// executable file whose `main` calls [`run_if_requested`] (any
    /// `taskyard-worker` binary). If unset, the running program, when its
    /// `main` called [`run_if_requested`]; on Linux through
    /// `/proc/self/exe`, which runs the same binary even after it was
    /// replaced on disk. Otherwise [`SupervisorError::NotOffered`].
    pub fn resolve(configured: &Path) -> Result<Supervisor, SupervisorError> {
        if !configured.as_os_str().is_empty() {
            return match crate::worker::allow::is_executable(configured) {
                true => Ok(Supervisor {
                    path: configured.to_path_buf(),
                }),
                false => Err(SupervisorError::NotExecutable {
                    path: configured.to_path_buf(),
                }),
            };
        }
        match OFFERED.load(Ordering::Relaxed) {
            true => own_executable().ok_or(SupervisorError::NotOffered),
            false => Err(SupervisorError::NotOffered),
        }
    }

    /// A command that runs `program` as `arg0` with `args` under the
    /// supervisor, watched through `lifeline`. The caller adds environment,
    /// directory and stdio (all passed on to the program), and must start
    /// it in a new process group (`process_group(0)`): that group is the
    /// one the watchdog kills.
    pub(crate) fn command(
        &self,
        program: &Path,
        arg0: &str,
        args: &[String],
        lifeline: &PipeReader,
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.path);
        cmd.arg0("taskyard-exec-supervisor")
            .arg(SUPERVISE_FLAG)
            .arg(lifeline.as_raw_fd().to_string())
            .arg(program)
            .arg(arg0)
            .args(args);
        let fd = lifeline.as_raw_fd();
        // The pipe is close-on-exec, so no other child inherits it; this
        // child's copy must survive its exec.
        // SAFETY: the closure makes one async-signal-safe system call.
        unsafe {
            cmd.pre_exec(move || set_fd_flags(fd, 0));
        }
        cmd
    }
}

fn own_executable() -> Option<Supervisor> {
    #[cfg(target_os = "linux")]
    let path = Some(PathBuf::from("/proc/self/exe"));
    #[cfg(not(target_os = "linux"))]
    let path = std::env::current_exe().ok();
    path.map(|path| Supervisor { path })
}

/// The worker's end of one supervisor's lifeline. Dropping it (and the
/// worker's death, which drops it too) makes the watchdog SIGKILL the
/// program's group; [`release`](Lifeline::release) makes it leave.
pub(crate) struct Lifeline(PipeWriter);

impl Lifeline {
    /// The worker's end, and the end to give [`Supervisor::command`] (to
    /// drop once the supervisor is spawned). Both are close-on-exec.
    pub(crate) fn new() -> io::Result<(Lifeline, PipeReader)> {
        let (reader, writer) = std::io::pipe()?;
        Ok((Lifeline(writer), reader))
    }

    /// Lets the watchdog exit without signalling. Only once no process of
    /// the group is left: the group's id may then be reused.
    pub(crate) fn release(mut self) {
        // A watchdog that is already gone is not an error.
        let _ = self.0.write_all(b".");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = OsString> {
        list.iter()
            .map(OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn the_request_is_the_lifeline_the_program_its_argv0_and_its_args() {
        let request = Request::parse(args(&["7", "/bin/sh", "sh", "-c", "exit 3"]));
        assert_eq!(
            request.expect("valid"),
            Request {
                lifeline: 7,
                program: PathBuf::from("/bin/sh"),
                arg0: "sh".into(),
                args: vec!["-c".into(), "exit 3".into()],
            }
        );
    }

    #[test]
    fn a_missing_part_or_a_bad_fd_is_a_usage_error() {
        for bad in [&[][..], &["7"], &["7", "/bin/sh"], &["x", "/bin/sh", "sh"]] {
            let err = Request::parse(args(bad)).expect_err("refused");
            assert!(matches!(err, SuperviseError::Usage), "{bad:?}: {err}");
        }
        // stdin, stdout and stderr belong to the program.
        assert!(Request::parse(args(&["1", "/bin/sh", "sh"])).is_err());
    }

    #[test]
    fn the_watchdog_stands_down_on_a_byte_and_fires_on_end_of_file() {
        let (lifeline, mut reader) = Lifeline::new().expect("pipe");
        lifeline.release();
        assert!(released(&mut reader));
        let (lifeline, mut reader) = Lifeline::new().expect("pipe");
        drop(lifeline);
        assert!(!released(&mut reader));
    }

    #[test]
    fn a_configured_supervisor_must_be_an_executable_file() {
        let plain = tempfile::NamedTempFile::new().expect("temp file");
        let err = Supervisor::resolve(plain.path()).expect_err("not executable");
        assert!(err.to_string().contains("not an executable file"), "{err}");
        assert!(Supervisor::resolve(Path::new("/bin/sh")).is_ok());
    }

    #[test]
    fn unset_without_run_if_requested_names_what_to_do() {
        // The test binary's main does not call `run_if_requested`.
        let err = Supervisor::resolve(Path::new("")).expect_err("not offered");
        assert!(err.to_string().contains("run_if_requested"), "{err}");
    }
}
