//! The process logger: slog records filtered by level, formatted as text or
//! JSON lines on stderr, written from a background thread.

use crate::config::{LogFormat, LogLevel};
use slog::{o, Drain, Level, LevelFilter, Logger, Never};

/// Builds the root logger. Records below `level` are discarded before they
/// reach the background thread. No record is ever dropped: if stderr falls
/// more than `QUEUED_RECORDS` behind, the caller waits, because an operator
/// reconstructing what happened to a job needs every line. Dropping the last
/// clone of the logger flushes what is queued.
pub fn build_logger(level: LogLevel, format: LogFormat) -> Logger {
    match format {
        LogFormat::Text => {
            let decorator = slog_term::TermDecorator::new().stderr().build();
            root(
                slog_term::FullFormat::new(decorator).build().ignore_res(),
                level,
            )
        }
        LogFormat::Json => {
            let json = slog_json::Json::new(std::io::stderr())
                .add_default_keys()
                .build();
            root(json.ignore_res(), level)
        }
    }
}

/// Records buffered between the caller and the writer thread.
const QUEUED_RECORDS: usize = 4096;

fn root<D>(drain: D, level: LogLevel) -> Logger
where
    D: Drain<Ok = (), Err = Never> + Send + 'static,
{
    let filtered = LevelFilter::new(drain, slog_level(level)).ignore_res();
    let drain = slog_async::Async::new(filtered)
        .chan_size(QUEUED_RECORDS)
        .overflow_strategy(slog_async::OverflowStrategy::Block)
        .build()
        .ignore_res();
    Logger::root(drain, o!())
}

fn slog_level(level: LogLevel) -> Level {
    match level {
        LogLevel::Error => Level::Error,
        LogLevel::Warn => Level::Warning,
        LogLevel::Info => Level::Info,
        LogLevel::Debug => Level::Debug,
        LogLevel::Trace => Level::Trace,
    }
}
