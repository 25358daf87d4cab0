//! The Anthropic Messages API's side of the conformance suite: scripted
//! turns streamed by [`AnthropicTurn`] byte for byte as Anthropic streams
//! them, and requests read back from the documented `messages` shape.
//!
//! Reasoning is a `thinking` block whose signature is the opaque token;
//! the provider tool is `web_search` (`server_tool_use` then a
//! `web_search_tool_result`, both whole in the turn).

use serde_json::{Value, json};

use super::{ProviderWire, WireMessage, WireRequest, WireTurn};
use crate::mock_anthropic::{AnthropicTurn, error_response};
use crate::mock_server::ScriptedResponse;

/// [`ProviderWire`] for the Anthropic adapter, served by
/// [`MockAnthropicServer`](crate::mock_anthropic::MockAnthropicServer)'s
/// format (base URL without a path; the adapter appends `/v1/messages`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnthropicWire;

impl ProviderWire for AnthropicWire {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn turn(&self, turn: &WireTurn) -> ScriptedResponse {
        let mut scripted = AnthropicTurn::new().usage(turn.usage.0, turn.usage.1);
        if let Some(reasoning) = &turn.reasoning {
            let pieces: Vec<&str> = reasoning.text.iter().map(String::as_str).collect();
            scripted = scripted.thinking(&pieces, &reasoning.token);
        }
        if let Some(hosted) = &turn.hosted {
            let input = hosted.input.to_string();
            scripted = scripted
                .server_tool_use(&hosted.id, "web_search", &[input.as_str()])
                .server_result(json!({
                    "type": "web_search_tool_result",
                    "tool_use_id": hosted.id,
                    "content": hosted.output,
                }));
        }
        if !turn.text.is_empty() {
            let pieces: Vec<&str> = turn.text.iter().map(String::as_str).collect();
            scripted = scripted.text_chunks(&pieces);
        }
        for call in &turn.calls {
            let pieces: Vec<&str> = call.arguments.iter().map(String::as_str).collect();
            scripted = scripted.tool_use(&call.id, &call.name, &pieces);
        }
        if turn.cut_at_limit {
            scripted = scripted.stop("max_tokens");
        }
        scripted.into_response()
    }

    fn error(&self, status: u16, message: &str) -> ScriptedResponse {
        let kind = match status {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            400..=499 => "invalid_request_error",
            _ => "api_error",
        };
        error_response(status, kind, message)
    }

    fn read_request(&self, body: &Value) -> Result<WireRequest, String> {
        let mut request = WireRequest::default();
        match body.get("system") {
            None => {}
            Some(Value::String(system)) => {
                request.messages.push(WireMessage::System(system.clone()))
            }
            Some(Value::Array(blocks)) => {
                request
                    .messages
                    .push(WireMessage::System(texts(blocks, "system")?.join("")));
            }
            Some(other) => return Err(format!("`system` is neither a string nor blocks: {other}")),
        }
        if let Some(tools) = body.get("tools") {
            let tools = tools
                .as_array()
                .ok_or_else(|| format!("`tools` is not an array: {tools}"))?;
            for tool in tools {
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("a tool without a name: {tool}"))?;
                match tool.get("type").and_then(Value::as_str) {
                    None | Some("custom") => {
                        if !tool.get("input_schema").is_some_and(Value::is_object) {
                            return Err(format!("custom tool `{name}` without an input_schema"));
                        }
                        request.tools.push(name.to_owned());
                    }
                    // The tool search is Aptix's own, not a catalog tool.
                    Some(kind) if kind.starts_with("tool_search_tool_") => {}
                    Some(_) => request.hosted_tools.push(name.to_owned()),
                }
            }
        }
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("`messages` is missing or not an array")?;
        for message in messages {
            let role = message.get("role").and_then(Value::as_str);
            let blocks = match message.get("content") {
                Some(Value::String(text)) => vec![json!({ "type": "text", "text": text })],
                Some(Value::Array(blocks)) => blocks.clone(),
                other => return Err(format!("a message's content is {other:?}")),
            };
            match role {
                Some("user") => read_user(&blocks, &mut request.messages)?,
                Some("assistant") => request.messages.push(read_assistant(&blocks)?),
                other => return Err(format!("a message with role {other:?}")),
            }
        }
        Ok(request)
    }

    fn hosted_tool(&self) -> Option<&'static str> {
        Some("web_search")
    }
}

/// The texts of `text` blocks, refusing any other kind.
fn texts(blocks: &[Value], place: &str) -> Result<Vec<String>, String> {
    blocks
        .iter()
        .map(
            |block| match (block.get("type").and_then(Value::as_str), block.get("text")) {
                (Some("text"), Some(Value::String(text))) => Ok(text.clone()),
                _ => Err(format!("a block of {place} is not text: {block}")),
            },
        )
        .collect()
}

fn read_user(blocks: &[Value], out: &mut Vec<WireMessage>) -> Result<(), String> {
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("a text block without text: {block}"))?;
                out.push(WireMessage::User(text.to_owned()));
            }
            Some("tool_result") => {
                let id = block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("a tool_result without tool_use_id: {block}"))?;
                let content = match block.get("content") {
                    Some(Value::String(text)) => text.clone(),
                    // The envelope first, then what the tool attached.
                    Some(Value::Array(parts)) => parts
                        .first()
                        .and_then(|part| part.get("text"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    other => return Err(format!("a tool_result's content is {other:?}")),
                };
                out.push(WireMessage::ToolResult {
                    id: id.to_owned(),
                    content,
                });
            }
            // Attachments are the attachment tests' business.
            Some("image" | "document") => {}
            _ => return Err(format!("a user block Anthropic does not document: {block}")),
        }
    }
    Ok(())
}

fn read_assistant(blocks: &[Value]) -> Result<WireMessage, String> {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    let mut hosted = false;
    for block in blocks {
        let string = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("an assistant block without `{key}`: {block}"))
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(&string("text")?),
            Some("tool_use") => {
                let input = block
                    .get("input")
                    .filter(|input| input.is_object())
                    .cloned()
                    .ok_or_else(|| format!("a tool_use whose input is not an object: {block}"))?;
                calls.push((string("id")?, string("name")?, input));
            }
            Some("thinking") => {
                string("thinking")?;
                reasoning.push(string("signature")?);
            }
            Some("redacted_thinking") => reasoning.push(string("data")?),
            Some("server_tool_use") => {
                if !string("name")?.starts_with("tool_search_tool_") {
                    hosted = true;
                }
            }
            Some(kind) if kind.ends_with("_tool_result") => {}
            _ => {
                return Err(format!(
                    "an assistant block Anthropic does not document: {block}"
                ));
            }
        }
    }
    Ok(WireMessage::Assistant {
        text,
        calls,
        reasoning,
        hosted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::{WireCall, WireHosted, WireReasoning};

    #[test]
    fn a_turn_with_everything_streams_as_anthropic_does() {
        let turn = WireTurn {
            reasoning: Some(WireReasoning {
                text: vec!["Think.".into()],
                token: "sig==".into(),
            }),
            hosted: Some(WireHosted {
                id: "srvtoolu_1".into(),
                input: json!({ "query": "q" }),
                output: json!([{ "type": "web_search_result", "url": "https://example.com" }]),
            }),
            text: vec!["Hi".into()],
            calls: vec![WireCall {
                id: "toolu_1".into(),
                name: "lookup".into(),
                arguments: vec!["{\"a\":".into(), "1}".into()],
            }],
            cut_at_limit: false,
            usage: (3, 4),
        };
        let body: String = AnthropicWire
            .turn(&turn)
            .chunks
            .iter()
            .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
            .collect();
        for expected in [
            r#""delta":{"type":"signature_delta","signature":"sig=="}"#,
            r#""content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}"#,
            r#""type":"web_search_tool_result""#,
            r#""delta":{"type":"text_delta","text":"Hi"}"#,
            r#""partial_json":"{\"a\":""#,
            r#""stop_reason":"tool_use""#,
        ] {
            assert!(body.contains(expected), "{expected} in {body}");
        }
    }

    #[test]
    fn requests_read_back_into_neutral_form() -> Result<(), String> {
        let body = json!({
            "system": [{ "type": "text", "text": "Be brief.", "cache_control": { "type": "ephemeral" } }],
            "tools": [
                { "type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25" },
                { "name": "lookup", "description": "d", "input_schema": { "type": "object" } },
                { "type": "web_search_20250305", "name": "web_search" },
            ],
            "messages": [
                { "role": "user", "content": [{ "type": "text", "text": "Hi" }] },
                { "role": "assistant", "content": [
                    { "type": "thinking", "thinking": "t", "signature": "sig==" },
                    { "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {} },
                    { "type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [] },
                    { "type": "text", "text": "Ok" },
                    { "type": "tool_use", "id": "toolu_1", "name": "lookup", "input": { "a": 1 } },
                ] },
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"ok\":true}", "is_error": false },
                ] },
            ],
        });
        let read = AnthropicWire.read_request(&body)?;
        assert_eq!(read.tools, ["lookup"]);
        assert_eq!(read.hosted_tools, ["web_search"]);
        assert_eq!(
            read.messages,
            [
                WireMessage::System("Be brief.".into()),
                WireMessage::User("Hi".into()),
                WireMessage::Assistant {
                    text: "Ok".into(),
                    calls: vec![("toolu_1".into(), "lookup".into(), json!({ "a": 1 }))],
                    reasoning: vec!["sig==".into()],
                    hosted: true,
                },
                WireMessage::ToolResult {
                    id: "toolu_1".into(),
                    content: "{\"ok\":true}".into(),
                },
            ]
        );
        assert!(
            AnthropicWire
                .read_request(&json!({ "messages": "x" }))
                .is_err()
        );
        Ok(())
    }
}
