//! Writing the WAL's space ahead of time. SQLite appends to its WAL until
//! a checkpoint, then overwrites it from the start. An append that grows
//! the file makes the commit's fsync write file-system metadata too; an
//! overwrite in place does not, and costs about half as much (ext4 here:
//! ~140 µs instead of ~320 µs for 40 KiB, see BENCHMARKS.md). Filling the
//! WAL with zeros up to the size it reaches between checkpoints makes every
//! commit an overwrite, from the first one on (as PostgreSQL does with its
//! zero-filled WAL segments).
//!
//! Zeros after the WAL's last frame are never read as frames: SQLite's
//! recovery stops at the first frame whose salt and checksum do not match
//! its header, and a WAL whose header is zeros counts as empty. So the
//! zeros are appended only after the file's current end, never over it.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes of the WAL header and of each frame's header.
const WAL_HEADER_BYTES: u64 = 32;
const FRAME_HEADER_BYTES: u64 = 24;

/// Frames beyond the checkpoint threshold that one commit may add before
/// the checkpoint runs (a commit is never split).
const OVERSHOOT_FRAMES: u64 = 1024;

const CHUNK_BYTES: usize = 1 << 20;

/// The WAL file of database `db`.
pub fn wal_path(db: &Path) -> PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// The size a WAL of `page_size` pages reaches between checkpoints run
/// every `checkpoint_pages` pages.
pub fn wal_bytes(page_size: u64, checkpoint_pages: u64) -> u64 {
    WAL_HEADER_BYTES + (checkpoint_pages + OVERSHOOT_FRAMES) * (page_size + FRAME_HEADER_BYTES)
}

/// Appends zeros to the file at `wal` (creating it if missing) until it is
/// `target` bytes long, and syncs them. Returns how many bytes were added.
/// On failure the file is cut back to its old length, so a full disk is
/// left as full as it was.
pub fn preallocate(wal: &Path, target: u64) -> io::Result<u64> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(wal)?;
    let old = file.metadata()?.len();
    if old >= target {
        return Ok(0);
    }
    let zeros = vec![0u8; CHUNK_BYTES];
    let written = (|| {
        let mut at = old;
        while at < target {
            let n = (target - at).min(CHUNK_BYTES as u64) as usize;
            file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        file.sync_all()
    })();
    match written {
        Ok(()) => Ok(target - old),
        Err(e) => {
            let _ = file.set_len(old);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_go_after_the_existing_bytes_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let wal = wal_path(&dir.path().join("t.db"));
        assert!(wal.ends_with("t.db-wal"));
        std::fs::write(&wal, b"frames").expect("write");
        assert_eq!(preallocate(&wal, 3 << 20).expect("grow"), (3 << 20) - 6);
        let bytes = std::fs::read(&wal).expect("read");
        assert_eq!(bytes.len(), 3 << 20);
        assert_eq!(&bytes[..6], b"frames", "existing bytes untouched");
        assert!(bytes[6..].iter().all(|b| *b == 0));
        assert_eq!(preallocate(&wal, 1024).expect("no-op"), 0, "never shrinks");
    }

    #[test]
    fn a_wal_between_checkpoints_fits_the_target() {
        assert_eq!(wal_bytes(4096, 8000), 32 + 9024 * 4120);
    }
}
