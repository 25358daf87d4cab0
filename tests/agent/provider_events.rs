//! What a run shows of what the provider did on its own side: the model's
//! reasoning as it streams (kept with the turn, never logged), and the
//! tools the provider ran, as calls and results of `executor = provider`
//! tools, their blocks kept for the provider.

use std::sync::Arc;

use aptix::model::{HostedToolEvent, ModelEvent, ThinkingDelta};
use aptix::prelude::*;
use aptix::transcript::{Message, ThinkingBlock};
use aptix::{
    Agent, AgentEvent, Conversation, Input, agent::ToolKind, meta::Approval, meta::ExecutorKind,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::json;

use crate::common::{Captured, capture_logs};

/// Arguments of `hosted_search`, which the provider runs.
#[agent_tool(name = "hosted_search", usage = "Call to search the web.", executor = provider)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebSearch {
    /// The query.
    pub query: String,
}

/// Arguments of `recall`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Recall {
    /// What to recall.
    pub query: String,
}

/// Recalls something.
#[agent_tool(name = "recall", usage = "Call to recall something.")]
async fn recall(args: Recall) -> Result<String, ToolError> {
    Ok(format!("found {}", args.query))
}

/// Runs an agent over `model` and `catalog` on a new conversation `id`,
/// from `input` to its end: the events and the conversation after.
async fn run(
    model: Arc<ScriptedModel>,
    catalog: aptix::CatalogBuilder,
    id: &str,
    input: &str,
) -> (Vec<AgentEvent>, Conversation) {
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(catalog.build().unwrap_or_else(|e| panic!("{e}")))
        .build()
        .unwrap_or_else(|e| panic!("the model hosts the provider's tool: {e}"));
    let mut conversation = Conversation::new(id);
    let events = agent
        .run(&mut conversation, Input::User(input.into()))
        .collect()
        .await;
    (events, conversation)
}

const SECRET_THOUGHT: &str = "the user's PIN is 4921";

fn thinking(delta: ThinkingDelta) -> ModelEvent {
    ModelEvent::ThinkingDelta(delta)
}

#[tokio::test]
async fn reasoning_is_shown_as_it_streams_kept_with_the_turn_and_never_logged() {
    let captured = Captured::default();
    let writer = captured.clone();
    let _logs = capture_logs(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .event(thinking(ThinkingDelta::Text {
                index: 0,
                text: "First, ".into(),
            }))
            .event(thinking(ThinkingDelta::Text {
                index: 0,
                text: SECRET_THOUGHT.into(),
            }))
            .event(thinking(ThinkingDelta::Signature {
                index: 0,
                signature: "sig==".into(),
            }))
            .event(thinking(ThinkingDelta::Redacted {
                index: 1,
                data: "encrypted".into(),
            }))
            .event(thinking(ThinkingDelta::Reasoning {
                index: 2,
                text: "then look it up".into(),
            }))
            .tool_call("call_1", "recall", r#"{"query":"x"}"#),
        ScriptedTurn::new()
            .event(thinking(ThinkingDelta::Preview {
                text: "a summary".into(),
            }))
            .event(thinking(ThinkingDelta::Block {
                index: 0,
                block: ThinkingBlock::OpenaiReasoning {
                    item: json!({ "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA" }),
                },
            }))
            .text("Done."),
    ]));
    let (events, conversation) = run(
        model.clone(),
        aptix::tools![RecallTool],
        "conv-reasoning",
        "Go.",
    )
    .await;
    let shown: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ReasoningDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        ["First, ", SECRET_THOUGHT, "then look it up", "a summary"],
        "every piece of reasoning with text is shown, in order; nothing of the redacted block"
    );
    let reasoned = events
        .iter()
        .position(|event| matches!(event, AgentEvent::ReasoningDelta(_)));
    let called = events
        .iter()
        .position(|event| matches!(event, AgentEvent::ToolCallStart { .. }));
    assert!(
        reasoned < called,
        "reasoning comes before the call it led to"
    );

    // Kept with the turn, in order, and sent with the next request.
    let kept = vec![
        ThinkingBlock::Thinking {
            thinking: format!("First, {SECRET_THOUGHT}"),
            signature: "sig==".into(),
        },
        ThinkingBlock::RedactedThinking {
            data: "encrypted".into(),
        },
        ThinkingBlock::Reasoning {
            text: "then look it up".into(),
        },
    ];
    let Some(Message::Assistant { thinking, .. }) = conversation.messages.get(1) else {
        panic!("the first turn is kept: {:?}", conversation.messages)
    };
    assert_eq!(thinking, &kept);
    let requests = model.requests();
    assert!(
        requests[1].messages.iter().any(
            |message| matches!(message, Message::Assistant { thinking, .. } if thinking == &kept)
        ),
        "the second request carries the first turn's reasoning"
    );
    let Some(Message::Assistant { thinking, .. }) = conversation.messages.last() else {
        panic!("the last turn is kept")
    };
    assert_eq!(
        thinking,
        &[ThinkingBlock::OpenaiReasoning {
            item: json!({ "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA" }),
        }],
        "a whole block is kept, a preview is not"
    );
    let logs = captured.text();
    assert!(!logs.is_empty(), "the run logged something");
    assert!(
        !logs.contains(SECRET_THOUGHT),
        "reasoning never reaches the logs: {logs}"
    );
}

const PROVIDER: Option<ToolKind> = Some(ToolKind {
    executor: ExecutorKind::Provider,
    approval: Approval::Auto,
});

#[tokio::test]
async fn a_tool_the_provider_ran_is_shown_as_a_call_and_a_result_and_its_blocks_are_kept() {
    let call_block = json!({ "type": "server_tool_use", "id": "srvtoolu_1", "name": "hosted_search", "input": { "query": "rust" } });
    let result_block = json!({ "type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{ "type": "web_search_result", "url": "https://www.rust-lang.org" }] });
    let model = Arc::new(
        ScriptedModel::new([ScriptedTurn::new()
            .event(ModelEvent::Hosted(HostedToolEvent::Called {
                id: "srvtoolu_1".into(),
                name: "hosted_search".into(),
                input: json!({ "query": "rust" }),
            }))
            .event(ModelEvent::ServerBlock(call_block.clone()))
            .event(ModelEvent::Hosted(HostedToolEvent::Finished {
                id: "srvtoolu_1".into(),
                name: "hosted_search".into(),
                output: json!([{ "url": "https://www.rust-lang.org" }]),
                is_error: false,
            }))
            .event(ModelEvent::ServerBlock(result_block.clone()))
            .text("Rust's site is www.rust-lang.org.")])
        .hosting(["hosted_search"]),
    );
    let (events, conversation) = run(
        model,
        aptix::Catalog::builder().tool::<WebSearch>(),
        "conv-hosted",
        "Find Rust's site.",
    )
    .await;
    let start = events.iter().position(|event| {
        matches!(event, AgentEvent::ToolCallStart { id, name, kind, arguments, .. }
            if id == "srvtoolu_1" && name == "hosted_search" && *kind == PROVIDER
                && *arguments == json!({ "query": "rust" }))
    });
    let result = events.iter().position(|event| {
        matches!(event, AgentEvent::ToolCallResult { id, kind, envelope, .. }
            if id == "srvtoolu_1" && *kind == PROVIDER
                && *envelope == json!({ "ok": true, "result": [{ "url": "https://www.rust-lang.org" }] }))
    });
    assert!(
        matches!((start, result), (Some(start), Some(result)) if start < result),
        "the provider's call and its result are shown, in order: {events:?}"
    );
    let Some(Message::Assistant {
        server_blocks,
        tool_calls,
        ..
    }) = conversation.messages.last()
    else {
        panic!("the turn is kept")
    };
    assert_eq!(server_blocks, &[call_block, result_block]);
    assert!(tool_calls.is_empty(), "nothing was dispatched here");
    let Some(AgentEvent::Done { summary, .. }) = events.last() else {
        panic!("the run ends with Done")
    };
    assert_eq!(
        summary
            .tools
            .get("hosted_search")
            .map(|stats| (stats.calls, stats.failed)),
        Some((1, 0)),
        "the summary counts the provider's call with the agent's"
    );
    assert!(
        !conversation
            .messages
            .iter()
            .any(|message| matches!(message, Message::Tool { .. })),
        "a provider's tool gets no result message from the agent"
    );
}

#[tokio::test]
async fn the_tokens_a_providers_cache_saved_are_summed_on_done() {
    let cached = |read, written| aptix::model::Usage {
        cache_read_tokens: read,
        cache_write_tokens: written,
        ..aptix::model::Usage::new(1_000, 10)
    };
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("call_1", "recall", r#"{"query":"x"}"#)
            .with_usage(cached(0, 900)),
        ScriptedTurn::new().text("Done.").with_usage(cached(900, 0)),
    ]));
    let (events, _) = run(model, aptix::tools![RecallTool], "conv-cache", "Go.").await;
    let Some(AgentEvent::Done { usage, .. }) = events.last() else {
        panic!("the run ends with Done")
    };
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens
        ),
        (2_000, 900, 900)
    );
}

fn hosted(called: bool, id: &str) -> ModelEvent {
    ModelEvent::Hosted(if called {
        HostedToolEvent::Called {
            id: id.into(),
            name: "hosted_search".into(),
            input: json!({ "query": "q" }),
        }
    } else {
        HostedToolEvent::Finished {
            id: id.into(),
            name: "hosted_search".into(),
            output: json!([]),
            is_error: false,
        }
    })
}

/// The provider picks its calls' ids: none, one twice, or the id of a call
/// of the agent's. Each is shown under an id no other call has, its result
/// under the same one, and the turn's own call keeps clear of them all.
#[tokio::test]
async fn a_providers_call_ids_never_pass_for_another_calls() {
    let model = Arc::new(
        ScriptedModel::new([
            ScriptedTurn::new().tool_call("call_1", "recall", r#"{"query":"x"}"#),
            ScriptedTurn::new()
                .event(hosted(true, ""))
                .event(hosted(false, ""))
                .event(hosted(true, "call_1"))
                .event(hosted(false, "call_1"))
                .event(hosted(true, "srv_1"))
                .event(hosted(true, "srv_1"))
                .event(hosted(false, "srv_1"))
                .event(hosted(false, "srv_1"))
                .tool_call("srv_1", "recall", r#"{"query":"y"}"#),
            ScriptedTurn::new().text("Done."),
        ])
        .hosting(["hosted_search"]),
    );
    let (events, _) = run(
        model,
        aptix::Catalog::builder()
            .tool::<WebSearch>()
            .tool::<RecallTool>(),
        "conv-hosted-ids",
        "Go.",
    )
    .await;
    let provider = |kind: &Option<ToolKind>| *kind == PROVIDER;
    let started: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStart { id, kind, .. } if provider(kind) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let finished: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { id, kind, .. } if provider(kind) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 4);
    assert_eq!(
        started, finished,
        "each result is shown under its call's id"
    );
    let unique: std::collections::HashSet<&str> = started.iter().copied().collect();
    assert_eq!(
        unique.len(),
        4,
        "no two hosted calls share an id: {started:?}"
    );
    assert!(!started.contains(&""), "no empty id is shown");
    assert!(
        !started.contains(&"call_1"),
        "an id of the agent's call is never reused"
    );
    assert_eq!(started[2], "srv_1", "a fresh provider id is shown as it is");
    let own: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStart { id, name, .. } if name == "recall" => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(own.len(), 2);
    assert!(
        !started.contains(&own[1]),
        "the turn's own call keeps clear of the provider's ids: {own:?} {started:?}"
    );
}

/// Tens of thousands of provider calls in one turn, within its byte limit:
/// each is paired with its result by id (a map, not a scan: 20,000 calls
/// and 20,000 results took 6.7 s of debug-build CPU before, linear now)
/// and counted.
#[tokio::test]
async fn many_provider_calls_in_one_turn_are_all_counted() {
    const CALLS: usize = 20_000;
    let mut turn = ScriptedTurn::new();
    for n in 0..CALLS {
        turn = turn.event(hosted(true, &format!("srv_{n}")));
    }
    for n in (0..CALLS).rev() {
        turn = turn.event(hosted(false, &format!("srv_{n}")));
    }
    let model = Arc::new(ScriptedModel::new([turn.text("Done.")]).hosting(["hosted_search"]));
    let (events, _) = run(
        model,
        aptix::Catalog::builder().tool::<WebSearch>(),
        "conv-hosted-many",
        "Go.",
    )
    .await;
    let Some(AgentEvent::Done { summary, .. }) = events.last() else {
        panic!("the run ends with Done")
    };
    assert_eq!(
        summary.tools.get("hosted_search").map(|stats| stats.calls),
        Some(CALLS)
    );
}

/// A call given a new id (its id was used before in the conversation)
/// keeps what the provider keyed by it: Gemini's thought signature goes
/// back on that call, or Gemini refuses the next request.
#[tokio::test]
async fn a_renamed_call_keeps_its_thought_signature() {
    let signed = |id: &str, signature: &str| {
        ModelEvent::ThinkingDelta(ThinkingDelta::Block {
            index: 0,
            block: ThinkingBlock::Gemini {
                part: json!({ "thoughtSignature": signature }),
                tool_call_id: Some(id.into()),
            },
        })
    };
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .event(signed("call_0", "first"))
            .tool_call("call_0", "recall", r#"{"query":"a"}"#),
        // The provider numbers its calls per turn: `call_0` again, twice.
        ScriptedTurn::new()
            .event(signed("call_0", "second"))
            .event(signed("call_0", "third"))
            .tool_call("call_0", "recall", r#"{"query":"b"}"#)
            .tool_call("call_0", "recall", r#"{"query":"c"}"#),
        ScriptedTurn::new().text("Done."),
    ]));
    let (_, conversation) = run(
        model,
        aptix::tools![RecallTool],
        "conv-renamed-signature",
        "Go.",
    )
    .await;
    let Some(Message::Assistant {
        tool_calls,
        thinking,
        ..
    }) = conversation.messages.get(3)
    else {
        panic!("the second turn is kept: {:?}", conversation.messages)
    };
    let ids: Vec<&str> = tool_calls.iter().map(|call| call.id.as_str()).collect();
    assert!(
        !ids.contains(&"call_0"),
        "both calls of the second turn were given new ids: {ids:?}"
    );
    let keyed: Vec<(Option<&str>, &str)> = thinking
        .iter()
        .filter_map(|block| match block {
            ThinkingBlock::Gemini { part, tool_call_id } => Some((
                tool_call_id.as_deref(),
                part["thoughtSignature"].as_str().unwrap_or(""),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        keyed,
        [(Some(ids[0]), "second"), (Some(ids[1]), "third")],
        "each signature follows its call to its new id"
    );
}
