//! Why a cron expression was refused, said per field: `hour: 25 is outside
//! 0–23` rather than croner's `Component error: Number out of bounds.`.
//!
//! croner stays the judge of what is valid: `explain` only runs after it
//! refused an expression, asks it about each field alone (the others
//! wildcards) to find the one at fault, and then says what is wrong with
//! that field's value. When no single field is at fault, it says nothing
//! and the caller keeps croner's own message.

/// One position of a cron expression and the numbers it takes.
#[derive(Debug, Clone, Copy)]
struct Field {
    name: &'static str,
    /// `None`: not range-checked here (the year; croner's bounds apply).
    range: Option<(u64, u64)>,
    /// Names this field takes besides numbers (`JAN`, `MON`).
    names: &'static [&'static str],
}

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const fn field(name: &'static str, min: u64, max: u64) -> Field {
    Field {
        name,
        range: Some((min, max)),
        names: &[],
    }
}

const SECONDS: Field = field("seconds", 0, 59);
const YEAR: Field = Field {
    name: "year",
    range: None,
    names: &[],
};
/// The five fields every expression has, in order.
const FIVE: [Field; 5] = [
    field("minute", 0, 59),
    field("hour", 0, 23),
    field("day of month", 1, 31),
    Field {
        names: MONTHS,
        ..field("month", 1, 12)
    },
    Field {
        names: WEEKDAYS,
        ..field("day of week", 0, 7)
    },
];

/// What `parses` (croner, as the cadence uses it) refused in `expression`,
/// naming the field and its value; `None` when no one field explains it.
pub fn explain(expression: &str, parses: impl Fn(&str) -> bool) -> Option<String> {
    let text = expression.trim();
    if text.is_empty() {
        return Some(format!("is empty; {}", FIELDS_HELP));
    }
    if text.starts_with('@') {
        return Some(format!(
            "{text:?} is no nickname (@yearly, @annually, @monthly, @weekly, @daily, @hourly)"
        ));
    }
    let values: Vec<&str> = text.split_whitespace().collect();
    let fields = fields_for(values.len())
        .ok_or_else(|| format!("{text:?} has {} fields; {FIELDS_HELP}", values.len()));
    let fields = match fields {
        Ok(fields) => fields,
        Err(message) => return Some(message),
    };
    let at_fault = (0..values.len()).find(|&i| !parses(&alone(&values, i)))?;
    let (field, value) = (fields[at_fault], values[at_fault]);
    Some(format!("{}: {}", field.name, describe(field, value)))
}

const FIELDS_HELP: &str =
    "expected 5 (minute hour day-of-month month day-of-week), 6 (seconds first) or 7 (then year)";

/// The fields of an expression of `count` values, in order.
fn fields_for(count: usize) -> Option<Vec<Field>> {
    match count {
        5 => Some(FIVE.to_vec()),
        6 => Some([&[SECONDS][..], &FIVE].concat()),
        7 => Some([&[SECONDS][..], &FIVE, &[YEAR]].concat()),
        _ => None,
    }
}

/// An expression of `values.len()` fields with `values[keep]` in its place
/// and every other field matching anything (seconds: 0).
fn alone(values: &[&str], keep: usize) -> String {
    let seconds_first = values.len() > 5;
    let mut words: Vec<&str> = vec!["*"; values.len()];
    if seconds_first {
        words[0] = "0";
    }
    words[keep] = values[keep];
    words.join(" ")
}

/// What is wrong with `value` in `field`: the first number outside the
/// field's range, a zero step, a backwards range, a word that is no name;
/// else that the value is not of the accepted forms.
fn describe(field: Field, value: &str) -> String {
    value
        .split(',')
        .find_map(|item| item_fault(field, item))
        .unwrap_or_else(|| {
            format!(
                "{value:?} is not a value of the field ({}, *, a-b, a,b, */n or a-b/n)",
                range_text(field)
            )
        })
}

fn range_text(field: Field) -> String {
    match field.range {
        Some((min, max)) => format!("{min}–{max}"),
        None => "a number".into(),
    }
}

/// The fault of one list item `base[/step]`, if one is seen.
fn item_fault(field: Field, item: &str) -> Option<String> {
    let (base, step) = match item.split_once('/') {
        Some((base, step)) => (base, Some(step)),
        None => (item, None),
    };
    if let Some(step) = step {
        match step.parse::<u64>() {
            Ok(0) => return Some(format!("step 0 in {item:?} (a step is at least 1)")),
            Ok(_) => {}
            Err(_) => return Some(format!("step {step:?} in {item:?} is not a number")),
        }
    }
    let (base, nth) = base.split_once('#').unwrap_or((base, ""));
    if let Ok(n) = nth.parse::<u64>() {
        if !(1..=5).contains(&n) {
            return Some(format!("#{n} in {item:?} is outside 1–5"));
        }
    }
    let bounds: Vec<&str> = base.split('-').collect();
    if let Some(fault) = bounds.iter().find_map(|b| bound_fault(field, b)) {
        return Some(fault);
    }
    backwards(&bounds).then(|| format!("the range {base:?} runs backwards"))
}

/// A number outside the field's range, or a word that is no name of it
/// (`L` and `W` suffixes aside).
fn bound_fault(field: Field, bound: &str) -> Option<String> {
    let digits = bound.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let word = bound.to_ascii_uppercase();
    if digits.is_empty() && !bound.is_empty() {
        let known = field.names.contains(&word.as_str())
            || ["L", "W", "LW", "*", "?"].contains(&word.as_str())
            || field.names.iter().any(|n| word == format!("{n}L"));
        return (!known).then(|| format!("{bound:?} is not a number or name of this field"));
    }
    let (min, max) = field.range?;
    let n: u64 = match digits.parse() {
        Ok(n) => n,
        Err(_) => return None,
    };
    (!(min..=max).contains(&n)).then(|| format!("{n} is outside {min}–{max}"))
}

/// True for `a-b` with numbers `a > b`.
fn backwards(bounds: &[&str]) -> bool {
    match bounds {
        [a, b] => matches!((a.parse::<u64>(), b.parse::<u64>()), (Ok(a), Ok(b)) if a > b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::scheduler::schedule::{Cadence, CadenceError};

    /// The message `Cadence::cron` refuses `expression` with.
    fn refusal(expression: &str) -> String {
        match Cadence::cron(expression, "UTC") {
            Err(e @ CadenceError::Expression(_)) => e.to_string(),
            other => panic!("{expression:?}: {other:?}"),
        }
    }

    #[test]
    fn each_field_out_of_range_is_named_with_its_value_and_range() {
        for (expression, message) in [
            ("60 * * * *", "cron: minute: 60 is outside 0–59"),
            ("0 25 * * *", "cron: hour: 25 is outside 0–23"),
            ("0 3 32 * *", "cron: day of month: 32 is outside 1–31"),
            ("0 3 0 * *", "cron: day of month: 0 is outside 1–31"),
            ("0 3 * 13 *", "cron: month: 13 is outside 1–12"),
            ("0 3 * * 8", "cron: day of week: 8 is outside 0–7"),
            ("61 0 3 * * *", "cron: seconds: 61 is outside 0–59"),
            ("0 0-24 * * *", "cron: hour: 24 is outside 0–23"),
            ("0 3,30 * * *", "cron: hour: 30 is outside 0–23"),
            (
                "*/5 3 * * MON#6",
                "cron: day of week: #6 in \"MON#6\" is outside 1–5",
            ),
        ] {
            assert_eq!(refusal(expression), message, "{expression}");
        }
    }

    #[test]
    fn bad_syntax_names_the_field_and_its_value() {
        let cases = [
            (
                "x 3 * * *",
                "cron: minute: \"x\" is not a number or name of this field",
            ),
            (
                "0 3 * FOO *",
                "cron: month: \"FOO\" is not a number or name of this field",
            ),
            (
                "0 3 * * MON-FRX",
                "cron: day of week: \"FRX\" is not a number or name of this field",
            ),
            (
                "*/0 * * * *",
                "cron: minute: step 0 in \"*/0\" (a step is at least 1)",
            ),
            (
                "0 5-2 * * *",
                "cron: hour: the range \"5-2\" runs backwards",
            ),
        ];
        for (expression, message) in cases {
            assert_eq!(refusal(expression), message, "{expression}");
        }
        let message = refusal("0 3 * *");
        assert!(
            message.starts_with("cron: \"0 3 * *\" has 4 fields; expected 5"),
            "{message}"
        );
        assert!(refusal("@sometimes").contains("no nickname"));
        assert!(refusal("").starts_with("cron: is empty"));
    }

    #[test]
    fn what_croner_accepts_is_still_accepted() {
        for good in [
            "0 3 * * *",
            "*/15 * * * *",
            "0 0 L * *",
            "0 9 15W * *",
            "0 9 * * MON#2",
            "0 9 * * FRI#L",
            "0 9 * JAN-MAR MON-FRI",
            "30 0 3 * * *",
            "@daily",
            "0 0 * * 7",
        ] {
            assert!(Cadence::cron(good, "UTC").is_ok(), "{good}");
        }
    }
}
