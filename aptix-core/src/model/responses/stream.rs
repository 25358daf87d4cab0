//! The response half of the adapter: the Server-Sent Events of one call
//! decoded into [`ModelEvent`]s as the module documentation's table says,
//! ending the turn at `response.completed`, `response.incomplete`, a
//! failure, or a stream that stops short. Function-call arguments pass
//! through unparsed; the assembler
//! ([`crate::model::adapter::TurnAssembler`]) builds the calls.

use std::collections::{BTreeMap, HashMap};

use futures_util::{Stream, StreamExt, stream};
use serde_json::{Map, Value, json};

use super::request::TURN_RECORD;
use crate::model::http::SseEvent;
use crate::model::{
    FinishReason, HostedToolEvent, ModelError, ModelEvent, ThinkingBlock, ThinkingDelta,
    ToolCallDelta, Usage,
};

/// How much of the provider's words an error message quotes.
const QUOTE_CHARS: usize = 500;

/// The most output items one response may have: each costs the decoder a
/// little memory even when it carries nothing the assembler counts.
pub(super) const MAX_OUTPUT_ITEMS: usize = 4096;

/// The longest output item or event type kept or logged: every type the
/// API has is far shorter, and each item's type is kept for the turn's
/// record.
const MAX_TYPE_BYTES: usize = 64;

/// The longest response id kept: the API's are about 50 bytes, and the id
/// is kept in the turn's record and sent back as `previous_response_id`.
const MAX_RESPONSE_ID_BYTES: usize = 256;

type Item = Result<ModelEvent, ModelError>;

/// Turns the response's events into model events, ending after the first
/// `Finish` or error.
pub(super) fn decode<S>(
    events: S,
    decoder: Decoder,
    span: tracing::Span,
) -> impl Stream<Item = Item> + Send
where
    S: Stream<Item = Result<SseEvent, ModelError>> + Send,
{
    let state = (Box::pin(events), decoder, false);
    stream::unfold(state, move |(mut events, mut decoder, ended)| {
        let span = span.clone();
        async move {
            if ended {
                return None;
            }
            let step = match events.next().await {
                Some(Ok(event)) => span.in_scope(|| decoder.on_event(&event)),
                Some(Err(error)) => Step::end(Vec::new(), Err(error)),
                None => Step::end(Vec::new(), Err(ModelError::Incomplete)),
            };
            span.in_scope(|| match step.events.last() {
                Some(Ok(ModelEvent::Finish { reason, usage })) if step.ended => {
                    tracing::debug!(?reason, ?usage, "response finished");
                }
                Some(Err(error)) => tracing::debug!(%error, "response stream failed"),
                _ => {}
            });
            Some((step.events, (events, decoder, step.ended)))
        }
    })
    .flat_map(stream::iter)
}

/// What one SSE event produced.
#[derive(Debug, PartialEq)]
pub(super) struct Step {
    pub(super) events: Vec<Item>,
    /// Whether the turn is over (finished or failed).
    pub(super) ended: bool,
}

impl Step {
    fn more(events: Vec<Item>) -> Self {
        Step {
            events,
            ended: false,
        }
    }

    fn end(mut events: Vec<Item>, last: Item) -> Self {
        events.push(last);
        Step {
            events,
            ended: true,
        }
    }

    fn fail(error: ModelError) -> Self {
        Step::end(Vec::new(), Err(error))
    }
}

/// An output item the decoder has seen open.
#[derive(Debug, Clone, Copy)]
enum Open {
    /// A function call: its index among the turn's calls, and whether any
    /// of its arguments have been passed on.
    Call { index: usize, streamed: bool },
    /// An assistant message, and whether any of its text streamed.
    Message { streamed: bool },
    /// Anything else (reasoning, a hosted tool's call), whole at its end.
    Other,
}

/// What a response's stream must remember between events: which output
/// item is which, never the calls' text, which is the assembler's.
#[derive(Debug)]
pub(super) struct Decoder {
    /// Each hosted tool's wire `type` and catalog name.
    names: Vec<(String, String)>,
    max_event_bytes: usize,
    response_id: Option<String>,
    open: HashMap<u64, Open>,
    /// The type of every output item, by `output_index`.
    order: BTreeMap<u64, String>,
    next_call: usize,
    next_block: usize,
}

impl Decoder {
    pub(super) fn new(names: Vec<(String, String)>, max_event_bytes: usize) -> Self {
        Decoder {
            names,
            max_event_bytes,
            response_id: None,
            open: HashMap::new(),
            order: BTreeMap::new(),
            next_call: 0,
            next_block: 0,
        }
    }

    /// Decodes one SSE event.
    pub(super) fn on_event(&mut self, event: &SseEvent) -> Step {
        if event.data.len() > self.max_event_bytes {
            return Step::fail(ModelError::Protocol(format!(
                "an event of {} bytes is larger than the {} bytes an event may have (OpenAiResponses::with_max_event_bytes)",
                event.data.len(),
                self.max_event_bytes
            )));
        }
        let data = event.data.trim();
        if data.is_empty() {
            return Step::more(Vec::new());
        }
        let data = match serde_json::from_str::<Value>(data) {
            Ok(Value::Object(data)) => data,
            Ok(_) => {
                return Step::fail(ModelError::Protocol(format!(
                    "an event is not a JSON object: {}",
                    quote(data)
                )));
            }
            Err(error) => {
                return Step::fail(ModelError::Protocol(format!(
                    "an event is not JSON ({error}): {}",
                    quote(data)
                )));
            }
        };
        // OpenAI names every event, and names it again in `type`.
        let kind = match data.get("type").and_then(Value::as_str) {
            Some(kind) => kind,
            None => event.event.as_str(),
        };
        match self.on_data(kind, &data) {
            Ok(step) => step,
            Err(error) => Step::fail(error),
        }
    }

    fn on_data(&mut self, kind: &str, data: &Map<String, Value>) -> Result<Step, ModelError> {
        let mut out = Vec::new();
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(id) = data
                    .get("response")
                    .and_then(|response| response.get("id"))
                    .and_then(Value::as_str)
                {
                    self.response_id = Some(response_id(id)?);
                }
            }
            "response.output_item.added" => {
                let (index, item) = output_item(data)?;
                self.added(index, item, &mut out)?;
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let delta = string(data, "delta");
                // Lenient: text is text, whichever item it is said to be in.
                if let Ok(index) = output_index(data)
                    && let Some(Open::Message { streamed }) = self.open.get_mut(&index)
                {
                    *streamed = true;
                }
                if !delta.is_empty() {
                    out.push(Ok(ModelEvent::TextDelta(delta.to_owned())));
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = string(data, "delta");
                let Some(Open::Call { index, streamed }) = self.open.get_mut(&output_index(data)?)
                else {
                    return Err(protocol(
                        "function-call arguments for an output item that is no open function call",
                    ));
                };
                if !delta.is_empty() {
                    *streamed = true;
                    out.push(Ok(call_delta(*index, None, None, delta.to_owned())));
                }
            }
            "response.function_call_arguments.done" => {
                let arguments = string(data, "arguments");
                if let Some(Open::Call { index, streamed }) =
                    self.open.get_mut(&output_index(data)?)
                    && !*streamed
                    && !arguments.is_empty()
                {
                    *streamed = true;
                    out.push(Ok(call_delta(*index, None, None, arguments.to_owned())));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let delta = string(data, "delta");
                if !delta.is_empty() {
                    out.push(Ok(ModelEvent::ThinkingDelta(ThinkingDelta::Preview {
                        text: delta.to_owned(),
                    })));
                }
            }
            "response.output_item.done" => {
                let (index, item) = output_item(data)?;
                self.done(index, item, &mut out)?;
            }
            "response.completed" | "response.incomplete" => {
                let response = data.get("response");
                let reason = if kind == "response.completed" {
                    if self.next_call > 0 {
                        FinishReason::ToolCalls
                    } else {
                        FinishReason::Stop
                    }
                } else {
                    incomplete_reason(response)
                };
                if self.response_id.is_none() {
                    self.response_id = response
                        .and_then(|response| response.get("id"))
                        .and_then(Value::as_str)
                        .map(response_id)
                        .transpose()?;
                }
                out.push(Ok(ModelEvent::ServerBlock(self.record())));
                let usage = response
                    .and_then(|response| response.get("usage"))
                    .and_then(usage);
                return Ok(Step::end(out, Ok(ModelEvent::Finish { reason, usage })));
            }
            "response.failed" => {
                let error = data
                    .get("response")
                    .and_then(|response| response.get("error"))
                    .unwrap_or(&Value::Null);
                return Err(ModelError::Protocol(format!(
                    "the response failed: {}",
                    provider_error(error)
                )));
            }
            "error" => {
                // Documented flat (`code`, `message`, `param`); seen nested
                // in an `error` object too.
                let error = match data.get("error") {
                    Some(error @ Value::Object(_)) => error.clone(),
                    _ => {
                        // The event's own `type` is not the error's.
                        let mut error = data.clone();
                        error.remove("type");
                        error.remove("sequence_number");
                        Value::Object(error)
                    }
                };
                return Err(ModelError::Protocol(format!(
                    "the provider reported an error: {}",
                    provider_error(&error)
                )));
            }
            other => tracing::debug!(
                event = %other.chars().take(MAX_TYPE_BYTES).collect::<String>(),
                "ignored an event this adapter does not read"
            ),
        }
        Ok(Step::more(out))
    }

    /// Notes an output item's type, bounding how many there may be.
    fn note(&mut self, index: u64, item: &Map<String, Value>) -> Result<(), ModelError> {
        let kind = string(item, "type");
        if kind.len() > MAX_TYPE_BYTES {
            return Err(ModelError::Protocol(format!(
                "an output item's type is {} bytes long, more than any type has",
                kind.len()
            )));
        }
        // The record is this adapter's, never the server's: one from the
        // server would be read as the turn's record (the first one found).
        if kind == TURN_RECORD {
            return Err(protocol(
                "the server sent an output item of the type this adapter keeps its own record in",
            ));
        }
        if !self.order.contains_key(&index) && self.order.len() >= MAX_OUTPUT_ITEMS {
            return Err(ModelError::Protocol(format!(
                "the response has more than {MAX_OUTPUT_ITEMS} output items"
            )));
        }
        self.order.insert(index, string(item, "type").to_owned());
        Ok(())
    }

    fn added(
        &mut self,
        index: u64,
        item: &Map<String, Value>,
        out: &mut Vec<Item>,
    ) -> Result<(), ModelError> {
        self.note(index, item)?;
        let open = match string(item, "type") {
            "function_call" => {
                let call = self.open_call(item, out);
                Open::Call {
                    index: call,
                    streamed: !string(item, "arguments").is_empty(),
                }
            }
            "message" => Open::Message { streamed: false },
            _ => Open::Other,
        };
        self.open.insert(index, open);
        Ok(())
    }

    /// Opens a function call: the next call index, with its id and name.
    fn open_call(&mut self, item: &Map<String, Value>, out: &mut Vec<Item>) -> usize {
        let index = self.next_call;
        self.next_call += 1;
        // `call_id` pairs the call with its output; `id` is the item's.
        let id = item
            .get("call_id")
            .or_else(|| item.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        out.push(Ok(call_delta(
            index,
            id,
            item.get("name").and_then(Value::as_str).map(str::to_owned),
            string(item, "arguments").to_owned(),
        )));
        index
    }

    fn done(
        &mut self,
        index: u64,
        item: &Map<String, Value>,
        out: &mut Vec<Item>,
    ) -> Result<(), ModelError> {
        self.note(index, item)?;
        let open = self.open.remove(&index);
        match string(item, "type") {
            "reasoning" => {
                out.push(Ok(ModelEvent::ThinkingDelta(ThinkingDelta::Block {
                    index: self.next_block,
                    block: ThinkingBlock::OpenaiReasoning {
                        item: Value::Object(item.clone()),
                    },
                })));
                self.next_block += 1;
            }
            "function_call" => {
                let (call, streamed) = match open {
                    Some(Open::Call { index, streamed }) => (index, streamed),
                    // A server that sends the call whole, at its end.
                    _ => {
                        let call = self.open_call(item, out);
                        (call, !string(item, "arguments").is_empty())
                    }
                };
                if !streamed {
                    // A call's arguments are a JSON object, also when the
                    // tool has no parameters and none streamed.
                    let arguments = match string(item, "arguments") {
                        "" => "{}",
                        whole => whole,
                    };
                    out.push(Ok(call_delta(call, None, None, arguments.to_owned())));
                }
            }
            "message" => {
                if !matches!(open, Some(Open::Message { streamed: true })) {
                    let text: String = item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|part| {
                            part.get("text")
                                .or_else(|| part.get("refusal"))
                                .and_then(Value::as_str)
                        })
                        .collect();
                    if !text.is_empty() {
                        out.push(Ok(ModelEvent::TextDelta(text)));
                    }
                }
            }
            kind => {
                let name = self.name_of(kind);
                let id = string(item, "id").to_owned();
                let (input, output, is_error) = hosted_parts(kind, item);
                out.push(Ok(ModelEvent::Hosted(HostedToolEvent::Called {
                    id: id.clone(),
                    name: name.clone(),
                    input,
                })));
                out.push(Ok(ModelEvent::Hosted(HostedToolEvent::Finished {
                    id,
                    name,
                    output,
                    is_error,
                })));
                out.push(Ok(ModelEvent::ServerBlock(Value::Object(item.clone()))));
            }
        }
        Ok(())
    }

    /// The catalog name of a hosted tool's item type: the tool whose wire
    /// type it is the call of (`web_search_call` is `web_search`'s, and
    /// `web_search_preview`'s), else the type without `_call`.
    fn name_of(&self, kind: &str) -> String {
        let base = kind.strip_suffix("_call").unwrap_or(kind);
        self.names
            .iter()
            .find(|(wire, _)| wire == base)
            .or_else(|| self.names.iter().find(|(wire, _)| wire.starts_with(base)))
            .map_or_else(|| base.to_owned(), |(_, name)| name.clone())
    }

    /// The turn's record: the response id and its items' types in order.
    fn record(&self) -> Value {
        json!({
            "type": TURN_RECORD,
            "response_id": self.response_id,
            "output": self.order.values().collect::<Vec<_>>(),
        })
    }
}

/// What a person is shown of a hosted tool's item: what it was asked,
/// what it found, and whether it failed.
fn hosted_parts(kind: &str, item: &Map<String, Value>) -> (Value, Value, bool) {
    let is_error = matches!(string(item, "status"), "failed" | "incomplete");
    let field = |name: &str| item.get(name).cloned().unwrap_or(Value::Null);
    match kind {
        "web_search_call" => {
            let mut action = item
                .get("action")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let sources = action.remove("sources");
            let output = match sources {
                Some(sources) => json!({ "sources": sources }),
                None => json!({ "status": field("status") }),
            };
            (Value::Object(action), output, is_error)
        }
        "file_search_call" => (
            json!({ "queries": field("queries") }),
            json!({ "results": field("results") }),
            is_error,
        ),
        "code_interpreter_call" => (
            json!({ "code": field("code") }),
            json!({ "outputs": field("outputs") }),
            is_error,
        ),
        _ => {
            let mut input = item.clone();
            for key in ["id", "type", "status"] {
                input.remove(key);
            }
            (
                Value::Object(input),
                json!({ "status": field("status") }),
                is_error,
            )
        }
    }
}

fn call_delta(
    index: usize,
    id: Option<String>,
    name: Option<String>,
    arguments: String,
) -> ModelEvent {
    ModelEvent::ToolCallDelta(ToolCallDelta {
        index,
        id,
        name,
        arguments,
    })
}

/// A response id as kept, refused when no API would make it.
fn response_id(id: &str) -> Result<String, ModelError> {
    if id.len() > MAX_RESPONSE_ID_BYTES {
        return Err(ModelError::Protocol(format!(
            "a response id of {} bytes, longer than the {MAX_RESPONSE_ID_BYTES} any response has",
            id.len()
        )));
    }
    Ok(id.to_owned())
}

fn output_index(data: &Map<String, Value>) -> Result<u64, ModelError> {
    data.get("output_index")
        .and_then(Value::as_u64)
        .ok_or_else(|| protocol("an output item event without an output_index"))
}

fn output_item(data: &Map<String, Value>) -> Result<(u64, &Map<String, Value>), ModelError> {
    let item = data
        .get("item")
        .and_then(Value::as_object)
        .ok_or_else(|| protocol("an output item event without its item"))?;
    Ok((output_index(data)?, item))
}

/// A string member, `""` when absent or not a string.
fn string<'a>(object: &'a Map<String, Value>, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or("")
}

fn incomplete_reason(response: Option<&Value>) -> FinishReason {
    match response
        .and_then(|response| response.get("incomplete_details"))
        .and_then(|details| details.get("reason"))
        .and_then(Value::as_str)
    {
        Some("max_output_tokens") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        // A reason the API adds later is kept, cut like a type name.
        Some(other) => FinishReason::Other(other.chars().take(MAX_TYPE_BYTES).collect()),
        None => FinishReason::Other("incomplete".to_owned()),
    }
}

fn usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        cache_read_tokens: usage
            .get("input_tokens_details")
            .and_then(|details| details.get("cached_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0),
        ..Usage::new(tokens("input_tokens"), tokens("output_tokens"))
    })
}

/// The provider's words from an error object (`message`, `code`, `type`),
/// bounded.
fn provider_error(error: &Value) -> String {
    let Some(object) = error.as_object() else {
        return match error {
            Value::String(message) => quote(message),
            Value::Null => "no reason given".to_owned(),
            other => quote(&other.to_string()),
        };
    };
    let message = object
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| quote(&error.to_string()), quote);
    let details: Vec<String> = ["type", "code", "param"]
        .iter()
        .filter_map(|key| match object.get(*key) {
            Some(Value::String(text)) => Some(format!("{key} {}", quote(text))),
            Some(Value::Number(number)) => Some(format!("{key} {number}")),
            _ => None,
        })
        .collect();
    if details.is_empty() {
        message
    } else {
        format!("{message} ({})", details.join(", "))
    }
}

fn protocol(message: &str) -> ModelError {
    ModelError::Protocol(message.to_owned())
}

/// The start of `text`, for an error message.
fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    quoted
}
