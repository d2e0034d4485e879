//! Helping a person fix a config file: where in the file an error is (line
//! and column), and which known key a misspelt one was probably meant to be.

/// A 1-based line and column (in characters) in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text` (clamped to its end, and
    /// back to a character boundary).
    pub fn of(text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// The key of `known` closest to `unknown` by edit distance, if it is close
/// enough to be a likely typo: at most a third of the longer name's length
/// (and at least 2) edits away. Ties go to the first in `known`.
pub fn closest<'a>(unknown: &str, known: &'a [String]) -> Option<&'a str> {
    let (distance, best) = known
        .iter()
        .map(|k| (edit_distance(unknown, k), k.as_str()))
        .min_by_key(|(d, _)| *d)?;
    let longer = unknown.chars().count().max(best.chars().count());
    (distance <= (longer / 3).max(2)).then_some(best)
}

/// Levenshtein distance: insertions, deletions and substitutions of
/// characters turning `a` into `b`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let text = "a = 1\nbé = = 2\n";
        assert_eq!(Position::of(text, 0), Position { line: 1, column: 1 });
        assert_eq!(Position::of(text, 6), Position { line: 2, column: 1 });
        let second_eq = text.rfind('=').expect("=");
        assert_eq!(
            Position::of(text, second_eq),
            Position { line: 2, column: 6 },
            "é is one column"
        );
        assert_eq!(Position::of(text, 999).line, 3, "clamped to the end");
    }

    #[test]
    fn a_typo_suggests_the_key_it_was_meant_to_be() {
        let known = keys(&[
            "heartbeat-timeout-millis",
            "heartbeat-interval-millis",
            "capacity",
        ]);
        assert_eq!(
            closest("heartbeat-timout-millis", &known),
            Some("heartbeat-timeout-millis")
        );
        assert_eq!(closest("capcity", &known), Some("capacity"));
        assert_eq!(closest("capacity_", &known), Some("capacity"));
        assert_eq!(closest("colour", &known), None, "nothing close");
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
