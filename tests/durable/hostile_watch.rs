//! What a durable agent reads back for a user interface, against hostile
//! input: a stored turn shaped by a hostile model (many tiny calls, within
//! the turn limits) read by `calls`, and watchers of conversation ids an
//! attacker chose.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aptix::durable::{CallProgress, DurableAgent};
use aptix::store::{MemoryStore, Store};
use aptix::transcript::{AssistantToolCall, Message};
use aptix::{Agent, Conversation};
use aptix_testkit::ScriptedModel;
use futures_util::StreamExt;

use crate::tools::OpenPage;

fn durable(store: Arc<dyn Store>) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(Vec::new()))
            .catalog(
                aptix::Catalog::builder()
                    .tool::<OpenPage>()
                    .build()
                    .unwrap_or_else(|e| panic!("{e}")),
            )
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .deadline_worker(None)
    .build()
}

/// A model's turn of 40,000 tiny calls fits the default turn limit
/// (8 MiB, 64 bytes counted a call); every call past `max_calls_per_turn`
/// gets its result without running. `calls` on that stored turn must cost
/// time linear in it, not one scan of the results per call: a user
/// interface reads it on every event or on a timer.
#[tokio::test]
async fn calls_reads_a_turn_of_many_calls_in_linear_time() {
    const CALLS: usize = 40_000;
    let store = Arc::new(MemoryStore::new());
    let mut conversation = Conversation::new("many-calls");
    conversation.messages.push(Message::user("go"));
    conversation.messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: (0..CALLS)
            .map(|index| AssistantToolCall {
                id: format!("c{index}"),
                name: "open_page".to_owned(),
                arguments: "{}".to_owned(),
            })
            .collect(),
        thinking: Vec::new(),
        server_blocks: Vec::new(),
        runnable: None,
    });
    conversation
        .messages
        .extend((0..CALLS).map(|index| Message::Tool {
            tool_call_id: format!("c{index}"),
            name: "open_page".to_owned(),
            content: r#"{"ok":false,"error":{"code":"failed","message":"not run"}}"#.to_owned(),
            is_error: true,
            attachments: Vec::new(),
        }));
    assert!(
        store
            .create_conversation(&conversation, 0)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    let agent = durable(store);
    let started = Instant::now();
    let calls = agent
        .calls("many-calls")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let took = started.elapsed();
    assert_eq!(calls.len(), CALLS);
    assert!(
        calls
            .iter()
            .all(|call| call.progress == CallProgress::Errored)
    );
    assert_eq!(calls[CALLS - 1].tool_call_id, format!("c{}", CALLS - 1));
    assert!(
        took < Duration::from_secs(3),
        "`calls` took {took:?} for {CALLS} calls"
    );
}

/// A watcher of a conversation that never runs waits (a web handler
/// bounds it with a time-out) and leaves nothing running when dropped;
/// many such ids, chosen by an attacker, each end with their watcher.
#[tokio::test]
async fn watchers_of_ids_that_never_run_wait_and_go() {
    let agent = durable(Arc::new(MemoryStore::new()));
    for index in 0..10_000 {
        let mut watch = agent.watch(&format!("attacker-{index}"));
        if index % 1_000 == 0 {
            let nothing = tokio::time::timeout(Duration::from_millis(5), watch.next()).await;
            assert!(nothing.is_err(), "no run, no event: {nothing:?}");
        }
        assert_eq!(watch.skipped(), 0);
    }
    // The same id watched again waits as the first watcher did.
    let mut late = agent.watch("attacker-0");
    let nothing = tokio::time::timeout(Duration::from_millis(5), late.next()).await;
    assert!(nothing.is_err());
}
