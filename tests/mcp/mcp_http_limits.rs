//! The limits of `aptix::mcp`'s Streamable HTTP server against hostile
//! peers: raw TCP clients that send a request body slowly, open HTTP/2
//! connections and never use them, connect and say nothing, hold SSE
//! streams, or open many connections from one address. Each test runs the
//! server with small limits, checks the limit's own behaviour (the peer's
//! socket is closed, a `408` or `503`), and that a polite client is served
//! while the hostile peers are connected.
//!
//! Waits are bounded by generous timeouts that only fail a test when
//! something hangs; nothing here measures how long a limit took.

use crate::hello_world;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use aptix::Catalog;
use aptix::mcp::{HttpServer, McpServer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Long enough that only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(20);

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

async fn bind(server: McpServer) -> HttpServer {
    server
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("the server could not bind: {error}"))
}

async fn shutdown(server: HttpServer) {
    tokio::time::timeout(PATIENCE, server.shutdown())
        .await
        .unwrap_or_else(|_| panic!("the server did not shut down"))
        .unwrap_or_else(|error| panic!("{error}"));
}

/// A new connection to the server.
async fn connect(server: &HttpServer) -> TcpStream {
    TcpStream::connect(server.local_addr())
        .await
        .unwrap_or_else(|error| panic!("connecting: {error}"))
}

async fn send(stream: &mut TcpStream, bytes: &[u8]) {
    stream
        .write_all(bytes)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

/// Everything the server sends until it closes (or resets) the connection;
/// `None` when it is still open after `within`.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let read = async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(received)
}

/// The response head (status line and headers) the server sends on
/// `stream`; panics when none comes.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let read = async {
        let mut byte = [0u8; 1];
        while !received.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(0) | Err(_) => break,
                Ok(_) => received.push(byte[0]),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("no response head"));
    String::from_utf8_lossy(&received).into_owned()
}

fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "polite", "version": "0"}
        }
    })
    .to_string()
}

/// A polite client's `initialize` on a new connection (HTTP/2 with prior
/// knowledge when `h2`); the status and the session id. Panics when no
/// answer comes.
async fn polite_initialize_over(server: &HttpServer, h2: bool) -> (u16, Option<String>) {
    polite_initialize_at(&server.url(), h2).await
}

async fn polite_initialize_at(url: &str, h2: bool) -> (u16, Option<String>) {
    let mut client = crate::common::http_client_builder();
    if h2 {
        client = client.http2_prior_knowledge();
    }
    let client = client.build().unwrap_or_else(|error| panic!("{error}"));
    let request = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(initialize_body())
        .send();
    let response = tokio::time::timeout(PATIENCE, request)
        .await
        .unwrap_or_else(|_| {
            panic!("a polite initialize got no answer while hostile peers held the server")
        })
        .unwrap_or_else(|error| panic!("a polite initialize failed: {error}"));
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), session)
}

async fn polite_initialize(server: &HttpServer) -> (u16, Option<String>) {
    polite_initialize_over(server, false).await
}

fn status_of(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or_default()
}

#[tokio::test]
async fn a_body_that_never_arrives_gets_408_and_frees_its_connection() {
    let server = bind(
        McpServer::new(catalog())
            .max_connections(4)
            .request_body_timeout(Duration::from_millis(300)),
    )
    .await;
    let port = server.local_addr().port();
    // Whole headers, then 10 of 1000 body bytes, on every connection slot.
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut stream = connect(&server).await;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: 1000\r\n\r\n{{\"jsonrpc\""
        );
        send(&mut stream, request.as_bytes()).await;
        slow.push(stream);
    }
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    for stream in &mut slow {
        let answer = read_until_closed(stream, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("a request whose body never ends still held open"));
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    }
    shutdown(server).await;
}

#[tokio::test]
async fn the_body_size_limit_still_answers_413() {
    // A body timeout well beyond the test: the 413 is rmcp's size limit.
    let server =
        bind(McpServer::new(catalog()).request_body_timeout(Duration::from_secs(60))).await;
    let port = server.local_addr().port();
    let mut stream = connect(&server).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        5 << 20
    );
    send(&mut stream, head.as_bytes()).await;
    // One byte past rmcp's 4 MiB, and no more: the server reads all of it,
    // so closing the connection after the answer cannot reset it.
    send(&mut stream, &vec![b' '; (4 << 20) + 1]).await;
    let answer = read_head(&mut stream).await;
    assert_eq!(status_of(&answer), "413", "{answer}");
    shutdown(server).await;
}

/// The HTTP/2 client connection preface, then an empty SETTINGS frame.
const H2_PREFACE_AND_SETTINGS: &[u8] =
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// The frame types (and flags) of the HTTP/2 frames in `bytes`, which are
/// what a server sends after the client's preface.
fn h2_frames(bytes: &[u8]) -> Vec<(u8, u8)> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let length = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
        frames.push((rest[3], rest[4]));
        rest = rest.get(9 + length..).unwrap_or_default();
    }
    frames
}

const H2_PING: u8 = 0x6;
const H2_GOAWAY: u8 = 0x7;

#[tokio::test]
async fn an_http2_peer_that_never_answers_pings_is_dropped() {
    // The idle timeout is beyond the test: only the pings can end these.
    let server = bind(
        McpServer::new(catalog())
            .max_connections(4)
            .idle_timeout(Duration::from_secs(600))
            .http2_keep_alive_interval(Duration::from_millis(200))
            .http2_keep_alive_timeout(Duration::from_millis(200)),
    )
    .await;
    let mut silent = Vec::new();
    for _ in 0..4 {
        let mut stream = connect(&server).await;
        send(&mut stream, H2_PREFACE_AND_SETTINGS).await;
        silent.push(stream);
    }
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    for stream in &mut silent {
        let frames = read_until_closed(stream, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("an HTTP/2 peer that never answers pings still held open"));
        let frames = h2_frames(&frames);
        assert!(
            frames.contains(&(H2_PING, 0)),
            "closed without a ping: {frames:?}"
        );
    }
    shutdown(server).await;
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_gracefully() {
    // Pings beyond the test: only the idle timeout can end these.
    let server = bind(
        McpServer::new(catalog())
            .max_connections(4)
            .idle_timeout(Duration::from_millis(300))
            .http2_keep_alive_interval(Duration::from_secs(600)),
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut stream = connect(&server).await;
        send(&mut stream, H2_PREFACE_AND_SETTINGS).await;
        idle.push(stream);
    }
    // A polite HTTP/2 client is served beside them.
    let (status, _) = polite_initialize_over(&server, true).await;
    assert_eq!(status, 200);
    for stream in &mut idle {
        let frames = read_until_closed(stream, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("an idle HTTP/2 connection still held open"));
        let frames = h2_frames(&frames);
        assert!(
            frames.iter().any(|(kind, _)| *kind == H2_GOAWAY),
            "closed without GOAWAY: {frames:?}"
        );
    }
    shutdown(server).await;
}

#[tokio::test]
async fn a_connection_that_never_sends_a_request_is_closed() {
    // The header timeout is beyond the test: it never starts on these, as
    // the server cannot yet tell HTTP/1 from HTTP/2.
    let server = bind(
        McpServer::new(catalog())
            .max_connections(4)
            .header_read_timeout(Duration::from_secs(600))
            .idle_timeout(Duration::from_millis(300)),
    )
    .await;
    let mut hostile = Vec::new();
    for _ in 0..2 {
        // Nothing at all.
        hostile.push(connect(&server).await);
        // All of the HTTP/2 preface but its last byte.
        let mut stream = connect(&server).await;
        send(&mut stream, &H2_PREFACE_AND_SETTINGS[..23]).await;
        hostile.push(stream);
    }
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    for stream in &mut hostile {
        read_until_closed(stream, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("a connection that never sent a request still held open"));
    }
    shutdown(server).await;
}

#[tokio::test]
async fn a_peer_that_reads_nothing_is_dropped() {
    // Other timeouts beyond the test: only the write timeout can end it.
    let server = bind(
        McpServer::new(catalog())
            .max_connections(1)
            .header_read_timeout(Duration::from_secs(600))
            .idle_timeout(Duration::from_secs(600))
            .write_timeout(Duration::from_millis(300)),
    )
    .await;
    // Pipelined requests (each answered 403 for its host) whose answers
    // the peer never reads, through a small receive window.
    let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|error| panic!("{error}"));
    socket
        .set_recv_buffer_size(4096)
        .unwrap_or_else(|error| panic!("{error}"));
    let mut stream = socket
        .connect(server.local_addr())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let requests =
        b"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 0\r\n\r\n".repeat(1000);
    let writer = tokio::spawn(async move {
        // Until the server drops the connection (a few MiB of answers fill
        // the buffers long before the end).
        for _ in 0..1000 {
            if stream.write_all(&requests).await.is_err() {
                return true;
            }
        }
        false
    });
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    let dropped = tokio::time::timeout(PATIENCE, writer)
        .await
        .unwrap_or_else(|_| panic!("a peer that reads nothing still held open"))
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(
        dropped,
        "the server read 40 MiB of requests without answering them"
    );
    shutdown(server).await;
}

/// A session that finished its handshake; its id.
async fn initialized_session(server: &HttpServer) -> String {
    initialized_session_at(&server.url()).await
}

async fn initialized_session_at(url: &str) -> String {
    let (status, session) = polite_initialize_at(url, false).await;
    assert_eq!(status, 200);
    let session = session.unwrap_or_else(|| panic!("no session id"));
    let status = crate::common::http_client()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"))
        .status();
    assert_eq!(status, 202);
    session
}

/// A raw SSE `GET` for `session`; the connection, its response head read.
async fn open_stream(server: &HttpServer, session: &str, close: bool) -> (TcpStream, String) {
    let port = server.local_addr().port();
    open_stream_at(SocketAddr::from(([127, 0, 0, 1], port)), session, close).await
}

/// The same, to `address` (and with it as `Host`).
async fn open_stream_at(address: SocketAddr, session: &str, close: bool) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(address)
        .await
        .unwrap_or_else(|error| panic!("connecting to {address}: {error}"));
    let connection = if close { "Connection: close\r\n" } else { "" };
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\
         mcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n{connection}\r\n"
    );
    send(&mut stream, request.as_bytes()).await;
    let head = read_head(&mut stream).await;
    (stream, head)
}

#[tokio::test]
async fn sse_streams_cannot_take_every_connection() {
    let server = bind(
        McpServer::new(catalog())
            .max_connections(4)
            .max_sse_streams(100),
    )
    .await;
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(initialized_session(&server).await);
    }
    // Half of the 4 connections at most: two streams, then 503s.
    let mut held = Vec::new();
    for session in &sessions[..2] {
        let (stream, head) = open_stream(&server, session, false).await;
        assert_eq!(status_of(&head), "200", "{head}");
        held.push(stream);
    }
    for session in &sessions[2..] {
        let (mut stream, head) = open_stream(&server, session, false).await;
        assert_eq!(
            status_of(&head),
            "503",
            "a third SSE stream beside two (4 connections, so 2 streams) was accepted: {head}"
        );
        assert!(head.to_ascii_lowercase().contains("retry-after:"), "{head}");
        // The refused stream's connection is closed, not left to idle.
        read_until_closed(&mut stream, PATIENCE)
            .await
            .unwrap_or_else(|| panic!("a refused stream's connection still held open"));
    }
    // Requests are still served beside the two streams.
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    // A stream that ends gives its place back.
    drop(held.pop());
    let reopened = async {
        loop {
            let (stream, head) = open_stream(&server, &sessions[3], false).await;
            if status_of(&head) == "200" {
                break stream;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _reopened = tokio::time::timeout(PATIENCE, reopened)
        .await
        .unwrap_or_else(|_| panic!("a closed stream never gave its place back"));
    drop(held);
    shutdown(server).await;
}

#[tokio::test]
async fn a_stream_budget_of_zero_refuses_every_stream() {
    let server = bind(McpServer::new(catalog()).max_sse_streams(0)).await;
    let session = initialized_session(&server).await;
    let (_stream, head) = open_stream(&server, &session, false).await;
    assert_eq!(status_of(&head), "503", "{head}");
    shutdown(server).await;
}

#[tokio::test]
async fn closing_a_session_ends_its_sse_streams() {
    let server =
        bind(McpServer::new(catalog()).uninitialized_session_timeout(Duration::from_millis(300)))
            .await;
    // A session that never sends `initialized`: closed after its short
    // life, and its stream with it.
    let (status, session) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    let session = session.unwrap_or_else(|| panic!("no session id"));
    let (mut stream, head) = open_stream(&server, &session, true).await;
    assert_eq!(status_of(&head), "200", "{head}");
    read_until_closed(&mut stream, PATIENCE)
        .await
        .unwrap_or_else(|| panic!("the stream of an expired session is still open"));
    // A session its client closes (DELETE).
    let session = initialized_session(&server).await;
    let (mut stream, head) = open_stream(&server, &session, true).await;
    assert_eq!(status_of(&head), "200", "{head}");
    let deleted = crate::common::http_client()
        .delete(server.url())
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(deleted.status().is_success(), "{}", deleted.status());
    read_until_closed(&mut stream, PATIENCE)
        .await
        .unwrap_or_else(|| panic!("the stream of a deleted session is still open"));
    shutdown(server).await;
}

/// An IPv4 address of this machine other than loopback, if it has one:
/// the address it would send from to a documentation-only address (a UDP
/// "connection" sends nothing).
fn non_loopback_address() -> Option<IpAddr> {
    ["198.51.100.1:9", "203.0.113.1:9"]
        .into_iter()
        .find_map(|far| {
            let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
            socket.connect(far).ok()?;
            socket.local_addr().ok()
        })
        .map(|address| address.ip())
        .filter(|address| !address.is_loopback() && !address.is_unspecified())
}

/// An address of this machine other than loopback, for a hostile peer
/// that a per-peer limit applies to (loopback peers are exempt); `None`,
/// with a notice, when there is none (a failure under `CI=true`).
fn hostile_peer_address(what: &str) -> Option<IpAddr> {
    let peer = non_loopback_address();
    if peer.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("this machine has no address other than loopback to test {what}");
        }
        eprintln!("notice: no address other than loopback; {what} is not tested");
    }
    peer
}

#[tokio::test]
async fn one_peer_cannot_hold_every_connection() {
    // Loopback peers are not limited (every local client is 127.0.0.1), so
    // the hostile peer connects through another address of this machine.
    let Some(peer) = hostile_peer_address("the per-peer limit") else {
        return;
    };
    // Timeouts beyond the test: only the per-peer limit acts.
    let server = McpServer::new(catalog())
        .allow_host(peer.to_string())
        .max_connections(4)
        .max_connections_per_peer(2)
        .header_read_timeout(Duration::from_secs(600))
        .idle_timeout(Duration::from_secs(600))
        .bind_http(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let port = server.local_addr().port();
    let connect = || async {
        TcpStream::connect((peer, port))
            .await
            .unwrap_or_else(|error| panic!("connecting to {peer}: {error}"))
    };
    let mut kept = Vec::new();
    for _ in 0..2 {
        kept.push(connect().await);
    }
    for _ in 0..3 {
        let mut refused = connect().await;
        read_until_closed(&mut refused, PATIENCE)
            .await
            .unwrap_or_else(|| {
                panic!("a third connection from one peer (limit 2) still held open")
            });
    }
    // A local client is served beside them.
    let polite = format!("http://127.0.0.1:{port}/mcp");
    let (status, _) = polite_initialize_at(&polite, false).await;
    assert_eq!(status, 200);
    // The peer's first two connections are served.
    for stream in &mut kept {
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {peer}:{port}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{}",
            initialize_body().len(),
            initialize_body()
        );
        send(stream, request.as_bytes()).await;
        let head = read_head(stream).await;
        assert_eq!(status_of(&head), "200", "{head}");
    }
    drop(kept);
    shutdown(server).await;
}

#[tokio::test]
async fn loopback_peers_are_not_limited_per_peer() {
    let server = bind(
        McpServer::new(catalog())
            .max_connections(8)
            .max_connections_per_peer(1),
    )
    .await;
    // Two local connections at once: both served.
    let mut held = connect(&server).await;
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    send(
        &mut held,
        b"GET /mcp HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    let head = read_head(&mut held).await;
    assert_eq!(status_of(&head), "403", "{head}");
    shutdown(server).await;
}

#[tokio::test]
async fn ipv6_loopback_peers_are_not_limited_per_peer() {
    // `::1` is loopback as `127.0.0.1` is, although its /64 (`::`) is not.
    let Ok(server) = McpServer::new(catalog())
        .max_connections(8)
        .max_connections_per_peer(1)
        .bind_http("[::1]:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
    else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("this machine has no IPv6 loopback to test its exemption");
        }
        eprintln!("notice: no IPv6 loopback; its per-peer exemption is not tested");
        return;
    };
    // One local connection held, then a polite local client: both served.
    let mut held = connect(&server).await;
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    send(
        &mut held,
        b"GET /mcp HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    let head = read_head(&mut held).await;
    assert_eq!(status_of(&head), "403", "{head}");
    shutdown(server).await;
}

/// The status of a `ping` in `session`: 200 while the session is open, 404
/// once it is closed.
async fn ping_at(url: &str, session: &str) -> u16 {
    let request = crate::common::http_client()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .send();
    tokio::time::timeout(PATIENCE, request)
        .await
        .unwrap_or_else(|_| panic!("a ping got no answer"))
        .unwrap_or_else(|error| panic!("a ping failed: {error}"))
        .status()
        .as_u16()
}

#[tokio::test]
async fn one_client_cannot_take_every_session() {
    // One local client opens every session and initializes each, so that
    // none expires as uninitialized (red team H2, with a cap of 4). Its
    // sessions are idle at once: the red team's waited 31 s.
    let server = bind(
        McpServer::new(catalog())
            .max_sessions(4)
            .session_eviction_min_idle(Duration::ZERO),
    )
    .await;
    let url = server.url();
    let mut hog = Vec::new();
    for _ in 0..4 {
        hog.push(initialized_session(&server).await);
    }
    // Its second and fourth are used again since: the first is the least
    // recently used.
    for session in [&hog[1], &hog[3], &hog[2]] {
        assert_eq!(ping_at(&url, session).await, 200);
    }
    let (status, session) = polite_initialize(&server).await;
    assert_eq!(
        status, 200,
        "one client holding every session (the cap) locks every other client out"
    );
    assert!(session.is_some());
    // The least recently used session made room; the others are open.
    assert_eq!(ping_at(&url, &hog[0]).await, 404);
    for session in &hog[1..] {
        assert_eq!(ping_at(&url, session).await, 200);
    }
    shutdown(server).await;
}

#[tokio::test]
async fn a_session_in_use_is_never_closed_to_make_room() {
    let server = bind(
        McpServer::new(catalog())
            .max_sessions(2)
            .session_eviction_min_idle(Duration::ZERO),
    )
    .await;
    let url = server.url();
    let first = initialized_session(&server).await;
    let second = initialized_session(&server).await;
    // The first, least recently used, has an SSE stream open: the second
    // makes room.
    let (_first_stream, head) = open_stream(&server, &first, false).await;
    assert_eq!(status_of(&head), "200", "{head}");
    let third = initialized_session(&server).await;
    assert_eq!(ping_at(&url, &second).await, 404);
    assert_eq!(ping_at(&url, &first).await, 200);
    // Every session in use: a new one is refused.
    let (_third_stream, head) = open_stream(&server, &third, false).await;
    assert_eq!(status_of(&head), "200", "{head}");
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 503, "a session in use was closed to make room");
    shutdown(server).await;
}

#[tokio::test]
async fn one_peer_cannot_hold_every_session() {
    // The hostile peer connects through another address of this machine
    // (loopback peers are not limited per peer).
    let Some(peer) = hostile_peer_address("the per-peer session cap") else {
        return;
    };
    // A global cap beyond the test: only the per-peer cap acts.
    let server = McpServer::new(catalog())
        .allow_host(peer.to_string())
        .max_sessions(100)
        .max_sessions_per_peer(2)
        .session_eviction_min_idle(Duration::ZERO)
        .bind_http(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let port = server.local_addr().port();
    let remote = format!("http://{peer}:{port}/mcp");
    let local = format!("http://127.0.0.1:{port}/mcp");
    // A local session, older than all of the peer's.
    let polite = initialized_session_at(&local).await;
    let mut hog = Vec::new();
    for _ in 0..4 {
        hog.push(initialized_session_at(&remote).await);
    }
    // The peer keeps its two most recent sessions; each new one beyond
    // closed its own least recently used.
    assert_eq!(ping_at(&remote, &hog[0]).await, 404);
    assert_eq!(ping_at(&remote, &hog[1]).await, 404);
    assert_eq!(ping_at(&remote, &hog[2]).await, 200);
    assert_eq!(ping_at(&remote, &hog[3]).await, 200);
    assert_eq!(ping_at(&local, &polite).await, 200);
    // Each of its sessions in use: the peer's next one is refused.
    let mut streams = Vec::new();
    for session in &hog[2..] {
        let (stream, head) = open_stream_at(SocketAddr::new(peer, port), session, false).await;
        assert_eq!(status_of(&head), "200", "{head}");
        streams.push(stream);
    }
    let (status, _) = polite_initialize_at(&remote, false).await;
    assert_eq!(status, 429, "a peer got a session beyond its cap");
    // A local client is still served.
    let (status, _) = polite_initialize_at(&local, false).await;
    assert_eq!(status, 200);
    drop(streams);
    shutdown(server).await;
}

#[tokio::test]
async fn a_recently_used_session_is_not_closed_to_make_room() {
    let server = bind(
        McpServer::new(catalog())
            .max_sessions(2)
            .session_eviction_min_idle(Duration::from_secs(600)),
    )
    .await;
    let url = server.url();
    let sessions = [
        initialized_session(&server).await,
        initialized_session(&server).await,
    ];
    let (status, session) = polite_initialize(&server).await;
    assert_eq!(status, 503, "a session used a moment ago was closed");
    assert!(session.is_none());
    for session in &sessions {
        assert_eq!(ping_at(&url, session).await, 200);
    }
    // Closing one makes room.
    let deleted = crate::common::http_client()
        .delete(&url)
        .header("mcp-session-id", &sessions[0])
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    shutdown(server).await;
}

#[tokio::test]
async fn a_zero_window_http2_peer_cannot_hold_its_connection() {
    // Every other limit short: none of them ends these connections, as an
    // answer that cannot be sent is in flight, its peer answers pings, and
    // no socket write waits (red team H3). Only the send timeout does.
    let short = Duration::from_millis(300);
    let server = bind(
        McpServer::new(catalog())
            .max_connections(5)
            .response_send_timeout(short)
            .idle_timeout(short)
            .header_read_timeout(short)
            .request_body_timeout(short)
            .write_timeout(short)
            .http2_keep_alive_interval(short)
            .http2_keep_alive_timeout(short),
    )
    .await;
    // One slot: an HTTP/2 SSE stream, open past the send timeout while it
    // waits for events (not to be sent).
    let session = initialized_session(&server).await;
    let events_client = crate::common::http_client_builder()
        .http2_prior_knowledge()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let request = events_client
        .get(server.url())
        .header("Accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send();
    let mut events = tokio::time::timeout(PATIENCE, request)
        .await
        .unwrap_or_else(|_| panic!("no SSE stream"))
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(events.status(), 200);
    // On every other slot, an HTTP/2 peer that lets the server send no
    // byte of any answer's body.
    let mut held = Vec::new();
    for _ in 0..4 {
        let client = crate::common::http_client_builder()
            .http2_prior_knowledge()
            .http2_initial_stream_window_size(0)
            .build()
            .unwrap_or_else(|error| panic!("{error}"));
        let request = client
            .post(server.url())
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(initialize_body())
            .send();
        // The head is not flow-controlled: it comes.
        let response = tokio::time::timeout(PATIENCE, request)
            .await
            .unwrap_or_else(|_| panic!("no response head"))
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(response.status(), 200);
        held.push((client, response));
    }
    let (status, _) = polite_initialize(&server).await;
    assert_eq!(status, 200);
    // Each of their connections was dropped: the body never comes.
    for (_client, response) in held {
        let body = tokio::time::timeout(PATIENCE, response.bytes())
            .await
            .unwrap_or_else(|_| panic!("a zero-window HTTP/2 peer still held its connection"));
        assert!(body.is_err(), "a body was sent through a zero window");
    }
    // The stream, older than they, is still open: closing its session
    // ends it cleanly, where a dropped connection would fail it.
    let deleted = crate::common::http_client()
        .delete(server.url())
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(deleted.status().is_success(), "{}", deleted.status());
    loop {
        match tokio::time::timeout(PATIENCE, events.chunk()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => break,
            Ok(Err(error)) => {
                panic!("the server dropped an SSE stream that waited for events: {error}")
            }
            Err(_) => panic!("the SSE stream of a deleted session is still open"),
        }
    }
    shutdown(server).await;
}
