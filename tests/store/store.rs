//! The store conformance suite (`aptix_testkit::store_suite`) against every
//! backend: `MemoryStore`, `SqliteStore` (a fresh file per test) and
//! `PostgresStore` at `APTIX_TEST_PG_URL` (`scripts/pg-server.sh start`
//! provides one). Without that variable the PostgreSQL tests print a notice
//! and pass, except under CI (`CI=true`), where they fail: CI must test the
//! backend that many processes share.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::common::{Backend, TempDb, pg_url, store, unique};
use aptix::Conversation;
use aptix::store::{
    CallRecord, CallState, ConversationStatus, MemoryStore, PostgresStore, SqliteStore, Step, Store,
};
use aptix::transcript::Message;
use aptix_testkit::store_suite;

/// Every case of the suite; `every_case_has_a_test` keeps this list and the
/// suite's in step.
const CASES: &[&str] = &[
    "create_and_load",
    "claim_rules",
    "claim_after_release",
    "renew_lease_rules",
    "save_rules",
    "versions_increase",
    "conversations_with_status_order",
    "insert_call_once",
    "call_and_calls_order",
    "call_record_round_trip",
    "transition_cas",
    "final_states_do_not_move",
    "set_deadline_only_pending",
    "due_calls_filter_order_limit",
    "suspended_without_pending_lists_settled_waits",
    "transcript_round_trip",
    "concurrent_transition_one_winner",
    "concurrent_claim_one_winner",
    "batch_applies_every_write",
    "batch_refused_write_undoes_the_batch",
    "concurrent_batches_one_winner",
];

/// Runs the suite's case `name` on a fresh store on `backend`.
async fn run_case(backend: Backend, name: &str) {
    let Some((_, case)) = store_suite::cases()
        .into_iter()
        .find(|(case, _)| *case == name)
    else {
        panic!("the store suite has no case `{name}`");
    };
    let Some(store) = store(backend).await else {
        return;
    };
    case(store, unique(&format!("{}-{name}", backend.name()))).await;
}

/// One test per case and backend, so a failure names both: an async fn per
/// case, run on every store.
macro_rules! every_backend {
    ($($case:ident),* $(,)?) => {
        $(
            async fn $case(backend: Backend) {
                run_case(backend, stringify!($case)).await;
            }
        )*
        crate::common::on_every_store!(worker_threads = 4: $($case),*);
        const MACRO_CASES: &[&str] = &[$(stringify!($case)),*];
    };
}

every_backend!(
    create_and_load,
    claim_rules,
    claim_after_release,
    renew_lease_rules,
    save_rules,
    versions_increase,
    conversations_with_status_order,
    insert_call_once,
    call_and_calls_order,
    call_record_round_trip,
    transition_cas,
    final_states_do_not_move,
    set_deadline_only_pending,
    due_calls_filter_order_limit,
    suspended_without_pending_lists_settled_waits,
    transcript_round_trip,
    concurrent_transition_one_winner,
    concurrent_claim_one_winner,
    batch_applies_every_write,
    batch_refused_write_undoes_the_batch,
    concurrent_batches_one_winner,
);

#[test]
fn every_case_has_a_test() {
    let suite: Vec<&str> = store_suite::cases().iter().map(|(name, _)| *name).collect();
    assert_eq!(suite, CASES, "the suite's cases changed: update CASES");
    assert_eq!(MACRO_CASES, CASES, "every case needs a test per backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_all_passes_on_memory() {
    store_suite::run_all(Arc::new(MemoryStore::new()), &unique("memory-all")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_all_passes_on_sqlite_in_memory() {
    let store = match SqliteStore::in_memory().await {
        Ok(store) => store,
        Err(error) => panic!("cannot open an in-memory SQLite store: {error}"),
    };
    store_suite::run_all(Arc::new(store), &unique("sqlite-memory-all")).await;
}

/// What the SQLite store is for: conversations, ledger and deadlines are
/// still there after the file is closed and opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_data_survives_reopening() {
    let file = TempDb::new("reopen");
    let mut conversation = Conversation::new("conv-1").with_session_id("session-ü");
    conversation.messages = store_suite::awkward_transcript();
    let call = CallRecord {
        requested: None,
        reasoning: None,
        conversation_id: "conv-1".to_owned(),
        tool_call_id: "call_1".to_owned(),
        step: Step::Approval,
        tool: "delete_file".to_owned(),
        arguments: r#"{"path":"/tmp/ü"}"#.to_owned(),
        payload: r#"{"path":"/tmp/ü"}"#.to_owned(),
        state: CallState::Pending,
        outcome: None,
        deadline: Some(5_000),
        created_at: 1_000,
        updated_at: 1_000,
    };
    let executed = CallRecord {
        step: Step::Execution,
        state: CallState::Executing,
        deadline: None,
        ..call.clone()
    };

    let before = {
        let store = SqliteStore::open(&file.0).await.expect("open");
        assert!(
            store
                .create_conversation(&conversation, 1_000)
                .await
                .expect("create")
        );
        store
            .claim_conversation("conv-1", "process-a", 1_000, 60_000)
            .await
            .expect("claim")
            .expect("an idle conversation is free");
        conversation.messages.push(Message::user("one more"));
        store
            .save_conversation(&conversation, "process-a", ConversationStatus::Suspended, 0)
            .await
            .expect("save");
        assert!(store.insert_call(&call).await.expect("insert"));
        assert!(store.insert_call(&executed).await.expect("insert"));
        assert!(
            store
                .transition(
                    "conv-1",
                    "call_1",
                    Step::Execution,
                    CallState::Executing,
                    CallState::Done,
                    Some(r#"{"ok":true}"#),
                    2_000,
                )
                .await
                .expect("transition")
        );
        let before = store.load_conversation("conv-1").await.expect("load");
        store.close().await;
        before.expect("stored")
    };

    let store = SqliteStore::open(&file.0).await.expect("reopen");
    let after = store.load_conversation("conv-1").await.expect("load");
    assert_eq!(after.as_ref(), Some(&before), "the conversation survives");
    assert_eq!(before.conversation, conversation);
    assert_eq!(before.status, ConversationStatus::Suspended);
    let calls = store.calls("conv-1").await.expect("calls");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0], call);
    assert_eq!(calls[1].state, CallState::Done);
    assert_eq!(calls[1].outcome.as_deref(), Some(r#"{"ok":true}"#));
    assert_eq!(
        store.due_calls(5_000, 10).await.expect("due"),
        [call],
        "the deadline survives"
    );
    assert_eq!(
        store
            .conversations_with_status(ConversationStatus::Suspended, 10)
            .await
            .expect("list"),
        ["conv-1"]
    );
    // And a reopened store keeps working: the change counter goes on.
    assert!(
        store
            .claim_conversation("conv-1", "process-b", 70_000, 80_000)
            .await
            .expect("claim")
            .is_some()
    );
    store.close().await;
}

/// Several processes opening one new file at once all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_concurrent_opens_of_a_new_file() {
    let file = TempDb::new("opens");
    let opens = (0..8).map(|_| SqliteStore::open(&file.0));
    for result in futures_util::future::join_all(opens).await {
        let store = result.expect("a concurrent open succeeds");
        store.close().await;
    }
}

/// A database of its own on the test server, dropped (with its
/// connections) by [`ScratchDatabase::drop_now`].
struct ScratchDatabase {
    admin: PostgresStore,
    name: String,
    url: String,
}

impl ScratchDatabase {
    async fn create(url: &str, label: &str) -> Self {
        use sqlx::Executor as _;

        let admin = PostgresStore::connect(url).await.expect("connect");
        let name = unique(label).replace('-', "_");
        admin
            .pool()
            .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .await
            .expect("create a scratch database");
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, format!("?{query}")),
            None => (url, String::new()),
        };
        let url = match base.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}{query}"),
            None => panic!("APTIX_TEST_PG_URL has no database part: {url}"),
        };
        ScratchDatabase { admin, name, url }
    }

    async fn drop_now(self) {
        use sqlx::Executor as _;

        self.admin
            .pool()
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .await
            .expect("drop the scratch database");
    }
}

/// Processes of one deployment start together: every one of them creating
/// the schema in a fresh database at once succeeds (PostgreSQL's
/// `CREATE TABLE IF NOT EXISTS` alone would fail some of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_concurrent_connects_to_a_new_database() {
    let Some(url) = pg_url() else {
        return;
    };
    let scratch = ScratchDatabase::create(&url, "aptix_schema").await;
    let connects = (0..6).map(|_| PostgresStore::connect(&scratch.url));
    let results = futures_util::future::join_all(connects).await;
    for store in results.iter().flatten() {
        store.close().await;
    }
    scratch.drop_now().await;
    for result in results {
        if let Err(error) = result {
            panic!("a concurrent connect failed: {error}");
        }
    }
}

/// A process that starts while others of its deployment write neither fails
/// nor fails their writes. `CREATE INDEX IF NOT EXISTS` takes a share lock on
/// its table before it looks for the index, so running the schema on every
/// connect ran into the writers' row locks, table after table, and
/// PostgreSQL broke the cycle by failing one side with "deadlock detected".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_connect_while_others_write_fails_nobody() {
    let Some(url) = pg_url() else {
        return;
    };
    let scratch = ScratchDatabase::create(&url, "aptix_busy").await;
    let writer = PostgresStore::connect(&scratch.url)
        .await
        .expect("the first connect creates the schema");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|task| {
            let store: Arc<dyn Store> = Arc::new(writer.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    let prefix = unique(&format!("busy-{task}-{round}"));
                    store_suite::batch_applies_every_write(&*store, &prefix).await;
                    round += 1;
                }
                round
            })
        })
        .collect();
    let mut failures = Vec::new();
    for _ in 0..40 {
        match PostgresStore::connect(&scratch.url).await {
            Ok(store) => store.close().await,
            Err(error) => failures.push(error.to_string()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut rounds = 0;
    let mut writer_panics = Vec::new();
    for task in writers {
        match task.await {
            Ok(done) => rounds += done,
            Err(error) => writer_panics.push(error.to_string()),
        }
    }
    writer.close().await;
    scratch.drop_now().await;
    assert!(
        failures.is_empty() && writer_panics.is_empty(),
        "connects failed: {failures:?}; writers failed: {writer_panics:?}"
    );
    assert!(rounds > 0, "the writers wrote while the connects ran");
}

/// A process older than the database's schema refuses to start rather
/// than misread or miswrite tables it does not know; one of the same
/// version starts without touching the schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_schema_newer_than_the_process_is_refused() {
    use sqlx::Executor as _;

    let Some(url) = pg_url() else {
        return;
    };
    let scratch = ScratchDatabase::create(&url, "aptix_newer").await;
    let first = PostgresStore::connect(&scratch.url)
        .await
        .expect("the first connect creates the schema");
    let again = PostgresStore::connect(&scratch.url).await;
    first
        .pool()
        .execute("UPDATE aptix_schema SET version = version + 1")
        .await
        .expect("raise the schema version");
    let newer = PostgresStore::connect(&scratch.url).await;
    first.close().await;
    if let Ok(store) = &again {
        store.close().await;
    }
    scratch.drop_now().await;
    assert!(again.is_ok(), "a second connect: {again:?}");
    match newer {
        Err(aptix::store::StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!(found, supported + 1);
        }
        other => panic!("a newer schema must be refused, got {other:?}"),
    }
}

/// A statement that fails in the middle of a batch (here a trigger that
/// aborts the insert of one call) fails the batch and leaves none of its
/// writes behind, also those before the failing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_failure_in_the_middle_of_a_batch_writes_nothing() {
    use aptix::store::{Applied, Batch, StoreError, Write};
    use sqlx::Executor as _;

    let file = TempDb::new("mid-batch");
    let store = SqliteStore::open(&file.0).await.expect("open");
    let raw = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.0.display()))
        .await
        .expect("a second connection");
    raw.execute(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON aptix_calls
         WHEN NEW.tool = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END",
    )
    .await
    .expect("the trigger");
    raw.close().await;

    let conversation = Conversation::new("conv-mid");
    let fine = CallRecord {
        requested: None,
        reasoning: None,
        conversation_id: "conv-mid".to_owned(),
        tool_call_id: "call_1".to_owned(),
        step: Step::Approval,
        tool: "fine".to_owned(),
        arguments: "{}".to_owned(),
        payload: "{}".to_owned(),
        state: CallState::Pending,
        outcome: None,
        deadline: None,
        created_at: 1,
        updated_at: 1,
    };
    let boom = CallRecord {
        tool_call_id: "call_2".to_owned(),
        tool: "boom".to_owned(),
        ..fine.clone()
    };
    let batch = Batch::new()
        .with(Write::EnsureConversation(&conversation))
        .with(Write::InsertCall(&fine))
        .with(Write::InsertCall(&boom));
    match store.apply(&batch).await {
        Err(StoreError::Backend(error)) => {
            assert!(error.to_string().contains("boom refused"), "{error}")
        }
        other => panic!("expected the trigger's error, got {other:?}"),
    }
    assert_eq!(
        store.load_conversation("conv-mid").await.expect("load"),
        None
    );
    assert_eq!(store.calls("conv-mid").await.expect("calls"), []);
    // The store is usable afterwards: the failed transaction was rolled back.
    let batch = Batch::new()
        .with(Write::EnsureConversation(&conversation))
        .with(Write::InsertCall(&fine));
    assert_eq!(
        store.apply(&batch).await.expect("apply"),
        Applied::All { claimed: None }
    );
    assert_eq!(store.calls("conv-mid").await.expect("calls"), [fine]);
    store.close().await;
}

/// What one durable round trip costs the store: `send` until the run
/// suspends on an approval, `resolve(Approve)`, and the background run that
/// executes the tool and answers, counted with `FaultyStore`'s counters.
/// Every write operation or batch is its own transaction (one commit, one
/// `fsync` on SQLite unless concurrent ones share a group commit), so the
/// number of commits is what bounds throughput.
mod round_trip {
    use std::sync::Arc;
    use std::time::Duration;

    use aptix::prelude::*;
    use aptix::store::{MemoryStore, SqliteStore, Store};
    use aptix::{Agent, AgentEvent, Catalog, DoneReason, DurableAgent, Input, Resolution};
    use aptix_testkit::faulty_store::{FaultyStore, OpCounts};
    use aptix_testkit::{ScriptedModel, ScriptedTurn};
    use futures_util::StreamExt;

    /// The most commits a round trip may make. Send: the claim together
    /// with the user's message (and the conversation's creation when new),
    /// the turn with the approval's row, the suspended transcript.
    /// Resolve: the resolution and the claim of the resumed run, in one
    /// batch. Resumed run: the approved call's execution row before it
    /// runs, its result, the final transcript (the results are the
    /// ledger's until then: no save before the model turn).
    const MAX_COMMITS: u64 = 7;

    /// Arguments of `charge`.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub(crate) struct Charge {
        /// The amount in cents.
        pub cents: u32,
    }

    /// Charges the card on file, once a person approves.
    #[agent_tool(name = "charge", usage = "Test tool.", approval = requires_approval)]
    async fn charge(args: Charge) -> Result<String, ToolError> {
        Ok(format!("charged {}", args.cents))
    }

    /// The operations of each part of two round trips of one conversation:
    /// the first creates it, the second finds it idle.
    async fn count<S: Store>(store: Arc<FaultyStore<S>>) -> [[OpCounts; 3]; 2] {
        let agent = durable_agent(
            &store,
            vec![
                ScriptedTurn::new().tool_call("call-1", "charge", r#"{"cents":500}"#),
                ScriptedTurn::new().text("Charged."),
                ScriptedTurn::new().tool_call("call-2", "charge", r#"{"cents":700}"#),
                ScriptedTurn::new().text("Charged again."),
            ],
        );
        let first = round(&agent, &store, "call-1").await;
        let second = round(&agent, &store, "call-2").await;
        [first, second]
    }

    /// A durable agent over `store` with the `charge` tool and a model
    /// answering `turns`, without a deadline worker.
    fn durable_agent<S: Store>(
        store: &Arc<FaultyStore<S>>,
        turns: Vec<ScriptedTurn>,
    ) -> DurableAgent {
        let catalog = Catalog::builder()
            .tool::<ChargeTool>()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let agent = Agent::builder()
            .model(ScriptedModel::new(turns))
            .catalog(catalog)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        DurableAgent::builder(agent, Arc::clone(store) as Arc<dyn Store>)
            .deadline_worker(None)
            .build()
    }

    /// One round trip of conversation `conv` whose model calls `call_id`.
    async fn round<S: Store>(
        agent: &DurableAgent,
        store: &FaultyStore<S>,
        call_id: &str,
    ) -> [OpCounts; 3] {
        let mut background = agent.subscribe();
        store.take_counts();

        let events: Vec<AgentEvent> = agent
            .send("conv", Input::User("charge me".into()))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .collect()
            .await;
        assert!(
            matches!(
                events.last(),
                Some(AgentEvent::Done {
                    reason: DoneReason::Suspended(_),
                    ..
                })
            ),
            "the run did not suspend: {events:?}"
        );
        let suspending = store.take_counts();
        // The send's own events reach the subscriber too: skip them.
        while let Ok(event) = background.try_recv() {
            drop(event);
        }

        agent
            .resolve("conv", call_id, Resolution::Approve)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let resolving = store.take_counts();

        let finished = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match background.recv().await {
                    Ok(event) => {
                        if let AgentEvent::Done { reason, .. } = event.event {
                            return reason;
                        }
                    }
                    Err(error) => panic!("no background Done: {error}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the background run did not finish"));
        assert!(
            matches!(finished, DoneReason::Completed),
            "the background run ended with {finished:?}"
        );
        // Let the run's last save land before counting it.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let resuming = store.take_counts();
        [suspending, resolving, resuming]
    }

    fn check(name: &str, rounds: [[OpCounts; 3]; 2]) {
        for (round, [suspending, resolving, resuming]) in
            ["first", "second"].into_iter().zip(rounds)
        {
            let commits = suspending.commits() + resolving.commits() + resuming.commits();
            assert!(
                commits <= MAX_COMMITS,
                "{name}, {round} round trip: {commits} commits (at most {MAX_COMMITS}):\n\
                 - send until suspended: {suspending}\n\
                 - resolve: {resolving}\n\
                 - background run: {resuming}"
            );
        }
    }

    /// A `send` whose claim (with the user's message) was committed but
    /// whose answer was lost goes on with the run: it reports no failure
    /// for a message that is stored, and the message is stored once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_send_whose_claim_committed_unacknowledged_goes_on() {
        use aptix_testkit::faulty_store::{Fault, StoreOp};

        let store = Arc::new(FaultyStore::new(MemoryStore::new()));
        let agent = durable_agent(&store, vec![ScriptedTurn::new().text("Hello.")]);
        store.fail(StoreOp::Apply, Fault::once().after_applying());
        let events: Vec<AgentEvent> = agent
            .send("conv", Input::User("hi".into()))
            .await
            .unwrap_or_else(|e| panic!("the send failed though its message is stored: {e}"))
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
            "{events:?}"
        );
        let stored = store
            .load_conversation("conv")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the conversation is stored"));
        let users = stored
            .conversation
            .messages
            .iter()
            .filter(|message| matches!(message, aptix::transcript::Message::User { .. }))
            .count();
        assert_eq!(users, 1, "{:?}", stored.conversation.messages);
        assert_eq!(stored.status, aptix::store::ConversationStatus::Idle);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_trip_commits_at_most_seven_times_on_memory() {
        let store = Arc::new(FaultyStore::new(MemoryStore::new()));
        check("MemoryStore", count(store).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_trip_commits_at_most_seven_times_on_sqlite() {
        let file = super::TempDb::new("round-trip");
        let store = SqliteStore::open(&file.0)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let store = Arc::new(FaultyStore::new(store));
        check("SqliteStore", count(store).await);
    }
}
