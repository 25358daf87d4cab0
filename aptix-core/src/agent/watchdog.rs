//! A clock outside the Tokio runtime, for the one limit a blocked worker
//! must not be able to stop: a call's time limit, kept by the loop while
//! the call's tool may block its thread.
//!
//! `tokio::time` fires only while some worker (or a current-thread
//! runtime's thread) polls the runtime's driver. A tool that blocks a
//! worker can leave none doing so: the worker that last parked on the
//! driver is the one that took the tool, and the others sleep until they
//! are handed work (on a runtime with one worker, nobody is left at all).
//! The limit then passes unseen until the tool returns. One thread of the
//! process keeps the deadlines instead and wakes the waiting task itself;
//! a wake from outside the runtime reaches a worker that is free, or the
//! thread that polls the loop.
//!
//! Hand-written rather than a crate: what is needed is a sorted queue, a
//! condition variable and a thread, and a timer crate would bring its own
//! runtime or a thread per timer.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, Once, PoisonError};
use std::time::Instant;

use tokio::sync::oneshot;

/// A deadline and whom to tell; ordered by deadline, then by arrival.
struct Entry {
    at: Instant,
    order: u64,
    tell: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

#[derive(Default)]
struct Queue {
    /// Earliest first.
    entries: BinaryHeap<Reverse<Entry>>,
    next_order: u64,
    /// The queue's length after its last pruning: deadlines whose waiter
    /// went away (the call ended first) are dropped when it doubles.
    pruned_at: usize,
}

struct Watchdog {
    queue: Mutex<Queue>,
    changed: Condvar,
}

static WATCHDOG: LazyLock<Watchdog> = LazyLock::new(|| Watchdog {
    queue: Mutex::default(),
    changed: Condvar::new(),
});

/// Whether the thread runs; `false` when the system refused one, and the
/// runtime's own timer is then all there is.
static STARTED: Once = Once::new();
static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn lock(watchdog: &Watchdog) -> MutexGuard<'_, Queue> {
    watchdog
        .queue
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Completes at `at`, told by the watchdog thread, or never when there is
/// no thread (the caller races it with the runtime's own timer).
pub(crate) async fn at(at: Instant) {
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("aptix-watchdog".to_owned())
            .spawn(|| keep(&WATCHDOG));
        match spawned {
            Ok(_) => RUNNING.store(true, std::sync::atomic::Ordering::Release),
            Err(error) => tracing::warn!(
                %error,
                "no watchdog thread: a tool that blocks its worker may outlast its time limit"
            ),
        }
    });
    if !RUNNING.load(std::sync::atomic::Ordering::Acquire) {
        return std::future::pending().await;
    }
    let (tell, told) = oneshot::channel();
    {
        let watchdog = &*WATCHDOG;
        let mut queue = lock(watchdog);
        let earliest = queue
            .entries
            .peek()
            .is_none_or(|Reverse(first)| at < first.at);
        let order = queue.next_order;
        queue.next_order = order.wrapping_add(1);
        queue.entries.push(Reverse(Entry { at, order, tell }));
        if queue.entries.len() > 1024 && queue.entries.len() > 2 * queue.pruned_at {
            queue
                .entries
                .retain(|Reverse(entry)| !entry.tell.is_closed());
            queue.pruned_at = queue.entries.len();
        }
        drop(queue);
        if earliest {
            watchdog.changed.notify_one();
        }
    }
    // A dropped sender (never: the thread holds every entry until it fires)
    // reads as the deadline.
    let _ = told.await;
}

/// The thread: tells each deadline when it comes, sleeping until the
/// earliest (or until an earlier one arrives).
fn keep(watchdog: &'static Watchdog) {
    let mut queue = lock(watchdog);
    loop {
        let now = Instant::now();
        while queue
            .entries
            .peek()
            .is_some_and(|Reverse(first)| first.at <= now)
        {
            if let Some(Reverse(due)) = queue.entries.pop() {
                // The waiter may be gone (its call ended): nothing to tell.
                let _ = due.tell.send(());
            }
        }
        queue = match queue.entries.peek() {
            Some(Reverse(first)) => {
                let wait = first.at.saturating_duration_since(now);
                watchdog
                    .changed
                    .wait_timeout(queue, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => watchdog
                .changed
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::time::Duration;

    use super::*;

    /// Deadlines come in any order and are told in theirs, on time, with
    /// no `tokio::time` involved.
    #[tokio::test]
    async fn deadlines_are_told_in_order_without_the_runtime_timer() {
        let start = Instant::now();
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut waits = Vec::new();
        for (label, millis) in [("c", 60u64), ("a", 20), ("b", 40)] {
            let order = order.clone();
            waits.push(async move {
                at(start + Duration::from_millis(millis)).await;
                order
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(label);
            });
        }
        futures_util::future::join_all(waits).await;
        assert!(start.elapsed() >= Duration::from_millis(60));
        assert_eq!(
            *order.lock().unwrap_or_else(PoisonError::into_inner),
            ["a", "b", "c"]
        );
    }

    /// Deadlines whose waiters left are let go, not kept until they come.
    #[tokio::test]
    async fn abandoned_deadlines_are_pruned() {
        let far = Instant::now() + Duration::from_secs(3600);
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        for _ in 0..5000 {
            let mut wait = std::pin::pin!(at(far));
            // Polled once (registered), then dropped.
            let _ = wait.as_mut().poll(&mut context);
        }
        assert!(
            lock(&WATCHDOG).entries.len() <= 2100,
            "{}",
            lock(&WATCHDOG).entries.len()
        );
    }
}
