//! Shared-secret tokens: never printed, compared in constant time.

use std::fmt;
use std::path::Path;

/// A credential. `Debug` and `Display` never show it, so it cannot leak
/// into logs or error messages by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// Reads a token file: the first line, without surrounding whitespace.
    /// Errors name the file; an empty file is an error.
    pub fn from_file(path: &Path) -> Result<Secret, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            return Err(format!("{} is empty", path.display()));
        }
        Ok(Secret(token.to_string()))
    }

    /// The token itself, for sending in a `Hello`.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when `offered` equals this secret. Takes the same time whatever
    /// the position of the first differing byte, so timing does not reveal
    /// how much of a guess was right (only whether its length was).
    pub fn matches(&self, offered: Option<&str>) -> bool {
        let Some(offered) = offered else {
            return false;
        };
        let (a, b) = (self.0.as_bytes(), offered.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_exact_token() {
        let s = Secret::new("s3cret");
        assert!(s.matches(Some("s3cret")));
        assert!(!s.matches(Some("s3creT")));
        assert!(!s.matches(Some("s3cret ")));
        assert!(!s.matches(Some("")));
        assert!(!s.matches(None));
    }

    #[test]
    fn debug_never_shows_the_token() {
        assert!(!format!("{:?}", Secret::new("s3cret")).contains("s3cret"));
    }

    #[test]
    fn token_files_are_read_trimmed_and_named_in_errors() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc123  \nignored\n").expect("write");
        assert!(Secret::from_file(&path)
            .expect("read")
            .matches(Some("abc123")));
        std::fs::write(&path, "\n").expect("write");
        let err = Secret::from_file(&path).expect_err("empty");
        assert!(err.contains("token") && err.contains("empty"), "{err}");
    }
}
