use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use super::*;
use crate::envelope::JsonText;

/// Erases `future` as a catalog entry's code does.
fn boxed<'a>(future: impl Future<Output = RunResult> + Send + 'a) -> RunFuture<'a> {
    Box::pin(async move { future.await.map(Produced::from) })
}

/// The JSON a run produced.
fn text(result: RunOutput) -> Option<String> {
    result.ok().map(|produced| produced.json.into_string())
}

/// Counts its drops; pending on its first poll, ready on the second.
struct Probe<'a> {
    drops: &'a AtomicUsize,
    polled: bool,
    ballast: [u8; 8],
}

impl Future for Probe<'_> {
    type Output = RunResult;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RunResult> {
        if self.polled {
            let text = JsonText::from_serialize(&self.ballast[0]);
            Poll::Ready(text.map_err(|e| RunFailure::Tool(ToolError::internal(e))))
        } else {
            self.polled = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn futures_run_and_are_dropped_once() {
    let drops = AtomicUsize::new(0);
    let future = boxed(Probe {
        drops: &drops,
        polled: false,
        ballast: [7; 8],
    });
    let result = future.await;
    assert_eq!(text(result).as_deref(), Some("7"));
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // Dropped while pending, after the first poll.
    let future = boxed(Probe {
        drops: &drops,
        polled: false,
        ballast: [0; 8],
    });
    {
        let mut future = Box::pin(future);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(future.as_mut().poll(&mut cx).is_pending());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

/// A body that borrows its own local across an `.await`, and writes
/// through the borrow after: sound only if the future never moves.
#[tokio::test]
async fn a_future_that_borrows_itself_across_an_await_runs() {
    let future = boxed(async {
        let mut local = [1u8; 8];
        let first: &mut u8 = &mut local[0];
        tokio::task::yield_now().await;
        *first = first.wrapping_add(1);
        JsonText::from_serialize(&local.iter().map(|&b| u32::from(b)).sum::<u32>())
            .map_err(|e| RunFailure::Tool(ToolError::internal(e)))
    });
    let result = future.await;
    assert_eq!(text(result).as_deref(), Some("9"));
}

#[tokio::test]
async fn large_futures_run() {
    let big = [1u8; 512];
    let future = boxed(async move {
        tokio::task::yield_now().await;
        JsonText::from_serialize(&big.iter().map(|&b| u32::from(b)).sum::<u32>())
            .map_err(|e| RunFailure::Tool(ToolError::internal(e)))
    });
    let result = future.await;
    assert_eq!(text(result).as_deref(), Some("512"));
}
