//! One owner per SQLite database: an exclusive `flock` on a file beside
//! it (`PATH.lock`), taken before anything reads the database and held
//! for as long as the store is open.
//!
//! `flock` belongs to the open file description, not to the process: a
//! second open in the same process conflicts like another process would,
//! closing some other descriptor of the file never drops it (POSIX record
//! locks do both wrong), and the kernel drops it when the holder exits in
//! any way, `kill -9` included, so a lock left by a dead process never
//! blocks a restart. The file's text names the holder (pid, then the
//! addresses it listens on once they are bound) for the error a second
//! coordinator prints; the text is only ever advice, the lock is the rule.

use crate::store::StoreError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an open waits for a lock held by this same process: a store
/// of an earlier coordinator in this process (a restart in tests or the
/// recovery benchmark) may still be closing on its own thread.
const SAME_PROCESS_WAIT: Duration = Duration::from_secs(10);

/// How often a waiting open tries again.
const RETRY: Duration = Duration::from_millis(10);

/// The held lock. Dropping it (with the store) releases it.
#[derive(Debug)]
pub struct OwnerLock {
    file: File,
    path: PathBuf,
}

/// The lock file of the database at `db`: the real path of the database
/// (symbolic links resolved, so two spellings of one file share one lock)
/// with `.lock` appended.
pub fn lock_path(db: &Path) -> PathBuf {
    let real = std::fs::canonicalize(db).unwrap_or_else(|_| {
        // Not created yet: the real folder, and the name.
        match (db.parent(), db.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir)
                .map(|dir| dir.join(name))
                .unwrap_or_else(|_| db.to_path_buf()),
            _ => db.to_path_buf(),
        }
    });
    let mut name = real.into_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

impl OwnerLock {
    /// Takes the lock of the database at `db`, or fails at once with
    /// `StoreErrorKind::InUse`, naming the file and the holder, when
    /// another process holds it. Creates nothing but the lock file and
    /// writes nothing else.
    pub fn acquire(db: &Path) -> Result<OwnerLock, StoreError> {
        let path = lock_path(db);
        let (file, writable) = open_lock_file(&path)
            .map_err(|e| StoreError::sqlite(db, format!("cannot open {}: {e}", path.display())))?;
        let started = Instant::now();
        loop {
            match try_lock(&file) {
                Ok(()) => break,
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => {
                    return Err(StoreError::sqlite(
                        db,
                        format!("cannot lock {}: {e}", path.display()),
                    ))
                }
                Err(_) => {
                    let holder = read_holder(&path);
                    let ours = holder.pid == Some(std::process::id());
                    if !ours || started.elapsed() >= SAME_PROCESS_WAIT {
                        return Err(StoreError::in_use(db, &path, &holder.text));
                    }
                    std::thread::sleep(RETRY);
                }
            }
        }
        let lock = OwnerLock { file, path };
        if writable {
            lock.describe(&format!("pid {}", std::process::id()))
                .map_err(|e| {
                    StoreError::sqlite(db, format!("cannot write {}: {e}", lock.path.display()))
                })?;
        }
        Ok(lock)
    }

    /// Replaces the holder's description with `text` (which should start
    /// with `pid N`), e.g. once the listeners are bound.
    pub fn describe(&self, text: &str) -> std::io::Result<()> {
        let mut file = &self.file;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(text.as_bytes())?;
        file.write_all(b"\n")
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Records the addresses of the coordinator that holds the lock of the
/// database at `db`, for the error a second one prints. Must only be
/// called by the holder; opening the file again does not touch the lock.
pub fn record_addresses(db: &Path, addresses: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).open(lock_path(db))?;
    file.set_len(0)?;
    writeln!(file, "pid {}, {addresses}", std::process::id())
}

/// The lock file, created if missing; read-only when this user may not
/// write it (then the lock still works, and whether the database itself
/// can be written is the store's to say). True: writable.
fn open_lock_file(path: &Path) -> std::io::Result<(File, bool)> {
    let writable = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path);
    match writable {
        Ok(file) => Ok((file, true)),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            File::open(path).map(|file| (file, false)).map_err(|_| e)
        }
        Err(e) => Err(e),
    }
}

fn try_lock(file: &File) -> std::io::Result<()> {
    // SAFETY: flock takes a descriptor we own and plain flags; no memory.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What the lock file says of its holder.
struct Holder {
    pid: Option<u32>,
    text: String,
}

/// Reads the holder's description; at most 1 KiB of it, one line.
fn read_holder(path: &Path) -> Holder {
    let mut text = String::new();
    if let Ok(file) = File::open(path) {
        let _ = file.take(1024).read_to_string(&mut text);
    }
    let text = text.lines().next().unwrap_or("").trim().to_string();
    let pid = text
        .strip_prefix("pid ")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok());
    let text = if text.is_empty() {
        "a process that has not said which".to_string()
    } else {
        text
    };
    Holder { pid, text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreErrorKind;

    #[test]
    fn a_second_lock_on_one_database_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("t.db");
        let _held = OwnerLock::acquire(&db).expect("first");
        // Written as another process would have: a foreign pid is refused at once.
        record_foreign_holder(&db, "pid 1, clients 127.0.0.1:7400");
        let started = Instant::now();
        let refused = OwnerLock::acquire(&db).expect_err("second");
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(refused.kind, StoreErrorKind::InUse);
        let text = refused.to_string();
        assert!(text.contains("t.db"), "{text}");
        assert!(text.contains("pid 1, clients 127.0.0.1:7400"), "{text}");
        assert!(text.contains("t.db.lock"), "{text}");
    }

    #[test]
    fn the_lock_is_free_again_once_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("t.db");
        drop(OwnerLock::acquire(&db).expect("first"));
        let again = OwnerLock::acquire(&db).expect("after drop");
        assert!(std::fs::read_to_string(again.path())
            .expect("read")
            .starts_with(&format!("pid {}", std::process::id())));
    }

    #[test]
    fn an_open_in_this_process_waits_for_a_store_still_closing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("t.db");
        let held = OwnerLock::acquire(&db).expect("first");
        let closing = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        OwnerLock::acquire(&db).expect("waits for the first to close");
        closing.join().expect("join");
    }

    #[test]
    fn recorded_addresses_name_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("t.db");
        let held = OwnerLock::acquire(&db).expect("first");
        record_addresses(&db, "clients 127.0.0.1:1").expect("record");
        let text = std::fs::read_to_string(held.path()).expect("read");
        assert_eq!(
            text,
            format!("pid {}, clients 127.0.0.1:1\n", std::process::id())
        );
    }

    #[test]
    fn two_spellings_of_one_database_share_its_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let _held = OwnerLock::acquire(&real.join("t.db")).expect("first");
        record_foreign_holder(&real.join("t.db"), "pid 1");
        let refused = OwnerLock::acquire(&link.join("t.db")).expect_err("the same file");
        assert_eq!(refused.kind, StoreErrorKind::InUse, "{refused}");
    }

    fn record_foreign_holder(db: &Path, text: &str) {
        std::fs::write(lock_path(db), format!("{text}\n")).expect("write");
    }
}
