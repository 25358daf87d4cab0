//! What the live run decides about a call holds after a crash, and an
//! approval of what `pending()` showed runs what it showed (review
//! 2026-11-26, N1, N4, N16).
//!
//! A "process" here is a Tokio runtime with a durable agent on its own
//! store over a shared place (a `MemoryStore`'s memory, a SQLite file,
//! PostgreSQL); killing it shuts its runtime down with every task, as
//! SIGKILL would. The crash comes while a slow tool of the turn runs, so
//! the turn is stored with that tool's `executing` row, and the next
//! process revives the conversation from there.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::common::{Backend, StoreAt, uuid};
use crate::tools::{DeleteFileTool, ran, runs_of};
use aptix::agent::{BeforeCall, HookCall, HookFuture, InvalidCall, PreparedStep, Repair, ToolHook};
use aptix::durable::DurableAgent;
use aptix::model::ToolChoice;
use aptix::prelude::*;
use aptix::store::ConversationStatus;
use aptix::tool_search::ToolSearch;
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, Input, Resolution};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The lease of every process: a dead one's conversation is taken over
/// soon after it dies.
const LEASE: Duration = Duration::from_millis(300);
/// The longest wait for anything; a hang detector, never a timing bound.
const PATIENCE: Duration = Duration::from_secs(30);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The conversations whose `slow_report` is running.
static RUNNING: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Writes a long report: runs until its process dies.
#[agent_tool(name = "slow_report", usage = "Test tool.")]
async fn slow_report(_args: NoArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    ran(ctx, "slow_report", json!({}));
    let conversation = ctx.conversation_id().unwrap_or_default().to_owned();
    lock(&RUNNING)
        .get_or_insert_with(HashSet::new)
        .insert(conversation);
    std::future::pending::<()>().await;
    Ok("never".into())
}

/// Wipes the database: what no refused call may ever do.
#[agent_tool(name = "wipe_database", usage = "Test tool.")]
async fn wipe_database(_args: NoArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    ran(ctx, "wipe_database", json!({}));
    Ok("wiped".into())
}

/// An amount to move.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Amount {
    /// Cents.
    pub cents: u64,
}

/// Moves money; the approval policy decides when a person is asked.
#[agent_tool(name = "transfer", usage = "Test tool.")]
async fn transfer(args: Amount, ctx: &ToolContext) -> Result<String, ToolError> {
    ran(ctx, "transfer", json!({ "cents": args.cents }));
    Ok(format!("moved {}", args.cents))
}

fn catalog() -> Catalog {
    aptix::tools![
        SlowReportTool,
        WipeDatabaseTool,
        DeleteFileTool,
        TransferTool
    ]
    .build()
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Renames the unknown `wipe_db` to `wipe_database` and `delete_flie` to
/// `delete_file`; moves deletions under `/srv/archive`.
struct Steer;

impl ToolHook for Steer {
    fn name(&self) -> &str {
        "steer"
    }

    fn on_invalid_call<'a>(&'a self, call: InvalidCall<'a>) -> HookFuture<'a, Repair> {
        let renamed = match call.name {
            "wipe_db" => Repair::Rename("wipe_database".into()),
            "delete_flie" => Repair::Rename("delete_file".into()),
            _ => Repair::Return,
        };
        Box::pin(std::future::ready(renamed))
    }

    fn before_call<'a>(&'a self, call: HookCall<'a>) -> HookFuture<'a, BeforeCall> {
        let decided = match call.arguments["path"].as_str() {
            Some(path)
                if call.definition.name() == "delete_file" && path.starts_with("/srv/tmp/") =>
            {
                BeforeCall::Rewrite(json!({ "path": path.replace("/srv/tmp/", "/srv/archive/") }))
            }
            _ => BeforeCall::Continue,
        };
        Box::pin(std::future::ready(decided))
    }
}

/// The tenant's sandbox: deletions outside `/srv/tenant-a/` are denied.
struct Sandbox;

impl ToolHook for Sandbox {
    fn name(&self) -> &str {
        "sandbox"
    }

    fn before_call<'a>(&'a self, call: HookCall<'a>) -> HookFuture<'a, BeforeCall> {
        let decided = match call.arguments["path"].as_str() {
            Some(path)
                if call.definition.name() == "delete_file"
                    && !path.starts_with("/srv/tenant-a/") =>
            {
                BeforeCall::Deny(format!("{path} is outside the tenant's files"))
            }
            _ => BeforeCall::Continue,
        };
        Box::pin(std::future::ready(decided))
    }
}

/// Transfers up to 100.00 need a person; more are never made.
fn transfer_policy(call: &aptix::agent::ApprovalCall<'_>) -> aptix::agent::ApprovalDecision {
    if call.call.definition.name() != "transfer" {
        return aptix::agent::ApprovalDecision::Auto;
    }
    match call.call.arguments["cents"].as_u64() {
        Some(cents) if cents <= 10_000 => aptix::agent::ApprovalDecision::Ask,
        _ => aptix::agent::ApprovalDecision::Deny("transfers above 100.00 are never made".into()),
    }
}

fn sandboxed(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.hook(Sandbox).approval_policy(transfer_policy)
}

/// How a scenario builds its agent around a scripted model.
type Build = fn(aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder;

/// One process: a runtime, and a durable agent on its own store.
struct Process {
    runtime: tokio::runtime::Runtime,
    agent: DurableAgent,
}

impl Process {
    fn start(at: &StoreAt, build: Build, turns: Vec<ScriptedTurn>) -> Process {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("a runtime: {e}"));
        let store = runtime.block_on(at.open());
        let agent = build(
            Agent::builder()
                .model(ScriptedModel::new(turns))
                .catalog(catalog()),
        )
        .build()
        .unwrap_or_else(|e| panic!("the agent: {e}"));
        let agent = runtime.block_on(async {
            DurableAgent::builder(agent, store)
                .lease(LEASE)
                .deadline_worker(None)
                .build()
        });
        Process { runtime, agent }
    }

    /// Kills the process: its runtime goes, with every task of it.
    fn kill(self) {
        let Process { runtime, agent } = self;
        runtime.block_on(async move { drop(agent) });
        runtime.shutdown_timeout(Duration::from_secs(2));
    }

    /// Sends `text` to conversation `id`, and checks that the run stops on
    /// a call waiting for a person.
    fn send_until_suspended(&self, id: &str, text: &str) {
        let events: Vec<AgentEvent> = self.runtime.block_on(async {
            self.agent
                .send(id, Input::User(text.into()))
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .collect()
                .await
        });
        assert!(
            events.iter().any(|event| matches!(
                event,
                AgentEvent::Done {
                    reason: DoneReason::Suspended(_),
                    ..
                }
            )),
            "the call should wait for a person: {events:#?}"
        );
    }

    /// Waits until the stored conversation rests, and returns it.
    fn wait_idle(&self, id: &str) -> Conversation {
        self.runtime.block_on(async {
            let started = Instant::now();
            loop {
                let stored = self
                    .agent
                    .conversation(id)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
                    .unwrap_or_else(|| panic!("conversation {id} vanished"));
                if stored.status == ConversationStatus::Idle {
                    return stored.conversation;
                }
                assert!(
                    started.elapsed() < PATIENCE,
                    "not idle within {PATIENCE:?}: {:?} {:#?}",
                    stored.status,
                    stored.conversation.messages
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    }
}

/// The results of a transcript's tool messages, by call id.
fn results(conversation: &Conversation) -> Vec<(String, Value)> {
    aptix_testkit::tool_results_by_id(&conversation.messages)
}

/// A live run's turn makes `calls`; the process dies while `slow_report`
/// runs; another process revives the conversation. Returns the revived
/// transcript, after checking that the refused call never ran.
fn crash_while_the_turn_runs(
    backend: Backend,
    build: Build,
    calls: &[(&str, &str)],
) -> Option<(String, Conversation)> {
    let at = StoreAt::new(backend)?;
    let id = format!("refused-{}", uuid());
    let mut turn = ScriptedTurn::new();
    for (call, tool) in calls {
        turn = turn.tool_call(call, tool, "{}");
    }
    let first = Process::start(
        &at,
        build,
        vec![turn, ScriptedTurn::new().text("never asked")],
    );
    {
        let (agent, id) = (first.agent.clone(), id.clone());
        first.runtime.spawn(async move {
            if let Ok(mut stream) = agent.send(&id, Input::User("report".into())).await {
                while stream.next().await.is_some() {}
            }
        });
    }
    let started = Instant::now();
    while !lock(&RUNNING)
        .as_ref()
        .is_some_and(|running| running.contains(&id))
    {
        assert!(started.elapsed() < PATIENCE, "slow_report never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    first.kill();
    let second = Process::start(&at, build, vec![ScriptedTurn::new().text("Recovered.")]);
    let _ = second.runtime.block_on(second.agent.ensure_started(&id));
    let conversation = second.wait_idle(&id);
    second.kill();
    assert!(
        runs_of(&id, "wipe_database").is_empty(),
        "a call the live run refused ran after the crash: {:#?}",
        results(&conversation)
    );
    assert_eq!(
        runs_of(&id, "slow_report").len(),
        1,
        "slow_report ran again"
    );
    Some((id, conversation))
}

/// The error code and message of call `id`'s result.
fn refusal(conversation: &Conversation, id: &str) -> (String, String) {
    let found: Vec<Value> = results(conversation)
        .into_iter()
        .filter(|(call, _)| call == id)
        .map(|(_, envelope)| envelope)
        .collect();
    assert_eq!(found.len(), 1, "call {id} has {} results", found.len());
    let envelope = &found[0];
    (
        envelope["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        envelope["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn only_the_report(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.prepare_step(|step| {
        PreparedStep::all().tools(
            step.catalog
                .only(["slow_report"])
                .unwrap_or_else(|e| panic!("{e}")),
        )
    })
}

fn search_first(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.tool_search(ToolSearch::local().always_offer(["slow_report"]))
}

fn one_call_a_turn(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.max_calls_per_turn(1)
}

fn the_report_is_forced(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.prepare_step(|_step| {
        PreparedStep::all().tool_choice(ToolChoice::Tool("slow_report".into()))
    })
}

fn only_the_report_and_a_renaming_hook(
    builder: aptix::agent::AgentBuilder,
) -> aptix::agent::AgentBuilder {
    only_the_report(builder).hook(Steer)
}

crate::common::on_every_store!(
    sync:
    a_tool_the_step_did_not_offer_stays_refused_after_a_crash,
    a_tool_no_search_revealed_stays_refused_after_a_crash,
    a_call_past_the_turns_limit_stays_refused_after_a_crash,
    a_tool_the_steps_choice_forbade_stays_refused_after_a_crash,
    a_rename_into_a_tool_the_step_did_not_offer_stays_refused_after_a_crash,
    an_approval_of_what_pending_showed_runs_a_call_with_a_reason,
    an_approval_of_what_pending_showed_runs_a_rewritten_call,
    an_approval_of_what_pending_showed_runs_a_renamed_call,
    a_call_past_the_turns_limit_stays_refused_when_the_turns_save_fails,
    an_approvers_edit_goes_through_the_hooks,
    an_approvers_edit_goes_through_the_approval_policy,
);

/// N1: `prepare_step` offered only `slow_report`; the model called
/// `wipe_database` beside it.
fn a_tool_the_step_did_not_offer_stays_refused_after_a_crash(backend: Backend) {
    let calls = [("r1", "slow_report"), ("w1", "wipe_database")];
    let Some((_, conversation)) = crash_while_the_turn_runs(backend, only_the_report, &calls)
    else {
        return;
    };
    let (code, message) = refusal(&conversation, "w1");
    assert_eq!(code, "unknown_tool", "{message}");
    assert!(message.contains("not available at this step"), "{message}");
}

/// N1: with tool search, `wipe_database` was never revealed.
fn a_tool_no_search_revealed_stays_refused_after_a_crash(backend: Backend) {
    let calls = [("r1", "slow_report"), ("w1", "wipe_database")];
    let Some((_, conversation)) = crash_while_the_turn_runs(backend, search_first, &calls) else {
        return;
    };
    let (code, message) = refusal(&conversation, "w1");
    assert_eq!(code, "unknown_tool", "{message}");
    assert!(message.contains("not loaded yet"), "{message}");
}

/// N1: one call a turn; `wipe_database` came second.
fn a_call_past_the_turns_limit_stays_refused_after_a_crash(backend: Backend) {
    let calls = [("r1", "slow_report"), ("w1", "wipe_database")];
    let Some((_, conversation)) = crash_while_the_turn_runs(backend, one_call_a_turn, &calls)
    else {
        return;
    };
    let (code, message) = refusal(&conversation, "w1");
    assert_eq!(code, "failed", "{message}");
    assert!(message.contains("at most 1 run per turn"), "{message}");
}

/// N16 after a crash: the step forced `slow_report`.
fn a_tool_the_steps_choice_forbade_stays_refused_after_a_crash(backend: Backend) {
    let calls = [("r1", "slow_report"), ("w1", "wipe_database")];
    let Some((_, conversation)) = crash_while_the_turn_runs(backend, the_report_is_forced, &calls)
    else {
        return;
    };
    let (code, message) = refusal(&conversation, "w1");
    assert_eq!(code, "unknown_tool", "{message}");
}

/// N1: a hook renames the unknown `wipe_db` to `wipe_database`, which the
/// step did not offer: refused live, so refused after the crash too.
fn a_rename_into_a_tool_the_step_did_not_offer_stays_refused_after_a_crash(backend: Backend) {
    let calls = [("r1", "slow_report"), ("w1", "wipe_db")];
    let Some((_, conversation)) =
        crash_while_the_turn_runs(backend, only_the_report_and_a_renaming_hook, &calls)
    else {
        return;
    };
    let (code, message) = refusal(&conversation, "w1");
    assert_eq!(code, "unknown_tool", "{message}");
}

/// N4: the model's call as the turn made it, and the arguments
/// `pending()` must show for it; `build` steers it.
fn approving_what_pending_showed(
    backend: Backend,
    build: Build,
    call: (&str, Value),
    shown: Value,
) {
    let Some(at) = StoreAt::new(backend) else {
        return;
    };
    let id = format!("steered-{}", uuid());
    let (tool, arguments) = call;
    let process = Process::start(
        &at,
        build,
        vec![
            ScriptedTurn::new().tool_call("d1", tool, &arguments.to_string()),
            ScriptedTurn::new().text("Done."),
        ],
    );
    process.send_until_suspended(&id, "clean up");
    let pending = process
        .runtime
        .block_on(process.agent.pending(&id))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].tool, "delete_file");
    assert_eq!(pending[0].arguments, shown, "what the approver is shown");
    let resolved = process.runtime.block_on(process.agent.resolve(
        &id,
        &pending[0].tool_call_id,
        Resolution::approve_exactly(pending[0].arguments_hash()),
    ));
    assert!(resolved.is_ok(), "{resolved:?}");
    let conversation = process.wait_idle(&id);
    process.kill();
    assert_eq!(
        runs_of(&id, "delete_file"),
        [shown],
        "the approved call must run once, as shown: {:#?}",
        results(&conversation)
    );
    let envelope = results(&conversation)
        .into_iter()
        .find(|(call, _)| call == "d1")
        .map(|(_, envelope)| envelope)
        .unwrap_or_default();
    assert_eq!(envelope["ok"], json!(true), "{envelope}");
}

fn reasons_asked(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.ask_reasoning(true)
}

fn steered(builder: aptix::agent::AgentBuilder) -> aptix::agent::AgentBuilder {
    builder.hook(Steer)
}

/// N4: `_reasoningForCall` is taken out before the call is recorded.
fn an_approval_of_what_pending_showed_runs_a_call_with_a_reason(backend: Backend) {
    approving_what_pending_showed(
        backend,
        reasons_asked,
        (
            "delete_file",
            json!({ "path": "/srv/old.log", "_reasoningForCall": "It is stale." }),
        ),
        json!({ "path": "/srv/old.log" }),
    );
}

/// N4: a `before_call` hook rewrote the arguments before they were recorded.
fn an_approval_of_what_pending_showed_runs_a_rewritten_call(backend: Backend) {
    approving_what_pending_showed(
        backend,
        steered,
        ("delete_file", json!({ "path": "/srv/tmp/old.log" })),
        json!({ "path": "/srv/archive/old.log" }),
    );
}

/// N4: an `on_invalid_call` hook renamed the model's misspelt tool.
fn an_approval_of_what_pending_showed_runs_a_renamed_call(backend: Backend) {
    approving_what_pending_showed(
        backend,
        steered,
        ("delete_flie", json!({ "path": "/srv/old.log" })),
        json!({ "path": "/srv/old.log" }),
    );
}

/// Found by the property test: when the save of a turn fails, the run
/// stops (`StoreFailed`) and the stored turn lacks the refusals it made;
/// the call past the turn's limit was then asked for an approval on
/// revival, and ran once approved. The refusal is decided again from the
/// call's place in the stored turn. Each save of the run fails in turn.
fn a_call_past_the_turns_limit_stays_refused_when_the_turns_save_fails(backend: Backend) {
    let mut stopped = 0;
    for saves_before in 0..4 {
        let Some(stopped_here) = save_fails_after(backend, saves_before) else {
            return;
        };
        stopped += usize::from(stopped_here);
    }
    assert!(
        stopped > 0,
        "no failed save stopped a run: the test tests nothing"
    );
}

/// One run of the test above, whose `saves_before + 1`-th save fails;
/// whether it stopped the run (`None`: no store for `backend`).
fn save_fails_after(backend: Backend, saves_before: u32) -> Option<bool> {
    use aptix_testkit::faulty_store::{Fault, FaultyStore, StoreOp};
    let at = StoreAt::new(backend)?;
    let id = format!("save-fails-{}", uuid());
    // One process, as in `Process::start`, but the store is wrapped to fail.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("a runtime: {e}"));
    Some(runtime.block_on(async {
        let store = Arc::new(FaultyStore::new(at.open().await));
        let agent = DurableAgent::builder(
            Agent::builder()
                .model(ScriptedModel::new(vec![
                    ScriptedTurn::new()
                        .tool_call("d1", "delete_file", r#"{"path":"/srv/a"}"#)
                        .tool_call("w1", "wipe_database", "{}")
                        .tool_call("w2", "wipe_database", "{}")
                        .tool_call("d4", "delete_file", r#"{"path":"/srv/past-the-limit"}"#),
                    ScriptedTurn::new().text("Done."),
                    ScriptedTurn::new().text("Done again."),
                ]))
                .catalog(catalog())
                .max_calls_per_turn(3)
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
            store.clone(),
        )
        .lease(LEASE)
        .deadline_worker(None)
        .build();
        store.fail(StoreOp::SaveConversation, Fault::after(saves_before));
        let events: Vec<AgentEvent> = match agent.send(&id, Input::User("clean up".into())).await {
            Ok(stream) => stream.collect().await,
            Err(_) => Vec::new(),
        };
        let stopped = events.iter().any(|event| {
            matches!(
                event,
                AgentEvent::Done {
                    reason: DoneReason::StoreFailed(_),
                    ..
                }
            )
        });
        store.heal();
        // Resume, approving whatever waits, until the conversation rests.
        let started = Instant::now();
        loop {
            let _ = agent.ensure_started(&id).await;
            for pending in agent.pending(&id).await.unwrap_or_default() {
                let _ = agent
                    .resolve(&id, &pending.tool_call_id, Resolution::Approve)
                    .await;
            }
            let stored = agent
                .conversation(&id)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            match stored {
                Some(stored) if stored.status == ConversationStatus::Idle => break,
                None if !stopped && events.is_empty() => break,
                stored => assert!(
                    started.elapsed() < PATIENCE,
                    "not idle: {:#?}",
                    stored.map(|stored| stored.conversation.messages)
                ),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let deleted = runs_of(&id, "delete_file");
        assert!(
            !deleted.contains(&json!({ "path": "/srv/past-the-limit" })),
            "the call past the turn's limit ran (save {} failed): {deleted:?}",
            saves_before + 1
        );
        stopped
    }))
}

/// The model makes `call` (which hooks and policy let through, so it waits
/// for a person); the approver answers `ApproveWithArgs(edited)`. Returns
/// the conversation and what ran, once it rests.
fn approve_an_edit(
    backend: Backend,
    call: (&str, Value),
    edited: Value,
) -> Option<(String, Conversation)> {
    let at = StoreAt::new(backend)?;
    let id = format!("edited-{}", uuid());
    let process = Process::start(
        &at,
        sandboxed,
        vec![
            ScriptedTurn::new().tool_call("c1", call.0, &call.1.to_string()),
            ScriptedTurn::new().text("Done."),
        ],
    );
    process.send_until_suspended(&id, "go");
    let resolved = process.runtime.block_on(process.agent.resolve(
        &id,
        "c1",
        Resolution::ApproveWithArgs(edited),
    ));
    assert!(resolved.is_ok(), "{resolved:?}");
    let conversation = process.wait_idle(&id);
    process.kill();
    Some((id, conversation))
}

/// Red team 2026-11-27, D1: a `before_call` hook denies deletions outside
/// the tenant's files; the model's call is inside, so it waits for a
/// person; the approver's edit moves it outside, and it ran.
fn an_approvers_edit_goes_through_the_hooks(backend: Backend) {
    let Some((id, conversation)) = approve_an_edit(
        backend,
        ("delete_file", json!({ "path": "/srv/tenant-a/old.log" })),
        json!({ "path": "/srv/tenant-b/ledger.db" }),
    ) else {
        return;
    };
    assert!(
        runs_of(&id, "delete_file").is_empty(),
        "the edit ran past the hook"
    );
    let (code, message) = refusal(&conversation, "c1");
    assert_eq!(code, "denied", "{message}");
    assert!(message.contains("outside the tenant's files"), "{message}");
}

/// Red team 2026-11-27, D2: the approval policy asks for transfers up to
/// 100.00 and denies the rest; the approver's edit turned 50.00 into
/// 50,000.00, and it ran.
fn an_approvers_edit_goes_through_the_approval_policy(backend: Backend) {
    let Some((id, conversation)) = approve_an_edit(
        backend,
        ("transfer", json!({ "cents": 5_000 })),
        json!({ "cents": 5_000_000 }),
    ) else {
        return;
    };
    assert!(
        runs_of(&id, "transfer").is_empty(),
        "the edit ran past the policy"
    );
    let (code, message) = refusal(&conversation, "c1");
    assert_eq!(code, "denied", "{message}");
}
