//! A real HTTP server on 127.0.0.1 that answers each request with the next
//! scripted response, streaming its body chunk by chunk, byte for byte. The
//! provider mocks build their SSE bodies on top of it; adapters are tested
//! over the wire, not against an in-process fake.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct ScriptedResponse {
    /// The HTTP status.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// The body, in the chunks it is written in.
    pub chunks: Vec<Bytes>,
    /// A pause before each chunk.
    pub chunk_delay: Duration,
    /// Break the connection after the chunks instead of ending the body.
    pub close_early: bool,
}

impl ScriptedResponse {
    /// A `200 text/event-stream` response written in `chunks`.
    pub fn sse<I, C>(chunks: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: Into<Bytes>,
    {
        ScriptedResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: chunks.into_iter().map(Into::into).collect(),
            chunk_delay: Duration::ZERO,
            close_early: false,
        }
    }

    /// An error response with a JSON body.
    pub fn error(status: u16, body: Value) -> Self {
        ScriptedResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![Bytes::from(body.to_string())],
            chunk_delay: Duration::ZERO,
            close_early: false,
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Pauses before each chunk.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Breaks the connection after the last chunk (the headers and chunks
    /// are on the wire first, so the client sees a stream that stops).
    pub fn closing_early(mut self) -> Self {
        self.close_early = true;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, usually.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` if it is not JSON).
    pub body: Value,
    /// The body as sent, byte for byte (lossy UTF-8): where the order of
    /// members matters, which `body` cannot show.
    pub raw_body: String,
}

impl RecordedRequest {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

#[derive(Default)]
struct State {
    responses: VecDeque<ScriptedResponse>,
    requests: Vec<RecordedRequest>,
}

/// The server. Stops when dropped.
pub struct MockSseServer {
    address: SocketAddr,
    state: Arc<Mutex<State>>,
    _shutdown: oneshot::Sender<()>,
}

impl MockSseServer {
    /// Starts a server on a free port of 127.0.0.1 that answers requests
    /// with `responses` in order (and 500 once they run out).
    pub async fn start(
        responses: impl IntoIterator<Item = ScriptedResponse>,
    ) -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            responses: responses.into_iter().collect(),
            requests: Vec::new(),
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let shared = state.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = shared.clone();
                async move { answer(&state, method, uri, headers, body) }
            },
        );
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = server.await {
                eprintln!("mock server stopped: {error}");
            }
        });
        Ok(MockSseServer {
            address,
            state,
            _shutdown: shutdown,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state
            .lock()
            .map(|state| state.requests.clone())
            .unwrap_or_default()
    }
}

fn answer(
    state: &Mutex<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let scripted = match state.lock() {
        Ok(mut state) => {
            state.requests.push(RecordedRequest {
                method: method.to_string(),
                path: uri.to_string(),
                headers: headers
                    .iter()
                    .map(|(name, value)| {
                        (name.to_string(), value.to_str().unwrap_or("").to_owned())
                    })
                    .collect(),
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                raw_body: String::from_utf8_lossy(&body).into_owned(),
            });
            state.responses.pop_front()
        }
        Err(_) => None,
    };
    let Some(scripted) = scripted else {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from("no scripted response left"))
            .unwrap_or_default();
    };
    let delay = scripted.chunk_delay;
    let close_early = scripted.close_early;
    let chunks = futures_util::stream::iter(scripted.chunks)
        .then(move |chunk| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok::<Bytes, std::io::Error>(chunk)
        })
        .chain(
            futures_util::stream::iter(close_early.then_some(())).then(|()| async {
                // Let the status line and the chunks reach the socket first: an
                // immediate error could abort the response before its headers,
                // which a client sees as a failed request, not a broken stream.
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(std::io::Error::other("scripted early close"))
            }),
        );
    let mut response = Response::builder().status(scripted.status);
    for (name, value) in &scripted.headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(chunks)).unwrap_or_default()
}

/// How many requests a [`MockSseServer::start_responding`] server keeps
/// for [`MockSseServer::requests`]: it may serve forever, so only the
/// latest are kept.
const KEPT_REQUESTS: usize = 256;

impl MockSseServer {
    /// Starts a server on a free port of 127.0.0.1 that answers every
    /// request with what `respond` makes of it, for as long as it runs:
    /// for a mock that serves the same conversation to every client that
    /// comes (`respond` picks the turn from the request it is given).
    /// Only the latest requests are kept for [`MockSseServer::requests`].
    pub async fn start_responding<F>(respond: F) -> std::io::Result<Self>
    where
        F: Fn(&RecordedRequest) -> ScriptedResponse + Send + Sync + 'static,
    {
        let state = Arc::new(Mutex::new(State::default()));
        let respond = Arc::new(respond);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let shared = state.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = shared.clone();
                let respond = respond.clone();
                async move {
                    let request = record(method, uri, &headers, &body);
                    let scripted = respond(&request);
                    if let Ok(mut state) = state.lock() {
                        if state.requests.len() >= KEPT_REQUESTS {
                            state.requests.remove(0);
                        }
                        state.requests.push(request);
                    }
                    streamed(scripted)
                }
            },
        );
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = server.await {
                eprintln!("mock server stopped: {error}");
            }
        });
        Ok(MockSseServer {
            address,
            state,
            _shutdown: shutdown,
        })
    }
}

/// A request as [`RecordedRequest`] keeps it.
fn record(method: Method, uri: Uri, headers: &HeaderMap, body: &Bytes) -> RecordedRequest {
    RecordedRequest {
        method: method.to_string(),
        path: uri.to_string(),
        headers: headers
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or("").to_owned()))
            .collect(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
        raw_body: String::from_utf8_lossy(body).into_owned(),
    }
}

/// `scripted` written as the response, chunk by chunk (what the queue
/// server's answer does, for the responding server).
fn streamed(scripted: ScriptedResponse) -> Response {
    let delay = scripted.chunk_delay;
    let close_early = scripted.close_early;
    let chunks = futures_util::stream::iter(scripted.chunks)
        .then(move |chunk| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok::<Bytes, std::io::Error>(chunk)
        })
        .chain(
            futures_util::stream::iter(close_early.then_some(())).then(|()| async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(std::io::Error::other("scripted early close"))
            }),
        );
    let mut response = Response::builder().status(scripted.status);
    for (name, value) in &scripted.headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(chunks)).unwrap_or_default()
}
