//! Payload validation for the built-in task types. The coordinator runs it
//! at submission and the worker again before running a task: the worker does
//! not trust the wire.

use serde_json::{Map, Value};
use thiserror::Error;

/// Longest accepted task type name.
pub const MAX_TASK_TYPE_LEN: usize = 64;
/// Longest accepted `message` in `echo` and `fail`.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Longest accepted `sleep`: one day.
pub const MAX_SLEEP_MILLIS: u64 = 24 * 60 * 60 * 1000;

/// A payload or task type that cannot run. `field` is a dotted path such as
/// `payload.millis`, so the user knows exactly what to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct PayloadError {
    pub field: String,
    pub reason: String,
}

impl PayloadError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        PayloadError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// A decoded, validated built-in task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuiltinTask {
    /// Succeeds with `message` as its result.
    Echo { message: String },
    /// Waits `millis`, honouring cancellation, then succeeds with no result.
    Sleep { millis: u64 },
    /// Always fails with `message`.
    Fail { message: String },
}

/// The task types every worker runs.
pub const BUILTIN_TASK_TYPES: [&str; 3] = ["echo", "sleep", "fail"];

enum FieldKind {
    Text,
    Millis,
}

fn schema(task_type: &str) -> Option<&'static [(&'static str, FieldKind)]> {
    match task_type {
        "echo" | "fail" => Some(&[("message", FieldKind::Text)]),
        "sleep" => Some(&[("millis", FieldKind::Millis)]),
        _ => None,
    }
}

/// A task type is 1 to 64 characters of `a-z A-Z 0-9 _ - . :`.
pub fn validate_task_type(task_type: &str) -> Result<(), PayloadError> {
    if task_type.is_empty() || task_type.len() > MAX_TASK_TYPE_LEN {
        return Err(PayloadError::new(
            "task_type",
            format!("must be 1 to {MAX_TASK_TYPE_LEN} characters long"),
        ));
    }
    let bad = task_type
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')));
    match bad {
        Some(c) => Err(PayloadError::new(
            "task_type",
            format!("{task_type:?} contains {c:?}; use letters, digits, '_', '-', '.' or ':'"),
        )),
        None => Ok(()),
    }
}

/// Checks the task type name and, for built-in types, the payload's shape.
/// Payloads of other (custom) task types are only required to be MessagePack.
pub fn validate(task_type: &str, payload: &[u8]) -> Result<(), PayloadError> {
    validate_task_type(task_type)?;
    if schema(task_type).is_some() {
        decode_builtin(task_type, payload).map(|_| ())
    } else {
        decode_value(payload).map(|_| ())
    }
}

/// Decodes and validates a built-in task; `Ok(None)` for a custom task type.
pub fn decode_builtin(
    task_type: &str,
    payload: &[u8],
) -> Result<Option<BuiltinTask>, PayloadError> {
    let Some(fields) = schema(task_type) else {
        return Ok(None);
    };
    let value = decode_value(payload)?;
    let Value::Object(map) = value else {
        return Err(PayloadError::new(
            "payload",
            format!("{task_type} takes a map, got {}", kind_of(&value)),
        ));
    };
    check_known_fields(task_type, fields, &map)?;
    let task = match task_type {
        "echo" => BuiltinTask::Echo {
            message: text_field(&map, "message")?,
        },
        "fail" => BuiltinTask::Fail {
            message: text_field(&map, "message")?,
        },
        _ => BuiltinTask::Sleep {
            millis: millis_field(&map, "millis")?,
        },
    };
    Ok(Some(task))
}

/// Encodes a JSON value as the MessagePack payload the protocol carries.
pub fn encode_json(value: &Value) -> Vec<u8> {
    // Serializing a JSON value into a Vec cannot fail: every JSON value has a
    // MessagePack form and writing to memory has no I/O error.
    rmp_serde::to_vec_named(value).unwrap_or_default()
}

/// Decodes any MessagePack payload into a JSON value, for display.
pub fn decode_value(payload: &[u8]) -> Result<Value, PayloadError> {
    rmp_serde::from_slice(payload)
        .map_err(|e| PayloadError::new("payload", format!("not valid MessagePack: {e}")))
}

fn check_known_fields(
    task_type: &str,
    fields: &[(&str, FieldKind)],
    map: &Map<String, Value>,
) -> Result<(), PayloadError> {
    let expected: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
    if let Some(unknown) = map.keys().find(|k| !expected.contains(&k.as_str())) {
        return Err(PayloadError::new(
            format!("payload.{unknown}"),
            format!("unknown field; {task_type} takes: {}", expected.join(", ")),
        ));
    }
    for (name, kind) in fields {
        if !map.contains_key(*name) {
            let what = match kind {
                FieldKind::Text => "a string",
                FieldKind::Millis => "a non-negative integer",
            };
            return Err(PayloadError::new(
                format!("payload.{name}"),
                format!("missing; {task_type} needs {what}"),
            ));
        }
    }
    Ok(())
}

fn text_field(map: &Map<String, Value>, name: &str) -> Result<String, PayloadError> {
    match map.get(name) {
        Some(Value::String(s)) if s.len() <= MAX_MESSAGE_BYTES => Ok(s.clone()),
        Some(Value::String(s)) => Err(PayloadError::new(
            format!("payload.{name}"),
            format!("{} bytes exceeds the limit of {MAX_MESSAGE_BYTES}", s.len()),
        )),
        other => Err(wrong_type(name, "a string", other)),
    }
}

fn millis_field(map: &Map<String, Value>, name: &str) -> Result<u64, PayloadError> {
    match map.get(name).map(|v| (v, v.as_u64())) {
        Some((_, Some(ms))) if ms <= MAX_SLEEP_MILLIS => Ok(ms),
        Some((_, Some(ms))) => Err(PayloadError::new(
            format!("payload.{name}"),
            format!("{ms} exceeds the limit of {MAX_SLEEP_MILLIS}"),
        )),
        other => Err(wrong_type(
            name,
            "a non-negative integer",
            other.map(|(v, _)| v),
        )),
    }
}

fn wrong_type(name: &str, expected: &str, got: Option<&Value>) -> PayloadError {
    let got = got.map(kind_of).unwrap_or("nothing");
    PayloadError::new(
        format!("payload.{name}"),
        format!("expected {expected}, got {got}"),
    )
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "a non-negative integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(task_type: &str, payload: Value) -> Result<Option<BuiltinTask>, PayloadError> {
        decode_builtin(task_type, &encode_json(&payload))
    }

    fn field_of(result: Result<Option<BuiltinTask>, PayloadError>) -> String {
        result.expect_err("must be rejected").field
    }

    #[test]
    fn valid_builtin_payloads_decode() {
        assert_eq!(
            check("echo", json!({"message": "hi"})),
            Ok(Some(BuiltinTask::Echo {
                message: "hi".into()
            }))
        );
        assert_eq!(
            check("sleep", json!({"millis": 25})),
            Ok(Some(BuiltinTask::Sleep { millis: 25 }))
        );
        assert_eq!(
            check("fail", json!({"message": "boom"})),
            Ok(Some(BuiltinTask::Fail {
                message: "boom".into()
            }))
        );
    }

    #[test]
    fn invalid_payloads_name_the_field() {
        assert_eq!(field_of(check("echo", json!({}))), "payload.message");
        assert_eq!(
            field_of(check("echo", json!({"message": 5}))),
            "payload.message"
        );
        assert_eq!(
            field_of(check("sleep", json!({"millis": -1}))),
            "payload.millis"
        );
        assert_eq!(
            field_of(check("sleep", json!({"millis": "1"}))),
            "payload.millis"
        );
        assert_eq!(
            field_of(check("sleep", json!({"millis": MAX_SLEEP_MILLIS + 1}))),
            "payload.millis"
        );
        assert_eq!(
            field_of(check("echo", json!({"message": "x", "extra": 1}))),
            "payload.extra"
        );
        assert_eq!(field_of(check("echo", json!([1, 2]))), "payload");
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1);
        let err = check("fail", json!({ "message": long })).expect_err("too long");
        assert_eq!(err.field, "payload.message");
        assert!(err.reason.contains("exceeds the limit"), "{err}");
    }

    #[test]
    fn garbage_payload_is_not_messagepack() {
        let err = validate("custom", &[0xc1]).expect_err("garbage");
        assert_eq!(err.field, "payload");
    }

    #[test]
    fn custom_task_types_accept_any_messagepack() {
        assert_eq!(
            validate("thumbnail", &encode_json(&json!({"w": 3}))),
            Ok(())
        );
        assert_eq!(check("thumbnail", json!(1)), Ok(None));
    }

    #[test]
    fn task_type_names_are_checked() {
        assert_eq!(validate_task_type("image.resize-v2"), Ok(()));
        for bad in ["", "has space", "semi;colon", &"x".repeat(65)] {
            assert_eq!(
                validate_task_type(bad).expect_err(bad).field,
                "task_type",
                "{bad:?}"
            );
        }
    }
}
