//! The result envelope: the one JSON shape every tool call ends in.
//!
//! `{"ok":true,"result":…}` or `{"ok":false,"error":{"code":…,"message":…}}`,
//! plus the ids of the call, conversation and session, so a result can be
//! traced without its surrounding transcript (AGN-005 §8).

use std::fmt;
use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::ErrorCode;

/// JSON text known to be valid: produced by serde_json, or checked when it
/// came from elsewhere. Results are kept as text so that they are
/// serialized exactly once and copied, not re-encoded, into the envelope.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct JsonText(String);

impl JsonText {
    /// Serializes `value`.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_string(value).map(JsonText)
    }

    /// Checks that `text` is one JSON document.
    pub fn parse(text: impl Into<String>) -> Result<Self, serde_json::Error> {
        let text = text.into();
        serde_json::from_str::<serde::de::IgnoredAny>(&text)?;
        Ok(JsonText(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }

    /// The value, parsed.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }

    /// The text parsed into `T`.
    pub fn parse_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> Self {
        JsonText(String::from(Box::<str>::from(raw)))
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // As raw JSON, so a JSON serializer copies the exact bytes.
        let raw = RawValue::from_string(self.0.clone()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(JsonText(value.to_string()))
    }
}

/// The outcome of one tool call as the model and the logs see it.
#[derive(Clone, PartialEq)]
pub struct Envelope {
    tool_call_id: Arc<str>,
    conversation_id: Option<Arc<str>>,
    session_id: Option<Arc<str>>,
    body: Body,
}

#[derive(Clone, PartialEq)]
enum Body {
    /// The serialized result.
    Ok(JsonText),
    Err(EnvelopeError),
}

/// The `error` member of a failed envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvelopeError {
    /// One of the stable codes.
    pub code: ErrorCode,
    /// What the model is told: what went wrong and, where possible, how to fix it.
    pub message: String,
    /// Structured detail for programs (e.g. each schema violation with its
    /// JSON path, or the available tool names). Absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// The ids an envelope carries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvelopeIds {
    /// The model's id for the call.
    pub tool_call_id: Arc<str>,
    /// The conversation, when known.
    pub conversation_id: Option<Arc<str>>,
    /// The session, when known.
    pub session_id: Option<Arc<str>>,
}

impl Envelope {
    /// A successful envelope around an already-serialized result.
    pub fn ok(ids: EnvelopeIds, result: impl Into<JsonText>) -> Self {
        Self::from_parts(ids, Body::Ok(result.into()))
    }

    /// A successful envelope around `result`, serialized.
    pub fn ok_value<T: Serialize + ?Sized>(
        ids: EnvelopeIds,
        result: &T,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self::ok(ids, JsonText::from_serialize(result)?))
    }

    /// A failed envelope.
    pub fn error(ids: EnvelopeIds, code: ErrorCode, message: impl Into<String>) -> Self {
        Self::error_with(
            ids,
            EnvelopeError {
                code,
                message: message.into(),
                details: None,
            },
        )
    }

    /// A failed envelope with structured details.
    pub fn error_with(ids: EnvelopeIds, error: EnvelopeError) -> Self {
        Self::from_parts(ids, Body::Err(error))
    }

    fn from_parts(ids: EnvelopeIds, body: Body) -> Self {
        Envelope {
            tool_call_id: ids.tool_call_id,
            conversation_id: ids.conversation_id,
            session_id: ids.session_id,
            body,
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self.body, Body::Ok(_))
    }

    /// The serialized result of a successful call.
    pub fn result(&self) -> Option<&JsonText> {
        match &self.body {
            Body::Ok(raw) => Some(raw),
            Body::Err(_) => None,
        }
    }

    /// The result parsed into `T`, for tests and programs that consume results.
    pub fn result_as<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Option<Result<T, serde_json::Error>> {
        self.result().map(JsonText::parse_as)
    }

    /// The error of a failed call.
    pub fn error_body(&self) -> Option<&EnvelopeError> {
        match &self.body {
            Body::Ok(_) => None,
            Body::Err(error) => Some(error),
        }
    }

    /// The error code of a failed call.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.error_body().map(|error| error.code)
    }

    /// The model's id for the call.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The conversation id, when known.
    pub fn conversation_id(&self) -> Option<&str> {
        self.conversation_id.as_deref()
    }

    /// The session id, when known.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The envelope as compact JSON: what is sent to the model.
    ///
    /// Written by hand into one buffer of the right size: this runs for every
    /// tool call, and going through serde's map machinery cost more than the
    /// tool call itself. The output is byte-identical to `serde_json::to_string`
    /// of this envelope (a test checks that).
    pub fn to_json_string(&self) -> String {
        let ids = self.tool_call_id.len()
            + self.conversation_id.as_deref().map_or(4, str::len)
            + self.session_id.as_deref().map_or(4, str::len);
        let mut out;
        match &self.body {
            Body::Ok(result) => {
                out = String::with_capacity(result.as_str().len() + ids + 80);
                out.push_str(r#"{"ok":true,"result":"#);
                out.push_str(result.as_str());
            }
            Body::Err(error) => {
                // Error envelopes are rare: serde is fine here, and it cannot
                // fail for a code, a string and a `Value`.
                let error = serde_json::to_string(error).unwrap_or_else(|_| String::from("null"));
                out = String::with_capacity(error.len() + ids + 80);
                out.push_str(r#"{"ok":false,"error":"#);
                out.push_str(&error);
            }
        }
        out.push_str(r#","tool_call_id":"#);
        push_json_string(&mut out, &self.tool_call_id);
        out.push_str(r#","conversation_id":"#);
        push_optional_json_string(&mut out, self.conversation_id.as_deref());
        out.push_str(r#","session_id":"#);
        push_optional_json_string(&mut out, self.session_id.as_deref());
        out.push('}');
        out
    }

    /// The envelope as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.to_json_string()).unwrap_or(Value::Null)
    }
}

impl fmt::Debug for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl fmt::Display for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        match &self.body {
            Body::Ok(result) => {
                map.serialize_entry("ok", &true)?;
                map.serialize_entry("result", result)?;
            }
            Body::Err(error) => {
                map.serialize_entry("ok", &false)?;
                map.serialize_entry("error", error)?;
            }
        }
        map.serialize_entry("tool_call_id", &*self.tool_call_id)?;
        map.serialize_entry("conversation_id", &self.conversation_id.as_deref())?;
        map.serialize_entry("session_id", &self.session_id.as_deref())?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            ok: bool,
            // `null` is a result (of a tool returning `()`), not its absence.
            #[serde(default, deserialize_with = "present")]
            result: Option<Box<RawValue>>,
            #[serde(default)]
            error: Option<EnvelopeError>,
            tool_call_id: String,
            #[serde(default)]
            conversation_id: Option<String>,
            #[serde(default)]
            session_id: Option<String>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let body = match (wire.ok, wire.result, wire.error) {
            (true, Some(result), None) => Body::Ok(result.into()),
            (false, None, Some(error)) => Body::Err(error),
            _ => {
                return Err(D::Error::custom(
                    "an envelope has `ok: true` with `result`, or `ok: false` with `error`",
                ));
            }
        };
        Ok(Envelope {
            tool_call_id: wire.tool_call_id.into(),
            conversation_id: wire.conversation_id.map(Into::into),
            session_id: wire.session_id.map(Into::into),
            body,
        })
    }
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(Some)
}

/// Appends `text` as a JSON string, escaped exactly as serde_json does.
fn push_json_string(out: &mut String, text: &str) {
    let plain = text
        .bytes()
        .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\');
    if plain {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        // Serializing a string cannot fail.
        out.push_str(&serde_json::to_string(text).unwrap_or_else(|_| String::from("\"\"")));
    }
}

fn push_optional_json_string(out: &mut String, text: Option<&str>) {
    match text {
        Some(text) => push_json_string(out, text),
        None => out.push_str("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(call: &str, conversation: Option<&str>) -> EnvelopeIds {
        EnvelopeIds {
            tool_call_id: call.into(),
            conversation_id: conversation.map(Into::into),
            session_id: None,
        }
    }

    #[test]
    fn the_hand_written_json_equals_serde_json() -> Result<(), serde_json::Error> {
        let cases = [
            Envelope::ok(
                ids("call_1", Some("c")),
                JsonText::parse(r#"{"a":[1,2,"\u00e9"]}"#)?,
            ),
            Envelope::ok(
                ids("quote\"back\\slash\u{1}", None),
                JsonText::parse("null")?,
            ),
            Envelope::error(
                ids("é😀", Some("line\nbreak")),
                ErrorCode::Failed,
                "it \"failed\"",
            ),
        ];
        for envelope in cases {
            assert_eq!(envelope.to_json_string(), serde_json::to_string(&envelope)?);
            let back: Envelope = serde_json::from_str(&envelope.to_json_string())?;
            assert_eq!(back, envelope);
        }
        Ok(())
    }
}
