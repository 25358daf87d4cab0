//! A Gemini API stand-in: [`MockSseServer`] answering
//! `streamGenerateContent?alt=sse` with bodies built the way Gemini streams
//! them.
//!
//! The frames follow the Gemini API's wire format byte for byte, as the
//! service writes it: `data: {json}\r\n\r\n` per `GenerateContentResponse`
//! chunk, with `": "` after each key and `,` alone between members, `<`,
//! `>` and `&` written as `\u003c`, `\u003e`, `\u0026`, and the members in
//! Gemini's order: `{"candidates": [{"content": {"parts": […],"role":
//! "model"},"finishReason": …,"index": 0,"groundingMetadata": …}],
//! "usageMetadata": {…},"modelVersion": …,"responseId": …}`. Every chunk
//! carries the usage; the last one carries the `finishReason` (and a Google
//! Search's `groundingMetadata`). Each function call arrives whole, in one
//! part; several calls of one chunk are parallel calls. An adapter that
//! passes against these bodies reads the real ones.
//!
//! ```ignore
//! let server = MockGeminiServer::start([
//!     GeminiTurn::new()
//!         .thought("The user wants the weather.")
//!         .call(GeminiCall::new("get_weather", json!({"city": "Paris"})).signed("c2ln"))
//!         .into_response(),
//! ])
//! .await?;
//! let model = Gemini::new("gemini-2.5-flash", "key").with_base_url(server.base_url());
//! ```

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::mock_anthropic::{recut, split_every};
use crate::mock_server::{MockSseServer, RecordedRequest, ScriptedResponse};

/// The model version the mock reports when none is set.
pub const MOCK_MODEL: &str = "gemini-2.5-flash";

/// The response id the mock reports when none is set.
pub const MOCK_RESPONSE_ID: &str = "uCdRasy1POqHz7IPsuT-kAs";

/// One function call as Gemini streams it: whole, in one part.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiCall {
    /// Gemini's `id` for the call, when it gives one.
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// The arguments object; `None` leaves `args` out (a call without
    /// parameters).
    pub args: Option<Value>,
    /// The `thoughtSignature` on the call's part.
    pub signature: Option<String>,
}

impl GeminiCall {
    /// A call of `name` with `args`, without id or signature.
    pub fn new(name: &str, args: Value) -> Self {
        GeminiCall {
            id: None,
            name: name.into(),
            args: Some(args),
            signature: None,
        }
    }

    /// With Gemini's id.
    pub fn id(mut self, id: &str) -> Self {
        self.id = Some(id.into());
        self
    }

    /// With a thought signature on its part.
    pub fn signed(mut self, signature: &str) -> Self {
        self.signature = Some(signature.into());
        self
    }

    /// Without `args` at all.
    pub fn without_args(mut self) -> Self {
        self.args = None;
        self
    }

    fn part(&self) -> String {
        let mut call = String::from("{");
        if let Some(id) = &self.id {
            call.push_str(&format!("\"id\": {},", wire(id)));
        }
        call.push_str(&format!("\"name\": {}", wire(&self.name)));
        if let Some(args) = &self.args {
            call.push_str(&format!(",\"args\": {}", wire(args)));
        }
        call.push('}');
        match &self.signature {
            Some(signature) => format!(
                "{{\"functionCall\": {call},\"thoughtSignature\": {}}}",
                wire(signature)
            ),
            None => format!("{{\"functionCall\": {call}}}"),
        }
    }
}

/// One streamed model turn in Gemini's format: chunks of parts, then the
/// finish on the last chunk.
#[derive(Debug, Clone)]
pub struct GeminiTurn {
    /// Each chunk's parts, already written.
    chunks: Vec<Vec<String>>,
    calls: bool,
    finish_reason: Option<String>,
    grounding: Option<Value>,
    prompt_tokens: u64,
    output_tokens: u64,
    thoughts_tokens: u64,
    cached_tokens: u64,
    model_version: String,
    response_id: String,
}

impl Default for GeminiTurn {
    fn default() -> Self {
        Self::new()
    }
}

impl GeminiTurn {
    /// An empty turn: add parts, then turn it into a response.
    pub fn new() -> Self {
        GeminiTurn {
            chunks: Vec::new(),
            calls: false,
            finish_reason: None,
            grounding: None,
            prompt_tokens: 21,
            output_tokens: 5,
            thoughts_tokens: 0,
            cached_tokens: 0,
            model_version: MOCK_MODEL.into(),
            response_id: MOCK_RESPONSE_ID.into(),
        }
    }

    /// A text part, in a chunk of its own.
    pub fn text(self, text: &str) -> Self {
        self.text_chunks(&[text])
    }

    /// One text part per chunk.
    pub fn text_chunks(mut self, chunks: &[&str]) -> Self {
        for text in chunks {
            self.chunks
                .push(vec![format!("{{\"text\": {}}}", wire(*text))]);
        }
        self
    }

    /// A thought-summary part (`includeThoughts`), in a chunk of its own.
    pub fn thought(mut self, text: &str) -> Self {
        self.chunks.push(vec![format!(
            "{{\"text\": {},\"thought\": true}}",
            wire(text)
        )]);
        self
    }

    /// A thought part carrying a thought signature.
    pub fn thought_signed(mut self, text: &str, signature: &str) -> Self {
        self.chunks.push(vec![format!(
            "{{\"text\": {},\"thought\": true,\"thoughtSignature\": {}}}",
            wire(text),
            wire(signature)
        )]);
        self
    }

    /// The empty text part with a thought signature Gemini 3 closes a
    /// text turn with.
    pub fn text_signature(mut self, signature: &str) -> Self {
        self.chunks.push(vec![format!(
            "{{\"text\": \"\",\"thoughtSignature\": {}}}",
            wire(signature)
        )]);
        self
    }

    /// One function call, in a chunk of its own.
    pub fn call(self, call: GeminiCall) -> Self {
        self.calls(vec![call])
    }

    /// Several function calls in one chunk: parallel calls, as Gemini
    /// sends them (only the first carries a signature, when any does).
    pub fn calls(mut self, calls: Vec<GeminiCall>) -> Self {
        self.calls |= !calls.is_empty();
        self.chunks
            .push(calls.iter().map(GeminiCall::part).collect::<Vec<_>>());
        self
    }

    /// Any part, written as Gemini writes JSON (an `executableCode` or
    /// `codeExecutionResult` part, say), in a chunk of its own.
    pub fn part(mut self, part: Value) -> Self {
        self.chunks.push(vec![wire(&part)]);
        self
    }

    /// The `groundingMetadata` of the last chunk, as a Google Search leaves
    /// it.
    pub fn grounding(mut self, grounding: Value) -> Self {
        self.grounding = Some(grounding);
        self
    }

    /// A Google Search's grounding: its `webSearchQueries`, and one
    /// `groundingChunks` web source per `(uri, title)`.
    pub fn google_search(self, queries: &[&str], sources: &[(&str, &str)]) -> Self {
        let chunks: Vec<Value> = sources
            .iter()
            .map(|(uri, title)| serde_json::json!({ "web": { "uri": uri, "title": title } }))
            .collect();
        self.grounding(serde_json::json!({
            "searchEntryPoint": { "renderedContent": "<style>\n.container {}\n</style>\n<div class=\"container\"></div>" },
            "groundingChunks": chunks,
            "webSearchQueries": queries,
        }))
    }

    /// The `finishReason` of the last chunk. By default `STOP`.
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// The token counts: `promptTokenCount` and `candidatesTokenCount`.
    pub fn usage(mut self, prompt: u64, candidates: u64) -> Self {
        self.prompt_tokens = prompt;
        self.output_tokens = candidates;
        self
    }

    /// The `thoughtsTokenCount`.
    pub fn thoughts_tokens(mut self, thoughts: u64) -> Self {
        self.thoughts_tokens = thoughts;
        self
    }

    /// The `cachedContentTokenCount`.
    pub fn cached_tokens(mut self, cached: u64) -> Self {
        self.cached_tokens = cached;
        self
    }

    /// The `modelVersion` every chunk reports.
    pub fn model_version(mut self, version: &str) -> Self {
        self.model_version = version.into();
        self
    }

    /// Whether the turn has function calls.
    pub fn has_calls(&self) -> bool {
        self.calls
    }

    fn usage_metadata(&self) -> String {
        let total = self.prompt_tokens + self.output_tokens + self.thoughts_tokens;
        let mut usage = format!(
            "{{\"promptTokenCount\": {},\"candidatesTokenCount\": {},\"totalTokenCount\": {total}",
            self.prompt_tokens, self.output_tokens
        );
        if self.cached_tokens > 0 {
            usage.push_str(&format!(
                ",\"cachedContentTokenCount\": {}",
                self.cached_tokens
            ));
        }
        usage.push_str(&format!(
            ",\"promptTokensDetails\": [{{\"modality\": \"TEXT\",\"tokenCount\": {}}}]",
            self.prompt_tokens
        ));
        if self.thoughts_tokens > 0 {
            usage.push_str(&format!(
                ",\"thoughtsTokenCount\": {}",
                self.thoughts_tokens
            ));
        }
        usage.push_str(",\"serviceTier\": \"standard\"}");
        usage
    }

    fn chunk(&self, parts: &[String], last: bool) -> String {
        let mut candidate = format!(
            "{{\"content\": {{\"parts\": [{}],\"role\": \"model\"}}",
            parts.join(",")
        );
        if last {
            let reason = self.finish_reason.as_deref().unwrap_or("STOP");
            candidate.push_str(&format!(",\"finishReason\": {}", wire(reason)));
        }
        candidate.push_str(",\"index\": 0");
        if last && let Some(grounding) = &self.grounding {
            candidate.push_str(&format!(",\"groundingMetadata\": {}", wire(grounding)));
        }
        candidate.push('}');
        sse(&format!(
            "{{\"candidates\": [{candidate}],\"usageMetadata\": {},\"modelVersion\": {},\"responseId\": {}}}",
            self.usage_metadata(),
            wire(&self.model_version),
            wire(&self.response_id)
        ))
    }

    /// Every SSE frame of the turn, in order, each ending in `\r\n\r\n`.
    /// Take a prefix of these to script a stream that stops short.
    pub fn frames(&self) -> Vec<String> {
        let empty = [String::from("{\"text\": \"\"}")];
        if self.chunks.is_empty() {
            return vec![self.chunk(&empty, true)];
        }
        let last = self.chunks.len() - 1;
        self.chunks
            .iter()
            .enumerate()
            .map(|(at, parts)| self.chunk(parts, at == last))
            .collect()
    }

    /// Every frame but without a `finishReason` anywhere: a stream the
    /// server ended before the model finished.
    pub fn unfinished_frames(&self) -> Vec<String> {
        self.chunks
            .iter()
            .map(|parts| self.chunk(parts, false))
            .collect()
    }

    /// The whole body as one string.
    pub fn body(&self) -> String {
        self.frames().concat()
    }

    /// A `200` response that writes each frame as its own chunk, as Gemini
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

/// One SSE frame as Gemini ends it: `data: DATA\r\n\r\n`.
pub fn sse(data: &str) -> String {
    format!("data: {data}\r\n\r\n")
}

/// A value as the Gemini API writes JSON: `": "` after keys, no space
/// after `,`, and `<`, `>`, `&` as `\u003c`, `\u003e`, `\u0026`.
pub fn wire<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, GoogleFormatter);
    if value.serialize(&mut serializer).is_err() {
        return "null".into();
    }
    String::from_utf8(out).unwrap_or_else(|_| "null".into())
}

/// serde_json's compact form, with Google's spacing and escapes.
struct GoogleFormatter;

impl serde_json::ser::Formatter for GoogleFormatter {
    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (at, byte) in fragment.bytes().enumerate() {
            let escape: &[u8] = match byte {
                b'<' => b"\\u003c",
                b'>' => b"\\u003e",
                b'&' => b"\\u0026",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..at])?;
            writer.write_all(escape)?;
            start = at + 1;
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// Google's status name for an HTTP status.
fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// Google's error body for `status`, pretty-printed as the API sends it.
pub fn error_body(status: u16, message: &str) -> String {
    format!(
        "{{\n  \"error\": {{\n    \"code\": {status},\n    \"message\": {},\n    \"status\": \"{}\"\n  }}\n}}\n",
        wire(message),
        status_name(status)
    )
}

/// An error status with Google's error body, e.g. `error_response(429,
/// "Resource has been exhausted (e.g. check quota).")`.
pub fn error_response(status: u16, message: &str) -> ScriptedResponse {
    ScriptedResponse {
        status,
        headers: vec![(
            "content-type".into(),
            "application/json; charset=UTF-8".into(),
        )],
        chunks: vec![error_body(status, message).into()],
        chunk_delay: std::time::Duration::ZERO,
        close_early: false,
    }
}

/// An error in the stream after the `200`: `data: {"error": {…}}`.
pub fn error_frame(status: u16, message: &str) -> String {
    sse(&format!(
        "{{\"error\": {{\"code\": {status},\"message\": {},\"status\": \"{}\"}}}}",
        wire(message),
        status_name(status)
    ))
}

/// A [`MockSseServer`] for the Gemini adapter.
pub struct MockGeminiServer {
    server: MockSseServer,
}

impl MockGeminiServer {
    /// Starts a server answering requests with `responses` in order (see
    /// [`GeminiTurn::into_response`], [`error_response`]).
    pub async fn start(
        responses: impl IntoIterator<Item = ScriptedResponse>,
    ) -> std::io::Result<Self> {
        Ok(MockGeminiServer {
            server: MockSseServer::start(responses).await?,
        })
    }

    /// The base URL to give the adapter, with the API version
    /// (`http://127.0.0.1:PORT/v1beta`; the adapter appends
    /// `/models/{model}:streamGenerateContent?alt=sse`).
    pub fn base_url(&self) -> String {
        format!("{}/v1beta", self.server.url())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_written_as_gemini_writes_it() {
        let body = GeminiTurn::new()
            .text("a <b> & c")
            .call(GeminiCall::new("f", serde_json::json!({ "x": 1 })).signed("c2ln"))
            .usage(9, 3)
            .body();
        assert_eq!(
            body,
            concat!(
                "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a \\u003cb\\u003e \\u0026 c\"}],\"role\": \"model\"},\"index\": 0}],",
                "\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 3,\"totalTokenCount\": 12,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 9}],\"serviceTier\": \"standard\"},",
                "\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"uCdRasy1POqHz7IPsuT-kAs\"}\r\n\r\n",
                "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\",\"args\": {\"x\": 1}},\"thoughtSignature\": \"c2ln\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],",
                "\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 3,\"totalTokenCount\": 12,\"promptTokensDetails\": [{\"modality\": \"TEXT\",\"tokenCount\": 9}],\"serviceTier\": \"standard\"},",
                "\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"uCdRasy1POqHz7IPsuT-kAs\"}\r\n\r\n",
            )
        );
    }

    #[test]
    fn an_error_body_is_googles() {
        assert_eq!(
            error_body(429, "Quota exceeded."),
            "{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"Quota exceeded.\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n"
        );
    }
}
