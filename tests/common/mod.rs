//! Set-up shared by the integration tests that use it (`mod common;`):
//! the stores a durable test runs on, fresh ids, and log lines captured to
//! search for secrets.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aptix::store::{MemoryStore, PostgresStore, SqliteStore, Store};

/// A store a durable test runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Memory,
    Sqlite,
    Postgres,
}

// `Copy` by hand: the derive implements the unsafe marker trait `TrivialClone`.
impl Copy for Backend {}

/// Where a test keeps what a store needs beyond one process: the shared
/// memory of a `MemoryStore`, the file of a `SqliteStore`, the URL of
/// PostgreSQL. Each "process" of a test opens its own store on it.
#[derive(Clone)]
pub(crate) enum StoreAt {
    Memory(Arc<MemoryStore>),
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl StoreAt {
    /// A fresh place for `backend`, or `None` when PostgreSQL is not
    /// configured (a notice; a failure under `CI=true`).
    pub(crate) fn new(backend: Backend) -> Option<StoreAt> {
        Some(match backend {
            Backend::Memory => StoreAt::Memory(Arc::new(MemoryStore::new())),
            // Under the build directory, not the system's temporary one:
            // nothing deletes these files, and a clean build starts without them.
            Backend::Sqlite => StoreAt::Sqlite(
                std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                    .join(format!("aptix-test-{}.db", uuid())),
            ),
            Backend::Postgres => match std::env::var("APTIX_TEST_PG_URL") {
                Ok(url) => StoreAt::Postgres(url),
                Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
                    panic!(
                        "APTIX_TEST_PG_URL is not set: CI must run PostgreSQL (scripts/pg-server.sh)"
                    )
                }
                Err(_) => {
                    eprintln!("APTIX_TEST_PG_URL is not set: skipping the PostgreSQL run");
                    return None;
                }
            },
        })
    }

    /// A store on this place, for the runtime it is opened in (a SQLite
    /// store's writer is a task of that runtime).
    pub(crate) async fn open(&self) -> Arc<dyn Store> {
        match self {
            StoreAt::Memory(memory) => memory.clone(),
            StoreAt::Sqlite(path) => Arc::new(
                SqliteStore::open(path)
                    .await
                    .unwrap_or_else(|e| panic!("SQLite at {}: {e}", path.display())),
            ),
            StoreAt::Postgres(url) => Arc::new(
                PostgresStore::connect(url)
                    .await
                    .unwrap_or_else(|e| panic!("PostgreSQL: {e}")),
            ),
        }
    }
}

/// An id no other test of this run uses.
pub(crate) fn uuid() -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{:x}{:x}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a `tracing` subscriber writes, kept to be searched (for a secret
/// that must not be there): `.with_writer(move || captured.clone())`.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut buffer) = self.0.lock() {
            buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far.
    pub(crate) fn text(&self) -> String {
        self.0
            .lock()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }
}
