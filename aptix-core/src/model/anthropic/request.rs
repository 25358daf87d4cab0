//! The request half of the adapter: a [`ChatRequest`] lowered to a
//! Messages API body (system prompt, transcript with thinking blocks, tool
//! results and their attachments, tools and the deferred-tool search, tool
//! choice, temperature), kept apart from the stream decoding so either side
//! of the wire format can be read alone.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{Anthropic, DEFAULT_MAX_TOKENS, Thinking};
use crate::content::Content;
use crate::model::attachments::{Attachment, classify, is_blank_text, left_out};
use crate::model::{ChatRequest, Message, NativeToolSearch, ThinkingBlock, ToolChoice, ToolSpec};

impl Anthropic {
    /// The JSON body sent for `request` (always streaming).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        let mut max_tokens = request.max_tokens.unwrap_or(self.max_tokens);
        match self.thinking {
            Some(Thinking::Adaptive { effort }) => {
                body.insert("thinking".into(), json!({ "type": "adaptive" }));
                if let Some(effort) = effort {
                    body.insert("output_config".into(), json!({ "effort": effort.as_str() }));
                }
            }
            Some(Thinking::Budget(budget)) => {
                body.insert(
                    "thinking".into(),
                    json!({ "type": "enabled", "budget_tokens": budget }),
                );
                // The budget is part of `max_tokens`, which must exceed it.
                if max_tokens <= budget {
                    max_tokens = budget.saturating_add(DEFAULT_MAX_TOKENS);
                }
            }
            None => {}
        }
        body.insert("max_tokens".into(), json!(max_tokens));
        body.insert("stream".into(), Value::Bool(true));
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::System { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let system = system.join("\n\n");
        if !system.is_empty() {
            let system = if self.prompt_cache {
                json!([{ "type": "text", "text": system, "cache_control": ephemeral() }])
            } else {
                Value::String(system)
            };
            body.insert("system".into(), system);
        }
        let mut messages = messages(&request.messages);
        if self.prompt_cache {
            mark_last_block(&mut messages);
        }
        body.insert("messages".into(), Value::Array(messages));
        let deferred = request.deferred_tools.as_ref();
        if !request.tools.is_empty() || deferred.is_some() {
            // The search tool first, never deferred (Anthropic refuses a
            // request whose every tool is), the tools always loaded, then
            // every tool it searches. Plain structs of strings and JSON
            // values: serializing them cannot fail.
            let mut tools: Vec<Value> = deferred
                .map(|deferred| search_tool(deferred.search))
                .into_iter()
                .collect();
            tools.extend(
                request
                    .tools
                    .iter()
                    .filter_map(|spec| self.tool(spec, false)),
            );
            if let Some(deferred) = deferred {
                tools.extend(
                    deferred
                        .tools
                        .iter()
                        .filter_map(|spec| self.tool(spec, true)),
                );
            }
            if self.prompt_cache {
                // The last tool always loaded: the cached prefix is the
                // same in every request of the run.
                if let Some(Value::Object(last)) = tools
                    .iter_mut()
                    .rev()
                    .find(|tool| tool.get("defer_loading") != Some(&Value::Bool(true)))
                {
                    last.insert("cache_control".into(), ephemeral());
                }
            }
            body.insert("tools".into(), Value::Array(tools));
            let choice = match (&request.tool_choice, self.thinking) {
                // Thinking takes only `auto` and `none`.
                (ToolChoice::Required | ToolChoice::Tool(_), Some(_)) => {
                    tracing::warn!(
                        choice = ?request.tool_choice,
                        "with thinking on, Anthropic takes only the auto and none tool choices: sent as auto"
                    );
                    &ToolChoice::Auto
                }
                (choice, _) => choice,
            };
            body.insert(
                "tool_choice".into(),
                tool_choice(choice, request.parallel_tool_calls),
            );
        }
        match request.temperature.and_then(temperature) {
            Some(_) if self.thinking.is_some() => {
                tracing::warn!("with thinking on, Anthropic takes no temperature: left out")
            }
            Some(temperature) => {
                body.insert("temperature".into(), temperature);
            }
            None => {}
        }
        Value::Object(body)
    }
}

impl Anthropic {
    /// `spec` as an entry of `tools`: a hosted tool in its server-tool form
    /// ([`Anthropic::hosted_wire`]), never as a custom tool (the model
    /// would call it and nobody would run it), and left out with a warning
    /// if Anthropic does not host it (an agent refuses to build with one);
    /// any other as a custom tool, strict when [`Anthropic::with_strict`]
    /// says so.
    fn tool(&self, spec: &ToolSpec, deferred: bool) -> Option<Value> {
        if spec.hosted {
            let Some(mut wire) = self.hosted_wire(&spec.name) else {
                tracing::warn!(
                    tool = %spec.name,
                    "Anthropic does not host this provider tool: left out of the request"
                );
                return None;
            };
            if deferred && let Value::Object(object) = &mut wire {
                object.insert("defer_loading".into(), Value::Bool(true));
            }
            return Some(wire);
        }
        // Plain structs of strings and JSON values: serializing them cannot
        // fail.
        Some(json!(Tool {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
            strict: self.strict,
            defer_loading: deferred,
        }))
    }
}

/// A custom tool in a Messages API request.
#[derive(Debug, Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    /// Strict tool use: the model's input is guaranteed to match the schema.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    strict: bool,
    /// Loaded into the model's context only once the tool search finds it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    defer_loading: bool,
}

/// A prompt-cache breakpoint: everything up to and including the block it
/// is on is cached for five minutes.
fn ephemeral() -> Value {
    json!({ "type": "ephemeral" })
}

/// Puts a cache breakpoint on the last block of the last message, so that
/// the next request reads the conversation so far from the cache. Thinking
/// blocks take none: a message ending in one gets none.
fn mark_last_block(messages: &mut [Value]) {
    let Some(Value::Array(blocks)) = messages
        .last_mut()
        .and_then(|message| message.get_mut("content"))
    else {
        return;
    };
    if let Some(Value::Object(block)) = blocks.last_mut()
        && !matches!(
            block.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    {
        block.insert("cache_control".into(), ephemeral());
    }
}

/// The server tool that searches the deferred tools.
fn search_tool(search: NativeToolSearch) -> Value {
    let (kind, name) = match search {
        NativeToolSearch::Bm25 => ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
        NativeToolSearch::Regex => ("tool_search_tool_regex_20251119", "tool_search_tool_regex"),
    };
    json!({ "type": kind, "name": name })
}

fn tool_choice(choice: &ToolChoice, parallel_tool_calls: bool) -> Value {
    let mut value = match choice {
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::Required => json!({ "type": "any" }),
        ToolChoice::None => return json!({ "type": "none" }),
        ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
    };
    if !parallel_tool_calls && let Value::Object(map) = &mut value {
        map.insert("disable_parallel_tool_use".into(), Value::Bool(true));
    }
    value
}

/// An `f32` as the decimal it was written as: widening `0.2f32` to `f64`
/// would send `0.20000000298023224`.
pub(super) fn temperature(value: f32) -> Option<Value> {
    let widened: f64 = value.to_string().parse().ok()?;
    serde_json::Number::from_f64(widened).map(Value::Number)
}

/// Lowers the transcript to Anthropic's `messages`.
///
/// System messages go to the top-level `system` field instead. Tool results
/// become `tool_result` blocks of a user message, and all results of one
/// turn share a single user message (Anthropic rejects a turn whose results
/// are spread over several); a user text that directly follows them joins
/// that message after the results, which Anthropic requires to come first.
pub(super) fn messages(transcript: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in transcript {
        match message {
            Message::System { .. } => {}
            Message::User { content } => {
                let block = json!({ "type": "text", "text": content });
                match out.last_mut() {
                    Some(("user", blocks)) if starts_with_tool_result(blocks) => {
                        blocks.push(block);
                    }
                    _ => out.push(("user", vec![block])),
                }
            }
            Message::Assistant {
                content,
                tool_calls,
                thinking,
                server_blocks,
                runnable: _,
            } => {
                // Thinking first, as the model wrote it: Anthropic requires
                // a tool-using turn's thinking back unchanged before its
                // tool_use blocks. Then what its servers ran (a tool
                // search and the tools it found, whose `tool_reference`s
                // load them), before the calls of the tools found.
                let mut blocks: Vec<Value> = thinking.iter().filter_map(thinking_block).collect();
                blocks.extend(
                    server_blocks
                        .iter()
                        .filter(|block| is_anthropic_block(block))
                        .cloned(),
                );
                if !content.is_empty() {
                    blocks.push(json!({ "type": "text", "text": content }));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    }));
                }
                // Anthropic rejects an assistant message without content.
                if !blocks.is_empty() {
                    out.push(("assistant", blocks));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                attachments,
                ..
            } => {
                // The envelope as text, then what the tool attached: a
                // `tool_result` may hold text, image and document blocks.
                let content = if attachments.is_empty() {
                    Value::String(content.clone())
                } else {
                    let mut blocks = vec![json!({ "type": "text", "text": content })];
                    blocks.extend(
                        attachments
                            .iter()
                            .filter(|content| !is_blank_text(content))
                            .map(attachment_block),
                    );
                    Value::Array(blocks)
                };
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": content,
                    "is_error": is_error,
                });
                match out.last_mut() {
                    Some(("user", blocks)) if only_tool_results(blocks) => blocks.push(block),
                    _ => out.push(("user", vec![block])),
                }
            }
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

/// One attachment of a tool result as an Anthropic content block: images
/// (JPEG, PNG, GIF, WebP) as base64 `image` blocks, PDFs and text resources
/// as `document` blocks, text as text; what Anthropic does not take
/// (audio, other media) as a line of text saying it was left out.
fn attachment_block(content: &Content) -> Value {
    match classify(content) {
        Attachment::Text(text) => json!({ "type": "text", "text": text }),
        Attachment::Image { data, mime_type } => json!({
            "type": "image",
            "source": { "type": "base64", "media_type": mime_type, "data": data },
        }),
        Attachment::TextDocument { uri, text } => json!({
            "type": "document",
            "source": { "type": "text", "media_type": "text/plain", "data": text },
            "title": uri,
        }),
        Attachment::Pdf { uri, data } => json!({
            "type": "document",
            "source": { "type": "base64", "media_type": "application/pdf", "data": data },
            "title": uri,
        }),
        Attachment::Audio { .. } | Attachment::Other => {
            json!({ "type": "text", "text": left_out(content, "Anthropic") })
        }
    }
}

/// Anthropic's own blocks go back as they came; another provider's
/// reasoning (a transcript moved between providers) is left out: Anthropic
/// could not read it and rejects what it did not sign.
fn thinking_block(block: &ThinkingBlock) -> Option<Value> {
    match block {
        ThinkingBlock::Thinking {
            thinking,
            signature,
        } => Some(json!({ "type": "thinking", "thinking": thinking, "signature": signature })),
        ThinkingBlock::RedactedThinking { data } => {
            Some(json!({ "type": "redacted_thinking", "data": data }))
        }
        _ => None,
    }
}

/// Whether a kept server block is one of Anthropic's own: its server
/// tools' calls and results (`server_tool_use`, `web_search_tool_result`,
/// `code_execution_tool_result`, `tool_search_tool_result`, ...), its MCP
/// connector's, a container upload. Another provider's blocks of a turn it
/// ran (a Responses item, a Gemini part) are left out: a transcript moved
/// between providers must stay one Anthropic accepts.
fn is_anthropic_block(block: &Value) -> bool {
    let Some(kind) = block.get("type").and_then(Value::as_str) else {
        return false;
    };
    matches!(
        kind,
        "server_tool_use" | "mcp_tool_use" | "container_upload"
    ) || kind.ends_with("_tool_result")
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

fn starts_with_tool_result(blocks: &[Value]) -> bool {
    blocks.first().is_some_and(is_tool_result)
}

fn only_tool_results(blocks: &[Value]) -> bool {
    !blocks.is_empty() && blocks.iter().all(is_tool_result)
}

/// A past call's arguments as the `input` object Anthropic requires.
///
/// The transcript keeps arguments exactly as the model wrote them, so they
/// may not be an object: a call the model truncated at its token limit, or
/// one it got wrong and that was answered with a validation error. Anthropic
/// rejects the whole request if `input` is not an object, so such calls are
/// replayed as `{}`; their `tool_result` still tells the model what went
/// wrong.
pub(super) fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ => Value::Object(Map::new()),
    }
}
