//! Payload validation for the built-in task types. The coordinator runs it
//! at submission and the worker again before running a task: the worker does
//! not trust the wire.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use thiserror::Error;

/// Longest accepted task type name.
pub const MAX_TASK_TYPE_LEN: usize = 64;
/// Longest accepted `message` in `echo` and `fail`.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Longest accepted `sleep`: one day.
pub const MAX_SLEEP_MILLIS: u64 = 24 * 60 * 60 * 1000;
/// Most arguments an `exec` payload may pass.
pub const MAX_EXEC_ARGS: usize = 4096;
/// The task type that runs an allowed program. Validated like the other
/// built-ins, but only workers with a non-empty `exec-allow` advertise it.
pub const EXEC_TASK_TYPE: &str = "exec";
const EXEC_FIELDS: [&str; 5] = ["program", "args", "env", "cwd", "stdin"];

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
    /// Runs a program (if the worker allows it) and succeeds with its stdout.
    Exec(ExecSpec),
}

/// A validated `exec` payload: `{ program, args?, env?, cwd?, stdin? }`.
/// No string contains a NUL byte and no `env` name contains `=`, so every
/// value can be handed to the operating system as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecSpec {
    /// A name looked up on the worker's PATH, or a path.
    pub program: String,
    pub args: Vec<String>,
    /// Added to the program's (otherwise nearly empty) environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; the worker's own when absent.
    pub cwd: Option<String>,
    /// Written to the program's stdin, which is then closed; empty when absent.
    pub stdin: Option<String>,
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
    if schema(task_type).is_some() || task_type == EXEC_TASK_TYPE {
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
    if task_type == EXEC_TASK_TYPE {
        return decode_exec(payload).map(|spec| Some(BuiltinTask::Exec(spec)));
    }
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

/// Decodes an `exec` payload; errors name the field (`payload.args[2]`,
/// `payload.env.HOME`).
fn decode_exec(payload: &[u8]) -> Result<ExecSpec, PayloadError> {
    let map = match decode_value(payload)? {
        Value::Object(map) => map,
        other => {
            return Err(PayloadError::new(
                "payload",
                format!("exec takes a map, got {}", kind_of(&other)),
            ))
        }
    };
    if let Some(unknown) = map.keys().find(|k| !EXEC_FIELDS.contains(&k.as_str())) {
        return Err(PayloadError::new(
            format!("payload.{unknown}"),
            format!("unknown field; exec takes: {}", EXEC_FIELDS.join(", ")),
        ));
    }
    let program = match map.get("program") {
        None => {
            return Err(PayloadError::new(
                "payload.program",
                "missing; exec needs a string",
            ))
        }
        Some(v) => os_string("payload.program", v)?,
    };
    if program.is_empty() {
        return Err(PayloadError::new("payload.program", "must not be empty"));
    }
    Ok(ExecSpec {
        program,
        args: exec_args(map.get("args"))?,
        env: exec_env(map.get("env"))?,
        cwd: optional_os_string(&map, "cwd")?,
        stdin: optional_os_string(&map, "stdin")?,
    })
}

fn exec_args(value: Option<&Value>) -> Result<Vec<String>, PayloadError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        other => return Err(wrong_type("args", "an array of strings", other)),
    };
    if items.len() > MAX_EXEC_ARGS {
        return Err(PayloadError::new(
            "payload.args",
            format!(
                "{} arguments exceeds the limit of {MAX_EXEC_ARGS}",
                items.len()
            ),
        ));
    }
    let field = |i: usize| format!("payload.args[{i}]");
    items
        .iter()
        .enumerate()
        .map(|(i, v)| os_string(&field(i), v))
        .collect()
}

fn exec_env(value: Option<&Value>) -> Result<BTreeMap<String, String>, PayloadError> {
    let vars = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(vars)) => vars,
        other => return Err(wrong_type("env", "a map of strings", other)),
    };
    let mut env = BTreeMap::new();
    for (name, value) in vars {
        let field = format!("payload.env.{name}");
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(PayloadError::new(
                field,
                "a variable name must be non-empty, without '=' or NUL",
            ));
        }
        env.insert(name.clone(), os_string(&field, value)?);
    }
    Ok(env)
}

fn optional_os_string(
    map: &Map<String, Value>,
    name: &str,
) -> Result<Option<String>, PayloadError> {
    match map.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => os_string(&format!("payload.{name}"), v).map(Some),
    }
}

/// A string the operating system can take: no NUL byte.
fn os_string(field: &str, value: &Value) -> Result<String, PayloadError> {
    match value {
        Value::String(s) if s.contains('\0') => {
            Err(PayloadError::new(field, "contains a NUL byte"))
        }
        Value::String(s) => Ok(s.clone()),
        other => Err(PayloadError::new(
            field,
            format!("expected a string, got {}", kind_of(other)),
        )),
    }
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
    // A whole number written with a fraction (`5.0`) is still a whole number.
    let whole = |v: &Value| {
        v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= MAX_SLEEP_MILLIS as f64)
                .map(|f| f as u64)
        })
    };
    match map.get(name).map(|v| (v, whole(v))) {
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
            check("sleep", json!({"millis": 25.0})),
            Ok(Some(BuiltinTask::Sleep { millis: 25 })),
            "a JSON integer written with a fraction"
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
            field_of(check("sleep", json!({"millis": 2.5}))),
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
    fn exec_payloads_decode_with_optional_fields() {
        let full = json!({"program": "echo", "args": ["a", "b"], "env": {"K": "v"},
                          "cwd": "/tmp", "stdin": "in"});
        let Ok(Some(BuiltinTask::Exec(spec))) = check("exec", full) else {
            panic!("valid exec payload");
        };
        assert_eq!(spec.args, ["a", "b"]);
        assert_eq!(spec.env.get("K").map(String::as_str), Some("v"));
        assert_eq!(
            (spec.cwd.as_deref(), spec.stdin.as_deref()),
            (Some("/tmp"), Some("in"))
        );
        assert_eq!(
            check("exec", json!({"program": "true"})),
            Ok(Some(BuiltinTask::Exec(ExecSpec {
                program: "true".into(),
                ..ExecSpec::default()
            })))
        );
    }

    #[test]
    fn invalid_exec_payloads_name_the_field() {
        let cases = [
            (json!({}), "payload.program"),
            (json!({"program": ""}), "payload.program"),
            (json!({"program": 7}), "payload.program"),
            (
                json!({"program": "x", "args": ["a", "b", 3]}),
                "payload.args[2]",
            ),
            (json!({"program": "x", "args": "a b"}), "payload.args"),
            (
                json!({"program": "x", "args": ["nul\u{0}"]}),
                "payload.args[0]",
            ),
            (json!({"program": "x", "env": {"A": 1}}), "payload.env.A"),
            (
                json!({"program": "x", "env": {"A=B": "1"}}),
                "payload.env.A=B",
            ),
            (json!({"program": "x", "env": ["A"]}), "payload.env"),
            (json!({"program": "x", "cwd": false}), "payload.cwd"),
            (json!({"program": "x", "shell": true}), "payload.shell"),
            (json!("echo hi"), "payload"),
        ];
        for (payload, field) in cases {
            assert_eq!(field_of(check("exec", payload.clone())), field, "{payload}");
        }
        assert!(validate("exec", &encode_json(&json!({"program": "x"}))).is_ok());
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
