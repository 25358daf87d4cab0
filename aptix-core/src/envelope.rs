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

/// The outcome of one tool call as the model and the logs see it.
#[derive(Clone, PartialEq)]
pub struct Envelope {
    tool_call_id: Arc<str>,
    conversation_id: Option<Arc<str>>,
    session_id: Option<Arc<str>>,
    body: Body,
}

#[derive(Clone)]
enum Body {
    /// The serialized result, kept as text so it is serialized exactly once.
    Ok(Box<RawValue>),
    Err(EnvelopeError),
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Body::Ok(a), Body::Ok(b)) => a.get() == b.get(),
            (Body::Err(a), Body::Err(b)) => a == b,
            _ => false,
        }
    }
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
    pub fn ok(ids: EnvelopeIds, result: Box<RawValue>) -> Self {
        Self::from_parts(ids, Body::Ok(result))
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
    pub fn result(&self) -> Option<&RawValue> {
        match &self.body {
            Body::Ok(raw) => Some(raw),
            Body::Err(_) => None,
        }
    }

    /// The result parsed into `T`, for tests and programs that consume results.
    pub fn result_as<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Option<Result<T, serde_json::Error>> {
        self.result().map(|raw| serde_json::from_str(raw.get()))
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
    pub fn to_json_string(&self) -> String {
        // Serializing these fields cannot fail: a RawValue is valid JSON and
        // every other field is a string, a bool or a serde_json::Value.
        serde_json::to_string(self).unwrap_or_else(|_| {
            String::from(r#"{"ok":false,"error":{"code":"internal","message":"envelope serialization failed"}}"#)
        })
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
            Body::Ok(raw) => {
                map.serialize_entry("ok", &true)?;
                map.serialize_entry("result", raw)?;
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
            #[serde(default)]
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
            (true, Some(result), None) => Body::Ok(result),
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
