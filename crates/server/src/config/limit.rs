//! `[[limit]]` in the coordinator's TOML: a concurrency limit declared in
//! the file (flow control): at most `max-running` jobs of each concurrency
//! key matching `pattern` run at once. A pattern is one exact key
//! (`stripe:acct_42`) or a prefix ending in one `*` (`stripe:*`), which
//! limits each matching key on its own.

use serde::Deserialize;
use taskyard_protocol::flow::LimitPattern;

/// Most `[[limit]]` tables a config may declare.
pub const MAX_DECLARED_LIMITS: usize = 10_000;

/// One `[[limit]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DeclaredLimit {
    pub pattern: String,
    pub max_running: u32,
}

impl DeclaredLimit {
    /// The pattern and its limit, or the field that is wrong and why.
    pub fn to_limit(&self) -> Result<(LimitPattern, u32), (&'static str, String)> {
        let pattern =
            LimitPattern::parse("pattern", &self.pattern).map_err(|e| ("pattern", e.reason))?;
        if self.max_running == 0 {
            return Err((
                "max-running",
                "0 would never start a job (leave the limit out to lift it)".into(),
            ));
        }
        Ok((pattern, self.max_running))
    }
}

impl std::str::FromStr for DeclaredLimit {
    type Err = String;

    /// One inline TOML table (the `--limit` flag).
    fn from_str(text: &str) -> Result<DeclaredLimit, String> {
        crate::config::inline_table("limit", text)
    }
}
