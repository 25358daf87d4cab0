//! Agent-loop costs, each against a baseline measured in the same run:
//! - tool-call assembly throughput on a large recorded stream (MB/s) against
//!   `serde_json::from_str` of the same final argument strings;
//! - loop overhead per turn with the scripted model (µs), and the tool
//!   round trip run detached (`Agent::start`, its events read, `finish`);
//! - `transcript::repair` of one turn of 10 000 and 40 000 calls, against a
//!   clone of the same transcript (which the loop makes for every request
//!   anyway): linear, so the ratio stays flat as the turn grows;
//! - a turn of three calls made as composed calls (structured output parsed
//!   into calls) against the same calls made natively;
//! - a progressive tool that reports 10 000 progress updates (or 1 000
//!   partial results) in one call, against the same call reporting nothing;
//! - a tool round trip with one and three hooks that let every call
//!   through, against the same round trip without hooks.
//! - a tool round trip with an approval policy, and with a context budget,
//!   against the same round trip without either.
//! - the retry paths: a call the tool sends back to the model
//!   (`ToolError::retry`) and a transient failure the executor runs again
//!   (its backoff on a paused clock, so only the work is measured), each
//!   against the same calls succeeding at once.
//!
//! `cargo bench --bench agent`

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::hint::black_box;

use aptix::agent::AgentBuilder;
use aptix::model::adapter::TurnAssembler;
use aptix::model::{FinishReason, ModelEvent, ToolCallDelta};
use aptix::prelude::*;
use aptix::transcript;
use aptix::transcript::{AssistantToolCall, Message};
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::StreamExt;

/// Arguments of `report`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Report {
    /// Progress updates to make.
    pub progress: u32,
    /// Partial results to make.
    pub partials: u32,
}

/// Reports as asked, then answers how many reports it made.
#[agent_tool(name = "report", usage = "Bench tool.", progressive = true)]
async fn report(args: Report, ctx: &ToolContext<u32>) -> Result<u32, ToolError> {
    for done in 0..args.progress {
        ctx.progress(f64::from(done), Some(f64::from(args.progress)), None);
    }
    for partial in 0..args.partials {
        ctx.partial(&partial);
    }
    Ok(args.progress + args.partials)
}

/// Calls of the retry tools so far: odd calls fail, even ones succeed (the
/// benchmark runs one call at a time).
static RETRY_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Whether this call is one of the failing ones (and counts it).
fn fails_this_time() -> bool {
    RETRY_CALLS
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .is_multiple_of(2)
}

/// Arguments of the retry benchmark's tools.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Attempt {
    /// Any word.
    pub word: String,
}

/// Succeeds every time.
#[agent_tool(name = "steady", usage = "Bench tool.", idempotent = true)]
async fn steady(args: Attempt) -> Result<String, ToolError> {
    Ok(args.word)
}

/// Asks the model for another try every other call.
#[agent_tool(name = "picky", usage = "Bench tool.")]
async fn picky(args: Attempt) -> Result<String, ToolError> {
    if fails_this_time() {
        return Err(ToolError::retry("Spell the word in lower case."));
    }
    Ok(args.word)
}

/// Fails transiently every other call; safe to run again.
#[agent_tool(name = "shaky", usage = "Bench tool.", idempotent = true)]
async fn shaky(args: Attempt) -> Result<String, ToolError> {
    if fails_this_time() {
        return Err(ToolError::transient("The service hiccuped."));
    }
    Ok(args.word)
}

/// An agent whose model calls `tool` on each of `calls` turns, then answers.
fn calling_agent(tool: &str, calls: usize) -> Agent {
    let mut turns: Vec<ScriptedTurn> = (0..calls)
        .map(|i| ScriptedTurn::new().tool_call(&format!("call_{i}"), tool, r#"{"word":"ada"}"#))
        .collect();
    turns.push(ScriptedTurn::new().text("Done."));
    Agent::builder()
        .model(ScriptedModel::new(turns).repeating())
        .catalog(
            Catalog::builder()
                .tool::<SteadyTool>()
                .tool::<PickyTool>()
                .tool::<ShakyTool>()
                .build()
                .unwrap_or_else(|error| panic!("{error}")),
        )
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The model-retry path (one retry, then success: two calls) against two
/// calls that succeed; the transient path (the executor runs the call
/// again) against one call that succeeds.
fn retries(c: &mut Criterion) {
    // Paused: the transient retry's 50 ms backoff passes at once, so the
    // figure is the retry's work, not its wait.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let runs = [
        (
            "model retry: baseline, 2 calls that succeed",
            calling_agent("steady", 2),
        ),
        (
            "model retry: retry, then success",
            calling_agent("picky", 2),
        ),
        (
            "transient: baseline, 1 call that succeeds",
            calling_agent("steady", 1),
        ),
        (
            "transient: fails once, run again",
            calling_agent("shaky", 1),
        ),
    ];
    runtime.block_on(async {
        for (name, agent) in &runs {
            let mut conversation = Conversation::new("check");
            let events: Vec<AgentEvent> = agent
                .run(&mut conversation, Input::User("go".into()))
                .collect()
                .await;
            let results: Vec<bool> = events
                .iter()
                .filter_map(|event| match event {
                    AgentEvent::ToolCallResult { envelope, .. } => Some(envelope["ok"] == true),
                    _ => None,
                })
                .collect();
            assert_eq!(results.last(), Some(&true), "{name}: {events:?}");
        }
    });
    let runs: Vec<(&str, &Agent)> = runs.iter().map(|(name, agent)| (*name, agent)).collect();
    measure_runs(c, &runtime, "retries (scripted model)", "go", &runs);
}

/// One turn of 32 parallel calls, each with ~16 KiB of arguments, streamed
/// in 6-byte deltas the way OpenAI-compatible servers send them.
fn recorded_stream() -> (Vec<ModelEvent>, Vec<String>) {
    let mut arguments = Vec::new();
    for call in 0..32 {
        let notes: Vec<String> = (0..400)
            .map(|i| format!("note {call}-{i} \u{e9}\u{20ac}"))
            .collect();
        arguments.push(serde_json::json!({ "call": call, "notes": notes }).to_string());
    }
    let mut events = Vec::new();
    for index in 0..arguments.len() {
        events.push(ModelEvent::ToolCallDelta(ToolCallDelta {
            index,
            id: Some(format!("call_{index}")),
            name: Some("record".into()),
            arguments: String::new(),
        }));
    }
    let chunked: Vec<Vec<String>> = arguments
        .iter()
        .map(|text| {
            let chars: Vec<char> = text.chars().collect();
            chars
                .chunks(6)
                .map(|chunk| chunk.iter().collect())
                .collect()
        })
        .collect();
    let longest = chunked.iter().map(Vec::len).max().unwrap_or(0);
    // Interleave the calls, as parallel calls arrive.
    for step in 0..longest {
        for (index, pieces) in chunked.iter().enumerate() {
            if let Some(piece) = pieces.get(step) {
                events.push(ModelEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments: piece.clone(),
                }));
            }
        }
    }
    events.push(ModelEvent::Finish {
        reason: FinishReason::ToolCalls,
        usage: None,
    });
    (events, arguments)
}

fn assembly(c: &mut Criterion) {
    let (events, arguments) = recorded_stream();
    let bytes: usize = arguments.iter().map(String::len).sum();
    let mut group = c.benchmark_group("assembly (32 parallel calls, 6-byte deltas)");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function(
        "baseline: serde_json::from_str of the final arguments",
        |b| {
            b.iter(|| {
                for text in &arguments {
                    black_box(serde_json::from_str::<serde_json::Value>(black_box(text)).ok());
                }
            });
        },
    );
    group.bench_function("aptix: TurnAssembler push + finish", |b| {
        b.iter_batched(
            || events.clone(),
            |events| {
                let mut assembler = TurnAssembler::new();
                for event in events {
                    if assembler.push(event).is_err() {
                        panic!("assembly failed");
                    }
                }
                black_box(assembler.finish().ok())
            },
            criterion::BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn loop_overhead(c: &mut Criterion) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("{error}"),
    };
    let catalog = Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let text_agent = Agent::builder()
        .model(
            ScriptedModel::new([ScriptedTurn::new().text("Hello there, how can I help?")])
                .repeating(),
        )
        .catalog(catalog.clone())
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let tool_agent = Agent::builder()
        .model(
            ScriptedModel::new([
                ScriptedTurn::new().tool_call("call_1", "agent_hello_world", r#"{"name":"Ada"}"#),
                ScriptedTurn::new().text("Done."),
            ])
            .repeating(),
        )
        .catalog(catalog)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));

    // Every iteration must take the path it is named for: the scripted
    // model once stopped after its first script (`repeating()` did
    // nothing), and these figures then measured a model-error run.
    runtime.block_on(async {
        for _ in 0..3 {
            let mut conversation = Conversation::new("check");
            let events: Vec<AgentEvent> = text_agent
                .run(&mut conversation, Input::User("hi".into()))
                .collect()
                .await;
            assert!(
                matches!(
                    events.last(),
                    Some(AgentEvent::Done {
                        reason: DoneReason::Completed,
                        ..
                    })
                ),
                "text turn did not complete: {events:?}"
            );
            let mut conversation = Conversation::new("check");
            let events: Vec<AgentEvent> = tool_agent
                .run(&mut conversation, Input::User("greet Ada".into()))
                .collect()
                .await;
            let tool_ok = events.iter().any(|event| {
                matches!(event, AgentEvent::ToolCallResult { envelope, .. } if envelope["ok"] == true)
            });
            assert!(
                tool_ok
                    && matches!(
                        events.last(),
                        Some(AgentEvent::Done {
                            reason: DoneReason::Completed,
                            ..
                        })
                    ),
                "tool round trip did not complete: {events:?}"
            );
        }
    });

    let mut group = c.benchmark_group("agent loop (scripted model)");
    group.bench_function("one text turn (1 model call)", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut conversation = Conversation::new("bench");
            let events = text_agent
                .run(&mut conversation, Input::User("hi".into()))
                .count()
                .await;
            black_box(events)
        });
    });
    group.bench_function("tool round trip (2 model calls, 1 tool call)", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut conversation = Conversation::new("bench");
            let events = tool_agent
                .run(&mut conversation, Input::User("greet Ada".into()))
                .count()
                .await;
            black_box(events)
        });
    });
    // The same round trip detached (`Agent::start`): its events read, then
    // its transcript taken back with `finish`.
    group.bench_function("tool round trip, detached (start, read, finish)", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut run =
                tool_agent.start(Conversation::new("bench"), Input::User("greet Ada".into()));
            let events = (&mut run).count().await;
            let conversation = run.finish().await.unwrap_or_else(|error| panic!("{error}"));
            black_box((events, conversation.messages.len()))
        });
    });
    group.finish();
}

/// Three calls in one turn, made natively and composed: the composed run
/// also asks for, parses and splits the structured answer and renders the
/// transcript back for the second request. The native run is the baseline.
fn composed_calls(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let catalog = Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let native = Agent::builder()
        .model(
            ScriptedModel::new([
                ScriptedTurn::new()
                    .tool_call("call_1", "agent_hello_world", r#"{"name":"Ada"}"#)
                    .tool_call("call_2", "agent_hello_world", r#"{"name":"Bob"}"#)
                    .tool_call("call_3", "agent_hello_world", r#"{"name":"Cy"}"#),
                ScriptedTurn::new().text("Done."),
            ])
            .repeating(),
        )
        .catalog(catalog.clone())
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let composed = Agent::builder()
        .model(
            ScriptedModel::new([
                ScriptedTurn::new().text(
                    r#"{"message":"","calls":[{"_tool":"agent_hello_world","_activity":"","name":"Ada"},{"_tool":"agent_hello_world","_activity":"","name":"Bob"},{"_tool":"agent_hello_world","_activity":"","name":"Cy"}]}"#,
                ),
                ScriptedTurn::new().text(r#"{"message":"Done.","calls":[]}"#),
            ])
            .repeating(),
        )
        .catalog(catalog)
        .call_mode(aptix::agent::CallMode::Composed)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    // Both must take the path they are named for: three good results, then
    // a completed run.
    runtime.block_on(async {
        for agent in [&native, &composed] {
            let mut conversation = Conversation::new("check");
            let events: Vec<AgentEvent> = agent
                .run(&mut conversation, Input::User("greet them".into()))
                .collect()
                .await;
            let good = events
                .iter()
                .filter(|event| {
                    matches!(event, AgentEvent::ToolCallResult { envelope, .. } if envelope["ok"] == true)
                })
                .count();
            assert!(
                good == 3
                    && matches!(
                        events.last(),
                        Some(AgentEvent::Done {
                            reason: DoneReason::Completed,
                            ..
                        })
                    ),
                "the run did not make three good calls: {events:?}"
            );
        }
    });
    measure_runs(
        c,
        &runtime,
        "composed calls (3 calls, 2 model calls)",
        "greet them",
        &[
            ("baseline: native tool calls", &native),
            ("aptix: composed calls", &composed),
        ],
    );
}

/// Each agent's run on `input`, read to its end, as one benchmark of `group`.
fn measure_runs(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    group: &str,
    input: &str,
    runs: &[(&str, &Agent)],
) {
    let mut group = c.benchmark_group(group);
    for (name, agent) in runs {
        group.bench_function(*name, |b| {
            b.to_async(runtime).iter(|| async {
                let mut conversation = Conversation::new("bench");
                let events = agent
                    .run(&mut conversation, Input::User(input.into()))
                    .count()
                    .await;
                black_box(events)
            });
        });
    }
    group.finish();
}

/// One turn of `n` calls followed by its results, in order or reversed.
fn big_turn(n: usize, reversed: bool) -> Vec<Message> {
    let calls: Vec<AssistantToolCall> = (0..n)
        .map(|i| AssistantToolCall {
            id: format!("call_{i}"),
            name: "record".into(),
            arguments: "{}".into(),
        })
        .collect();
    let mut results: Vec<Message> = calls
        .iter()
        .map(|call| Message::Tool {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content: r#"{"ok":true,"result":1}"#.into(),
            is_error: false,
            attachments: Vec::new(),
        })
        .collect();
    if reversed {
        results.reverse();
    }
    let mut messages = vec![
        Message::user("go"),
        Message::Assistant {
            runnable: None,
            content: String::new(),
            tool_calls: calls,
            thinking: Vec::new(),
            server_blocks: Vec::new(),
        },
    ];
    messages.extend(results);
    messages.push(Message::user("next"));
    messages
}

fn repair(c: &mut Criterion) {
    let mut group = c.benchmark_group("transcript repair (one turn of n calls)");
    group.sample_size(10);
    // Under `cargo test --all-targets` (no `--bench` argument) criterion runs
    // each routine once; the inputs are kept small there too.
    let sizes: &[usize] = if std::env::args().any(|arg| arg == "--bench") {
        &[10_000, 40_000]
    } else {
        &[100]
    };
    for &n in sizes {
        for reversed in [false, true] {
            let messages = big_turn(n, reversed);
            let order = if reversed { "reversed" } else { "in order" };
            group.bench_function(format!("baseline: clone, n={n}, {order}"), |b| {
                b.iter(|| black_box(messages.clone()));
            });
            group.bench_function(format!("aptix: clone + repair, n={n}, {order}"), |b| {
                b.iter(|| {
                    let mut copy = messages.clone();
                    black_box(transcript::repair(&mut copy, Some("bench")));
                    copy
                });
            });
        }
    }
    group.finish();
}

/// One call of a progressive tool: reporting nothing (the baseline), 10 000
/// progress updates, or 1 000 partial results, each run read to its end.
fn progress_updates(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let catalog = Catalog::builder()
        .tool::<ReportTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let agent = |arguments: &str| {
        Agent::builder()
            .model(
                ScriptedModel::new([
                    ScriptedTurn::new().tool_call("call_1", "report", arguments),
                    ScriptedTurn::new().text("Done."),
                ])
                .repeating(),
            )
            .catalog(catalog.clone())
            .build()
            .unwrap_or_else(|error| panic!("{error}"))
    };
    let runs = [
        (
            "baseline: no reports",
            agent(r#"{"progress":0,"partials":0}"#),
            0,
        ),
        (
            "10 000 progress updates",
            agent(r#"{"progress":10000,"partials":0}"#),
            0,
        ),
        (
            "1 000 partial results",
            agent(r#"{"progress":0,"partials":1000}"#),
            1000,
        ),
    ];
    // Each run must complete, with every partial result shown.
    runtime.block_on(async {
        for (name, agent, partials) in &runs {
            let mut conversation = Conversation::new("check");
            let events: Vec<AgentEvent> = agent
                .run(&mut conversation, Input::User("report".into()))
                .collect()
                .await;
            let shown = events
                .iter()
                .filter(|event| matches!(event, AgentEvent::ToolPartial { .. }))
                .count();
            assert!(
                shown == *partials
                    && matches!(
                        events.last(),
                        Some(AgentEvent::Done {
                            reason: DoneReason::Completed,
                            ..
                        })
                    ),
                "{name} did not complete with its partial results: {events:?}"
            );
        }
    });
    let runs: Vec<(&str, &Agent)> = runs.iter().map(|(name, agent, _)| (*name, agent)).collect();
    measure_runs(
        c,
        &runtime,
        "progressive tool (one call, 2 model calls)",
        "report",
        &runs,
    );
}

/// A hook that lets every call through: what any hook costs.
struct PassThrough;

impl aptix::agent::ToolHook for PassThrough {
    fn name(&self) -> &str {
        "pass_through"
    }
}

/// An agent whose model calls `agent_hello_world` once and then answers,
/// again on every run, as `configure` sets it up.
fn round_trip_agent(configure: impl FnOnce(AgentBuilder) -> AgentBuilder) -> Agent {
    let catalog = Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let builder = Agent::builder()
        .model(
            ScriptedModel::new([
                ScriptedTurn::new().tool_call("call_1", "agent_hello_world", r#"{"name":"Ada"}"#),
                ScriptedTurn::new().text("Done."),
            ])
            .repeating(),
        )
        .catalog(catalog);
    configure(builder)
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// Checks that each agent runs the tool, then measures its round trips.
fn measure_round_trips(c: &mut Criterion, group: &str, runs: &[(&str, Agent)]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    runtime.block_on(async {
        for (name, agent) in runs {
            let mut conversation = Conversation::new("check");
            let events: Vec<AgentEvent> = agent
                .run(&mut conversation, Input::User("greet Ada".into()))
                .collect()
                .await;
            let tool_ok = events.iter().any(|event| {
                matches!(event, AgentEvent::ToolCallResult { envelope, .. } if envelope["ok"] == true)
            });
            assert!(tool_ok, "{name} did not run the tool: {events:?}");
        }
    });
    let runs: Vec<(&str, &Agent)> = runs.iter().map(|(name, agent)| (*name, agent)).collect();
    measure_runs(c, &runtime, group, "greet Ada", &runs);
}

/// The tool round trip with 0, 1 and 3 hooks.
fn hooks(c: &mut Criterion) {
    let with_hooks = |hooks: usize| {
        round_trip_agent(|mut builder| {
            for _ in 0..hooks {
                builder = builder.hook(PassThrough);
            }
            builder
        })
    };
    measure_round_trips(
        c,
        "hooks (tool round trip, 2 model calls, 1 call)",
        &[
            ("baseline: no hook", with_hooks(0)),
            ("one hook", with_hooks(1)),
            ("three hooks", with_hooks(3)),
        ],
    );
}

/// The tool round trip with an approval policy that lets every call run,
/// and with a context budget the run stays under (the retention scan of
/// every request), against the same round trip without either.
fn policy_and_budget(c: &mut Criterion) {
    measure_round_trips(
        c,
        "approval policy and context budget (tool round trip, 2 model calls, 1 call)",
        &[
            ("baseline: neither", round_trip_agent(|builder| builder)),
            (
                "approval policy (auto)",
                round_trip_agent(|builder| {
                    builder.approval_policy(|_: &aptix::agent::ApprovalCall<'_>| {
                        aptix::agent::ApprovalDecision::Auto
                    })
                }),
            ),
            (
                "context budget (not reached)",
                round_trip_agent(|builder| builder.context_budget(100_000)),
            ),
        ],
    );
}

criterion_group!(
    benches,
    retries,
    policy_and_budget,
    hooks,
    assembly,
    loop_overhead,
    composed_calls,
    progress_updates,
    repair
);
criterion_main!(benches);
