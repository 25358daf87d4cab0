//! Redaction of declared secrets in what events and logs show.
//!
//! A tool declares its policy with `redact = [...]` (hide these values) or
//! `log_fields = [...]` (show only these values); see [`Redaction`]. The
//! policy applies to everything this crate puts in an [`AgentEvent`]:
//! the arguments of `ToolCallStart`, the result *and the error* of a
//! `ToolCallResult` envelope (validation messages quote the values they
//! refuse), and the payloads of `Done { Suspended }`.
//!
//! [`AgentEvent`]: super::AgentEvent

use serde_json::{Map, Value};

use crate::envelope::JsonText;
use crate::meta::{Redaction, pointer_tokens as tokens};

/// What a redacted value reads as.
pub const REDACTED: &str = "[redacted]";

/// Applies `redaction` to `value` (arguments or a result): under `Deny`
/// the values at the pointers become `"[redacted]"` (pointers that lead
/// nowhere are ignored: a field that is absent has nothing to hide); under
/// `Allow` every value not at or under a listed pointer does.
///
/// A tool's pointers name its result's fields as well as its arguments',
/// and a latent tool's result is written by the model into the call's
/// arguments, under `_output`: the pointers apply there too (so
/// `redact = ["/password"]` hides `/_output/password`).
pub fn redact(value: &mut Value, redaction: Redaction) {
    match redaction {
        Redaction::Undeclared => {}
        Redaction::Deny(pointers) => {
            for pointer in pointers {
                if let Some(target) = value.pointer_mut(pointer) {
                    *target = Value::String(REDACTED.to_owned());
                }
                if let Some(target) = value
                    .get_mut(OUTPUT)
                    .and_then(|output| output.pointer_mut(pointer))
                {
                    *target = Value::String(REDACTED.to_owned());
                }
            }
        }
        Redaction::Allow(pointers) => {
            keep_allowed(value, &mut Vec::new(), &pointer_tokens(pointers));
        }
    }
}

/// The meta field a latent tool's result travels under in its call.
const OUTPUT: &str = crate::schema::meta_fields::OUTPUT;

/// Each pointer as tokens, and each again under `_output`.
fn pointer_tokens(pointers: &[&str]) -> Vec<Vec<String>> {
    pointers
        .iter()
        .flat_map(|pointer| {
            let tokens = tokens(pointer);
            let mut under_output = vec![OUTPUT.to_owned()];
            under_output.extend(tokens.iter().cloned());
            [tokens, under_output]
        })
        .collect()
}

/// The arguments text as a value for events: parsed and redacted when it is
/// JSON, and when it is not, shown as text only if nothing is declared
/// secret (unparseable text could hold the secret anywhere).
pub fn redacted_arguments(raw: &str, redaction: Redaction) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(mut value) => {
            redact(&mut value, redaction);
            value
        }
        Err(_) if !redaction.hides_anything() => Value::String(raw.to_owned()),
        Err(_) => Value::String(REDACTED.to_owned()),
    }
}

/// An envelope's JSON for events: the result redacted, and the error
/// stripped of every quoted value the policy hides.
///
/// The model still gets the full message (it sent the values); only what
/// events show changes. Messages are rewritten from the error's structured
/// `details` (each violation's JSON path): a violation at, under or above
/// a hidden value (a message about an object may quote its members) shows
/// `"[redacted]"` instead of its text, and an `invalid_json` message is
/// rebuilt from its details (the validator quotes no argument text, but a
/// stored envelope from an older version may). When the message cannot be matched with
/// its details, the whole message is replaced: this fails closed.
pub fn redacted_envelope(mut envelope: Value, redaction: Redaction) -> Value {
    if let Some(result) = envelope.get_mut("result") {
        redact(result, redaction);
    }
    if redaction.hides_anything()
        && let Some(Value::Object(error)) = envelope.get_mut("error")
    {
        redact_error(error, redaction);
    }
    envelope
}

/// A suspended call's payload for events: unchanged when nothing is
/// hidden, otherwise parsed and redacted (an unparseable payload is hidden
/// whole).
pub(crate) fn redacted_payload(payload: &JsonText, redaction: Redaction) -> JsonText {
    if !redaction.hides_anything() {
        return payload.clone();
    }
    let value = match serde_json::from_str::<Value>(payload.as_str()) {
        Ok(mut value) => {
            redact(&mut value, redaction);
            value
        }
        Err(_) => Value::String(REDACTED.to_owned()),
    };
    // Serializing a `Value` cannot fail; if it did, nothing is shown.
    serde_json::value::to_raw_value(&value)
        .or_else(|_| serde_json::value::RawValue::from_string(format!("\"{REDACTED}\"")))
        .map_or_else(
            |_| JsonText::from(serde_json::value::RawValue::NULL.to_owned()),
            JsonText::from,
        )
}

fn redact_error(error: &mut Map<String, Value>, redaction: Redaction) {
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if code == "invalid_json" {
        // Rebuilt from the details (offset and serde_json's reason, which
        // quote nothing): a message stored by an older version quoted the
        // text before the error.
        let (offset, reason) = match error.get("details") {
            Some(details) => (
                details.get("offset").and_then(Value::as_u64),
                details.get("reason").and_then(Value::as_str),
            ),
            None => (None, None),
        };
        let message = match (reason, offset) {
            (Some(reason), Some(offset)) => format!(
                "The arguments are not valid JSON: {reason} at character {offset} ({REDACTED} excerpt). Send one JSON object with the tool's parameters."
            ),
            _ => format!(
                "The arguments are not valid JSON ({REDACTED} excerpt). Send one JSON object with the tool's parameters."
            ),
        };
        error.insert("message".into(), Value::String(message));
        return;
    }
    let Some(Value::Array(details)) = error.get_mut("details") else {
        return;
    };
    let mut hidden = Vec::new();
    for detail in details.iter_mut() {
        let Some(Value::String(path)) = detail.get("path") else {
            continue;
        };
        if shows_path(path, redaction) {
            continue;
        }
        if let Some(Value::String(text)) = detail.get_mut("message") {
            hidden.push(std::mem::replace(text, REDACTED.to_owned()));
        }
    }
    if hidden.is_empty() {
        return;
    }
    let paths = details_paths(error).join(", ");
    let Some(Value::String(message)) = error.get_mut("message") else {
        return;
    };
    let mut rewritten = message.clone();
    let mut matched = true;
    for text in &hidden {
        if text.is_empty() || !rewritten.contains(text.as_str()) {
            matched = false;
            break;
        }
        rewritten = rewritten.replace(text.as_str(), REDACTED);
    }
    *message = if matched {
        rewritten
    } else {
        format!(
            "The values do not match the tool's schema ({REDACTED}: the tool declares secrets); see the paths in `details`: {paths}"
        )
    };
}

fn details_paths(error: &Map<String, Value>) -> Vec<String> {
    match error.get("details") {
        Some(Value::Array(details)) => details
            .iter()
            .filter_map(|detail| detail.get("path").and_then(Value::as_str))
            .map(|path| {
                if path.is_empty() {
                    "/".to_owned()
                } else {
                    path.to_owned()
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether a violation at `path` may be quoted: under `Deny`, when it is
/// neither at, under nor above a hidden pointer (nor one under `_output`,
/// where a latent tool's result is); under `Allow`, when it is at or under
/// a shown one. A path with an unknown segment is never shown.
pub(crate) fn shows_path(path: &str, redaction: Redaction) -> bool {
    let path = tokens(path);
    if path.iter().any(|segment| segment == "?") {
        return false;
    }
    match redaction {
        Redaction::Undeclared => true,
        Redaction::Deny(pointers) => pointer_tokens(pointers)
            .iter()
            .all(|pointer| !pointer.starts_with(&path) && !path.starts_with(pointer)),
        Redaction::Allow(pointers) => pointer_tokens(pointers)
            .iter()
            .any(|pointer| path.starts_with(pointer)),
    }
}

/// Keeps what is at or under an allowed pointer, descends into what is on
/// the way to one, and hides everything else. Member names on the way stay
/// (they are the schema's field names), their values do not.
fn keep_allowed(value: &mut Value, path: &mut Vec<String>, allowed: &[Vec<String>]) {
    if allowed.iter().any(|pointer| path.starts_with(pointer)) {
        return;
    }
    let on_the_way = allowed
        .iter()
        .any(|pointer| pointer.len() > path.len() && pointer.starts_with(path));
    match value {
        Value::Object(members) if on_the_way => {
            for (name, member) in members.iter_mut() {
                path.push(name.clone());
                keep_allowed(member, path, allowed);
                path.pop();
            }
        }
        Value::Array(items) if on_the_way => {
            for (index, item) in items.iter_mut().enumerate() {
                path.push(index.to_string());
                keep_allowed(item, path, allowed);
                path.pop();
            }
        }
        other => *other = Value::String(REDACTED.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_nested_pointers_and_ignores_missing_ones() {
        let mut value =
            json!({ "user": { "password": "hunter2", "name": "ada" }, "keys": ["k1", "k2"] });
        redact(
            &mut value,
            Redaction::Deny(&["/user/password", "/keys/1", "/absent"]),
        );
        assert_eq!(
            value,
            json!({ "user": { "password": REDACTED, "name": "ada" }, "keys": ["k1", REDACTED] })
        );
    }

    #[test]
    fn an_allowlist_shows_only_the_listed_values() {
        let mut value = json!({
            "city": "Paris",
            "street": "1 rue de Rivoli",
            "order": { "id": 7, "card": "4111" },
            "items": [{ "sku": "a", "note": "x" }],
            "tags": ["t1"]
        });
        redact(
            &mut value,
            Redaction::Allow(&["/city", "/order/id", "/items/0/sku", "/absent/x"]),
        );
        assert_eq!(
            value,
            json!({
                "city": "Paris",
                "street": REDACTED,
                "order": { "id": 7, "card": REDACTED },
                "items": [{ "sku": "a", "note": REDACTED }],
                "tags": REDACTED
            })
        );
        let mut scalar = json!("secret");
        redact(&mut scalar, Redaction::Allow(&["/city"]));
        assert_eq!(scalar, json!(REDACTED));
    }

    #[test]
    fn unparseable_arguments_are_hidden_whole_when_anything_is_secret() {
        assert_eq!(
            redacted_arguments("{\"password\": \"hun", Redaction::Deny(&["/password"])),
            json!(REDACTED)
        );
        assert_eq!(
            redacted_arguments("{\"city\": \"Par", Redaction::Allow(&["/city"])),
            json!(REDACTED)
        );
        assert_eq!(
            redacted_arguments("{\"x\": 1", Redaction::Deny(&[])),
            json!("{\"x\": 1")
        );
        assert_eq!(
            redacted_arguments("{\"x\": 1", Redaction::Undeclared),
            json!("{\"x\": 1")
        );
    }

    #[test]
    fn violations_at_under_or_above_a_secret_are_hidden() {
        let deny = Redaction::Deny(&["/card/number"]);
        for (path, shown) in [
            ("/card/number", false),
            ("/card/number/0", false),
            ("/card", false),
            ("", false),
            ("/card/expiry", true),
            ("/user", true),
            ("/card/?", false),
        ] {
            assert_eq!(shows_path(path, deny), shown, "{path}");
        }
        let allow = Redaction::Allow(&["/city"]);
        for (path, shown) in [
            ("/city", true),
            ("/city/0", true),
            ("", false),
            ("/street", false),
        ] {
            assert_eq!(shows_path(path, allow), shown, "{path}");
        }
    }

    #[test]
    fn error_messages_lose_the_values_they_quote() {
        let envelope = json!({
            "ok": false,
            "error": {
                "code": "invalid_arguments",
                "message": "The arguments do not match:\n- at /password: \"hunter2\" is shorter than 12 characters\n- at /user: 5 is not of type \"string\"\nFix it.",
                "details": [
                    { "path": "/password", "message": "\"hunter2\" is shorter than 12 characters" },
                    { "path": "/user", "message": "5 is not of type \"string\"" }
                ]
            }
        });
        let shown = redacted_envelope(envelope, Redaction::Deny(&["/password"]));
        let text = shown.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("- at /password: [redacted]"), "{text}");
        assert!(text.contains("5 is not of type"), "{text}");

        // A message that does not repeat its details verbatim is replaced.
        let envelope = json!({
            "ok": false,
            "error": {
                "code": "invalid_arguments",
                "message": "at /password: \"hunter2…\" is too short",
                "details": [{ "path": "/password", "message": "\"hunter2\" is too short" }]
            }
        });
        let text = redacted_envelope(envelope, Redaction::Deny(&["/password"])).to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("/password"), "{text}");

        let envelope = json!({
            "ok": false,
            "error": {
                "code": "invalid_json",
                "message": "The arguments are not valid JSON: EOF while parsing a string at character 30 of 30 (after `…\"password\":\"horse battery`).",
                "details": { "offset": 30, "reason": "EOF while parsing a string" }
            }
        });
        let text = redacted_envelope(envelope, Redaction::Allow(&["/user"])).to_string();
        assert!(!text.contains("horse"), "{text}");
        assert!(
            text.contains("EOF while parsing a string at character 30"),
            "{text}"
        );
    }

    #[test]
    fn suspended_payloads_are_redacted_only_when_something_is_hidden() {
        let payload = JsonText::from_serialize(&json!({ "token": "tok_1", "service": "b" }))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            redacted_payload(&payload, Redaction::Deny(&["/token"])).to_value(),
            json!({ "token": REDACTED, "service": "b" })
        );
        assert_eq!(
            redacted_payload(&payload, Redaction::Undeclared).as_str(),
            payload.as_str()
        );
    }
}
