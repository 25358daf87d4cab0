//! `tools/call` round trips per second of `aptix::mcp` serving
//! `agent_hello_world`, against an rmcp-native server with the same tool
//! (`#[tool_router]` / `#[tool]`, `Parameters<HelloArgs>` → `Json<Greeting>`)
//! measured in the same run, over the same transports, with the same rmcp
//! client. Ratios go in BENCHMARKS.md.
//!
//! Transports:
//!
//! * **duplex**: the stdio transport's framing (newline-delimited JSON-RPC
//!   over a byte stream) on an in-process `tokio::io::duplex` pair: no
//!   system calls, client and server on one runtime.
//! * **pipe**: real stdio. This binary is re-run as the server
//!   (`--serve-aptix-stdio` / `--serve-rmcp-stdio`, each serving on its own
//!   stdin/stdout through the library's ordinary stdio entry point); the
//!   client talks to it over the child's two OS pipes.
//! * **http**: Streamable HTTP over loopback TCP; each server bound on
//!   `127.0.0.1:0` (aptix with `McpServer::bind_http`, rmcp with its
//!   `StreamableHttpService` on axum, as its examples do), the client rmcp's
//!   reqwest transport.
//!
//! One client session per server and transport. Each phase: N sequential
//! round trips (one caller), then K = 8 callers sharing the session. Each
//! server's phase is measured in two halves in the order rmcp, aptix, aptix,
//! rmcp, so that load drifting during the run weighs on both alike.
//!
//! `cargo bench --bench mcp`. Run as a test (`cargo test --all-targets`)
//! every phase makes one round trip per caller instead of measuring.

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::fmt::Display;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aptix::Catalog;
use aptix::mcp::{HttpServer, McpServer};
use hello_world::{Greeting, HelloArgs, HelloWorldTool};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, CallToolResult, ServerCapabilities, ServerConfig};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{Json, Peer, RoleClient, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::{Value, json};
use tokio::net::unix::pipe;

/// How long the phases run.
#[derive(Debug, Clone, Copy)]
struct Windows {
    /// How long each half of a phase is measured (two halves per server).
    half: Duration,
    /// Discarded round trips before each server's phase.
    warm_up: Duration,
}

/// Under `cargo bench` (which passes `--bench`).
const BENCH: Windows = Windows {
    half: Duration::from_millis(1500),
    warm_up: Duration::from_millis(400),
};
/// Run as a test (`cargo test --all-targets`, no `--bench`): every caller
/// makes one round trip per window, so every path runs once and quickly.
const TEST: Windows = Windows {
    half: Duration::ZERO,
    warm_up: Duration::ZERO,
};
/// Concurrent callers in the concurrent phase.
const CONCURRENCY: usize = 8;
/// The child-process modes of this binary.
const APTIX_STDIO_FLAG: &str = "--serve-aptix-stdio";
const RMCP_STDIO_FLAG: &str = "--serve-rmcp-stdio";

fn ok<T, E: Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

// ---------------------------------------------------------------------------
// The rmcp-native server: the same tool, written the way rmcp's docs do.

/// `agent_hello_world` as an rmcp tool router.
#[derive(Debug, Clone)]
struct RmcpHello {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl RmcpHello {
    fn new() -> Self {
        RmcpHello {
            tool_router: Self::tool_router(),
        }
    }

    /// Creates a friendly greeting using the user's name.
    #[tool(
        name = "agent_hello_world",
        description = "Creates a friendly greeting using the user's name.\n\nUsage: Call when the user asks to be greeted or welcomed."
    )]
    async fn hello_world(
        &self,
        Parameters(args): Parameters<HelloArgs>,
    ) -> Result<Json<Greeting>, String> {
        let name = args.name.trim();
        if name.is_empty() {
            return Err("`name` is empty: pass the name of the person to greet.".to_owned());
        }
        Ok(Json(Greeting {
            message: format!("Hello, {name}! Welcome."),
            conversation_id: None,
            session_id: None,
        }))
    }
}

// The router is built once, in `new`, and read from the field: without
// `router = …` the macro calls `Self::tool_router()`, building it anew on
// every call.
#[tool_handler(router = self.tool_router)]
impl ServerHandler for RmcpHello {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn catalog() -> Catalog {
    ok(
        Catalog::builder().tool::<HelloWorldTool>().build(),
        "the catalog",
    )
}

// ---------------------------------------------------------------------------
// Servers and transports.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Rmcp,
    Aptix,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Rmcp => "rmcp-native",
            Server::Aptix => "aptix::mcp",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Server::Rmcp => RMCP_STDIO_FLAG,
            Server::Aptix => APTIX_STDIO_FLAG,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Duplex,
    Pipe,
    Http,
}

impl Transport {
    fn key(self) -> &'static str {
        match self {
            Transport::Duplex => "duplex",
            Transport::Pipe => "pipe",
            Transport::Http => "http",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Transport::Duplex => "stdio framing, in-process duplex",
            Transport::Pipe => "stdio, OS pipes to a child process",
            Transport::Http => "Streamable HTTP, loopback TCP",
        }
    }
}

/// What keeps a server alive, and how it is stopped.
enum Guard {
    Task(tokio::task::JoinHandle<()>),
    Child(Child),
    AptixHttp(HttpServer),
    /// Cancels the service's token (closing its sessions), then the task.
    RmcpHttp(Box<dyn FnOnce() + Send>, tokio::task::JoinHandle<()>),
}

/// One client session with one server.
struct Connection {
    client: RunningService<RoleClient, ()>,
    guard: Guard,
}

impl Connection {
    async fn close(self) {
        let Connection { client, guard } = self;
        // Closing the client closes its end of the transport.
        let _ = client.cancel().await;
        match guard {
            Guard::Task(task) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
            }
            Guard::Child(mut child) => {
                // The child ends when its stdin closes; give it a moment.
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    match child.try_wait() {
                        Ok(Some(_)) => break,
                        Ok(None) if Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        _ => {
                            let _ = child.kill();
                            let _ = child.wait();
                            break;
                        }
                    }
                }
            }
            Guard::AptixHttp(server) => ok(server.shutdown().await, "aptix HTTP shutdown"),
            Guard::RmcpHttp(stop, task) => {
                stop();
                let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
            }
        }
    }
}

async fn connect(server: Server, transport: Transport) -> Connection {
    match transport {
        Transport::Duplex => {
            let (server_io, client_io) = tokio::io::duplex(1 << 16);
            let task = match server {
                Server::Aptix => tokio::spawn(async move {
                    ok(McpServer::new(catalog()).serve_io(server_io).await, "aptix");
                }),
                Server::Rmcp => tokio::spawn(async move {
                    let running = ok(RmcpHello::new().serve(server_io).await, "rmcp serve");
                    let _ = running.waiting().await;
                }),
            };
            let client = ok(().serve(client_io).await, "client over duplex");
            Connection {
                client,
                guard: Guard::Task(task),
            }
        }
        Transport::Pipe => {
            let exe = ok(std::env::current_exe(), "current_exe");
            let mut child = ok(
                Command::new(exe)
                    .arg(server.flag())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn(),
                "spawning the stdio server",
            );
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                panic!("the child has no pipes")
            };
            let writer = ok(
                pipe::Sender::from_owned_fd(OwnedFd::from(stdin)),
                "the child's stdin",
            );
            let reader = ok(
                pipe::Receiver::from_owned_fd(OwnedFd::from(stdout)),
                "the child's stdout",
            );
            let client = ok(().serve((reader, writer)).await, "client over pipes");
            Connection {
                client,
                guard: Guard::Child(child),
            }
        }
        Transport::Http => {
            let addr = ok("127.0.0.1:0".parse(), "the address");
            let (url, guard) = match server {
                Server::Aptix => {
                    let http = ok(McpServer::new(catalog()).bind_http(addr).await, "bind");
                    (http.url(), Guard::AptixHttp(http))
                }
                Server::Rmcp => {
                    let listener = ok(tokio::net::TcpListener::bind(addr).await, "bind");
                    let local = ok(listener.local_addr(), "local_addr");
                    let config = StreamableHttpServerConfig::default();
                    let stop = config.cancellation_token.clone();
                    let shutdown = stop.clone();
                    let service = StreamableHttpService::new(
                        || Ok(RmcpHello::new()),
                        Arc::new(LocalSessionManager::default()),
                        config,
                    );
                    let router = axum::Router::new().route_service("/mcp", service);
                    let task = tokio::spawn(async move {
                        let _ = axum::serve(listener, router)
                            .with_graceful_shutdown(shutdown.cancelled_owned())
                            .await;
                    });
                    let stop = Box::new(move || stop.cancel());
                    (format!("http://{local}/mcp"), Guard::RmcpHttp(stop, task))
                }
            };
            // reqwest is built without a TLS provider (no aws-lc C build):
            // ring's, as the library installs before its own clients.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
            let client = ok(().serve(transport).await, "client over HTTP");
            Connection { client, guard }
        }
    }
}

// ---------------------------------------------------------------------------
// Measurement.

fn params() -> CallToolRequestParams {
    let Value::Object(arguments) = json!({"name": "Ada Lovelace"}) else {
        unreachable!()
    };
    CallToolRequestParams::new("agent_hello_world").with_arguments(arguments)
}

async fn call(peer: &Peer<RoleClient>, params: &CallToolRequestParams) -> CallToolResult {
    let result = ok(peer.call_tool(params.clone()).await, "tools/call");
    if result.is_error != Some(false) {
        panic!("tools/call failed: {result:?}");
    }
    result
}

/// What one measured window gave: every round trip's latency, and how long
/// the window lasted (from the first call's start to the last one's end).
#[derive(Default)]
struct Samples {
    latencies: Vec<Duration>,
    elapsed: Duration,
}

/// `callers` tasks each doing round trips back to back on `peer` until
/// `window` has passed (calls in flight then are finished and counted).
/// Round trips by `callers` callers until `window` has passed; each caller
/// makes at least one.
async fn window(peer: &Peer<RoleClient>, callers: usize, window: Duration) -> Samples {
    let started = Instant::now();
    let deadline = started + window;
    let mut tasks = Vec::with_capacity(callers);
    for _ in 0..callers {
        let peer = peer.clone();
        tasks.push(tokio::spawn(async move {
            let params = params();
            let mut latencies = Vec::with_capacity(1 << 14);
            loop {
                let start = Instant::now();
                std::hint::black_box(call(&peer, &params).await);
                latencies.push(start.elapsed());
                if Instant::now() >= deadline {
                    break;
                }
            }
            latencies
        }));
    }
    let mut samples = Samples::default();
    for task in tasks {
        samples.latencies.extend(ok(task.await, "a caller"));
    }
    samples.elapsed = started.elapsed();
    samples
}

struct Phase {
    transport: Transport,
    callers: usize,
    server: Server,
    samples: Samples,
}

/// Both servers on one transport with `callers` callers, in the order
/// rmcp, aptix, aptix, rmcp (halves of `windows.half`), after a warm-up each.
async fn phases(
    transport: Transport,
    callers: usize,
    connections: &[(Server, Connection)],
    windows: Windows,
) -> Vec<Phase> {
    let mut merged: Vec<Phase> = Vec::new();
    for (server, connection) in connections {
        window(connection.client.peer(), callers, windows.warm_up).await;
        merged.push(Phase {
            transport,
            callers,
            server: *server,
            samples: Samples::default(),
        });
    }
    let order = [Server::Rmcp, Server::Aptix, Server::Aptix, Server::Rmcp];
    for server in order {
        let Some((_, connection)) = connections.iter().find(|(s, _)| *s == server) else {
            continue;
        };
        let half = window(connection.client.peer(), callers, windows.half).await;
        if let Some(phase) = merged.iter_mut().find(|phase| phase.server == server) {
            phase.samples.latencies.extend(half.latencies);
            phase.samples.elapsed += half.elapsed;
        }
    }
    for phase in &mut merged {
        phase.samples.latencies.sort_unstable();
    }
    merged
}

/// Both servers answer the same call with the same result (the text is the
/// same JSON; its key order may differ).
async fn check_same_answer(connections: &[(Server, Connection)]) {
    let params = params();
    let mut answers = Vec::new();
    for (server, connection) in connections {
        let result = call(connection.client.peer(), &params).await;
        let text = result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        let parsed: Value = ok(serde_json::from_str(&text), "the result text");
        let structured = result.structured_content.clone().unwrap_or(Value::Null);
        assert_eq!(
            parsed,
            structured,
            "{}: text and structuredContent",
            server.name()
        );
        assert_eq!(structured["message"], "Hello, Ada Lovelace! Welcome.");
        answers.push((server.name(), structured, text));
    }
    if let [(_, first, _), rest @ ..] = answers.as_slice() {
        for (name, other, _) in rest {
            assert_eq!(first, other, "{name} answers differently");
        }
    }
    for (name, _, text) in &answers {
        eprintln!("  {name}: {} bytes of text: {text}", text.len());
    }
}

// ---------------------------------------------------------------------------
// Report.

/// The nearest-rank percentile `p` (0–100) of `sorted`.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn show(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else {
        format!("{:.2} ms", micros / 1000.0)
    }
}

fn throughput(samples: &Samples) -> f64 {
    let seconds = samples.elapsed.as_secs_f64();
    if seconds > 0.0 {
        samples.latencies.len() as f64 / seconds
    } else {
        0.0
    }
}

fn report(phases: &[Phase]) {
    println!();
    println!(
        "| transport | callers | server | round trips/s | aptix/rmcp (throughput) | p50 | p99 | aptix/rmcp (p50 latency) | samples |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for phase in phases {
        let baseline = phases.iter().find(|other| {
            other.transport == phase.transport
                && other.callers == phase.callers
                && other.server == Server::Rmcp
        });
        let rate = throughput(&phase.samples);
        let p50 = percentile(&phase.samples.latencies, 50.0);
        let (rate_ratio, p50_ratio) = match (phase.server, baseline) {
            (Server::Aptix, Some(baseline)) => {
                let base_rate = throughput(&baseline.samples);
                let base_p50 = percentile(&baseline.samples.latencies, 50.0);
                (
                    format!("{:.2}×", rate / base_rate),
                    format!("{:.2}×", p50.as_secs_f64() / base_p50.as_secs_f64()),
                )
            }
            _ => ("baseline".to_owned(), "baseline".to_owned()),
        };
        println!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
            phase.transport.name(),
            phase.callers,
            phase.server.name(),
            rate,
            rate_ratio,
            show(p50),
            show(percentile(&phase.samples.latencies, 99.0)),
            p50_ratio,
            phase.samples.latencies.len(),
        );
    }
}

// ---------------------------------------------------------------------------

fn runtime() -> tokio::runtime::Runtime {
    ok(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        "the runtime",
    )
}

/// The child-process server: one client on this process's stdin/stdout.
fn serve_stdio(server: Server) {
    runtime().block_on(async {
        match server {
            Server::Aptix => ok(McpServer::new(catalog()).serve_stdio().await, "aptix stdio"),
            Server::Rmcp => {
                let running = ok(
                    RmcpHello::new().serve(rmcp::transport::stdio()).await,
                    "rmcp stdio",
                );
                let _ = running.waiting().await;
            }
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|arg| arg == APTIX_STDIO_FLAG) {
        return serve_stdio(Server::Aptix);
    }
    if args.iter().any(|arg| arg == RMCP_STDIO_FLAG) {
        return serve_stdio(Server::Rmcp);
    }
    // `cargo bench --bench mcp -- duplex|pipe|http` runs that transport only.
    if args.iter().any(|arg| arg == "--list") {
        return;
    }
    let windows = if args.iter().any(|arg| arg == "--bench") {
        BENCH
    } else {
        TEST
    };
    let filters: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let runtime = runtime();
    let phases = runtime.block_on(async {
        let mut all = Vec::new();
        for transport in [Transport::Duplex, Transport::Pipe, Transport::Http] {
            if !filters.is_empty() && !filters.iter().any(|f| transport.key() == f.as_str()) {
                continue;
            }
            eprintln!("{}…", transport.name());
            let mut connections = Vec::new();
            for server in [Server::Rmcp, Server::Aptix] {
                connections.push((server, connect(server, transport).await));
            }
            check_same_answer(&connections).await;
            for callers in [1, CONCURRENCY] {
                all.extend(phases(transport, callers, &connections, windows).await);
            }
            for (_, connection) in connections {
                connection.close().await;
            }
        }
        all
    });
    drop(runtime);
    report(&phases);
}
