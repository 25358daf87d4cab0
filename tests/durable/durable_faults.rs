//! Faults of durable runs, each reproduced on `MemoryStore`,
//! `SqliteStore` and `PostgresStore` (at `APTIX_TEST_PG_URL`; skipped with a
//! notice when it is unset, required when `CI=true`):
//!
//! - two calls of one turn with the same `tool_call_id`: an approval runs
//!   only the tool, and only the arguments, it was given for (also when the
//!   ledger is handed such a turn directly, past the agent loop's renaming);
//! - a resolved call settled before new user input, not after it;
//! - a resolution made while the suspending run's stream is still read;
//! - store errors after a resolution's compare-and-swap, and after a tool
//!   ran (a `Store` wrapper below fails chosen operations);
//! - approvals with changed arguments are visible to the model;
//! - found by tests/durable/durable_properties.rs: a failed save right after the
//!   model's turn, an `insert_call` applied but reported failed, and
//!   `ensure_started` called beside an ending run of its own process.
//!
//! Agents here run no deadline worker unless a test says so: tests share
//! one PostgreSQL, and a worker sweeps every conversation in it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{Backend, store, uuid};
use crate::tools::{ChargeTool, DeleteFileTool, FilePath, OpenPage, ran, runs_of};
use aptix::model::ChatModel;
use aptix::prelude::*;
use aptix::store::{
    Applied, Batch, CallRecord, CallState, ConversationStatus, Step, Store, StoreError,
    StoreFuture, StoredConversation, Write,
};
use aptix::transcript::Message;
use aptix::{
    Agent, AgentEvent, Catalog, Conversation, DoneReason, DurableAgent, Envelope, Input,
    Resolution, durable::ResolveError,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Tools: every run is recorded with its conversation and arguments.

/// What the client shows.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Shown {
    /// Whether it was shown.
    pub shown: bool,
}

/// Shows a file in the user's browser, once a person approves.
#[agent_tool(
    name = "show_file",
    usage = "Test tool.",
    executor = client,
    approval = requires_approval,
    output = Shown
)]
async fn show_file(args: FilePath) -> Result<FilePath, ToolError> {
    Ok(args)
}

/// Arguments of `send_email`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Email {
    /// To whom.
    pub to: String,
}

/// Sends an email (no approval).
#[agent_tool(name = "send_email", usage = "Test tool.")]
async fn send_email(args: Email, ctx: &ToolContext) -> Result<String, ToolError> {
    ran(ctx, "send_email", json!({"to": args.to}));
    Ok(format!("sent to {}", args.to))
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<ShowFileTool>()
        .tool::<DeleteFileTool>()
        .tool::<ChargeTool>()
        .tool::<SendEmailTool>()
        .tool::<OpenPage>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------------
// A store that fails chosen operations.

/// Wraps a store; each armed fault fails the next matching operations with
/// a backend error, after which the wrapper forwards again.
struct FaultyStore {
    inner: Arc<dyn Store>,
    /// Fails this many of the next `transition` calls (before they reach
    /// the store: nothing moves).
    fail_transitions: AtomicUsize,
    /// Once a `transition` to `Resolved` succeeds, fails the next `calls`.
    fail_calls_after_resolution: AtomicBool,
    fail_next_calls: AtomicBool,
    /// Fails the next `call` (one row read back).
    fail_next_call: AtomicBool,
    /// When nonzero, the save that many saves from now fails (before it
    /// reaches the store).
    fail_save_number: AtomicUsize,
    /// The next this many `insert_call`s are applied, then reported as
    /// failed (a lost acknowledgement).
    lose_insert_acks: AtomicUsize,
    /// Fails the next this many `insert_call`s (before they reach the
    /// store: nothing is written).
    fail_inserts: AtomicUsize,
    /// When armed, the first `calls` after a save as `Suspended` reads the
    /// ledger, signals `.0`, and answers only once `.1` is signalled: a run
    /// is held just after its last look for resolutions.
    hold_after_suspend: Mutex<Option<(Arc<tokio::sync::Notify>, Arc<tokio::sync::Notify>)>>,
    hold_next_calls: Mutex<Option<(Arc<tokio::sync::Notify>, Arc<tokio::sync::Notify>)>>,
    /// When set, the store-wide lists (what a sweep reads) show only the
    /// conversations whose id starts with it: a sweep in one test then
    /// leaves other tests' conversations on a shared PostgreSQL alone.
    scope: Option<String>,
}

#[derive(Debug)]
struct Injected;

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("injected transient failure (connection reset)")
    }
}

impl std::error::Error for Injected {}

impl FaultyStore {
    fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            fail_transitions: AtomicUsize::new(0),
            fail_calls_after_resolution: AtomicBool::new(false),
            fail_next_calls: AtomicBool::new(false),
            fail_next_call: AtomicBool::new(false),
            fail_save_number: AtomicUsize::new(0),
            lose_insert_acks: AtomicUsize::new(0),
            fail_inserts: AtomicUsize::new(0),
            hold_after_suspend: Mutex::new(None),
            hold_next_calls: Mutex::new(None),
            scope: None,
        })
    }

    fn scoped(inner: Arc<dyn Store>, prefix: &str) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            fail_transitions: AtomicUsize::new(0),
            fail_calls_after_resolution: AtomicBool::new(false),
            fail_next_calls: AtomicBool::new(false),
            fail_next_call: AtomicBool::new(false),
            fail_save_number: AtomicUsize::new(0),
            lose_insert_acks: AtomicUsize::new(0),
            fail_inserts: AtomicUsize::new(0),
            hold_after_suspend: Mutex::new(None),
            hold_next_calls: Mutex::new(None),
            scope: Some(prefix.to_owned()),
        })
    }

    fn in_scope(&self, conversation_id: &str) -> bool {
        self.scope
            .as_deref()
            .is_none_or(|prefix| conversation_id.starts_with(prefix))
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn injected<'a, T: Send + 'a>() -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Err(StoreError::backend(Injected))))
}

impl Store for FaultyStore {
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        now: i64,
    ) -> StoreFuture<'a, bool> {
        self.inner.create_conversation(conversation, now)
    }

    fn load_conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        self.inner.load_conversation(id)
    }

    fn claim_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        now: i64,
        lease_until: i64,
    ) -> StoreFuture<'a, Option<StoredConversation>> {
        self.inner.claim_conversation(id, owner, now, lease_until)
    }

    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()> {
        let due = self
            .fail_save_number
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            == Ok(1);
        if due {
            return injected();
        }
        if status == ConversationStatus::Suspended {
            let hold = lock(&self.hold_after_suspend).take();
            if hold.is_some() {
                *lock(&self.hold_next_calls) = hold;
            }
        }
        self.inner
            .save_conversation(conversation, owner, status, lease_until)
    }

    fn renew_lease<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        lease_until: i64,
    ) -> StoreFuture<'a, bool> {
        self.inner.renew_lease(id, owner, lease_until)
    }

    fn conversations_with_status<'a>(
        &'a self,
        status: ConversationStatus,
        limit: usize,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let mut ids = self
                .inner
                .conversations_with_status(status, usize::MAX)
                .await?;
            ids.retain(|id| self.in_scope(id));
            ids.truncate(limit);
            Ok(ids)
        })
    }

    fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool> {
        if Self::take(&self.fail_inserts) {
            return injected();
        }
        if Self::take(&self.lose_insert_acks) {
            return Box::pin(async move {
                self.inner.insert_call(record).await?;
                Err(StoreError::backend(Injected))
            });
        }
        self.inner.insert_call(record)
    }

    fn call<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
    ) -> StoreFuture<'a, Option<CallRecord>> {
        if self.fail_next_call.swap(false, Ordering::SeqCst) {
            return injected();
        }
        self.inner.call(conversation_id, tool_call_id, step)
    }

    fn calls<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<CallRecord>> {
        if self.fail_next_calls.swap(false, Ordering::SeqCst) {
            return injected();
        }
        if let Some((reached, release)) = lock(&self.hold_next_calls).take() {
            return Box::pin(async move {
                let calls = self.inner.calls(conversation_id).await;
                reached.notify_one();
                release.notified().await;
                calls
            });
        }
        self.inner.calls(conversation_id)
    }

    fn transition<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&'a str>,
        now: i64,
    ) -> StoreFuture<'a, bool> {
        if Self::take(&self.fail_transitions) {
            return injected();
        }
        Box::pin(async move {
            let moved = self
                .inner
                .transition(conversation_id, tool_call_id, step, from, to, outcome, now)
                .await?;
            if moved
                && to == CallState::Resolved
                && self
                    .fail_calls_after_resolution
                    .swap(false, Ordering::SeqCst)
            {
                self.fail_next_calls.store(true, Ordering::SeqCst);
            }
            Ok(moved)
        })
    }

    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool> {
        self.inner
            .set_deadline(conversation_id, tool_call_id, step, deadline)
    }

    fn due_calls<'a>(&'a self, now: i64, limit: usize) -> StoreFuture<'a, Vec<CallRecord>> {
        Box::pin(async move {
            let mut due = self.inner.due_calls(now, usize::MAX).await?;
            due.retain(|record| self.in_scope(&record.conversation_id));
            due.truncate(limit);
            Ok(due)
        })
    }

    /// The same faults as the single writes, for a batch: a write that
    /// would fail fails the whole batch before it reaches the store (nothing
    /// is written), a lost acknowledgement comes after the whole batch was
    /// applied, and the batch itself goes to the store in one piece, as
    /// atomic as the store's own.
    fn apply<'a>(&'a self, batch: &'a Batch<'a>) -> StoreFuture<'a, Applied> {
        let mut fail = false;
        let mut lose_ack = false;
        let mut suspends = false;
        let mut resolves = false;
        for write in batch.writes() {
            match write {
                Write::SaveConversation { status, .. } => {
                    fail |= self.fail_save_number.fetch_update(
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                        |n| n.checked_sub(1),
                    ) == Ok(1);
                    suspends |= *status == ConversationStatus::Suspended;
                }
                Write::InsertCall(_) => {
                    if Self::take(&self.fail_inserts) {
                        fail = true;
                    } else if Self::take(&self.lose_insert_acks) {
                        lose_ack = true;
                    }
                }
                Write::Transition { to, .. } => {
                    fail |= Self::take(&self.fail_transitions);
                    resolves |= *to == CallState::Resolved;
                }
                _ => {}
            }
        }
        if fail {
            return injected();
        }
        if suspends {
            let hold = lock(&self.hold_after_suspend).take();
            if hold.is_some() {
                *lock(&self.hold_next_calls) = hold;
            }
        }
        Box::pin(async move {
            let applied = self.inner.apply(batch).await?;
            if applied.is_all()
                && resolves
                && self
                    .fail_calls_after_resolution
                    .swap(false, Ordering::SeqCst)
            {
                self.fail_next_calls.store(true, Ordering::SeqCst);
            }
            if lose_ack && applied.is_all() {
                return Err(StoreError::backend(Injected));
            }
            Ok(applied)
        })
    }
}

// ---------------------------------------------------------------------------
// Helpers

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// An agent over `store` with a scripted model (returned too, to read the
/// requests it got) and no deadline worker.
fn agent_with(
    store: Arc<dyn Store>,
    turns: Vec<ScriptedTurn>,
    resume_on_resolve: bool,
) -> (DurableAgent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(turns));
    let agent = DurableAgent::builder(
        Agent::builder()
            .shared_model(model.clone() as Arc<dyn ChatModel>)
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .client_grace(Duration::from_secs(60))
    .resume_on_resolve(resume_on_resolve)
    .deadline_worker(None)
    .build();
    (agent, model)
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::new().text(text)
}

async fn send(agent: &DurableAgent, conversation: &str, text: &str) -> Vec<AgentEvent> {
    agent
        .send(conversation, Input::User(text.into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await
}

/// Waits until `done` holds for the stored conversation, for at most
/// `patience`.
async fn wait_for(
    agent: &DurableAgent,
    conversation: &str,
    patience: Duration,
    what: &str,
    done: impl Fn(&StoredConversation) -> bool,
) -> StoredConversation {
    let started = Instant::now();
    loop {
        let stored = agent
            .conversation(conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("conversation {conversation} vanished"));
        if done(&stored) {
            return stored;
        }
        assert!(
            started.elapsed() < patience,
            "{what}: not within {patience:?}: status {:?}, messages {:#?}",
            stored.status,
            stored.conversation.messages
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_idle(agent: &DurableAgent, conversation: &str, patience: Duration) -> Conversation {
    wait_for(agent, conversation, patience, "idle", |stored| {
        stored.status == ConversationStatus::Idle
    })
    .await
    .conversation
}

/// Waits until no run holds the conversation (it is idle or suspended).
async fn wait_settled(agent: &DurableAgent, conversation: &str) -> StoredConversation {
    wait_for(
        agent,
        conversation,
        Duration::from_secs(10),
        "settled",
        |stored| stored.status != ConversationStatus::Running,
    )
    .await
}

/// The tool messages of a transcript, parsed, by call id.
fn tool_results(messages: &[Message]) -> Vec<(String, Value)> {
    aptix_testkit::tool_results_by_id(messages)
}

crate::common::on_every_store!(
    duplicate_ids_in_one_turn_run_only_what_was_approved,
    ledger_refuses_an_approval_of_another_tool,
    ledger_refuses_an_approval_of_another_tool_mirror,
    ledger_refuses_an_approval_of_other_arguments,
    resolved_call_is_settled_before_new_input,
    resolution_while_the_suspending_stream_is_read_resumes,
    store_error_after_the_resolution_still_resumes,
    stale_retry_resumes_a_conversation_nobody_resumed,
    sweep_resumes_a_resolved_conversation_nobody_resumed,
    store_error_after_a_tool_ran_is_not_reported_as_not_run,
    failed_save_after_the_model_turn_leaves_no_unanswered_call,
    lost_insert_acknowledgement_leaves_no_orphan_wait,
    unconfirmed_wait_row_is_withdrawn_at_once,
    ensure_started_beside_an_ending_run_resumes_once_it_ends,
    store_error_in_a_resumed_run_is_retried,
    failed_resolution_batch_changes_nothing,
    failed_batch_carrying_the_turn_runs_each_call_once,
    approval_with_changed_arguments_is_visible_to_the_model,
    client_approval_with_changed_arguments_is_visible_to_the_model,
);

// ---------------------------------------------------------------------------
// 1. Colliding tool_call_ids

/// End to end: one turn calls the client tool
/// `show_file` and the server tool `delete_file`, both gated, both with the
/// id `x`. The approver approves every `show_file` that `pending()` shows
/// and nothing else: `delete_file` must never run, and what goes to the
/// client is `show_file` with its own arguments. Whichever layer defends
/// (the loop renaming the id, or the ledger), this holds.
async fn duplicate_ids_in_one_turn_run_only_what_was_approved(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    for mirror in [false, true] {
        let id = format!("dup-{}", uuid());
        let show = ("show_file", json!({"path": "/srv/data/report.txt"}));
        let delete = ("delete_file", json!({"path": "/srv/data/other.txt"}));
        let (first, second) = if mirror {
            (&delete, &show)
        } else {
            (&show, &delete)
        };
        let (agent, _) = agent_with(
            store.clone(),
            vec![
                ScriptedTurn::new()
                    .tool_call("x", first.0, &first.1.to_string())
                    .tool_call("x", second.0, &second.1.to_string()),
                answer("Done."),
                answer("Done."),
            ],
            true,
        );
        let _attached = agent.attach_client(&id).await;
        send(&agent, &id, "show the report").await;
        let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
        for call in &pending {
            if call.tool == "show_file" && call.step == Step::Approval {
                assert_eq!(call.payload, show.1, "mirror={mirror}: {pending:?}");
                agent
                    .resolve(&id, &call.tool_call_id, Resolution::Approve)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        // Let the resumed run settle what it can.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stored = wait_settled(&agent, &id).await;
        assert_eq!(
            runs_of(&id, "delete_file"),
            Vec::<Value>::new(),
            "mirror={mirror}: delete_file ran without its approval"
        );
        let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
        for call in &pending {
            if call.step == Step::Client {
                assert_eq!(
                    (call.tool.as_str(), &call.payload),
                    (show.0, &show.1),
                    "mirror={mirror}: the client was sent something nobody approved"
                );
            }
        }
        drop(stored);
    }
}

/// A stored turn with two calls `x` (the first tool, then the second), and
/// the ledger as a run that lost the second call's wait would leave it: one
/// pending approval, for the first tool.
async fn colliding_turn(
    store: &Arc<dyn Store>,
    id: &str,
    calls: [(&str, Value); 2],
    approval: (&str, Value),
) {
    let mut conversation = Conversation::new(id);
    conversation.messages.push(Message::user("go"));
    conversation.messages.push(Message::Assistant {
        runnable: None,
        content: String::new(),
        tool_calls: calls
            .iter()
            .map(|(name, arguments)| aptix::transcript::AssistantToolCall {
                id: "x".into(),
                name: (*name).into(),
                arguments: arguments.to_string(),
            })
            .collect(),
        thinking: Vec::new(),
        server_blocks: Vec::new(),
    });
    assert!(
        store
            .create_conversation(&conversation, 0)
            .await
            .unwrap_or(false)
    );
    let now = now_ms();
    assert!(
        store
            .claim_conversation(id, "earlier-run", now, now + 60_000)
            .await
            .unwrap_or(None)
            .is_some()
    );
    store
        .save_conversation(
            &conversation,
            "earlier-run",
            ConversationStatus::Suspended,
            now,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let inserted = store
        .insert_call(&CallRecord {
            requested: None,
            reasoning: None,
            conversation_id: id.into(),
            tool_call_id: "x".into(),
            step: Step::Approval,
            tool: approval.0.into(),
            arguments: approval.1.to_string(),
            payload: approval.1.to_string(),
            state: CallState::Pending,
            outcome: None,
            deadline: Some(now + 3_600_000),
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(inserted);
}

/// Past the loop: the ledger itself is handed the colliding turn. The
/// approval shown and given is for `show_file`; `delete_file` must not run
/// with it, and the client gets `show_file`'s own payload.
async fn ledger_refuses_an_approval_of_another_tool(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("ledger-{}", uuid());
    let report = json!({"path": "/srv/data/report.txt"});
    let other = json!({"path": "/srv/data/other.txt"});
    colliding_turn(
        &store,
        &id,
        [("show_file", report.clone()), ("delete_file", other)],
        ("show_file", report.clone()),
    )
    .await;
    let (agent, _) = agent_with(store.clone(), vec![answer("Done.")], true);
    let _attached = agent.attach_client(&id).await;
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "show_file");
    agent
        .resolve(&id, "x", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    wait_settled(&agent, &id).await;
    assert_eq!(
        runs_of(&id, "delete_file"),
        Vec::<Value>::new(),
        "delete_file ran with show_file's approval"
    );
    let records = store.calls(&id).await.unwrap_or_else(|e| panic!("{e}"));
    for record in &records {
        assert!(
            !(record.tool == "delete_file" && record.step == Step::Execution),
            "delete_file was recorded as executing: {records:?}"
        );
        if record.step == Step::Client {
            assert_eq!(record.tool, "show_file", "{records:?}");
            assert_eq!(
                serde_json::from_str::<Value>(&record.payload).ok(),
                Some(report.clone())
            );
        }
    }
}

/// The mirror: the approval is for `delete_file`; it runs (once, with its
/// own arguments), and `show_file` is never sent to the client with them.
async fn ledger_refuses_an_approval_of_another_tool_mirror(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("mirror-{}", uuid());
    let tmp = json!({"path": "/srv/data/tmp.txt"});
    let report = json!({"path": "/srv/data/report.txt"});
    colliding_turn(
        &store,
        &id,
        [("delete_file", tmp.clone()), ("show_file", report)],
        ("delete_file", tmp.clone()),
    )
    .await;
    let (agent, _) = agent_with(store.clone(), vec![answer("Done.")], true);
    let _attached = agent.attach_client(&id).await;
    agent
        .resolve(&id, "x", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    wait_settled(&agent, &id).await;
    assert_eq!(runs_of(&id, "delete_file"), vec![tmp.clone()]);
    let records = store.calls(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        records.iter().all(|record| record.step != Step::Client),
        "show_file went to the client with delete_file's approval: {records:?}"
    );
}

/// An approval row whose arguments are not the call's (the approver saw
/// other arguments than the call carries) runs nothing.
async fn ledger_refuses_an_approval_of_other_arguments(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("args-{}", uuid());
    let mut conversation = Conversation::new(&id);
    conversation.messages.push(Message::user("charge"));
    conversation.messages.push(Message::Assistant {
        runnable: None,
        content: String::new(),
        tool_calls: vec![aptix::transcript::AssistantToolCall {
            id: "c1".into(),
            name: "charge".into(),
            arguments: r#"{"cents":99999}"#.into(),
        }],
        thinking: Vec::new(),
        server_blocks: Vec::new(),
    });
    assert!(
        store
            .create_conversation(&conversation, 0)
            .await
            .unwrap_or(false)
    );
    let now = now_ms();
    store
        .insert_call(&CallRecord {
            requested: None,
            reasoning: None,
            conversation_id: id.clone(),
            tool_call_id: "c1".into(),
            step: Step::Approval,
            tool: "charge".into(),
            arguments: r#"{"cents":5}"#.into(),
            payload: r#"{"cents":5}"#.into(),
            state: CallState::Resolved,
            outcome: Some(r#"{"kind":"approve"}"#.into()),
            deadline: None,
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (agent, _) = agent_with(store.clone(), vec![answer("Done.")], true);
    let events: Vec<AgentEvent> = agent
        .send(&id, Input::Continue)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    assert_eq!(
        runs_of(&id, "charge"),
        Vec::<Value>::new(),
        "charge ran with arguments nobody approved: {events:?}"
    );
    let stored = wait_settled(&agent, &id).await;
    let results = tool_results(&stored.conversation.messages);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].1["ok"], json!(false), "{results:?}");
}

// ---------------------------------------------------------------------------
// 2. Settle before new input

/// `resume_on_resolve(false)`: the resolution is recorded, nobody resumes,
/// then the user writes. The approved call runs, and the model sees its
/// result right after its call, before the new message.
async fn resolved_call_is_settled_before_new_input(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("settle-{}", uuid());
    let (agent, model) = agent_with(
        store,
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":500}"#),
            answer("It went through."),
        ],
        false,
    );
    send(&agent, &id, "charge").await;
    let resolved = agent
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.pending, 0);
    send(&agent, &id, "did it go through?").await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 500})]);
    let requests = model.requests();
    let last = requests
        .last()
        .unwrap_or_else(|| panic!("no model request"));
    let results = tool_results(&last.messages);
    assert_eq!(results.len(), 1, "{:#?}", last.messages);
    assert_eq!(
        results[0].1["ok"],
        json!(true),
        "the model was told: {}",
        results[0].1
    );
    assert_eq!(results[0].1["result"], json!("charged 500"));
    let tool_at = last
        .messages
        .iter()
        .position(|m| matches!(m, Message::Tool { .. }));
    let user_at = last
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    assert!(tool_at < user_at, "{:#?}", last.messages);
}

// ---------------------------------------------------------------------------
// 3. Resolving while the suspending run's stream is read

async fn resolution_while_the_suspending_stream_is_read_resumes(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("inline-{}", uuid());
    let (agent, _) = agent_with(
        store,
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":500}"#),
            answer("Charged."),
        ],
        true,
    );
    let mut events = agent
        .send(&id, Input::User("charge".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut resolutions = Vec::new();
    while let Some(event) = events.next().await {
        if let AgentEvent::Done {
            reason: DoneReason::Suspended(calls),
            ..
        } = event
        {
            for call in calls {
                resolutions.push(
                    agent
                        .resolve(&id, &call.tool_call_id, Resolution::Approve)
                        .await,
                );
            }
            // E.g. forwarding the event somewhere.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(resolutions.iter().all(Result::is_ok), "{resolutions:?}");
    wait_idle(&agent, &id, Duration::from_secs(5)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 500})]);
}

// ---------------------------------------------------------------------------
// 4. Store errors in resolve

/// The read after the compare-and-swap fails: the resolution is recorded,
/// so resolve succeeds and the conversation resumes.
async fn store_error_after_the_resolution_still_resumes(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("cas-{}", uuid());
    let (agent, model) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":500}"#),
            answer("Charged."),
        ],
        true,
    );
    send(&agent, &id, "charge").await;
    faulty
        .fail_calls_after_resolution
        .store(true, Ordering::SeqCst);
    let first = agent.resolve(&id, "c1", Resolution::Approve).await;
    let retry = agent.resolve(&id, "c1", Resolution::Approve).await;
    assert!(
        first.is_ok() || matches!(retry, Err(ResolveError::Stale { .. })),
        "first: {first:?}, retry: {retry:?}"
    );
    assert!(
        first.is_ok(),
        "the recorded resolution was reported as failed: {first:?}"
    );
    let conversation = wait_idle(&agent, &id, Duration::from_secs(5)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 500})]);
    let results = tool_results(&conversation.messages);
    assert_eq!(results[0].1["ok"], json!(true), "{results:?}");
    assert!(model.requests().len() >= 2);
}

/// A resolution recorded by a process that does not resume (or failed to):
/// a retry elsewhere is `Stale`, and it resumes the conversation.
async fn stale_retry_resumes_a_conversation_nobody_resumed(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("stale-{}", uuid());
    let (recorder, _) = agent_with(
        store.clone(),
        vec![ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":7}"#)],
        false,
    );
    send(&recorder, &id, "charge").await;
    recorder
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (runner, _) = agent_with(store, vec![answer("Charged.")], true);
    assert!(matches!(
        runner.resolve(&id, "c1", Resolution::Approve).await,
        Err(ResolveError::Stale { .. })
    ));
    wait_idle(&runner, &id, Duration::from_secs(5)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 7})]);
}

/// A sweep resumes a suspended conversation that has nothing pending.
async fn sweep_resumes_a_resolved_conversation_nobody_resumed(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("sweep-{}", uuid());
    let (recorder, _) = agent_with(
        store.clone(),
        vec![ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":8}"#)],
        false,
    );
    send(&recorder, &id, "charge").await;
    recorder
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The sweep sees only this test's conversation (the provided
    // `suspended_without_pending` reads through the scoped lists).
    let (runner, _) = agent_with(
        FaultyStore::scoped(store, &id),
        vec![answer("Charged.")],
        true,
    );
    let started = Instant::now();
    while runs_of(&id, "charge").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the sweep never resumed the conversation"
        );
        runner
            .sweep_deadlines()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 8})]);
}

// ---------------------------------------------------------------------------
// 5. Store error after a tool ran

async fn store_error_after_a_tool_ran_is_not_reported_as_not_run(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    for failures in [1, 1_000] {
        let faulty = FaultyStore::new(inner.clone());
        let id = format!("ran-{}", uuid());
        let (agent, model) = agent_with(
            faulty.clone(),
            vec![
                ScriptedTurn::new().tool_call("e1", "send_email", r#"{"to":"alice"}"#),
                answer("Sent."),
            ],
            true,
        );
        faulty.fail_transitions.store(failures, Ordering::SeqCst);
        let events = send(&agent, &id, "email alice").await;
        faulty.fail_transitions.store(0, Ordering::SeqCst);
        assert_eq!(runs_of(&id, "send_email"), vec![json!({"to": "alice"})]);
        let requests = model.requests();
        let last = requests
            .last()
            .unwrap_or_else(|| panic!("no model request: {events:?}"));
        let results = tool_results(&last.messages);
        assert_eq!(results.len(), 1, "{events:?}");
        assert_eq!(
            results[0].1["ok"],
            json!(true),
            "failures={failures}: the model was told {}",
            results[0].1
        );
        assert_eq!(results[0].1["result"], json!("sent to alice"));
        if failures == 1 {
            // One failure: the close of the ledger row is retried.
            let record = inner
                .call(&id, "e1", Step::Execution)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("no execution record"));
            assert_eq!(record.state, CallState::Done, "{record:?}");
        }
    }
}

/// Every call of the transcript has exactly one result (by id).
fn assert_every_call_answered_once(messages: &[Message], what: &str) {
    let calls: Vec<&str> = messages
        .iter()
        .filter_map(|message| match message {
            Message::Assistant { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .map(|call| call.id.as_str())
        .collect();
    for id in calls {
        let results = messages
            .iter()
            .filter(|message| matches!(message, Message::Tool { tool_call_id, .. } if tool_call_id == id))
            .count();
        assert_eq!(
            results, 1,
            "{what}: the call {id} has {results} results: {messages:#?}"
        );
    }
}

/// The save right after the model's turn fails: the run ends
/// `StoreFailed`, and the conversation must not be left idle with a call
/// that never ran and never gets a result; `ensure_started` continues it.
async fn failed_save_after_the_model_turn_leaves_no_unanswered_call(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("turnsave-{}", uuid());
    let (agent, _) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("e1", "send_email", r#"{"to":"alice"}"#),
            answer("Sent."),
        ],
        true,
    );
    // The run saves before the model turn (1: with the claim), then after
    // it (2).
    faulty.fail_save_number.store(2, Ordering::SeqCst);
    let events = send(&agent, &id, "email alice").await;
    assert_stopped_by_the_store(&events);
    assert_eq!(runs_of(&id, "send_email"), Vec::<Value>::new());
    let stored = agent
        .conversation(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no conversation"));
    assert_ne!(
        stored.status,
        ConversationStatus::Idle,
        "saved idle after the failed save: {:#?}",
        stored.conversation.messages
    );
    let revived = agent
        .ensure_started(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(revived, aptix::durable::Revival::Resumed);
    let conversation = wait_idle(&agent, &id, Duration::from_secs(10)).await;
    assert_eq!(runs_of(&id, "send_email"), vec![json!({"to": "alice"})]);
    assert_every_call_answered_once(&conversation.messages, "after ensure_started");
    let results = tool_results(&conversation.messages);
    assert_eq!(
        results[0].1["result"],
        json!("sent to alice"),
        "{results:?}"
    );
}

/// The run ended because the store failed.
fn assert_stopped_by_the_store(events: &[AgentEvent]) {
    assert!(
        events.iter().any(|event| matches!(
            event,
            AgentEvent::Done {
                reason: DoneReason::StoreFailed(_),
                ..
            }
        )),
        "{events:?}"
    );
}

/// The turn is stored in the same batch as the first record of its calls;
/// here that batch fails while two calls of the turn run side by side.
/// The call whose batch failed does not run; the other runs only once its
/// own batch stored the turn; the run stops, and `ensure_started` runs the
/// first: each call runs once and has one result.
async fn failed_batch_carrying_the_turn_runs_each_call_once(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("turnbatch-{}", uuid());
    let (agent, _) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new()
                .tool_call("e1", "send_email", r#"{"to":"ann"}"#)
                .tool_call("e2", "send_email", r#"{"to":"ben"}"#),
            answer("Sent both."),
        ],
        true,
    );
    // The user's message is saved with the claim, before the model turn
    // (1); the turn goes with the first call's record (2).
    faulty.fail_save_number.store(2, Ordering::SeqCst);
    let events = send(&agent, &id, "email ann and ben").await;
    assert_stopped_by_the_store(&events);
    assert_eq!(
        runs_of(&id, "send_email").len(),
        1,
        "one call ran before the stop"
    );
    let revived = agent
        .ensure_started(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(revived, aptix::durable::Revival::Resumed);
    let conversation = wait_idle(&agent, &id, Duration::from_secs(10)).await;
    let mut sent = runs_of(&id, "send_email");
    sent.sort_by_key(ToString::to_string);
    assert_eq!(sent, vec![json!({"to": "ann"}), json!({"to": "ben"})]);
    assert_every_call_answered_once(&conversation.messages, "after ensure_started");
}

/// An `insert_call` that was applied but reported failed: the row read
/// back decides, so a wait is suspended (not left pending for a call the
/// model was told failed) and an execution runs (not left `executing`
/// for a call the model was told did not run).
async fn lost_insert_acknowledgement_leaves_no_orphan_wait(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner.clone());
    let id = format!("lostack-{}", uuid());
    let (agent, model) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":5}"#),
            answer("Charged."),
            ScriptedTurn::new().tool_call("e1", "send_email", r#"{"to":"bob"}"#),
            answer("Sent."),
        ],
        true,
    );
    faulty.lose_insert_acks.store(1, Ordering::SeqCst);
    let events = send(&agent, &id, "charge 5").await;
    assert!(
        events.iter().any(|event| matches!(
            event,
            AgentEvent::Done {
                reason: DoneReason::Suspended(_),
                ..
            }
        )),
        "the approval wait was written, but the run did not suspend on it: {events:?}"
    );
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1, "{pending:?}");
    agent
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id, Duration::from_secs(10)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 5})]);
    assert_every_call_answered_once(&conversation.messages, "charge");

    faulty.lose_insert_acks.store(1, Ordering::SeqCst);
    // The resumed run saved the conversation idle; it may not have let go
    // of it in this process yet.
    let started = Instant::now();
    let stream = loop {
        match agent.send(&id, Input::User("email bob".into())).await {
            Err(aptix::durable::DurableError::Busy(_))
                if started.elapsed() < Duration::from_secs(5) =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            sent => break sent.unwrap_or_else(|e| panic!("{e}")),
        }
    };
    let _: Vec<AgentEvent> = stream.collect().await;
    assert_eq!(runs_of(&id, "send_email"), vec![json!({"to": "bob"})]);
    let requests = model.requests();
    let last = requests
        .last()
        .unwrap_or_else(|| panic!("no model request"));
    let results = tool_results(&last.messages);
    assert_eq!(
        results.last().map(|result| &result.1["result"]),
        Some(&json!("sent to bob")),
        "{results:?}"
    );
    let record = inner
        .call(&id, "e1", Step::Execution)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no execution record"));
    assert_eq!(record.state, CallState::Done, "{record:?}");
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(pending.is_empty(), "{pending:?}");
}

/// A wait row whose write was reported failed (it was written after all)
/// and whose read back failed too: the model is told the call did not
/// run, so the row must not stay pending, resolvable, meanwhile (it was
/// withdrawn only by a background task a second later: a resolution in
/// between approved a call the model had been told was not run).
async fn unconfirmed_wait_row_is_withdrawn_at_once(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("orphan-{}", uuid());
    let (agent, _) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":3}"#),
            answer("Not charged."),
        ],
        true,
    );
    faulty.lose_insert_acks.store(1, Ordering::SeqCst);
    faulty.fail_next_call.store(true, Ordering::SeqCst);
    let _ = send(&agent, &id, "charge 3").await;
    assert_eq!(faulty.lose_insert_acks.load(Ordering::SeqCst), 0);
    assert!(!faulty.fail_next_call.load(Ordering::SeqCst));
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(pending.is_empty(), "{pending:?}");
    let refused = agent.resolve(&id, "c1", Resolution::Approve).await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(runs_of(&id, "charge").is_empty());
}

/// With `resume_on_resolve(false)`, `ensure_started` is what resumes. A
/// run of this process has suspended and is past its last look for
/// resolutions when the call is resolved and `ensure_started` is called:
/// it answers `Busy`, and the conversation must resume once that run ends.
async fn ensure_started_beside_an_ending_run_resumes_once_it_ends(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("busy-{}", uuid());
    let (agent, _) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":7}"#),
            answer("Charged."),
        ],
        false,
    );
    let reached = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    *lock(&faulty.hold_after_suspend) = Some((reached.clone(), release.clone()));
    let run = {
        let agent = agent.clone();
        let id = id.clone();
        tokio::spawn(async move { send(&agent, &id, "charge 7").await })
    };
    tokio::time::timeout(Duration::from_secs(10), reached.notified())
        .await
        .unwrap_or_else(|_| panic!("the run never looked for resolutions after suspending"));
    agent
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let revived = agent
        .ensure_started(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(revived, aptix::durable::Revival::Busy);
    release.notify_one();
    run.await.unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id, Duration::from_secs(10)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 7})]);
    assert_every_call_answered_once(&conversation.messages, "after the run ended");
}

/// A run resumed after a resolution is stopped by a store error (the
/// approved call's execution cannot be recorded): it is resumed again,
/// not left running until a sweep notices its lease ran out.
async fn store_error_in_a_resumed_run_is_retried(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("retry-{}", uuid());
    let (agent, _) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":9}"#),
            answer("Charged."),
        ],
        true,
    );
    send(&agent, &id, "charge 9").await;
    faulty.fail_inserts.store(1, Ordering::SeqCst);
    agent
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id, Duration::from_secs(10)).await;
    assert_eq!(
        faulty.fail_inserts.load(Ordering::SeqCst),
        0,
        "no insert failed"
    );
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 9})]);
    assert_every_call_answered_once(&conversation.messages, "after the retry");
}

/// The resolution that ends the last wait and the claim of the run it
/// resumes are one batch: when the store fails it, nothing changed (the
/// call still waits, nothing ran), and the same resolution sent again goes
/// through.
async fn failed_resolution_batch_changes_nothing(backend: Backend) {
    let Some(inner) = store(backend).await else {
        return;
    };
    let faulty = FaultyStore::new(inner);
    let id = format!("resbatch-{}", uuid());
    let (agent, _) = agent_with(
        faulty.clone(),
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":11}"#),
            answer("Charged."),
        ],
        true,
    );
    send(&agent, &id, "charge 11").await;
    faulty.fail_transitions.store(1, Ordering::SeqCst);
    let refused = agent.resolve(&id, "c1", Resolution::Approve).await;
    assert!(
        matches!(refused, Err(ResolveError::Store(_))),
        "{refused:?}"
    );
    assert_eq!(faulty.fail_transitions.load(Ordering::SeqCst), 0);
    let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(runs_of(&id, "charge").is_empty());
    agent
        .resolve(&id, "c1", Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let conversation = wait_idle(&agent, &id, Duration::from_secs(10)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 11})]);
    assert_every_call_answered_once(&conversation.messages, "after the retry");
}

// ---------------------------------------------------------------------------
// 7. Approvals with changed arguments

const CHANGED: &str = "arguments_changed_by_approver";

async fn approval_with_changed_arguments_is_visible_to_the_model(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("edit-{}", uuid());
    let (agent, model) = agent_with(
        store,
        vec![
            ScriptedTurn::new().tool_call("c1", "charge", r#"{"cents":5000}"#),
            answer("Charged 50."),
        ],
        true,
    );
    send(&agent, &id, "charge").await;
    agent
        .resolve(&id, "c1", Resolution::ApproveWithArgs(json!({"cents": 50})))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_idle(&agent, &id, Duration::from_secs(5)).await;
    assert_eq!(runs_of(&id, "charge"), vec![json!({"cents": 50})]);
    let requests = model.requests();
    let last = requests.last().unwrap_or_else(|| panic!("no request"));
    let content = last
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool message"));
    let value: Value = serde_json::from_str(&content).unwrap_or(Value::Null);
    assert_eq!(value["ok"], json!(true), "{content}");
    assert_eq!(value[CHANGED], json!({"cents": 50}), "{content}");
    // A stable part of the envelope: it reads back, and writes the same.
    let envelope: Envelope =
        serde_json::from_str(&content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert_eq!(envelope.to_json_string(), content);
}

async fn client_approval_with_changed_arguments_is_visible_to_the_model(backend: Backend) {
    let Some(store) = store(backend).await else {
        return;
    };
    let id = format!("edit-client-{}", uuid());
    let (agent, model) = agent_with(
        store,
        vec![
            ScriptedTurn::new().tool_call("p1", "open_page", r#"{"url":"https://a.example"}"#),
            answer("Opened."),
        ],
        true,
    );
    let _attached = agent.attach_client(&id).await;
    send(&agent, &id, "open").await;
    agent
        .resolve(
            &id,
            "p1",
            Resolution::ApproveWithArgs(json!({"url": "https://b.example"})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let client = loop {
        let pending = agent.pending(&id).await.unwrap_or_else(|e| panic!("{e}"));
        if let Some(client) = pending.into_iter().find(|p| p.step == Step::Client) {
            break client;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no client step");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(client.payload, json!({"url": "https://b.example"}));
    wait_settled(&agent, &id).await;
    agent
        .resolve(&id, "p1", Resolution::Result(json!({"title": "B"})))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_idle(&agent, &id, Duration::from_secs(5)).await;
    let requests = model.requests();
    let last = requests.last().unwrap_or_else(|| panic!("no request"));
    let results = tool_results(&last.messages);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1["result"], json!({"title": "B"}));
    assert_eq!(
        results[0].1[CHANGED],
        json!({"url": "https://b.example"}),
        "{}",
        results[0].1
    );
}
