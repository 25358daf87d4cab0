//! The request half of the adapter: a [`ChatRequest`] lowered to a
//! Responses API body (instructions, input items with the reasoning and
//! hosted-tool items of past turns in their order, function and hosted
//! tools, tool choice, structured output, reasoning, state), kept apart
//! from the stream decoding so either side of the wire format can be read
//! alone.

use serde_json::{Map, Value, json};

use super::OpenAiResponses;
use crate::content::Content;
use crate::model::attachments::{Attachment, classify, data_url, is_blank_text, left_out};
use crate::model::{ChatRequest, Message, ModelError, ThinkingBlock, ToolChoice, ToolSpec};
use crate::schema::Dialect;
use crate::transcript::AssistantToolCall;

/// The `type` of the server block each turn keeps as its record: the
/// response's id and the types of its output items in order (see the
/// module documentation). Never sent to the API.
pub const TURN_RECORD: &str = "aptix_responses_turn";

impl OpenAiResponses {
    /// The JSON body of a streaming request for `request`: what
    /// [`ChatModel::stream`] sends. Fails with [`ModelError::Config`] for
    /// a hosted tool this adapter cannot send (an unknown name, a
    /// `file_search` without vector store ids).
    ///
    /// [`ChatModel::stream`]: crate::model::ChatModel::stream
    pub fn request_body(&self, request: &ChatRequest) -> Result<Value, ModelError> {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        let instructions: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::System { content } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        if !instructions.is_empty() {
            // Sent with every request: they do not carry over from a
            // previous response.
            body.insert(
                "instructions".into(),
                Value::from(instructions.join("\n\n")),
            );
        }
        let (previous, start) = match self.previous_response_id {
            true => continued_from(&request.messages),
            false => (None, 0),
        };
        body.insert(
            "input".into(),
            Value::Array(input_items(&request.messages[start..])),
        );
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|spec| self.tool_json(spec))
                .collect::<Result<Vec<_>, _>>()?;
            body.insert("tools".into(), Value::Array(tools));
            body.insert(
                "tool_choice".into(),
                self.tool_choice_json(&request.tool_choice, &request.tools),
            );
            body.insert(
                "parallel_tool_calls".into(),
                Value::Bool(request.parallel_tool_calls),
            );
        }
        if let Some(format) = &request.response_format {
            body.insert(
                "text".into(),
                json!({
                    "format": {
                        "type": "json_schema",
                        "name": format.name,
                        "schema": format.schema.as_ref(),
                        "strict": format.strict,
                    }
                }),
            );
        }
        if let Some((effort, summary)) = self.reasoning {
            let mut reasoning = Map::new();
            reasoning.insert("effort".into(), Value::from(effort.as_str()));
            if let Some(summary) = summary.as_str() {
                reasoning.insert("summary".into(), Value::from(summary));
            }
            body.insert("reasoning".into(), Value::Object(reasoning));
        }
        if let Some(tokens) = request.max_tokens.or(self.max_output_tokens) {
            body.insert("max_output_tokens".into(), Value::from(tokens));
        }
        match request.temperature.and_then(temperature_json) {
            Some(_) if self.reasons() => {
                tracing::warn!("reasoning models take no temperature: left out");
            }
            Some(temperature) => {
                body.insert("temperature".into(), temperature);
            }
            None => {}
        }
        body.insert("store".into(), Value::Bool(self.previous_response_id));
        let stateless = !self.previous_response_id;
        if stateless && let Some(Value::Array(items)) = body.get_mut("input") {
            // Unstored, OpenAI finds a reasoning item only through its
            // encrypted content: one without it (a model not known to
            // reason, so none was asked for) would fail the request.
            let before = items.len();
            items.retain(|item| {
                item.get("type").and_then(Value::as_str) != Some("reasoning")
                    || item.get("encrypted_content").is_some()
            });
            if items.len() < before {
                tracing::warn!(
                    left_out = before - items.len(),
                    "reasoning items without encrypted content cannot go back unstored: left out"
                );
            }
        }
        // What the hosted tools found comes back only when asked for.
        let mut include: Vec<&str> = Vec::new();
        if stateless && self.reasons() {
            include.push("reasoning.encrypted_content");
        }
        for (kind, _) in self.hosted_names(request) {
            match kind.as_str() {
                "web_search" | "web_search_preview" => {
                    include.push("web_search_call.action.sources")
                }
                "file_search" => include.push("file_search_call.results"),
                "code_interpreter" => include.push("code_interpreter_call.outputs"),
                _ => {}
            }
        }
        if !include.is_empty() {
            body.insert("include".into(), json!(include));
        }
        if let Some(previous) = previous {
            body.insert("previous_response_id".into(), Value::String(previous));
        }
        body.insert("stream".into(), Value::Bool(true));
        Ok(Value::Object(body))
    }

    /// One tool as the API takes it: a function, or a hosted tool's form.
    fn tool_json(&self, spec: &ToolSpec) -> Result<Value, ModelError> {
        if !spec.hosted {
            return Ok(json!({
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
                // The API is strict unless told otherwise, and strict mode
                // refuses any schema not in its dialect.
                "strict": spec.dialect == Dialect::OpenAiStrict,
            }));
        }
        let wire = self.hosted_wire(&spec.name).ok_or_else(|| {
            ModelError::Config(format!(
                "the tool `{}` runs at the provider, but the Responses API hosts no tool by that name; name its form with OpenAiResponses::hosted_tool",
                spec.name
            ))
        })??;
        if wire_type(&wire) == Some("file_search")
            && wire
                .get("vector_store_ids")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
        {
            return Err(ModelError::Config(format!(
                "the hosted tool `{}` (file_search) needs the vector stores to search: OpenAiResponses::hosted_tool(\"{}\", json!({{\"type\": \"file_search\", \"vector_store_ids\": [\"vs_…\"]}}))",
                spec.name, spec.name
            )));
        }
        Ok(wire)
    }

    /// The tool choice; a hosted tool is chosen by its `type`.
    fn tool_choice_json(&self, choice: &ToolChoice, tools: &[ToolSpec]) -> Value {
        match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => {
                let hosted = tools
                    .iter()
                    .any(|spec| spec.hosted && &spec.name == name)
                    .then(|| self.hosted_wire(name).and_then(Result::ok))
                    .flatten();
                match hosted.as_ref().and_then(wire_type) {
                    Some(kind) => json!({ "type": kind }),
                    None => json!({ "type": "function", "name": name }),
                }
            }
        }
    }

    /// The hosted tools of `request`: each one's wire `type` and its
    /// catalog name, for naming the items the stream brings back.
    pub(super) fn hosted_names(&self, request: &ChatRequest) -> Vec<(String, String)> {
        request
            .tools
            .iter()
            .filter(|spec| spec.hosted)
            .filter_map(|spec| {
                let wire = self.hosted_wire(&spec.name)?.ok()?;
                Some((wire_type(&wire)?.to_owned(), spec.name.clone()))
            })
            .collect()
    }
}

fn wire_type(wire: &Value) -> Option<&str> {
    wire.get("type").and_then(Value::as_str)
}

/// Where a request with `previous_response_id` continues: the id of the
/// last turn that has a record, and the position after that turn (the
/// messages sent). A transcript without one is sent whole.
pub(super) fn continued_from(messages: &[Message]) -> (Option<String>, usize) {
    for (position, message) in messages.iter().enumerate().rev() {
        if let Message::Assistant { server_blocks, .. } = message
            && let Some(id) = turn_record(server_blocks)
                .and_then(|record| record.get("response_id"))
                .and_then(Value::as_str)
        {
            return (Some(id.to_owned()), position + 1);
        }
    }
    (None, 0)
}

/// The turn's record: the last block of its type, which the adapter adds
/// after every item of the turn (a transcript kept before the server's
/// items of that type were refused may hold one of those first).
fn turn_record(server_blocks: &[Value]) -> Option<&Value> {
    server_blocks
        .iter()
        .rev()
        .find(|block| wire_type(block) == Some(TURN_RECORD))
}

/// Whether a server block is a Responses API output item (a hosted tool's
/// call), as opposed to another provider's block or this adapter's record.
pub(super) fn is_responses_item(block: &Value) -> bool {
    wire_type(block).is_some_and(|kind| {
        kind.ends_with("_call")
            || matches!(
                kind,
                "mcp_list_tools" | "mcp_approval_request" | "compaction"
            )
    })
}

/// The transcript as input items. System messages are the request's
/// `instructions`, not items. What tools attached for the model follows
/// the turn's `function_call_output`s as one user message (a call's output
/// here is text).
pub(super) fn input_items(transcript: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(transcript.len());
    let mut attached: Vec<Value> = Vec::new();
    for message in transcript {
        if !matches!(message, Message::Tool { .. }) && !attached.is_empty() {
            out.push(json!({ "role": "user", "content": std::mem::take(&mut attached) }));
        }
        match message {
            Message::System { .. } => {}
            Message::User { content } => out.push(json!({ "role": "user", "content": content })),
            Message::Assistant {
                content,
                tool_calls,
                thinking,
                server_blocks,
                runnable: _,
            } => turn_items(content, tool_calls, thinking, server_blocks, &mut out),
            Message::Tool {
                tool_call_id,
                name,
                content,
                attachments,
                ..
            } => {
                out.push(json!({
                    "type": "function_call_output",
                    "call_id": tool_call_id,
                    "output": content,
                }));
                if !attachments.is_empty() {
                    attached.push(json!({
                        "type": "input_text",
                        "text": format!("Attached by the `{name}` result of call {tool_call_id}:"),
                    }));
                    attached.extend(
                        attachments
                            .iter()
                            .filter(|content| !is_blank_text(content))
                            .map(attachment_part),
                    );
                }
            }
        }
    }
    if !attached.is_empty() {
        out.push(json!({ "role": "user", "content": attached }));
    }
    out
}

/// One past turn's items, in the order its record lists (what it lacks,
/// or a turn without a record: reasoning, hosted items, text, calls).
/// Only this API's own reasoning and items go back.
fn turn_items(
    content: &str,
    tool_calls: &[AssistantToolCall],
    thinking: &[ThinkingBlock],
    server_blocks: &[Value],
    out: &mut Vec<Value>,
) {
    let mut reasoning = thinking.iter().filter_map(|block| match block {
        ThinkingBlock::OpenaiReasoning { item } => Some(item.clone()),
        _ => None,
    });
    let mut hosted = server_blocks
        .iter()
        .filter(|block| is_responses_item(block))
        .cloned();
    let mut calls = tool_calls.iter().map(function_call);
    let mut text = (!content.is_empty()).then(|| {
        json!({
            "type": "message",
            "role": "assistant",
            "content": [{ "type": "output_text", "text": content }],
        })
    });
    let order = turn_record(server_blocks)
        .and_then(|record| record.get("output"))
        .and_then(Value::as_array);
    for kind in order.into_iter().flatten().filter_map(Value::as_str) {
        let next = match kind {
            "reasoning" => reasoning.next(),
            "message" => text.take(),
            "function_call" => calls.next(),
            _ => hosted.next(),
        };
        out.extend(next);
    }
    out.extend(reasoning);
    out.extend(hosted);
    out.extend(text);
    out.extend(calls);
}

fn function_call(call: &AssistantToolCall) -> Value {
    json!({
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    })
}

/// One attachment as an input content part; what the API does not take
/// (audio, other files) as text saying it was left out.
fn attachment_part(content: &Content) -> Value {
    match classify(content) {
        Attachment::Text(text) => json!({ "type": "input_text", "text": text }),
        Attachment::Image { data, mime_type } => json!({
            "type": "input_image",
            "image_url": data_url(mime_type, data),
            "detail": "auto",
        }),
        Attachment::TextDocument { uri, text } => {
            json!({ "type": "input_text", "text": format!("{uri}:\n{text}") })
        }
        Attachment::Pdf { uri, data } => json!({
            "type": "input_file",
            "filename": uri.rsplit('/').next().unwrap_or(uri),
            "file_data": data_url("application/pdf", data),
        }),
        Attachment::Audio { .. } | Attachment::Other => {
            json!({ "type": "input_text", "text": left_out(content, "the Responses API") })
        }
    }
}

/// The temperature as the decimal the caller wrote (`0.7f32` widened to
/// `f64` would be sent as `0.699999988079071`). `None` for NaN or infinity.
pub(super) fn temperature_json(temperature: f32) -> Option<Value> {
    let decimal = temperature.to_string().parse::<f64>().ok()?;
    serde_json::Number::from_f64(decimal).map(Value::Number)
}
