//! A stream written as an async block that emits its items one at a time:
//! what the agent's loop is.
//!
//! The contract of `async-stream`'s `stream!`, as a function over a lock:
//! the body hands an item over and stays suspended until the stream has
//! handed it out, so the body never runs ahead of its reader, and dropping
//! the stream drops the body where it stands. That is why a run's loop is
//! never read by the caller directly: `agent/handle.rs` reads it to its end
//! in a task of its own, and the caller watches that task's events.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;

/// What the body of [`generate`] emits through.
pub(crate) struct Emitter<T> {
    slot: Arc<Mutex<Option<T>>>,
}

impl<T> Emitter<T> {
    /// Hands `item` to the stream's reader; returns when the reader asks for
    /// the next one.
    pub(crate) async fn emit(&self, item: T) {
        *lock(&self.slot) = Some(item);
        // Pending once: the stream sees the item and returns it at once (it
        // does not wait for a wake-up), and polls the body again only when
        // asked for the next item.
        let mut handed_over = false;
        std::future::poll_fn(|_| {
            if handed_over {
                Poll::Ready(())
            } else {
                handed_over = true;
                Poll::Pending
            }
        })
        .await;
    }
}

/// The stream of what `body` emits; it ends when `body` returns.
pub(crate) fn generate<'a, T, F>(
    body: impl FnOnce(Emitter<T>) -> F,
) -> impl Stream<Item = T> + Send + 'a
where
    T: Send + 'a,
    F: Future<Output = ()> + Send + 'a,
{
    let slot = Arc::new(Mutex::new(None));
    let body = body(Emitter {
        slot: Arc::clone(&slot),
    });
    Generated {
        slot,
        body: Some(Box::pin(body)),
    }
}

struct Generated<T, F> {
    slot: Arc<Mutex<Option<T>>>,
    /// `None` once the body has returned.
    body: Option<Pin<Box<F>>>,
}

impl<T, F: Future<Output = ()>> Stream for Generated<T, F> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        let finished = body.as_mut().poll(cx).is_ready();
        if finished {
            this.body = None;
        }
        match lock(&this.slot).take() {
            Some(item) => Poll::Ready(Some(item)),
            None if finished => Poll::Ready(None),
            // The body waits on something else, which wakes this task.
            None => Poll::Pending,
        }
    }
}

/// The slot, whatever a panic elsewhere left it as: it only ever holds an
/// item or nothing.
fn lock<T>(slot: &Mutex<Option<T>>) -> std::sync::MutexGuard<'_, Option<T>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::StreamExt;

    use super::generate;

    #[tokio::test]
    async fn items_come_out_in_order_and_the_stream_ends_with_the_body() {
        let stream = generate(|out| async move {
            for n in 0..3 {
                out.emit(n).await;
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(stream.collect::<Vec<_>>().await, [0, 1, 2]);
    }

    /// The body does not run past an item nobody has asked for yet: work
    /// after an emit happens only when the next item is read.
    #[tokio::test]
    async fn the_body_never_runs_ahead_of_its_reader() {
        let steps = AtomicUsize::new(0);
        let steps = &steps;
        let mut stream = Box::pin(generate(|out| async move {
            steps.fetch_add(1, Ordering::SeqCst);
            out.emit("first").await;
            steps.fetch_add(1, Ordering::SeqCst);
            out.emit("second").await;
            steps.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(stream.next().await, Some("first"));
        assert_eq!(steps.load(Ordering::SeqCst), 1);
        assert_eq!(stream.next().await, Some("second"));
        assert_eq!(steps.load(Ordering::SeqCst), 2);
        assert_eq!(stream.next().await, None);
        assert_eq!(steps.load(Ordering::SeqCst), 3);
        assert_eq!(stream.next().await, None);
    }

    /// Dropping the stream drops the body where it stands.
    #[tokio::test]
    async fn dropping_the_stream_drops_the_body() {
        struct Flag<'a>(&'a AtomicUsize);
        impl Drop for Flag<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dropped = AtomicUsize::new(0);
        let dropped = &dropped;
        let mut stream = Box::pin(generate(|out| async move {
            let _flag = Flag(dropped);
            out.emit(1).await;
            out.emit(2).await;
        }));
        assert_eq!(stream.next().await, Some(1));
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        drop(stream);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }
}
