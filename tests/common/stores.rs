//! The stores a test runs on: `MemoryStore`, `SqliteStore` (a fresh file)
//! and `PostgresStore` at `APTIX_TEST_PG_URL` (`scripts/pg-server.sh start`
//! prints one). Without that variable a PostgreSQL test prints a notice and
//! passes, except under CI (`CI=true`), where it fails: CI must test the
//! store that many processes share.

use std::path::PathBuf;
use std::sync::Arc;

use aptix::store::{MemoryStore, PostgresStore, SqliteStore, Store};

/// A store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Memory,
    Sqlite,
    Postgres,
}

impl Backend {
    /// Its name, as a child process is told it (`parse` reads it back).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    pub(crate) fn parse(name: &str) -> Backend {
        match name {
            "memory" => Backend::Memory,
            "sqlite" => Backend::Sqlite,
            "postgres" => Backend::Postgres,
            other => panic!("unknown backend `{other}`"),
        }
    }

    /// A store on what processes share: a SQLite file's path, or
    /// PostgreSQL's URL. (A `MemoryStore` is shared by no two processes.)
    pub(crate) async fn open(self, target: &str) -> Arc<dyn Store> {
        match self {
            Backend::Memory => panic!("a MemoryStore lives in one process: no target to open"),
            Backend::Sqlite => Arc::new(
                SqliteStore::open(target)
                    .await
                    .unwrap_or_else(|e| panic!("SQLite at {target}: {e}")),
            ),
            Backend::Postgres => Arc::new(
                PostgresStore::connect(target)
                    .await
                    .unwrap_or_else(|e| panic!("PostgreSQL: {e}")),
            ),
        }
    }
}

/// The PostgreSQL URL to test against, or `None` (with a notice) when there
/// is none and this is not CI.
pub(crate) fn pg_url() -> Option<String> {
    match std::env::var("APTIX_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "APTIX_TEST_PG_URL is not set, and CI must test the PostgreSQL store: \
             start one with `scripts/pg-server.sh start` (scripts/test.sh does)"
        ),
        _ => {
            eprintln!(
                "notice: APTIX_TEST_PG_URL is not set: skipping the PostgreSQL run \
                 (`scripts/pg-server.sh start` prints one)"
            );
            None
        }
    }
}

/// A fresh SQLite file's path, under the build directory rather than the
/// system's temporary one: nothing deletes these files, and a clean build
/// starts without them.
fn fresh_sqlite_path() -> PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("aptix-test-{}.db", super::uuid()))
}

/// A fresh store on `backend`, or `None` when PostgreSQL is not configured.
pub(crate) async fn store(backend: Backend) -> Option<Arc<dyn Store>> {
    Some(match backend {
        Backend::Memory => Arc::new(MemoryStore::new()),
        Backend::Sqlite => {
            let path = fresh_sqlite_path();
            Arc::new(
                SqliteStore::open(&path)
                    .await
                    .unwrap_or_else(|e| panic!("SQLite at {}: {e}", path.display())),
            )
        }
        Backend::Postgres => Backend::Postgres.open(&pg_url()?).await,
    })
}

/// Where a test keeps what a store needs beyond one process: the shared
/// memory of a `MemoryStore`, the file of a `SqliteStore`, the URL of
/// PostgreSQL. Each "process" of a test opens its own store on it.
#[derive(Clone)]
pub(crate) enum StoreAt {
    Memory(Arc<MemoryStore>),
    Sqlite(PathBuf),
    Postgres(String),
}

impl StoreAt {
    /// A fresh place for `backend`, or `None` when PostgreSQL is not
    /// configured.
    pub(crate) fn new(backend: Backend) -> Option<StoreAt> {
        Some(match backend {
            Backend::Memory => StoreAt::Memory(Arc::new(MemoryStore::new())),
            Backend::Sqlite => StoreAt::Sqlite(fresh_sqlite_path()),
            Backend::Postgres => StoreAt::Postgres(pg_url()?),
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
            StoreAt::Postgres(url) => Backend::Postgres.open(url).await,
        }
    }
}

/// A SQLite file in the temp folder, deleted (with its WAL files) on drop.
pub(crate) struct TempDb(pub(crate) PathBuf);

impl TempDb {
    pub(crate) fn new(label: &str) -> TempDb {
        TempDb(std::env::temp_dir().join(format!("aptix-{}.sqlite", super::unique(label))))
    }

    /// The path, as a store's target.
    pub(crate) fn target(&self) -> String {
        self.0
            .to_str()
            .unwrap_or_else(|| panic!("a UTF-8 temp path: {:?}", self.0))
            .to_owned()
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

/// One test per store for each `fn NAME(backend: Backend)` listed:
/// `memory::NAME`, `sqlite::NAME` and `postgres::NAME`, so a failure names
/// both. Async functions run on a multi-thread runtime of 2 workers (or
/// `worker_threads = N:`); `sync:` functions start the runtimes they need.
macro_rules! on_every_store {
    (sync: $($name:ident),* $(,)?) => {
        $crate::common::on_every_store!(@sync memory Memory: $($name),*);
        $crate::common::on_every_store!(@sync sqlite Sqlite: $($name),*);
        $crate::common::on_every_store!(@sync postgres Postgres: $($name),*);
    };
    (worker_threads = $threads:tt: $($name:ident),* $(,)?) => {
        $crate::common::on_every_store!(@async memory Memory $threads: $($name),*);
        $crate::common::on_every_store!(@async sqlite Sqlite $threads: $($name),*);
        $crate::common::on_every_store!(@async postgres Postgres $threads: $($name),*);
    };
    (@async $module:ident $backend:ident $threads:tt: $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $name() {
                    super::$name($crate::common::Backend::$backend).await
                }
            )*
        }
    };
    (@sync $module:ident $backend:ident: $($name:ident),*) => {
        mod $module {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::common::Backend::$backend)
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        $crate::common::on_every_store!(worker_threads = 2: $($name),*);
    };
}

pub(crate) use on_every_store;
