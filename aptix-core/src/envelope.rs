//! The result envelope: the one JSON shape every tool call ends in.
//!
//! `{"ok":true,"result":…}` or `{"ok":false,"error":{"code":…,"message":…}}`,
//! plus the ids of the call, conversation and session, so a result can be
//! traced without its surrounding transcript.
//!
//! One optional member follows the ids: `"arguments_changed_by_approver"`,
//! present only when a person approved the call with other arguments than
//! the model sent. It holds the arguments the call ran with, so that the
//! model does not take the result for one of its own arguments.
//!
//! What a tool attached for the model to see ([`crate::content::ToolReturn`])
//! travels with the envelope but outside its JSON: the model adapters send it
//! in the provider's own form. Only the durable ledger's copy
//! ([`Envelope::to_stored_json`]) writes it, as a last `"attachments"`
//! member, so that a result settled from the ledger still has it.

use std::fmt;
use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::content::Content;
use crate::error::ErrorCode;

/// The start of every successful envelope's JSON.
const OK_PREFIX: &str = r#"{"ok":true,"result":"#;

/// The member that carries the arguments an approver changed the call to.
pub const ARGUMENTS_CHANGED_BY_APPROVER: &str = "arguments_changed_by_approver";

/// The member the stored form of an envelope keeps its attachments in.
const ATTACHMENTS: &str = "attachments";

/// JSON text known to be valid: produced by serde_json, or checked when it
/// came from elsewhere. Results are kept as text so that they are
/// serialized exactly once and never re-encoded.
///
/// The text is `buf[start..end]`. A result the executor produced sits after
/// room for the opening of its envelope (`start` is then `OK_PREFIX.len()`
/// and `buf` starts with `OK_PREFIX`; `start` is 0 otherwise), so that
/// [`Envelope::ok`] completes the envelope's JSON around it in place: the
/// result is written once and never copied.
#[derive(Clone)]
pub struct JsonText {
    buf: String,
    start: usize,
    end: usize,
}

impl JsonText {
    fn whole(text: String) -> Self {
        let end = text.len();
        JsonText {
            buf: text,
            start: 0,
            end,
        }
    }

    /// Serializes `value`.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_string(value).map(Self::whole)
    }

    /// Serializes `value` behind the opening of a successful envelope, with
    /// `spare` more bytes reserved for its closing (the ids), so that
    /// [`Envelope::ok`] finishes the envelope without copying the result.
    pub(crate) fn for_envelope<T: Serialize + ?Sized>(
        value: &T,
        spare: usize,
    ) -> Result<Self, serde_json::Error> {
        // Only the serialization depends on `T`: the rest is not copied
        // into the code of every tool.
        let mut bytes = Self::envelope_buffer(spare);
        serde_json::to_writer(&mut bytes, value)?;
        Self::envelope_result(bytes)
    }

    fn envelope_buffer(spare: usize) -> Vec<u8> {
        // 128 bytes for the result, as `serde_json::to_string` starts with.
        let mut bytes = Vec::with_capacity(OK_PREFIX.len() + 128 + spare);
        bytes.extend_from_slice(OK_PREFIX.as_bytes());
        bytes
    }

    fn envelope_result(bytes: Vec<u8>) -> Result<Self, serde_json::Error> {
        // serde_json writes only UTF-8 and `OK_PREFIX` is ASCII, so this
        // check never fails; the crate forbids skipping it.
        let buf =
            String::from_utf8(bytes).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
        let end = buf.len();
        Ok(JsonText {
            buf,
            start: OK_PREFIX.len(),
            end,
        })
    }

    /// Checks that `text` is one JSON document.
    pub fn parse(text: impl Into<String>) -> Result<Self, serde_json::Error> {
        let text = text.into();
        serde_json::from_str::<serde::de::IgnoredAny>(&text)?;
        Ok(Self::whole(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    /// The text, owned.
    pub fn into_string(mut self) -> String {
        if self.start == 0 {
            self.buf.truncate(self.end);
            self.buf
        } else {
            self.as_str().to_owned()
        }
    }

    /// The value, parsed.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.as_str()).unwrap_or(Value::Null)
    }

    /// The text parsed into `T`.
    pub fn parse_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.as_str())
    }

    /// The complete JSON of a successful envelope with `ids` around this
    /// result: in place when the result was serialized for an envelope.
    fn into_envelope_json(self, ids: &EnvelopeIds) -> JsonText {
        let JsonText {
            mut buf,
            start,
            end,
        } = self;
        let ids = (
            &*ids.tool_call_id,
            ids.conversation_id.as_deref(),
            ids.session_id.as_deref(),
        );
        let closing = closing_len(ids.0, ids.1, ids.2);
        if start == OK_PREFIX.len() && buf.starts_with(OK_PREFIX) {
            // Drops whatever followed the result (the closing of an
            // envelope this result was taken from).
            buf.truncate(end);
            buf.reserve(closing);
        } else {
            let result = buf.get(start..end).unwrap_or_default();
            let mut fresh = String::with_capacity(OK_PREFIX.len() + result.len() + closing);
            fresh.push_str(OK_PREFIX);
            fresh.push_str(result);
            buf = fresh;
        }
        let end = buf.len();
        push_closing(&mut buf, ids.0, ids.1, ids.2);
        JsonText {
            buf,
            start: OK_PREFIX.len(),
            end,
        }
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for JsonText {}

impl std::hash::Hash for JsonText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> Self {
        JsonText::whole(String::from(Box::<str>::from(raw)))
    }
}

impl fmt::Debug for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for JsonText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // As raw JSON, so a JSON serializer copies the exact bytes.
        let raw =
            RawValue::from_string(self.as_str().to_owned()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(JsonText::whole(value.to_string()))
    }
}

/// The outcome of one tool call as the model and the logs see it.
#[derive(Clone, PartialEq)]
pub struct Envelope {
    tool_call_id: Arc<str>,
    conversation_id: Option<Arc<str>>,
    session_id: Option<Arc<str>>,
    body: Body,
    /// The arguments an approver changed the call to; also written at the
    /// end of a successful envelope's JSON.
    changed_arguments: Option<JsonText>,
    /// What the tool attached for the model to see; never in the JSON the
    /// model reads as the result.
    /// Boxed and absent when empty (nearly always): one pointer in every
    /// envelope instead of a vector's three words, which every call's
    /// envelope would carry and move.
    #[allow(clippy::box_collection)] // one word on every call, see above
    attachments: Option<Box<Vec<Content>>>,
}

#[derive(Clone, PartialEq)]
enum Body {
    /// The serialized result, inside the envelope's complete JSON (built
    /// once, when the envelope is made: `to_json_string` then only copies it).
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
        let body = match body {
            Body::Ok(result) => Body::Ok(result.into_envelope_json(&ids)),
            Body::Err(error) => Body::Err(error),
        };
        Envelope {
            tool_call_id: ids.tool_call_id,
            conversation_id: ids.conversation_id,
            session_id: ids.session_id,
            body,
            changed_arguments: None,
            attachments: None,
        }
    }

    /// Attaches content for the model to see beside the result (what a
    /// tool returned in [`crate::content::ToolReturn::content`]).
    pub fn with_attachments(mut self, attachments: Vec<Content>) -> Self {
        self.attachments = (!attachments.is_empty()).then(|| Box::new(attachments));
        self
    }

    /// What the tool attached for the model to see, in its order.
    pub fn attachments(&self) -> &[Content] {
        self.attachments.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Takes the attachments out of the envelope.
    pub fn take_attachments(&mut self) -> Vec<Content> {
        self.attachments
            .take()
            .map(|boxed| *boxed)
            .unwrap_or_default()
    }

    /// The envelope's JSON with its attachments as a last `"attachments"`
    /// member: the copy the durable ledger keeps, which deserializes back
    /// into the same envelope. Without attachments it is
    /// [`Envelope::to_json_string`].
    pub fn to_stored_json(&self) -> String {
        let mut json = self.to_json_string();
        let Some(attachments) = &self.attachments else {
            return json;
        };
        // Content blocks are strings and plain objects: they serialize.
        match serde_json::to_string(attachments) {
            Ok(attachments) => {
                json.pop();
                json.push_str(",\"");
                json.push_str(ATTACHMENTS);
                json.push_str("\":");
                json.push_str(&attachments);
                json.push('}');
            }
            Err(error) => {
                tracing::error!(%error, "a result's attachments do not serialize; stored without them");
            }
        }
        json
    }

    /// Whether `json` may be an envelope's stored form with attachments
    /// (a cheap test before parsing it).
    pub(crate) fn may_have_attachments(json: &str) -> bool {
        json.contains(",\"attachments\":[")
    }

    /// Marks the envelope of a call that a person approved with other
    /// arguments than the model sent: `arguments` (the ones it ran with)
    /// go into the `"arguments_changed_by_approver"` member, so that the
    /// model learns its call was changed.
    pub fn with_arguments_changed_by_approver(mut self, arguments: JsonText) -> Self {
        if let Body::Ok(result) = &mut self.body {
            // Rewrites the closing of the JSON written when it was made.
            if let Some(unchanged) = self.changed_arguments.take() {
                let member = changed_member_len(&unchanged);
                result.buf.truncate(result.buf.len().saturating_sub(member));
            } else {
                result.buf.pop();
            }
            push_changed_member(&mut result.buf, &arguments);
        }
        self.changed_arguments = Some(arguments);
        self
    }

    /// The arguments an approver changed the call to, when it did.
    pub fn arguments_changed_by_approver(&self) -> Option<&JsonText> {
        self.changed_arguments.as_ref()
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
    /// Written by hand: this runs for every tool call, and going through
    /// serde's map machinery cost more than the tool call itself. A
    /// successful envelope's JSON is written once, when it is made (the
    /// executor serializes the result straight into it), so this copies it.
    /// The output is byte-identical to `serde_json::to_string` of this
    /// envelope (a test checks that).
    pub fn to_json_string(&self) -> String {
        match &self.body {
            // Written when the envelope was made.
            Body::Ok(result) => result.buf.clone(),
            Body::Err(error) => {
                // Error envelopes are rare: serde is fine here, and it cannot
                // fail for a code, a string and a `Value`.
                let error = serde_json::to_string(error).unwrap_or_else(|_| String::from("null"));
                let ids = (
                    &*self.tool_call_id,
                    self.conversation_id.as_deref(),
                    self.session_id.as_deref(),
                );
                let mut out =
                    String::with_capacity(error.len() + closing_len(ids.0, ids.1, ids.2) + 20);
                out.push_str(r#"{"ok":false,"error":"#);
                out.push_str(&error);
                push_closing(&mut out, ids.0, ids.1, ids.2);
                if let Some(arguments) = &self.changed_arguments {
                    out.pop();
                    push_changed_member(&mut out, arguments);
                }
                out
            }
        }
    }

    /// The envelope as compact JSON, like [`Envelope::to_json_string`], but
    /// consuming the envelope: a successful envelope's JSON was written when
    /// it was made, and is handed out here without a copy.
    pub fn into_json_string(self) -> String {
        match self.body {
            Body::Ok(result) => result.buf,
            Body::Err(_) => self.to_json_string(),
        }
    }

    /// Writes the envelope's JSON to `f` without building a new string
    /// for a successful one.
    fn write_json(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.body {
            Body::Ok(result) => f.write_str(&result.buf),
            Body::Err(_) => f.write_str(&self.to_json_string()),
        }
    }

    /// The envelope as a `serde_json::Value`.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.to_json_string()).unwrap_or(Value::Null)
    }
}

impl fmt::Debug for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_json(f)
    }
}

impl fmt::Display for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_json(f)
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
        if let Some(arguments) = &self.changed_arguments {
            map.serialize_entry(ARGUMENTS_CHANGED_BY_APPROVER, arguments)?;
        }
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
            #[serde(default)]
            arguments_changed_by_approver: Option<Box<RawValue>>,
            // Only in the stored form (`to_stored_json`).
            #[serde(default)]
            attachments: Vec<Content>,
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
        // Through `from_parts`, which writes a successful envelope's JSON
        // (what `to_json_string` hands out) around the result.
        let envelope = Envelope::from_parts(
            EnvelopeIds {
                tool_call_id: wire.tool_call_id.into(),
                conversation_id: wire.conversation_id.map(Into::into),
                session_id: wire.session_id.map(Into::into),
            },
            body,
        );
        let envelope = match wire.arguments_changed_by_approver {
            Some(arguments) => envelope.with_arguments_changed_by_approver(arguments.into()),
            None => envelope,
        };
        Ok(envelope.with_attachments(wire.attachments))
    }
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(Some)
}

/// Appends `,"arguments_changed_by_approver":…}` in place of an envelope's
/// closing brace (already removed).
fn push_changed_member(out: &mut String, arguments: &JsonText) {
    out.push_str(",\"");
    out.push_str(ARGUMENTS_CHANGED_BY_APPROVER);
    out.push_str("\":");
    out.push_str(arguments.as_str());
    out.push('}');
}

/// The length of what [`push_changed_member`] appends.
fn changed_member_len(arguments: &JsonText) -> usize {
    ARGUMENTS_CHANGED_BY_APPROVER.len() + arguments.as_str().len() + 5
}

/// The bytes a JSON string must escape: control characters, `"` and `\\`.
const NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// The length of an envelope's closing (the ids) when no id needs escaping.
pub(crate) fn closing_len(
    tool_call_id: &str,
    conversation_id: Option<&str>,
    session_id: Option<&str>,
) -> usize {
    const NAMES: usize = r#","tool_call_id":"","conversation_id":"","session_id":""}"#.len();
    NAMES
        + tool_call_id.len()
        + conversation_id.map_or(4, str::len)
        + session_id.map_or(4, str::len)
}

/// Appends the ids and the closing brace of an envelope.
fn push_closing(
    out: &mut String,
    tool_call_id: &str,
    conversation_id: Option<&str>,
    session_id: Option<&str>,
) {
    out.push_str(r#","tool_call_id":"#);
    push_json_string(out, tool_call_id);
    out.push_str(r#","conversation_id":"#);
    push_optional_json_string(out, conversation_id);
    out.push_str(r#","session_id":"#);
    push_optional_json_string(out, session_id);
    out.push('}');
}

/// Appends `text` as a JSON string, escaped exactly as serde_json does.
fn push_json_string(out: &mut String, text: &str) {
    if !text.bytes().any(|byte| NEEDS_ESCAPE[usize::from(byte)]) {
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

    #[test]
    fn attachments_stay_out_of_the_models_json_and_in_the_stored_copy()
    -> Result<(), serde_json::Error> {
        let image = Content::image("iVBORw0K", "image/png");
        let plain = Envelope::ok(ids("call_1", Some("c")), JsonText::for_envelope(&7, 0)?);
        let attached = plain.clone().with_attachments(vec![image.clone()]);
        // What the model reads as the result is the same with or without.
        assert_eq!(attached.to_json_string(), plain.to_json_string());
        assert_eq!(serde_json::to_string(&attached)?, plain.to_json_string());
        // Without attachments the stored copy is the model's JSON.
        assert_eq!(plain.to_stored_json(), plain.to_json_string());
        assert!(!Envelope::may_have_attachments(&plain.to_stored_json()));
        // With them, one more member, and it reads back whole.
        let stored = attached.to_stored_json();
        assert_eq!(
            stored,
            r#"{"ok":true,"result":7,"tool_call_id":"call_1","conversation_id":"c","session_id":null,"attachments":[{"type":"image","data":"iVBORw0K","mimeType":"image/png"}]}"#
        );
        assert!(Envelope::may_have_attachments(&stored));
        let read: Envelope = serde_json::from_str(&stored)?;
        assert_eq!(read, attached);
        assert_eq!(read.attachments(), [image]);
        // An approver's change and attachments together.
        let changed = attached.with_arguments_changed_by_approver(JsonText::from_serialize(
            &serde_json::json!({"a": 1}),
        )?);
        let read: Envelope = serde_json::from_str(&changed.to_stored_json())?;
        assert_eq!(read, changed);
        Ok(())
    }

    #[test]
    fn a_result_serialized_for_an_envelope_is_completed_in_place() -> Result<(), serde_json::Error>
    {
        let result = JsonText::for_envelope(&serde_json::json!({"a": "é\"x"}), 0)?;
        assert_eq!(result.as_str(), r#"{"a":"é\"x"}"#);
        let envelope = Envelope::ok(ids("call\n1", Some("c")), result.clone());
        assert_eq!(envelope.to_json_string(), serde_json::to_string(&envelope)?);
        assert_eq!(envelope.result(), Some(&result));
        // With ids that need escaping.
        let ctx_ids = EnvelopeIds {
            tool_call_id: "call_1".into(),
            conversation_id: Some("c\u{1}".into()),
            session_id: Some("s\"1".into()),
        };
        let in_ctx = Envelope::ok(ctx_ids, JsonText::for_envelope(&1, 0)?);
        assert_eq!(in_ctx.to_json_string(), serde_json::to_string(&in_ctx)?);
        // A result taken out of one envelope and put into another.
        let taken = envelope.result().cloned().map(JsonText::into_string);
        assert_eq!(taken.as_deref(), Some(r#"{"a":"é\"x"}"#));
        let again = Envelope::ok(
            ids("other", None),
            envelope.result().cloned().unwrap_or_else(|| result.clone()),
        );
        assert_eq!(again.to_json_string(), serde_json::to_string(&again)?);
        assert_eq!(again.result(), Some(&result));
        let json = again.to_json_string();
        assert_eq!(again.into_json_string(), json);
        Ok(())
    }

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
            Envelope::ok(ids("edited", Some("c")), JsonText::parse(r#""ran""#)?)
                .with_arguments_changed_by_approver(JsonText::parse(r#"{"cents":50}"#)?),
            Envelope::ok(ids("edited twice", None), JsonText::parse("1")?)
                .with_arguments_changed_by_approver(JsonText::parse("{}")?)
                .with_arguments_changed_by_approver(JsonText::parse(r#"{"a":[1]}"#)?),
            Envelope::error(ids("edited-error", None), ErrorCode::Failed, "no")
                .with_arguments_changed_by_approver(JsonText::parse(r#"{"b":"x"}"#)?),
        ];
        for envelope in cases {
            assert_eq!(envelope.to_json_string(), serde_json::to_string(&envelope)?);
            assert_eq!(envelope.to_string(), envelope.to_json_string());
            let back: Envelope = serde_json::from_str(&envelope.to_json_string())?;
            assert_eq!(back, envelope);
            assert_eq!(back.into_json_string(), envelope.to_json_string());
        }
        Ok(())
    }
}
