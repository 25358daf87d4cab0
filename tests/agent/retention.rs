//! Context that stays affordable: per-tool `retention` and the agent's
//! `context_budget` stub old tool results in the *request*; the stored
//! transcript keeps everything; the same transcript always gives the same
//! request (after a restart too), and the budget evicts in steps so the
//! request's prefix stays stable between evictions.

use std::sync::Arc;

use aptix::durable::DurableAgent;
use aptix::model::ChatRequest;
use aptix::prelude::*;
use aptix::store::{MemoryStore, SqliteStore, Store};
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, Input};
use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::Value;

/// Arguments of the test tools.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Query {
    /// What to look for.
    pub q: String,
}

/// Searches (read-only); only its last two results stay whole.
#[agent_tool(
    name = "search",
    usage = "Call to search.",
    read_only = true,
    retention = "keep_last(2)"
)]
async fn search(args: Query) -> Result<String, ToolError> {
    Ok(format!("results for {}: {}", args.q, "x".repeat(400)))
}

/// Reads the news; a result stays whole for one model turn.
#[agent_tool(
    name = "news",
    usage = "Call to read the news.",
    read_only = true,
    retention = "turns(1)"
)]
async fn news(args: Query) -> Result<String, ToolError> {
    Ok(format!("news about {}: {}", args.q, "n".repeat(400)))
}

/// The user's profile: never evicted.
#[agent_tool(
    name = "profile",
    usage = "Call to read the profile.",
    read_only = true,
    retention = "never_evict"
)]
async fn profile(args: Query) -> Result<String, ToolError> {
    Ok(format!("profile {}: {}", args.q, "p".repeat(400)))
}

/// Sends a message: it has effects, and no retention of its own.
#[agent_tool(name = "send", usage = "Call to send a message.")]
async fn send(args: Query) -> Result<String, ToolError> {
    Ok(format!("sent {}: {}", args.q, "s".repeat(1600)))
}

fn catalog() -> Catalog {
    aptix::tools![SearchTool, NewsTool, ProfileTool, SendTool]
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One call of `tool` per turn, then an answer.
fn turns(calls: &[&str]) -> Vec<ScriptedTurn> {
    let mut turns: Vec<ScriptedTurn> = calls
        .iter()
        .enumerate()
        .map(|(n, tool)| {
            ScriptedTurn::new().tool_call(&format!("call_{n}"), tool, &format!(r#"{{"q":"q{n}"}}"#))
        })
        .collect();
    turns.push(ScriptedTurn::new().text("Done."));
    turns
}

async fn run(agent: &Agent, conversation: &mut Conversation) -> Vec<AgentEvent> {
    agent
        .run(conversation, Input::User("Go.".into()))
        .collect()
        .await
}

fn agent(model: Arc<ScriptedModel>, budget: Option<usize>) -> Agent {
    let mut builder = Agent::builder()
        .shared_model(model)
        .catalog(catalog())
        .max_iterations(100);
    if let Some(budget) = budget {
        builder = builder.context_budget(budget);
    }
    builder.build().unwrap_or_else(|e| panic!("{e}"))
}

/// The tool results a request carries: (call id, whether stubbed, content).
fn carried(request: &ChatRequest) -> Vec<(String, bool, String)> {
    request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((
                tool_call_id.clone(),
                content.contains("\"evicted\""),
                content.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn stubbed(request: &ChatRequest) -> Vec<String> {
    carried(request)
        .into_iter()
        .filter(|(_, stub, _)| *stub)
        .map(|(id, _, _)| id)
        .collect()
}

#[tokio::test]
async fn keep_last_stubs_all_but_the_last_results_of_its_tool_in_the_request_only() {
    let model = Arc::new(ScriptedModel::new(turns(&[
        "search", "search", "send", "search", "search",
    ])));
    let agent = agent(model.clone(), None);
    let mut conversation = Conversation::new("keep-last");
    let events = run(&agent, &mut conversation).await;
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            reason: DoneReason::Completed,
            ..
        })
    ));
    let requests = model.requests();
    let last = &requests[requests.len() - 1];
    // Four searches: the first two are stubbed; `send` (no rule) is whole.
    assert_eq!(stubbed(last), vec!["call_0", "call_1"]);
    let stub = &carried(last)[0].2;
    let stub: Value = serde_json::from_str(stub).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stub["ok"], true);
    let text = stub["evicted"].as_str().unwrap_or_default();
    assert!(text.contains("`search`"), "{text}");
    assert!(text.contains("retention keep_last(2)"), "{text}");
    assert!(
        text.contains("Call `search` again with the same arguments"),
        "{text}"
    );
    // The stored transcript keeps every result whole.
    let whole = conversation
        .messages
        .iter()
        .filter(|message| {
            matches!(message, Message::Tool { content, .. } if !content.contains("evicted"))
        })
        .count();
    assert_eq!(whole, 5);
    // Stubbed once, stubbed in every later request.
    for pair in requests.windows(2) {
        for id in stubbed(&pair[0]) {
            assert!(stubbed(&pair[1]).contains(&id), "{id} came back");
        }
    }
}

#[tokio::test]
async fn turns_keeps_a_result_whole_for_that_many_model_turns() {
    let model = Arc::new(ScriptedModel::new(turns(&["news", "send", "send"])));
    let agent = agent(model.clone(), None);
    let mut conversation = Conversation::new("turns");
    run(&agent, &mut conversation).await;
    let requests = model.requests();
    // Request 1 answers call_0 (news): whole. Request 2: one turn later, stubbed.
    assert!(stubbed(&requests[1]).is_empty());
    assert_eq!(stubbed(&requests[2]), vec!["call_0"]);
    assert_eq!(stubbed(&requests[3]), vec!["call_0"]);
}

#[tokio::test]
async fn the_budget_stubs_the_oldest_results_in_steps_and_never_a_never_evict_one() {
    // Each `send` result is about 430 estimated tokens; the budget holds
    // about 9, and a step (a quarter of it) 2 to 3.
    let calls: Vec<&str> = std::iter::once("profile")
        .chain(std::iter::repeat_n("send", 30))
        .collect();
    let model = Arc::new(ScriptedModel::new(turns(&calls)));
    let agent = agent(model.clone(), Some(4000));
    let mut conversation = Conversation::new("budget");
    run(&agent, &mut conversation).await;
    let requests = model.requests();
    let mut changes = 0;
    let mut over = 0;
    for pair in requests.windows(2) {
        let (before, after) = (stubbed(&pair[0]), stubbed(&pair[1]));
        // The profile is never stubbed; the latest turn's result neither.
        assert!(!after.contains(&"call_0".to_owned()), "{after:?}");
        let latest = carried(&pair[1]).last().map(|(id, _, _)| id.clone());
        assert!(latest.is_none_or(|id| !after.contains(&id)));
        // Oldest first: the stubbed ones are a run of the oldest `send`s.
        let expected: Vec<String> = (1..=after.len()).map(|n| format!("call_{n}")).collect();
        assert_eq!(after, expected);
        // What is stubbed stays stubbed.
        assert!(before.iter().all(|id| after.contains(id)));
        if !after.is_empty() {
            over += 1;
        }
        if before != after {
            changes += 1;
            // A step: never one result at a time.
            assert!(
                after.len() >= before.len() + 2,
                "{} then {}",
                before.len(),
                after.len()
            );
        } else {
            // Nothing new stubbed: the request extends the previous one.
            let (a, b) = (&pair[0].messages, &pair[1].messages);
            assert_eq!(
                &b[..a.len()],
                &a[..],
                "the prefix changed without an eviction"
            );
        }
    }
    assert!(over > 10, "the budget never applied: {over}");
    assert!(
        changes < over,
        "evicted at {changes} of {over} requests: not in steps"
    );
    // The stub of a tool with effects says not to call it again to see it.
    let last = &requests[requests.len() - 1];
    let stub = &carried(last)[1].2;
    assert!(stub.contains("would do it again"), "{stub}");
    assert!(stub.contains("context budget"), "{stub}");
}

fn durable(model: ScriptedModel, store: Arc<dyn Store>) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(model)
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .build()
}

async fn stubs_survive_a_restart(
    store: Arc<dyn Store>,
    reopen: impl AsyncFnOnce() -> Arc<dyn Store>,
) {
    let id = "retention-restart";
    let first = durable(ScriptedModel::new(turns(&["news", "search"])), store);
    let events: Vec<AgentEvent> = first
        .send(id, Input::User("Go.".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            reason: DoneReason::Completed,
            ..
        })
    ));
    drop(first);
    // A new process: the next request stubs what the first process's
    // would have (the news result is two turns old by then).
    let model = Arc::new(ScriptedModel::new(vec![ScriptedTurn::new().text("Again.")]));
    let second = DurableAgent::builder(
        Agent::builder()
            .shared_model(model.clone())
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        reopen().await,
    )
    .deadline_worker(None)
    .build();
    let _: Vec<AgentEvent> = second
        .send(id, Input::User("And?".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    let requests = model.requests();
    assert_eq!(stubbed(&requests[0]), vec!["call_0"]);
    // The store keeps the result whole.
    let stored = second
        .conversation(id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("gone"));
    assert!(
        stored
            .conversation
            .messages
            .iter()
            .all(|m| !matches!(m, Message::Tool { content, .. } if content.contains("evicted")))
    );
}

#[tokio::test]
async fn retention_holds_after_a_restart_on_memory() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let again = store.clone();
    stubs_survive_a_restart(store, async move || again).await;
}

#[tokio::test]
async fn retention_holds_after_a_restart_on_sqlite() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "aptix-retention-{}-{}.db",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&path)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let reopen = path.clone();
    stubs_survive_a_restart(store, async move || {
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&reopen)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
        store
    })
    .await;
}

#[tokio::test]
async fn the_stub_is_what_reaches_the_provider() {
    let server = MockOpenAiServer::start([
        OpenAiTurn::new()
            .tool_call("call_0", "news", &[r#"{"q":"a"}"#])
            .into_response(),
        OpenAiTurn::new()
            .tool_call("call_1", "send", &[r#"{"q":"b"}"#])
            .into_response(),
        OpenAiTurn::text("Done.").into_response(),
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let model =
        aptix::model::openai::OpenAiChat::new("gpt-4o-mini").with_base_url(server.base_url());
    let agent = Agent::builder()
        .model(model)
        .catalog(catalog())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("bytes");
    run(&agent, &mut conversation).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let tool_messages = |n: usize| -> Vec<String> {
        requests[n].body["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    // The second request carries the news whole; the third, a turn later, the stub.
    assert!(tool_messages(1)[0].contains("nnnn"));
    let third = tool_messages(2);
    assert!(!third[0].contains("nnnn"), "{}", third[0]);
    assert!(third[0].contains("retention turns(1)"), "{}", third[0]);
    assert!(third[1].contains("ssss"));
}
