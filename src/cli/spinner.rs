//! `taskyard wait`'s live status line: a spinner and the job's state,
//! redrawn in place on stderr. Only on a terminal: piped or redirected
//! output (and `--json`) gets nothing extra.

use crate::protocol::JobView;
use std::io::{IsTerminal, Write};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Redraws one stderr line per poll; `clear` erases it before other output.
pub struct Spinner {
    enabled: bool,
    frame: usize,
    drawn: bool,
}

impl Spinner {
    /// Enabled when stderr is a terminal and `quiet` is false.
    pub fn for_stderr(quiet: bool) -> Self {
        Spinner {
            enabled: !quiet && std::io::stderr().is_terminal(),
            frame: 0,
            drawn: false,
        }
    }

    /// Draws the next frame with the job's current state.
    pub fn tick(&mut self, view: &JobView) {
        if !self.enabled {
            return;
        }
        let text = status_text(FRAMES[self.frame % FRAMES.len()], view);
        self.frame += 1;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erases the line, if one is drawn.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.clear();
    }
}

/// One status line: `⠋ job 1b2c… RUNNING, attempt 1/3`.
fn status_text(frame: char, view: &JobView) -> String {
    let id = view.job_id.to_string();
    format!(
        "{frame} job {}… {}, attempt {}/{}",
        &id[..8.min(id.len())],
        view.state,
        view.attempts,
        view.max_attempts
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinner_that_is_not_on_a_terminal_draws_nothing() {
        let mut s = Spinner {
            enabled: false,
            frame: 0,
            drawn: false,
        };
        s.clear();
        assert!(!s.drawn);
    }
}
