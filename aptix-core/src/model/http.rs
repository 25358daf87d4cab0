//! HTTP plumbing shared by the streaming adapters: one POST with retries
//! before the first byte, then the response body as Server-Sent Events.
//!
//! Retrying is only safe before any of the answer has been read: after the
//! first byte, a retry could show the user the start of an answer twice, so
//! later failures end the turn instead.

use std::time::Duration;

use std::collections::VecDeque;

use futures_util::{Stream, StreamExt};
use serde_json::Value;

use super::ModelError;
use super::sse::SseDecoder;
use crate::schema::meta_fields::InCallOrder;

/// Time limits and retry policy of a model endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpPolicy {
    /// Connecting to the endpoint.
    pub connect_timeout: Duration,
    /// From sending the request to the response headers.
    pub first_byte_timeout: Duration,
    /// Between two events of the stream.
    pub idle_timeout: Duration,
    /// Retries after a 429, a 5xx or a connection failure, before the first byte.
    pub max_retries: u32,
    /// The first backoff; each retry doubles it (a `Retry-After` header wins).
    pub initial_backoff: Duration,
    /// The longest single wait between retries.
    pub max_backoff: Duration,
    /// The most bytes one server-sent event may hold before its end: an
    /// endpoint that sends one longer is cut off with
    /// [`ModelError::Protocol`] rather than held in memory. Well above any
    /// event a provider sends for a turn within
    /// [`TurnLimits`](super::adapter::TurnLimits) (the Responses API's last
    /// event repeats the whole turn).
    pub max_event_bytes: usize,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        HttpPolicy {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(20),
            max_event_bytes: 16 * 1024 * 1024,
        }
    }
}

/// One Server-Sent Event: its `event:` name (empty when absent) and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The event type.
    pub(crate) event: String,
    /// The data lines, joined.
    pub(crate) data: String,
}

/// Builds a client with the policy's connect timeout.
pub(crate) fn client(policy: &HttpPolicy) -> Result<reqwest::Client, ModelError> {
    crate::https::client_builder()
        .connect_timeout(policy.connect_timeout)
        .build()
        .map_err(|error| ModelError::Config(error.to_string()))
}

/// POSTs `body` to `url` and returns the response's events.
pub(crate) async fn post_sse(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&'static str, String)],
    body: &Value,
    policy: &HttpPolicy,
) -> Result<impl Stream<Item = Result<SseEvent, ModelError>> + Send + use<>, ModelError> {
    let body = request_body(body).map_err(|error| {
        ModelError::Config(format!("the request body cannot be written: {error}"))
    })?;
    let mut attempt = 0;
    let response = loop {
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let outcome = tokio::time::timeout(policy.first_byte_timeout, request.send()).await;
        let retry_after = match outcome {
            Err(_) => return Err(ModelError::Timeout),
            Ok(Err(error))
                if attempt < policy.max_retries && (error.is_connect() || error.is_request()) =>
            {
                let error = transport_error(error, url);
                tracing::warn!(attempt, %error, "model endpoint unreachable; retrying");
                None
            }
            Ok(Err(error)) => return Err(ModelError::Transport(transport_error(error, url))),
            Ok(Ok(response)) if response.status().is_success() => break response,
            Ok(Ok(response)) => {
                let status = response.status();
                let retryable = status.as_u16() == 429 || status.is_server_error();
                if !retryable || attempt >= policy.max_retries {
                    return Err(ModelError::Http {
                        status: status.as_u16(),
                        body: error_body(response, policy.idle_timeout, &secrets_of(headers)).await,
                    });
                }
                tracing::warn!(
                    attempt,
                    status = status.as_u16(),
                    "model endpoint busy; retrying"
                );
                retry_after_of(&response)
            }
        };
        let backoff = policy
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(policy.max_backoff);
        tokio::time::sleep(retry_after.map_or(backoff, |wait| wait.min(policy.max_backoff))).await;
        attempt += 1;
    };
    let secrets = secrets_of(headers).into_iter().map(str::to_owned).collect();
    Ok(events(
        response,
        policy.idle_timeout,
        policy.max_event_bytes,
        secrets,
    ))
}

/// The events of a response body: each within `idle` of the one before
/// (the first, of the request), none longer than `max_event_bytes`, with
/// each of `secrets` (the request's credentials) replaced by `[redacted]`:
/// a provider never sends them back, so one in an event is an echo (an
/// error event of a proxy) that would be shown and logged. The stream ends
/// after its first error.
fn events(
    response: reqwest::Response,
    idle: Duration,
    max_event_bytes: usize,
    secrets: Vec<String>,
) -> impl Stream<Item = Result<SseEvent, ModelError>> + Send + use<> {
    struct Reading<B> {
        body: B,
        decoder: SseDecoder,
        ready: VecDeque<SseEvent>,
        deadline: tokio::time::Instant,
        /// Why the stream ends, once it does: handed out after the events
        /// completed before it.
        failed: Option<ModelError>,
        ended: bool,
        /// The request's credentials, never passed on.
        secrets: Vec<String>,
    }
    let reading = Reading {
        body: Box::pin(response.bytes_stream()),
        decoder: SseDecoder::new(max_event_bytes),
        ready: VecDeque::new(),
        deadline: tokio::time::Instant::now() + idle,
        failed: None,
        ended: false,
        secrets,
    };
    futures_util::stream::unfold(reading, move |mut reading| async move {
        loop {
            if let Some(mut event) = reading.ready.pop_front() {
                reading.deadline = tokio::time::Instant::now() + idle;
                for secret in &reading.secrets {
                    if event.data.contains(secret.as_str()) {
                        event.data = event.data.replace(secret.as_str(), "[redacted]");
                    }
                }
                return Some((Ok(event), reading));
            }
            if let Some(failed) = reading.failed.take() {
                return Some((Err(failed), reading));
            }
            if reading.ended {
                return None;
            }
            match tokio::time::timeout_at(reading.deadline, reading.body.next()).await {
                Err(_) => reading.failed = Some(ModelError::Timeout),
                // An event left unfinished is dropped, as the format says.
                Ok(None) => {}
                Ok(Some(Err(error))) => {
                    reading.failed = Some(ModelError::Transport(error.without_url().to_string()));
                }
                Ok(Some(Ok(chunk))) => match reading.decoder.feed(&chunk, &mut reading.ready) {
                    Ok(()) => continue,
                    Err(error) => reading.failed = Some(ModelError::Protocol(error.to_string())),
                },
            }
            reading.ended = true;
        }
    })
}

/// The most bytes of an error response kept for [`ModelError::Http`].
pub const ERROR_BODY_LIMIT: usize = 4096;

/// The start of an error response's body: at most [`ERROR_BODY_LIMIT`] bytes,
/// read within `within` in all, with every one of `secrets` in it replaced
/// by `[redacted]`. An endpoint (or something in front of it) controls this
/// body, and a body that never ends or never stops must not hold the run or
/// its memory; the rest is dropped with the connection. It is shown to the
/// user and logged, and a proxy may echo the request's credentials in it,
/// so the body is read a secret's length past the limit: a secret that
/// starts within the kept part is whole when it is replaced, never cut in
/// two with its first half shown.
async fn error_body(response: reqwest::Response, within: Duration, secrets: &[&str]) -> String {
    let limit = ERROR_BODY_LIMIT + secrets.iter().map(|secret| secret.len()).max().unwrap_or(0);
    let mut kept = Vec::new();
    let mut chunks = response.bytes_stream();
    let read = async {
        while let Some(Ok(chunk)) = chunks.next().await {
            let room = limit - kept.len();
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if kept.len() == limit {
                break;
            }
        }
    };
    // Whatever arrived before the limit is worth showing, so a timeout is
    // not an error here.
    let _ = tokio::time::timeout(within, read).await;
    drop(chunks);
    let mut body = String::from_utf8_lossy(&kept).into_owned();
    for secret in secrets {
        if body.contains(secret) {
            body = body.replace(secret, "[redacted]");
        }
    }
    if body.len() > ERROR_BODY_LIMIT {
        let mut end = ERROR_BODY_LIMIT;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
    }
    body
}

/// The shortest credential looked for in an error body: a shorter one (a
/// local server's placeholder key) would redact ordinary words.
const MIN_SECRET_BYTES: usize = 8;

/// The credentials among a request's headers (`authorization`, `x-api-key`,
/// `x-goog-api-key`, any header naming a key, token or auth), without an
/// `authorization` scheme such as `Bearer`.
fn secrets_of<'a>(headers: &'a [(&'static str, String)]) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_lowercase();
            ["auth", "key", "token", "secret"]
                .iter()
                .any(|word| name.contains(word))
        })
        .flat_map(|(_, value)| {
            let credential = value
                .split_once(' ')
                .filter(|(scheme, _)| {
                    ["bearer", "basic", "token"].contains(&scheme.to_ascii_lowercase().as_str())
                })
                .map_or(value.as_str(), |(_, credential)| credential);
            [value.as_str(), credential.trim()]
        })
        .filter(|secret| secret.len() >= MIN_SECRET_BYTES)
        .collect()
}

/// The most characters of a peer's words (an error event's message, a
/// reason no API has) an adapter quotes in what it shows or logs.
pub(crate) const QUOTE_LIMIT: usize = 1024;

/// At most `limit` characters of `text`, which a peer wrote: an ellipsis
/// says when more was left out.
pub(crate) fn quoted(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A transport error as shown and logged: naming the endpoint without the
/// credentials its URL may carry, which reqwest's own message would show.
fn transport_error(error: reqwest::Error, url: &str) -> String {
    format!("{} ({})", error.without_url(), shown_url(url))
}

/// `url` as it may be shown and logged: without the credentials it may
/// carry (a proxy's `user:password@`, a `key=` in its query).
pub(crate) fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "the model endpoint".to_owned(),
    }
}

fn retry_after_of(response: &reqwest::Response) -> Option<Duration> {
    response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// The request body as sent, written once: the schemas (`tools` and
/// `response_format`) with their meta fields in call order (`_tool` first,
/// `_output` last), since constrained decoders make the model write members
/// in the order the schema lists them; everything else as it is. The
/// conversation is data: a past call's arguments holding a `required` list
/// must reach the model as the model made it, not sorted as a schema's.
fn request_body(body: &Value) -> Result<Vec<u8>, serde_json::Error> {
    /// The body's members, the schemas among them in call order.
    struct Body<'a>(&'a serde_json::Map<String, Value>);
    impl serde::Serialize for Body<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(Some(self.0.len()))?;
            for (key, value) in self.0 {
                if key == "tools" || key == "response_format" {
                    map.serialize_entry(key, &InCallOrder(value))?;
                } else {
                    map.serialize_entry(key, value)?;
                }
            }
            map.end()
        }
    }
    match body {
        Value::Object(members) => serde_json::to_vec(&Body(members)),
        other => serde_json::to_vec(other),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The conversation is data, not schema: a past call whose arguments
    /// hold a `required` list goes back to the model as it was made (and
    /// ran), while the tools' schemas beside it are in call order.
    #[test]
    fn only_the_schemas_of_a_request_are_written_in_call_order() {
        let body = json!({
            "messages": [{"role": "assistant", "content": [{
                "type": "tool_use", "id": "t1", "name": "form",
                "input": {"required": ["zip", "name"], "_tool": "x"}
            }]}],
            "tools": [{"name": "form", "input_schema": {
                "properties": {"zip": {}, "_tool": {}},
                "required": ["zip", "_tool"]
            }}],
            "response_format": {"json_schema": {"schema": {
                "properties": {"_output": {}, "_tool": {}},
                "required": ["_output", "_tool"]
            }}}
        });
        let sent = String::from_utf8(request_body(&body).unwrap_or_default()).unwrap_or_default();
        assert!(
            sent.contains(r#""input":{"_tool":"x","required":["zip","name"]}"#),
            "{sent}"
        );
        assert!(
            sent.contains(r#""properties":{"_tool":{},"zip":{}},"required":["_tool","zip"]"#),
            "{sent}"
        );
        assert!(
            sent.contains(
                r#""properties":{"_tool":{},"_output":{}},"required":["_tool","_output"]"#
            ),
            "{sent}"
        );
    }
}
