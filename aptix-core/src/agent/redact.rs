//! Redaction of declared secrets in what events and logs show.

use serde_json::Value;

/// What a redacted value reads as.
pub const REDACTED: &str = "[redacted]";

/// Replaces the value at each JSON pointer in `pointers` with `"[redacted]"`.
/// Pointers that lead nowhere are ignored: a field that is absent has
/// nothing to hide.
pub fn redact(value: &mut Value, pointers: &[&str]) {
    for pointer in pointers {
        if let Some(target) = value.pointer_mut(pointer) {
            *target = Value::String(REDACTED.to_owned());
        }
    }
}

/// The arguments text as a value for events: parsed and redacted when it is
/// JSON, and when it is not, shown as text only if nothing is declared
/// secret (unparseable text could hold the secret anywhere).
pub fn redacted_arguments(raw: &str, pointers: &[&str]) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(mut value) => {
            redact(&mut value, pointers);
            value
        }
        Err(_) if pointers.is_empty() => Value::String(raw.to_owned()),
        Err(_) => Value::String(REDACTED.to_owned()),
    }
}

/// An envelope's JSON with the result's secrets redacted.
pub fn redacted_envelope(mut envelope: Value, pointers: &[&str]) -> Value {
    if let Some(result) = envelope.get_mut("result") {
        redact(result, pointers);
    }
    envelope
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_nested_pointers_and_ignores_missing_ones() {
        let mut value =
            json!({ "user": { "password": "hunter2", "name": "ada" }, "keys": ["k1", "k2"] });
        redact(&mut value, &["/user/password", "/keys/1", "/absent"]);
        assert_eq!(
            value,
            json!({ "user": { "password": REDACTED, "name": "ada" }, "keys": ["k1", REDACTED] })
        );
    }

    #[test]
    fn unparseable_arguments_are_hidden_whole_when_anything_is_secret() {
        assert_eq!(
            redacted_arguments("{\"password\": \"hun", &["/password"]),
            json!(REDACTED)
        );
        assert_eq!(redacted_arguments("{\"x\": 1", &[]), json!("{\"x\": 1"));
    }
}
