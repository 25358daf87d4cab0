//! Following one conversation's background run ([`DurableAgent::watch`]):
//! the events of each run this process drives in the background are kept
//! per conversation, so that a watcher that comes after the run started
//! (typically right after [`DurableAgent::resolve`] returned) still sees
//! it from its first event, and nobody filters a global channel.
//!
//! Bounded twice: a run keeps its last [`WATCH_BUFFER`] events (a watcher
//! that falls further behind skips the oldest it missed, counted by
//! [`ConversationWatch::skipped`]; the final `Done` is never skipped, being
//! the newest), and the finished runs of at most [`WATCH_FINISHED_RUNS`]
//! conversations are kept for late watchers.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;
use futures_util::stream::BoxStream;
use tokio::sync::Notify;

use super::DurableAgent;
use crate::agent::AgentEvent;

/// How many events of one run are kept for its watchers.
pub const WATCH_BUFFER: usize = 1024;
/// How many conversations' finished runs are kept for watchers that come
/// after the run ended.
pub const WATCH_FINISHED_RUNS: usize = 256;

/// The runs of every conversation this agent drives in the background.
pub(crate) struct Feeds {
    state: Mutex<FeedsState>,
    /// Events kept per run ([`WATCH_BUFFER`] unless set).
    buffer: usize,
    /// Finished runs kept ([`WATCH_FINISHED_RUNS`] unless set).
    finished_runs: usize,
}

impl Default for Feeds {
    fn default() -> Self {
        Feeds::new(WATCH_BUFFER, WATCH_FINISHED_RUNS)
    }
}

#[derive(Default)]
struct FeedsState {
    feeds: HashMap<String, Arc<Feed>>,
    /// Feeds of finished runs, oldest first, to let go of past
    /// [`WATCH_FINISHED_RUNS`] (a feed replaced since is skipped).
    finished: VecDeque<(String, Arc<Feed>)>,
}

/// The events of one run (or of the next one, before it starts).
#[derive(Default)]
struct Feed {
    state: Mutex<FeedState>,
    changed: Notify,
}

#[derive(Default)]
struct FeedState {
    /// The position in the run of `events[0]`.
    first: u64,
    events: VecDeque<AgentEvent>,
    started: bool,
    finished: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Feeds {
    /// Feeds keeping `buffer` events per run and the finished runs of
    /// `finished_runs` conversations.
    pub(crate) fn new(buffer: usize, finished_runs: usize) -> Self {
        Feeds {
            state: Mutex::default(),
            buffer: buffer.max(1),
            finished_runs: finished_runs.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FeedsState> {
        lock(&self.state)
    }

    /// The feed a watcher of `conversation_id` follows: the run going on,
    /// the one expected next, or the last one if it ended and nothing was
    /// resolved since.
    fn for_watcher(&self, conversation_id: &str) -> Arc<Feed> {
        self.lock()
            .feeds
            .entry(conversation_id.to_owned())
            .or_default()
            .clone()
    }

    /// A resolution of `conversation_id` was recorded: a run that ended
    /// before it is over for watchers, who wait for the next. Its feed is
    /// let go rather than replaced by an empty one: the next run or
    /// watcher makes one, and when neither comes (no run follows in this
    /// process) nothing is left behind.
    pub(crate) fn expect_run(&self, conversation_id: &str) {
        let mut state = self.lock();
        if state
            .feeds
            .get(conversation_id)
            .is_some_and(|feed| lock(&feed.state).finished)
        {
            state.feeds.remove(conversation_id);
        }
    }

    /// A background run of `conversation_id` starts: its events go to the
    /// watchers waiting for it (or to a fresh feed). Ends when the returned
    /// publisher is dropped.
    pub(crate) fn start(self: &Arc<Self>, conversation_id: &str) -> Publisher {
        let mut state = self.lock();
        let feed = state.feeds.entry(conversation_id.to_owned()).or_default();
        let waiting = {
            let mut feed_state = lock(&feed.state);
            let waiting = !feed_state.started;
            feed_state.started = true;
            waiting
        };
        if !waiting {
            let fresh = Feed::default();
            lock(&fresh.state).started = true;
            *feed = Arc::new(fresh);
        }
        Publisher {
            feeds: self.clone(),
            conversation_id: conversation_id.to_owned(),
            feed: feed.clone(),
        }
    }

    /// A watcher of a feed went away: a feed nobody runs nor watches is
    /// let go.
    fn watcher_gone(&self, conversation_id: &str, feed: &Arc<Feed>) {
        let mut state = self.lock();
        let unused = state.feeds.get(conversation_id).is_some_and(|kept| {
            // The map's reference and the departing watcher's.
            Arc::ptr_eq(kept, feed) && Arc::strong_count(feed) == 2 && !lock(&feed.state).started
        });
        if unused {
            state.feeds.remove(conversation_id);
        }
    }
}

/// Hands the events of one background run to its watchers; the run is
/// over for them when this is dropped (also when its task panics).
pub(crate) struct Publisher {
    feeds: Arc<Feeds>,
    conversation_id: String,
    feed: Arc<Feed>,
}

impl Publisher {
    pub(crate) fn publish(&self, event: &AgentEvent) {
        {
            let mut state = lock(&self.feed.state);
            if state.events.len() >= self.feeds.buffer {
                state.events.pop_front();
                state.first += 1;
            }
            state.events.push_back(event.clone());
        }
        self.feed.changed.notify_waiters();
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        lock(&self.feed.state).finished = true;
        self.feed.changed.notify_waiters();
        let mut state = self.feeds.lock();
        state
            .finished
            .push_back((self.conversation_id.clone(), self.feed.clone()));
        while state.finished.len() > self.feeds.finished_runs {
            let Some((conversation_id, feed)) = state.finished.pop_front() else {
                break;
            };
            if state
                .feeds
                .get(&conversation_id)
                .is_some_and(|kept| Arc::ptr_eq(kept, &feed))
            {
                state.feeds.remove(&conversation_id);
            }
        }
    }
}

/// The events of one conversation's background run, from its first event
/// to its `Done` (see [`DurableAgent::watch`]).
#[must_use = "a stream does nothing unless polled"]
pub struct ConversationWatch {
    events: BoxStream<'static, AgentEvent>,
    skipped: Arc<AtomicU64>,
}

impl ConversationWatch {
    /// How many events this watcher skipped so far because it fell more
    /// than [`WATCH_BUFFER`] events behind the run (the oldest of those it
    /// had not read). The store has the run's outcome whatever was
    /// skipped: [`DurableAgent::conversation`].
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for ConversationWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationWatch")
            .field("skipped", &self.skipped())
            .finish_non_exhaustive()
    }
}

impl Stream for ConversationWatch {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// A watcher's place in its feed; lets the feed go when it is dropped.
struct Cursor {
    feeds: Arc<Feeds>,
    conversation_id: String,
    feed: Arc<Feed>,
    next: u64,
    skipped: Arc<AtomicU64>,
}

impl Drop for Cursor {
    fn drop(&mut self) {
        self.feeds.watcher_gone(&self.conversation_id, &self.feed);
    }
}

impl DurableAgent {
    /// The events of `conversation_id`'s background run, as
    /// [`DurableAgent::send`] gives those of the run it starts: the run
    /// going on (from its first event, also when it started before this
    /// call), or else the next one, up to and including its `Done`, where
    /// the stream ends. A run is in the background when
    /// [`DurableAgent::resolve`], a deadline or a revival resumed it.
    ///
    /// Right after `resolve` returned, that is the run the resolution
    /// resumes, or the one that starts once the conversation's other waits
    /// are resolved; when the last run ended and nothing was resolved
    /// since, it is that run again (a watcher that comes late still sees
    /// how it ended).
    ///
    /// Only runs of this process are seen: with
    /// [`DurableAgentBuilder::resume_on_resolve`](super::DurableAgentBuilder::resume_on_resolve)
    /// off, or once another process took the conversation over, wait with
    /// a timeout, or read the store. A watcher that falls more than
    /// [`WATCH_BUFFER`] events behind skips the oldest it missed
    /// ([`ConversationWatch::skipped`] counts them); never the `Done`.
    pub fn watch(&self, conversation_id: &str) -> ConversationWatch {
        follow(self.inner.feeds.clone(), conversation_id)
    }
}

/// A watcher of `conversation_id`'s feed in `feeds`.
fn follow(feeds: Arc<Feeds>, conversation_id: &str) -> ConversationWatch {
    {
        let feed = feeds.for_watcher(conversation_id);
        let skipped = Arc::new(AtomicU64::new(0));
        let cursor = Cursor {
            feeds,
            conversation_id: conversation_id.to_owned(),
            feed,
            next: 0,
            skipped: skipped.clone(),
        };
        let events = futures_util::stream::unfold(cursor, |mut cursor| async move {
            let feed = cursor.feed.clone();
            loop {
                // Registered before the look, so that an event published
                // between the look and the wait is not missed.
                let changed = feed.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                {
                    let state = lock(&feed.state);
                    if cursor.next < state.first {
                        cursor
                            .skipped
                            .fetch_add(state.first - cursor.next, Ordering::Relaxed);
                        cursor.next = state.first;
                    }
                    let index = usize::try_from(cursor.next - state.first).unwrap_or(usize::MAX);
                    if let Some(event) = state.events.get(index) {
                        let event = event.clone();
                        drop(state);
                        cursor.next += 1;
                        return Some((event, cursor));
                    }
                    if state.finished {
                        return None;
                    }
                }
                changed.await;
            }
        });
        ConversationWatch {
            events: Box::pin(events),
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    fn text(event: &AgentEvent) -> &str {
        match event {
            AgentEvent::TextDelta(text) => text,
            other => panic!("not a text delta: {other:?}"),
        }
    }

    /// The limits are knobs (`DurableAgentBuilder::watch_limits`): a
    /// smaller buffer keeps fewer events, fewer finished runs fewer feeds.
    #[tokio::test]
    async fn smaller_watch_limits_keep_less() {
        let feeds = Arc::new(Feeds::new(3, 2));
        for conversation in ["a", "b", "c"] {
            let publisher = feeds.start(conversation);
            for index in 0..10 {
                publisher.publish(&AgentEvent::TextDelta(format!("e{index}")));
            }
        }
        assert_eq!(
            feeds.lock().feeds.len(),
            2,
            "only the last two runs are kept"
        );
        let late = follow(feeds.clone(), "c");
        let kept: Vec<AgentEvent> = late.collect().await;
        assert_eq!(
            kept.iter().map(text).collect::<Vec<_>>(),
            ["e7", "e8", "e9"]
        );
    }

    /// A watcher that comes late replays the run from its first kept
    /// event; one that falls behind by more than the buffer skips the
    /// oldest it missed, counts them, and still gets the last event.
    #[tokio::test]
    async fn a_watcher_behind_by_more_than_the_buffer_skips_the_oldest_and_counts_them() {
        let feeds = Arc::new(Feeds::default());
        let mut early = follow(feeds.clone(), "c");
        let publisher = feeds.start("c");
        publisher.publish(&AgentEvent::TextDelta("first".into()));
        assert_eq!(early.next().await.as_ref().map(text), Some("first"));
        for index in 0..WATCH_BUFFER + 5 {
            publisher.publish(&AgentEvent::TextDelta(format!("e{index}")));
        }
        drop(publisher);
        let rest: Vec<AgentEvent> = early.by_ref().collect().await;
        assert_eq!(rest.len(), WATCH_BUFFER);
        assert_eq!(early.skipped(), 5);
        assert_eq!(text(&rest[0]), "e5");
        assert_eq!(
            rest.last().map(text),
            Some(format!("e{}", WATCH_BUFFER + 4).as_str())
        );
        // Late: the kept events of the run that ended, then the end.
        let late = follow(feeds.clone(), "c");
        assert_eq!(late.collect::<Vec<_>>().await.len(), WATCH_BUFFER);
    }

    /// A watcher waiting for a run gets it when it starts; a resolution
    /// after a run ended makes watchers wait for the next one.
    #[tokio::test]
    async fn a_resolution_after_a_run_ended_makes_watchers_wait_for_the_next() {
        let feeds = Arc::new(Feeds::default());
        let waiting = tokio::spawn(follow(feeds.clone(), "c").collect::<Vec<_>>());
        tokio::task::yield_now().await;
        let publisher = feeds.start("c");
        publisher.publish(&AgentEvent::TextDelta("one".into()));
        drop(publisher);
        let seen = waiting.await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen.iter().map(text).collect::<Vec<_>>(), ["one"]);

        feeds.expect_run("c");
        let mut next = follow(feeds.clone(), "c");
        let nothing = tokio::time::timeout(std::time::Duration::from_millis(50), next.next()).await;
        assert!(
            nothing.is_err(),
            "the ended run is not shown again: {nothing:?}"
        );
        let publisher = feeds.start("c");
        publisher.publish(&AgentEvent::TextDelta("two".into()));
        drop(publisher);
        let seen: Vec<AgentEvent> = next.collect().await;
        assert_eq!(seen.iter().map(text).collect::<Vec<_>>(), ["two"]);
    }

    /// A resolution after a run ended, with no run following in this
    /// process (`resume_on_resolve` off, other waits left, another process
    /// resuming) and nobody watching, leaves nothing behind once the
    /// finished runs move on: a process resolving millions of
    /// conversations does not keep one feed for each.
    #[tokio::test]
    async fn a_resolution_that_no_run_follows_leaves_no_feed_behind() {
        let feeds = Arc::new(Feeds::default());
        drop(feeds.start("resolved"));
        feeds.expect_run("resolved");
        for index in 0..WATCH_FINISHED_RUNS {
            drop(feeds.start(&format!("c{index}")));
        }
        let state = feeds.lock();
        assert!(
            !state.feeds.contains_key("resolved"),
            "a feed nobody runs nor watches is kept"
        );
        assert_eq!(state.feeds.len(), WATCH_FINISHED_RUNS);
    }

    /// Memory is bounded: a watcher of a conversation that never runs
    /// leaves nothing behind, and only the last finished runs are kept.
    #[tokio::test]
    async fn feeds_nobody_needs_are_let_go() {
        let feeds = Arc::new(Feeds::default());
        drop(follow(feeds.clone(), "never"));
        assert!(feeds.lock().feeds.is_empty());
        // Also one that waited a while.
        let mut waited = follow(feeds.clone(), "never");
        let nothing =
            tokio::time::timeout(std::time::Duration::from_millis(20), waited.next()).await;
        assert!(nothing.is_err());
        drop(waited);
        assert!(feeds.lock().feeds.is_empty());
        for index in 0..WATCH_FINISHED_RUNS + 3 {
            let publisher = feeds.start(&format!("c{index}"));
            publisher.publish(&AgentEvent::TextDelta("x".into()));
        }
        let state = feeds.lock();
        assert_eq!(state.feeds.len(), WATCH_FINISHED_RUNS);
        assert!(
            !state.feeds.contains_key("c0"),
            "the oldest finished run is let go"
        );
        assert!(
            state
                .feeds
                .contains_key(&format!("c{}", WATCH_FINISHED_RUNS + 2))
        );
    }
}
