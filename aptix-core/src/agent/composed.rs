//! Composed calls: tools offered to a model as one structured-output
//! schema instead of native tool calling, for models that have none (many
//! local models).
//!
//! The answer the model must give is one object, `{"message": string,
//! "calls": [ ... ]}`, whose `calls` items are `anyOf` one branch per tool:
//! the tool's offered parameters with the meta fields `_tool` (a `const`),
//! `_activity` (a `const`: the activity's name, which for a tool with code
//! of its own is the tool's name, and `""` only for a latent tool) and, when
//! asked for, `_reasoningForCall` (see [`crate::schema::meta_fields`]). The
//! schema is sent with the meta fields first and a latent tool's `_output`
//! last ([`InCallOrder`]), the order a constrained decoder makes the model
//! write them in.
//! An OpenAI-compatible server enforces it through `response_format`
//! (llama.cpp turns the schema into a grammar, so the answer is valid by
//! construction). Each element becomes a call with a stable id that runs
//! through the same executor, events and envelopes as a native call; an
//! answer with no calls ends the turn.
//!
//! The transcript keeps the turn as any other (text and tool calls, then
//! tool results); a composed request renders it back in the shape the
//! model answers in: its own turns as the composed object, results as a
//! user message.

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::members::Members;
use crate::catalog::{Catalog, ToolEntry};
use crate::model::assembly::{AssembledCall, CallStatus};
use crate::model::{FinishReason, ResponseFormat, ToolChoice};
use crate::schema::meta_fields::{self, ACTIVITY, InCallOrder, REASONING, TOOL};
use crate::schema::{Dialect, DialectError, dialect};
use crate::transcript::{AssistantToolCall, Message};

/// How an agent offers tools to its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallMode {
    /// Native tool calling: tools go in the request's tool list (default).
    #[default]
    Native,
    /// One structured-output schema (`message` and `calls`) in the
    /// request's response format; the model's JSON answer is read as calls.
    Composed,
    /// Native for a model that calls tools natively
    /// ([`ChatModel::calls_tools_natively`](crate::model::ChatModel::calls_tools_natively)),
    /// composed otherwise.
    Auto,
}

/// How often a turn's composed answer that could not be read is sent back
/// for another try, unless the builder says otherwise.
pub(crate) const DEFAULT_RETRIES: u8 = 2;

/// The name the response format is sent under.
const FORMAT_NAME: &str = "tool_calls";

/// The composed response schema for the tools of `catalog`, in the
/// canonical dialect: what [`CallMode::Composed`] asks the model for.
/// `choice` narrows it as tool choice narrows native calls: `None` leaves
/// `calls` out (the answer is a message), `Required` asks for at least one
/// call, `Tool(name)` for at least one of that tool.
pub fn composed_schema(catalog: &Catalog, choice: &ToolChoice, reasoning: bool) -> Value {
    let mut root = Map::new();
    let mut branches = Vec::new();
    for entry in catalog.entries() {
        if matches!(choice, ToolChoice::Tool(name) if name != entry.name()) {
            continue;
        }
        let definition = entry.definition();
        // Provider tools run at the provider: nothing composes them.
        if definition.route().step == crate::meta::ServerStep::PassThrough {
            continue;
        }
        branches.push(meta_fields::composed_call(
            &mut root,
            entry.name(),
            &definition.offered_description(),
            entry.call_activity(),
            &entry.offered_parameters(),
            reasoning,
        ));
    }
    let mut properties = Map::new();
    properties.insert(
        "message".to_owned(),
        json!({
            "type": "string",
            "description": "What you say to the user: your answer, or what you are doing while tools run."
        }),
    );
    // No call allowed: no `calls` member at all. (`maxItems: 0` would say
    // the same, but grammar converters such as llama.cpp's ignore it.)
    let callable = !branches.is_empty() && !matches!(choice, ToolChoice::None);
    if callable {
        let mut calls = Map::new();
        calls.insert("type".to_owned(), json!("array"));
        calls.insert(
            "description".to_owned(),
            json!("The tool calls to make now, each with `_tool` naming the tool; an empty list ends your turn."),
        );
        calls.insert("items".to_owned(), json!({ "anyOf": branches }));
        if matches!(choice, ToolChoice::Required | ToolChoice::Tool(_)) {
            calls.insert("minItems".to_owned(), json!(1));
        }
        properties.insert("calls".to_owned(), Value::Object(calls));
    }
    root.insert("type".to_owned(), json!("object"));
    root.insert("properties".to_owned(), Value::Object(properties));
    let required = if callable {
        json!(["message", "calls"])
    } else {
        json!(["message"])
    };
    root.insert("required".to_owned(), required);
    root.insert("additionalProperties".to_owned(), json!(false));
    Value::Object(root)
}

/// The response format of a composed request in `dialect`.
pub(crate) fn response_format(
    catalog: &Catalog,
    choice: &ToolChoice,
    reasoning: bool,
    dialect: Dialect,
) -> Result<ResponseFormat, DialectError> {
    Ok(ResponseFormat {
        name: FORMAT_NAME.to_owned(),
        schema: composed_schema_in(dialect, catalog, choice, reasoning)?.into(),
        strict: dialect == Dialect::OpenAiStrict,
    })
}

/// [`composed_schema`] lowered to `dialect`, as a composed request sends
/// it, or why that dialect cannot carry one: Anthropic's and MCP's shapes
/// have no structured-output response format here.
pub fn composed_schema_in(
    dialect: Dialect,
    catalog: &Catalog,
    choice: &ToolChoice,
    reasoning: bool,
) -> Result<Value, DialectError> {
    let schema = composed_schema(catalog, choice, reasoning);
    match dialect {
        Dialect::Anthropic | Dialect::Mcp => {
            Err(DialectError {
                tool: String::new(),
                dialect,
                path: String::new(),
                reason: "composed calls need a structured-output response format, which this dialect has no place for; use CallMode::Native".to_owned(),
            })
        }
        _ => dialect::lower(dialect, &schema),
    }
}

/// A composed answer read as a turn: its message and its calls.
#[derive(Debug, PartialEq)]
pub(crate) struct ComposedTurn {
    pub(crate) message: String,
    pub(crate) calls: Vec<AssembledCall>,
}

/// Why a composed answer could not be read: what the model is told when
/// it is asked again ([`correction`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotComposed {
    /// The answer hit the token limit before its object was complete.
    Truncated,
    /// The answer is not one JSON object (plain text, an array, broken
    /// JSON); the parser's words, bounded.
    NotAnObject(String),
    /// An object, but not of the shape asked for (the member at fault).
    WrongShape(&'static str),
}

impl std::fmt::Display for NotComposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotComposed::Truncated => f.write_str(
                "your answer was cut off at the token limit before its JSON object was complete; give a shorter one (a shorter message, fewer or smaller calls)",
            ),
            NotComposed::NotAnObject(why) => write!(
                f,
                "your answer is not the JSON object asked for ({why}); answer with exactly one object: {{\"message\": string, \"calls\": [...]}}"
            ),
            NotComposed::WrongShape(what) => write!(
                f,
                "your answer is a JSON object but not of the shape asked for: {what}; answer with exactly one object: {{\"message\": string, \"calls\": [...]}}"
            ),
        }
    }
}

/// The most bytes of a failed answer sent back to the model with its
/// correction: enough to see the mistake, not a second copy of a runaway.
const ECHO_LIMIT: usize = 2048;

/// The most bytes of a parser's message in a correction.
const REASON_LIMIT: usize = 160;

/// Reads the model's answer as a composed object, or says why it is not
/// one: a model or server that ignored the response format, an answer cut
/// off at the token limit (`finish`), or an object that names `message`
/// or `calls` twice or gives them the wrong type. The answer is then not
/// shown: the model is asked again ([`correction`]). `turn` numbers the
/// ids, which are stable: `composed-<turn>-<index>`.
///
/// Read member by member ([`Members`]): each call's arguments are its
/// members less `_tool` and `_activity`, as the model wrote them, so a
/// repeated member reaches the validator (which refuses it) instead of
/// being merged into its last copy.
pub(crate) fn read(
    text: &str,
    finish: &FinishReason,
    turn: usize,
) -> Result<ComposedTurn, NotComposed> {
    let text = text.trim();
    let parsed = serde_json::from_str::<Members>(text).or_else(|error| {
        // Some grammar converters (llama-cpp-python's) let a model write a
        // raw line break inside a string, which JSON forbids; escaped, the
        // answer means what the model wrote.
        match escape_raw_controls(text) {
            Some(escaped) => serde_json::from_str::<Members>(&escaped).map_err(|_| error),
            None => Err(error),
        }
    });
    let mut answer = match parsed {
        Ok(answer) => answer,
        Err(_) if *finish == FinishReason::Length => return Err(NotComposed::Truncated),
        Err(error) => {
            return Err(NotComposed::NotAnObject(bounded(
                &error.to_string(),
                REASON_LIMIT,
            )));
        }
    };
    if answer.count("message") > 1 {
        return Err(NotComposed::WrongShape("`message` is given more than once"));
    }
    if answer.count("calls") > 1 {
        return Err(NotComposed::WrongShape("`calls` is given more than once"));
    }
    let message = match answer
        .take_one("message")
        .map(|raw| serde_json::from_str::<Value>(raw.get()))
    {
        Some(Ok(Value::String(message))) => message,
        None | Some(Ok(Value::Null)) => String::new(),
        Some(_) => return Err(NotComposed::WrongShape("`message` must be a string")),
    };
    let calls = match answer.take_one("calls") {
        None => Vec::new(),
        Some(raw) if raw.get() == "null" => Vec::new(),
        Some(raw) => serde_json::from_str::<Vec<Box<RawValue>>>(raw.get())
            .map_err(|_| NotComposed::WrongShape("`calls` must be an array of call objects"))?,
    };
    let calls = calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| to_call(&call, turn, index))
        .collect();
    Ok(ComposedTurn { message, calls })
}

/// `text` with every raw control character inside a JSON string escaped,
/// or `None` when there is none. Outside strings nothing changes, so text
/// that is no JSON stays no JSON.
fn escape_raw_controls(text: &str) -> Option<String> {
    let mut escaped = String::with_capacity(text.len() + 16);
    let (mut in_string, mut after_backslash, mut changed) = (false, false, false);
    for c in text.chars() {
        if in_string && !after_backslash && c.is_ascii_control() && c != '\u{7f}' {
            changed = true;
            match c {
                '\n' => escaped.push_str("\\n"),
                '\r' => escaped.push_str("\\r"),
                '\t' => escaped.push_str("\\t"),
                other => escaped.push_str(&format!("\\u{:04x}", other as u32)),
            }
            continue;
        }
        if in_string {
            if after_backslash {
                after_backslash = false;
            } else if c == '\\' {
                after_backslash = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        }
        escaped.push(c);
    }
    changed.then_some(escaped)
}

/// What a request asked again after a failed answer adds to its messages:
/// the model's answer as it wrote it (bounded), then a user message that
/// says what was wrong. Only that request carries them: the transcript
/// keeps the answer that could be read, never the garbage before it.
pub(crate) fn correction(answer: &str, problem: &NotComposed) -> [Message; 2] {
    [
        Message::Assistant {
            content: bounded(answer, ECHO_LIMIT),
            tool_calls: Vec::new(),
            thinking: Vec::new(),
            server_blocks: Vec::new(),
            runnable: None,
        },
        Message::user(format!(
            "That answer could not be read: {problem}. Nothing was run and nothing was shown. Answer again."
        )),
    ]
}

/// `text` cut to at most `limit` bytes on a character boundary, saying how
/// much was left out.
fn bounded(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{} [... {} more bytes left out]",
        &text[..end],
        text.len() - end
    )
}

/// One element of `calls` as a call: `_tool` names it and `_activity` is
/// dropped (the catalog decides what runs); everything else is the
/// arguments, `_reasoningForCall` and a latent tool's `_output` included,
/// which the executor's path takes apart as for a native call. An element
/// that names its tool twice names none.
fn to_call(call: &RawValue, turn: usize, index: usize) -> AssembledCall {
    let id = format!("composed-{turn}-{index}");
    let Some(mut members) = Members::parse(call.get()) else {
        // Not an object: no tool is named, and the model is told so.
        return AssembledCall {
            id,
            name: String::new(),
            arguments: call.get().to_owned(),
            status: CallStatus::Unnamed,
        };
    };
    let name = match members
        .take_one(TOOL)
        .map(|raw| serde_json::from_str::<Value>(raw.get()))
    {
        Some(Ok(Value::String(name))) if !name.is_empty() && members.count(TOOL) == 0 => name,
        _ => String::new(),
    };
    // Dropped however often it appears: the catalog decides what runs.
    members.0.retain(|(key, _)| key != ACTIVITY);
    let status = if name.is_empty() {
        CallStatus::Unnamed
    } else {
        CallStatus::Complete
    };
    AssembledCall {
        id,
        name,
        arguments: members.to_text(),
        status,
    }
}

/// The transcript as a composed request sends it: the model's turns as
/// the composed objects it wrote, and the results of each turn's calls as
/// one user message, for a model that has no tool roles.
pub(crate) fn render(messages: &[Message], catalog: &Catalog) -> Vec<Message> {
    let mut rendered: Vec<Message> = Vec::with_capacity(messages.len());
    let mut results = String::new();
    let flush = |results: &mut String, rendered: &mut Vec<Message>| {
        if !results.is_empty() {
            rendered.push(Message::user(std::mem::take(results)));
        }
    };
    for message in messages {
        match message {
            Message::Tool {
                tool_call_id,
                name,
                content,
                attachments,
                ..
            } => {
                if results.is_empty() {
                    results.push_str("Results of your calls:");
                }
                results.push_str(&format!("\n- `{name}` ({tool_call_id}): {content}"));
                // Composed calls travel as text: say what could not come along.
                if !attachments.is_empty() {
                    results.push_str(&format!(
                        " [{} attachment(s) of this result were left out: composed calls carry text only.]",
                        attachments.len()
                    ));
                }
            }
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                flush(&mut results, &mut rendered);
                rendered.push(Message::Assistant {
                    content: composed_text(content, tool_calls, catalog),
                    tool_calls: Vec::new(),
                    thinking: Vec::new(),
                    server_blocks: Vec::new(),
                    runnable: None,
                });
            }
            other => {
                flush(&mut results, &mut rendered);
                rendered.push(other.clone());
            }
        }
    }
    flush(&mut results, &mut rendered);
    rendered
}

/// A turn as the composed object the model wrote.
fn composed_text(content: &str, calls: &[AssistantToolCall], catalog: &Catalog) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|call| {
            let mut members = match serde_json::from_str::<Value>(&call.arguments) {
                Ok(Value::Object(members)) => members,
                _ => Map::new(),
            };
            let activity = catalog
                .entry(&call.name)
                .map(ToolEntry::call_activity)
                .unwrap_or("");
            let mut element = Map::new();
            element.insert(TOOL.to_owned(), Value::from(call.name.as_str()));
            element.insert(ACTIVITY.to_owned(), Value::from(activity));
            if let Some(reasoning) = members.remove(REASONING) {
                element.insert(REASONING.to_owned(), reasoning);
            }
            element.extend(members);
            Value::Object(element)
        })
        .collect();
    let turn = json!({ "message": content, "calls": calls });
    // Written as the schema is sent: the meta fields first, `_output` last.
    serde_json::to_string(&InCallOrder(&turn)).unwrap_or_else(|_| turn.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_as_calls_with_stable_ids() {
        let turn = read(
            r#"{"message":"On it.","calls":[{"_tool":"greet","_activity":"","name":"Ada"},{"_tool":"","x":1},7]}"#,
            &FinishReason::Stop,
            3,
        )
        .expect("composed");
        assert_eq!(turn.message, "On it.");
        assert_eq!(turn.calls[0].id, "composed-3-0");
        assert_eq!(turn.calls[0].name, "greet");
        assert_eq!(turn.calls[0].arguments, r#"{"name":"Ada"}"#);
        assert_eq!(turn.calls[0].status, CallStatus::Complete);
        assert_eq!(turn.calls[1].status, CallStatus::Unnamed);
        assert_eq!(turn.calls[2].status, CallStatus::Unnamed);
    }

    #[test]
    fn text_that_is_no_composed_object_says_why() {
        let stop = &FinishReason::Stop;
        assert!(matches!(
            read("Hello there.", stop, 0),
            Err(NotComposed::NotAnObject(_))
        ));
        assert_eq!(
            read(r#"{"message": 3}"#, stop, 0),
            Err(NotComposed::WrongShape("`message` must be a string"))
        );
        assert_eq!(
            read(r#"{"message": "", "calls": {"_tool": "x"}}"#, stop, 0),
            Err(NotComposed::WrongShape(
                "`calls` must be an array of call objects"
            ))
        );
        assert_eq!(
            read(r#"{"message": "a", "message": "b"}"#, stop, 0),
            Err(NotComposed::WrongShape("`message` is given more than once"))
        );
        assert!(matches!(
            read("[1, 2]", stop, 0),
            Err(NotComposed::NotAnObject(_))
        ));
        assert_eq!(
            read(r#"{"message":"Half"#, &FinishReason::Length, 0),
            Err(NotComposed::Truncated)
        );
        let empty = read(r#"{"message":"Done.","calls":[]}"#, stop, 0).expect("composed");
        assert!(empty.calls.is_empty());
    }

    #[test]
    fn a_raw_line_break_inside_a_string_reads_as_the_model_meant_it() {
        let turn = read(
            "{\"message\": \"Hello,\nAda\t!\", \"calls\": [{\"_tool\": \"greet\", \"name\": \"A\nda\"}]}",
            &FinishReason::Stop,
            0,
        )
        .expect("composed");
        assert_eq!(turn.message, "Hello,\nAda\t!");
        assert_eq!(turn.calls[0].arguments, r#"{"name":"A\nda"}"#);
        // Outside a string a control character is only whitespace, and an
        // escaped quote does not end the string.
        assert_eq!(escape_raw_controls("{\n\"a\": 1}"), None);
        assert_eq!(
            escape_raw_controls("\"x\\\"\u{1}\""),
            Some("\"x\\\"\\u0001\"".to_owned())
        );
        // Broken JSON stays broken.
        assert!(matches!(
            read("{\"message\": \"a\nb", &FinishReason::Stop, 0),
            Err(NotComposed::NotAnObject(_))
        ));
    }

    #[test]
    fn a_correction_echoes_a_bounded_answer() {
        let runaway = "é".repeat(5000);
        let [answer, told] = correction(&runaway, &NotComposed::Truncated);
        let Message::Assistant { content, .. } = answer else {
            panic!("the answer first")
        };
        assert!(content.len() < ECHO_LIMIT + 64, "{}", content.len());
        assert!(content.ends_with("more bytes left out]"), "{content}");
        let Message::User { content } = told else {
            panic!("then the correction")
        };
        assert!(content.contains("cut off at the token limit"), "{content}");
    }
}
