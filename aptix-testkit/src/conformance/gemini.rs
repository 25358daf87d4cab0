//! The Gemini API's side of the conformance suite: scripted turns written
//! as [`GeminiTurn`]s (`streamGenerateContent?alt=sse` chunks, byte for
//! byte), and `generateContent` request bodies read back into neutral form.
//!
//! How the neutral turn maps to Gemini's:
//!
//! - reasoning: one thought part (`"thought": true`) per piece of text;
//!   its token is the `thoughtSignature` of the first function call's part
//!   (as Gemini signs a turn that calls), or, in a turn without calls, of
//!   the empty text part that closes it;
//! - a provider tool: a Google Search, its `input`'s `query` (or
//!   `queries`) as the `webSearchQueries` and its `output` (an array) as
//!   the `groundingChunks` of the last chunk's `groundingMetadata`;
//! - calls: all in one chunk, each whole, with its id when it has one;
//! - a turn cut at its limit: `finishReason: MAX_TOKENS`.
//!
//! Gemini takes no grounding back, so a past turn's search leaves nothing
//! in later requests: [`WireMessage::Assistant::hosted`] is true only for
//! the parts of code execution or a server-side tool sent back.

use serde_json::{Value, json};

use super::{ProviderWire, WireMessage, WireRequest, WireTurn};
use crate::mock_gemini::{GeminiCall, GeminiTurn, error_response};
use crate::mock_server::ScriptedResponse;

/// The Gemini API's wire for the conformance suite.
#[derive(Debug, Clone, Copy, Default)]
pub struct GeminiWire;

impl ProviderWire for GeminiWire {
    fn name(&self) -> &'static str {
        "gemini"
    }

    /// Gemini's grounding is metadata of the answer, not a part: nothing of
    /// it goes back with the turn.
    fn hosted_goes_back(&self) -> bool {
        false
    }

    fn turn(&self, turn: &WireTurn) -> ScriptedResponse {
        gemini_turn(turn).into_response()
    }

    fn error(&self, status: u16, message: &str) -> ScriptedResponse {
        error_response(status, message)
    }

    fn read_request(&self, body: &Value) -> Result<WireRequest, String> {
        read_request(body)
    }

    fn hosted_tool(&self) -> Option<&'static str> {
        Some("google_search")
    }
}

/// `turn` as a [`GeminiTurn`], for a test that needs the builder itself
/// (to cut its frames, say).
pub fn gemini_turn(turn: &WireTurn) -> GeminiTurn {
    let mut out = GeminiTurn::new().usage(turn.usage.0, turn.usage.1);
    let mut token = None;
    if let Some(reasoning) = &turn.reasoning {
        for piece in &reasoning.text {
            out = out.thought(piece);
        }
        token = Some(reasoning.token.clone()).filter(|token| !token.is_empty());
    }
    if let Some(hosted) = &turn.hosted {
        let queries = match (hosted.input.get("queries"), hosted.input.get("query")) {
            (Some(Value::Array(queries)), _) => Value::Array(queries.clone()),
            (_, Some(query)) => json!([query]),
            _ => json!([]),
        };
        let chunks = match &hosted.output {
            Value::Array(chunks) => Value::Array(chunks.clone()),
            other => json!([other]),
        };
        out = out.grounding(json!({
            "groundingChunks": chunks,
            "webSearchQueries": queries,
        }));
    }
    let pieces: Vec<&str> = turn.text.iter().map(String::as_str).collect();
    out = out.text_chunks(&pieces);
    if turn.calls.is_empty() {
        if let Some(token) = token {
            out = out.text_signature(&token);
        }
    } else {
        let calls = turn
            .calls
            .iter()
            .enumerate()
            .map(|(at, call)| {
                let arguments = call.arguments.concat();
                let args = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
                let mut wire = GeminiCall::new(&call.name, args);
                if !call.id.is_empty() {
                    wire = wire.id(&call.id);
                }
                match (&token, at) {
                    (Some(token), 0) => wire.signed(token),
                    _ => wire,
                }
            })
            .collect();
        out = out.calls(calls);
    }
    if turn.cut_at_limit {
        out = out.finish("MAX_TOKENS");
    }
    out
}

/// The catalog name of each of Gemini's own tools.
fn hosted_name(tool: &serde_json::Map<String, Value>) -> Option<&'static str> {
    [
        ("googleSearch", "google_search"),
        ("codeExecution", "code_execution"),
        ("urlContext", "url_context"),
    ]
    .into_iter()
    .find(|(key, _)| tool.contains_key(*key))
    .map(|(_, name)| name)
}

/// Reads a `generateContent` body into neutral form.
pub fn read_request(body: &Value) -> Result<WireRequest, String> {
    let mut request = WireRequest::default();
    for tool in array(body, "tools")? {
        let tool = tool
            .as_object()
            .ok_or_else(|| format!("a tool is not an object: {tool}"))?;
        if let Some(declarations) = tool.get("functionDeclarations") {
            let declarations = declarations
                .as_array()
                .ok_or("functionDeclarations is not an array")?;
            for declaration in declarations {
                let name = declaration
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("a function declaration has no name: {declaration}"))?;
                if let Some(parameters) = declaration.get("parameters")
                    && parameters.get("type").and_then(Value::as_str) != Some("object")
                {
                    return Err(format!("`{name}`'s parameters are not an object schema"));
                }
                request.tools.push(name.to_owned());
            }
        } else if let Some(name) = hosted_name(tool) {
            request.hosted_tools.push(name.to_owned());
        } else {
            return Err(format!(
                "a tool of no known kind: {}",
                Value::Object(tool.clone())
            ));
        }
    }
    if let Some(system) = body.get("systemInstruction") {
        let text: Vec<&str> = array(system, "parts")?
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect();
        request.messages.push(WireMessage::System(text.join("")));
    }
    for content in array(body, "contents")? {
        let parts = array(content, "parts")?;
        if parts.is_empty() {
            return Err("a content without parts".into());
        }
        match content.get("role").and_then(Value::as_str) {
            Some("user") => read_user(parts, &mut request.messages)?,
            Some("model") => request.messages.push(read_model(parts)?),
            other => return Err(format!("a content of role {other:?}")),
        }
    }
    Ok(request)
}

fn read_user(parts: &[Value], messages: &mut Vec<WireMessage>) -> Result<(), String> {
    for part in parts {
        if let Some(response) = part.get("functionResponse") {
            let name = response
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a functionResponse without a name")?;
            let id = response
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(name)
                .to_owned();
            let answer = response
                .get("response")
                .and_then(Value::as_object)
                .ok_or("a functionResponse whose response is not an object")?;
            let envelope = answer
                .get("output")
                .or_else(|| answer.get("error"))
                .cloned()
                .unwrap_or_else(|| Value::Object(answer.clone()));
            let content = match envelope {
                Value::String(text) => text,
                other => other.to_string(),
            };
            messages.push(WireMessage::ToolResult { id, content });
        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
            messages.push(WireMessage::User(text.to_owned()));
        } else if part.get("inlineData").is_none() {
            return Err(format!("a user part of no known kind: {part}"));
        }
    }
    Ok(())
}

fn read_model(parts: &[Value]) -> Result<WireMessage, String> {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    let mut hosted = false;
    for part in parts {
        if !part.is_object() {
            return Err(format!("a part is not an object: {part}"));
        }
        if let Some(signature) = part.get("thoughtSignature") {
            let signature = signature
                .as_str()
                .ok_or("a thoughtSignature is not a string")?;
            reasoning.push(signature.to_owned());
        }
        if let Some(call) = part.get("functionCall") {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a functionCall without a name")?;
            let args = call.get("args").cloned().unwrap_or(json!({}));
            if !args.is_object() {
                return Err(format!("`{name}`'s args are not an object"));
            }
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            calls.push((id.to_owned(), name.to_owned(), args));
        } else if [
            "executableCode",
            "codeExecutionResult",
            "toolCall",
            "toolResponse",
        ]
        .iter()
        .any(|key| part.get(*key).is_some())
        {
            hosted = true;
        } else if part.get("thought").and_then(Value::as_bool) == Some(true) {
            // A thought summary: its signature, if any, was read above.
        } else if let Some(piece) = part.get("text").and_then(Value::as_str) {
            text.push_str(piece);
        }
    }
    Ok(WireMessage::Assistant {
        text,
        calls,
        reasoning,
        hosted,
    })
}

fn array<'a>(value: &'a Value, key: &str) -> Result<&'a [Value], String> {
    match value.get(key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!("`{key}` is not an array: {other}")),
    }
}
