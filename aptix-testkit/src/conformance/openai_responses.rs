//! The OpenAI Responses API's side of the conformance suite: scripted turns
//! streamed as [`crate::mock_responses`] writes them, and requests read
//! back from `instructions` and `input` items.

use serde_json::{Map, Value, json};

use super::{ProviderWire, WireMessage, WireRequest, WireTurn};
use crate::mock_responses::{ResponsesTurn, error_response};
use crate::mock_server::ScriptedResponse;

/// The Responses API wire (`POST /v1/responses`, streamed).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiResponsesWire;

impl ProviderWire for OpenAiResponsesWire {
    fn name(&self) -> &'static str {
        "openai_responses"
    }

    fn turn(&self, turn: &WireTurn) -> ScriptedResponse {
        let mut scripted = ResponsesTurn::new().usage(turn.usage.0, turn.usage.1);
        if let Some(reasoning) = &turn.reasoning {
            let pieces: Vec<&str> = reasoning.text.iter().map(String::as_str).collect();
            scripted = scripted.reasoning(&pieces, &reasoning.token);
        }
        if let Some(hosted) = &turn.hosted {
            let mut action = match &hosted.input {
                Value::Object(input) => input.clone(),
                _ => Map::new(),
            };
            action.insert("type".into(), json!("search"));
            if !hosted.output.is_null() {
                action.insert("sources".into(), hosted.output.clone());
            }
            scripted = scripted.raw_item(
                json!({ "id": hosted.id, "type": "web_search_call", "status": "in_progress" }),
                json!({
                    "id": hosted.id,
                    "type": "web_search_call",
                    "status": "completed",
                    "action": action,
                }),
            );
        }
        if !turn.text.is_empty() {
            let pieces: Vec<&str> = turn.text.iter().map(String::as_str).collect();
            scripted = scripted.text_chunks(&pieces);
        }
        for call in &turn.calls {
            let pieces: Vec<&str> = call.arguments.iter().map(String::as_str).collect();
            scripted = scripted.function_call(&call.id, &call.name, &pieces);
        }
        if turn.cut_at_limit {
            scripted = scripted.incomplete("max_output_tokens");
        }
        scripted.into_response()
    }

    fn error(&self, status: u16, message: &str) -> ScriptedResponse {
        error_response(status, message)
    }

    fn read_request(&self, body: &Value) -> Result<WireRequest, String> {
        if body.get("stream") != Some(&Value::Bool(true)) {
            return Err("`stream` is not true".into());
        }
        if !body.get("model").is_some_and(Value::is_string) {
            return Err("`model` is not a string".into());
        }
        let mut request = WireRequest::default();
        for tool in body
            .get("tools")
            .map(|tools| tools.as_array().ok_or("`tools` is not an array"))
            .transpose()?
            .into_iter()
            .flatten()
        {
            match tool.get("type").and_then(Value::as_str) {
                Some("function") => {
                    let name = tool
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or("a function tool without a name")?;
                    if !tool.get("parameters").is_some_and(Value::is_object) {
                        return Err(format!(
                            "the function tool `{name}` has no parameters object"
                        ));
                    }
                    if !tool.get("strict").is_some_and(Value::is_boolean) {
                        return Err(format!("the function tool `{name}` does not say `strict`"));
                    }
                    request.tools.push(name.to_owned());
                }
                Some(kind) => request.hosted_tools.push(catalog_name(kind).to_owned()),
                None => return Err(format!("a tool without a type: {tool}")),
            }
        }
        if let Some(instructions) = body.get("instructions") {
            let text = instructions
                .as_str()
                .ok_or("`instructions` is not a string")?;
            request.messages.push(WireMessage::System(text.to_owned()));
        }
        let input = body
            .get("input")
            .and_then(Value::as_array)
            .ok_or("`input` is not an array")?;
        let mut turn: Option<WireMessage> = None;
        for item in input {
            read_item(item, &mut turn, &mut request.messages)?;
        }
        request.messages.extend(turn);
        Ok(request)
    }

    fn hosted_tool(&self) -> Option<&'static str> {
        Some("web_search")
    }
}

/// The catalog's name for a hosted tool's wire type.
fn catalog_name(kind: &str) -> &str {
    match kind {
        "web_search" | "web_search_preview" | "web_search_2025_08_26" => "web_search",
        other => other,
    }
}

/// Reads one input item: a model turn's items gather in `turn` until an
/// item of another kind ends it.
fn read_item(
    item: &Value,
    turn: &mut Option<WireMessage>,
    messages: &mut Vec<WireMessage>,
) -> Result<(), String> {
    let kind = item.get("type").and_then(Value::as_str);
    let role = item.get("role").and_then(Value::as_str);
    match (kind, role) {
        (None | Some("message"), Some(role @ ("user" | "system" | "developer"))) => {
            messages.extend(turn.take());
            let text = content_text(item.get("content"))?;
            messages.push(if role == "user" {
                WireMessage::User(text)
            } else {
                WireMessage::System(text)
            });
        }
        (Some("message") | None, Some("assistant")) => {
            let text_now = content_text(item.get("content"))?;
            if let WireMessage::Assistant { text, .. } = assistant_turn(turn) {
                text.push_str(&text_now);
            }
        }
        (Some("reasoning"), _) => {
            let token = match item.get("encrypted_content").and_then(Value::as_str) {
                Some(token) => token.to_owned(),
                None => item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect(),
            };
            if let WireMessage::Assistant { reasoning, .. } = assistant_turn(turn) {
                reasoning.push(token);
            }
        }
        (Some("function_call"), _) => {
            let field = |name: &str| {
                item.get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("a function_call without a string `{name}`: {item}"))
            };
            let (id, name, arguments) = (field("call_id")?, field("name")?, field("arguments")?);
            let arguments: Value = serde_json::from_str(arguments)
                .map_err(|error| format!("a function_call's arguments are not JSON: {error}"))?;
            if let WireMessage::Assistant { calls, .. } = assistant_turn(turn) {
                calls.push((id.to_owned(), name.to_owned(), arguments));
            }
        }
        (Some("function_call_output"), _) => {
            messages.extend(turn.take());
            let id = item
                .get("call_id")
                .and_then(Value::as_str)
                .ok_or("a function_call_output without a call_id")?;
            let content = item
                .get("output")
                .and_then(Value::as_str)
                .ok_or("a function_call_output whose output is not text")?;
            messages.push(WireMessage::ToolResult {
                id: id.to_owned(),
                content: content.to_owned(),
            });
        }
        (Some(kind), _) if kind.ends_with("_call") => {
            if let WireMessage::Assistant { hosted, .. } = assistant_turn(turn) {
                *hosted = true;
            }
        }
        _ => return Err(format!("an input item of no documented shape: {item}")),
    }
    Ok(())
}

/// A message's text: its string content, or its text parts joined.
fn content_text(content: Option<&Value>) -> Result<String, String> {
    match content {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")),
        other => Err(format!(
            "a message whose content is neither text nor parts: {other:?}"
        )),
    }
}

/// The model turn being gathered, opened if none is.
fn assistant_turn(turn: &mut Option<WireMessage>) -> &mut WireMessage {
    turn.get_or_insert_with(|| WireMessage::Assistant {
        text: String::new(),
        calls: Vec::new(),
        reasoning: Vec::new(),
        hosted: false,
    })
}
