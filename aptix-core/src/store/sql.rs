//! What the SQL stores share: the statements (written once, with `?N`
//! placeholders, and rendered per backend), the decoding of rows, and the
//! body of every [`Store`](super::Store) method, generic over the
//! [`sqlx::Database`].
//!
//! Each backend keeps its own file for what genuinely differs: connecting,
//! the schema, the placeholder syntax and the expression that yields the
//! next value of the change counter ([`Dialect`]).

use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::{
    Applied, Batch, CallRecord, CallState, ConversationStatus, Step, StoreError,
    StoredConversation, Write, decode_conversation, encode_messages,
};
use crate::transcript::Conversation;

/// What a SQL backend supplies to the shared code.
pub(super) trait Dialect: Database {
    /// This backend's rendering of the statements, built once.
    fn statements() -> &'static Statements;

    /// How many rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// The statement that opens a batch's transaction.
    const BEGIN: &'static str;
}

/// Marks where a statement takes the next value of the change counter
/// behind "oldest change first"; [`Statements::new`] puts the backend's
/// expression there.
const NEXT_CHANGE: &str = "{next_change}";

const CREATE_CONVERSATION: &str = "INSERT INTO aptix_conversations
                    (id, session_id, messages, status, owner, lease_until, version, changed_at,
                     user_id, tenant_id)
                 VALUES (?1, ?2, ?3, 'idle', NULL, 0, 1, {next_change}, ?4, ?5)
                 ON CONFLICT (id) DO NOTHING";

const LOAD_CONVERSATION: &str =
    "SELECT id, session_id, messages, status, owner, lease_until, version, user_id, tenant_id
                 FROM aptix_conversations WHERE id = ?1";

const CLAIM_CONVERSATION: &str = "UPDATE aptix_conversations
                 SET status = 'running', owner = ?2, lease_until = ?4,
                     version = version + 1, changed_at = {next_change}
                 WHERE id = ?1
                   AND (status <> 'running' OR lease_until < ?3 OR owner = ?2)
                   AND (CAST(?5 AS BIGINT) IS NULL OR version = ?5)
                 RETURNING id, session_id, messages, status, owner, lease_until, version,
                           user_id, tenant_id";

const SAVE_CONVERSATION: &str = "UPDATE aptix_conversations
                 SET session_id = ?2, messages = ?3, status = ?4, owner = ?5,
                     lease_until = ?6, version = version + 1, changed_at = {next_change},
                     user_id = ?8, tenant_id = ?9
                 WHERE id = ?1 AND status = 'running' AND owner = ?7";

const RENEW_LEASE: &str = "UPDATE aptix_conversations SET lease_until = ?3
                 WHERE id = ?1 AND owner = ?2 AND status = 'running'";

const CONVERSATIONS_WITH_STATUS: &str = "SELECT id FROM aptix_conversations WHERE status = ?1
                 ORDER BY changed_at, id LIMIT ?2";

const SUSPENDED_WITHOUT_PENDING: &str = "SELECT id FROM aptix_conversations c
                 WHERE status = 'suspended'
                   AND NOT EXISTS (SELECT 1 FROM aptix_calls k
                                   WHERE k.conversation_id = c.id AND k.state = 'pending')
                 ORDER BY changed_at, id LIMIT ?1";

const INSERT_CALL: &str = "INSERT INTO aptix_calls
                    (conversation_id, tool_call_id, step, tool, arguments, payload, state,
                     outcome, deadline, created_at, updated_at, requested, reasoning)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (conversation_id, tool_call_id, step) DO NOTHING";

const CALL: &str = "SELECT conversation_id, tool_call_id, step, tool, arguments, payload, state,
                        outcome, deadline, created_at, updated_at, requested, reasoning
                 FROM aptix_calls
                 WHERE conversation_id = ?1 AND tool_call_id = ?2 AND step = ?3";

/// Steps sort in `Step`'s declaration order, not alphabetically.
const CALLS: &str = "SELECT conversation_id, tool_call_id, step, tool, arguments, payload, state,
                        outcome, deadline, created_at, updated_at, requested, reasoning
                 FROM aptix_calls
                 WHERE conversation_id = ?1
                 ORDER BY created_at, tool_call_id,
                     CASE step WHEN 'approval' THEN 0 WHEN 'client' THEN 1
                               WHEN 'human' THEN 2 ELSE 3 END";

const TRANSITION: &str = "UPDATE aptix_calls
                 SET state = ?5, outcome = COALESCE(?6, outcome), updated_at = ?7
                 WHERE conversation_id = ?1 AND tool_call_id = ?2 AND step = ?3 AND state = ?4";

const SET_DEADLINE: &str = "UPDATE aptix_calls SET deadline = ?4
                 WHERE conversation_id = ?1 AND tool_call_id = ?2 AND step = ?3
                   AND state = 'pending'";

const DUE_CALLS: &str =
    "SELECT conversation_id, tool_call_id, step, tool, arguments, payload, state,
                        outcome, deadline, created_at, updated_at, requested, reasoning
                 FROM aptix_calls
                 WHERE state = 'pending' AND deadline IS NOT NULL AND deadline <= ?1
                 ORDER BY deadline, created_at, conversation_id, tool_call_id, step
                 LIMIT ?2";

/// Every statement of the [`Store`](super::Store) methods, in one
/// backend's SQL.
pub(super) struct Statements {
    create_conversation: String,
    load_conversation: String,
    claim_conversation: String,
    save_conversation: String,
    renew_lease: String,
    conversations_with_status: String,
    suspended_without_pending: String,
    insert_call: String,
    call: String,
    calls: String,
    transition: String,
    set_deadline: String,
    due_calls: String,
}

impl Statements {
    /// Every statement with its name, for tests of their query plans.
    #[cfg(test)]
    pub(super) fn all(&'static self) -> [(&'static str, &'static str); 13] {
        // Every field named, so that a statement added later fails to compile here
        // until it is listed.
        let Statements {
            create_conversation,
            load_conversation,
            claim_conversation,
            save_conversation,
            renew_lease,
            conversations_with_status,
            suspended_without_pending,
            insert_call,
            call,
            calls,
            transition,
            set_deadline,
            due_calls,
        } = self;
        [
            ("create_conversation", create_conversation),
            ("load_conversation", load_conversation),
            ("claim_conversation", claim_conversation),
            ("save_conversation", save_conversation),
            ("renew_lease", renew_lease),
            ("conversations_with_status", conversations_with_status),
            ("suspended_without_pending", suspended_without_pending),
            ("insert_call", insert_call),
            ("call", call),
            ("calls", calls),
            ("transition", transition),
            ("set_deadline", set_deadline),
            ("due_calls", due_calls),
        ]
    }

    /// Renders the statements with `placeholder` before each parameter's
    /// number (`"?"` gives `?1`, `"$"` gives `$1`; no statement holds a `?`
    /// anywhere else) and `next_change` as the expression that yields the
    /// next value of the change counter.
    pub(super) fn new(placeholder: &str, next_change: &str) -> Self {
        let render = |text: &str| {
            text.replace('?', placeholder)
                .replace(NEXT_CHANGE, next_change)
        };
        Statements {
            create_conversation: render(CREATE_CONVERSATION),
            load_conversation: render(LOAD_CONVERSATION),
            claim_conversation: render(CLAIM_CONVERSATION),
            save_conversation: render(SAVE_CONVERSATION),
            renew_lease: render(RENEW_LEASE),
            conversations_with_status: render(CONVERSATIONS_WITH_STATUS),
            suspended_without_pending: render(SUSPENDED_WITHOUT_PENDING),
            insert_call: render(INSERT_CALL),
            call: render(CALL),
            calls: render(CALLS),
            transition: render(TRANSITION),
            set_deadline: render(SET_DEADLINE),
            due_calls: render(DUE_CALLS),
        }
    }
}

fn backend(error: sqlx::Error) -> StoreError {
    StoreError::backend(error)
}

/// How many times a batch the database aborted is run again.
pub(super) const TRANSIENT_RETRIES: u32 = 4;

/// Whether the database aborted the transaction to resolve a conflict with
/// another one (PostgreSQL's deadlock_detected and serialization_failure):
/// nothing of it was written and running it again is safe.
pub(super) fn is_transient(error: &StoreError) -> bool {
    let StoreError::Backend(source) = error else {
        return false;
    };
    match source.downcast_ref::<sqlx::Error>() {
        Some(sqlx::Error::Database(database)) => {
            matches!(database.code().as_deref(), Some("40P01" | "40001"))
        }
        _ => false,
    }
}

/// A `usize` limit as SQL's `LIMIT`; anything past `i64::MAX` is no limit.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn conversation_from_row<R>(row: &R) -> Result<StoredConversation, StoreError>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("id").map_err(backend)?;
    let session_id: Option<String> = row.try_get("session_id").map_err(backend)?;
    let messages: String = row.try_get("messages").map_err(backend)?;
    let status: String = row.try_get("status").map_err(backend)?;
    let mut conversation = decode_conversation(id, session_id, &messages)?;
    conversation.user_id = row.try_get("user_id").map_err(backend)?;
    conversation.tenant_id = row.try_get("tenant_id").map_err(backend)?;
    Ok(StoredConversation {
        conversation,
        status: ConversationStatus::parse(&status)?,
        owner: row.try_get("owner").map_err(backend)?,
        lease_until: row.try_get("lease_until").map_err(backend)?,
        version: row.try_get("version").map_err(backend)?,
    })
}

fn call_from_row<R>(row: &R) -> Result<CallRecord, StoreError>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
{
    let step: String = row.try_get("step").map_err(backend)?;
    let state: String = row.try_get("state").map_err(backend)?;
    Ok(CallRecord {
        conversation_id: row.try_get("conversation_id").map_err(backend)?,
        tool_call_id: row.try_get("tool_call_id").map_err(backend)?,
        step: Step::parse(&step)?,
        tool: row.try_get("tool").map_err(backend)?,
        arguments: row.try_get("arguments").map_err(backend)?,
        payload: row.try_get("payload").map_err(backend)?,
        state: CallState::parse(&state)?,
        outcome: row.try_get("outcome").map_err(backend)?,
        deadline: row.try_get("deadline").map_err(backend)?,
        created_at: row.try_get("created_at").map_err(backend)?,
        updated_at: row.try_get("updated_at").map_err(backend)?,
        requested: row.try_get("requested").map_err(backend)?,
        reasoning: row.try_get("reasoning").map_err(backend)?,
    })
}

/// The bodies of the [`Store`](super::Store) methods over one backend's
/// pool; [`impl_store!`] forwards a store's methods here.
pub(super) struct SqlStore<'p, DB: Database>(
    pub(super) &'p Pool<DB>,
    pub(super) Option<&'p dyn GroupCommit<DB>>,
);

/// A write prepared for its transaction: its statement (arguments bound,
/// so it can go to another task), and how its result tells a refusal.
pub(super) enum Prepared<DB: Database> {
    /// Refused unless it changed exactly one row.
    One(Query<'static, DB, DB::Arguments>),
    /// Never refused.
    Any(Query<'static, DB, DB::Arguments>),
    /// A claim: refused unless it returned the claimed row.
    Claim(Query<'static, DB, DB::Arguments>),
}

/// The answer of a [`GroupCommit`]: the batch's outcome, or the writes
/// back, untouched, when the committer is gone (its runtime ended).
pub(super) type Grouped<DB> = Result<Result<Applied, StoreError>, Vec<Prepared<DB>>>;

/// Commits the batches of concurrent callers together, each atomic on its
/// own, in one transaction: one commit (one `fsync`) for many batches.
pub(super) trait GroupCommit<DB: Database>: Send + Sync {
    /// Applies `writes` as one batch in the next group.
    fn commit(
        &self,
        writes: Vec<Prepared<DB>>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Grouped<DB>> + Send + '_>>;
}

impl<DB> SqlStore<'_, DB>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    &'static str: ColumnIndex<DB::Row>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    for<'q> String: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Decode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
{
    /// One write through the group commit, if the store has one and it
    /// runs; `Err` gives the write back for a statement of its own.
    async fn grouped(
        &self,
        write: Prepared<DB>,
    ) -> Result<Result<Applied, StoreError>, Prepared<DB>> {
        let Some(group) = self.1 else {
            return Err(write);
        };
        match group.commit(vec![write]).await {
            Ok(applied) => Ok(applied),
            Err(mut writes) => writes.pop().map_or_else(
                || {
                    Ok(Err(StoreError::Corrupt(
                        "the group commit lost a write".to_owned(),
                    )))
                },
                Err,
            ),
        }
    }

    pub(super) async fn create_conversation(
        self,
        conversation: &Conversation,
    ) -> Result<bool, StoreError> {
        self.one(Self::create_query(conversation)?).await
    }

    pub(super) async fn load_conversation(
        self,
        id: &str,
    ) -> Result<Option<StoredConversation>, StoreError> {
        let row = sqlx::query(DB::statements().load_conversation.as_str())
            .bind(id)
            .fetch_optional(self.0)
            .await
            .map_err(backend)?;
        row.as_ref().map(conversation_from_row).transpose()
    }

    pub(super) async fn claim_conversation(
        self,
        id: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Option<StoredConversation>, StoreError> {
        let query = match self
            .grouped(Prepared::Claim(Self::claim_query(
                id,
                owner,
                now,
                lease_until,
                None,
            )))
            .await
        {
            Ok(applied) => {
                return Ok(match applied? {
                    Applied::All { claimed } => claimed,
                    Applied::Refused { .. } => None,
                });
            }
            Err(Prepared::One(query) | Prepared::Any(query) | Prepared::Claim(query)) => query,
        };
        let row = query.fetch_optional(self.0).await.map_err(backend)?;
        row.as_ref().map(conversation_from_row).transpose()
    }

    pub(super) async fn save_conversation(
        self,
        conversation: &Conversation,
        owner: &str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> Result<(), StoreError> {
        let query = Self::save_query(conversation, owner, status, lease_until)?;
        if self.one(query).await? {
            Ok(())
        } else {
            Err(StoreError::LostLease {
                conversation_id: conversation.id.clone(),
                owner: owner.to_owned(),
            })
        }
    }

    pub(super) async fn renew_lease(
        self,
        id: &str,
        owner: &str,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        // Through the group commit like every write: on SQLite a write
        // beside the writer task would wait for its lock.
        let query = sqlx::query(DB::statements().renew_lease.as_str())
            .bind(id.to_owned())
            .bind(owner.to_owned())
            .bind(lease_until);
        self.one(query).await
    }

    pub(super) async fn conversations_with_status(
        self,
        status: ConversationStatus,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(DB::statements().conversations_with_status.as_str())
            .bind(status.as_str())
            .bind(sql_limit(limit))
            .fetch_all(self.0)
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| row.try_get("id").map_err(backend))
            .collect()
    }

    pub(super) async fn suspended_without_pending(
        self,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(DB::statements().suspended_without_pending.as_str())
            .bind(sql_limit(limit))
            .fetch_all(self.0)
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| row.try_get("id").map_err(backend))
            .collect()
    }

    pub(super) async fn insert_call(self, record: &CallRecord) -> Result<bool, StoreError> {
        self.one(Self::insert_call_query(record)).await
    }

    /// A write refused unless it changes one row: through the group
    /// commit, or as a statement of its own.
    async fn one(self, query: Query<'static, DB, DB::Arguments>) -> Result<bool, StoreError> {
        let query = match self.grouped(Prepared::One(query)).await {
            Ok(applied) => return Ok(applied?.is_all()),
            Err(Prepared::One(query) | Prepared::Any(query) | Prepared::Claim(query)) => query,
        };
        let result = query.execute(self.0).await.map_err(backend)?;
        Ok(DB::rows_affected(&result) == 1)
    }

    pub(super) async fn call(
        self,
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
    ) -> Result<Option<CallRecord>, StoreError> {
        let row = sqlx::query(DB::statements().call.as_str())
            .bind(conversation_id)
            .bind(tool_call_id)
            .bind(step.as_str())
            .fetch_optional(self.0)
            .await
            .map_err(backend)?;
        row.as_ref().map(call_from_row).transpose()
    }

    pub(super) async fn calls(self, conversation_id: &str) -> Result<Vec<CallRecord>, StoreError> {
        let rows = sqlx::query(DB::statements().calls.as_str())
            .bind(conversation_id)
            .fetch_all(self.0)
            .await
            .map_err(backend)?;
        rows.iter().map(call_from_row).collect()
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn transition(
        self,
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&str>,
        now: i64,
    ) -> Result<bool, StoreError> {
        self.one(Self::transition_query(
            conversation_id,
            tool_call_id,
            step,
            from,
            to,
            outcome,
            now,
        ))
        .await
    }

    pub(super) async fn set_deadline(
        self,
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
        deadline: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.one(Self::set_deadline_query(
            conversation_id,
            tool_call_id,
            step,
            deadline,
        ))
        .await
    }

    pub(super) async fn due_calls(
        self,
        now: i64,
        limit: usize,
    ) -> Result<Vec<CallRecord>, StoreError> {
        let rows = sqlx::query(DB::statements().due_calls.as_str())
            .bind(now)
            .bind(sql_limit(limit))
            .fetch_all(self.0)
            .await
            .map_err(backend)?;
        rows.iter().map(call_from_row).collect()
    }

    /// The batch's statements in one transaction, committed once (through
    /// the group commit when the store has one). A refused write rolls it
    /// back; so does an error (the transaction is rolled back when dropped
    /// uncommitted).
    pub(super) async fn apply(self, batch: &Batch<'_>) -> Result<Applied, StoreError> {
        if batch.is_empty() {
            return Ok(Applied::All { claimed: None });
        }
        let mut writes = Self::prepare(batch)?;
        if let Some(group) = self.1 {
            match group.commit(writes).await {
                Ok(applied) => return applied,
                Err(back) => writes = back,
            }
        }
        // A batch is all or nothing, so one the database aborted to break a
        // deadlock or a serialization conflict with another conversation's
        // batch is run again, a few times, before its error is reported.
        let mut attempt = 0u32;
        loop {
            let result = async {
                let mut transaction = self.0.begin_with(DB::BEGIN).await.map_err(backend)?;
                let applied = Self::run_prepared(&mut *transaction, writes).await?;
                if applied.is_all() {
                    transaction.commit().await.map_err(backend)?;
                } else {
                    transaction.rollback().await.map_err(backend)?;
                }
                Ok(applied)
            }
            .await;
            match result {
                Err(error) if attempt < TRANSIENT_RETRIES && is_transient(&error) => {
                    attempt += 1;
                    tracing::debug!(%error, attempt, "store batch aborted by the database; running it again");
                    tokio::time::sleep(std::time::Duration::from_millis(2 << attempt)).await;
                    writes = Self::prepare(batch)?;
                }
                other => return other,
            }
        }
    }

    /// The statements of `batch`, with their arguments bound.
    pub(super) fn prepare(batch: &Batch<'_>) -> Result<Vec<Prepared<DB>>, StoreError> {
        batch
            .writes()
            .iter()
            .map(|write| {
                Ok(match *write {
                    Write::CreateConversation(conversation) => {
                        Prepared::One(Self::create_query(conversation)?)
                    }
                    Write::EnsureConversation(conversation) => {
                        Prepared::Any(Self::create_query(conversation)?)
                    }
                    Write::ClaimConversation {
                        id,
                        owner,
                        now,
                        lease_until,
                        version,
                    } => Prepared::Claim(Self::claim_query(id, owner, now, lease_until, version)),
                    Write::SaveConversation {
                        conversation,
                        owner,
                        status,
                        lease_until,
                    } => Prepared::One(Self::save_query(conversation, owner, status, lease_until)?),
                    Write::InsertCall(record) => Prepared::One(Self::insert_call_query(record)),
                    Write::Transition {
                        conversation_id,
                        tool_call_id,
                        step,
                        from,
                        to,
                        outcome,
                        now,
                    } => Prepared::One(Self::transition_query(
                        conversation_id,
                        tool_call_id,
                        step,
                        from,
                        to,
                        outcome,
                        now,
                    )),
                    Write::SetDeadline {
                        conversation_id,
                        tool_call_id,
                        step,
                        deadline,
                    } => Prepared::One(Self::set_deadline_query(
                        conversation_id,
                        tool_call_id,
                        step,
                        deadline,
                    )),
                })
            })
            .collect()
    }

    /// Runs prepared writes in order on a connection inside a transaction,
    /// up to the first refused one. The caller commits or rolls back.
    pub(super) async fn run_prepared(
        connection: &mut DB::Connection,
        writes: Vec<Prepared<DB>>,
    ) -> Result<Applied, StoreError> {
        let mut claimed = None;
        for (index, write) in writes.into_iter().enumerate() {
            let done = match write {
                Prepared::One(query) => {
                    let result = query.execute(&mut *connection).await.map_err(backend)?;
                    DB::rows_affected(&result) == 1
                }
                Prepared::Any(query) => {
                    query.execute(&mut *connection).await.map_err(backend)?;
                    true
                }
                Prepared::Claim(query) => {
                    let row = query
                        .fetch_optional(&mut *connection)
                        .await
                        .map_err(backend)?;
                    claimed = row.as_ref().map(conversation_from_row).transpose()?;
                    claimed.is_some()
                }
            };
            if !done {
                return Ok(Applied::Refused { index });
            }
        }
        Ok(Applied::All { claimed })
    }

    fn create_query(
        conversation: &Conversation,
    ) -> Result<Query<'static, DB, DB::Arguments>, StoreError> {
        let messages = encode_messages(conversation)?;
        Ok(sqlx::query(DB::statements().create_conversation.as_str())
            .bind(conversation.id.as_str())
            .bind(conversation.session_id.as_deref())
            .bind(messages)
            .bind(conversation.user_id.as_deref())
            .bind(conversation.tenant_id.as_deref()))
    }

    /// The whole claim is this one statement: the condition is checked
    /// under the lock that makes the change (SQLite's write lock,
    /// PostgreSQL's row lock, which re-checks it).
    fn claim_query(
        id: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
        version: Option<i64>,
    ) -> Query<'static, DB, DB::Arguments> {
        sqlx::query(DB::statements().claim_conversation.as_str())
            .bind(id)
            .bind(owner)
            .bind(now)
            .bind(lease_until)
            .bind(version)
    }

    fn save_query(
        conversation: &Conversation,
        owner: &str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> Result<Query<'static, DB, DB::Arguments>, StoreError> {
        let messages = encode_messages(conversation)?;
        // Running keeps the hold (with the new lease); Idle and
        // Suspended give it up, so anyone may claim at once.
        let (next_owner, next_lease) = match status {
            ConversationStatus::Running => (Some(owner), lease_until),
            ConversationStatus::Idle | ConversationStatus::Suspended => (None, 0),
        };
        Ok(sqlx::query(DB::statements().save_conversation.as_str())
            .bind(conversation.id.as_str())
            .bind(conversation.session_id.as_deref())
            .bind(messages)
            .bind(status.as_str())
            .bind(next_owner)
            .bind(next_lease)
            .bind(owner)
            .bind(conversation.user_id.as_deref())
            .bind(conversation.tenant_id.as_deref()))
    }

    fn insert_call_query(record: &CallRecord) -> Query<'static, DB, DB::Arguments> {
        sqlx::query(DB::statements().insert_call.as_str())
            .bind(record.conversation_id.as_str())
            .bind(record.tool_call_id.as_str())
            .bind(record.step.as_str())
            .bind(record.tool.as_str())
            .bind(record.arguments.as_str())
            .bind(record.payload.as_str())
            .bind(record.state.as_str())
            .bind(record.outcome.as_deref())
            .bind(record.deadline)
            .bind(record.created_at)
            .bind(record.updated_at)
            .bind(record.requested.as_deref())
            .bind(record.reasoning.as_deref())
    }

    #[allow(clippy::too_many_arguments)]
    fn transition_query(
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&str>,
        now: i64,
    ) -> Query<'static, DB, DB::Arguments> {
        sqlx::query(DB::statements().transition.as_str())
            .bind(conversation_id)
            .bind(tool_call_id)
            .bind(step.as_str())
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(outcome)
            .bind(now)
    }

    fn set_deadline_query(
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
        deadline: Option<i64>,
    ) -> Query<'static, DB, DB::Arguments> {
        sqlx::query(DB::statements().set_deadline.as_str())
            .bind(conversation_id)
            .bind(tool_call_id)
            .bind(step.as_str())
            .bind(deadline)
    }
}

/// Implements [`Store`](super::Store) for a struct with a `pool` field and
/// a `group()` method (its group commit, if it has one) by forwarding every
/// method to [`SqlStore`].
macro_rules! impl_store {
    ($store:ty) => {
        const _: () = {
            use $crate::store::sql::SqlStore;
            use $crate::store::{
                Applied, Batch, CallRecord, CallState, ConversationStatus, Step, Store,
                StoreFuture, StoredConversation,
            };
            use $crate::transcript::Conversation;

            impl Store for $store {
                fn create_conversation<'a>(
                    &'a self,
                    conversation: &'a Conversation,
                    _now: i64,
                ) -> StoreFuture<'a, bool> {
                    Box::pin(SqlStore(&self.pool, self.group()).create_conversation(conversation))
                }

                fn load_conversation<'a>(
                    &'a self,
                    id: &'a str,
                ) -> StoreFuture<'a, Option<StoredConversation>> {
                    Box::pin(SqlStore(&self.pool, self.group()).load_conversation(id))
                }

                fn claim_conversation<'a>(
                    &'a self,
                    id: &'a str,
                    owner: &'a str,
                    now: i64,
                    lease_until: i64,
                ) -> StoreFuture<'a, Option<StoredConversation>> {
                    Box::pin(SqlStore(&self.pool, self.group()).claim_conversation(
                        id,
                        owner,
                        now,
                        lease_until,
                    ))
                }

                fn save_conversation<'a>(
                    &'a self,
                    conversation: &'a Conversation,
                    owner: &'a str,
                    status: ConversationStatus,
                    lease_until: i64,
                ) -> StoreFuture<'a, ()> {
                    Box::pin(SqlStore(&self.pool, self.group()).save_conversation(
                        conversation,
                        owner,
                        status,
                        lease_until,
                    ))
                }

                fn renew_lease<'a>(
                    &'a self,
                    id: &'a str,
                    owner: &'a str,
                    lease_until: i64,
                ) -> StoreFuture<'a, bool> {
                    Box::pin(SqlStore(&self.pool, self.group()).renew_lease(id, owner, lease_until))
                }

                fn conversations_with_status<'a>(
                    &'a self,
                    status: ConversationStatus,
                    limit: usize,
                ) -> StoreFuture<'a, Vec<String>> {
                    Box::pin(
                        SqlStore(&self.pool, self.group()).conversations_with_status(status, limit),
                    )
                }

                fn suspended_without_pending<'a>(
                    &'a self,
                    limit: usize,
                ) -> StoreFuture<'a, Vec<String>> {
                    Box::pin(SqlStore(&self.pool, self.group()).suspended_without_pending(limit))
                }

                fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool> {
                    Box::pin(SqlStore(&self.pool, self.group()).insert_call(record))
                }

                fn call<'a>(
                    &'a self,
                    conversation_id: &'a str,
                    tool_call_id: &'a str,
                    step: Step,
                ) -> StoreFuture<'a, Option<CallRecord>> {
                    Box::pin(SqlStore(&self.pool, self.group()).call(
                        conversation_id,
                        tool_call_id,
                        step,
                    ))
                }

                fn calls<'a>(
                    &'a self,
                    conversation_id: &'a str,
                ) -> StoreFuture<'a, Vec<CallRecord>> {
                    Box::pin(SqlStore(&self.pool, self.group()).calls(conversation_id))
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
                    Box::pin(SqlStore(&self.pool, self.group()).transition(
                        conversation_id,
                        tool_call_id,
                        step,
                        from,
                        to,
                        outcome,
                        now,
                    ))
                }

                fn set_deadline<'a>(
                    &'a self,
                    conversation_id: &'a str,
                    tool_call_id: &'a str,
                    step: Step,
                    deadline: Option<i64>,
                ) -> StoreFuture<'a, bool> {
                    Box::pin(SqlStore(&self.pool, self.group()).set_deadline(
                        conversation_id,
                        tool_call_id,
                        step,
                        deadline,
                    ))
                }

                fn due_calls<'a>(
                    &'a self,
                    now: i64,
                    limit: usize,
                ) -> StoreFuture<'a, Vec<CallRecord>> {
                    Box::pin(SqlStore(&self.pool, self.group()).due_calls(now, limit))
                }

                fn apply<'a>(&'a self, batch: &'a Batch<'a>) -> StoreFuture<'a, Applied> {
                    Box::pin(SqlStore(&self.pool, self.group()).apply(batch))
                }
            }
        };
    };
}
pub(super) use impl_store;
