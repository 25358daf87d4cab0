//! An OpenAI Chat Completions server for adapter tests: [`OpenAiTurn`]
//! scripts one streamed answer, written byte for byte as OpenAI writes it,
//! and [`MockOpenAiServer`] serves the scripts over real HTTP.
//!
//! ```ignore
//! let server = MockOpenAiServer::start([
//!     OpenAiTurn::text("Let me look.")
//!         .tool_call("call_1", "get_weather", &["{\"city\":", "\"Zürich\"}"])
//!         .usage(12, 7)
//!         .into_response(),
//! ])
//! .await?;
//! let model = OpenAiChat::new("gpt-4o-mini").with_base_url(server.base_url());
//! ```
//!
//! Why the byte-level tools: a client reads the body in whatever pieces the
//! network delivers, and the bugs of SSE clients live at the seams: a piece
//! that ends inside a multibyte UTF-8 character, inside a JSON escape
//! (`\"`, `\u00e9`), or between the two newlines that end an event.
//! [`cut_at`] re-cuts any scripted body at chosen byte offsets so a test can
//! put a seam exactly there.

use std::time::Duration;

use aptix_core::model::{ModelError, ModelEvent, ModelStream};
use axum::body::Bytes;
use futures_util::StreamExt;

use crate::mock_server::{MockSseServer, RecordedRequest, ScriptedResponse};

/// The `created` timestamp of every chunk, fixed so bodies are reproducible.
const CREATED: u64 = 1_700_000_000;

#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Reasoning(String),
    Call {
        id: String,
        name: String,
        chunks: Vec<String>,
    },
    Data(String),
}

/// One scripted streamed answer in OpenAI's format.
///
/// By default it is what OpenAI sends: a first chunk with
/// `delta.role: "assistant"`, one chunk per text piece and per tool-call
/// delta, a chunk with the `finish_reason` (`tool_calls` when the turn
/// called a tool, `stop` otherwise), a usage chunk with empty `choices` if
/// [`OpenAiTurn::usage`] was given, and `data: [DONE]`.
#[derive(Debug, Clone)]
pub struct OpenAiTurn {
    items: Vec<Item>,
    parallel: bool,
    finish: Option<String>,
    send_finish: bool,
    usage: Option<(u64, u64)>,
    cached_tokens: u64,
    error: Option<String>,
    done: bool,
    ascii: bool,
    model: String,
    id: String,
}

impl Default for OpenAiTurn {
    fn default() -> Self {
        OpenAiTurn {
            items: Vec::new(),
            parallel: false,
            finish: None,
            send_finish: true,
            usage: None,
            cached_tokens: 0,
            error: None,
            done: true,
            ascii: false,
            model: "gpt-4o-mini-2024-07-18".into(),
            id: "chatcmpl-AptixMock0001".into(),
        }
    }
}

impl OpenAiTurn {
    /// A turn with nothing in it yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn that starts with `text`, in one chunk.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_text(text)
    }

    /// A turn whose text arrives in `pieces`, one chunk each.
    pub fn text_pieces(pieces: &[&str]) -> Self {
        pieces
            .iter()
            .fold(Self::new(), |turn, piece| turn.with_text(*piece))
    }

    /// More text, in one chunk.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.items.push(Item::Text(text.into()));
        self
    }

    /// Reasoning in `pieces`, one chunk each, as DeepSeek, vLLM and
    /// llama.cpp stream it: `{"content":null,"reasoning_content":"…"}`
    /// deltas, in order with the text and calls (reasoning comes first in
    /// a real turn).
    pub fn reasoning(mut self, pieces: &[&str]) -> Self {
        self.items.extend(
            pieces
                .iter()
                .map(|piece| Item::Reasoning((*piece).to_owned())),
        );
        self
    }

    /// A tool call: a first delta with `id`, `type` and the name (and empty
    /// arguments), then one delta per piece of `arguments`. Calls are
    /// numbered (`index`) in the order they are added.
    pub fn tool_call(mut self, id: &str, name: &str, arguments: &[&str]) -> Self {
        self.items.push(Item::Call {
            id: id.into(),
            name: name.into(),
            chunks: arguments.iter().map(|piece| (*piece).to_owned()).collect(),
        });
        self
    }

    /// Interleaves consecutive tool calls: their first deltas, then their
    /// first argument pieces, and so on, so a client must keep the calls
    /// apart by `index`. (OpenAI itself streams calls one after another;
    /// other servers do not.)
    pub fn parallel(mut self) -> Self {
        self.parallel = true;
        self
    }

    /// A data line written verbatim (`data: {payload}\n\n`), in order with
    /// the text and calls: for malformed or unusual chunks.
    pub fn raw_data(mut self, payload: impl Into<String>) -> Self {
        self.items.push(Item::Data(payload.into()));
        self
    }

    /// The `finish_reason` (`stop`, `tool_calls`, `length`, ...).
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.into());
        self
    }

    /// Sends no chunk with a `finish_reason` (an unfinished turn).
    pub fn without_finish(mut self) -> Self {
        self.send_finish = false;
        self
    }

    /// Adds the usage chunk (and `"usage": null` on every other chunk, as
    /// OpenAI does when asked for `stream_options.include_usage`).
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Of the usage chunk's `prompt_tokens`, those read from the prompt
    /// cache (`prompt_tokens_details.cached_tokens`; 0 unless set).
    pub fn cached_tokens(mut self, cached: u64) -> Self {
        self.cached_tokens = cached;
        self
    }

    /// Ends the stream with an `{"error": {...}}` chunk after the text and
    /// calls, as OpenAI does when it fails mid-answer: no finish, no usage,
    /// no `[DONE]`.
    pub fn error(mut self, message: impl Into<String>) -> Self {
        self.error = Some(message.into());
        self
    }

    /// Leaves out the final `data: [DONE]`, as some compatible servers do.
    pub fn without_done(mut self) -> Self {
        self.done = false;
        self
    }

    /// Writes every non-ASCII character as a `\uXXXX` escape (a surrogate
    /// pair beyond the BMP), as Python servers using `json.dumps` do, so
    /// seams can fall inside those escapes.
    pub fn ascii_escaped(mut self) -> Self {
        self.ascii = true;
        self
    }

    /// The `model` field of the chunks.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The SSE events of the body, each `data: ...\n\n`.
    pub fn sse_events(&self) -> Vec<String> {
        let mut deltas: Vec<String> = Vec::new();
        let mut raw: Vec<(usize, String)> = Vec::new();
        let mut index = 0usize;
        let mut position = 0;
        while position < self.items.len() {
            match &self.items[position] {
                Item::Text(text) => {
                    deltas.push(format!("{{\"content\":{}}}", self.string(text)));
                    position += 1;
                }
                Item::Reasoning(text) => {
                    deltas.push(format!(
                        "{{\"content\":null,\"reasoning_content\":{}}}",
                        self.string(text)
                    ));
                    position += 1;
                }
                Item::Data(payload) => {
                    raw.push((deltas.len(), payload.clone()));
                    position += 1;
                }
                Item::Call { .. } => {
                    let group: Vec<(&str, &str, &[String])> = self.items[position..]
                        .iter()
                        .map_while(|item| match item {
                            Item::Call { id, name, chunks } => {
                                Some((id.as_str(), name.as_str(), chunks.as_slice()))
                            }
                            _ => None,
                        })
                        .collect();
                    position += group.len();
                    let mut per_call: Vec<Vec<String>> = group
                        .iter()
                        .enumerate()
                        .map(|(offset, (id, name, chunks))| {
                            let index = index + offset;
                            let mut out = vec![format!(
                                "{{\"tool_calls\":[{{\"index\":{index},\"id\":{},\"type\":\"function\",\"function\":{{\"name\":{},\"arguments\":\"\"}}}}]}}",
                                self.string(id),
                                self.string(name)
                            )];
                            out.extend(chunks.iter().map(|piece| {
                                format!(
                                    "{{\"tool_calls\":[{{\"index\":{index},\"function\":{{\"arguments\":{}}}}}]}}",
                                    self.string(piece)
                                )
                            }));
                            out
                        })
                        .collect();
                    index += group.len();
                    if self.parallel {
                        let rounds = per_call.iter().map(Vec::len).max().unwrap_or(0);
                        for round in 0..rounds {
                            for call in &per_call {
                                if let Some(delta) = call.get(round) {
                                    deltas.push(delta.clone());
                                }
                            }
                        }
                    } else {
                        deltas.extend(per_call.drain(..).flatten());
                    }
                }
            }
        }

        // The first delta carries the role: its own chunk before text, or
        // merged into the first tool-call delta as OpenAI does.
        let starts_with_call = matches!(self.items.first(), Some(Item::Call { .. }));
        let mut chunks: Vec<String> = Vec::new();
        if starts_with_call {
            if let Some(first) = deltas.first_mut() {
                *first = format!(
                    "{{\"role\":\"assistant\",\"content\":null,{},\"refusal\":null}}",
                    first.trim_start_matches('{').trim_end_matches('}')
                );
            }
        } else {
            chunks.push(self.chunk(
                "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}",
                None,
            ));
        }
        let mut raw = raw.into_iter().peekable();
        for (position, delta) in deltas.iter().enumerate() {
            while let Some((_, payload)) = raw.next_if(|(at, _)| *at == position) {
                chunks.push(payload);
            }
            chunks.push(self.chunk(delta, None));
        }
        chunks.extend(raw.map(|(_, payload)| payload));

        if let Some(message) = &self.error {
            chunks.push(format!(
                "{{\"error\":{{\"message\":{},\"type\":\"server_error\",\"param\":null,\"code\":null}}}}",
                self.string(message)
            ));
        } else {
            if self.send_finish {
                let called = self
                    .items
                    .iter()
                    .any(|item| matches!(item, Item::Call { .. }));
                let reason = self
                    .finish
                    .clone()
                    .unwrap_or_else(|| if called { "tool_calls" } else { "stop" }.to_owned());
                chunks.push(self.chunk("{}", Some(&reason)));
            }
            if let Some((prompt, completion)) = self.usage {
                chunks.push(format!(
                    "{{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":{CREATED},\"model\":{},\"system_fingerprint\":\"fp_aptix\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion},\"total_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":{},\"audio_tokens\":0}},\"completion_tokens_details\":{{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}}}}",
                    self.string(&self.id),
                    self.string(&self.model),
                    prompt + completion,
                    self.cached_tokens
                ));
            }
            if self.done {
                chunks.push("[DONE]".into());
            }
        }
        chunks
            .into_iter()
            .map(|data| format!("data: {data}\n\n"))
            .collect()
    }

    /// The whole body.
    pub fn sse_body(&self) -> String {
        self.sse_events().concat()
    }

    /// A `200 text/event-stream` response writing one event per chunk.
    pub fn into_response(self) -> ScriptedResponse {
        ScriptedResponse::sse(self.sse_events())
    }

    /// A response writing the body in pieces cut at byte `offsets` (see
    /// [`cut_at`]), each after `delay` so the client reads them apart.
    pub fn into_response_cut_at(self, offsets: &[usize], delay: Duration) -> ScriptedResponse {
        cut_at(self.into_response(), offsets).with_chunk_delay(delay)
    }

    fn chunk(&self, delta: &str, finish_reason: Option<&str>) -> String {
        let finish_reason = finish_reason.map_or_else(|| "null".to_owned(), |r| self.string(r));
        let usage = if self.usage.is_some() {
            ",\"usage\":null"
        } else {
            ""
        };
        format!(
            "{{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":{CREATED},\"model\":{},\"system_fingerprint\":\"fp_aptix\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish_reason}}}]{usage}}}",
            self.string(&self.id),
            self.string(&self.model),
        )
    }

    fn string(&self, text: &str) -> String {
        json_string(text, self.ascii)
    }
}

impl From<OpenAiTurn> for ScriptedResponse {
    fn from(turn: OpenAiTurn) -> Self {
        turn.into_response()
    }
}

/// `text` as a JSON string literal; with `ascii`, every non-ASCII
/// character escaped as `\uXXXX`.
fn json_string(text: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (ascii && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `response` with its body re-cut at byte `offsets` (positions in the whole
/// body; out-of-range and duplicate offsets are ignored). The body itself is
/// unchanged: only where one write ends and the next begins. Offsets may
/// fall anywhere: inside a UTF-8 character, an escape, a `data:` prefix.
///
/// Add a chunk delay ([`ScriptedResponse::with_chunk_delay`]): without one,
/// TCP may deliver several pieces in one read and the seam disappears.
pub fn cut_at(response: ScriptedResponse, offsets: &[usize]) -> ScriptedResponse {
    let body: Vec<u8> = response
        .chunks
        .iter()
        .flat_map(|chunk| chunk.iter().copied())
        .collect();
    let mut cuts: Vec<usize> = offsets
        .iter()
        .copied()
        .filter(|offset| *offset > 0 && *offset < body.len())
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut chunks = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts.into_iter().chain([body.len()]) {
        chunks.push(Bytes::copy_from_slice(&body[start..cut]));
        start = cut;
    }
    ScriptedResponse { chunks, ..response }
}

/// `response` with only the first `length` bytes of its body: with
/// [`ScriptedResponse::closing_early`], a connection that breaks there.
pub fn truncate(response: ScriptedResponse, length: usize) -> ScriptedResponse {
    let mut body: Vec<u8> = response
        .chunks
        .iter()
        .flat_map(|chunk| chunk.iter().copied())
        .collect();
    body.truncate(length);
    ScriptedResponse {
        chunks: vec![Bytes::from(body)],
        ..response
    }
}

/// `response` written one byte at a time: every possible seam at once.
pub fn cut_every_byte(response: ScriptedResponse) -> ScriptedResponse {
    let length: usize = response.chunks.iter().map(Bytes::len).sum();
    let offsets: Vec<usize> = (1..length).collect();
    cut_at(response, &offsets)
}

/// An error answer with OpenAI's body,
/// `{"error":{"message","type","param","code"}}`.
pub fn error_response(status: u16, message: &str) -> ScriptedResponse {
    let kind = match status {
        401 => "invalid_authentication",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    ScriptedResponse::error(
        status,
        serde_json::json!({
            "error": { "message": message, "type": kind, "param": null, "code": null }
        }),
    )
}

/// Reads a model stream to its end. For asserting on what an adapter
/// emits, including what follows a failure (nothing should).
pub async fn collect_events(mut stream: ModelStream<'_>) -> Vec<Result<ModelEvent, ModelError>> {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    events
}

/// The mock server: [`MockSseServer`] under the `/v1` prefix OpenAI
/// clients expect. Stops when dropped.
pub struct MockOpenAiServer {
    server: MockSseServer,
}

impl MockOpenAiServer {
    /// Starts a server answering requests with `responses` in order
    /// (built with [`OpenAiTurn::into_response`], [`error_response`], ...),
    /// and 500 once they run out.
    pub async fn start(
        responses: impl IntoIterator<Item = ScriptedResponse>,
    ) -> std::io::Result<Self> {
        Ok(MockOpenAiServer {
            server: MockSseServer::start(responses).await?,
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the adapter's base URL.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_turn_is_written_as_openai_writes_it() {
        let body = OpenAiTurn::text("Hi").usage(3, 1).sse_body();
        let expected = concat!(
            "data: {\"id\":\"chatcmpl-AptixMock0001\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_aptix\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"chatcmpl-AptixMock0001\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_aptix\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"chatcmpl-AptixMock0001\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_aptix\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
            "data: {\"id\":\"chatcmpl-AptixMock0001\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_aptix\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(body, expected);
    }

    #[test]
    fn every_chunk_is_json_and_the_role_rides_on_the_first_call() {
        let turn = OpenAiTurn::new()
            .tool_call("a", "x", &["{\"k\":", "\"é\"}"])
            .tool_call("b", "y", &["{}"])
            .parallel()
            .ascii_escaped();
        let events = turn.sse_events();
        let chunks: Vec<serde_json::Value> = events
            .iter()
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| !data.starts_with("[DONE]"))
            .map(|data| serde_json::from_str(data.trim_end()).unwrap_or_default())
            .collect();
        let deltas: Vec<&serde_json::Value> = chunks
            .iter()
            .map(|chunk| &chunk["choices"][0]["delta"])
            .collect();
        assert_eq!(deltas[0]["role"], "assistant");
        assert_eq!(deltas[0]["tool_calls"][0]["id"], "a");
        assert_eq!(deltas[1]["tool_calls"][0]["id"], "b");
        assert_eq!(
            deltas[2]["tool_calls"][0]["function"]["arguments"],
            "{\"k\":"
        );
        assert_eq!(deltas[3]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(
            deltas[4]["tool_calls"][0]["function"]["arguments"],
            "\"é\"}"
        );
        assert_eq!(chunks[5]["choices"][0]["finish_reason"], "tool_calls");
        assert!(events.concat().contains("\\u00e9"));
        assert!(events.concat().is_ascii());
    }

    #[test]
    fn reasoning_streams_as_reasoning_content_and_cached_tokens_in_the_usage() {
        let events = OpenAiTurn::new()
            .reasoning(&["Think", "ing."])
            .with_text("Hi")
            .usage(10, 2)
            .cached_tokens(8)
            .sse_events();
        let data: Vec<serde_json::Value> = events
            .iter()
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| !data.starts_with("[DONE]"))
            .map(|data| serde_json::from_str(data.trim_end()).unwrap_or_default())
            .collect();
        assert_eq!(data[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(
            data[1]["choices"][0]["delta"],
            serde_json::json!({ "content": null, "reasoning_content": "Think" })
        );
        assert_eq!(data[2]["choices"][0]["delta"]["reasoning_content"], "ing.");
        assert_eq!(data[3]["choices"][0]["delta"]["content"], "Hi");
        assert_eq!(
            data[5]["usage"]["prompt_tokens_details"]["cached_tokens"],
            8
        );
    }

    #[test]
    fn cuts_keep_the_body() {
        let response = OpenAiTurn::text("€").into_response();
        let body: Vec<u8> = response.chunks.concat();
        let cut = cut_at(response, &[0, 5, 5, 3, 10_000]);
        assert_eq!(cut.chunks.len(), 3);
        assert_eq!(cut.chunks.concat(), body);
        assert_eq!(cut_every_byte(cut).chunks.len(), body.len());
    }

    #[test]
    fn json_strings_escape_surrogate_pairs() {
        assert_eq!(
            json_string("a\"😀\u{1}", true),
            "\"a\\\"\\ud83d\\ude00\\u0001\""
        );
        assert_eq!(json_string("é", false), "\"é\"");
    }
}
