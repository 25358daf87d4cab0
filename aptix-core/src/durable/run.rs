//! Running a stored conversation: claim it, settle the ledger into
//! results, run model turns while nothing is pending, save, let go; and
//! resuming it in the background once its waits are resolved.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::checkpoint::Checkpoint;
use super::lease::{ActiveRun, now_ms};
use super::ledger::{Ledger, Settlement, close_in_background, has_unanswered_calls};
use super::{ConversationEvent, DurableAgent, DurableError, Revival};
use crate::agent::{
    AgentEvent, AgentStream, CallResult, DoneReason, Input, Journal, JournalFuture, RunSummary,
};
use crate::context::ToolContext;
use crate::executor::ToolCall;
use crate::meta::{AwaitReason, Gate};
use crate::model::Usage;
use crate::store::{ConversationStatus, StoreError, StoredConversation};
use crate::transcript::{Conversation, Message};

/// What a durable run adds to the agent's loop: its calls recorded in the
/// ledger, its transcript saved under the run's lease.
struct RunJournal {
    ledger: Ledger,
    checkpoint: Checkpoint,
}

impl Journal for RunJournal {
    /// Parks the transcript: the run's next ledger write saves it in the
    /// same batch (see [`Checkpoint`]).
    fn checkpoint<'a>(
        &'a self,
        conversation: &'a Conversation,
    ) -> JournalFuture<'a, Result<(), String>> {
        Box::pin(self.checkpoint.park(conversation))
    }

    fn execute<'a>(
        &'a self,
        call: &'a ToolCall,
        requested: &'a str,
        context: &'a ToolContext,
        gate: Gate,
    ) -> JournalFuture<'a, Result<CallResult, String>> {
        Box::pin(async move {
            self.ledger
                .execute_recorded(call, requested, context, &self.checkpoint, gate)
                .await
                .map_err(|error| error.to_string())
        })
    }

    fn abandoned(&self, conversation_id: &str, tool_call_id: &str, envelope: String) {
        close_in_background(
            self.ledger.store().clone(),
            conversation_id.to_owned(),
            tool_call_id.to_owned(),
            Some(envelope),
        );
    }

    fn withdraw<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        reason: AwaitReason,
    ) -> JournalFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.ledger
                .withdraw(conversation_id, tool_call_id, reason)
                .await
                .map_err(|error| error.to_string())
        })
    }
}

impl DurableAgent {
    /// Resumes the conversation in a background task if nothing of it is
    /// pending and nobody holds it; what a resolution or an expiry triggers.
    ///
    /// When another process holds it, this waits for that process's lease
    /// to run out and tries again: a live holder renews its lease and picks
    /// resolutions up itself when it saves, but a dead one never will.
    pub(crate) fn resume_in_background(&self, conversation_id: &str) {
        self.resume_in_background_after(conversation_id, 0);
    }

    /// [`DurableAgent::resume_in_background`], counting `failures` store errors
    /// already met on the way (a resumed run the store stopped retries
    /// with the same budget).
    fn resume_in_background_after(&self, conversation_id: &str, failures: u32) {
        let agent = self.clone();
        let conversation_id = conversation_id.to_owned();
        tokio::spawn(async move {
            let inner = &*agent.inner;
            let mut failures = failures;
            loop {
                // Subscribed before trying, so that the end of a run of this
                // process between the try and the wait is not missed.
                let mut released = inner.runs.ends();
                let error = match agent.resume_if_ready(&conversation_id, failures).await {
                    Ok(Revival::Busy) => None,
                    Ok(_) => return,
                    Err(error) => Some(error),
                };
                if let Some(error) = error {
                    // A sweep picks the conversation up later if the store
                    // stays down.
                    failures += 1;
                    if failures > RESUME_RETRIES {
                        tracing::warn!(%conversation_id, %error, "could not resume the conversation; a sweep will");
                        return;
                    }
                    tracing::debug!(%conversation_id, %error, "could not resume the conversation; retrying");
                    tokio::time::sleep(Duration::from_millis(50 << failures)).await;
                    continue;
                }
                if inner.runs.is_active(&conversation_id) {
                    // A run of this process holds it. It may be past the
                    // point where it looks for resolutions: try again when
                    // it ends (the lease bounds the wait, in case the end
                    // was missed).
                    let _ = tokio::time::timeout(inner.lease.duration(), released.changed()).await;
                    continue;
                }
                let held = match inner.store.load_conversation(&conversation_id).await {
                    Ok(Some(stored)) => stored,
                    Ok(None) => return,
                    Err(error) => {
                        tracing::warn!(%conversation_id, %error, "could not resume the conversation; a sweep will");
                        return;
                    }
                };
                if held.status != ConversationStatus::Running {
                    // Claimed and released in between: try again.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let wait = held.lease_until.saturating_sub(now_ms()).max(0) + 20;
                tracing::debug!(%conversation_id, wait_ms = wait, "held by another process; retrying when its lease runs out");
                tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(20))).await;
            }
        });
    }

    /// Resumes the conversation now if nothing is pending and nobody holds
    /// it. A resumed run the store stops is resumed again (with backoff,
    /// `failures` counting the store errors met so far, at most
    /// `RESUME_RETRIES`), so a transient store error does not leave the
    /// conversation to the next sweep.
    pub(super) async fn resume_if_ready(
        &self,
        conversation_id: &str,
        failures: u32,
    ) -> Result<Revival, DurableError> {
        let inner = &*self.inner;
        match inner.store.load_conversation(conversation_id).await? {
            // Finished meanwhile (by the run that held it): nothing to do.
            Some(stored) if stored.status == ConversationStatus::Idle => return Ok(Revival::Idle),
            None => return Ok(Revival::Idle),
            Some(_) => {}
        }
        let pending = inner.ledger.pending_count(conversation_id).await?;
        if pending > 0 {
            return Ok(Revival::Waiting { pending });
        }
        let Some(run) = inner.runs.begin(conversation_id) else {
            return Ok(Revival::Busy);
        };
        let Some(claimed) = inner.lease.claim(conversation_id).await? else {
            return Ok(Revival::Busy);
        };
        self.run_claimed_in_background_after(claimed.conversation, run, failures);
        Ok(Revival::Resumed)
    }

    /// Runs a conversation this process has just claimed in a background
    /// task, its events going to the subscribers.
    pub(super) fn run_claimed_in_background(&self, conversation: Conversation, run: ActiveRun) {
        self.run_claimed_in_background_after(conversation, run, 0);
    }

    /// [`DurableAgent::run_claimed_in_background`]. A run the store stops is
    /// resumed again (with backoff, `failures` counting the store errors
    /// met so far, at most `RESUME_RETRIES`).
    fn run_claimed_in_background_after(
        &self,
        conversation: Conversation,
        run: ActiveRun,
        failures: u32,
    ) {
        let conversation_id = conversation.id.clone();
        let mut run = self.clone().drive(conversation, Input::Continue, run);
        let events = self.inner.events.clone();
        // Started before this returns: a watcher that comes right after
        // (e.g. after `resolve` returned) follows this run.
        let feed = self.inner.feeds.start(&conversation_id);
        let agent = self.clone();
        tokio::spawn(async move {
            let mut store_failed = false;
            while let Some(event) = run.next().await {
                store_failed = matches!(
                    event,
                    AgentEvent::Done {
                        reason: DoneReason::StoreFailed(_),
                        ..
                    }
                );
                // A background run has nobody to answer a call's question,
                // and the broadcast channel keeps a copy of every event long
                // after its subscribers read it: a reply sent along would
                // stay open, and the call would wait out its time limit.
                // Subscribers see the question, answered `Cancel`.
                if let AgentEvent::Elicitation { reply, .. } = &event {
                    reply.answer(crate::live::ElicitationAnswer::Cancel);
                }
                feed.publish(&event);
                // Nobody listening is fine: the store has everything.
                let _ = events.send(ConversationEvent {
                    conversation_id: conversation_id.clone(),
                    event,
                });
            }
            drop(run);
            drop(feed);
            if store_failed {
                let failures = failures + 1;
                if failures > RESUME_RETRIES {
                    tracing::warn!(%conversation_id, "a resumed run stopped on store errors again; a sweep will continue it");
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50 << failures)).await;
                agent.resume_in_background_after(&conversation_id, failures);
            }
        });
    }

    /// The run of a claimed conversation: settle the ledger into results,
    /// run model turns while nothing is pending, save, release.
    pub(super) fn drive(
        self,
        mut conversation: Conversation,
        input: Input,
        active: ActiveRun,
    ) -> AgentStream<'static> {
        let span = tracing::info_span!("durable_run", conversation_id = %conversation.id);
        let stream = crate::generator::generate(move |out| async move {
            // Held until the run is over: released (with the heartbeat)
            // before the final `Done` is handed out, so that a resolution
            // made by whoever reads it finds the conversation free.
            let mut active = Some(active);
            let durable = self;
            let inner = &*durable.inner;
            let lease = &inner.lease;
            let mut heartbeat = Some(lease.heartbeat(&conversation.id));
            let cancellation = CancellationToken::new();
            let context = inner.agent.context_for(&conversation, &cancellation);
            let mut usage = Usage::default();
            let started = std::time::Instant::now();
            let mut summary = RunSummary::default();
            // Added once the last turn's calls are settled: their results
            // belong right after their calls, before anything new.
            let mut new_input = match input {
                Input::User(text) => Some(text),
                _ => None,
            };
            loop {
                let settled = durable.settle(&mut conversation, &context).await;
                let (events, waiting, halt) = match settled {
                    Ok(settled) => (settled.events, settled.waiting, settled.halt),
                    Err(error) => {
                        drop(heartbeat.take());
                        lease.give_up(&conversation.id).await;
                        drop(active.take());
                        out.emit(AgentEvent::Done {
                            reason: DoneReason::StoreFailed(error.to_string()),
                            usage,
                            summary: summary.finished(started),
                        })
                        .await;
                        return;
                    }
                };
                for event in events {
                    out.emit(event).await;
                }
                // Only new input must be saved before the model turn: the
                // results settling added are the ledger's, which holds them
                // durably already (a crash during the turn settles them
                // again from there).
                let mut unsaved_input = false;
                if let Some(text) = new_input.take() {
                    if waiting.is_empty() {
                        conversation.messages.push(Message::user(text));
                        unsaved_input = true;
                    } else {
                        tracing::info!(
                            waiting = waiting.len(),
                            "settling the last turn left calls waiting; the new input was not added"
                        );
                    }
                }
                let reason = if !waiting.is_empty() {
                    DoneReason::Suspended(waiting)
                } else if let Some((by, message)) = halt.filter(|_| !unsaved_input) {
                    // A hook halted a call settling ran or read back: the
                    // run ends as the stopped run would have. New input
                    // starts a run of its own, which the model answers:
                    // the halt ended the turn before it.
                    tracing::warn!(hook = %by, "a hook halted the run");
                    DoneReason::Halted { by, message }
                } else if !needs_model_turn(&conversation) {
                    DoneReason::Completed
                } else {
                    let saved = if unsaved_input {
                        lease.save(&conversation, ConversationStatus::Running).await
                    } else {
                        Ok(())
                    };
                    if let Err(error) = saved {
                        drop(heartbeat.take());
                        lease.give_up(&conversation.id).await;
                        drop(active.take());
                        out.emit(AgentEvent::Done {
                            reason: DoneReason::StoreFailed(error.to_string()),
                            usage,
                            summary: summary.finished(started),
                        })
                        .await;
                        return;
                    }
                    let mut reason = DoneReason::MaxIterations;
                    {
                        // One per pass: what it parks (and a failure it
                        // met) ends with the pass, whose final save below
                        // holds everything a parked transcript would.
                        let journal: Arc<dyn Journal> = Arc::new(RunJournal {
                            ledger: inner.ledger.clone(),
                            checkpoint: Checkpoint::new(lease.clone()),
                        });
                        let mut run = inner.agent.run_loop(
                            &mut conversation,
                            Input::Continue,
                            cancellation.clone(),
                            Some(journal),
                        );
                        while let Some(event) = run.next().await {
                            match event {
                                AgentEvent::Done {
                                    reason: done,
                                    usage: used,
                                    summary: pass,
                                } => {
                                    reason = done;
                                    usage += used;
                                    summary.absorb(pass);
                                }
                                other => out.emit(other).await,
                            }
                        }
                    }
                    reason
                };
                // A run the store stopped is not over, nor is one that left
                // calls of its last turn unanswered (the save right after the
                // model's turn failed, before any of them was recorded): it is
                // saved running with its lease given up, so that
                // `ensure_started`, a sweep or the next `send` settles those
                // calls and goes on. Saved idle, its calls would never get a
                // result.
                let status = match &reason {
                    DoneReason::Suspended(_) => ConversationStatus::Suspended,
                    DoneReason::StoreFailed(_) => ConversationStatus::Running,
                    _ if has_unanswered_calls(&conversation) => ConversationStatus::Running,
                    _ => ConversationStatus::Idle,
                };
                let lease_until = if status == ConversationStatus::Running {
                    now_ms()
                } else {
                    lease.until()
                };
                if let Err(error) = lease.save_until(&conversation, status, lease_until).await {
                    drop(heartbeat.take());
                    lease.give_up(&conversation.id).await;
                    drop(active.take());
                    out.emit(AgentEvent::Done {
                        reason: DoneReason::StoreFailed(error.to_string()),
                        usage,
                        summary: summary.finished(started),
                    })
                    .await;
                    return;
                }
                if status == ConversationStatus::Suspended {
                    // A resolution that landed while this run held the
                    // conversation could not resume it; this run must.
                    match durable.reclaim_if_settled(&conversation.id).await {
                        Ok(Some(stored)) => {
                            conversation = stored.conversation;
                            continue;
                        }
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(%error, "could not check for resolutions that arrived during the run")
                        }
                    }
                }
                drop(heartbeat.take());
                drop(active.take());
                out.emit(AgentEvent::Done {
                    reason,
                    usage,
                    summary: summary.finished(started),
                })
                .await;
                return;
            }
        });
        Box::pin(tracing_futures::Instrument::instrument(stream, span))
    }

    /// Settles the ledger into `conversation`. A halt ends the run as it
    /// would have ended the live one: the calls left waiting are withdrawn
    /// and answered (their events follow settling's), never left for a
    /// resolution to run outside any run.
    async fn settle(
        &self,
        conversation: &mut Conversation,
        context: &ToolContext,
    ) -> Result<Settlement, StoreError> {
        let inner = &*self.inner;
        let mut settled = inner.ledger.settle(conversation, context).await?;
        if let Some((by, _)) = &settled.halt {
            for call in std::mem::take(&mut settled.waiting) {
                inner
                    .ledger
                    .withdraw(&conversation.id, &call.tool_call_id, call.awaiting.reason)
                    .await?;
                let (event, message) = inner.agent.withdrawn(call, by, &conversation.id, context);
                settled.events.push(event);
                conversation.messages.push(message);
            }
        }
        Ok(settled)
    }

    async fn reclaim_if_settled(
        &self,
        conversation_id: &str,
    ) -> Result<Option<StoredConversation>, StoreError> {
        if self.inner.ledger.pending_count(conversation_id).await? > 0 {
            return Ok(None);
        }
        self.inner.lease.claim(conversation_id).await
    }
}

/// How often a background resume retries after a store error before it
/// leaves the conversation to the sweep.
const RESUME_RETRIES: u32 = 5;

/// Whether the transcript ends where the model must speak next.
fn needs_model_turn(conversation: &Conversation) -> bool {
    matches!(
        conversation.messages.last(),
        Some(Message::User { .. } | Message::Tool { .. })
    )
}
