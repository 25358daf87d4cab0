//! The request half of the adapter: a [`ChatRequest`] lowered to a Chat
//! Completions body (transcript, attachments, tools, tool choice, structured
//! output, sampling options), kept apart from the stream decoding so either
//! side of the wire format can be read alone.

use serde::Serialize;
use serde_json::{Map, Number, Value, json};

use super::{OpenAiChat, ReasoningEcho, ReasoningField, StructuredOutput};
use crate::content::Content;
use crate::model::attachments::{Attachment, classify, data_url, is_blank_text, left_out};
use crate::model::{ChatRequest, Message, ToolChoice, ToolSpec};
use crate::schema::Dialect;
use crate::transcript::ThinkingBlock;

impl OpenAiChat {
    /// The JSON body of a streaming request for `request`: what
    /// [`ChatModel::stream`] sends.
    ///
    /// [`ChatModel::stream`]: crate::model::ChatModel::stream
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert(
            "messages".into(),
            Value::Array(messages_json(
                &request.messages,
                self.reasoning_echo(),
                self.reasoning_field,
            )),
        );
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
        // Chat Completions hosts no tool: a provider's tool offered as a
        // function would be called and never run.
        let tools: Vec<ChatTool<'_>> = request
            .tools
            .iter()
            .filter(|spec| {
                if spec.hosted {
                    tracing::warn!(
                        tool = %spec.name,
                        "Chat Completions hosts no provider tool: left out of the request"
                    );
                }
                !spec.hosted
            })
            .map(ChatTool::from)
            .collect();
        if !tools.is_empty() {
            // Plain structs of strings and JSON values: serializing them
            // cannot fail.
            body.insert("tools".into(), json!(tools));
            body.insert("tool_choice".into(), tool_choice_json(&request.tool_choice));
            body.insert(
                "parallel_tool_calls".into(),
                Value::Bool(request.parallel_tool_calls),
            );
        }
        if let Some(format) = &request.response_format {
            let response_format = match self.structured_output {
                StructuredOutput::JsonSchema => json!({
                    "type": "json_schema",
                    "json_schema": {
                        "name": format.name,
                        "schema": format.schema.as_ref(),
                        "strict": format.strict,
                    }
                }),
                StructuredOutput::JsonObjectSchema => json!({
                    "type": "json_object",
                    "schema": format.schema.as_ref(),
                }),
            };
            body.insert("response_format".into(), response_format);
        }
        if let Some(max_tokens) = request.max_tokens {
            body.insert("max_tokens".into(), Value::from(max_tokens));
        }
        if let Some(temperature) = request.temperature.and_then(temperature_json) {
            body.insert("temperature".into(), temperature);
        }
        for (key, value) in &self.extra_body {
            body.insert(key.clone(), value.clone());
        }
        body.insert("stream".into(), Value::Bool(true));
        Value::Object(body)
    }
}

/// The transcript in Chat Completions form.
///
/// Tool messages carry text only, so what tools attached for the model
/// (images, documents) follows the turn's tool messages as one user
/// message: a text part naming each call, then its attachments as
/// `image_url` (a `data:` URL), `file` (PDF) or `input_audio` (WAV, MP3)
/// parts. The turn's tool messages stay together right after the assistant
/// message, as the API requires; the user message comes after all of them.
///
/// An assistant message's reasoning goes back in `field` where `echo` says
/// (see [`ReasoningEcho`]).
pub(super) fn messages_json(
    transcript: &[Message],
    echo: ReasoningEcho,
    field: ReasoningField,
) -> Vec<Value> {
    let echoed = echoed_reasoning(transcript, echo);
    let mut out = Vec::with_capacity(transcript.len());
    let mut attached: Vec<Value> = Vec::new();
    for (position, message) in transcript.iter().enumerate() {
        if !matches!(message, Message::Tool { .. }) && !attached.is_empty() {
            out.push(attachments_message(std::mem::take(&mut attached)));
        }
        if let Message::Tool {
            tool_call_id,
            name,
            attachments,
            ..
        } = message
            && !attachments.is_empty()
        {
            attached.push(json!({
                "type": "text",
                "text": format!("Attached by the `{name}` result of call {tool_call_id}:"),
            }));
            attached.extend(
                attachments
                    .iter()
                    .filter(|content| !is_blank_text(content))
                    .map(attachment_part),
            );
        }
        let mut lowered = message_json(message);
        if echoed[position]
            && let Message::Assistant { thinking, .. } = message
            && let Some(text) = reasoning_text(thinking)
            && let Value::Object(object) = &mut lowered
        {
            object.insert(field.as_str().into(), Value::String(text));
        }
        out.push(lowered);
    }
    if !attached.is_empty() {
        out.push(attachments_message(attached));
    }
    out
}

fn attachments_message(parts: Vec<Value>) -> Value {
    json!({ "role": "user", "content": parts })
}

/// One attachment as a Chat Completions content part; what the API does not
/// take (other audio, other files) as a text part saying it was left out.
fn attachment_part(content: &Content) -> Value {
    match classify(content) {
        Attachment::Text(text) => json!({ "type": "text", "text": text }),
        Attachment::Image { data, mime_type } => json!({
            "type": "image_url",
            "image_url": { "url": data_url(mime_type, data) },
        }),
        Attachment::Audio { data, mime_type } if audio_format(mime_type).is_some() => json!({
            "type": "input_audio",
            "input_audio": { "data": data, "format": audio_format(mime_type) },
        }),
        Attachment::TextDocument { uri, text } => {
            json!({ "type": "text", "text": format!("{uri}:\n{text}") })
        }
        Attachment::Pdf { uri, data } => json!({
            "type": "file",
            "file": {
                "filename": uri.rsplit('/').next().unwrap_or(uri),
                "file_data": data_url("application/pdf", data),
            },
        }),
        Attachment::Audio { .. } | Attachment::Other => {
            json!({ "type": "text", "text": left_out(content, "this API") })
        }
    }
}

/// The `input_audio` format of an audio media type, when the API takes it.
fn audio_format(mime_type: &str) -> Option<&'static str> {
    match mime_type {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

/// Per message of `transcript`, whether its reasoning goes back under
/// `echo`. A user turn is what lies between two user messages.
fn echoed_reasoning(transcript: &[Message], echo: ReasoningEcho) -> Vec<bool> {
    match echo {
        ReasoningEcho::Always => vec![true; transcript.len()],
        ReasoningEcho::Never => vec![false; transcript.len()],
        ReasoningEcho::ToolTurns => {
            let mut echoed = vec![false; transcript.len()];
            let mut start = 0;
            for end in (0..=transcript.len()).filter(|&at| {
                at == transcript.len() || matches!(transcript[at], Message::User { .. })
            }) {
                let called = transcript[start..end].iter().any(|message| {
                    matches!(message, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty())
                });
                echoed[start..end].fill(called);
                start = end;
            }
            echoed
        }
    }
}

/// The reasoning text of an assistant message's own blocks, joined; `None`
/// when it has none. Other providers' kinds (Anthropic's thinking, a
/// Responses item, a Gemini part) mean nothing to these servers and are
/// left out.
fn reasoning_text(thinking: &[ThinkingBlock]) -> Option<String> {
    let texts: Vec<&str> = thinking
        .iter()
        .filter_map(|block| match block {
            ThinkingBlock::Reasoning { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// One transcript message in Chat Completions form.
fn message_json(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({ "role": "system", "content": content }),
        Message::User { content } => json!({ "role": "user", "content": content }),
        // Reasoning is added by `messages_json` where it goes back; server
        // blocks are other providers' and have no place here.
        Message::Assistant {
            content,
            tool_calls,
            thinking: _,
            server_blocks: _,
            runnable: _,
        } => {
            // `content` is always a string: llama.cpp rejects `null`, and
            // OpenAI accepts "" beside tool calls.
            let mut object = Map::new();
            object.insert("role".into(), Value::from("assistant"));
            object.insert("content".into(), Value::from(content.as_str()));
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments },
                        })
                    })
                    .collect();
                object.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(object)
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

/// A tool in a Chat Completions request:
/// `{"type":"function","function":{name, description, parameters[, strict]}}`.
#[derive(Debug, Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

/// The function a [`ChatTool`] offers.
#[derive(Debug, Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    /// `true` exactly when the parameters are in strict mode's dialect:
    /// strict mode refuses any other schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

impl<'a> From<&'a ToolSpec> for ChatTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        ChatTool {
            kind: "function",
            function: Function {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
                strict: (spec.dialect == Dialect::OpenAiStrict).then_some(true),
            },
        }
    }
}

fn tool_choice_json(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}

/// The temperature as the decimal the caller wrote: `0.7f32` widened to
/// `f64` would be sent as `0.699999988079071`. `None` for NaN or infinity.
pub(super) fn temperature_json(temperature: f32) -> Option<Value> {
    let decimal = temperature.to_string().parse::<f64>().ok()?;
    Number::from_f64(decimal).map(Value::Number)
}
