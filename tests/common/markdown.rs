//! The fenced code blocks of the project's Markdown (the README, the
//! guide), for the tests that run them as written.

/// One fenced block: where it is, its info string (`sh`, `toml`, empty
/// when none) and its text, without the fences.
#[derive(Debug, Clone)]
pub struct Block {
    pub file: &'static str,
    /// The line of the opening fence (1-based).
    pub line: usize,
    pub info: String,
    pub text: String,
}

impl Block {
    /// The block's first line, to name it in a failure.
    pub fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("")
    }

    /// `FILE:LINE (block starting `FIRST LINE`)`.
    pub fn name(&self) -> String {
        format!(
            "{}:{} (block starting `{}`)",
            self.file,
            self.line,
            self.first_line()
        )
    }
}

/// Every fenced block of `markdown`, in order. A fence is a line that
/// starts (after indentation) with three backticks; the block ends at the
/// next such line.
pub fn blocks(file: &'static str, markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (open.take(), fence) {
            (None, Some(info)) => {
                open = Some(Block {
                    file,
                    line: i + 1,
                    info: info.trim().to_string(),
                    text: String::new(),
                })
            }
            (None, None) => {}
            (Some(block), Some(_)) => found.push(block),
            (Some(mut block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
        }
    }
    assert!(open.is_none(), "{file}: a code block is never closed");
    found
}

/// The text of the first block with info string `info` after the first
/// line holding `marker`.
pub fn block_after(file: &'static str, markdown: &str, marker: &str, info: &str) -> String {
    let from = markdown
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{file}: no line holds {marker:?}"));
    blocks(file, markdown)
        .into_iter()
        .find(|b| b.line > from && b.info == info)
        .unwrap_or_else(|| panic!("{file}: no ```{info} block after {marker:?}"))
        .text
}
