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
            let format = slog_term::FullFormat::new(decorator).use_custom_timestamp(rfc3339_utc);
            Box::new(format.build().ignore_res())
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

/// The time a text line starts with: RFC 3339 in UTC to the millisecond
/// (`2026-12-08T02:00:00.123Z`), so a line read on another day, or next to
/// another machine's, is unambiguous (slog-term's default has neither year
/// nor zone).
fn rfc3339_utc(out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let now = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now());
    write!(
        out,
        "{}",
        now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lines_are_stamped_in_rfc_3339_utc_with_the_year() {
        let mut out = Vec::new();
        rfc3339_utc(&mut out).expect("written");
        let text = String::from_utf8(out).expect("utf-8");
        let parsed = chrono::DateTime::parse_from_rfc3339(&text).expect("RFC 3339");
        assert_eq!(parsed.offset().local_minus_utc(), 0, "{text}");
        assert!(
            text.ends_with('Z') && text.len() == "2026-12-08T02:00:00.123Z".len(),
            "{text}"
        );
        assert!(parsed.timestamp() > 1_700_000_000, "this century: {text}");
    }
}
