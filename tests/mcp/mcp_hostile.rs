//! A hostile MCP server mounted with `McpToolset`: every attack of the red
//! team's review (2026-11-26, N2, N3, N7, N8, N10-N13) as a test. Each one
//! ends with the limit's own error, not with a wall-clock bound: the outer
//! `tokio::time::timeout`s only turn a hang into a failure.

#![cfg(unix)]

use std::time::Duration;

use crate::common::Captured;
use aptix::executor::ToolCall;
use aptix::mcp::{McpClientError, McpLimits, McpTools, McpToolset};
use aptix::prelude::*;
use aptix::{Catalog, Envelope, ErrorCode, Executor};
use aptix_testkit::hostile_mcp::{HostileMcpServer, Misbehaviour, Stats};
use aptix_testkit::{ScriptedModel, ScriptedTurn};

/// Long enough for any limit of these tests to fire on a loaded machine;
/// reaching it means something hangs.
const HANG: Duration = Duration::from_secs(60);

fn toolset(server: &HostileMcpServer) -> McpToolset {
    let server = server.clone();
    McpToolset::connector("hostile", move || {
        let stream = server.connect();
        async move { Ok(stream) }
    })
}

async fn connect(toolset: McpToolset) -> Result<McpTools, McpClientError> {
    match tokio::time::timeout(HANG, toolset.connect()).await {
        Ok(connected) => connected,
        Err(_) => panic!("connect did not return within {HANG:?}"),
    }
}

async fn call(tools: &McpTools, name: &str) -> Envelope {
    let catalog = Catalog::builder()
        .entries(tools.entries())
        .build()
        .unwrap_or_else(|error| panic!("the catalog: {error}"));
    let executor = Executor::new(catalog);
    let call = ToolCall::new("h1", name, "{}");
    let execution = tokio::time::timeout(HANG, executor.execute(&call, &ToolContext::new()))
        .await
        .unwrap_or_else(|_| panic!("the call of {name} did not return within {HANG:?}"));
    execution
        .into_envelope()
        .unwrap_or_else(|| panic!("the call of {name} has no envelope"))
}

/// A model that answers 50 requests, and records them.
fn completions() -> std::sync::Arc<ScriptedModel> {
    std::sync::Arc::new(ScriptedModel::new(
        (0..50).map(|_| ScriptedTurn::new().text("a completion")),
    ))
}

fn stats(server: &HostileMcpServer) -> Stats {
    server.stats()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_pages_end_at_the_listing_limit() {
    let server = HostileMcpServer::new(Misbehaviour::EndlessPages { tools_per_page: 10 });
    let before = peak_rss_kib();
    let error = match connect(toolset(&server)).await {
        Ok(tools) => panic!("an endless listing was accepted: {:?}", tools.names().len()),
        Err(error) => error,
    };
    assert!(matches!(error, McpClientError::List { .. }), "{error}");
    let text = error.to_string();
    assert!(text.contains("pages"), "the error names the limit: {text}");
    assert!(stats(&server).lists <= 101, "{:?}", stats(&server));
    let grew_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grew_mib < 64,
        "the listing grew the process by {grew_mib} MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_many_tools_end_at_the_tool_limit() {
    let server = HostileMcpServer::new(Misbehaviour::EndlessPages {
        tools_per_page: 2000,
    });
    let error = match connect(toolset(&server)).await {
        Ok(tools) => panic!("an endless listing was accepted: {:?}", tools.names().len()),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(text.contains("tools"), "the error names the limit: {text}");
    assert_eq!(stats(&server).lists, 1, "{:?}", stats(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_cursor_ends_the_listing() {
    let server = HostileMcpServer::new(Misbehaviour::RepeatedCursor);
    let error = match connect(toolset(&server)).await {
        Ok(tools) => panic!("a looping listing was accepted: {:?}", tools.names()),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(
        text.contains("cursor"),
        "the error names the cursor: {text}"
    );
    assert_eq!(stats(&server).lists, 2, "{:?}", stats(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_of_shared_references_is_checked_in_linear_time() {
    // 40^8 paths in a few kilobytes.
    let server = HostileMcpServer::new(Misbehaviour::RefBomb {
        levels: 8,
        fan_out: 40,
    });
    let tools = connect(toolset(&server))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    // Listed and checked; its fields look secret (somewhere under
    // 40^8 paths), so none of its values is shown.
    assert_eq!(tools.names(), ["noop", "bomb"], "{tools:?}");
    // A dialect that inlines references refuses it, in bounded time.
    let tools = connect(toolset(&server).check_dialect(aptix::Dialect::Gemini))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    assert_eq!(tools.names(), ["noop"], "{:?}", tools.refused());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_bomb_after_list_changed_does_not_stall_the_runtime() {
    let server = HostileMcpServer::new(Misbehaviour::LateRefBomb {
        levels: 8,
        fan_out: 40,
    });
    let tools = connect(toolset(&server))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let mut changes = tools.changes();
    let envelope = call(&tools, "noop").await;
    assert!(envelope.is_ok(), "{}", envelope.to_json_string());
    // The bomb is listed in the background now; the runtime's workers
    // must stay free for everything else meanwhile.
    for _ in 0..20 {
        let tick = tokio::spawn(tokio::time::sleep(Duration::from_millis(10)));
        tokio::time::timeout(HANG, tick)
            .await
            .unwrap_or_else(|_| panic!("the runtime is stalled"))
            .unwrap_or_else(|error| panic!("the tick task: {error}"));
    }
    tokio::time::timeout(HANG, changes.changed())
        .await
        .unwrap_or_else(|_| panic!("the changed list was never listed"))
        .unwrap_or_else(|error| panic!("changes: {error}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_initializes_is_a_connect_error() {
    let server = HostileMcpServer::new(Misbehaviour::NoInitialize);
    let limits = McpLimits::default().connect_timeout(Duration::from_millis(300));
    let error = match connect(toolset(&server).limits(limits)).await {
        Ok(tools) => panic!("connected to a silent server: {tools:?}"),
        Err(error) => error,
    };
    assert!(
        matches!(error, McpClientError::Initialize { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("McpLimits::connect_timeout"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_lists_is_a_list_error() {
    let server = HostileMcpServer::new(Misbehaviour::NoListAnswer);
    let limits = McpLimits::default().list_timeout(Duration::from_millis(300));
    let error = match connect(toolset(&server).limits(limits)).await {
        Ok(tools) => panic!("connected to a silent server: {tools:?}"),
        Err(error) => error,
    };
    assert!(matches!(error, McpClientError::List { .. }), "{error}");
    assert!(
        error.to_string().contains("McpLimits::list_timeout"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_floods_are_coalesced() {
    let server = HostileMcpServer::new(Misbehaviour::ListChangedFlood { notifications: 500 });
    let tools = connect(toolset(&server))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    // Wait until the listings stop: twice in a row the same count, a
    // second apart.
    let mut last = stats(&server).lists;
    let settled = tokio::time::timeout(HANG, async {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = stats(&server).lists;
            if now == last && now > 1 {
                return now;
            }
            last = now;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the listings never stopped: {:?}", stats(&server)));
    assert!(
        settled <= 3,
        "500 notifications made {settled} listings: {:?}",
        stats(&server)
    );
    drop(tools);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_result_is_a_failed_envelope() {
    let server = HostileMcpServer::new(Misbehaviour::HugeResult { bytes: 15 << 20 });
    let tools = connect(toolset(&server))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let envelope = call(&tools, "big").await;
    let json = envelope.to_json_string();
    assert_eq!(
        envelope.error_code(),
        Some(ErrorCode::Failed),
        "{}",
        &json[..json.len().min(300)]
    );
    assert!(json.len() < 4096, "the envelope is {} bytes", json.len());
    assert!(json.contains("bytes"), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_needs_a_running_call_of_the_server() {
    let server = HostileMcpServer::new(Misbehaviour::Sampling {
        at_start: 20,
        per_call: 0,
        max_tokens: 4096,
    });
    let model = completions();
    let tools = connect(toolset(&server).sampling(model.clone()))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let answered = tokio::time::timeout(HANG, async {
        loop {
            let now = stats(&server);
            if now.requests_answered + now.requests_refused >= 20 {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the requests were never answered: {:?}", stats(&server)));
    assert_eq!(answered.requests_answered, 0, "{answered:?}");
    assert_eq!(model.requests().len(), 0, "the model was asked");
    drop(tools);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_during_a_call_keeps_to_its_budget() {
    let server = HostileMcpServer::new(Misbehaviour::Sampling {
        at_start: 0,
        per_call: 20,
        max_tokens: 4096,
    });
    let model = completions();
    let tools = connect(toolset(&server).sampling(model.clone()))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let envelope = call(&tools, "sample").await;
    assert!(envelope.is_ok(), "{}", envelope.to_json_string());
    let seen = stats(&server);
    assert_eq!(
        seen.requests_answered + seen.requests_refused,
        20,
        "{seen:?}"
    );
    assert!(
        model.requests().len() <= 8,
        "one call had the model answer {} sampling requests",
        model.requests().len()
    );
}

/// A catalog of one tool, `hosted_echo`, that answers its arguments: what
/// the tests serve over HTTP.
fn echo_catalog() -> Catalog {
    Catalog::builder()
        .entries([aptix::ToolEntry::from_json_schema(
            "hosted_echo",
            "When the test calls it.",
            "Answers its arguments.",
            serde_json::json!({ "type": "object", "properties": {} }),
            |arguments, _context| async move { Ok(arguments) },
        )])
        .build()
        .unwrap_or_else(|error| panic!("the echo catalog: {error}"))
}

/// The plain-Python stdio server of tests/mcp_python, with `args`.
fn plain_server(args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/mcp_python/plain_stdio_server.py"
        ))
        .args(args);
    command
}

/// Everything of `tools` a model provider is sent or a search lists: each
/// tool's name, description, usage and namespace, and the lowered tools.
fn seen_by_the_model(tools: &McpTools) -> String {
    let catalog = Catalog::builder()
        .entries(tools.entries())
        .build()
        .unwrap_or_else(|error| panic!("the catalog: {error}"));
    let mut seen = String::new();
    for entry in catalog.entries() {
        let definition = entry.definition();
        seen.push_str(&format!(
            "{} {} {} {:?}\n",
            definition.name(),
            definition.description(),
            definition.usage(),
            entry.namespace()
        ));
    }
    for dialect in [aptix::Dialect::Anthropic, aptix::Dialect::OpenAiStrict] {
        if let Ok(lowered) = catalog.lower(dialect) {
            seen.push_str(&serde_json::Value::Array(lowered).to_string());
        }
    }
    seen.push_str(&catalog.usage_prompt());
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_in_a_command_line_or_url_reach_no_model() {
    const STDIO_KEY: &str = "sk-live-STDIO-KEY-123";
    let tools = connect(McpToolset::stdio(plain_server(&[&format!(
        "--api-key={STDIO_KEY}"
    )])))
    .await
    .unwrap_or_else(|error| panic!("connect over stdio: {error}"));
    let seen = seen_by_the_model(&tools);
    assert!(seen.contains("echo"), "{seen}");
    assert!(
        !seen.contains(STDIO_KEY),
        "the key reaches the model: {seen}"
    );
    assert!(!tools.server().contains(STDIO_KEY), "{}", tools.server());
    tools.close().await;

    const URL_KEY: &str = "sk-live-URL-KEY-456";
    const PASSWORD: &str = "sk-live-PASSWORD-789";
    let catalog = echo_catalog();
    let hosted = aptix::mcp::McpServer::new(catalog)
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("bind: {error}"));
    let url = format!(
        "http://ada:{PASSWORD}@{}/mcp?api_key={URL_KEY}#{URL_KEY}",
        hosted.local_addr()
    );
    let tools = connect(McpToolset::http(url))
        .await
        .unwrap_or_else(|error| panic!("connect over HTTP: {error}"));
    let seen = seen_by_the_model(&tools);
    assert!(seen.contains("hosted_echo"), "{seen}");
    for secret in [URL_KEY, PASSWORD] {
        assert!(!seen.contains(secret), "the key reaches the model: {seen}");
        assert!(!tools.server().contains(secret), "{}", tools.server());
    }
    tools.close().await;
    let _ = hosted.shutdown().await;

    // Nor does it reach an error (which logs and envelopes quote).
    let dead = format!("http://127.0.0.1:9/mcp?api_key={URL_KEY}");
    let error = match connect(McpToolset::http(dead)).await {
        Ok(tools) => panic!("connected to nothing: {tools:?}"),
        Err(error) => error.to_string(),
    };
    assert!(!error.contains(URL_KEY), "{error}");
}

/// The most memory the process has held, in KiB (Linux's `VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix("VmHWM:")
                    .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stderr_flood_without_newlines_is_read_in_bounded_memory() {
    let flood: u64 = 256 << 20;
    let before = peak_rss_kib();
    let tools = connect(McpToolset::stdio(plain_server(&[
        "--flood-stderr",
        &flood.to_string(),
    ])))
    .await
    .unwrap_or_else(|error| panic!("connect: {error}"));
    let grew_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grew_mib < 64,
        "reading {} MiB of stderr grew the process by {grew_mib} MiB",
        flood >> 20
    );
    let envelope = call(&tools, "echo").await;
    assert!(envelope.is_ok(), "{}", envelope.to_json_string());
    tools.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_or_deep_definition_is_refused_by_the_listing() {
    for misbehaviour in [
        Misbehaviour::HugeDefinition { bytes: 4 << 20 },
        Misbehaviour::DeepSchema { depth: 40 },
    ] {
        let server = HostileMcpServer::new(misbehaviour.clone());
        let tools = connect(toolset(&server))
            .await
            .unwrap_or_else(|error| panic!("connect to {misbehaviour:?}: {error}"));
        assert_eq!(tools.names(), ["noop"], "{misbehaviour:?}");
        let refused = tools.refused();
        assert_eq!(refused.len(), 1, "{refused:?}");
        let why = refused[0].to_string();
        assert!(why.contains("limit"), "{why}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_flood_is_asked_within_its_budget() {
    let server = HostileMcpServer::new(Misbehaviour::ElicitationFlood { per_call: 200 });
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    let tools = connect(toolset(&server).elicitation(move |_request| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { aptix::live::ElicitationAnswer::Decline }
    }))
    .await
    .unwrap_or_else(|error| panic!("connect: {error}"));
    let envelope = call(&tools, "ask").await;
    assert!(envelope.is_ok(), "{}", envelope.to_json_string());
    let asked = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert!(asked <= 8, "one call asked the person {asked} questions");
    let seen = stats(&server);
    assert_eq!(
        seen.requests_answered + seen.requests_refused,
        200,
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_of_too_many_bytes_ends_at_its_limit() {
    let server = HostileMcpServer::new(Misbehaviour::EndlessPages { tools_per_page: 10 });
    let limits = McpLimits::default().max_listing_bytes(4 << 10);
    let error = match connect(toolset(&server).limits(limits)).await {
        Ok(tools) => panic!("an oversized listing was accepted: {tools:?}"),
        Err(error) => error,
    };
    assert!(
        error.to_string().contains("McpLimits::max_listing_bytes"),
        "{error}"
    );
    assert!(stats(&server).lists <= 4, "{:?}", stats(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_of_too_many_values_is_refused_before_it_is_walked() {
    let server = HostileMcpServer::new(Misbehaviour::Polite { tools: 3, page: 10 });
    let limits = McpLimits::default().max_schema_nodes(5);
    let tools = connect(toolset(&server).limits(limits))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    // `noop`'s schema holds four values; the others a dozen.
    assert_eq!(tools.names(), ["noop"]);
    let refused = tools.refused();
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused
            .iter()
            .all(|refusal| refusal.to_string().contains("McpLimits::max_schema_nodes")),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_keeps_to_its_budget_per_minute_and_in_tokens() {
    for (limits, answered) in [
        (
            McpLimits::default()
                .sampling_requests_per_call(100)
                .sampling_requests_per_minute(5),
            5,
        ),
        (
            McpLimits::default()
                .sampling_requests_per_call(100)
                .sampling_tokens_per_call(10_000),
            // 4,096 tokens each: two fit in 10,000, a third does not.
            2,
        ),
    ] {
        let server = HostileMcpServer::new(Misbehaviour::Sampling {
            at_start: 0,
            per_call: 20,
            max_tokens: 4096,
        });
        let model = completions();
        let tools = connect(
            toolset(&server)
                .sampling(model.clone())
                .limits(limits.clone()),
        )
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
        let envelope = call(&tools, "sample").await;
        assert!(envelope.is_ok(), "{}", envelope.to_json_string());
        let seen = stats(&server);
        assert_eq!(
            (seen.requests_answered, seen.requests_refused),
            (answered, 20 - answered),
            "{limits:?}: {seen:?}"
        );
        assert_eq!(model.requests().len(), answered);
    }
}

// ---------------------------------------------------------------------------
// The red team's second pass (2026-11-27): R3-R6, C1-C3.

/// R3: each page's `nextCursor` was kept (and cloned) without counting: 12
/// MiB cursors grew the process by hundreds of MiB within every limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_cursors_end_the_listing() {
    let server = HostileMcpServer::new(Misbehaviour::HugeCursors {
        cursor_bytes: 12 << 20,
    });
    let before = peak_rss_kib();
    let error = match connect(toolset(&server)).await {
        Ok(tools) => panic!("a listing of 12 MiB cursors was accepted: {tools:?}"),
        Err(error) => error,
    };
    assert!(error.to_string().contains("cursor"), "{error}");
    assert!(stats(&server).lists <= 2, "{:?}", stats(&server));
    let grew_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grew_mib < 128,
        "the listing grew the process by {grew_mib} MiB"
    );
}

/// R5: the sampling budgets counted the tokens a request asked for, not
/// the prompt it sent: 8 requests of 12 MiB had the model read 96 MiB in
/// one call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_prompts_are_bounded() {
    let server = HostileMcpServer::new(Misbehaviour::SamplingPrompts {
        per_call: 8,
        prompt_bytes: 2 << 20,
    });
    let model = completions();
    let tools = connect(toolset(&server).sampling(model.clone()))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let envelope = call(&tools, "sample").await;
    assert!(envelope.is_ok(), "{}", envelope.to_json_string());
    let seen = stats(&server);
    assert_eq!(seen.requests_refused, 8, "{seen:?}");
    assert!(model.requests().is_empty(), "the model read the prompts");
}

/// R6: the listing's checks (each tool's validator, with its patterns)
/// ran after `list_timeout`, for as long as the server's schemas made
/// them: a listing within every other limit kept `connect` busy for
/// 23 CPU-seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checking_a_listing_keeps_to_the_list_timeout() {
    let tools: Vec<serde_json::Value> = (0..200)
        .map(|index| {
            let properties: serde_json::Map<String, serde_json::Value> = (0..40)
                .map(|field| {
                    (
                        format!("f{field}"),
                        serde_json::json!({ "type": "string", "pattern": "^[^x]{1,300}$" }),
                    )
                })
                .collect();
            serde_json::json!({
                "name": format!("t{index}"),
                "description": "Checks a lot.",
                "inputSchema": { "type": "object", "properties": properties }
            })
        })
        .collect();
    let server = HostileMcpServer::new(Misbehaviour::Lists(tools));
    let limits = McpLimits::default().list_timeout(Duration::from_millis(300));
    match connect(toolset(&server).limits(limits)).await {
        Ok(tools) => panic!(
            "8,000 patterns were checked within 300 ms: {:?}",
            tools.names().len()
        ),
        Err(error) => assert!(
            error.to_string().contains("McpLimits::list_timeout"),
            "{error}"
        ),
    }
}

/// R4: a remote tool whose fields look secret shows no values; the walk
/// missed fields behind `#/definitions/..`, `then`, `patternProperties`
/// and `dependentSchemas`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_looking_fields_anywhere_in_a_remote_schema_hide_its_values() {
    use aptix::{Agent, AgentEvent, Conversation, Input};
    let schemas = [
        (
            "via_definitions",
            serde_json::json!({
                "type": "object",
                "properties": { "auth": { "$ref": "#/definitions/Creds" } },
                "definitions": { "Creds": { "type": "object", "properties": { "password": { "type": "string" } } } }
            }),
            serde_json::json!({ "auth": { "password": "PW-DEFINITIONS-1" } }),
        ),
        (
            "via_then",
            serde_json::json!({
                "type": "object",
                "properties": { "kind": { "type": "string" } },
                "if": { "properties": { "kind": { "const": "login" } } },
                "then": { "properties": { "password": { "type": "string" } } }
            }),
            serde_json::json!({ "kind": "login", "password": "PW-THEN-2" }),
        ),
        (
            "via_pattern",
            serde_json::json!({
                "type": "object",
                "patternProperties": { "^api_key$": { "type": "string" } }
            }),
            serde_json::json!({ "api_key": "PW-PATTERN-3" }),
        ),
        (
            "via_dependent",
            serde_json::json!({
                "type": "object",
                "properties": { "user": { "type": "string" } },
                "dependentSchemas": { "user": { "properties": { "secret": { "type": "string" } } } }
            }),
            serde_json::json!({ "user": "ada", "secret": "PW-DEPENDENT-4" }),
        ),
    ];
    let listed = schemas
        .iter()
        .map(|(name, schema, _)| {
            serde_json::json!({ "name": name, "description": "Signs in.", "inputSchema": schema })
        })
        .collect();
    let server = HostileMcpServer::new(Misbehaviour::Lists(listed));
    let tools = connect(toolset(&server))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let catalog = Catalog::builder()
        .entries(tools.entries())
        .build()
        .unwrap_or_else(|error| panic!("the catalog: {error}"));
    let mut turn = ScriptedTurn::new();
    for (index, (name, _, arguments)) in schemas.iter().enumerate() {
        turn = turn.tool_call(&format!("s{index}"), name, &arguments.to_string());
    }
    let agent = Agent::builder()
        .model(
            ScriptedModel::new(vec![turn, ScriptedTurn::new().text("done")])
                .with_dialect(aptix::Dialect::Anthropic),
        )
        .catalog(catalog)
        .build()
        .unwrap_or_else(|error| panic!("the agent: {error}"));
    let mut conversation = Conversation::new("secret-walk");
    let events: Vec<AgentEvent> =
        futures_util::StreamExt::collect(agent.run(&mut conversation, Input::User("go".into())))
            .await;
    let leaks: Vec<String> = events
        .iter()
        .map(|event| format!("{event:?}"))
        .filter(|text| text.contains("PW-"))
        .collect();
    assert!(leaks.is_empty(), "{leaks:#?}");
}

/// C1: the default label kept the URL's path, where hosted servers put
/// keys; it reached every tool's usage text and the errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_a_url_path_reaches_no_model() {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    const PATH_KEY: &str = "sk-live-PATH-KEY-111";
    let catalog = echo_catalog();
    let handler = aptix::mcp::McpServer::new(catalog).handler();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        std::sync::Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let path = format!("/s/{PATH_KEY}/mcp");
    let router = axum::Router::new().route_service(&path, service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|error| panic!("bind: {error}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|error| panic!("addr: {error}"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let tools = connect(McpToolset::http(format!("http://{addr}{path}")))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let seen = seen_by_the_model(&tools);
    assert!(seen.contains("hosted_echo"), "{seen}");
    assert!(!seen.contains(PATH_KEY), "{seen}");
    assert!(!tools.server().contains(PATH_KEY), "{}", tools.server());
    tools.close().await;
    let dead = format!("http://127.0.0.1:9/s/{PATH_KEY}/mcp");
    match connect(McpToolset::http(dead)).await {
        Ok(tools) => panic!("connected to nothing: {tools:?}"),
        Err(error) => assert!(!error.to_string().contains(PATH_KEY), "{error}"),
    }
}

/// C2: after the server went away, rmcp logged its HTTP client's error at
/// ERROR, which names the URL, query key included, past the recommended
/// filter.
#[tokio::test]
async fn a_url_key_reaches_no_log_line() {
    const QUERY_KEY: &str = "sk-live-QUERY-KEY-222";
    const USERINFO: &str = "sk-live-USERINFO-PW-333";
    const BEARER: &str = "sk-live-BEARER-444";
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(aptix::mcp::hide_sdk_payloads(
            tracing_subscriber::EnvFilter::new("trace"),
        ))
        .with_writer(move || writer.clone())
        .finish();
    let _guard = crate::common::capture_logs(subscriber);
    let catalog = echo_catalog();
    let hosted = aptix::mcp::McpServer::new(catalog)
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("bind: {error}"));
    let url = format!(
        "http://ada:{USERINFO}@{}/mcp?api_key={QUERY_KEY}",
        hosted.local_addr()
    );
    let tools = connect(McpToolset::http(url).bearer_token(BEARER))
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let first = call(&tools, "hosted_echo").await;
    assert!(first.is_ok(), "{}", first.to_json_string());
    let _ = hosted.shutdown().await;
    let second = call(&tools, "hosted_echo").await;
    tools.close().await;
    drop(tools);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let logged = captured.text();
    for secret in [QUERY_KEY, USERINFO, BEARER] {
        assert!(
            !second.to_json_string().contains(secret),
            "{}",
            second.to_json_string()
        );
        let lines: Vec<&str> = logged
            .lines()
            .filter(|line| line.contains(secret))
            .collect();
        assert!(
            lines.is_empty(),
            "{secret} is in the log:\n{}",
            lines.join("\n")
        );
    }
}

/// C3: a stdio server that names its command line on stderr (a start-up
/// banner) and dies during a call: the stderr tail was quoted in the
/// envelope the model reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_on_the_command_line_reaches_no_model_through_stderr() {
    const ARG_KEY: &str = "sk-live-ARGV-KEY-666";
    let tools = connect(McpToolset::stdio(plain_server(&[
        "--banner",
        &format!("--api-key={ARG_KEY}"),
    ])))
    .await
    .unwrap_or_else(|error| panic!("connect: {error}"));
    let envelope = call(&tools, "crash").await;
    let text = envelope.to_json_string();
    assert!(envelope.error_code().is_some(), "{text}");
    assert!(!text.contains(ARG_KEY), "{text}");
    assert!(!text.contains("sk-live"), "{text}");
    tools.close().await;
}
