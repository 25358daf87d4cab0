//! Set-up shared by every integration test binary (each
//! `tests/<area>/main.rs` includes it): the stores a test runs on
//! (`stores.rs`, with `on_every_store!`), what a run's events say
//! (`events.rs`: its one `Done`, its results), fresh ids, a test's name in its
//! binary (for a test that runs its binary again), and log lines captured
//! to search for secrets.

#![allow(dead_code, unused_imports, unused_macros)]

mod events;
mod stores;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) use events::{done, results};
pub(crate) use stores::{Backend, StoreAt, TempDb, on_every_store, pg_url, store};

/// Makes ring the process's rustls provider (the library does the same
/// before its own clients): reqwest is built without one, so the test build
/// compiles no C crypto. Call it before building an HTTP client of rmcp's.
pub(crate) fn install_tls() {
    // An error means a provider is installed already, which is all we need.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A builder for a test's own HTTP requests, with TLS that works.
pub(crate) fn http_client_builder() -> reqwest::ClientBuilder {
    install_tls();
    reqwest::Client::builder()
}

/// A test's own HTTP client.
pub(crate) fn http_client() -> reqwest::Client {
    http_client_builder()
        .build()
        .unwrap_or_else(|e| panic!("an HTTP client: {e}"))
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

/// `label`, made unique: rows of a shared PostgreSQL and files in the temp
/// folder never collide, across tests, runs and processes.
pub(crate) fn unique(label: &str) -> String {
    format!("{label}-{}", uuid())
}

/// The name libtest gives the test `name` of the module at `module_path`
/// (`module_path!()` there): the module's path in its test binary, for a
/// test that runs its own binary again with `--exact`.
pub(crate) fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_binary, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
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

/// Makes `subscriber` this thread's default until the guard drops, for a
/// test that searches the log lines a run writes.
///
/// A test binary runs many tests at once, most without a subscriber, and
/// `tracing` caches per call site whether anyone wants its events: a call
/// site first reached while no dispatcher wanted it can be cached as
/// "never" in a race with this test registering its own, and then its
/// line is missing (seen under load: "agent run finished" absent). A global
/// subscriber that wants everything (a bare registry, which writes
/// nothing) keeps any call site from reading "never", and the interest
/// cache is rebuilt once it is there.
pub(crate) fn capture_logs<S>(subscriber: S) -> tracing::subscriber::DefaultGuard
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    static GLOBAL: std::sync::Once = std::sync::Once::new();
    GLOBAL.call_once(|| {
        // Another global subscriber already there serves as well.
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    });
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}
