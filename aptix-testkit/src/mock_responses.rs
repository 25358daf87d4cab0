//! An OpenAI Responses API stand-in: [`ResponsesTurn`] scripts one
//! streamed response, written byte for byte as OpenAI streams it, and
//! [`MockResponsesServer`] serves the scripts over real HTTP.
//!
//! Each event is `event: TYPE\ndata: {json}\n\n`, its data naming the type
//! again with a `sequence_number` counting from 0, the members in OpenAI's
//! order: `response.created` and `response.in_progress` with the response
//! object, then per output item (its `output_index` in the order added)
//! `response.output_item.added`, its own events
//! (`response.reasoning_summary_part.added` /
//! `response.reasoning_summary_text.delta` / `.done` /
//! `response.reasoning_summary_part.done` for reasoning;
//! `response.content_part.added` / `response.output_text.delta` / `.done` /
//! `response.content_part.done` for a message;
//! `response.function_call_arguments.delta` / `.done` for a call;
//! `response.web_search_call.in_progress` / `.searching` / `.completed` for
//! a web search), `response.output_item.done` with the whole item, and last
//! `response.completed` (or `response.incomplete`, `response.failed`, an
//! `error` event) with the whole response and its usage.
//!
//! ```ignore
//! let server = MockResponsesServer::start([
//!     ResponsesTurn::new()
//!         .reasoning(&["Checking ", "the weather."], "gAAAA-encrypted")
//!         .function_call("call_1", "get_weather", &["{\"city\":", "\"Paris\"}"])
//!         .into_response(),
//!     ResponsesTurn::new().text("Sunny.").into_response(),
//! ])
//! .await?;
//! let model = OpenAiResponses::new("gpt-5-mini").with_base_url(server.base_url());
//! ```

use axum::body::Bytes;
use serde_json::{Value, json};

use crate::mock_anthropic::{recut, split_every};
use crate::mock_server::{MockSseServer, RecordedRequest, ScriptedResponse};

/// The model name the mock reports when none is set.
pub const MOCK_MODEL: &str = "gpt-5-mini-2025-08-07";

/// The `created_at` of every response, fixed so bodies are reproducible.
const CREATED: u64 = 1_764_964_102;

/// The `obfuscation` padding OpenAI adds to deltas (random there, fixed
/// here); readers ignore it.
const OBFUSCATION: &str = "aptixpad";

#[derive(Debug, Clone)]
enum Output {
    Reasoning {
        summary: Vec<String>,
        encrypted: Option<String>,
    },
    Message(Vec<String>),
    Call {
        call_id: String,
        name: String,
        chunks: Vec<String>,
    },
    WebSearch {
        id: String,
        query: String,
        sources: Vec<String>,
    },
    /// Any other item, whole: as added, then as done.
    Raw {
        added: Value,
        done: Value,
    },
}

#[derive(Debug, Clone)]
enum End {
    Completed,
    Incomplete(String),
    Failed { code: String, message: String },
    Error { code: String, message: String },
    None,
}

/// One streamed response in the Responses API's format.
#[derive(Debug, Clone)]
pub struct ResponsesTurn {
    id: String,
    model: String,
    outputs: Vec<Output>,
    end: End,
    input_tokens: u64,
    output_tokens: u64,
    cached_tokens: u64,
    reasoning_tokens: u64,
    store: bool,
}

impl Default for ResponsesTurn {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponsesTurn {
    /// An empty response: add output items, then turn it into a response.
    pub fn new() -> Self {
        ResponsesTurn {
            id: "resp_0aptix0000000000000000000000000000000001".into(),
            model: MOCK_MODEL.into(),
            outputs: Vec::new(),
            end: End::Completed,
            input_tokens: 36,
            output_tokens: 12,
            cached_tokens: 0,
            reasoning_tokens: 0,
            store: false,
        }
    }

    /// The response's `id` (what `previous_response_id` names).
    pub fn id(mut self, id: &str) -> Self {
        self.id = id.into();
        self
    }

    /// The model name in the response object.
    pub fn model(mut self, model: &str) -> Self {
        self.model = model.into();
        self
    }

    /// The `store` the response object reports.
    pub fn stored(mut self, store: bool) -> Self {
        self.store = store;
        self
    }

    /// A reasoning item: its summary streamed in `summary` pieces (none:
    /// no summary part at all), its `encrypted_content` (empty: none) on
    /// the item when done.
    pub fn reasoning(mut self, summary: &[&str], encrypted: &str) -> Self {
        self.outputs.push(Output::Reasoning {
            summary: summary.iter().map(|piece| (*piece).to_owned()).collect(),
            encrypted: (!encrypted.is_empty()).then(|| encrypted.to_owned()),
        });
        self
    }

    /// An assistant message streamed as one `output_text.delta`.
    pub fn text(self, text: &str) -> Self {
        self.text_chunks(&[text])
    }

    /// An assistant message streamed as one `output_text.delta` per piece.
    pub fn text_chunks(mut self, chunks: &[&str]) -> Self {
        self.outputs.push(Output::Message(
            chunks.iter().map(|chunk| (*chunk).to_owned()).collect(),
        ));
        self
    }

    /// A function call whose arguments stream as one
    /// `function_call_arguments.delta` per piece.
    pub fn function_call(mut self, call_id: &str, name: &str, arguments: &[&str]) -> Self {
        self.outputs.push(Output::Call {
            call_id: call_id.into(),
            name: name.into(),
            chunks: arguments.iter().map(|chunk| (*chunk).to_owned()).collect(),
        });
        self
    }

    /// A hosted web search (`web_search_call`) for `query` that found
    /// `sources` (URLs).
    pub fn web_search(mut self, id: &str, query: &str, sources: &[&str]) -> Self {
        self.outputs.push(Output::WebSearch {
            id: id.into(),
            query: query.into(),
            sources: sources.iter().map(|url| (*url).to_owned()).collect(),
        });
        self
    }

    /// Any other output item, as added and as done (a `file_search_call`,
    /// a `code_interpreter_call`, a type OpenAI adds later).
    pub fn raw_item(mut self, added: Value, done: Value) -> Self {
        self.outputs.push(Output::Raw { added, done });
        self
    }

    /// Token counts of the usage in the last event.
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.input_tokens = input;
        self.output_tokens = output;
        self
    }

    /// Of the input tokens, those read from the prompt cache
    /// (`input_tokens_details.cached_tokens`).
    pub fn cached_tokens(mut self, cached: u64) -> Self {
        self.cached_tokens = cached;
        self
    }

    /// Of the output tokens, those spent reasoning.
    pub fn reasoning_tokens(mut self, tokens: u64) -> Self {
        self.reasoning_tokens = tokens;
        self
    }

    /// Ends with `response.incomplete` for `reason` (`max_output_tokens`,
    /// `content_filter`).
    pub fn incomplete(mut self, reason: &str) -> Self {
        self.end = End::Incomplete(reason.into());
        self
    }

    /// Ends with `response.failed`, the response's `error` saying `code`
    /// and `message`.
    pub fn failed(mut self, code: &str, message: &str) -> Self {
        self.end = End::Failed {
            code: code.into(),
            message: message.into(),
        };
        self
    }

    /// Ends with an `error` event (and nothing after it).
    pub fn error_event(mut self, code: &str, message: &str) -> Self {
        self.end = End::Error {
            code: code.into(),
            message: message.into(),
        };
        self
    }

    /// Ends after the last item, without any final event: a stream that
    /// stops short.
    pub fn without_end(mut self) -> Self {
        self.end = End::None;
        self
    }

    /// Every SSE frame of the response, in order, each ending in the blank
    /// line. Take a prefix of these to script a stream cut anywhere.
    pub fn frames(&self) -> Vec<String> {
        let mut frames = Frames::default();
        frames.push(
            "response.created",
            &format!(r#""response":{}"#, self.response("in_progress", &[], None)),
        );
        frames.push(
            "response.in_progress",
            &format!(r#""response":{}"#, self.response("in_progress", &[], None)),
        );
        let mut done_items = Vec::new();
        for (index, output) in self.outputs.iter().enumerate() {
            let done = self.item_frames(index, output, &mut frames);
            done_items.push(done);
        }
        match &self.end {
            End::Completed => frames.push(
                "response.completed",
                &format!(
                    r#""response":{}"#,
                    self.response("completed", &done_items, None)
                ),
            ),
            End::Incomplete(reason) => frames.push(
                "response.incomplete",
                &format!(
                    r#""response":{}"#,
                    self.response(
                        "incomplete",
                        &done_items,
                        Some(format!(
                            r#""incomplete_details":{{"reason":{}}}"#,
                            s(reason)
                        )),
                    )
                ),
            ),
            End::Failed { code, message } => frames.push(
                "response.failed",
                &format!(
                    r#""response":{}"#,
                    self.response(
                        "failed",
                        &done_items,
                        Some(format!(
                            r#""error":{{"code":{},"message":{}}}"#,
                            s(code),
                            s(message)
                        )),
                    )
                ),
            ),
            End::Error { code, message } => frames.push(
                "error",
                &format!(
                    r#""code":{},"message":{},"param":null"#,
                    s(code),
                    s(message)
                ),
            ),
            End::None => {}
        }
        frames.frames
    }

    /// One output item's frames; returns the item as done.
    fn item_frames(&self, index: usize, output: &Output, frames: &mut Frames) -> String {
        let added = |frames: &mut Frames, item: &str| {
            frames.push(
                "response.output_item.added",
                &format!(r#""output_index":{index},"item":{item}"#),
            );
        };
        let done_frame = |frames: &mut Frames, item: &str| {
            frames.push(
                "response.output_item.done",
                &format!(r#""output_index":{index},"item":{item}"#),
            );
        };
        let done = match output {
            Output::Reasoning { summary, encrypted } => {
                let id = format!("rs_0aptix{index:040}");
                added(
                    frames,
                    &format!(r#"{{"id":{},"type":"reasoning","summary":[]}}"#, s(&id)),
                );
                let text = summary.concat();
                if !summary.is_empty() {
                    let at = format!(
                        r#""item_id":{},"output_index":{index},"summary_index":0"#,
                        s(&id)
                    );
                    frames.push(
                        "response.reasoning_summary_part.added",
                        &format!(r#"{at},"part":{{"type":"summary_text","text":""}}"#),
                    );
                    for piece in summary {
                        frames.push(
                            "response.reasoning_summary_text.delta",
                            &format!(r#"{at},"delta":{},"obfuscation":"{OBFUSCATION}""#, s(piece)),
                        );
                    }
                    frames.push(
                        "response.reasoning_summary_text.done",
                        &format!(r#"{at},"text":{}"#, s(&text)),
                    );
                    frames.push(
                        "response.reasoning_summary_part.done",
                        &format!(
                            r#"{at},"part":{{"type":"summary_text","text":{}}}"#,
                            s(&text)
                        ),
                    );
                }
                let summary_json = if summary.is_empty() {
                    "[]".to_owned()
                } else {
                    format!(r#"[{{"type":"summary_text","text":{}}}]"#, s(&text))
                };
                match encrypted {
                    Some(encrypted) => format!(
                        r#"{{"id":{},"type":"reasoning","encrypted_content":{},"summary":{summary_json}}}"#,
                        s(&id),
                        s(encrypted)
                    ),
                    None => format!(
                        r#"{{"id":{},"type":"reasoning","summary":{summary_json}}}"#,
                        s(&id)
                    ),
                }
            }
            Output::Message(chunks) => {
                let id = format!("msg_0aptix{index:040}");
                added(
                    frames,
                    &format!(
                        r#"{{"id":{},"type":"message","status":"in_progress","content":[],"role":"assistant"}}"#,
                        s(&id)
                    ),
                );
                let at = format!(
                    r#""item_id":{},"output_index":{index},"content_index":0"#,
                    s(&id)
                );
                frames.push(
                    "response.content_part.added",
                    &format!(
                        r#"{at},"part":{{"type":"output_text","annotations":[],"logprobs":[],"text":""}}"#
                    ),
                );
                for chunk in chunks {
                    frames.push(
                        "response.output_text.delta",
                        &format!(
                            r#"{at},"delta":{},"logprobs":[],"obfuscation":"{OBFUSCATION}""#,
                            s(chunk)
                        ),
                    );
                }
                let text = chunks.concat();
                frames.push(
                    "response.output_text.done",
                    &format!(r#"{at},"text":{},"logprobs":[]"#, s(&text)),
                );
                let part = format!(
                    r#"{{"type":"output_text","annotations":[],"logprobs":[],"text":{}}}"#,
                    s(&text)
                );
                frames.push(
                    "response.content_part.done",
                    &format!(r#"{at},"part":{part}"#),
                );
                format!(
                    r#"{{"id":{},"type":"message","status":"completed","content":[{part}],"role":"assistant"}}"#,
                    s(&id)
                )
            }
            Output::Call {
                call_id,
                name,
                chunks,
            } => {
                let id = format!("fc_0aptix{index:040}");
                added(
                    frames,
                    &format!(
                        r#"{{"id":{},"type":"function_call","status":"in_progress","arguments":"","call_id":{},"name":{}}}"#,
                        s(&id),
                        s(call_id),
                        s(name)
                    ),
                );
                let at = format!(r#""item_id":{},"output_index":{index}"#, s(&id));
                for chunk in chunks {
                    frames.push(
                        "response.function_call_arguments.delta",
                        &format!(r#"{at},"delta":{},"obfuscation":"{OBFUSCATION}""#, s(chunk)),
                    );
                }
                let arguments = chunks.concat();
                frames.push(
                    "response.function_call_arguments.done",
                    &format!(r#"{at},"arguments":{}"#, s(&arguments)),
                );
                format!(
                    r#"{{"id":{},"type":"function_call","status":"completed","arguments":{},"call_id":{},"name":{}}}"#,
                    s(&id),
                    s(&arguments),
                    s(call_id),
                    s(name)
                )
            }
            Output::WebSearch { id, query, sources } => {
                added(
                    frames,
                    &format!(
                        r#"{{"id":{},"type":"web_search_call","status":"in_progress"}}"#,
                        s(id)
                    ),
                );
                for stage in ["in_progress", "searching", "completed"] {
                    frames.push(
                        &format!("response.web_search_call.{stage}"),
                        &format!(r#""output_index":{index},"item_id":{}"#, s(id)),
                    );
                }
                let sources: Vec<String> = sources
                    .iter()
                    .map(|url| format!(r#"{{"type":"url","url":{}}}"#, s(url)))
                    .collect();
                format!(
                    r#"{{"id":{},"type":"web_search_call","status":"completed","action":{{"type":"search","query":{},"sources":[{}]}}}}"#,
                    s(id),
                    s(query),
                    sources.join(",")
                )
            }
            Output::Raw { added: item, done } => {
                added(frames, &item.to_string());
                done.to_string()
            }
        };
        done_frame(frames, &done);
        done
    }

    /// The response object with `status`, its `output`, and what the
    /// status adds (`error`, `incomplete_details`).
    fn response(&self, status: &str, output: &[String], detail: Option<String>) -> String {
        let (error, incomplete) = match &detail {
            Some(detail) if detail.starts_with(r#""error""#) => {
                (detail.clone(), r#""incomplete_details":null"#.to_owned())
            }
            Some(detail) => (r#""error":null"#.to_owned(), detail.clone()),
            None => (
                r#""error":null"#.to_owned(),
                r#""incomplete_details":null"#.to_owned(),
            ),
        };
        let usage = if status == "in_progress" {
            "null".to_owned()
        } else {
            format!(
                r#"{{"input_tokens":{},"input_tokens_details":{{"cached_tokens":{}}},"output_tokens":{},"output_tokens_details":{{"reasoning_tokens":{}}},"total_tokens":{}}}"#,
                self.input_tokens,
                self.cached_tokens,
                self.output_tokens,
                self.reasoning_tokens,
                self.input_tokens + self.output_tokens
            )
        };
        format!(
            r#"{{"id":{},"object":"response","created_at":{CREATED},"status":"{status}","background":false,{error},{incomplete},"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":{},"output":[{}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{{"effort":"medium","summary":null}},"safety_identifier":null,"service_tier":"auto","store":{},"temperature":1.0,"text":{{"format":{{"type":"text"}},"verbosity":"medium"}},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{usage},"user":null,"metadata":{{}}}}"#,
            s(&self.id),
            s(&self.model),
            output.join(","),
            self.store,
        )
    }

    /// The whole body as one string.
    pub fn body(&self) -> String {
        self.frames().concat()
    }

    /// A `200` response that writes each frame as its own chunk, as OpenAI
    /// flushes them.
    pub fn into_response(self) -> ScriptedResponse {
        ScriptedResponse::sse(self.frames())
    }

    /// A `200` response whose body is cut at the given byte offsets.
    pub fn into_response_cut_at(self, cuts: &[usize]) -> ScriptedResponse {
        ScriptedResponse::sse(recut(self.body().as_bytes(), cuts))
    }

    /// A `200` response written `size` bytes at a time (1 cuts everywhere).
    pub fn into_response_in_chunks(self, size: usize) -> ScriptedResponse {
        ScriptedResponse::sse(split_every(self.body().as_bytes(), size))
    }
}

/// Frames numbered as they are written.
#[derive(Default)]
struct Frames {
    frames: Vec<String>,
}

impl Frames {
    /// Adds the event `kind` whose data is `{"type":kind,"sequence_number":N,` + `members` + `}`.
    fn push(&mut self, kind: &str, members: &str) {
        let sequence = self.frames.len();
        self.frames.push(frame(
            kind,
            &format!(r#"{{"type":"{kind}","sequence_number":{sequence},{members}}}"#),
        ));
    }
}

/// A JSON string literal.
fn s(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// One SSE frame: `event: TYPE\ndata: DATA\n\n`.
pub fn frame(event: &str, data: &str) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// An `error` event as the API documents it (`code`, `message`, `param`),
/// with `sequence_number`.
pub fn error_frame(sequence_number: u64, code: &str, message: &str) -> String {
    frame(
        "error",
        &format!(
            r#"{{"type":"error","sequence_number":{sequence_number},"code":{},"message":{},"param":null}}"#,
            s(code),
            s(message)
        ),
    )
}

/// An error status with OpenAI's error body,
/// `{"error":{"message","type","param","code"}}`.
pub fn error_response(status: u16, message: &str) -> ScriptedResponse {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        429 => ("rate_limit_exceeded", json!("rate_limit_exceeded")),
        400..=499 => ("invalid_request_error", Value::Null),
        _ => ("server_error", Value::Null),
    };
    ScriptedResponse::error(
        status,
        json!({ "error": { "message": message, "type": kind, "param": null, "code": code } }),
    )
}

/// The mock server: [`MockSseServer`] under the `/v1` prefix OpenAI
/// clients expect. Stops when dropped.
pub struct MockResponsesServer {
    server: MockSseServer,
}

impl MockResponsesServer {
    /// Starts a server answering requests with `responses` in order (see
    /// [`ResponsesTurn::into_response`], [`error_response`]), and 500 once
    /// they run out.
    pub async fn start(
        responses: impl IntoIterator<Item = ScriptedResponse>,
    ) -> std::io::Result<Self> {
        Ok(MockResponsesServer {
            server: MockSseServer::start(responses).await?,
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the adapter's base URL (`/responses` is
    /// appended by it).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }

    /// The server underneath.
    pub fn server(&self) -> &MockSseServer {
        &self.server
    }
}

/// A response whose one text delta is `bytes` bytes long, in one event,
/// and which never finishes: for the limit on one event.
pub fn huge_delta_response(bytes: usize) -> ScriptedResponse {
    let turn = ResponsesTurn::new().text("").without_end();
    let mut frames = turn.frames();
    // Replace the empty delta with one of `bytes` bytes.
    let padding = "x".repeat(bytes);
    for frame in &mut frames {
        if frame.starts_with("event: response.output_text.delta\n") {
            *frame = frame.replace(r#""delta":"""#, &format!(r#""delta":"{padding}""#));
        }
    }
    ScriptedResponse::sse(frames.into_iter().map(Bytes::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_turn_is_written_as_openai_streams_it() {
        let frames = ResponsesTurn::new().text("Hi").usage(3, 1).frames();
        let kinds: Vec<&str> = frames
            .iter()
            .filter_map(|frame| frame.lines().next()?.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert_eq!(
            frames[4],
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"msg_0aptix0000000000000000000000000000000000000000\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\",\"logprobs\":[],\"obfuscation\":\"aptixpad\"}\n\n"
        );
        for (sequence, frame) in frames.iter().enumerate() {
            let data = frame
                .lines()
                .nth(1)
                .and_then(|line| line.strip_prefix("data: "))
                .unwrap_or_default();
            let value: Value = serde_json::from_str(data).unwrap_or_default();
            assert_eq!(value["sequence_number"], sequence, "{frame}");
        }
        let completed: Value = serde_json::from_str(
            frames[8]
                .lines()
                .nth(1)
                .and_then(|line| line.strip_prefix("data: "))
                .unwrap_or_default(),
        )
        .unwrap_or_default();
        assert_eq!(
            completed["response"]["output"][0]["content"][0]["text"],
            "Hi"
        );
        assert_eq!(completed["response"]["usage"]["total_tokens"], 4);
    }
}
