//! Runs a shell block of the docs the way a reader pastes it: one bash,
//! one command after another, so `export`, `cd` and background jobs
//! (`&`, `%1`) carry on from one command to the next. A command is a line
//! with the lines its trailing backslashes continue onto. Each command's
//! exit status is checked against the one expected (0 unless the caller
//! says otherwise) and the run stops at the first that differs; each
//! command's stdout and stderr are kept apart, for the checks and for the
//! failure message. Whatever a block leaves running (its background jobs
//! and their children) is killed with the block's process group.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A command of a block and the comment lines right after it (where the
/// docs show what it prints).
#[derive(Debug, Clone)]
pub struct ShellCommand {
    pub text: String,
    pub comments: Vec<String>,
}

/// The commands of a shell block; blank lines and comment lines between
/// commands are left out (comments right after a command are kept with it).
pub fn commands(block: &str) -> Vec<ShellCommand> {
    let mut found: Vec<ShellCommand> = Vec::new();
    let mut continued = false;
    for line in block.lines() {
        let trimmed = line.trim();
        if continued {
            let last = found.last_mut().expect("a continued command");
            last.text.push('\n');
            last.text.push_str(line);
        } else if let Some(comment) = trimmed.strip_prefix('#') {
            if let Some(last) = found.last_mut() {
                last.comments.push(comment.trim().to_string());
            }
        } else if !trimmed.is_empty() {
            found.push(ShellCommand {
                text: line.to_string(),
                comments: Vec::new(),
            });
        } else if let Some(last) = found.last_mut() {
            // A blank line ends what the comments after a command describe.
            last.comments.push(String::new());
        }
        continued = !trimmed.starts_with('#') && trimmed.ends_with('\\');
    }
    for command in &mut found {
        let described = command.comments.iter().take_while(|c| !c.is_empty());
        command.comments = described.cloned().collect();
    }
    found
}

/// A command as it is to be run.
#[derive(Debug, Clone)]
pub struct Step {
    pub text: String,
    /// The exit status it must end with.
    pub expect: i32,
    /// What to wait for after it (a server it started in the background),
    /// as a reader would before typing the next command.
    pub ready: Option<Ready>,
}

/// When a server started in the background is ready. Waited for up to a
/// minute (a `cargo run` may build first), or until it exits.
#[derive(Debug, Clone)]
pub enum Ready {
    /// It accepts connections on this loopback port.
    Listening(u16),
    /// Its stderr holds this text (a worker's `registered`).
    Logged(&'static str),
}

impl std::fmt::Display for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ready::Listening(port) => write!(f, "listening on port {port}"),
            Ready::Logged(text) => write!(f, "logging {text:?}"),
        }
    }
}

/// What a command did.
#[derive(Debug, Clone)]
pub struct Ran {
    pub text: String,
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Where and how a block runs.
pub struct Shell {
    /// The working directory.
    pub dir: PathBuf,
    /// Environment variables set on top of this process's (whose
    /// `TASKYARD_*` variables are removed: the block sees only what the
    /// caller gives it).
    pub env: Vec<(String, OsString)>,
    /// Further variables of this process's the block does not see.
    pub env_remove: Vec<OsString>,
    /// Longest the whole block may take.
    pub timeout: Duration,
}

/// The status a failed readiness wait is recorded with.
const NOT_READY: i32 = 101;

impl Shell {
    /// Runs `steps` in one bash; every command that ran, or why the run
    /// failed: a command's exit status not the expected one, a server
    /// never ready, or the timeout.
    pub fn run(&self, steps: &[Step]) -> Result<Vec<Ran>, String> {
        let log = tempfile::tempdir().expect("log dir");
        let mut bash = Command::new("bash");
        bash.arg("-c")
            .arg(script(log.path(), steps))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(super::processes::append_log(&log.path().join("bash.err")))
            .process_group(0);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("TASKYARD_") {
                bash.env_remove(name);
            }
        }
        for name in &self.env_remove {
            bash.env_remove(name);
        }
        bash.envs(self.env.iter().map(|(k, v)| (k, v)));
        let child = bash.spawn().expect("start bash");
        let mut group = Group(child);
        let finished = group.wait(self.timeout);
        drop(group);
        let ran = collect(log.path(), steps);
        match finished {
            false => Err(format!(
                "timed out after {:?}, running: {}",
                self.timeout,
                steps.get(ran.len()).map_or("?", |s| s.text.as_str())
            )),
            true => check(steps, ran, log.path()),
        }
    }
}

/// The bash script: the helpers, then each step with its output redirected
/// to files of its own and its status recorded and checked.
fn script(log: &Path, steps: &[Step]) -> String {
    let log = log.display().to_string();
    assert!(!log.contains('\''), "a log path without quotes: {log}");
    let mut script = format!(
        "__log='{log}'\n\
         __done() {{ echo \"$1 $2\" >> \"$__log/status\"; [ \"$2\" -eq \"$3\" ] || exit 100; }}\n\
         __listening() {{ (exec 5<>\"/dev/tcp/127.0.0.1/$1\") 2>/dev/null; }}\n\
         __logged() {{ grep -qF -- \"$2\" \"$__log/$1.err\"; }}\n\
         __ready() {{\n  pid=$1; shift\n  for _ in $(seq 2400); do\n    \
         \"$@\" && return 0\n    kill -0 \"$pid\" 2>/dev/null || {{ \"$@\"; return; }}\n    \
         sleep 0.025\n  done\n  return 1\n}}\n"
    );
    for (i, step) in steps.iter().enumerate() {
        script.push_str(&format!(
            "exec 3>&1 4>&2 >\"$__log/{i}.out\" 2>\"$__log/{i}.err\"\n{}\n__s=$?\n__bg=$!\n\
             exec 1>&3 2>&4 3>&- 4>&-\n",
            step.text
        ));
        let check = match &step.ready {
            Some(Ready::Listening(port)) => format!("__listening {port}"),
            Some(Ready::Logged(text)) => {
                assert!(!text.contains('\''), "no quote in {text:?}");
                format!("__logged {i} '{text}'")
            }
            None => String::new(),
        };
        if !check.is_empty() {
            script.push_str(&format!("__ready \"$__bg\" {check} || __s={NOT_READY}\n"));
        }
        script.push_str(&format!("__done {i} $__s {}\n", step.expect));
    }
    script
}

/// The commands that ran, with their status and output.
fn collect(log: &Path, steps: &[Step]) -> Vec<Ran> {
    let statuses = std::fs::read_to_string(log.join("status")).unwrap_or_default();
    let read = |name: String| std::fs::read_to_string(log.join(name)).unwrap_or_default();
    statuses
        .lines()
        .filter_map(|line| {
            let (i, status) = line.split_once(' ')?;
            let i: usize = i.parse().ok()?;
            Some(Ran {
                text: steps.get(i)?.text.clone(),
                status: status.parse().ok()?,
                stdout: read(format!("{i}.out")),
                stderr: read(format!("{i}.err")),
            })
        })
        .collect()
}

/// Every step ran with its expected status, else a message naming the
/// first that did not.
fn check(steps: &[Step], ran: Vec<Ran>, log: &Path) -> Result<Vec<Ran>, String> {
    if let Some((last, step)) = ran.last().zip(steps.get(ran.len().saturating_sub(1))) {
        if last.status != step.expect {
            let what = match (last.status, &step.ready) {
                (NOT_READY, Some(ready)) => {
                    format!("ran, but was not {ready} within a minute (or exited)")
                }
                (status, _) => format!("exited {status}, not {}", step.expect),
            };
            return Err(format!(
                "`{}` {what}\n--- its stdout:\n{}\n--- its stderr:\n{}{}",
                last.text,
                last.stdout,
                last.stderr,
                background_logs(&ran)
            ));
        }
    }
    if ran.len() < steps.len() {
        let bash = std::fs::read_to_string(log.join("bash.err")).unwrap_or_default();
        return Err(format!(
            "bash stopped after {} of {} commands: {bash}",
            ran.len(),
            steps.len()
        ));
    }
    Ok(ran)
}

/// The stderr of the commands before the last that ran in the background
/// (servers, whose log tells why a later command found none).
fn background_logs(ran: &[Ran]) -> String {
    let earlier = &ran[..ran.len().saturating_sub(1)];
    earlier
        .iter()
        .filter(|r| r.text.contains(" & ") || r.text.trim_end().ends_with('&'))
        .map(|r| {
            let tail = r.stderr.len().saturating_sub(2000);
            let tail = r.stderr.get(tail..).unwrap_or(&r.stderr);
            format!("\n--- stderr of `{}` (in the background):\n{tail}", r.text)
        })
        .collect()
}

/// The block's bash and everything it started, killed together.
struct Group(std::process::Child);

impl Group {
    /// True when bash exited within `timeout`.
    fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) of the process group this test made for the block.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}
