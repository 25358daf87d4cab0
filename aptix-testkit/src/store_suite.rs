//! The conformance suite of [`Store`]: every rule the trait's documentation
//! states, as one async function each. A backend conforms when all pass;
//! [`run_all`] runs them in turn.
//!
//! Every function takes a `prefix` and names everything it stores after it,
//! so runs against one shared database (several test binaries, several
//! runs, several tests at once) never touch each other's rows. They also
//! tolerate rows they did not write: a shared database keeps every earlier
//! run's conversations and calls.
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
//! async fn my_store_conforms() {
//!     let store: Arc<dyn Store> = Arc::new(MyStore::new());
//!     aptix_testkit::store_suite::run_all(store, "my-store").await;
//! }
//! ```
//!
//! Like the rest of the testkit, these functions panic with a descriptive
//! message when the store breaks a rule.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aptix_core::Conversation;
use aptix_core::store::{
    Applied, Batch, CallRecord, CallState, ConversationStatus, Step, Store, StoreError,
    StoredConversation, Write,
};
use aptix_core::transcript::{AssistantToolCall, Message};
use tokio::sync::Barrier;

/// One case of the suite, callable without naming it.
pub type Case = fn(Arc<dyn Store>, String) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Every case with its name, in the order [`run_all`] runs them.
pub fn cases() -> Vec<(&'static str, Case)> {
    macro_rules! by_ref {
        ($name:ident) => {
            (
                stringify!($name),
                |store: Arc<dyn Store>, prefix: String| {
                    Box::pin(async move { $name(&*store, &prefix).await })
                        as Pin<Box<dyn Future<Output = ()> + Send>>
                },
            )
        };
    }
    macro_rules! shared {
        ($name:ident) => {
            (
                stringify!($name),
                |store: Arc<dyn Store>, prefix: String| {
                    Box::pin(async move { $name(store, &prefix).await })
                        as Pin<Box<dyn Future<Output = ()> + Send>>
                },
            )
        };
    }
    vec![
        by_ref!(create_and_load),
        by_ref!(claim_rules),
        by_ref!(claim_after_release),
        by_ref!(renew_lease_rules),
        by_ref!(save_rules),
        by_ref!(versions_increase),
        by_ref!(conversations_with_status_order),
        by_ref!(insert_call_once),
        by_ref!(call_and_calls_order),
        by_ref!(call_record_round_trip),
        by_ref!(transition_cas),
        by_ref!(final_states_do_not_move),
        by_ref!(set_deadline_only_pending),
        by_ref!(due_calls_filter_order_limit),
        by_ref!(suspended_without_pending_lists_settled_waits),
        by_ref!(transcript_round_trip),
        shared!(concurrent_transition_one_winner),
        shared!(concurrent_claim_one_winner),
        by_ref!(batch_applies_every_write),
        by_ref!(batch_refused_write_undoes_the_batch),
        shared!(concurrent_batches_one_winner),
    ]
}

/// Runs every case against `store`, each under `"{prefix}-{case}"`.
///
/// # Panics
/// At the first broken rule, naming the case.
pub async fn run_all(store: Arc<dyn Store>, prefix: &str) {
    for (name, case) in cases() {
        case(store.clone(), format!("{prefix}-{name}")).await;
    }
}

// ---------------------------------------------------------------- helpers

fn ok<T>(result: Result<T, StoreError>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{what} failed: {error}"),
    }
}

fn some<T>(value: Option<T>, what: &str) -> T {
    match value {
        Some(value) => value,
        None => panic!("{what}: expected a value, got None"),
    }
}

fn assert_lost_lease(result: Result<(), StoreError>, id: &str, owner: &str, what: &str) {
    match result {
        Err(StoreError::LostLease {
            conversation_id,
            owner: lost_owner,
        }) => {
            assert_eq!(
                conversation_id, id,
                "{what}: LostLease names the conversation"
            );
            assert_eq!(lost_owner, owner, "{what}: LostLease names the owner");
        }
        Ok(()) => panic!("{what}: expected LostLease, the save succeeded"),
        Err(other) => panic!("{what}: expected LostLease, got {other}"),
    }
}

fn conversation(id: &str, text: &str) -> Conversation {
    let mut conversation = Conversation::new(id).with_system("You are a test.");
    conversation.messages.push(Message::user(text));
    conversation
}

fn record(
    conversation_id: &str,
    tool_call_id: &str,
    step: Step,
    state: CallState,
    created_at: i64,
    deadline: Option<i64>,
) -> CallRecord {
    CallRecord {
        requested: None,
        reasoning: None,
        conversation_id: conversation_id.to_owned(),
        tool_call_id: tool_call_id.to_owned(),
        step,
        tool: "delete_file".to_owned(),
        arguments: r#"{"path":"/tmp/x"}"#.to_owned(),
        payload: r#"{"tool":"delete_file","arguments":{"path":"/tmp/x"}}"#.to_owned(),
        state,
        outcome: None,
        deadline,
        created_at,
        updated_at: created_at,
    }
}

async fn load(store: &dyn Store, id: &str) -> StoredConversation {
    some(
        ok(store.load_conversation(id).await, "load_conversation"),
        &format!("load_conversation({id})"),
    )
}

async fn create(store: &dyn Store, conversation: &Conversation) {
    assert!(
        ok(
            store.create_conversation(conversation, 1).await,
            "create_conversation"
        ),
        "create_conversation({}) of a new id must return true",
        conversation.id
    );
}

async fn insert(store: &dyn Store, record: &CallRecord) {
    assert!(
        ok(store.insert_call(record).await, "insert_call"),
        "insert_call({}/{}/{}) of a new entry must return true",
        record.conversation_id,
        record.tool_call_id,
        record.step
    );
}

async fn entry(store: &dyn Store, record: &CallRecord) -> CallRecord {
    some(
        ok(
            store
                .call(&record.conversation_id, &record.tool_call_id, record.step)
                .await,
            "call",
        ),
        &format!(
            "call({}/{}/{})",
            record.conversation_id, record.tool_call_id, record.step
        ),
    )
}

/// Moves `record` to a new state, asserting that the move happened.
async fn advance(store: &dyn Store, record: &CallRecord, from: CallState, to: CallState) {
    assert!(
        ok(
            store
                .transition(
                    &record.conversation_id,
                    &record.tool_call_id,
                    record.step,
                    from,
                    to,
                    None,
                    record.created_at + 1,
                )
                .await,
            "transition",
        ),
        "transition {from} -> {to} of {} must succeed",
        record.tool_call_id
    );
}

/// The ids of `status` in the store's order, keeping only ours.
async fn ours_with_status(
    store: &dyn Store,
    status: ConversationStatus,
    prefix: &str,
) -> Vec<String> {
    let all = ok(
        store.conversations_with_status(status, usize::MAX).await,
        "conversations_with_status",
    );
    all.into_iter()
        .filter(|id| id.starts_with(prefix))
        .collect()
}

/// A time base for deadlines that no earlier or concurrent run of
/// [`due_calls_filter_order_limit`] uses: negative, and lower for every
/// later call (1024 ms-slots per millisecond of the wall clock), so rows an
/// earlier run left pending are all *later* than this run's `now`.
fn fresh_time_base() -> i64 {
    static SEQUENCE: AtomicI64 = AtomicI64::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
        // Past the year 2109 the base would overflow; wrap instead.
        .min(1 << 42);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed) % 1024;
    -(millis * 1024 + sequence) * 1024
}

// ---------------------------------------------------------- conversations

/// `create_conversation` stores a new conversation as `Idle` and refuses,
/// changing nothing, an id that exists; `load_conversation` of an absent id
/// is `None`.
pub async fn create_and_load(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-conversation");
    assert_eq!(
        ok(store.load_conversation(&id).await, "load_conversation"),
        None,
        "an absent conversation loads as None"
    );

    // Who the conversation is for comes back too: a durable run resumed
    // from the store gives its tools the same user and tenant.
    let original = conversation(&id, "hello")
        .with_session_id(format!("{prefix}-session"))
        .with_user_id(format!("{prefix}-user"))
        .with_tenant_id(format!("{prefix}-tenant"));
    create(store, &original).await;
    let stored = load(store, &id).await;
    assert_eq!(stored.conversation, original, "the transcript as created");
    assert_eq!(
        stored.status,
        ConversationStatus::Idle,
        "a new conversation is Idle"
    );
    assert_eq!(stored.owner, None, "a new conversation has no owner");

    let other = conversation(&id, "a different transcript");
    assert!(
        !ok(
            store.create_conversation(&other, 2).await,
            "create_conversation"
        ),
        "creating an existing id returns false"
    );
    assert_eq!(
        load(store, &id).await,
        stored,
        "a refused create changes nothing"
    );

    // Not even a running conversation is reset by a second create.
    some(
        ok(
            store.claim_conversation(&id, "owner-a", 10, 100).await,
            "claim",
        ),
        "claim of an idle conversation",
    );
    let running = load(store, &id).await;
    assert!(!ok(
        store.create_conversation(&other, 20).await,
        "create_conversation"
    ));
    assert_eq!(
        load(store, &id).await,
        running,
        "a refused create changes nothing"
    );

    let never = format!("{prefix}-never-created");
    assert_eq!(ok(store.load_conversation(&never).await, "load"), None);
}

/// `claim_conversation` succeeds when the conversation is not `Running`,
/// when its lease ran out before `now`, or when `owner` already holds it;
/// otherwise (and for an absent conversation) it returns `None`.
pub async fn claim_rules(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-claimed");
    let absent = format!("{prefix}-absent");
    assert_eq!(
        ok(
            store.claim_conversation(&absent, "a", 1_000, 2_000).await,
            "claim"
        ),
        None,
        "claiming an absent conversation returns None"
    );
    assert_eq!(ok(store.load_conversation(&absent).await, "load"), None);

    let original = conversation(&id, "claim me");
    create(store, &original).await;

    let claimed = some(
        ok(
            store.claim_conversation(&id, "a", 1_000, 2_000).await,
            "claim",
        ),
        "claim of an Idle conversation",
    );
    assert_eq!(claimed.status, ConversationStatus::Running);
    assert_eq!(claimed.owner.as_deref(), Some("a"));
    assert_eq!(claimed.lease_until, 2_000);
    assert_eq!(
        claimed.conversation, original,
        "the claim returns the transcript"
    );
    assert_eq!(
        load(store, &id).await,
        claimed,
        "the claim returns what is stored"
    );

    for now in [1_000, 1_500, 2_000] {
        assert_eq!(
            ok(
                store.claim_conversation(&id, "b", now, 9_000).await,
                "claim"
            ),
            None,
            "another owner cannot claim at {now} while the lease (until 2000) holds"
        );
    }
    assert_eq!(
        load(store, &id).await,
        claimed,
        "a refused claim changes nothing"
    );

    let again = some(
        ok(
            store.claim_conversation(&id, "a", 1_500, 3_000).await,
            "claim",
        ),
        "the holder re-claims (extends) its own conversation",
    );
    assert_eq!(again.owner.as_deref(), Some("a"));
    assert_eq!(again.lease_until, 3_000);
    assert_eq!(again.status, ConversationStatus::Running);

    assert_eq!(
        ok(
            store.claim_conversation(&id, "b", 2_500, 9_000).await,
            "claim"
        ),
        None,
        "the extended lease holds"
    );

    let taken = some(
        ok(
            store.claim_conversation(&id, "b", 3_001, 4_000).await,
            "claim",
        ),
        "another owner claims once the lease ran out",
    );
    assert_eq!(taken.owner.as_deref(), Some("b"));
    assert_eq!(taken.lease_until, 4_000);
    assert_eq!(taken.status, ConversationStatus::Running);
    assert_eq!(
        ok(
            store.claim_conversation(&id, "a", 3_500, 9_000).await,
            "claim"
        ),
        None,
        "the former holder is now refused"
    );
    assert_eq!(load(store, &id).await.owner.as_deref(), Some("b"));
}

/// Saving `Idle` or `Suspended` gives the hold up: anyone may claim at
/// once, lease or not.
pub async fn claim_after_release(store: &dyn Store, prefix: &str) {
    for status in [ConversationStatus::Suspended, ConversationStatus::Idle] {
        let id = format!("{prefix}-{}", status.as_str());
        let original = conversation(&id, "release me");
        create(store, &original).await;
        some(
            ok(
                store.claim_conversation(&id, "a", 1_000, 60_000).await,
                "claim",
            ),
            "first claim",
        );
        ok(
            store
                .save_conversation(&original, "a", status, 60_000)
                .await,
            "save_conversation",
        );
        let released = load(store, &id).await;
        assert_eq!(released.status, status);
        assert_eq!(released.owner, None, "saving {status:?} gives the hold up");

        let claimed = some(
            ok(
                store.claim_conversation(&id, "b", 1_001, 2_000).await,
                "claim",
            ),
            &format!("a {status:?} conversation is free to claim"),
        );
        assert_eq!(claimed.owner.as_deref(), Some("b"));
        assert_eq!(claimed.status, ConversationStatus::Running);
    }
}

/// `renew_lease` extends only the holder's lease of a running
/// conversation, and changes nothing else.
pub async fn renew_lease_rules(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-renew");
    let original = conversation(&id, "keep me");
    create(store, &original).await;
    assert!(
        !ok(store.renew_lease(&id, "a", 5_000).await, "renew_lease"),
        "an idle conversation has no lease to renew"
    );
    some(
        ok(
            store.claim_conversation(&id, "a", 1_000, 2_000).await,
            "claim",
        ),
        "first claim",
    );
    let before = load(store, &id).await;
    assert!(
        !ok(store.renew_lease(&id, "b", 9_000).await, "renew_lease"),
        "only the holder renews"
    );
    assert!(ok(store.renew_lease(&id, "a", 9_000).await, "renew_lease"));
    let renewed = load(store, &id).await;
    assert_eq!(renewed.lease_until, 9_000);
    assert_eq!(renewed.owner.as_deref(), Some("a"));
    assert_eq!(renewed.status, ConversationStatus::Running);
    assert_eq!(renewed.conversation, before.conversation);
    // Held until 9_000 now: another owner cannot take it at 5_000.
    assert!(
        ok(
            store.claim_conversation(&id, "b", 5_000, 20_000).await,
            "claim"
        )
        .is_none(),
        "a renewed lease holds"
    );
    ok(
        store
            .save_conversation(&original, "a", ConversationStatus::Suspended, 0)
            .await,
        "save_conversation",
    );
    assert!(
        !ok(store.renew_lease(&id, "a", 30_000).await, "renew_lease"),
        "a released conversation is not renewed back"
    );
    assert_eq!(load(store, &id).await.status, ConversationStatus::Suspended);
}

/// `save_conversation` writes transcript and status only for the holder;
/// anyone else gets `LostLease` and changes nothing.
pub async fn save_rules(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-saved");
    let original = conversation(&id, "v1");

    let absent = conversation(&format!("{prefix}-absent"), "x");
    assert_lost_lease(
        store
            .save_conversation(&absent, "a", ConversationStatus::Running, 10)
            .await,
        &absent.id,
        "a",
        "save of an absent conversation",
    );
    assert_eq!(ok(store.load_conversation(&absent.id).await, "load"), None);

    create(store, &original).await;
    assert_lost_lease(
        store
            .save_conversation(&original, "a", ConversationStatus::Running, 10)
            .await,
        &id,
        "a",
        "save of an Idle conversation nobody holds",
    );

    some(
        ok(store.claim_conversation(&id, "a", 100, 200).await, "claim"),
        "claim",
    );
    let before = load(store, &id).await;
    let mut stolen = original.clone();
    stolen.messages.push(Message::user("from b"));
    assert_lost_lease(
        store
            .save_conversation(&stolen, "b", ConversationStatus::Running, 10_000)
            .await,
        &id,
        "b",
        "save by a process that does not hold the conversation",
    );
    assert_eq!(
        load(store, &id).await,
        before,
        "a refused save changes nothing"
    );

    let mut updated = original.clone();
    updated.session_id = Some(format!("{prefix}-session"));
    updated.tenant_id = Some(format!("{prefix}-tenant-2"));
    updated.messages.push(Message::user("v2"));
    ok(
        store
            .save_conversation(&updated, "a", ConversationStatus::Running, 500)
            .await,
        "save by the holder",
    );
    let stored = load(store, &id).await;
    assert_eq!(
        stored.conversation, updated,
        "the save wrote the transcript"
    );
    assert_eq!(stored.status, ConversationStatus::Running);
    assert_eq!(
        stored.owner.as_deref(),
        Some("a"),
        "saving Running keeps the hold"
    );
    assert_eq!(stored.lease_until, 500, "saving Running extends the lease");
    assert_eq!(
        ok(store.claim_conversation(&id, "b", 300, 900).await, "claim"),
        None,
        "the extended lease holds past the first one"
    );

    ok(
        store
            .save_conversation(&updated, "a", ConversationStatus::Suspended, 500)
            .await,
        "save Suspended",
    );
    assert_lost_lease(
        store
            .save_conversation(&updated, "a", ConversationStatus::Running, 900)
            .await,
        &id,
        "a",
        "save after giving the hold up",
    );

    // A holder whose lease ran out and was claimed by another loses.
    some(
        ok(
            store.claim_conversation(&id, "a", 1_000, 1_100).await,
            "claim",
        ),
        "claim of a Suspended conversation",
    );
    some(
        ok(
            store.claim_conversation(&id, "b", 1_200, 5_000).await,
            "claim",
        ),
        "claim after the lease ran out",
    );
    assert_lost_lease(
        store
            .save_conversation(&updated, "a", ConversationStatus::Idle, 0)
            .await,
        &id,
        "a",
        "save by the holder whose lease was taken over",
    );
    let stored = load(store, &id).await;
    assert_eq!(stored.owner.as_deref(), Some("b"));
    assert_eq!(stored.conversation, updated);
}

/// `version` grows with every save (and never shrinks on a claim); refused
/// operations leave it alone.
pub async fn versions_increase(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-versioned");
    let mut current = conversation(&id, "v");
    create(store, &current).await;
    let mut version = load(store, &id).await.version;

    let claimed = some(
        ok(store.claim_conversation(&id, "a", 10, 1_000).await, "claim"),
        "claim",
    );
    assert!(
        claimed.version >= version,
        "a claim never lowers the version"
    );
    version = claimed.version;

    for round in 0..3 {
        current
            .messages
            .push(Message::user(format!("turn {round}")));
        ok(
            store
                .save_conversation(&current, "a", ConversationStatus::Running, 1_000)
                .await,
            "save",
        );
        let saved = load(store, &id).await.version;
        assert!(
            saved > version,
            "save {round}: version {saved} must exceed {version}"
        );
        version = saved;
    }

    assert!(
        store
            .save_conversation(&current, "b", ConversationStatus::Idle, 0)
            .await
            .is_err()
    );
    assert_eq!(
        ok(store.claim_conversation(&id, "b", 20, 2_000).await, "claim"),
        None
    );
    assert_eq!(
        load(store, &id).await.version,
        version,
        "refused saves and claims leave the version"
    );

    ok(
        store
            .save_conversation(&current, "a", ConversationStatus::Idle, 0)
            .await,
        "save Idle",
    );
    assert!(load(store, &id).await.version > version);
}

/// `conversations_with_status` lists ids of one status, oldest change
/// first, at most `limit`.
pub async fn conversations_with_status_order(store: &dyn Store, prefix: &str) {
    use ConversationStatus::{Idle, Running, Suspended};
    let [a, b, c] = ["a", "b", "c"].map(|name| format!("{prefix}-{name}"));
    for id in [&a, &b, &c] {
        create(store, &conversation(id, "listed")).await;
    }
    assert_eq!(
        ours_with_status(store, Idle, prefix).await,
        [a.as_str(), b.as_str(), c.as_str()]
    );
    assert!(ours_with_status(store, Running, prefix).await.is_empty());

    // A change moves a conversation to the end of its status.
    some(
        ok(store.claim_conversation(&a, "o", 1, 100).await, "claim"),
        "claim a",
    );
    assert_eq!(ours_with_status(store, Running, prefix).await, [a.as_str()]);
    ok(
        store
            .save_conversation(&conversation(&a, "listed"), "o", Idle, 0)
            .await,
        "save",
    );
    assert_eq!(
        ours_with_status(store, Idle, prefix).await,
        [b.as_str(), c.as_str(), a.as_str()]
    );

    some(
        ok(store.claim_conversation(&c, "o", 1, 100).await, "claim"),
        "claim c",
    );
    some(
        ok(store.claim_conversation(&b, "o", 1, 100).await, "claim"),
        "claim b",
    );
    assert_eq!(
        ours_with_status(store, Running, prefix).await,
        [c.as_str(), b.as_str()]
    );
    assert_eq!(ours_with_status(store, Idle, prefix).await, [a.as_str()]);
    for id in [&b, &c] {
        ok(
            store
                .save_conversation(&conversation(id, "listed"), "o", Suspended, 0)
                .await,
            "save",
        );
    }
    assert_eq!(
        ours_with_status(store, Suspended, prefix).await,
        [b.as_str(), c.as_str()]
    );
    assert!(ours_with_status(store, Running, prefix).await.is_empty());

    assert!(
        ok(store.conversations_with_status(Suspended, 0).await, "list").is_empty(),
        "limit 0 lists nothing"
    );
    // Other rows (earlier runs, concurrent tests) may share the database, so
    // compare a limited list with the full one only when the full one did
    // not change around it.
    for limit in [1, 2] {
        let mut checked = false;
        for _ in 0..50 {
            let before = ok(
                store.conversations_with_status(Suspended, usize::MAX).await,
                "list",
            );
            let limited = ok(
                store.conversations_with_status(Suspended, limit).await,
                "list",
            );
            let after = ok(
                store.conversations_with_status(Suspended, usize::MAX).await,
                "list",
            );
            if before == after {
                assert_eq!(
                    limited,
                    before[..limit.min(before.len())],
                    "limit {limit} keeps the oldest changes"
                );
                checked = true;
                break;
            }
        }
        assert!(
            checked,
            "the Suspended list never held still long enough to compare"
        );
    }
    for id in ok(
        store.conversations_with_status(Suspended, usize::MAX).await,
        "list",
    )
    .iter()
    .filter(|id| id.starts_with(prefix))
    {
        assert_eq!(load(store, id).await.status, Suspended);
    }
}

// ------------------------------------------------------------------ ledger

/// `insert_call` adds an entry once per (conversation, call, step); a
/// duplicate returns false and changes nothing. `call` of an absent entry
/// is `None`.
pub async fn insert_call_once(store: &dyn Store, prefix: &str) {
    let conversation_id = format!("{prefix}-ledger");
    let first = record(
        &conversation_id,
        "call_1",
        Step::Approval,
        CallState::Pending,
        100,
        Some(5_000),
    );
    assert_eq!(
        ok(
            store.call(&conversation_id, "call_1", Step::Approval).await,
            "call"
        ),
        None,
        "an absent entry is None"
    );
    insert(store, &first).await;
    assert_eq!(entry(store, &first).await, first, "the entry as inserted");

    let mut duplicate = first.clone();
    duplicate.tool = "other_tool".to_owned();
    duplicate.state = CallState::Resolved;
    duplicate.outcome = Some("{}".to_owned());
    duplicate.created_at = 999;
    assert!(
        !ok(store.insert_call(&duplicate).await, "insert_call"),
        "a duplicate entry returns false"
    );
    assert_eq!(
        entry(store, &first).await,
        first,
        "a refused insert changes nothing"
    );

    let next_step = CallRecord {
        step: Step::Client,
        ..first.clone()
    };
    insert(store, &next_step).await;
    let elsewhere = CallRecord {
        conversation_id: format!("{prefix}-other-ledger"),
        ..first.clone()
    };
    insert(store, &elsewhere).await;
    assert_eq!(entry(store, &first).await, first);
    assert_eq!(entry(store, &next_step).await, next_step);
    assert_eq!(entry(store, &elsewhere).await, elsewhere);
    assert_eq!(
        ok(
            store.call(&conversation_id, "call_1", Step::Human).await,
            "call"
        ),
        None,
        "another step of the same call is a different entry"
    );
    assert_eq!(
        ok(
            store.call(&conversation_id, "call_2", Step::Approval).await,
            "call"
        ),
        None
    );
    // Leave nothing due for anyone sharing the database.
    for pending in [&first, &next_step, &elsewhere] {
        advance(store, pending, CallState::Pending, CallState::Cancelled).await;
    }
}

/// `calls` lists one conversation's entries by creation time, then call id
/// (as bytes), then step (in `Step`'s order, not alphabetical).
pub async fn call_and_calls_order(store: &dyn Store, prefix: &str) {
    let conversation_id = format!("{prefix}-ordered");
    let at = |call: &str, step: Step, created_at: i64| {
        record(
            &conversation_id,
            call,
            step,
            CallState::Executing,
            created_at,
            None,
        )
    };
    // Byte order: "call_B" < "call_a" < "call_f" < "call_é".
    let expected = vec![
        at("call_z", Step::Execution, 10),
        at("call_B", Step::Execution, 20),
        at("call_a", Step::Human, 20),
        at("call_b", Step::Approval, 20),
        at("call_b", Step::Client, 20),
        at("call_b", Step::Human, 20),
        at("call_b", Step::Execution, 20),
        at("call_f", Step::Approval, 20),
        at("call_é", Step::Approval, 20),
        at("call_a", Step::Approval, 30),
    ];
    for index in [5, 9, 0, 3, 7, 1, 8, 6, 2, 4] {
        insert(store, &expected[index]).await;
    }
    let unrelated = record(
        &format!("{prefix}-ordered-other"),
        "call_0",
        Step::Approval,
        CallState::Executing,
        0,
        None,
    );
    insert(store, &unrelated).await;

    let listed = ok(store.calls(&conversation_id).await, "calls");
    let order = |records: &[CallRecord]| -> Vec<String> {
        records
            .iter()
            .map(|r| format!("{}@{}/{}", r.tool_call_id, r.created_at, r.step))
            .collect()
    };
    assert_eq!(order(&listed), order(&expected), "calls() order");
    assert_eq!(listed, expected, "calls() returns the entries as inserted");
    assert_eq!(
        ok(store.calls(&unrelated.conversation_id).await, "calls"),
        [unrelated]
    );
    assert!(
        ok(store.calls(&format!("{prefix}-absent")).await, "calls").is_empty(),
        "an absent conversation has no entries"
    );
}

/// Every field of an entry survives, including unicode text, extreme
/// times and the optional `requested` and `reasoning` (set and absent).
pub async fn call_record_round_trip(store: &dyn Store, prefix: &str) {
    let conversation_id = format!("{prefix}-ünïcödé-会话-🚀");
    let full = CallRecord {
        requested: Some("0f".repeat(32)),
        reasoning: Some("the user asked — \"twice\" 🙏\nsee above".to_owned()),
        conversation_id: conversation_id.clone(),
        tool_call_id: "toolu_01✓".to_owned(),
        step: Step::Human,
        tool: "ask_person".to_owned(),
        arguments: "{\"question\": \"Ça va? 你好 \\u00e9 \\\"quoted\\\" \\n\",  \"n\" : 1 }"
            .to_owned(),
        payload: "{\"text\":\"emoji 👩‍💻 and RTL עברית and combining e\u{301}\"}".to_owned(),
        state: CallState::Done,
        outcome: Some("{\"ok\":{\"answer\":\"ja, natürlich — 𝄞\"}}".to_owned()),
        deadline: Some(i64::MIN + 1),
        created_at: 0,
        updated_at: i64::MAX,
    };
    insert(store, &full).await;
    assert_eq!(entry(store, &full).await, full);

    let sparse = CallRecord {
        tool_call_id: "call_sparse".to_owned(),
        step: Step::Execution,
        state: CallState::Executing,
        arguments: String::new(),
        payload: String::new(),
        outcome: None,
        deadline: None,
        created_at: -42,
        updated_at: -42,
        requested: None,
        reasoning: None,
        ..full.clone()
    };
    insert(store, &sparse).await;
    assert_eq!(entry(store, &sparse).await, sparse);
    assert_eq!(
        ok(store.calls(&conversation_id).await, "calls"),
        [sparse, full],
        "the entry created earlier (-42 < 0) comes first"
    );
}

/// `transition` moves an entry only from `from`, sets `outcome` when given
/// (keeping the old one otherwise) and `updated_at`, and reports whether
/// it moved.
pub async fn transition_cas(store: &dyn Store, prefix: &str) {
    let conversation_id = format!("{prefix}-cas");
    let pending = record(
        &conversation_id,
        "call_1",
        Step::Approval,
        CallState::Pending,
        100,
        Some(10_000),
    );
    insert(store, &pending).await;

    for (from, to) in [
        (CallState::Executing, CallState::Done),
        (CallState::Resolved, CallState::Pending),
        (CallState::Expired, CallState::Cancelled),
    ] {
        assert!(
            !ok(
                store
                    .transition(
                        &conversation_id,
                        "call_1",
                        Step::Approval,
                        from,
                        to,
                        Some("\"wrong\""),
                        150
                    )
                    .await,
                "transition"
            ),
            "{from} -> {to} of a Pending entry must not move"
        );
    }
    assert_eq!(
        entry(store, &pending).await,
        pending,
        "a refused move changes nothing"
    );

    let outcome = r#"{"decision":"approve","by":"ana"}"#;
    assert!(ok(
        store
            .transition(
                &conversation_id,
                "call_1",
                Step::Approval,
                CallState::Pending,
                CallState::Resolved,
                Some(outcome),
                200
            )
            .await,
        "transition"
    ));
    let resolved = entry(store, &pending).await;
    assert_eq!(
        resolved,
        CallRecord {
            state: CallState::Resolved,
            outcome: Some(outcome.to_owned()),
            updated_at: 200,
            ..pending.clone()
        },
        "the move sets state, outcome and updated_at, and nothing else"
    );
    assert!(
        !ok(
            store
                .transition(
                    &conversation_id,
                    "call_1",
                    Step::Approval,
                    CallState::Pending,
                    CallState::Resolved,
                    Some("\"second\""),
                    300
                )
                .await,
            "transition"
        ),
        "a second resolution loses"
    );
    assert_eq!(entry(store, &pending).await, resolved);

    // Without an outcome, the old one stays.
    let with_outcome = CallRecord {
        tool_call_id: "call_2".to_owned(),
        outcome: Some("\"kept\"".to_owned()),
        ..pending.clone()
    };
    insert(store, &with_outcome).await;
    assert!(ok(
        store
            .transition(
                &conversation_id,
                "call_2",
                Step::Approval,
                CallState::Pending,
                CallState::Expired,
                None,
                400
            )
            .await,
        "transition"
    ));
    let expired = entry(store, &with_outcome).await;
    assert_eq!(expired.state, CallState::Expired);
    assert_eq!(expired.outcome.as_deref(), Some("\"kept\""));
    assert_eq!(expired.updated_at, 400);

    // Executions: Executing -> Done with the envelope.
    let execution = record(
        &conversation_id,
        "call_1",
        Step::Execution,
        CallState::Executing,
        500,
        None,
    );
    insert(store, &execution).await;
    let envelope = r#"{"ok":{"deleted":true}}"#;
    assert!(ok(
        store
            .transition(
                &conversation_id,
                "call_1",
                Step::Execution,
                CallState::Executing,
                CallState::Done,
                Some(envelope),
                600
            )
            .await,
        "transition"
    ));
    let done = entry(store, &execution).await;
    assert_eq!(done.state, CallState::Done);
    assert_eq!(done.outcome.as_deref(), Some(envelope));
    assert_eq!(
        entry(store, &pending).await,
        resolved,
        "another step of the same call is untouched"
    );

    assert!(
        !ok(
            store
                .transition(
                    &conversation_id,
                    "call_absent",
                    Step::Approval,
                    CallState::Pending,
                    CallState::Resolved,
                    None,
                    700
                )
                .await,
            "transition"
        ),
        "an absent entry does not move"
    );
    assert_eq!(
        ok(
            store
                .call(&conversation_id, "call_absent", Step::Approval)
                .await,
            "call"
        ),
        None,
        "a refused move creates nothing"
    );
}

/// Nothing leaves a final state: moves that expect an open state find none.
pub async fn final_states_do_not_move(store: &dyn Store, prefix: &str) {
    let conversation_id = format!("{prefix}-final");
    let finals = [
        (CallState::Pending, CallState::Resolved),
        (CallState::Pending, CallState::Expired),
        (CallState::Pending, CallState::Cancelled),
        (CallState::Executing, CallState::Done),
        (CallState::Executing, CallState::Cancelled),
    ];
    for (index, (open, last)) in finals.into_iter().enumerate() {
        let step = if open == CallState::Pending {
            Step::Client
        } else {
            Step::Execution
        };
        let start = record(
            &conversation_id,
            &format!("call_{index}"),
            step,
            open,
            10,
            Some(20),
        );
        insert(store, &start).await;
        advance(store, &start, open, last).await;
        let settled = entry(store, &start).await;
        assert_eq!(settled.state, last);
        assert!(!last.is_open());
        for from in [CallState::Pending, CallState::Executing] {
            for to in [
                CallState::Pending,
                CallState::Resolved,
                CallState::Expired,
                CallState::Cancelled,
                CallState::Executing,
                CallState::Done,
            ] {
                assert!(
                    !ok(
                        store
                            .transition(
                                &conversation_id,
                                &start.tool_call_id,
                                step,
                                from,
                                to,
                                Some("\"late\""),
                                99
                            )
                            .await,
                        "transition"
                    ),
                    "{last} must not move by {from} -> {to}"
                );
            }
        }
        assert!(
            !ok(
                store
                    .set_deadline(&conversation_id, &start.tool_call_id, step, Some(1))
                    .await,
                "set_deadline"
            ),
            "a {last} entry keeps its deadline"
        );
        assert_eq!(
            entry(store, &start).await,
            settled,
            "{last} stays as it was"
        );
    }
}

/// `set_deadline` changes the deadline of a `Pending` entry only.
pub async fn set_deadline_only_pending(store: &dyn Store, prefix: &str) {
    let conversation_id = format!("{prefix}-deadlines");
    let pending = record(
        &conversation_id,
        "call_1",
        Step::Approval,
        CallState::Pending,
        10,
        None,
    );
    insert(store, &pending).await;
    for deadline in [Some(500), None, Some(700)] {
        assert!(
            ok(
                store
                    .set_deadline(&conversation_id, "call_1", Step::Approval, deadline)
                    .await,
                "set_deadline"
            ),
            "a Pending entry takes deadline {deadline:?}"
        );
        assert_eq!(
            entry(store, &pending).await,
            CallRecord {
                deadline,
                ..pending.clone()
            },
            "only the deadline changed"
        );
    }

    let executing = record(
        &conversation_id,
        "call_1",
        Step::Execution,
        CallState::Executing,
        10,
        Some(100),
    );
    insert(store, &executing).await;
    assert!(
        !ok(
            store
                .set_deadline(&conversation_id, "call_1", Step::Execution, Some(900))
                .await,
            "set_deadline"
        ),
        "an Executing entry keeps its deadline"
    );
    assert_eq!(entry(store, &executing).await, executing);

    advance(store, &pending, CallState::Pending, CallState::Resolved).await;
    let resolved = entry(store, &pending).await;
    assert!(
        !ok(
            store
                .set_deadline(&conversation_id, "call_1", Step::Approval, Some(900))
                .await,
            "set_deadline"
        ),
        "a Resolved entry keeps its deadline"
    );
    assert_eq!(entry(store, &pending).await, resolved);
    assert_eq!(resolved.deadline, Some(700));

    assert!(
        !ok(
            store
                .set_deadline(&conversation_id, "call_absent", Step::Approval, Some(1))
                .await,
            "set_deadline"
        ),
        "an absent entry has no deadline to change"
    );
    assert_eq!(
        ok(
            store
                .call(&conversation_id, "call_absent", Step::Approval)
                .await,
            "call"
        ),
        None
    );
}

/// `due_calls` lists `Pending` entries whose deadline is at or before
/// `now`, earliest first (then oldest), at most `limit`, across all
/// conversations.
pub async fn due_calls_filter_order_limit(store: &dyn Store, prefix: &str) {
    let base = fresh_time_base();
    let [c1, c2, c3] = ["c1", "c2", "c3"].map(|name| format!("{prefix}-{name}"));
    let pending = |conversation: &str, call: &str, created: i64, deadline: Option<i64>| {
        record(
            conversation,
            call,
            Step::Approval,
            CallState::Pending,
            base + created,
            deadline.map(|offset| base + offset),
        )
    };
    let e1 = pending(&c1, "e1", 1, Some(30));
    let e2 = pending(&c2, "e2", 5, Some(10));
    let e3 = pending(&c3, "e3", 2, Some(20));
    let e4 = pending(&c1, "e4", 1, Some(20)); // same deadline as e3, older
    let e5 = pending(&c2, "e5", 1, Some(50)); // not yet due
    let e6 = pending(&c3, "e6", 1, None); // no deadline
    let e7 = pending(&c1, "e7", 1, Some(5)); // resolved below
    let e8 = CallRecord {
        state: CallState::Executing,
        step: Step::Execution,
        ..pending(&c2, "e8", 1, Some(5))
    };
    let e9 = pending(&c3, "e9", 3, Some(40)); // due exactly at `now`
    for entry in [&e1, &e2, &e3, &e4, &e5, &e6, &e7, &e8, &e9] {
        insert(store, entry).await;
    }
    advance(store, &e7, CallState::Pending, CallState::Resolved).await;

    let now = base + 40;
    let names = |records: Vec<CallRecord>| -> Vec<String> {
        records.into_iter().map(|r| r.tool_call_id).collect()
    };
    assert_eq!(
        names(ok(store.due_calls(now, usize::MAX).await, "due_calls")),
        ["e2", "e4", "e3", "e1", "e9"],
        "pending, deadline at or before now, earliest first then oldest"
    );
    assert_eq!(
        ok(store.due_calls(now, usize::MAX).await, "due_calls"),
        [&e2, &e4, &e3, &e1, &e9].map(Clone::clone),
        "due entries come back whole"
    );
    assert_eq!(
        names(ok(store.due_calls(now, 2).await, "due_calls")),
        ["e2", "e4"]
    );
    assert!(ok(store.due_calls(now, 0).await, "due_calls").is_empty());
    assert!(
        ok(store.due_calls(base + 9, usize::MAX).await, "due_calls").is_empty(),
        "nothing is due before the earliest deadline"
    );

    assert!(ok(
        store
            .set_deadline(&c2, "e5", Step::Approval, Some(base + 1))
            .await,
        "set_deadline"
    ));
    advance(store, &e2, CallState::Pending, CallState::Resolved).await;
    assert_eq!(
        names(ok(store.due_calls(now, 3).await, "due_calls")),
        ["e5", "e4", "e3"],
        "a moved deadline and a resolution change what is due"
    );

    // Leave nothing due for anyone sharing the database.
    for entry in [&e1, &e3, &e4, &e5, &e6, &e9] {
        advance(store, entry, CallState::Pending, CallState::Cancelled).await;
    }
    assert!(ok(store.due_calls(now, usize::MAX).await, "due_calls").is_empty());
}

// ------------------------------------------------------------ transcripts

/// A transcript with every kind of message and awkward text.
/// `suspended_without_pending` lists exactly the `Suspended`
/// conversations with no `Pending` entry (every wait resolved or expired,
/// or none recorded), oldest change first, at most `limit`; never a
/// running or idle one, and never one with a wait still pending.
pub async fn suspended_without_pending_lists_settled_waits(store: &dyn Store, prefix: &str) {
    use ConversationStatus::{Idle, Running, Suspended};
    let [waiting, resolved, empty, running, idle] =
        ["waiting", "resolved", "empty", "running", "idle"].map(|name| format!("{prefix}-{name}"));
    let ours = |all: Vec<String>| -> Vec<String> {
        all.into_iter()
            .filter(|id| id.starts_with(prefix))
            .collect()
    };
    for (id, status) in [
        (&waiting, Suspended),
        (&resolved, Suspended),
        (&empty, Suspended),
        (&running, Running),
        (&idle, Idle),
    ] {
        create(store, &conversation(id, "settled?")).await;
        some(
            ok(store.claim_conversation(id, "o", 1, 100).await, "claim"),
            "claim",
        );
        ok(
            store
                .save_conversation(&conversation(id, "settled?"), "o", status, 0)
                .await,
            "save",
        );
    }
    for id in [&waiting, &resolved, &running] {
        insert(
            store,
            &record(id, "call_1", Step::Approval, CallState::Pending, 100, None),
        )
        .await;
    }
    assert!(ok(
        store
            .transition(
                &resolved,
                "call_1",
                Step::Approval,
                CallState::Pending,
                CallState::Resolved,
                Some("{}"),
                200
            )
            .await,
        "transition",
    ));
    ok(
        store
            .transition(
                &running,
                "call_1",
                Step::Approval,
                CallState::Pending,
                CallState::Resolved,
                Some("{}"),
                200,
            )
            .await,
        "transition",
    );
    let listed = ours(ok(
        store.suspended_without_pending(usize::MAX).await,
        "list",
    ));
    assert_eq!(
        listed,
        [resolved.as_str(), empty.as_str()],
        "only suspended conversations with nothing pending"
    );
    // Its last wait expires: listed, by its conversation's change.
    assert!(ok(
        store
            .transition(
                &waiting,
                "call_1",
                Step::Approval,
                CallState::Pending,
                CallState::Expired,
                None,
                300
            )
            .await,
        "transition",
    ));
    let listed = ours(ok(
        store.suspended_without_pending(usize::MAX).await,
        "list",
    ));
    assert_eq!(
        listed,
        [waiting.as_str(), resolved.as_str(), empty.as_str()],
        "oldest change first"
    );
    // A second wait of the same conversation, pending: not listed again.
    insert(
        store,
        &record(
            &waiting,
            "call_2",
            Step::Client,
            CallState::Pending,
            400,
            None,
        ),
    )
    .await;
    let listed = ours(ok(
        store.suspended_without_pending(usize::MAX).await,
        "list",
    ));
    assert_eq!(listed, [resolved.as_str(), empty.as_str()]);
    assert!(
        ok(store.suspended_without_pending(0).await, "list").is_empty(),
        "limit 0 lists nothing"
    );
    let all = ok(store.suspended_without_pending(usize::MAX).await, "list");
    let one = ok(store.suspended_without_pending(1).await, "list");
    assert!(one.len() <= 1, "limit 1: {one:?}");
    assert!(
        one.iter().all(|id| all.contains(id)) || !all.iter().any(|id| id.starts_with(prefix)),
        "a limited list is part of the full one: {one:?}"
    );
}

/// A transcript of awkward text (combining marks, right-to-left, emoji,
/// astral characters) for round-trip checks.
pub fn awkward_transcript() -> Vec<Message> {
    let awkward = "ünïcödé — 中文 — עברית — 👩‍💻🚀 — e\u{301} — 𝄞 — \
                   \"quotes\" \\back\\slash\\ \n\ttab\r\n — nul:\u{0} — del:\u{7f} — \
                   sep:\u{2028}\u{2029} — bom:\u{feff} — <script>&amp;</script> — '; DROP TABLE x; --";
    vec![
        Message::system(format!("You are a careful assistant. {awkward}")),
        Message::user(awkward),
        Message::Assistant {
            runnable: None,
            content: String::new(),
            tool_calls: vec![
                AssistantToolCall {
                    id: "call_ü1".to_owned(),
                    name: "search".to_owned(),
                    // Exactly as a model wrote it: spacing, escapes, key order.
                    arguments: "{ \"q\" : \"caf\\u00e9 ☕\",\"n\":1 , \"z\":null}".to_owned(),
                },
                AssistantToolCall {
                    id: "call_2".to_owned(),
                    name: "broken".to_owned(),
                    arguments: "{not json at all".to_owned(),
                },
            ],
            thinking: Vec::new(),
            server_blocks: Vec::new(),
        },
        Message::Tool {
            tool_call_id: "call_ü1".to_owned(),
            name: "search".to_owned(),
            content: "{\"ok\":{\"hits\":[\"ß\",\"😀\"]}}".to_owned(),
            is_error: false,
            attachments: Vec::new(),
        },
        Message::Tool {
            tool_call_id: "call_2".to_owned(),
            name: "broken".to_owned(),
            content: "{\"error\":{\"code\":\"invalid_arguments\",\"message\":\"ça\"}}".to_owned(),
            is_error: true,
            attachments: Vec::new(),
        },
        Message::Assistant {
            runnable: None,
            content: format!("Done. {awkward}"),
            tool_calls: Vec::new(),
            thinking: Vec::new(),
            server_blocks: Vec::new(),
        },
        Message::user("x".repeat(64 * 1024) + "🏁"),
    ]
}

/// Transcripts come back exactly as written: every message kind, unicode,
/// control characters, long text, and the empty transcript.
pub async fn transcript_round_trip(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-transcript");
    let original = Conversation {
        id: id.clone(),
        session_id: Some("sessiön-🔑".to_owned()),
        user_id: Some("üser\"'; DROP TABLE".to_owned()),
        tenant_id: Some("テナント".to_owned()),
        messages: awkward_transcript(),
    };
    let encode = |messages: &[Message]| match serde_json::to_string(messages) {
        Ok(text) => text,
        Err(error) => panic!("the transcript cannot be encoded: {error}"),
    };
    create(store, &original).await;
    let loaded = load(store, &id).await.conversation;
    assert_eq!(loaded, original, "the created transcript round-trips");
    assert_eq!(
        encode(&loaded.messages),
        encode(&original.messages),
        "byte for byte"
    );

    let mut longer = original.clone();
    longer.messages.extend(awkward_transcript());
    some(
        ok(store.claim_conversation(&id, "a", 1, 100).await, "claim"),
        "claim",
    );
    ok(
        store
            .save_conversation(&longer, "a", ConversationStatus::Suspended, 0)
            .await,
        "save",
    );
    let loaded = load(store, &id).await.conversation;
    assert_eq!(loaded, longer, "the saved transcript round-trips");
    assert_eq!(
        encode(&loaded.messages),
        encode(&longer.messages),
        "byte for byte"
    );

    let empty_id = format!("{prefix}-empty");
    let empty = Conversation::new(&empty_id);
    create(store, &empty).await;
    assert_eq!(load(store, &empty_id).await.conversation, empty);
}

// ------------------------------------------------------------------- races

const RACERS: usize = 16;
const RACE_ROUNDS: usize = 8;

/// Many tasks move the same `Pending` entry at once, each to its own
/// outcome: exactly one wins, and its outcome is the stored one.
pub async fn concurrent_transition_one_winner(store: Arc<dyn Store>, prefix: &str) {
    let conversation_id = format!("{prefix}-race");
    for round in 0..RACE_ROUNDS {
        let tool_call_id = format!("call_{round}");
        insert(
            &*store,
            &record(
                &conversation_id,
                &tool_call_id,
                Step::Approval,
                CallState::Pending,
                10,
                Some(20),
            ),
        )
        .await;
        let barrier = Arc::new(Barrier::new(RACERS));
        let tasks: Vec<_> = (0..RACERS)
            .map(|racer| {
                let (store, barrier) = (store.clone(), barrier.clone());
                let (conversation_id, tool_call_id) =
                    (conversation_id.clone(), tool_call_id.clone());
                tokio::spawn(async move {
                    let to = match racer % 3 {
                        0 => CallState::Resolved,
                        1 => CallState::Expired,
                        _ => CallState::Cancelled,
                    };
                    let outcome = format!("{{\"racer\":{racer}}}");
                    barrier.wait().await;
                    let moved = store
                        .transition(
                            &conversation_id,
                            &tool_call_id,
                            Step::Approval,
                            CallState::Pending,
                            to,
                            Some(&outcome),
                            100,
                        )
                        .await;
                    (to, outcome, moved)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (to, outcome, moved) = match task.await {
                Ok(result) => result,
                Err(error) => panic!("a racing task failed: {error}"),
            };
            if ok(moved, "transition") {
                winners.push((to, outcome));
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one transition wins, got {winners:?}"
        );
        let stored = some(
            ok(
                store
                    .call(&conversation_id, &tool_call_id, Step::Approval)
                    .await,
                "call",
            ),
            "the raced entry",
        );
        assert_eq!(
            stored.state, winners[0].0,
            "round {round}: the winner's state"
        );
        assert_eq!(
            stored.outcome.as_deref(),
            Some(winners[0].1.as_str()),
            "round {round}"
        );
    }
}

/// Many tasks claim the same conversation at once, each as its own owner:
/// exactly one wins, and it is the stored owner.
pub async fn concurrent_claim_one_winner(store: Arc<dyn Store>, prefix: &str) {
    for round in 0..RACE_ROUNDS {
        let id = format!("{prefix}-race-{round}");
        create(&*store, &conversation(&id, "race")).await;
        let barrier = Arc::new(Barrier::new(RACERS));
        let tasks: Vec<_> = (0..RACERS)
            .map(|racer| {
                let (store, barrier, id) = (store.clone(), barrier.clone(), id.clone());
                tokio::spawn(async move {
                    let owner = format!("owner-{racer}");
                    barrier.wait().await;
                    let claimed = store.claim_conversation(&id, &owner, 1_000, 60_000).await;
                    (owner, claimed)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (owner, claimed) = match task.await {
                Ok(result) => result,
                Err(error) => panic!("a racing task failed: {error}"),
            };
            if let Some(claimed) = ok(claimed, "claim_conversation") {
                assert_eq!(claimed.owner.as_deref(), Some(owner.as_str()));
                winners.push(owner);
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one claim wins, got {winners:?}"
        );
        assert_eq!(
            load(&*store, &id).await.owner.as_deref(),
            Some(winners[0].as_str()),
            "round {round}: the winner holds the conversation"
        );
    }
}

// ---------------------------------------------------------------- batches

/// A batch applies its writes in order (a claim, then a save under that
/// claim, calls inserted, moved and given deadlines), reports the claimed
/// conversation, and an empty batch changes nothing.
pub async fn batch_applies_every_write(store: &dyn Store, prefix: &str) {
    assert_eq!(
        ok(store.apply(&Batch::new()).await, "apply(empty)"),
        Applied::All { claimed: None },
        "an empty batch applies"
    );
    let id = format!("{prefix}-batch");
    let fresh = conversation(&id, "first");
    let approval = record(
        &id,
        "call_1",
        Step::Approval,
        CallState::Pending,
        10,
        Some(50),
    );
    let execution = record(
        &id,
        "call_1",
        Step::Execution,
        CallState::Executing,
        11,
        None,
    );
    let mut saved = fresh.clone();
    saved.messages.push(Message::user("second"));

    // Create and claim in one transaction: a send's start.
    let batch =
        Batch::new()
            .with(Write::EnsureConversation(&fresh))
            .with(Write::ClaimConversation {
                id: &id,
                owner: "owner-a",
                now: 1_000,
                lease_until: 60_000,
                version: None,
            });
    let claimed = match ok(store.apply(&batch).await, "apply(ensure, claim)") {
        Applied::All {
            claimed: Some(claimed),
        } => claimed,
        other => panic!("ensure + claim of a new conversation: {other:?}"),
    };
    assert_eq!(claimed.conversation, fresh);
    assert_eq!(claimed.status, ConversationStatus::Running);
    assert_eq!(claimed.owner.as_deref(), Some("owner-a"));
    assert_eq!(claimed, load(store, &id).await, "the claim is stored");

    // A claim for the version the conversation has is taken (one for an
    // older version is refused: see the refusals below).
    let batch = Batch::new().with(Write::ClaimConversation {
        id: &id,
        owner: "owner-a",
        now: 1_000,
        lease_until: 60_000,
        version: Some(claimed.version),
    });
    let claimed = match ok(
        store.apply(&batch).await,
        "apply(claim at the current version)",
    ) {
        Applied::All {
            claimed: Some(again),
        } => {
            assert!(
                again.version > claimed.version,
                "a claim changes the version"
            );
            again
        }
        other => panic!("a claim at the conversation's own version: {other:?}"),
    };

    // Ensure of an existing conversation leaves it as it is.
    let other = conversation(&id, "not stored");
    assert!(
        ok(
            store
                .apply(&Batch::new().with(Write::EnsureConversation(&other)))
                .await,
            "apply(ensure existing)"
        )
        .is_all(),
        "ensuring an existing conversation is not refused"
    );
    assert_eq!(load(store, &id).await, claimed, "ensure changed nothing");

    // A suspension: the wait and the transcript together.
    let batch = Batch::new()
        .with(Write::InsertCall(&approval))
        .with(Write::SaveConversation {
            conversation: &saved,
            owner: "owner-a",
            status: ConversationStatus::Suspended,
            lease_until: 0,
        });
    assert_eq!(
        ok(store.apply(&batch).await, "apply(insert, save)"),
        Applied::All { claimed: None }
    );
    let stored = load(store, &id).await;
    assert_eq!(stored.conversation, saved);
    assert_eq!(stored.status, ConversationStatus::Suspended);
    assert_eq!(stored.owner, None, "a suspended save gives up the hold");
    assert!(stored.version > claimed.version);
    assert_eq!(entry(store, &approval).await, approval);

    // A resolution: the wait resolved, its execution recorded, the
    // conversation taken, a deadline moved, at once.
    let mut batch = Batch::new();
    batch
        .push(Write::Transition {
            conversation_id: &id,
            tool_call_id: "call_1",
            step: Step::Approval,
            from: CallState::Pending,
            to: CallState::Resolved,
            outcome: Some(r#""approve""#),
            now: 20,
        })
        .push(Write::InsertCall(&execution))
        .push(Write::ClaimConversation {
            id: &id,
            owner: "owner-b",
            now: 2_000,
            lease_until: 70_000,
            version: None,
        });
    assert_eq!(batch.len(), 3);
    match ok(
        store.apply(&batch).await,
        "apply(transition, insert, claim)",
    ) {
        Applied::All {
            claimed: Some(claimed),
        } => assert_eq!(claimed.owner.as_deref(), Some("owner-b")),
        other => panic!("a resolution batch: {other:?}"),
    }
    let resolved = entry(store, &approval).await;
    assert_eq!(resolved.state, CallState::Resolved);
    assert_eq!(resolved.outcome.as_deref(), Some(r#""approve""#));
    assert_eq!(resolved.updated_at, 20);
    assert_eq!(entry(store, &execution).await, execution);

    let waiting = record(
        &id,
        "call_2",
        Step::Client,
        CallState::Pending,
        30,
        Some(40),
    );
    let batch = Batch::new()
        .with(Write::InsertCall(&waiting))
        .with(Write::SetDeadline {
            conversation_id: &id,
            tool_call_id: "call_2",
            step: Step::Client,
            deadline: Some(99),
        });
    assert!(ok(store.apply(&batch).await, "apply(insert, deadline)").is_all());
    assert_eq!(entry(store, &waiting).await.deadline, Some(99));
}

/// A batch whose write is refused (a lost claim, a save by a process that
/// does not hold the conversation, a duplicate call, a transition from the
/// wrong state, a deadline of a settled wait) names that write and leaves
/// nothing of the batch behind, also what the writes before it did.
pub async fn batch_refused_write_undoes_the_batch(store: &dyn Store, prefix: &str) {
    let id = format!("{prefix}-held");
    let held = conversation(&id, "held");
    create(store, &held).await;
    some(
        ok(
            store.claim_conversation(&id, "holder", 1_000, 60_000).await,
            "claim_conversation",
        ),
        "the first claim",
    );
    let pending = record(
        &id,
        "call_p",
        Step::Approval,
        CallState::Pending,
        10,
        Some(50),
    );
    let done = record(&id, "call_d", Step::Execution, CallState::Done, 11, None);
    insert(store, &pending).await;
    insert(store, &done).await;
    let before_conversation = load(store, &id).await;
    let before_calls = ok(store.calls(&id).await, "calls");

    let new_id = format!("{prefix}-new");
    let new_conversation = conversation(&new_id, "new");
    let new_call = record(&id, "call_new", Step::Human, CallState::Pending, 12, None);
    let mut changed = held.clone();
    changed.messages.push(Message::user("never stored"));
    // What every batch below does before its refused write.
    let prelude = || {
        Batch::new()
            .with(Write::EnsureConversation(&new_conversation))
            .with(Write::InsertCall(&new_call))
            .with(Write::Transition {
                conversation_id: &id,
                tool_call_id: "call_p",
                step: Step::Approval,
                from: CallState::Pending,
                to: CallState::Resolved,
                outcome: Some("\"approve\""),
                now: 30,
            })
            .with(Write::SaveConversation {
                conversation: &changed,
                owner: "holder",
                status: ConversationStatus::Running,
                lease_until: 90_000,
            })
    };
    let refusals: Vec<(&str, Write<'_>)> = vec![
        (
            "a claim of a conversation another owner holds",
            Write::ClaimConversation {
                id: &id,
                owner: "intruder",
                now: 2_000,
                lease_until: 80_000,
                version: None,
            },
        ),
        (
            "a claim for a version the conversation no longer has",
            Write::ClaimConversation {
                id: &id,
                owner: "holder",
                now: 2_000,
                lease_until: 80_000,
                version: Some(before_conversation.version),
            },
        ),
        (
            "a claim of a conversation that does not exist",
            Write::ClaimConversation {
                id: "no-such-conversation-anywhere",
                owner: "holder",
                now: 2_000,
                lease_until: 80_000,
                version: None,
            },
        ),
        (
            "a save by a process that does not hold it",
            Write::SaveConversation {
                conversation: &changed,
                owner: "intruder",
                status: ConversationStatus::Idle,
                lease_until: 0,
            },
        ),
        ("a call recorded before", Write::InsertCall(&done)),
        (
            "a transition from a state the entry is not in",
            Write::Transition {
                conversation_id: &id,
                tool_call_id: "call_d",
                step: Step::Execution,
                from: CallState::Executing,
                to: CallState::Done,
                outcome: Some("{}"),
                now: 31,
            },
        ),
        (
            "a deadline of an entry that is not pending",
            Write::SetDeadline {
                conversation_id: &id,
                tool_call_id: "call_d",
                step: Step::Execution,
                deadline: Some(1),
            },
        ),
    ];
    for (what, refused) in refusals {
        let batch = prelude().with(refused);
        let index = batch.len() - 1;
        assert_eq!(
            ok(store.apply(&batch).await, what),
            Applied::Refused { index },
            "{what}: the refused write is named"
        );
        assert_eq!(
            ok(store.load_conversation(&new_id).await, "load_conversation"),
            None,
            "{what}: the conversation the batch created is gone"
        );
        assert_eq!(
            load(store, &id).await,
            before_conversation,
            "{what}: the save before the refused write is undone"
        );
        assert_eq!(
            ok(store.calls(&id).await, "calls"),
            before_calls,
            "{what}: the insert and the transition before it are undone"
        );
    }
    // The refused write first: nothing after it runs either.
    let batch = Batch::new()
        .with(Write::InsertCall(&done))
        .with(Write::InsertCall(&new_call));
    assert_eq!(
        ok(store.apply(&batch).await, "apply(duplicate first)"),
        Applied::Refused { index: 0 }
    );
    assert_eq!(ok(store.calls(&id).await, "calls"), before_calls);
}

/// Many tasks apply the batch of a resolution at once (the wait resolved
/// and the racer's own execution row recorded): exactly one batch applies,
/// and only the winner's execution row exists.
pub async fn concurrent_batches_one_winner(store: Arc<dyn Store>, prefix: &str) {
    let conversation_id = format!("{prefix}-batch-race");
    for round in 0..RACE_ROUNDS {
        let tool_call_id = format!("call_{round}");
        insert(
            &*store,
            &record(
                &conversation_id,
                &tool_call_id,
                Step::Approval,
                CallState::Pending,
                10,
                Some(20),
            ),
        )
        .await;
        let barrier = Arc::new(Barrier::new(RACERS));
        let tasks: Vec<_> = (0..RACERS)
            .map(|racer| {
                let (store, barrier) = (store.clone(), barrier.clone());
                let (conversation_id, tool_call_id) =
                    (conversation_id.clone(), tool_call_id.clone());
                tokio::spawn(async move {
                    // Each racer's row has a call id of its own.
                    let execution = CallRecord {
                        tool_call_id: format!("{tool_call_id}-by-{racer}"),
                        ..record(
                            &conversation_id,
                            &tool_call_id,
                            Step::Execution,
                            CallState::Executing,
                            11,
                            None,
                        )
                    };
                    let outcome = format!("{{\"racer\":{racer}}}");
                    let batch =
                        Batch::new()
                            .with(Write::InsertCall(&execution))
                            .with(Write::Transition {
                                conversation_id: &conversation_id,
                                tool_call_id: &tool_call_id,
                                step: Step::Approval,
                                from: CallState::Pending,
                                to: CallState::Resolved,
                                outcome: Some(&outcome),
                                now: 100,
                            });
                    barrier.wait().await;
                    let applied = store.apply(&batch).await;
                    (racer, applied)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (racer, applied) = match task.await {
                Ok(result) => result,
                Err(error) => panic!("a racing task failed: {error}"),
            };
            match ok(applied, "apply") {
                Applied::All { .. } => winners.push(racer),
                Applied::Refused { index } => {
                    assert_eq!(index, 1, "round {round}: only the transition can lose")
                }
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one batch applies, got {winners:?}"
        );
        let rows: Vec<String> = ok(store.calls(&conversation_id).await, "calls")
            .into_iter()
            .filter(|row| {
                row.step == Step::Execution
                    && row.tool_call_id.starts_with(&format!("{tool_call_id}-by-"))
            })
            .map(|row| row.tool_call_id)
            .collect();
        assert_eq!(
            rows,
            [format!("{tool_call_id}-by-{}", winners[0])],
            "round {round}: only the winner's execution row is stored"
        );
    }
}
