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
//! Then what a server's requests to the client add to a mounted call, each
//! against the plain mounted call (`aptix` above) in the same run:
//!
//! * **elicitation**: the server gates its tool and asks for the approval
//!   with a form elicitation, answered by the toolset's elicitor (what the
//!   agent's `AgentEvent::Elicitation` reply feeds too);
//! * **sampling**: the tool asks the client's model for a completion,
//!   answered through `McpToolset::sampling` by a scripted model.
//!
//! Last, what connecting costs: `McpToolset::connect` to a well-behaved
//! server of 500 tools (start, `initialize`, every page of `tools/list`,
//! each tool checked and made an entry), against rmcp's own client
//! connecting and listing the same server (`list_all_tools`) in the same
//! run, each on a fresh in-process connection.
//!
//! `cargo bench --bench mcp_client`. Run as a test (`cargo test
//! --all-targets`) each side makes one call instead of measuring.

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::time::{Duration, Instant};

use std::sync::Arc;

use aptix::executor::ToolCall;
use aptix::live::ElicitationAnswer;
use aptix::mcp::{McpLimits, McpServer, McpToolset, Sampling};
use aptix::prelude::*;
use aptix::{Catalog, Executor, ToolEntry, catalog::ToolEntryBuilder};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
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

/// Arguments of the server-request tools.
#[derive(Debug, Deserialize, JsonSchema)]
struct Named {
    /// Who.
    name: String,
}

/// Greets, once a person approved it (the server asks by elicitation).
#[agent_tool(
    name = "approved_hello",
    usage = "Bench tool.",
    approval = requires_approval
)]
async fn approved_hello(args: Named) -> Result<String, ToolError> {
    Ok(format!("Hello, {}!", args.name))
}

/// Greets with the client's model's words (the server asks by sampling).
#[agent_tool(name = "sampled_hello", usage = "Bench tool.")]
async fn sampled_hello(args: Named, ctx: &ToolContext) -> Result<String, ToolError> {
    let llm = ctx
        .state::<Sampling>()
        .ok_or_else(|| ToolError::failed("the client cannot sample"))?;
    llm.create_text_message(format!("Greet {}.", args.name), 50)
        .await
        .map_err(|error| ToolError::failed(error.to_string()))
}

fn asking_server() -> McpServer {
    McpServer::new(ok(
        aptix::tools![
            hello_world::HelloWorldTool,
            ApprovedHelloTool,
            SampledHelloTool
        ]
        .build(),
        "the asking catalog",
    ))
}

/// A server of `count` tools made at run time, each with a schema of three
/// described fields, as a typical server lists them.
fn many_tools_server(count: usize) -> McpServer {
    let entries: Vec<ToolEntryBuilder> = (0..count)
        .map(|index| {
            ToolEntry::from_json_schema(
                format!("tool_{index:03}"),
                "When the bench calls it.",
                format!("Tool number {index} of the bench server: looks a record up."),
                json!({
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "description": "The record's id." },
                        "limit": { "type": "integer", "minimum": 1, "description": "At most this many." },
                        "fields": {
                            "type": "array",
                            "items": { "type": "string" },
                            "description": "The fields to return."
                        }
                    },
                    "required": ["id"],
                    "additionalProperties": false
                }),
                |_arguments, _context| async { Ok(serde_json::Value::Null) },
            )
        })
        .collect();
    McpServer::new(ok(
        Catalog::builder().entries(entries).build(),
        "the catalog of many tools",
    ))
}

/// Median and p99 of sorted times, printed with `label`.
fn report(label: &str, sorted: &[Duration]) -> Duration {
    let median = percentile(sorted, 0.5);
    eprintln!(
        "{label:<18} {:>8} calls, median {:>9.1?}, p99 {:>9.1?}",
        sorted.len(),
        median,
        percentile(sorted, 0.99)
    );
    median
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
        let rmcp_median = report("rmcp client:", &rmcp);
        let aptix_median = report("aptix McpToolset:", &aptix);
        eprintln!(
            "ratio of medians (aptix / rmcp): {:.2}×",
            aptix_median.as_secs_f64() / rmcp_median.as_secs_f64().max(f64::MIN_POSITIVE)
        );
        mounted.close().await;

        // What a server's request to the client adds to a call.
        let model = Arc::new(
            ScriptedModel::new(vec![ScriptedTurn::new().text("Hello, Ada Lovelace!")]).repeating(),
        );
        let asking = ok(
            McpToolset::in_process(asking_server(), "bench-asking")
                .elicitation(|_request| async {
                    ElicitationAnswer::Accept(json!({"approve": true}))
                })
                .sampling(model)
                // Tens of thousands of samples a minute: the bench measures
                // the round trip, not the budget a hostile server meets.
                .limits(McpLimits::default().sampling_requests_per_minute(u32::MAX))
                .connect()
                .await,
            "the asking McpToolset",
        );
        let executor = Executor::new(ok(
            Catalog::builder().entries(asking.entries()).build(),
            "the asking catalog",
        ));
        let calls = [
            ToolCall::new("b1", "agent_hello_world", r#"{"name":"Ada Lovelace"}"#),
            ToolCall::new("b2", "approved_hello", r#"{"name":"Ada Lovelace"}"#),
            ToolCall::new("b3", "sampled_hello", r#"{"name":"Ada Lovelace"}"#),
        ];
        let one = |index: usize| {
            let (executor, ctx, call) = (&executor, &ctx, &calls[index]);
            async move {
                let envelope = executor.execute(call, ctx).await.into_envelope();
                let envelope = envelope.unwrap_or_else(|| panic!("{}: no envelope", call.name));
                assert!(envelope.is_ok(), "{}", envelope.to_json_string());
            }
        };
        let mut times: [Vec<Duration>; 3] = Default::default();
        if bench {
            for index in 0..3 {
                measure(Some(Duration::from_millis(500)), || one(index)).await;
            }
        }
        for index in [0, 1, 2, 2, 1, 0] {
            times[index].extend(measure(half, || one(index)).await);
        }
        for series in &mut times {
            series.sort();
        }
        let plain = report("plain call:", &times[0]);
        let elicited = report("+ elicitation:", &times[1]);
        let sampled = report("+ sampling:", &times[2]);
        let ratio =
            |other: Duration| other.as_secs_f64() / plain.as_secs_f64().max(f64::MIN_POSITIVE);
        eprintln!(
            "ratios of medians to the plain call: elicitation {:.2}×, sampling {:.2}×",
            ratio(elicited),
            ratio(sampled)
        );
        asking.close().await;

        // What connecting to a server of 500 tools costs.
        let many = many_tools_server(500);
        let rmcp_connect = || {
            let many = many.clone();
            async move {
                let (ours, theirs) = tokio::io::duplex(1 << 20);
                tokio::spawn(many.serve_io(theirs));
                let client = ok(().serve(ours).await, "rmcp client of many tools");
                let tools = ok(client.list_all_tools().await, "rmcp listing");
                assert_eq!(tools.len(), 500);
                let _ = client.cancel().await;
            }
        };
        let aptix_connect = || {
            let many = many.clone();
            async move {
                let tools = ok(
                    McpToolset::in_process(many, "bench-many").connect().await,
                    "McpToolset of many tools",
                );
                assert_eq!(tools.names().len(), 500);
                tools.close().await;
            }
        };
        if bench {
            measure(Some(Duration::from_millis(500)), rmcp_connect).await;
            measure(Some(Duration::from_millis(500)), aptix_connect).await;
        }
        let mut rmcp = measure(half, rmcp_connect).await;
        let mut aptix = measure(half, aptix_connect).await;
        aptix.extend(measure(half, aptix_connect).await);
        rmcp.extend(measure(half, rmcp_connect).await);
        rmcp.sort();
        aptix.sort();
        let rmcp_median = report("rmcp list 500:", &rmcp);
        let aptix_median = report("aptix connect 500:", &aptix);
        eprintln!(
            "ratio of medians (aptix connect / rmcp connect and list): {:.2}×",
            aptix_median.as_secs_f64() / rmcp_median.as_secs_f64().max(f64::MIN_POSITIVE)
        );
    });
}
