//! The agent loop's [`LiveSink`]: what running tools report, handed to the
//! loop to emit as events while the calls run.
//!
//! Partial results go through an unbounded channel: the tool never waits,
//! and none is lost. Progress is coalesced per call: a report replaces the
//! one the loop has not emitted yet, so a tool that reports ten thousand
//! times into a slow reader costs a slot, not a queue, and the reader sees
//! the latest. Questions to a person (elicitations) go through a channel
//! of their own, every one kept: each holds the reply its call waits on.

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::live::{ElicitationReply, ElicitationRequest, LiveSink, ProgressUpdate};

/// What a tool reported, for the loop to emit.
pub(crate) enum Live {
    Progress(String, ProgressUpdate),
    Partial(String, Value),
    Elicitation(String, ElicitationRequest, ElicitationReply),
}

type Question = (String, ElicitationRequest, ElicitationReply);

/// The sending half, in every call's context.
struct Sender {
    partials: mpsc::UnboundedSender<(String, Value)>,
    questions: mpsc::UnboundedSender<Question>,
    progress: Arc<Pending>,
    /// Wakes the loop when progress is pending; one signal is enough, so a
    /// full channel means the loop is woken already. (A channel rather than
    /// `Notify`: its receiver is polled in place, where a `Notified` future
    /// would have to be pinned.)
    reported: mpsc::Sender<()>,
}

/// Progress not yet emitted: the latest report of each call, in the order
/// the calls first reported.
#[derive(Default)]
struct Pending {
    latest: Mutex<Vec<(String, ProgressUpdate)>>,
}

/// The receiving half, read by the loop.
pub(crate) struct Feed {
    partials: mpsc::UnboundedReceiver<(String, Value)>,
    questions: mpsc::UnboundedReceiver<Question>,
    progress: Arc<Pending>,
    reported: mpsc::Receiver<()>,
    /// Progress taken from `Pending` and not handed out yet.
    taken: std::collections::VecDeque<(String, ProgressUpdate)>,
}

/// A sink for a run's contexts and the feed the loop reads it from.
pub(crate) fn channel() -> (Arc<dyn LiveSink>, Feed) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let (asked, questions) = mpsc::unbounded_channel();
    let (wake, reported) = mpsc::channel(1);
    let progress = Arc::new(Pending::default());
    (
        Arc::new(Sender {
            partials: sender,
            questions: asked,
            progress: Arc::clone(&progress),
            reported: wake,
        }),
        Feed {
            partials: receiver,
            questions,
            progress,
            reported,
            taken: std::collections::VecDeque::new(),
        },
    )
}

impl LiveSink for Sender {
    fn progress(&self, tool_call_id: &str, update: ProgressUpdate) {
        {
            let mut latest = self
                .progress
                .latest
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match latest.iter_mut().find(|(id, _)| id == tool_call_id) {
                Some((_, slot)) => *slot = update,
                None => latest.push((tool_call_id.to_owned(), update)),
            }
        }
        let _ = self.reported.try_send(());
    }

    fn partial(&self, tool_call_id: &str, value: Value) {
        // Only fails once the run is over and nobody will read it.
        let _ = self.partials.send((tool_call_id.to_owned(), value));
    }

    fn elicit(&self, tool_call_id: &str, request: ElicitationRequest, reply: ElicitationReply) {
        // Fails once the run is over: the reply is dropped with the
        // message, and the call reads `Cancel`.
        let _ = self
            .questions
            .send((tool_call_id.to_owned(), request, reply));
    }
}

impl Feed {
    /// The next report, when one is made.
    pub(crate) async fn next(&mut self) -> Live {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// The next report, or pending (woken by the next one).
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Live> {
        loop {
            if let Some(live) = self.try_next() {
                return Poll::Ready(live);
            }
            if let Poll::Ready(Some((id, value))) = self.partials.poll_recv(cx) {
                return Poll::Ready(Live::Partial(id, value));
            }
            if let Poll::Ready(Some((id, request, reply))) = self.questions.poll_recv(cx) {
                return Poll::Ready(Live::Elicitation(id, request, reply));
            }
            // A wake-up may come for progress already taken: look again.
            match self.reported.poll_recv(cx) {
                Poll::Ready(Some(())) => continue,
                _ => return Poll::Pending,
            }
        }
    }

    /// A report already made, if any: partial results first (the reader
    /// must see every one), then questions, then progress.
    pub(crate) fn try_next(&mut self) -> Option<Live> {
        if let Ok((id, value)) = self.partials.try_recv() {
            return Some(Live::Partial(id, value));
        }
        if let Ok((id, request, reply)) = self.questions.try_recv() {
            return Some(Live::Elicitation(id, request, reply));
        }
        if self.taken.is_empty() {
            let mut latest = self
                .progress
                .latest
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.taken.extend(latest.drain(..));
        }
        self.taken
            .pop_front()
            .map(|(id, update)| Live::Progress(id, update))
    }

    /// Forgets what is left: reports of calls whose results are out (a
    /// question left is dropped, so its call, if any still waits, reads
    /// `Cancel`).
    pub(crate) fn clear(&mut self) {
        while self.try_next().is_some() {}
    }
}
