//! The request half of the adapter: a [`ChatRequest`] lowered to a
//! `generateContent` body (system instruction, contents with thought parts
//! and signatures in place, function responses grouped per turn, function
//! declarations and provider tools, tool config, generation config), kept
//! apart from the stream decoding so either side of the wire format can be
//! read alone.

use serde_json::{Map, Value, json};

use super::Gemini;
use crate::content::Content;
use crate::model::attachments::{Attachment, classify, is_blank_text, left_out};
use crate::model::{ChatRequest, Message, ThinkingBlock, ToolChoice, ToolSpec};
use crate::schema::meta_fields;
use crate::transcript::AssistantToolCall;

impl Gemini {
    /// The JSON body sent for `request` (the stream is asked for by the
    /// URL's `:streamGenerateContent?alt=sse`, not the body).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = Map::new();
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
            body.insert(
                "systemInstruction".into(),
                json!({ "parts": [{ "text": system }] }),
            );
        }
        body.insert("contents".into(), Value::Array(contents(&request.messages)));

        let declarations: Vec<Value> = request
            .tools
            .iter()
            .filter(|spec| !spec.hosted)
            .map(declaration)
            .collect();
        let mut tools = Vec::new();
        if !declarations.is_empty() {
            tools.push(json!({ "functionDeclarations": declarations }));
        }
        for spec in request.tools.iter().filter(|spec| spec.hosted) {
            match self.hosted_wire(&spec.name) {
                Some(wire) if !tools.contains(&wire) => tools.push(wire),
                Some(_) => {}
                // The agent refuses at build a provider tool the model does
                // not host; a request made by hand may still hold one.
                None => tracing::warn!(
                    tool = %spec.name,
                    "Gemini hosts no tool of this name: left out of the request"
                ),
            }
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if !declarations.is_empty() {
            body.insert(
                "toolConfig".into(),
                json!({ "functionCallingConfig": function_calling_config(&request.tool_choice) }),
            );
        }

        let mut generation = Map::new();
        if let Some(max) = request.max_tokens.or(self.max_output_tokens) {
            generation.insert("maxOutputTokens".into(), json!(max));
        }
        if let Some(temperature) = request.temperature.and_then(temperature) {
            generation.insert("temperature".into(), temperature);
        }
        if let Some(format) = &request.response_format {
            generation.insert("responseMimeType".into(), json!("application/json"));
            let mut schema = (*format.schema).clone();
            order_properties(&mut schema);
            generation.insert("responseSchema".into(), schema);
        }
        if let Some(thinking) = self.thinking {
            generation.insert("thinkingConfig".into(), thinking.config());
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        Value::Object(body)
    }
}

/// Gives every object of a response schema a `propertyOrdering` in call
/// order (`_tool`, `_activity`, `_reasoningForCall`, the parameters, then
/// `_output`), unless it has one. Gemini writes a structured answer's
/// members alphabetically otherwise, and the model would then work out a
/// composed call's latent `_output` before naming its `_tool`; the request
/// body's member order (which the other adapters rely on) does not reach
/// Gemini's decoder.
fn order_properties(schema: &mut Value) {
    let Value::Object(node) = schema else {
        return;
    };
    if let Some(Value::Object(properties)) = node.get_mut("properties") {
        let mut names: Vec<String> = properties.keys().cloned().collect();
        names.sort_by_key(|name| (rank(name), name.clone()));
        properties.values_mut().for_each(order_properties);
        node.entry("propertyOrdering")
            .or_insert_with(|| Value::Array(names.into_iter().map(Value::String).collect()));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = node.get_mut(key) {
            order_properties(inner);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(branches)) = node.get_mut(key) {
            branches.iter_mut().for_each(order_properties);
        }
    }
}

/// Where a member goes in a composed call (as the request bodies of the
/// other adapters write it).
fn rank(name: &str) -> u8 {
    match name {
        meta_fields::TOOL => 0,
        meta_fields::ACTIVITY => 1,
        meta_fields::REASONING => 2,
        meta_fields::OUTPUT => 4,
        _ => 3,
    }
}

/// A function declaration. A tool without parameters is declared without
/// `parameters`: Gemini refuses an object schema without properties.
fn declaration(spec: &ToolSpec) -> Value {
    let mut declaration = json!({ "name": spec.name, "description": spec.description });
    let empty = spec
        .parameters
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty);
    if !empty && let Value::Object(map) = &mut declaration {
        map.insert("parameters".into(), spec.parameters.clone());
    }
    declaration
}

/// `toolConfig.functionCallingConfig` for a tool choice. Gemini has no
/// switch for parallel calls: a model may always make several.
pub(super) fn function_calling_config(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({ "mode": "AUTO" }),
        ToolChoice::None => json!({ "mode": "NONE" }),
        ToolChoice::Required => json!({ "mode": "ANY" }),
        ToolChoice::Tool(name) => json!({ "mode": "ANY", "allowedFunctionNames": [name] }),
    }
}

/// An `f32` as the decimal it was written as: widening `0.2f32` to `f64`
/// would send `0.20000000298023224`.
pub(super) fn temperature(value: f32) -> Option<Value> {
    let widened: f64 = value.to_string().parse().ok()?;
    serde_json::Number::from_f64(widened).map(Value::Number)
}

/// One content being built: its role, its parts, and, for the user content
/// that answers a turn's calls, how many function responses lead it (the
/// attachments follow them).
struct Turn {
    role: &'static str,
    parts: Vec<Value>,
    responses: Option<usize>,
}

/// Lowers the transcript to Gemini's `contents`.
///
/// System messages go to `systemInstruction` instead. An assistant turn is
/// one `model` content: its Gemini thought parts as they came, the parts
/// its provider tools produced, its text (with the signature that came on
/// its text), then its function calls, each with the signature that came
/// on it. Tool results are `functionResponse` parts of one `user` content
/// per turn, in the calls' order, which is how Gemini takes the answers to
/// parallel calls; what the tools attached follows them.
pub(super) fn contents(transcript: &[Message]) -> Vec<Value> {
    let mut out: Vec<Turn> = Vec::new();
    for message in transcript {
        match message {
            Message::System { .. } => {}
            Message::User { content } => {
                let part = json!({ "text": content });
                // A user's words after tool results start a content of
                // their own, as Google's SDKs send them.
                match out.last_mut() {
                    Some(turn) if turn.role == "user" && turn.responses.is_none() => {
                        turn.parts.push(part)
                    }
                    _ => out.push(Turn {
                        role: "user",
                        parts: vec![part],
                        responses: None,
                    }),
                }
            }
            Message::Assistant {
                content,
                tool_calls,
                thinking,
                server_blocks,
                runnable: _,
            } => {
                let parts = model_parts(content, tool_calls, thinking, server_blocks);
                // Gemini refuses a content without parts.
                if !parts.is_empty() {
                    out.push(Turn {
                        role: "model",
                        parts,
                        responses: None,
                    });
                }
            }
            Message::Tool {
                tool_call_id,
                name,
                content,
                is_error,
                attachments,
            } => {
                let response = function_response(tool_call_id, name, content, *is_error);
                let extra = attachments
                    .iter()
                    .filter(|content| !is_blank_text(content))
                    .flat_map(attachment_parts);
                match out.last_mut() {
                    Some(Turn {
                        role: "user",
                        parts,
                        responses: Some(responses),
                    }) => {
                        parts.insert(*responses, response);
                        *responses += 1;
                        parts.extend(extra);
                    }
                    _ => {
                        let mut parts = vec![response];
                        parts.extend(extra);
                        out.push(Turn {
                            role: "user",
                            parts,
                            responses: Some(1),
                        });
                    }
                }
            }
        }
    }
    out.into_iter()
        .map(|turn| json!({ "role": turn.role, "parts": turn.parts }))
        .collect()
}

/// The parts of a past model turn, its thought signatures back where they
/// came. Another provider's reasoning (a transcript moved between
/// providers) is left out: Gemini could not read it.
fn model_parts(
    content: &str,
    tool_calls: &[AssistantToolCall],
    thinking: &[ThinkingBlock],
    server_blocks: &[Value],
) -> Vec<Value> {
    let mut parts = Vec::new();
    // What came on the turn's text parts (a signature), in order.
    let mut on_text: Vec<&Value> = Vec::new();
    for block in thinking {
        if let ThinkingBlock::Gemini { part, tool_call_id } = block {
            let is_thought = part.get("thought").and_then(Value::as_bool) == Some(true);
            match tool_call_id {
                // Sent on its call's part below.
                Some(_) => {}
                None if is_thought => parts.push(part.clone()),
                None => on_text.push(part),
            }
        }
    }
    parts.extend(
        server_blocks
            .iter()
            .filter(|block| is_gemini_part(block))
            .cloned(),
    );
    let mut on_text = on_text.into_iter();
    if !content.is_empty() || on_text.len() > 0 {
        let mut part = json!({ "text": content });
        if let Some(extra) = on_text.next() {
            merge(&mut part, extra, "text");
        }
        parts.push(part);
    }
    // A second signature on text (the turn's text came in several signed
    // parts) goes back on an empty text part of its own, rather than lost.
    for extra in on_text {
        let mut part = json!({ "text": "" });
        merge(&mut part, extra, "text");
        parts.push(part);
    }
    for call in tool_calls {
        let mut part = json!({
            "functionCall": {
                "id": call.id,
                "name": call.name,
                "args": call_args(&call.arguments),
            }
        });
        for block in thinking {
            if let ThinkingBlock::Gemini {
                part: signed,
                tool_call_id: Some(id),
            } = block
                && *id == call.id
            {
                merge(&mut part, signed, "functionCall");
            }
        }
        parts.push(part);
    }
    parts
}

/// Copies `extra`'s members (a `thoughtSignature`) onto `part`, all but
/// `keep`, which is the part's own.
fn merge(part: &mut Value, extra: &Value, keep: &str) {
    if let (Value::Object(part), Value::Object(extra)) = (part, extra) {
        for (key, value) in extra {
            if key != keep {
                part.insert(key.clone(), value.clone());
            }
        }
    }
}

/// A past call's arguments as the `args` object Gemini requires.
///
/// The transcript keeps arguments exactly as the model wrote them, so they
/// may not be an object (a call cut at the token limit, or one answered
/// with a validation error); Gemini rejects a request whose `args` is not
/// one, so such calls go back as `{}`, and their result tells the model
/// what went wrong.
pub(super) fn call_args(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(args)) => Value::Object(args),
        _ => Value::Object(Map::new()),
    }
}

/// One tool result as a `functionResponse` part: the envelope under
/// `output`, or under `error` when it is a failure (the keys Gemini reads
/// for each), with the call's id and the tool's name.
pub(super) fn function_response(id: &str, name: &str, content: &str, is_error: bool) -> Value {
    let envelope =
        serde_json::from_str::<Value>(content).unwrap_or_else(|_| Value::String(content.into()));
    let key = if is_error { "error" } else { "output" };
    json!({
        "functionResponse": {
            "id": id,
            "name": name,
            "response": { key: envelope },
        }
    })
}

/// One attachment of a tool result as Gemini parts: images and audio as
/// `inlineData`, a PDF as `inlineData` after a text part naming it (inline
/// data has no name of its own), text and text resources as text; what
/// Gemini does not take as a line of text saying it was left out.
fn attachment_parts(content: &Content) -> Vec<Value> {
    match classify(content) {
        Attachment::Text(text) => vec![json!({ "text": text })],
        Attachment::Image { data, mime_type } | Attachment::Audio { data, mime_type } => {
            vec![json!({ "inlineData": { "mimeType": mime_type, "data": data } })]
        }
        Attachment::Pdf { uri, data } => vec![
            json!({ "text": format!("{uri}:") }),
            json!({ "inlineData": { "mimeType": "application/pdf", "data": data } }),
        ],
        Attachment::TextDocument { uri, text } => {
            vec![json!({ "text": format!("{uri}:\n{text}") })]
        }
        Attachment::Other => vec![json!({ "text": left_out(content, "Gemini") })],
    }
}

/// Whether a kept server block is one of Gemini's own parts (code it ran
/// and the result, a tool call of its own). Another provider's blocks of a
/// turn it ran (an Anthropic server tool, a Responses item or turn record)
/// are left out: Gemini would refuse them.
fn is_gemini_part(block: &Value) -> bool {
    [
        "executableCode",
        "codeExecutionResult",
        "toolCall",
        "toolResponse",
    ]
    .iter()
    .any(|key| block.get(key).is_some())
        && block.get("type").is_none()
}
