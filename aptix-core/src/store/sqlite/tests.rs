//! Query plans. What a statement costs as the tables grow is decided by the
//! plan SQLite picks, so it is tested there rather than by timing: the plan
//! is the same on an empty database as on a full one without `ANALYZE`
//! statistics, which is how an application's database runs.

use sqlx::Row;
use sqlx::sqlite::SqlitePoolOptions;

use super::SCHEMA;
use crate::store::sql::Dialect;

/// `EXPLAIN QUERY PLAN` of every statement, one line per plan step.
async fn plans() -> Vec<(&'static str, Vec<String>)> {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .unwrap_or_else(|error| panic!("in-memory SQLite: {error}"));
    for statement in SCHEMA {
        sqlx::query(*statement)
            .execute(&pool)
            .await
            .unwrap_or_else(|error| panic!("{statement}: {error}"));
    }
    let mut plans = Vec::new();
    for (name, statement) in <sqlx::Sqlite as Dialect>::statements().all() {
        // Our own statement text, prefixed: nothing from outside goes in.
        let explain = sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {statement}"));
        let rows = sqlx::query(explain)
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        let steps = rows
            .iter()
            .map(|row| row.get::<String, _>("detail"))
            .collect();
        plans.push((name, steps));
    }
    plans
}

/// The sweep lists suspended conversations with no pending call. Looking for
/// a conversation's pending calls through the `(state, deadline)` index reads
/// every pending call of every conversation, once per suspended conversation:
/// with 5,000 conversations waiting on an approval that took 2.2 s of SQLite's
/// time per sweep, once a second. Through the primary key it reads the
/// conversation's own calls only.
#[tokio::test]
async fn the_sweep_reads_each_conversations_own_calls() {
    let plans = plans().await;
    let (_, sweep) = plans
        .iter()
        .find(|(name, _)| *name == "suspended_without_pending")
        .unwrap_or_else(|| panic!("no sweep statement"));
    let calls: Vec<&String> = sweep
        .iter()
        .filter(|step| step.contains(" k ") || step.ends_with(" k"))
        .collect();
    assert!(
        !calls.is_empty()
            && calls
                .iter()
                .all(|step| step.contains("aptix_calls_1 (conversation_id=?)")),
        "the sweep's plan: {sweep:#?}"
    );
}

/// No statement reads a whole table: each finds its rows through an index.
#[tokio::test]
async fn no_statement_scans_a_table() {
    for (name, steps) in plans().await {
        for step in &steps {
            assert!(
                !step.starts_with("SCAN "),
                "{name} scans a table: {steps:#?}"
            );
        }
    }
}
