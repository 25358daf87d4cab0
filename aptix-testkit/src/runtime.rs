//! Async tests without `#[tokio::test]`, which pins the test's future with
//! `Pin::new_unchecked(..)` in an unsafe block in the test's own crate. Here the
//! future moves into `Runtime::block_on`, as `#[tokio::main]` does, so a
//! crate of tests compiles no `unsafe` code:
//!
//! ```
//! // In a test: `#[test] fn adds() { ... }`.
//! aptix_testkit::block_on(async { assert_eq!(1 + 1, 2) });
//! ```

use std::future::Future;

/// Runs `future` to its end on a new current-thread runtime with time and
/// I/O enabled: `#[tokio::test]`'s runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("the test's runtime could not start: {error}"))
        .block_on(future)
}

/// Runs `future` to its end on a new multi-thread runtime with `workers`
/// worker threads: `#[tokio::test(flavor = "multi_thread", worker_threads
/// = N)]`'s runtime.
pub fn block_on_threads<F: Future>(workers: usize, future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("the test's runtime could not start: {error}"))
        .block_on(future)
}
