//! The process's open-file limit against the connections it promises.
//!
//! Every connection is a descriptor, and so are the database, the WAL, the
//! HTTP listener and the logs. With the common soft limit of 1,024 and the
//! default `max-connections` of 1,024 per listener, the process would run out
//! of descriptors before either listener reached its limit, and new clients
//! would hang instead of getting the "too many connections" error frame. So
//! at start the coordinator raises its soft limit to the hard limit, and if
//! both listeners' `max-connections` plus [`HEADROOM`] still do not fit, it
//! lowers `max-connections` with a warning naming the key.

// `rlim_t` is u64 on Linux but not on every platform.
#![allow(clippy::unnecessary_cast)]

use slog::{info, warn, Logger};
use std::io;

/// Descriptors kept for everything that is not a client or worker
/// connection: SQLite (database, WAL, journal), the HTTP listener and its
/// connections, logs, the runtime's own, the accept loops' spares.
pub const HEADROOM: u64 = 64;

/// Listeners that take connections against `max-connections`.
const LISTENERS: u64 = 2;

/// Where the soft limit goes when the hard limit is unlimited: Linux's
/// default `fs.nr_open`, above which `setrlimit` fails.
const UNLIMITED_TARGET: u64 = 1 << 20;

/// Raises the soft `RLIMIT_NOFILE` as far as the hard limit allows and
/// returns the soft limit now in force.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let target = match limit.rlim_max {
        libc::RLIM_INFINITY => UNLIMITED_TARGET as libc::rlim_t,
        hard => hard,
    };
    if limit.rlim_cur != libc::RLIM_INFINITY && limit.rlim_cur < target {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct. On failure the old limit
        // stays in force, which is what we report.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = target;
        }
    }
    Ok(limit.rlim_cur as u64)
}

/// The per-listener connection limit that fits in `open_files`
/// descriptors: `configured` when both listeners' worth plus [`HEADROOM`]
/// fit, otherwise the most that does (at least 1).
pub fn fitting_max_connections(configured: usize, open_files: u64) -> usize {
    let room = open_files.saturating_sub(HEADROOM) / LISTENERS;
    (configured as u64).min(room).max(1) as usize
}

/// Raises the limit and returns the `max-connections` to use, logging the
/// outcome; a `max-connections` that had to be lowered is a warning.
pub fn fit_max_connections(configured: usize, log: &Logger) -> usize {
    let open_files = match raise_open_files_limit() {
        Ok(limit) => limit,
        Err(e) => {
            warn!(log, "cannot read the open-files limit; max-connections not checked"; "error" => %e);
            return configured;
        }
    };
    let fitted = fitting_max_connections(configured, open_files);
    if fitted < configured {
        warn!(log, "max-connections lowered to fit the open-files limit";
              "max-connections" => configured, "lowered-to" => fitted, "open-files" => open_files,
              "fix" => "raise the hard limit (ulimit -Hn, LimitNOFILE=) or set max-connections lower");
    } else {
        info!(log, "open-files limit"; "open-files" => open_files, "max-connections" => configured);
    }
    fitted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_connections_is_kept_when_it_fits_and_lowered_when_it_does_not() {
        assert_eq!(fitting_max_connections(1024, 1 << 20), 1024);
        assert_eq!(fitting_max_connections(1024, 2 * 1024 + HEADROOM), 1024);
        assert_eq!(
            fitting_max_connections(1024, 1024),
            (1024 - HEADROOM as usize) / 2
        );
        assert_eq!(fitting_max_connections(1024, 10), 1, "never zero");
    }

    #[test]
    fn raising_the_limit_never_lowers_it() {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) },
            0
        );
        let now = raise_open_files_limit().expect("limit readable");
        assert!(now >= before.rlim_cur as u64 || before.rlim_cur == libc::RLIM_INFINITY);
    }
}
