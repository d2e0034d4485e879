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
    let async_drain = async_drain(level, format);
    Logger::root(async_drain.build().ignore_res(), o!())
}

/// Waits, when dropped, until every record logged before is written: for a
/// process whose threads may still hold logger clones when it exits (a
/// persistence thread blocked on the database, say).
pub struct LogFlush(#[allow(dead_code)] slog_async::AsyncGuard);

/// Like `build_logger`, with a `LogFlush` to drop last in `main`. Records
/// logged after it is dropped are discarded.
pub fn build_flushed_logger(level: LogLevel, format: LogFormat) -> (Logger, LogFlush) {
    let async_drain = async_drain(level, format);
    let (drain, guard) = async_drain.build_with_guard();
    (Logger::root(drain.ignore_res(), o!()), LogFlush(guard))
}

fn async_drain(level: LogLevel, format: LogFormat) -> slog_async::AsyncBuilder<Filtered> {
    let drain: Box<dyn Drain<Ok = (), Err = Never> + Send> = match format {
        LogFormat::Text => {
            let decorator = slog_term::TermDecorator::new().stderr().build();
            Box::new(slog_term::FullFormat::new(decorator).build().ignore_res())
        }
        LogFormat::Json => {
            let json = slog_json::Json::new(std::io::stderr())
                .add_default_keys()
                .build();
            Box::new(json.ignore_res())
        }
    };
    let filtered = LevelFilter::new(drain, slog_level(level)).ignore_res();
    slog_async::Async::new(filtered)
        .chan_size(QUEUED_RECORDS)
        .overflow_strategy(slog_async::OverflowStrategy::Block)
}

type Filtered = slog::IgnoreResult<LevelFilter<Box<dyn Drain<Ok = (), Err = Never> + Send>>>;

/// Records buffered between the caller and the writer thread.
const QUEUED_RECORDS: usize = 4096;

fn slog_level(level: LogLevel) -> Level {
    match level {
        LogLevel::Error => Level::Error,
        LogLevel::Warn => Level::Warning,
        LogLevel::Info => Level::Info,
        LogLevel::Debug => Level::Debug,
        LogLevel::Trace => Level::Trace,
    }
}
