//! The suite's wire for OpenAI Chat Completions and the servers that speak
//! it (vLLM, llama.cpp, Ollama, DeepSeek), on [`OpenAiTurn`].
//!
//! Reasoning streams as `delta.reasoning_content` chunks, as DeepSeek and
//! vLLM write it; it has no opaque token, so its text is what must come
//! back (as the assistant message's `reasoning_content`, or `reasoning`).
//! Chat Completions hosts no tool of its own.

use serde_json::Value;

use super::{ProviderWire, WireMessage, WireRequest, WireTurn};
use crate::mock_openai::{self, OpenAiTurn};
use crate::mock_server::ScriptedResponse;

/// The id and model of every chunk [`OpenAiTurn`] writes: the reasoning
/// chunks written here must match them.
const CHUNK_ID: &str = "chatcmpl-AptixMock0001";
const CHUNK_MODEL: &str = "gpt-4o-mini-2024-07-18";
const CREATED: u64 = 1_700_000_000;

/// OpenAI Chat Completions, for [`run`](super::run).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiChatWire;

impl OpenAiChatWire {
    /// The turn as an [`OpenAiTurn`], for a test that changes it further.
    pub fn openai_turn(turn: &WireTurn) -> OpenAiTurn {
        let mut scripted = OpenAiTurn::new();
        let with_usage = turn.usage != (0, 0);
        if let Some(reasoning) = &turn.reasoning {
            for piece in &reasoning.text {
                // Written by hand in OpenAI's member order (a `json!`
                // object would sort its members).
                let text = serde_json::to_string(piece).unwrap_or_else(|_| "\"\"".into());
                // Every chunk but the usage chunk carries `"usage": null`
                // when usage was asked for, as OpenAI writes it.
                let usage = if with_usage { ",\"usage\":null" } else { "" };
                let data = format!(
                    "{{\"id\":\"{CHUNK_ID}\",\"object\":\"chat.completion.chunk\",\"created\":{CREATED},\"model\":\"{CHUNK_MODEL}\",\"system_fingerprint\":\"fp_aptix\",\"choices\":[{{\"index\":0,\"delta\":{{\"reasoning_content\":{text}}},\"logprobs\":null,\"finish_reason\":null}}]{usage}}}"
                );
                scripted = scripted.raw_data(data);
            }
        }
        for piece in &turn.text {
            scripted = scripted.with_text(piece.as_str());
        }
        for call in &turn.calls {
            let pieces: Vec<&str> = call.arguments.iter().map(String::as_str).collect();
            scripted = scripted.tool_call(&call.id, &call.name, &pieces);
        }
        if turn.cut_at_limit {
            scripted = scripted.finish("length");
        }
        if with_usage {
            scripted = scripted.usage(turn.usage.0, turn.usage.1);
        }
        scripted
    }
}

impl ProviderWire for OpenAiChatWire {
    fn name(&self) -> &'static str {
        "openai_chat"
    }

    fn turn(&self, turn: &WireTurn) -> ScriptedResponse {
        Self::openai_turn(turn).into_response()
    }

    fn error(&self, status: u16, message: &str) -> ScriptedResponse {
        mock_openai::error_response(status, message)
    }

    fn read_request(&self, body: &Value) -> Result<WireRequest, String> {
        let mut request = WireRequest::default();
        if let Some(tools) = body.get("tools") {
            let tools = tools.as_array().ok_or("`tools` is not an array")?;
            for tool in tools {
                if tool["type"] != "function" {
                    return Err(format!("a tool is not `type: function`: {tool}"));
                }
                let name = tool["function"]["name"]
                    .as_str()
                    .ok_or_else(|| format!("a function tool has no name: {tool}"))?;
                request.tools.push(name.to_owned());
            }
        }
        if body.get("stream") != Some(&Value::Bool(true)) {
            return Err("the request does not ask for a stream (`stream: true`)".into());
        }
        let messages = body["messages"]
            .as_array()
            .ok_or("`messages` is not an array")?;
        for message in messages {
            request.messages.push(read_message(message)?);
        }
        Ok(request)
    }

    fn hosted_tool(&self) -> Option<&'static str> {
        None
    }

    fn reasoning_has_token(&self) -> bool {
        false
    }
}

fn read_message(message: &Value) -> Result<WireMessage, String> {
    let role = message["role"]
        .as_str()
        .ok_or_else(|| format!("a message has no role: {message}"))?;
    Ok(match role {
        "system" | "developer" => WireMessage::System(text_of(&message["content"])?),
        "user" => WireMessage::User(text_of(&message["content"])?),
        "assistant" => {
            let text = match &message["content"] {
                Value::Null => String::new(),
                content => text_of(content)?,
            };
            let mut calls = Vec::new();
            if let Some(sent) = message.get("tool_calls") {
                for call in sent.as_array().ok_or("`tool_calls` is not an array")? {
                    if call["type"] != "function" {
                        return Err(format!("a tool call is not `type: function`: {call}"));
                    }
                    let id = call["id"]
                        .as_str()
                        .ok_or_else(|| format!("a tool call has no id: {call}"))?;
                    let name = call["function"]["name"]
                        .as_str()
                        .ok_or_else(|| format!("a tool call has no name: {call}"))?;
                    // Chat Completions sends arguments as a JSON text.
                    let arguments = call["function"]["arguments"].as_str().ok_or_else(|| {
                        format!("a tool call's arguments are not a string: {call}")
                    })?;
                    let arguments: Value = serde_json::from_str(arguments).map_err(|error| {
                        format!("a tool call's arguments are not JSON: {error}")
                    })?;
                    calls.push((id.to_owned(), name.to_owned(), arguments));
                }
            }
            let reasoning = ["reasoning_content", "reasoning"]
                .iter()
                .filter_map(|key| message.get(*key).and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            WireMessage::Assistant {
                text,
                calls,
                reasoning,
                hosted: false,
            }
        }
        "tool" => WireMessage::ToolResult {
            id: message["tool_call_id"]
                .as_str()
                .ok_or_else(|| format!("a tool message has no tool_call_id: {message}"))?
                .to_owned(),
            content: text_of(&message["content"])?,
        },
        other => return Err(format!("unknown role `{other}`")),
    })
}

/// A message's content: a string, or the text of its parts.
fn text_of(content: &Value) -> Result<String, String> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter(|part| part["type"] == "text")
            .filter_map(|part| part["text"].as_str())
            .collect()),
        other => Err(format!("a content is neither text nor parts: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conformance::{WireCall, WireReasoning};

    #[test]
    fn reasoning_streams_as_reasoning_content_chunks_before_the_call() {
        let turn = WireTurn {
            reasoning: Some(WireReasoning {
                text: vec!["Think".into(), "ing.".into()],
                token: String::new(),
            }),
            calls: vec![WireCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: vec!["{}".into()],
            }],
            usage: (3, 4),
            ..WireTurn::default()
        };
        let events = OpenAiChatWire::openai_turn(&turn).sse_events();
        let chunks: Vec<Value> = events
            .iter()
            .filter_map(|event| event.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str(data.trim_end()).ok())
            .collect();
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(
            chunks[1]["choices"][0]["delta"]["reasoning_content"],
            "Think"
        );
        assert_eq!(
            chunks[2]["choices"][0]["delta"]["reasoning_content"],
            "ing."
        );
        assert!(chunks[2]["usage"].is_null() && chunks[2].get("usage").is_some());
        assert_eq!(
            chunks[3]["choices"][0]["delta"]["tool_calls"][0]["id"],
            "c1"
        );
    }

    #[test]
    fn a_request_reads_back_into_neutral_form() -> Result<(), String> {
        let body = json!({
            "model": "m",
            "stream": true,
            "messages": [
                { "role": "system", "content": "S" },
                { "role": "user", "content": [{ "type": "text", "text": "Q" }] },
                { "role": "assistant", "content": null, "reasoning_content": "R",
                  "tool_calls": [{ "id": "c1", "type": "function",
                                   "function": { "name": "f", "arguments": "{\"a\":1}" } }] },
                { "role": "tool", "tool_call_id": "c1", "content": "{\"ok\":true}" }
            ],
            "tools": [{ "type": "function", "function": { "name": "f", "parameters": {} } }]
        });
        let request = OpenAiChatWire.read_request(&body)?;
        assert_eq!(request.tools, ["f"]);
        assert_eq!(
            request.messages,
            [
                WireMessage::System("S".into()),
                WireMessage::User("Q".into()),
                WireMessage::Assistant {
                    text: String::new(),
                    calls: vec![("c1".into(), "f".into(), json!({ "a": 1 }))],
                    reasoning: vec!["R".into()],
                    hosted: false,
                },
                WireMessage::ToolResult {
                    id: "c1".into(),
                    content: "{\"ok\":true}".into()
                },
            ]
        );
        let unknown = json!({ "stream": true, "messages": [{ "role": "robot", "content": "" }] });
        assert!(OpenAiChatWire.read_request(&unknown).is_err());
        Ok(())
    }
}
