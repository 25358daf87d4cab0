//! A run in a Tokio task of its own, which its reader only watches:
//! [`Agent::start`] and the [`Run`] it returns.
//!
//! The loop (`run.rs`) advances only while its stream is polled; here a
//! task polls it to the end, whatever the reader does, and hands each
//! event to an outbox the reader drains. So a client that disconnects (its
//! events dropped) stops nothing: the tools of the turn finish, their
//! results go into the transcript, and [`RunHandle::finish`] returns it.
//!
//! The outbox never makes the run wait. A reader that stops reading must
//! not hold up the tools (an approval, a persisted transcript and other
//! readers wait on the run's end), and a bounded queue would do exactly
//! that. What it holds is bounded by the run itself: copies of what the run
//! adds to the transcript (text, calls, results), whose size the builder's
//! limits bound (`max_turn_bytes`, `max_calls_per_turn`, `max_iterations`);
//! progress reports, coalesced to the latest of each call; and the tools'
//! partial results, every one kept as the live feed keeps them. Behind by
//! more than [`COALESCE_AFTER`] events, the pieces of one model turn's
//! text, and those of each call's arguments, are joined into the event of
//! their kind still queued (even when the model interleaves them: text, a
//! byte of a call, text again), so that a model streaming one byte an
//! event costs a slow reader bytes, not events: a turn queues at most its
//! text, and an opening and the arguments of each call. Pieces are joined
//! only within one model turn (any other event ends the joining), and a
//! call's pieces never join those of an earlier call with the same id.
//! `Done` is never dropped, joined or reordered: it is the last event.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use futures_util::{Stream, StreamExt};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;

use super::{Agent, AgentEvent, Input};
use crate::transcript::Conversation;

/// How many events a reader may be behind before adjacent deltas are
/// joined.
pub(crate) const COALESCE_AFTER: usize = 256;

/// A run started with [`Agent::start`]: the events it reports, in order,
/// ending with exactly one [`AgentEvent::Done`], and a handle on the run
/// itself.
///
/// Reading the events is optional and has no effect on the run. Dropping
/// a `Run` (or its [`RunEvents`]) stops nothing: the run goes on to its
/// end in its task, its tools finish, and the events it reports from then
/// on are discarded (an [`AgentEvent::Elicitation`] among them is answered
/// `Cancel`). To stop a run, [`Run::cancel`] it; to keep its transcript,
/// [`Run::finish`] it, or [`Run::split`] it to do both that and read its
/// events.
///
/// The events are never lost to a slow reader, and never make the run
/// wait: a reader far behind sees the latest progress of each call rather
/// than every report, and adjacent pieces of text joined.
pub struct Run {
    events: RunEvents,
    handle: RunHandle,
}

/// The events of a [`Run`], split from its handle ([`Run::split`]): what a
/// server forwards to its client. Dropping it stops nothing.
pub struct RunEvents {
    outbox: Arc<Outbox>,
}

/// The handle of a [`Run`], split from its events ([`Run::split`]): cancel
/// the run, or wait for its end and take its transcript. Dropping it stops
/// nothing either; the run's transcript is then dropped when it ends.
pub struct RunHandle {
    task: JoinHandle<Conversation>,
    cancellation: CancellationToken,
}

/// Why a run's task gave no transcript back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Code the run called panicked: the model adapter, a hook, the
    /// approval policy or `prepare_step` (a tool's panic is only that
    /// call's `internal` error). The message is the panic's, when it had
    /// one.
    #[error("the run panicked: {0}")]
    Panicked(String),
    /// The run's task was dropped before its end: its Tokio runtime shut
    /// down.
    #[error("the run was aborted before its end (its runtime shut down)")]
    Aborted,
}

impl From<JoinError> for RunError {
    fn from(error: JoinError) -> Self {
        match error.try_into_panic() {
            Ok(payload) => RunError::Panicked(panic_message(payload.as_ref())),
            Err(_) => RunError::Aborted,
        }
    }
}

/// A panic's message, when its payload is text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

impl Agent {
    /// Starts a run of the loop on `conversation` with `input`, in a Tokio
    /// task of its own, and returns at once: the run goes on to its end
    /// whether or not anyone reads its events. See [`Run`].
    ///
    /// The task runs in the current span and with the current `tracing`
    /// subscriber, as the run would in place.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, as [`tokio::spawn`] does.
    pub fn start(&self, conversation: Conversation, input: Input) -> Run {
        self.start_with_cancellation(conversation, input, CancellationToken::new())
    }

    /// Like [`Agent::start`], also ending the run when `cancellation` is
    /// cancelled. [`Run::cancel`] cancels this run only: it does not
    /// cancel `cancellation`, which may be shared.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, as [`tokio::spawn`] does.
    pub fn start_with_cancellation(
        &self,
        conversation: Conversation,
        input: Input,
        cancellation: CancellationToken,
    ) -> Run {
        let cancellation = cancellation.child_token();
        let outbox = Arc::new(Outbox::default());
        let agent = self.clone();
        let sink = Arc::clone(&outbox);
        let token = cancellation.clone();
        let body = async move {
            // Closes the outbox however the task ends: returned, panicked,
            // or dropped with its runtime.
            let sink = CloseOnDrop(sink);
            let mut conversation = conversation;
            let mut events = agent.run_loop(&mut conversation, input, token, None);
            while let Some(event) = events.next().await {
                sink.0.push(event);
            }
            drop(events);
            conversation
        };
        let task = tokio::spawn(
            body.instrument(tracing::Span::current())
                .with_current_subscriber(),
        );
        Run {
            events: RunEvents { outbox },
            handle: RunHandle { task, cancellation },
        }
    }
}

impl Run {
    /// Asks the run to stop: it ends with
    /// [`DoneReason::Cancelled`](super::DoneReason::Cancelled) at its next
    /// step, the model's stream ended, the tools told through their
    /// context's cancellation, and every call of the turn answered.
    pub fn cancel(&self) {
        self.handle.cancel();
    }

    /// Waits for the run's end and returns its conversation, holding
    /// everything the run added. The events not read yet are discarded.
    pub async fn finish(self) -> Result<Conversation, RunError> {
        let Run { events, handle } = self;
        drop(events);
        handle.finish().await
    }

    /// The run's events and its handle, to use apart: a server forwards the
    /// events to its client and persists the transcript from the handle,
    /// and a client gone away stops neither.
    pub fn split(self) -> (RunEvents, RunHandle) {
        (self.events, self.handle)
    }
}

impl RunHandle {
    /// Asks the run to stop, as [`Run::cancel`] does.
    pub fn cancel(&self) {
        self.cancellation.cancel();
    }

    /// Whether the run has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits for the run's end and returns its conversation, as
    /// [`Run::finish`] does.
    pub async fn finish(self) -> Result<Conversation, RunError> {
        self.join().await.map_err(RunError::from)
    }

    /// The task's own outcome, whose panic `Agent::run` resumes.
    pub(crate) async fn join(self) -> Result<Conversation, JoinError> {
        self.task.await
    }
}

impl Stream for Run {
    type Item = AgentEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        Pin::new(&mut self.get_mut().events).poll_next(cx)
    }
}

impl Stream for RunEvents {
    type Item = AgentEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.outbox.poll_next(cx)
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        self.outbox.reader_gone();
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("finished", &self.handle.is_finished())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for RunEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunEvents")
            .field("queued", &self.outbox.queue().slots.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

/// Where the run's task leaves its events for the reader.
#[derive(Default)]
struct Outbox {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    slots: VecDeque<Slot>,
    /// The latest progress of each call with a [`Slot::Progress`] queued.
    progress: HashMap<String, AgentEvent>,
    /// The task is over: nothing more comes.
    closed: bool,
    /// The reader went away: nothing more is kept.
    abandoned: bool,
    waker: Option<Waker>,
    /// How many slots the reader took so far: a slot's place in the run
    /// less this is its index in `slots`.
    taken: u64,
    /// The place in the run of the slot each stream of the current model
    /// turn joins into when the reader is behind: the text (`None`) and
    /// each call's arguments (its id).
    joinable: HashMap<Option<String>, u64>,
}

impl Queue {
    /// Queues a piece of the model's text (`None`) or of a call's
    /// arguments: joined into its stream's slot when the reader is behind
    /// and that slot is still queued.
    fn push_delta(&mut self, stream: Option<String>, text: String, behind: bool) {
        if behind
            && let Some(&place) = self.joinable.get(&stream)
            && let Some(index) = place
                .checked_sub(self.taken)
                .and_then(|index| usize::try_from(index).ok())
            && let Some(Slot::Event(
                AgentEvent::TextDelta(queued) | AgentEvent::ToolCallDelta { text: queued, .. },
            )) = self.slots.get_mut(index)
        {
            queued.push_str(&text);
            return;
        }
        let place = self.taken + self.slots.len() as u64;
        let event = match &stream {
            None => AgentEvent::TextDelta(text),
            Some(id) => AgentEvent::ToolCallDelta {
                id: id.clone(),
                text,
            },
        };
        self.slots.push_back(Slot::Event(event));
        self.joinable.insert(stream, place);
    }
}

enum Slot {
    Event(AgentEvent),
    /// The latest progress of this call, kept in `Queue::progress`.
    Progress(String),
}

impl Outbox {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Every change leaves the queue whole: a panic elsewhere does not
        // make it unusable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `event` for the reader; never waits.
    fn push(&self, event: AgentEvent) {
        let mut queue = self.queue();
        if queue.abandoned {
            // Dropped outside the lock: an elicitation's reply answers
            // `Cancel` as it goes.
            drop(queue);
            drop(event);
            return;
        }
        let behind = queue.slots.len() >= COALESCE_AFTER;
        match event {
            AgentEvent::TextDelta(text) => queue.push_delta(None, text, behind),
            AgentEvent::ToolCallDelta { id, text } => queue.push_delta(Some(id), text, behind),
            AgentEvent::ToolProgress { ref id, .. } => {
                queue.joinable.clear();
                let id = id.clone();
                if !queue.progress.contains_key(&id) {
                    queue.slots.push_back(Slot::Progress(id.clone()));
                }
                queue.progress.insert(id, event);
            }
            event => {
                match &event {
                    // A new call of the turn: its pieces start a stream of
                    // their own, even under an id used before.
                    AgentEvent::ToolCallOpened { id, .. } => {
                        queue.joinable.remove(&Some(id.clone()));
                    }
                    // The model's turn is over: nothing joins across.
                    _ => queue.joinable.clear(),
                }
                queue.slots.push_back(Slot::Event(event));
            }
        }
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        let mut queue = self.queue();
        while let Some(slot) = queue.slots.pop_front() {
            queue.taken += 1;
            match slot {
                Slot::Event(event) => return Poll::Ready(Some(event)),
                Slot::Progress(id) => {
                    if let Some(event) = queue.progress.remove(&id) {
                        return Poll::Ready(Some(event));
                    }
                }
            }
        }
        if queue.closed {
            return Poll::Ready(None);
        }
        queue.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The task is over.
    fn close(&self) {
        let mut queue = self.queue();
        queue.closed = true;
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The reader is gone: what is queued is dropped, and nothing more is
    /// kept.
    fn reader_gone(&self) {
        let mut queue = self.queue();
        queue.abandoned = true;
        let slots = std::mem::take(&mut queue.slots);
        let progress = std::mem::take(&mut queue.progress);
        queue.joinable.clear();
        queue.waker = None;
        drop(queue);
        drop((slots, progress));
    }
}

/// Closes the outbox when the task's body ends or is dropped.
struct CloseOnDrop(Arc<Outbox>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Poll, Waker};

    use super::*;

    fn progress(id: &str, done: f64) -> AgentEvent {
        AgentEvent::ToolProgress {
            id: id.to_owned(),
            name: "tool".to_owned(),
            kind: None,
            done,
            total: None,
            message: None,
        }
    }

    fn drain(outbox: &Outbox) -> Vec<AgentEvent> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(event)) = outbox.poll_next(&mut cx) {
            out.push(event);
        }
        out
    }

    /// Progress of a call not read yet is replaced by its latest report,
    /// in the place of the first.
    #[test]
    fn unread_progress_is_coalesced_per_call() {
        let outbox = Outbox::default();
        outbox.push(progress("a", 1.0));
        outbox.push(progress("b", 1.0));
        outbox.push(progress("a", 2.0));
        outbox.push(AgentEvent::TextDelta("x".into()));
        outbox.push(progress("a", 3.0));
        let seen: Vec<(String, f64)> = drain(&outbox)
            .into_iter()
            .filter_map(|event| match event {
                AgentEvent::ToolProgress { id, done, .. } => Some((id, done)),
                _ => None,
            })
            .collect();
        assert_eq!(seen, [("a".to_owned(), 3.0), ("b".to_owned(), 1.0)]);
    }

    /// Deltas are kept one by one until the reader is far behind; then
    /// adjacent ones are joined, and nothing of their text is lost.
    #[test]
    fn a_reader_far_behind_gets_adjacent_deltas_joined() {
        let outbox = Outbox::default();
        let pieces = COALESCE_AFTER * 4;
        for _ in 0..pieces {
            outbox.push(AgentEvent::TextDelta("x".into()));
        }
        assert_eq!(outbox.queue().slots.len(), COALESCE_AFTER);
        let text: String = drain(&outbox)
            .into_iter()
            .filter_map(|event| match event {
                AgentEvent::TextDelta(text) => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(text.len(), pieces);
    }

    /// Far behind, interleaved streams of one turn are joined each into its
    /// own event; a call opened again under an id used before starts a
    /// new one, after its opening; and nothing joins across the turn's end.
    #[test]
    fn a_reader_far_behind_gets_each_stream_of_a_turn_joined() {
        let outbox = Outbox::default();
        for _ in 0..COALESCE_AFTER {
            outbox.push(AgentEvent::TextDelta("t".into()));
        }
        let opened = |id: &str| AgentEvent::ToolCallOpened {
            id: id.to_owned(),
            name: "tool".to_owned(),
            kind: None,
        };
        let delta = |id: &str, text: &str| AgentEvent::ToolCallDelta {
            id: id.to_owned(),
            text: text.to_owned(),
        };
        outbox.push(opened("x"));
        for _ in 0..100 {
            outbox.push(delta("x", "a"));
            outbox.push(AgentEvent::TextDelta("t".into()));
        }
        outbox.push(opened("x"));
        outbox.push(delta("x", "b"));
        outbox.push(delta("x", "b"));
        outbox.push(progress("x", 1.0));
        outbox.push(AgentEvent::TextDelta("next turn".into()));
        let events = drain(&outbox);
        let last = events.len();
        assert!(
            matches!(&events[last - 3], AgentEvent::ToolCallDelta { text, .. } if text == "bb")
        );
        assert!(matches!(
            &events[last - 4],
            AgentEvent::ToolCallOpened { .. }
        ));
        assert!(
            matches!(&events[last - 5], AgentEvent::ToolCallDelta { text, .. } if *text == "a".repeat(100))
        );
        assert!(matches!(&events[last - 1], AgentEvent::TextDelta(text) if text == "next turn"));
        let text: usize = events
            .iter()
            .map(|event| match event {
                AgentEvent::TextDelta(text) => text.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(text, COALESCE_AFTER + 100 + "next turn".len());
        assert_eq!(last, COALESCE_AFTER + 6);
    }

    /// The stream ends once the task closed the outbox and the reader has
    /// read what was left.
    #[test]
    fn the_events_end_after_close_and_what_was_queued() {
        let outbox = Outbox::default();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(outbox.poll_next(&mut cx).is_pending());
        outbox.push(AgentEvent::TextDelta("last".into()));
        outbox.close();
        assert!(matches!(
            outbox.poll_next(&mut cx),
            Poll::Ready(Some(AgentEvent::TextDelta(_)))
        ));
        assert!(matches!(outbox.poll_next(&mut cx), Poll::Ready(None)));
    }

    /// Once the reader is gone, nothing more is kept.
    #[test]
    fn nothing_is_kept_for_a_reader_gone() {
        let outbox = Outbox::default();
        outbox.push(AgentEvent::TextDelta("a".into()));
        outbox.reader_gone();
        outbox.push(AgentEvent::TextDelta("b".into()));
        assert!(outbox.queue().slots.is_empty());
    }
}
