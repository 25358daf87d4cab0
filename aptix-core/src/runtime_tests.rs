//! The runtime of this crate's async unit tests: `#[tokio::test]` expands
//! to `unsafe` pinning in the crate that uses it, `Runtime::block_on` takes
//! the future by value. (`aptix_testkit::block_on` is the same for other
//! crates; this crate's unit tests cannot depend on the testkit, which
//! depends on this crate.)

use std::future::Future;

/// Runs `future` on a new current-thread runtime with time and I/O.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("the test's runtime could not start: {error}"))
        .block_on(future)
}
