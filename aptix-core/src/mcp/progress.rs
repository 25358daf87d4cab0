//! Progress notifications of one call, kept monotonic.
//!
//! MCP requires the `progress` of a token to increase with every
//! notification. A tool reports as it goes, and the server closes a call
//! the tool reported on with a last report, so one shared record of what
//! was sent decides what may still be sent: a report that would not
//! increase is dropped, and the server's end report is only sent when it
//! moves the progress forward (to the tool's own total when it gave one).
//!
//! A tool reports with `ctx.progress(..)`, like anywhere else: the server
//! plugs a [`LiveSink`] into the call's context ([`McpLive`]) that queues
//! the report for a forwarding task, started on the first report, which
//! sends the notifications in order. The tool never waits for the client's
//! connection: when 256 reports wait already, a new one is dropped.
//!
//! The server sends nothing for a call whose tool reports nothing: rmcp's
//! client puts a progress token on every request, and a notification costs
//! a written message before and after the tool, which measured as half the
//! throughput of a plain call (BENCHMARKS.md, "MCP server").

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::live::{LiveSink, ProgressUpdate};

/// What was sent for the token so far.
#[derive(Debug, Default)]
struct Sent {
    /// The highest progress sent.
    last: Option<f64>,
    /// The last total a report named.
    total: Option<f64>,
}

/// Progress notifications for the current MCP call, when the client asked
/// for progress (the request carries a token). Tools report through
/// `ctx.progress(..)`, which [`McpLive`] forwards here.
///
/// When the tool reported anything, the server sends a final report when
/// it ends, if that increases the progress (the tool's last `total`, else
/// `1 of 1`); so a tool that counts to its own total ends there.
#[derive(Clone)]
pub(crate) struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    /// Held across each send, so that concurrent reports go out in order.
    sent: Arc<tokio::sync::Mutex<Sent>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("token", &self.token.0)
            .finish_non_exhaustive()
    }
}

impl Progress {
    pub(crate) fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Progress {
            peer,
            token,
            sent: Arc::default(),
        }
    }

    /// Sends a progress notification: `total` when known. `progress` must
    /// be higher than every earlier report of this call; a report that is
    /// not, or is not a finite
    /// number, is dropped, since MCP requires progress to increase. A
    /// failure to send is logged, not returned: progress is advisory and
    /// must never fail a call.
    pub(crate) async fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let mut sent = self.sent.lock().await;
        if !progress.is_finite() || sent.last.is_some_and(|last| progress <= last) {
            tracing::debug!(
                progress,
                last = sent.last,
                "progress report dropped: it does not increase"
            );
            return;
        }
        self.send(&mut sent, progress, total, message).await;
    }

    /// The server's report when the call ends: the tool's total (else 1),
    /// as done, when that is more than what was sent; otherwise nothing,
    /// since a lower or equal value would break the order.
    pub(crate) async fn finish(&self) {
        let mut sent = self.sent.lock().await;
        let end = sent.total.filter(|total| total.is_finite()).unwrap_or(1.0);
        // Nothing reported: nothing to close.
        if sent.last.is_none_or(|last| end <= last) {
            return;
        }
        self.send(&mut sent, end, Some(end), Some("finished".to_owned()))
            .await;
    }

    async fn send(
        &self,
        sent: &mut Sent,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        let mut param = ProgressNotificationParam::new(self.token.clone(), progress);
        param.total = total;
        param.message = message;
        sent.last = Some(progress);
        if total.is_some() {
            sent.total = total;
        }
        if let Err(error) = self.peer.notify_progress(param).await {
            tracing::debug!(%error, "could not send a progress notification");
        }
    }
}

/// How many reports may wait for the connection before new ones are
/// dropped: a tool never waits on a slow client, and memory stays bounded.
const QUEUED_REPORTS: usize = 256;

/// The call's [`LiveSink`] on the MCP server: progress becomes
/// `notifications/progress`, in order; partial results have no MCP form
/// and are dropped (the final result carries everything).
pub(crate) struct McpLive {
    progress: Progress,
    queue: mpsc::Sender<ProgressUpdate>,
    /// Taken by the forwarding task when the first report starts it.
    waiting: Mutex<Option<mpsc::Receiver<ProgressUpdate>>>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
    closing: CancellationToken,
    /// The runtime the call runs on: a tool may report from a thread of
    /// its own.
    runtime: tokio::runtime::Handle,
}

impl McpLive {
    pub(crate) fn new(progress: Progress) -> Option<Arc<McpLive>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (queue, waiting) = mpsc::channel(QUEUED_REPORTS);
        Some(Arc::new(McpLive {
            progress,
            queue,
            waiting: Mutex::new(Some(waiting)),
            forwarder: Mutex::new(None),
            closing: CancellationToken::new(),
            runtime,
        }))
    }

    /// Sends what is still queued, then the server's end report. Reports
    /// made after this are dropped.
    pub(crate) async fn finish(&self) {
        self.closing.cancel();
        let forwarder = lock(&self.forwarder).take();
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
        self.progress.finish().await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveSink for McpLive {
    fn progress(&self, _tool_call_id: &str, update: ProgressUpdate) {
        // Under the lock `finish` takes after it cancels: a report either
        // comes before `finish` (and the forwarder it starts is awaited
        // there) or sees the call closed; none goes out after the response.
        let mut forwarder = lock(&self.forwarder);
        if self.closing.is_cancelled() {
            return;
        }
        if self.queue.try_send(update).is_err() {
            tracing::debug!(
                "progress report dropped: the client reads slower than the tool reports"
            );
            return;
        }
        let Some(mut queued) = lock(&self.waiting).take() else {
            return;
        };
        let progress = self.progress.clone();
        let closing = self.closing.clone();
        *forwarder = Some(self.runtime.spawn(async move {
            // Until the call ends; then what is still queued goes out.
            while let Some(Some(update)) = closing.run_until_cancelled(queued.recv()).await {
                progress
                    .report(update.done, update.total, update.message)
                    .await;
            }
            while let Ok(update) = queued.try_recv() {
                progress
                    .report(update.done, update.total, update.message)
                    .await;
            }
        }));
    }

    fn partial(&self, _tool_call_id: &str, _value: Value) {}
}
