//! The agent loop's [`LiveSink`]: what running tools report, handed to the
//! loop to emit as events while the calls run.
//!
//! Partial results go through an unbounded channel: the tool never waits,
//! and none is lost. Progress is coalesced per call: a report replaces the
//! one the loop has not emitted yet, so a tool that reports ten thousand
//! times into a slow reader costs a slot, not a queue, and the reader sees
//! the latest.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use crate::live::{LiveSink, ProgressUpdate};

/// What a tool reported, for the loop to emit.
pub(crate) enum Live {
    Progress(String, ProgressUpdate),
    Partial(String, Value),
}

/// The sending half, in every call's context.
struct Sender {
    partials: mpsc::UnboundedSender<(String, Value)>,
    progress: Arc<Pending>,
}

/// Progress not yet emitted: the latest report of each call, in the order
/// the calls first reported.
#[derive(Default)]
struct Pending {
    latest: Mutex<Vec<(String, ProgressUpdate)>>,
    reported: Notify,
}

/// The receiving half, read by the loop.
pub(crate) struct Feed {
    partials: mpsc::UnboundedReceiver<(String, Value)>,
    progress: Arc<Pending>,
    /// Progress taken from `Pending` and not handed out yet.
    taken: std::collections::VecDeque<(String, ProgressUpdate)>,
}

/// A sink for a run's contexts and the feed the loop reads it from.
pub(crate) fn channel() -> (Arc<dyn LiveSink>, Feed) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let progress = Arc::new(Pending::default());
    (
        Arc::new(Sender {
            partials: sender,
            progress: Arc::clone(&progress),
        }),
        Feed {
            partials: receiver,
            progress,
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
        self.progress.reported.notify_one();
    }

    fn partial(&self, tool_call_id: &str, value: Value) {
        // Only fails once the run is over and nobody will read it.
        let _ = self.partials.send((tool_call_id.to_owned(), value));
    }
}

impl Feed {
    /// The next report, waiting for one.
    pub(crate) async fn next(&mut self) -> Live {
        loop {
            if let Some(live) = self.try_next() {
                return live;
            }
            tokio::select! {
                biased;
                Some((id, value)) = self.partials.recv() => return Live::Partial(id, value),
                () = self.progress.reported.notified() => {}
            }
        }
    }

    /// A report already made, if any: partial results first (the reader
    /// must see every one), then progress.
    pub(crate) fn try_next(&mut self) -> Option<Live> {
        if let Ok((id, value)) = self.partials.try_recv() {
            return Some(Live::Partial(id, value));
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

    /// Forgets what is left: reports of calls whose results are out.
    pub(crate) fn clear(&mut self) {
        while self.try_next().is_some() {}
    }
}
