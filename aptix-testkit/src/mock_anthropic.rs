//! An Anthropic Messages API stand-in: [`MockSseServer`] answering with
//! bodies built the way Anthropic streams them.
//!
//! The frames follow Anthropic's wire format byte for byte, down to the key
//! order of each `data:` object: `event: NAME\ndata: {json}\n\n`, a
//! `message_start` carrying the message object, `content_block_start` /
//! `content_block_delta` / `content_block_stop` per block with its `index`,
//! a `ping` after the first block opens, `message_delta` with the stop
//! reason and usage, then `message_stop`. An adapter that passes against
//! these bodies reads the real ones.
//!
//! Real networks cut bodies anywhere, so [`recut`] and [`split_every`]
//! re-chunk a body at chosen byte offsets: inside an escape sequence of a
//! `partial_json` string, or between the bytes of one UTF-8 character. A
//! decoder that only works on whole events or whole characters fails there.
//!
//! ```ignore
//! let server = MockAnthropicServer::start([
//!     AnthropicTurn::new()
//!         .text("Let me check.")
//!         .tool_use("toolu_1", "get_weather", &["{\"city\":", "\"Paris\"}"])
//!         .into_response(),
//! ])
//! .await?;
//! let model = Anthropic::new("claude-sonnet-4-5", "key").with_base_url(server.base_url());
//! ```

use axum::body::Bytes;
use serde_json::Value;

use crate::mock_server::{MockSseServer, RecordedRequest, ScriptedResponse};

/// The model name the mock reports when none is set.
pub const MOCK_MODEL: &str = "claude-sonnet-4-5";

#[derive(Debug, Clone)]
enum Block {
    Text(Vec<String>),
    /// A `tool_use` block, or (`server`) a `server_tool_use` block, which
    /// the provider runs itself; the input streams the same way.
    ToolUse {
        server: bool,
        id: String,
        name: String,
        chunks: Vec<String>,
    },
    Thinking {
        chunks: Vec<String>,
        signature: String,
    },
    RedactedThinking(String),
    /// A server tool's result block, whole in `content_block_start`.
    ServerResult(Value),
}

/// One streamed assistant turn in Anthropic's format.
#[derive(Debug, Clone)]
pub struct AnthropicTurn {
    id: String,
    model: String,
    blocks: Vec<Block>,
    stop_reason: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cache_read: u64,
    cache_write: u64,
    ping: bool,
}

impl Default for AnthropicTurn {
    fn default() -> Self {
        Self::new()
    }
}

impl AnthropicTurn {
    /// An empty turn: add blocks, then turn it into a response.
    pub fn new() -> Self {
        AnthropicTurn {
            id: "msg_01XFDUDYJgAACzvnptvVoYEL".into(),
            model: MOCK_MODEL.into(),
            blocks: Vec::new(),
            stop_reason: None,
            input_tokens: 25,
            output_tokens: 1,
            cache_read: 0,
            cache_write: 0,
            ping: true,
        }
    }

    /// A text block streamed as one `text_delta`.
    pub fn text(self, text: &str) -> Self {
        self.text_chunks(&[text])
    }

    /// A text block streamed as one `text_delta` per chunk.
    pub fn text_chunks(mut self, chunks: &[&str]) -> Self {
        self.blocks.push(Block::Text(
            chunks.iter().map(|chunk| (*chunk).to_owned()).collect(),
        ));
        self
    }

    /// An extended-thinking block: one `thinking_delta` per chunk, then its
    /// `signature` as one `signature_delta`, as Anthropic streams it.
    pub fn thinking(mut self, chunks: &[&str], signature: &str) -> Self {
        self.blocks.push(Block::Thinking {
            chunks: chunks.iter().map(|chunk| (*chunk).to_owned()).collect(),
            signature: signature.into(),
        });
        self
    }

    /// A `redacted_thinking` block: its opaque `data` arrives whole in
    /// `content_block_start`, with no deltas.
    pub fn redacted_thinking(mut self, data: &str) -> Self {
        self.blocks.push(Block::RedactedThinking(data.into()));
        self
    }

    /// A `tool_use` block whose input streams as one `input_json_delta` per
    /// chunk of `partial_json`. Like Anthropic, the block starts with
    /// `input: {}` and an empty first `partial_json`; an empty `partial_json`
    /// list is how a tool without parameters streams.
    pub fn tool_use(self, id: &str, name: &str, partial_json: &[&str]) -> Self {
        self.any_tool_use(false, id, name, partial_json)
    }

    /// A `server_tool_use` block (a tool the provider runs, e.g. its tool
    /// search), its input streamed as `input_json_delta`s.
    pub fn server_tool_use(self, id: &str, name: &str, partial_json: &[&str]) -> Self {
        self.any_tool_use(true, id, name, partial_json)
    }

    fn any_tool_use(mut self, server: bool, id: &str, name: &str, partial_json: &[&str]) -> Self {
        self.blocks.push(Block::ToolUse {
            server,
            id: id.into(),
            name: name.into(),
            chunks: partial_json
                .iter()
                .map(|chunk| (*chunk).to_owned())
                .collect(),
        });
        self
    }

    /// A server tool's result block (e.g. `tool_search_tool_result`),
    /// sent whole in `content_block_start`.
    pub fn server_result(mut self, block: Value) -> Self {
        self.blocks.push(Block::ServerResult(block));
        self
    }

    /// The tool search's result block naming `tools`, for the
    /// `server_tool_use` with id `tool_use_id`.
    pub fn tool_search_result(self, tool_use_id: &str, tools: &[&str]) -> Self {
        let references: Vec<Value> = tools
            .iter()
            .map(|name| serde_json::json!({ "type": "tool_reference", "tool_name": name }))
            .collect();
        self.server_result(serde_json::json!({
            "type": "tool_search_tool_result",
            "tool_use_id": tool_use_id,
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": references,
            },
        }))
    }

    /// A web search's result block for the `server_tool_use` with id
    /// `tool_use_id`: one `web_search_result` per `(url, title)`, as
    /// Anthropic sends it whole in `content_block_start` (the encrypted
    /// content a real one carries is a fixed placeholder here).
    pub fn web_search_result(self, tool_use_id: &str, results: &[(&str, &str)]) -> Self {
        let results: Vec<Value> = results
            .iter()
            .map(|(url, title)| {
                serde_json::json!({
                    "type": "web_search_result",
                    "title": title,
                    "url": url,
                    "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
                    "page_age": null,
                })
            })
            .collect();
        self.server_result(serde_json::json!({
            "type": "web_search_tool_result",
            "tool_use_id": tool_use_id,
            "content": results,
        }))
    }

    /// The prompt cache's tokens in `message_start`'s usage:
    /// `cache_read_input_tokens` and `cache_creation_input_tokens` (0
    /// unless set).
    pub fn cache_usage(mut self, read: u64, written: u64) -> Self {
        self.cache_read = read;
        self.cache_write = written;
        self
    }

    /// The `stop_reason` of `message_delta`. By default `tool_use` when the
    /// turn has a tool_use block, `end_turn` otherwise.
    pub fn stop(mut self, reason: &str) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// The token counts: `input` in `message_start`, `output` in `message_delta`.
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.input_tokens = input;
        self.output_tokens = output;
        self
    }

    /// The model name in `message_start`.
    pub fn model(mut self, model: &str) -> Self {
        self.model = model.into();
        self
    }

    /// Leaves out the `ping` Anthropic sends after the first block opens.
    pub fn without_ping(mut self) -> Self {
        self.ping = false;
        self
    }

    fn stop_reason(&self) -> String {
        self.stop_reason.clone().unwrap_or_else(|| {
            let calls = self
                .blocks
                .iter()
                .any(|block| matches!(block, Block::ToolUse { server: false, .. }));
            if calls { "tool_use" } else { "end_turn" }.to_owned()
        })
    }

    /// Every SSE frame of the turn, in order, each ending in the blank line.
    /// Take a prefix of these to script a stream that stops short.
    pub fn frames(&self) -> Vec<String> {
        let mut frames = vec![frame(
            "message_start",
            &format!(
                r#"{{"type":"message_start","message":{{"id":{},"type":"message","role":"assistant","model":{},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":{},"cache_creation_input_tokens":{},"cache_read_input_tokens":{},"output_tokens":1}}}}}}"#,
                string(&self.id),
                string(&self.model),
                self.input_tokens,
                self.cache_write,
                self.cache_read,
            ),
        )];
        for (index, block) in self.blocks.iter().enumerate() {
            match block {
                Block::Text(chunks) => {
                    frames.push(frame(
                        "content_block_start",
                        &format!(
                            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#
                        ),
                    ));
                    if index == 0 && self.ping {
                        frames.push(ping_frame());
                    }
                    for chunk in chunks {
                        frames.push(frame(
                            "content_block_delta",
                            &format!(
                                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":{}}}}}"#,
                                string(chunk)
                            ),
                        ));
                    }
                }
                Block::ToolUse {
                    server,
                    id,
                    name,
                    chunks,
                } => {
                    let kind = if *server {
                        "server_tool_use"
                    } else {
                        "tool_use"
                    };
                    frames.push(frame(
                        "content_block_start",
                        &format!(
                            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"{kind}","id":{},"name":{},"input":{{}}}}}}"#,
                            string(id),
                            string(name)
                        ),
                    ));
                    // What Anthropic sends around a client `tool_use`: a
                    // ping after the first block's start, an empty first
                    // delta.
                    if !server && index == 0 && self.ping {
                        frames.push(ping_frame());
                    }
                    if !server && !chunks.is_empty() {
                        frames.push(input_json_delta(index, ""));
                    }
                    for chunk in chunks {
                        frames.push(input_json_delta(index, chunk));
                    }
                }
                Block::Thinking { chunks, signature } => {
                    frames.push(frame(
                        "content_block_start",
                        &format!(
                            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"thinking","thinking":"","signature":""}}}}"#
                        ),
                    ));
                    if index == 0 && self.ping {
                        frames.push(ping_frame());
                    }
                    for chunk in chunks {
                        frames.push(frame(
                            "content_block_delta",
                            &format!(
                                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"thinking_delta","thinking":{}}}}}"#,
                                string(chunk)
                            ),
                        ));
                    }
                    frames.push(frame(
                        "content_block_delta",
                        &format!(
                            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"signature_delta","signature":{}}}}}"#,
                            string(signature)
                        ),
                    ));
                }
                Block::ServerResult(block) => {
                    frames.push(frame(
                        "content_block_start",
                        &serde_json::json!({
                            "type": "content_block_start",
                            "index": index,
                            "content_block": block,
                        })
                        .to_string(),
                    ));
                }
                Block::RedactedThinking(data) => {
                    frames.push(frame(
                        "content_block_start",
                        &format!(
                            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"redacted_thinking","data":{}}}}}"#,
                            string(data)
                        ),
                    ));
                    if index == 0 && self.ping {
                        frames.push(ping_frame());
                    }
                }
            }
            frames.push(frame(
                "content_block_stop",
                &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
            ));
        }
        frames.push(frame(
            "message_delta",
            &format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":{},"stop_sequence":null}},"usage":{{"output_tokens":{}}}}}"#,
                string(&self.stop_reason()),
                self.output_tokens
            ),
        ));
        frames.push(frame("message_stop", r#"{"type":"message_stop"}"#));
        frames
    }

    /// The whole body as one string.
    pub fn body(&self) -> String {
        self.frames().concat()
    }

    /// A `200` response that writes each frame as its own chunk, as
    /// Anthropic flushes them.
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

fn input_json_delta(index: usize, partial_json: &str) -> String {
    frame(
        "content_block_delta",
        &format!(
            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{}}}}}"#,
            string(partial_json)
        ),
    )
}

/// A JSON string literal (escaped as serde_json, and Anthropic, escape).
fn string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// One SSE frame: `event: NAME\ndata: DATA\n\n`.
pub fn frame(event: &str, data: &str) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The keep-alive frame, exactly as Anthropic sends it (with its spaces).
pub fn ping_frame() -> String {
    frame("ping", r#"{"type": "ping"}"#)
}

/// A mid-stream `error` event, e.g. `error_frame("overloaded_error",
/// "Overloaded")`: how Anthropic reports a failure after the `200`.
pub fn error_frame(kind: &str, message: &str) -> String {
    frame(
        "error",
        &format!(
            r#"{{"type": "error", "error": {{"type": {}, "message": {}}}}}"#,
            string(kind),
            string(message)
        ),
    )
}

/// An error status with Anthropic's error body, e.g. `error_response(529,
/// "overloaded_error", "Overloaded")`.
pub fn error_response(status: u16, kind: &str, message: &str) -> ScriptedResponse {
    ScriptedResponse::error(
        status,
        serde_json::json!({
            "type": "error",
            "error": { "type": kind, "message": message },
        }),
    )
}

/// `body` re-cut at the byte offsets `cuts` (ascending; offsets outside the
/// body or out of order are ignored). The cuts may fall anywhere, including
/// inside one UTF-8 character, which is the point.
pub fn recut(body: &[u8], cuts: &[usize]) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        if cut > start && cut < body.len() {
            chunks.push(Bytes::copy_from_slice(&body[start..cut]));
            start = cut;
        }
    }
    chunks.push(Bytes::copy_from_slice(&body[start..]));
    chunks
}

/// `body` in chunks of `size` bytes (at least 1).
pub fn split_every(body: &[u8], size: usize) -> Vec<Bytes> {
    body.chunks(size.max(1))
        .map(Bytes::copy_from_slice)
        .collect()
}

/// A [`MockSseServer`] for the Anthropic adapter.
pub struct MockAnthropicServer {
    server: MockSseServer,
}

impl MockAnthropicServer {
    /// Starts a server answering requests with `responses` in order (see
    /// [`AnthropicTurn::into_response`], [`error_response`]).
    pub async fn start(
        responses: impl IntoIterator<Item = ScriptedResponse>,
    ) -> std::io::Result<Self> {
        Ok(MockAnthropicServer {
            server: MockSseServer::start(responses).await?,
        })
    }

    /// The base URL to give the adapter (`/v1/messages` is appended by it).
    pub fn base_url(&self) -> String {
        self.server.url()
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
