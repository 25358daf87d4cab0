//! The shared store: PostgreSQL, for many processes (and machines) working
//! on the same conversations.
//!
//! Every compare-and-swap is one `UPDATE … WHERE <expected state>` statement.
//! Under PostgreSQL's default isolation (read committed) an `UPDATE` that
//! finds its row being changed by another transaction waits for it, then
//! checks its `WHERE` again against the committed row, so of any number of
//! concurrent claims or transitions exactly one matches.

use std::time::Duration;

use sqlx::postgres::{PgPoolOptions, PgRow};
use sqlx::{PgPool, Row};

use super::{
    CallRecord, CallState, ConversationStatus, Step, Store, StoreError, StoreFuture,
    StoredConversation, decode_conversation, encode_messages,
};
use crate::agent::Conversation;

/// Connections of the pool [`PostgresStore::connect`] makes.
const MAX_CONNECTIONS: u32 = 10;

/// How long an operation waits for a free pooled connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// The key of the transaction-level advisory lock that serialises schema
/// creation: `CREATE TABLE IF NOT EXISTS` is not safe against a concurrent
/// twin in PostgreSQL (both see no table, one fails on a unique index of
/// the catalog), and processes of one deployment often start together.
/// The bytes spell `aptix_s1`.
const SCHEMA_LOCK: i64 = 0x6170_7469_785f_7331;

/// The schema. Ids use the `C` collation, so they sort by bytes as
/// [`Store::calls`] promises, whatever the database's locale.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS aptix_conversations (
        id          TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
        session_id  TEXT,
        messages    TEXT   NOT NULL,
        status      TEXT   NOT NULL,
        owner       TEXT,
        lease_until BIGINT NOT NULL,
        version     BIGINT NOT NULL,
        changed_at  BIGINT NOT NULL
    )",
    // "Oldest change first" across processes: a sequence hands out
    // increasing numbers without a lock on the table.
    "CREATE SEQUENCE IF NOT EXISTS aptix_conversation_changes",
    // `conversations_with_status`.
    "CREATE INDEX IF NOT EXISTS aptix_conversations_status
        ON aptix_conversations (status, changed_at)",
    "CREATE TABLE IF NOT EXISTS aptix_calls (
        conversation_id TEXT COLLATE \"C\" NOT NULL,
        tool_call_id    TEXT COLLATE \"C\" NOT NULL,
        step            TEXT   NOT NULL,
        tool            TEXT   NOT NULL,
        arguments       TEXT   NOT NULL,
        payload         TEXT   NOT NULL,
        state           TEXT   NOT NULL,
        outcome         TEXT,
        deadline        BIGINT,
        created_at      BIGINT NOT NULL,
        updated_at      BIGINT NOT NULL,
        PRIMARY KEY (conversation_id, tool_call_id, step)
    )",
    // `due_calls`.
    "CREATE INDEX IF NOT EXISTS aptix_calls_due ON aptix_calls (state, deadline)",
];

/// The next value of the change counter behind "oldest change first".
macro_rules! next_change {
    () => {
        "nextval('aptix_conversation_changes')"
    };
}

/// Conversations and ledger in PostgreSQL.
///
/// Cheap to clone (it is a connection pool). Any number of processes may
/// share the database: claims and transitions stay atomic across them.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`)
    /// with a pool of up to 10 connections, and creates the tables when
    /// missing.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect(url)
            .await
            .map_err(StoreError::backend)?;
        Self::from_pool(pool).await
    }

    /// Uses a pool the application configured (size, TLS, timeouts), and
    /// creates the tables when missing. Safe when several processes start
    /// at once.
    pub async fn from_pool(pool: PgPool) -> Result<Self, StoreError> {
        let mut transaction = pool.begin().await.map_err(StoreError::backend)?;
        // Held until commit: a second process creating the schema at the
        // same time waits here, then finds every table in place.
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SCHEMA_LOCK)
            .execute(&mut *transaction)
            .await
            .map_err(StoreError::backend)?;
        for statement in SCHEMA {
            sqlx::query(*statement)
                .execute(&mut *transaction)
                .await
                .map_err(StoreError::backend)?;
        }
        transaction.commit().await.map_err(StoreError::backend)?;
        Ok(PostgresStore { pool })
    }

    /// The pool, e.g. to share it with the application's own queries.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection, waiting for running statements.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn backend(error: sqlx::Error) -> StoreError {
    StoreError::backend(error)
}

/// A `usize` limit as SQL's `LIMIT`; anything past `i64::MAX` is no limit.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn conversation_from_row(row: &PgRow) -> Result<StoredConversation, StoreError> {
    let id: String = row.try_get("id").map_err(backend)?;
    let session_id: Option<String> = row.try_get("session_id").map_err(backend)?;
    let messages: String = row.try_get("messages").map_err(backend)?;
    let status: String = row.try_get("status").map_err(backend)?;
    Ok(StoredConversation {
        conversation: decode_conversation(id, session_id, &messages)?,
        status: ConversationStatus::parse(&status)?,
        owner: row.try_get("owner").map_err(backend)?,
        lease_until: row.try_get("lease_until").map_err(backend)?,
        version: row.try_get("version").map_err(backend)?,
    })
}

fn call_from_row(row: &PgRow) -> Result<CallRecord, StoreError> {
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
    })
}

impl Store for PostgresStore {
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        _now: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let messages = encode_messages(conversation)?;
            let result = sqlx::query(concat!(
                "INSERT INTO aptix_conversations
                    (id, session_id, messages, status, owner, lease_until, version, changed_at)
                 VALUES ($1, $2, $3, 'idle', NULL, 0, 1, ",
                next_change!(),
                ")
                 ON CONFLICT (id) DO NOTHING"
            ))
            .bind(&conversation.id)
            .bind(&conversation.session_id)
            .bind(messages)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(result.rows_affected() == 1)
        })
    }

    fn load_conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT id, session_id, messages, status, owner, lease_until, version
                 FROM aptix_conversations WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?;
            row.as_ref().map(conversation_from_row).transpose()
        })
    }

    fn claim_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        now: i64,
        lease_until: i64,
    ) -> StoreFuture<'a, Option<StoredConversation>> {
        Box::pin(async move {
            // The whole claim is this one statement: the condition is
            // checked again under the row lock that makes the change.
            let row = sqlx::query(concat!(
                "UPDATE aptix_conversations
                 SET status = 'running', owner = $2, lease_until = $4,
                     version = version + 1, changed_at = ",
                next_change!(),
                "
                 WHERE id = $1
                   AND (status <> 'running' OR lease_until < $3 OR owner = $2)
                 RETURNING id, session_id, messages, status, owner, lease_until, version"
            ))
            .bind(id)
            .bind(owner)
            .bind(now)
            .bind(lease_until)
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?;
            row.as_ref().map(conversation_from_row).transpose()
        })
    }

    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let messages = encode_messages(conversation)?;
            // Running keeps the hold (with the new lease); Idle and
            // Suspended give it up, so anyone may claim at once.
            let (next_owner, next_lease) = match status {
                ConversationStatus::Running => (Some(owner), lease_until),
                ConversationStatus::Idle | ConversationStatus::Suspended => (None, 0),
            };
            let result = sqlx::query(concat!(
                "UPDATE aptix_conversations
                 SET session_id = $2, messages = $3, status = $4, owner = $5,
                     lease_until = $6, version = version + 1, changed_at = ",
                next_change!(),
                "
                 WHERE id = $1 AND status = 'running' AND owner = $7"
            ))
            .bind(&conversation.id)
            .bind(&conversation.session_id)
            .bind(messages)
            .bind(status.as_str())
            .bind(next_owner)
            .bind(next_lease)
            .bind(owner)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            if result.rows_affected() == 1 {
                Ok(())
            } else {
                Err(StoreError::LostLease {
                    conversation_id: conversation.id.clone(),
                    owner: owner.to_owned(),
                })
            }
        })
    }

    fn renew_lease<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        lease_until: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let result = sqlx::query(
                "UPDATE aptix_conversations SET lease_until = $3
                 WHERE id = $1 AND owner = $2 AND status = 'running'",
            )
            .bind(id)
            .bind(owner)
            .bind(lease_until)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(result.rows_affected() == 1)
        })
    }

    fn conversations_with_status<'a>(
        &'a self,
        status: ConversationStatus,
        limit: usize,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id FROM aptix_conversations WHERE status = $1
                 ORDER BY changed_at, id LIMIT $2",
            )
            .bind(status.as_str())
            .bind(sql_limit(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            rows.iter()
                .map(|row| row.try_get("id").map_err(backend))
                .collect()
        })
    }

    fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let result = sqlx::query(
                "INSERT INTO aptix_calls
                    (conversation_id, tool_call_id, step, tool, arguments, payload, state,
                     outcome, deadline, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                 ON CONFLICT (conversation_id, tool_call_id, step) DO NOTHING",
            )
            .bind(&record.conversation_id)
            .bind(&record.tool_call_id)
            .bind(record.step.as_str())
            .bind(&record.tool)
            .bind(&record.arguments)
            .bind(&record.payload)
            .bind(record.state.as_str())
            .bind(&record.outcome)
            .bind(record.deadline)
            .bind(record.created_at)
            .bind(record.updated_at)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(result.rows_affected() == 1)
        })
    }

    fn call<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
    ) -> StoreFuture<'a, Option<CallRecord>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT conversation_id, tool_call_id, step, tool, arguments, payload, state,
                        outcome, deadline, created_at, updated_at
                 FROM aptix_calls
                 WHERE conversation_id = $1 AND tool_call_id = $2 AND step = $3",
            )
            .bind(conversation_id)
            .bind(tool_call_id)
            .bind(step.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?;
            row.as_ref().map(call_from_row).transpose()
        })
    }

    fn calls<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<CallRecord>> {
        Box::pin(async move {
            // Steps sort in `Step`'s declaration order, not alphabetically.
            let rows = sqlx::query(
                "SELECT conversation_id, tool_call_id, step, tool, arguments, payload, state,
                        outcome, deadline, created_at, updated_at
                 FROM aptix_calls
                 WHERE conversation_id = $1
                 ORDER BY created_at, tool_call_id,
                     CASE step WHEN 'approval' THEN 0 WHEN 'client' THEN 1
                               WHEN 'human' THEN 2 ELSE 3 END",
            )
            .bind(conversation_id)
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            rows.iter().map(call_from_row).collect()
        })
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
        Box::pin(async move {
            let result = sqlx::query(
                "UPDATE aptix_calls
                 SET state = $5, outcome = COALESCE($6, outcome), updated_at = $7
                 WHERE conversation_id = $1 AND tool_call_id = $2 AND step = $3 AND state = $4",
            )
            .bind(conversation_id)
            .bind(tool_call_id)
            .bind(step.as_str())
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(outcome)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(result.rows_affected() == 1)
        })
    }

    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let result = sqlx::query(
                "UPDATE aptix_calls SET deadline = $4
                 WHERE conversation_id = $1 AND tool_call_id = $2 AND step = $3
                   AND state = 'pending'",
            )
            .bind(conversation_id)
            .bind(tool_call_id)
            .bind(step.as_str())
            .bind(deadline)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(result.rows_affected() == 1)
        })
    }

    fn due_calls<'a>(&'a self, now: i64, limit: usize) -> StoreFuture<'a, Vec<CallRecord>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT conversation_id, tool_call_id, step, tool, arguments, payload, state,
                        outcome, deadline, created_at, updated_at
                 FROM aptix_calls
                 WHERE state = 'pending' AND deadline IS NOT NULL AND deadline <= $1
                 ORDER BY deadline, created_at, conversation_id, tool_call_id, step
                 LIMIT $2",
            )
            .bind(now)
            .bind(sql_limit(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            rows.iter().map(call_from_row).collect()
        })
    }
}
