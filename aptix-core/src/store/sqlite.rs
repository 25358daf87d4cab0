//! The embedded store: one SQLite file in WAL mode, shared safely by every
//! process on the machine that opens it.
//!
//! Every compare-and-swap is one `UPDATE … WHERE <expected state>` statement.
//! SQLite runs one writer at a time per file (other writers wait up to the
//! busy timeout), and a statement reads and writes under that one write
//! lock, so the condition and the change cannot be split by another process.
//!
//! With `synchronous=FULL` every commit waits for the disk, and SQLite
//! commits one transaction at a time, so commits bound the throughput. The
//! writes of one store therefore go through one writer task that commits
//! whatever has queued up while the previous commit was on its way to disk
//! as one transaction (a group commit), each batch inside its own savepoint:
//! a refused or failed batch is rolled back to its savepoint alone, and no
//! caller is answered before the commit that holds its writes.

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::{Connection, Sqlite, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::sql::{Dialect, GroupCommit, Grouped, Prepared, SqlStore, Statements, impl_store};
use super::{Applied, StoreError};

/// How long a writer waits for another process's write to finish before
/// giving up with "database is locked". Writes are single short statements,
/// so reaching this means something is wrong, not merely busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections per store: WAL lets readers run beside the one writer.
const MAX_CONNECTIONS: u32 = 4;

/// The most batches one group commit takes: bounds how long the write lock
/// is held, and how much a failed commit has to answer for.
const MAX_GROUP: usize = 64;

/// The schema. Ids compare as bytes (SQLite's default `BINARY` collation),
/// which is the order [`Store::calls`](super::Store::calls) promises.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS aptix_conversations (
        id          TEXT    NOT NULL PRIMARY KEY,
        session_id  TEXT,
        messages    TEXT    NOT NULL,
        status      TEXT    NOT NULL,
        owner       TEXT,
        lease_until INTEGER NOT NULL,
        version     INTEGER NOT NULL,
        changed_at  INTEGER NOT NULL,
        user_id     TEXT,
        tenant_id   TEXT
    )",
    // `conversations_with_status`, and the `MAX(changed_at)` of every write.
    "CREATE INDEX IF NOT EXISTS aptix_conversations_status
        ON aptix_conversations (status, changed_at)",
    "CREATE INDEX IF NOT EXISTS aptix_conversations_changed
        ON aptix_conversations (changed_at)",
    "CREATE TABLE IF NOT EXISTS aptix_calls (
        conversation_id TEXT    NOT NULL,
        tool_call_id    TEXT    NOT NULL,
        step            TEXT    NOT NULL,
        tool            TEXT    NOT NULL,
        arguments       TEXT    NOT NULL,
        payload         TEXT    NOT NULL,
        state           TEXT    NOT NULL,
        outcome         TEXT,
        deadline        INTEGER,
        created_at      INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL,
        requested       TEXT,
        reasoning       TEXT,
        PRIMARY KEY (conversation_id, tool_call_id, step)
    )",
    // `due_calls`: pending calls by deadline, and nothing else. A `(state,
    // deadline)` index also offered the sweep's "pending calls of this
    // conversation" a lookup by state alone, which SQLite took, reading every
    // pending call of the store once per suspended conversation. Databases
    // made before keep that index under its old name; it is dropped.
    "DROP INDEX IF EXISTS aptix_calls_due",
    "CREATE INDEX IF NOT EXISTS aptix_calls_pending_deadline
        ON aptix_calls (deadline) WHERE state = 'pending'",
];

/// Columns the tables gained after they were first made, as (table,
/// column, the statement that adds it to a database made before: SQLite
/// has no `ADD COLUMN IF NOT EXISTS`).
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    (
        "aptix_calls",
        "requested",
        "ALTER TABLE aptix_calls ADD COLUMN requested TEXT",
    ),
    (
        "aptix_calls",
        "reasoning",
        "ALTER TABLE aptix_calls ADD COLUMN reasoning TEXT",
    ),
    (
        "aptix_conversations",
        "user_id",
        "ALTER TABLE aptix_conversations ADD COLUMN user_id TEXT",
    ),
    (
        "aptix_conversations",
        "tenant_id",
        "ALTER TABLE aptix_conversations ADD COLUMN tenant_id TEXT",
    ),
];

/// The next value of the change counter behind "oldest change first". The
/// statement that uses it holds the write lock, so no other writer can read
/// the same maximum.
const NEXT_CHANGE: &str = "(SELECT COALESCE(MAX(changed_at), 0) + 1 FROM aptix_conversations)";

/// Conversations and ledger in one SQLite file.
///
/// Cheap to clone (it is a connection pool). Several processes may open the
/// same file: claims and transitions stay atomic across them.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: Writer,
}

/// One batch waiting for the group commit, and who waits for its answer.
struct Job {
    writes: Vec<Prepared<Sqlite>>,
    answer: oneshot::Sender<Result<Applied, StoreError>>,
}

/// The queue of the store's writer task.
#[derive(Clone)]
struct Writer {
    jobs: mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("running", &!self.jobs.is_closed())
            .finish()
    }
}

impl Writer {
    /// Starts the writer task of `pool` on the current runtime.
    fn start(pool: SqlitePool) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(write_groups(pool, queue));
        Writer { jobs }
    }
}

impl GroupCommit<Sqlite> for Writer {
    fn commit(
        &self,
        writes: Vec<Prepared<Sqlite>>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Grouped<Sqlite>> + Send + '_>> {
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            if let Err(mpsc::error::SendError(job)) = self.jobs.send(Job { writes, answer }) {
                // The writer's runtime ended: the caller writes itself.
                return Err(job.writes);
            }
            Ok(answered.await.unwrap_or_else(|_| {
                Err(StoreError::backend(std::io::Error::other(
                    "the store's writer stopped before answering; the batch may or may not be written",
                )))
            }))
        })
    }
}

/// The writer task: takes every batch queued, commits them as one
/// transaction, answers each, and goes on until the store is dropped.
async fn write_groups(pool: SqlitePool, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut group = Vec::new();
    while let Some(first) = queue.recv().await {
        group.push(first);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let writes = group
            .iter_mut()
            .map(|job| std::mem::take(&mut job.writes))
            .collect();
        let answers = commit_group(&pool, writes).await;
        for (job, answer) in group.drain(..).zip(answers) {
            // A caller that went away has nobody to tell.
            let _ = job.answer.send(answer);
        }
    }
}

/// Applies each batch inside its own savepoint of one transaction and
/// commits it: one answer per batch, in order. When the transaction itself
/// fails, every batch is answered with that error (nothing was written).
async fn commit_group(
    pool: &SqlitePool,
    batches: Vec<Vec<Prepared<Sqlite>>>,
) -> Vec<Result<Applied, StoreError>> {
    let count = batches.len();
    let failed = |error: &dyn std::fmt::Display| -> Vec<Result<Applied, StoreError>> {
        (0..count)
            .map(|_| {
                Err(StoreError::backend(std::io::Error::other(format!(
                    "the commit of a group of {count} batches failed: {error}"
                ))))
            })
            .collect()
    };
    let mut transaction = match pool.begin_with(<Sqlite as Dialect>::BEGIN).await {
        Ok(transaction) => transaction,
        Err(error) => return failed(&error),
    };
    let mut answers = Vec::with_capacity(count);
    for writes in batches {
        let mut savepoint = match transaction.begin().await {
            Ok(savepoint) => savepoint,
            Err(error) => return failed(&error),
        };
        let answer = SqlStore::<Sqlite>::run_prepared(&mut savepoint, writes).await;
        let kept = if matches!(answer, Ok(Applied::All { .. })) {
            savepoint.commit().await
        } else {
            savepoint.rollback().await
        };
        if let Err(error) = kept {
            return failed(&error);
        }
        answers.push(answer);
    }
    match transaction.commit().await {
        Ok(()) => answers,
        Err(error) => failed(&error),
    }
}

impl SqliteStore {
    /// Opens (creating when missing) the store at `path`: WAL mode, so
    /// readers never wait for the writer; a busy timeout, so concurrent
    /// writers from other processes wait their turn instead of failing; and
    /// the tables, created when missing.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a suspended call the agent reported must survive a
            // power cut, not only a process crash.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(StoreError::backend)?;
        Self::with_pool(pool).await
    }

    /// A store that lives in memory and vanishes with the value: SQLite's
    /// semantics without a file, for tests. It keeps one connection open for
    /// its whole life, because an in-memory database ends with its last
    /// connection.
    pub async fn in_memory() -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new().in_memory(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(StoreError::backend)?;
        Self::with_pool(pool).await
    }

    async fn with_pool(pool: SqlitePool) -> Result<Self, StoreError> {
        for statement in SCHEMA {
            sqlx::query(*statement)
                .execute(&pool)
                .await
                .map_err(StoreError::backend)?;
        }
        for (table, column, add) in ADDED_COLUMNS {
            add_column(&pool, table, column, add).await?;
        }
        let writer = Writer::start(pool.clone());
        Ok(SqliteStore { pool, writer })
    }

    /// Closes every connection, waiting for running statements. Dropping
    /// the store closes them too, only without waiting.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    fn group(&self) -> Option<&dyn GroupCommit<Sqlite>> {
        Some(&self.writer)
    }
}

/// Adds `column` to `table` unless it is there: a database made by an
/// older version. Two processes opening it together may both try; the one
/// that finds the column added meanwhile is content.
async fn add_column(
    pool: &SqlitePool,
    table: &str,
    column: &str,
    add: &'static str,
) -> Result<(), StoreError> {
    let present = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2")
            .bind(table)
            .bind(column)
            .fetch_one(pool)
            .await
            .map(|count| count > 0)
            .map_err(StoreError::backend)
    };
    if present().await? {
        return Ok(());
    }
    let added = sqlx::query(add).execute(pool).await;
    match added {
        Ok(_) => Ok(()),
        Err(_) if present().await? => Ok(()),
        Err(error) => Err(StoreError::backend(error)),
    }
}

impl Dialect for Sqlite {
    fn statements() -> &'static Statements {
        static STATEMENTS: LazyLock<Statements> =
            LazyLock::new(|| Statements::new("?", NEXT_CHANGE));
        &STATEMENTS
    }

    // Takes the write lock at once: a deferred transaction that read
    // first could not wait for another writer, only fail.
    const BEGIN: &'static str = "BEGIN IMMEDIATE";

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }
}

impl_store!(SqliteStore);

#[cfg(test)]
mod tests;
