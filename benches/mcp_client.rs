//! What mounting a server with `McpToolset` costs per call, against rmcp's
//! own client calling the same server in the same run.
//!
//! The server is Aptix's `McpServer` with `agent_hello_world`, on an
//! in-process `tokio::io::duplex` pipe (the stdio framing, no system calls),
//! so the figure is the client side plus one server round trip:
//!
//! * **rmcp**: `Peer::call_tool` with `{"name":"Ada Lovelace"}`, the
//!   `CallToolResult` kept as is (no parse, no validation).
//! * **aptix**: `Executor::execute` of the mounted tool: arguments validated
//!   here against the remote `inputSchema`, the `tools/call` with a
//!   progress route and a cancellation guard, `structuredContent` checked
//!   against the `outputSchema`, the envelope's JSON.
//!
//! Each side runs sequential calls for a window, measured in two halves in
//! the order rmcp, aptix, aptix, rmcp. Medians and p99 per call, and the
//! ratio of the medians, go to standard error; BENCHMARKS.md records them.
//!
//! `cargo bench --bench mcp_client`. Run as a test (`cargo test
//! --all-targets`) each side makes one call instead of measuring.

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::time::{Duration, Instant};

use aptix::executor::ToolCall;
use aptix::mcp::{McpServer, McpToolset};
use aptix::{Catalog, Executor, ToolContext};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

fn ok<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

fn server() -> McpServer {
    McpServer::new(ok(
        aptix::tools![hello_world::HelloWorldTool].build(),
        "the catalog",
    ))
}

async fn rmcp_client() -> RunningService<RoleClient, ()> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    tokio::spawn(server().serve_io(theirs));
    ok(().serve(ours).await, "rmcp client")
}

/// Per-call times of `calls` sequential calls, or for `window`.
async fn measure<F, Fut>(window: Option<Duration>, mut one: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::new();
    let start = Instant::now();
    loop {
        let began = Instant::now();
        one().await;
        times.push(began.elapsed());
        match window {
            Some(window) if start.elapsed() < window => {}
            _ => break,
        }
    }
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn main() {
    let bench = std::env::args().any(|arg| arg == "--bench");
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let half = bench.then_some(Duration::from_secs(3));
    let runtime = ok(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        "the runtime",
    );
    runtime.block_on(async {
        let raw = rmcp_client().await;
        let params = CallToolRequestParams::new("agent_hello_world").with_arguments(
            json!({"name": "Ada Lovelace"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let mounted = ok(
            McpToolset::in_process(server(), "bench").connect().await,
            "McpToolset",
        );
        let catalog = ok(
            Catalog::builder().entries(mounted.entries()).build(),
            "the mounted catalog",
        );
        let executor = Executor::new(catalog);
        let ctx = ToolContext::new();
        let call = ToolCall::new("bench_1", "agent_hello_world", r#"{"name":"Ada Lovelace"}"#);

        let rmcp_call = || {
            let (raw, params) = (&raw, params.clone());
            async move {
                let result = ok(raw.call_tool(params).await, "rmcp call");
                assert_ne!(result.is_error, Some(true));
            }
        };
        let aptix_call = || {
            let (executor, ctx, call) = (&executor, &ctx, &call);
            async move {
                let envelope = executor.execute(call, ctx).await.into_envelope();
                assert!(envelope.is_some_and(|envelope| envelope.is_ok()));
            }
        };
        if bench {
            // Warm both.
            measure(Some(Duration::from_millis(500)), rmcp_call).await;
            measure(Some(Duration::from_millis(500)), aptix_call).await;
        }
        let mut rmcp = measure(half, rmcp_call).await;
        let mut aptix = measure(half, aptix_call).await;
        aptix.extend(measure(half, aptix_call).await);
        rmcp.extend(measure(half, rmcp_call).await);
        rmcp.sort();
        aptix.sort();
        let (rmcp_median, aptix_median) = (percentile(&rmcp, 0.5), percentile(&aptix, 0.5));
        eprintln!(
            "rmcp client:       {:>8} calls, median {:>9.1?}, p99 {:>9.1?}",
            rmcp.len(),
            rmcp_median,
            percentile(&rmcp, 0.99)
        );
        eprintln!(
            "aptix McpToolset:  {:>8} calls, median {:>9.1?}, p99 {:>9.1?}",
            aptix.len(),
            aptix_median,
            percentile(&aptix, 0.99)
        );
        eprintln!(
            "ratio of medians (aptix / rmcp): {:.2}×",
            aptix_median.as_secs_f64() / rmcp_median.as_secs_f64().max(f64::MIN_POSITIVE)
        );
        mounted.close().await;
    });
}
