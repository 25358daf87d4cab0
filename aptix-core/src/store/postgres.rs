//! The shared store: PostgreSQL, for many processes (and machines) working
//! on the same conversations.
//!
//! Every compare-and-swap is one `UPDATE … WHERE <expected state>` statement.
//! Under PostgreSQL's default isolation (read committed) an `UPDATE` that
//! finds its row being changed by another transaction waits for it, then
//! checks its `WHERE` again against the committed row, so of any number of
//! concurrent claims or transitions exactly one matches.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::postgres::{PgPoolOptions, PgQueryResult};
use sqlx::{PgConnection, PgPool, Postgres};

use super::StoreError;
use super::sql::{Dialect, GroupCommit, Statements, TRANSIENT_RETRIES, impl_store, is_transient};

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

/// The version of [`SCHEMA`], kept in the one-row table `aptix_schema`.
/// Raise it whenever `SCHEMA` changes; a process finding a newer version
/// refuses to start ([`StoreError::SchemaTooNew`]).
/// 2: `aptix_calls.requested`; 3: `aptix_calls.reasoning`; 4:
/// `aptix_conversations.user_id` and `tenant_id`.
const SCHEMA_VERSION: i64 = 4;

/// The schema. Ids use the `C` collation, so they sort by bytes as
/// [`Store::calls`](super::Store::calls) promises, whatever the database's
/// locale.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS aptix_conversations (
        id          TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
        session_id  TEXT,
        messages    TEXT   NOT NULL,
        status      TEXT   NOT NULL,
        owner       TEXT,
        lease_until BIGINT NOT NULL,
        version     BIGINT NOT NULL,
        changed_at  BIGINT NOT NULL,
        user_id     TEXT,
        tenant_id   TEXT
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
        requested       TEXT,
        reasoning       TEXT,
        PRIMARY KEY (conversation_id, tool_call_id, step)
    )",
    // Version 2: which call of the transcript a row is for.
    "ALTER TABLE aptix_calls ADD COLUMN IF NOT EXISTS requested TEXT",
    // Version 3: why the model made the call, for whoever approves it.
    "ALTER TABLE aptix_calls ADD COLUMN IF NOT EXISTS reasoning TEXT",
    // Version 4: who the conversation is for, given to its tools.
    "ALTER TABLE aptix_conversations ADD COLUMN IF NOT EXISTS user_id TEXT",
    "ALTER TABLE aptix_conversations ADD COLUMN IF NOT EXISTS tenant_id TEXT",
    // `due_calls`: pending calls by deadline (the same index as SQLite's, and
    // why, in sqlite.rs).
    "DROP INDEX IF EXISTS aptix_calls_due",
    "CREATE INDEX IF NOT EXISTS aptix_calls_pending_deadline
        ON aptix_calls (deadline) WHERE state = 'pending'",
];

/// The next value of the change counter behind "oldest change first".
const NEXT_CHANGE: &str = "nextval('aptix_conversation_changes')";

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
    /// at once, and while others of the deployment write.
    pub async fn from_pool(pool: PgPool) -> Result<Self, StoreError> {
        // Set up already: nothing to lock. Running the schema's
        // `IF NOT EXISTS` statements on every start is not free: `CREATE
        // INDEX IF NOT EXISTS` takes a share lock on its table before it
        // looks for the index, which waits for every writer and deadlocks
        // with a writer holding the other table.
        let mut connection = pool.acquire().await.map_err(StoreError::backend)?;
        let version = schema_version(&mut connection).await?;
        drop(connection);
        if version != Some(SCHEMA_VERSION) {
            // Only an upgrade under traffic can meet a deadlock; the schema
            // change is then run again, as a store batch is.
            let mut attempt = 0;
            while let Err(error) = migrate(&pool).await {
                if attempt == TRANSIENT_RETRIES || !is_transient(&error) {
                    return Err(error);
                }
                attempt += 1;
                tracing::debug!(attempt, %error, "schema change aborted by the database; again");
                tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
            }
        }
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

    /// PostgreSQL commits concurrent transactions of its connections
    /// together by itself: every batch is a transaction of its own.
    fn group(&self) -> Option<&dyn GroupCommit<Postgres>> {
        None
    }
}

/// The schema version the database holds, `None` before the first start
/// (or before versions were kept), without taking a lock.
async fn schema_version(connection: &mut PgConnection) -> Result<Option<i64>, StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('aptix_schema') IS NOT NULL")
        .fetch_one(&mut *connection)
        .await
        .map_err(StoreError::backend)?;
    if !exists {
        return Ok(None);
    }
    let version: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM aptix_schema")
        .fetch_one(&mut *connection)
        .await
        .map_err(StoreError::backend)?;
    match version {
        Some(found) if found > SCHEMA_VERSION => Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        }),
        version => Ok(version),
    }
}

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction, under the
/// advisory lock: of processes starting together one changes it, the
/// others wait and find it done.
async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    let mut transaction = pool.begin().await.map_err(StoreError::backend)?;
    let lock = sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(SCHEMA_LOCK);
    execute(&mut transaction, lock).await?;
    let versions = sqlx::query("CREATE TABLE IF NOT EXISTS aptix_schema (version BIGINT NOT NULL)");
    execute(&mut transaction, versions).await?;
    if schema_version(&mut transaction).await? != Some(SCHEMA_VERSION) {
        for statement in SCHEMA {
            execute(&mut transaction, sqlx::query(*statement)).await?;
        }
        execute(&mut transaction, sqlx::query("DELETE FROM aptix_schema")).await?;
        let version =
            sqlx::query("INSERT INTO aptix_schema (version) VALUES ($1)").bind(SCHEMA_VERSION);
        execute(&mut transaction, version).await?;
    }
    transaction.commit().await.map_err(StoreError::backend)
}

/// Runs one statement of the schema's transaction.
async fn execute(
    connection: &mut PgConnection,
    statement: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
) -> Result<(), StoreError> {
    statement
        .execute(connection)
        .await
        .map(drop)
        .map_err(StoreError::backend)
}

impl Dialect for Postgres {
    fn statements() -> &'static Statements {
        static STATEMENTS: LazyLock<Statements> =
            LazyLock::new(|| Statements::new("$", NEXT_CHANGE));
        &STATEMENTS
    }

    const BEGIN: &'static str = "BEGIN";

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }
}

impl_store!(PostgresStore);
