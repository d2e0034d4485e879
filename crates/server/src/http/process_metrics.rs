//! The standard `process_*` families every Prometheus client library
//! exports (same names, types and meaning as client_golang's process
//! collector), read from `/proc/self` at each scrape. On systems without
//! `/proc` nothing is written; a file that cannot be read (say, with every
//! descriptor in use) drops only the families it feeds.

use crate::http::const_metrics::{counter, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::fmt;

/// The process families [`ProcessCollector`] writes on Linux.
pub const PROCESS_FAMILIES: [&str; 7] = [
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_threads",
    "process_open_fds",
    "process_max_fds",
];

/// What `/proc/self/stat` says about this process, in units for export.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessStat {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub threads: u64,
    /// Unix seconds.
    pub start_time: f64,
}

/// Parses the text of `/proc/self/stat` (see proc(5)). `ticks` is
/// `sysconf(_SC_CLK_TCK)`, `page` the page size, `boot_time` the unix
/// second the system booted (`btime` in `/proc/stat`). The command name
/// may hold spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str, ticks: u64, page: u64, boot_time: u64) -> Option<ProcessStat> {
    let (_, rest) = text.rsplit_once(')')?;
    // `rest` starts at field 3 (state): field n is at index n - 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = ticks.max(1) as f64;
    let (utime, stime) = (field(14)?, field(15)?);
    Some(ProcessStat {
        cpu_seconds: (utime + stime) as f64 / ticks,
        threads: field(20)?,
        start_time: boot_time as f64 + field(22)? as f64 / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)?.saturating_mul(page),
    })
}

/// `btime` (the boot time, unix seconds) from the text of `/proc/stat`.
pub fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The process families, read at each scrape.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut out: DescriptorEncoder) -> fmt::Result {
        #[cfg(target_os = "linux")]
        linux::encode(&mut out)?;
        #[cfg(not(target_os = "linux"))]
        let _ = &mut out;
        Ok(())
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;

    pub fn encode(out: &mut DescriptorEncoder) -> fmt::Result {
        if let Some(stat) = read_stat() {
            stat_families(out, &stat)?;
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            // The directory's own descriptor is one of those listed.
            let open = dir.count().saturating_sub(1);
            gauge(
                out,
                "process_open_fds",
                "Number of open file descriptors.",
                open,
            )?;
        }
        if let Some(max) = max_fds() {
            gauge(
                out,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max,
            )?;
        }
        Ok(())
    }

    fn stat_families(out: &mut DescriptorEncoder, stat: &ProcessStat) -> fmt::Result {
        counter(
            out,
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            stat.cpu_seconds,
        )?;
        gauge(
            out,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            stat.resident_bytes,
        )?;
        gauge(
            out,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            stat.virtual_bytes,
        )?;
        gauge(
            out,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            stat.start_time,
        )?;
        gauge(
            out,
            "process_threads",
            "Number of OS threads in the process.",
            stat.threads,
        )
    }

    fn read_stat() -> Option<ProcessStat> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = parse_boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
        // SAFETY: sysconf only reads a system constant.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let ticks = u64::try_from(ticks).ok()?;
        let page = u64::try_from(page).ok()?;
        parse_stat(&stat, ticks, page, boot)
    }

    /// The soft limit on open descriptors, if there is one.
    fn max_fds() -> Option<u64> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only into the struct it is given.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
        (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line from proc(5)'s layout, with a command name that has a
    /// space and a parenthesis in it.
    const STAT: &str = "4242 (taskyard (co) ord) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                        250 150 0 0 20 0 7 0 12345 104857600 2560 18446744073709551615 \
                        1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = parse_stat(STAT, 100, 4096, 1_700_000_000).expect("parses");
        assert_eq!(stat.cpu_seconds, 4.0, "(250 + 150) ticks at 100 Hz");
        assert_eq!(stat.threads, 7);
        assert_eq!(stat.start_time, 1_700_000_123.45);
        assert_eq!(stat.virtual_bytes, 104_857_600);
        assert_eq!(stat.resident_bytes, 2560 * 4096);
        assert_eq!(parse_stat("4242 (cut", 100, 4096, 0), None);
    }

    #[test]
    fn boot_time_is_read_from_btime() {
        let text = "cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n";
        assert_eq!(parse_boot_time(text), Some(1_700_000_000));
        assert_eq!(parse_boot_time("cpu 1\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reports_every_family_with_plausible_values() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).expect("encodes");
        for family in PROCESS_FAMILIES {
            assert!(
                out.contains(&format!("# TYPE {family} ")),
                "{family}: {out}"
            );
        }
        let value = |name: &str| -> f64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .expect("sample");
            line.split(' ')
                .nth(1)
                .and_then(|v| v.parse().ok())
                .expect("number")
        };
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_open_fds") >= 3.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let start = value("process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
    }
}
