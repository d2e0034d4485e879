//! Bounded capture of an `exec` program's output: the head of stdout (its
//! result) and the tail of stderr (for the failure message), with progress
//! lines (`TASKYARD_PROGRESS <percent> <message>`) parsed out of stderr.
//! Memory stays bounded whatever the program writes; the pipes are always
//! read to the end, so a chatty program never blocks on a full pipe.

/// Most bytes of stderr quoted in a failure message.
pub const STDERR_TAIL_BYTES: usize = 4096;
/// A stderr line longer than this is never a progress line.
const MAX_PROGRESS_LINE: usize = 4096;
const PROGRESS_PREFIX: &[u8] = b"TASKYARD_PROGRESS ";

/// The first `limit` bytes of a stream and a count of the rest.
#[derive(Debug)]
pub struct HeadCapture {
    kept: Vec<u8>,
    limit: usize,
    dropped: u64,
}

impl HeadCapture {
    pub fn new(limit: usize) -> Self {
        HeadCapture {
            kept: Vec::new(),
            limit,
            dropped: 0,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        let room = self.limit.saturating_sub(self.kept.len()).min(chunk.len());
        self.kept.extend_from_slice(&chunk[..room]);
        self.dropped += (chunk.len() - room) as u64;
    }

    /// The kept bytes, then `\n[truncated: N more bytes]` if any were dropped.
    pub fn finish(mut self) -> Vec<u8> {
        if self.dropped > 0 {
            let marker = format!("\n[truncated: {} more bytes]", self.dropped);
            self.kept.extend_from_slice(marker.as_bytes());
        }
        self.kept
    }
}

/// One parsed `TASKYARD_PROGRESS` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressLine {
    pub percent: u8,
    pub message: String,
}

/// Stderr split into lines: progress lines are returned from [`push`] and
/// not kept; every other byte goes to a tail of the last `limit` bytes.
///
/// [`push`]: StderrCapture::push
#[derive(Debug)]
pub struct StderrCapture {
    line: Vec<u8>,
    /// The current line grew past `MAX_PROGRESS_LINE`; it goes to the tail as is.
    long_line: bool,
    tail: Vec<u8>,
    limit: usize,
    total: u64,
}

impl StderrCapture {
    pub fn new(limit: usize) -> Self {
        StderrCapture {
            line: Vec::new(),
            long_line: false,
            tail: Vec::new(),
            limit,
            total: 0,
        }
    }

    /// Takes the next chunk; returns the progress lines it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<ProgressLine> {
        let mut progress = Vec::new();
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if self.long_line {
                self.keep(piece);
            } else {
                self.line.extend_from_slice(piece);
            }
            if piece.ends_with(b"\n") {
                progress.extend(self.end_line());
            } else if self.line.len() > MAX_PROGRESS_LINE {
                let line = std::mem::take(&mut self.line);
                self.keep(&line);
                self.long_line = true;
            }
        }
        progress
    }

    /// The tail (lossy UTF-8), prefixed `[truncated: N earlier bytes]` when
    /// bytes were dropped, and a final unterminated progress line if any.
    pub fn finish(mut self) -> (String, Option<ProgressLine>) {
        let last = self.end_line();
        let start = self.tail.len().saturating_sub(self.limit);
        let dropped = self.total - (self.tail.len() - start) as u64;
        let text = String::from_utf8_lossy(&self.tail[start..]);
        let text = text.trim_end();
        let text = match dropped {
            0 => text.to_string(),
            n => format!("[truncated: {n} earlier bytes]\n{text}"),
        };
        (text, last)
    }

    fn end_line(&mut self) -> Option<ProgressLine> {
        self.long_line = false;
        let line = std::mem::take(&mut self.line);
        let parsed = parse_progress(&line);
        if parsed.is_none() {
            self.keep(&line);
        }
        parsed
    }

    fn keep(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * self.limit.max(1) {
            let excess = self.tail.len() - self.limit;
            self.tail.drain(..excess);
        }
    }
}

/// `TASKYARD_PROGRESS <0-100> <message>` (message optional); anything else
/// — another percent, a missing number — is an ordinary stderr line.
pub fn parse_progress(line: &[u8]) -> Option<ProgressLine> {
    let rest = line.strip_prefix(PROGRESS_PREFIX)?;
    let rest = String::from_utf8_lossy(rest);
    let rest = rest.trim_end_matches(['\n', '\r']);
    let (number, message) = rest.split_once(' ').unwrap_or((rest, ""));
    let percent: u8 = number.parse().ok().filter(|p| *p <= 100)?;
    Some(ProgressLine {
        percent,
        message: message.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_keeps_the_limit_and_marks_the_rest() {
        let mut head = HeadCapture::new(5);
        head.push(b"hel");
        head.push(b"lo world");
        assert_eq!(head.finish(), b"hello\n[truncated: 6 more bytes]");
        let mut small = HeadCapture::new(5);
        small.push(b"hi");
        assert_eq!(small.finish(), b"hi");
    }

    #[test]
    fn progress_lines_are_parsed_across_chunks_and_not_kept() {
        let mut err = StderrCapture::new(100);
        assert_eq!(err.push(b"starting\nTASKYARD_PROG"), vec![]);
        let got = err.push(b"RESS 40 resizing 2/5\nwarn: slow\n");
        assert_eq!(
            got,
            vec![ProgressLine {
                percent: 40,
                message: "resizing 2/5".into()
            }]
        );
        let (tail, last) = err.finish();
        assert_eq!(tail, "starting\nwarn: slow");
        assert_eq!(last, None);
    }

    #[test]
    fn malformed_progress_lines_are_ordinary_lines() {
        for line in [
            "TASKYARD_PROGRESS 101 x",
            "TASKYARD_PROGRESS x",
            "TASKYARD_PROGRESS",
        ] {
            assert_eq!(parse_progress(line.as_bytes()), None, "{line}");
        }
        assert_eq!(
            parse_progress(b"TASKYARD_PROGRESS 100\r\n"),
            Some(ProgressLine {
                percent: 100,
                message: String::new()
            })
        );
    }

    #[test]
    fn stderr_keeps_a_bounded_tail_and_counts_what_it_dropped() {
        let mut err = StderrCapture::new(8);
        for _ in 0..10 {
            err.push(b"abcdefghij\n");
        }
        err.push(&vec![b'x'; 10_000]);
        let (tail, _) = err.finish();
        assert_eq!(tail, "[truncated: 10102 earlier bytes]\nxxxxxxxx");
    }
}
