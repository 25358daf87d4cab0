//! The calls of one model turn, a stage of the loop in `run.rs`: what
//! each may do is decided before any of them runs (the turn's limit, the
//! tools its step offered) and, in a durable run, stored with the turn;
//! then they run, a few at a time, their live reports shown as they come,
//! and their results go into the transcript in call order. A hook's halt,
//! or a call left waiting for someone, ends the run after the turn. A turn
//! the model did not finish (cut off at its token limit or by a content
//! filter) runs none of its calls: each is refused, answered as not run.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::call::{self, Executed};
use super::live_feed::{Feed, Live};
use super::run::{Scope, StepRequest, Tally};
use super::step;
use super::summary::CallOutcome;
use super::{Agent, AgentEvent, CallResult, DoneReason, SuspendedCall, redact};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::{Envelope, EnvelopeIds};
use crate::error::ErrorCode;
use crate::model::FinishReason;
use crate::model::assembly::{AssembledCall, AssembledTurn};
use crate::transcript::{Conversation, Message};

/// A turn's calls as they go to run, each with what was decided for it
/// before any of them ran.
struct TurnCalls {
    calls: Vec<AssembledCall>,
    /// Each call's refusal, answered without running it.
    refusals: Vec<Option<Envelope>>,
    /// Each call as the model made it, for a durable run's ledger.
    requested: Vec<String>,
    /// Why the model made each call.
    reasons: Vec<Option<String>>,
    /// What the calls may run (`None`: every tool of the agent).
    runnable: Option<Catalog>,
}

/// What the calls of a turn left that ends the run after it.
struct Ran {
    /// The calls that wait for someone, in call order.
    suspended: Vec<SuspendedCall>,
    /// The first hook that halted the run, and its message.
    halted: Option<(String, String)>,
}

/// Where one call's result goes.
enum Answer {
    /// Into the transcript.
    Result(Message),
    /// Into the calls that wait.
    Waits(SuspendedCall),
}

impl Agent {
    /// Runs the calls of `turn`, the assistant message `conversation` ends
    /// with, and appends their results. `Break`: why the run ends after
    /// this turn (a store that failed, a hook's halt, calls that wait);
    /// `Continue`: the model is asked again.
    pub(super) async fn run_calls(
        &self,
        mut turn: AssembledTurn,
        request: &StepRequest,
        conversation: &mut Conversation,
        scope: &Scope,
        feed: &mut Feed,
        tally: &mut Tally,
    ) -> ControlFlow<DoneReason> {
        let inner = &*self.inner;
        let Scope {
            out,
            context,
            journal,
            ..
        } = scope;
        let catalog = inner.executor.catalog();
        // What the turn's calls may run, kept with the turn: a call
        // revived after a crash is held to it.
        let runnable = step::runnable(request.narrowed.as_ref(), &request.step_choice, catalog);
        if let (Some(runnable), Some(Message::Assistant { runnable: kept, .. })) =
            (&runnable, conversation.messages.last_mut())
        {
            *kept = Some(runnable.names().map(str::to_owned).collect());
        }
        let turn_end = conversation.messages.len();
        let made = turn.tool_calls.len();
        let allowed = inner.settings.max_calls_per_turn;
        // A turn cut off runs none of its calls.
        let cut_off = self
            .cut_off(&turn.finish_reason)
            .then_some(&turn.finish_reason);
        // Decided before anything runs, and stored with the turn.
        let refusals: Vec<Option<Envelope>> = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(position, call)| {
                let ids = || EnvelopeIds {
                    tool_call_id: call.id.as_str().into(),
                    conversation_id: Some(conversation.id.as_str().into()),
                    session_id: context.session_id().map(Into::into),
                };
                match cut_off {
                    Some(reason) => Some(not_run_cut_off(reason, ids())),
                    None => self.refusal(
                        call,
                        (position >= allowed).then_some((made, allowed)),
                        runnable.as_ref(),
                        &request.step_choice,
                        ids,
                    ),
                }
            })
            .collect();
        // Each call as the model made it, before its reason is taken
        // out: what a durable run's ledger rows name (a plain run
        // records nothing, and hashes nothing).
        let requested: Vec<String> = turn
            .tool_calls
            .iter()
            .map(|call| match journal {
                Some(_) => call::requested(&call.name, &call.arguments),
                None => String::new(),
            })
            .collect();
        // The calls are in the store before any of them runs, so a
        // crash from here on is noticed and recovered; the calls
        // refused above go with their results, so that a revival
        // reads the refusal back instead of running them.
        if let Some(journal) = journal {
            let saved = with_refusals(conversation, &turn.tool_calls, &refusals);
            if let Err(error) = journal.checkpoint(&saved).await {
                return ControlFlow::Break(DoneReason::StoreFailed(error));
            }
        }
        // Why the model made each call: kept in the transcript
        // above, shown in events, and never validated as an argument.
        let reasons: Vec<Option<String>> = turn
            .tool_calls
            .iter_mut()
            .map(call::take_reasoning)
            .collect();
        for (call, reasoning) in turn.tool_calls.iter().zip(&reasons) {
            out.emit(AgentEvent::ToolCallStart {
                kind: self.kind_of(&call.name),
                reasoning: reasoning.clone(),
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: redact::redacted_arguments(&call.arguments, self.redactions(&call.name)),
            })
            .await;
        }
        if made > allowed {
            tracing::warn!(
                made,
                allowed,
                "the model made more calls in one turn than may run"
            );
        }
        let calls = TurnCalls {
            calls: turn.tool_calls,
            refusals,
            requested,
            reasons,
            runnable,
        };
        let ran = self
            .execute_calls(calls, conversation, scope, feed, tally)
            .await;
        self.settle_turn(ran, turn_end, conversation, scope).await
    }

    /// Whether a turn that ended with `finish` was cut off before its end,
    /// so that none of its calls may run: the finished-turn rule. The
    /// model stopped at its output token limit (`Length`) or was stopped
    /// by the provider's filter (`ContentFilter`); a call whose arguments
    /// came whole may still be one of several the turn meant, or stand on
    /// text it never finished. Every other finish reason runs the turn's
    /// complete calls: `ToolCalls` is what the seed asks for, but servers
    /// (llama.cpp, Ollama) report `Stop` with calls, and an unknown
    /// reason is the provider's own word for a turn it finished.
    ///
    /// Native tool calls only: in composed mode the answer is one JSON
    /// object, read whole or not at all (`composed.rs` answers one cut off).
    pub(super) fn cut_off(&self, finish: &FinishReason) -> bool {
        self.inner.composed.is_none()
            && matches!(finish, FinishReason::Length | FinishReason::ContentFilter)
    }

    /// Runs `calls`, up to the agent's concurrency at a time, and takes
    /// their results in call order, showing what they report while they
    /// run; a call's reports come before its result, and none after it.
    async fn execute_calls(
        &self,
        calls: TurnCalls,
        conversation: &mut Conversation,
        scope: &Scope,
        feed: &mut Feed,
        tally: &mut Tally,
    ) -> Ran {
        let inner = &*self.inner;
        let Scope {
            out,
            context,
            journal,
            ..
        } = scope;
        let TurnCalls {
            calls,
            refusals,
            requested,
            reasons,
            runnable,
        } = calls;
        // Who made each call, for the live reports that name only its id.
        let running: Vec<(String, String)> = calls
            .iter()
            .map(|call| (call.id.clone(), call.name.clone()))
            .collect();
        let mut finished: Vec<&str> = Vec::with_capacity(running.len());
        // What the approval policy sees of the conversation; one
        // copy a turn, only when there is a policy.
        let transcript: Option<Arc<[Message]>> = self
            .has_approval_policy()
            .then(|| conversation.messages.as_slice().into());
        // The model's reason for each call, in call order, for its tool.
        let mut tool_reasons = reasons.clone().into_iter();
        let mut executed =
            futures_util::stream::iter(calls.into_iter().zip(refusals).zip(requested))
                .map(|((call, refused), requested)| {
                    let execution = self.execute_in_task(
                        call,
                        refused,
                        runnable.as_ref(),
                        requested,
                        context,
                        tool_reasons.next().flatten(),
                        conversation.id.as_str(),
                        journal.clone(),
                        transcript.clone(),
                    );
                    // Timed from its first poll, when it starts.
                    async move {
                        let started = Instant::now();
                        let done = execution.await;
                        (done, started.elapsed())
                    }
                })
                .buffered(inner.settings.tool_concurrency);
        let mut suspended = Vec::new();
        let mut halted = None;
        // `buffered` keeps the calls' order: the n-th result is the n-th call's.
        let mut reasons = reasons.into_iter();
        loop {
            // What the calls report while they run, then their
            // results; a call's reports come before its result.
            let (mut done, took) = tokio::select! {
                biased;
                live = feed.next() => {
                    if let Some(event) = self.live_event(live, &running, &finished) {
                        out.emit(event).await;
                    }
                    continue;
                }
                done = executed.next() => match done {
                    Some(done) => done,
                    None => break,
                },
            };
            while let Some(live) = feed.try_next() {
                if let Some(event) = self.live_event(live, &running, &finished) {
                    out.emit(event).await;
                }
            }
            if let Some((id, _)) = running.iter().find(|(id, _)| *id == done.id) {
                finished.push(id);
            }
            let reasoning = reasons.next().flatten();
            if halted.is_none() {
                halted = done.halt.take();
            }
            match self
                .answer(done, took, reasoning, &conversation.id, scope, tally)
                .await
            {
                Answer::Result(message) => conversation.messages.push(message),
                Answer::Waits(call) => suspended.push(call),
            }
        }
        drop(executed);
        // Reports of calls that are over are not shown after their results.
        feed.clear();
        Ran { suspended, halted }
    }

    /// One call's result: counted in the run's summary, held to the tool's
    /// retry budget, and shown (redacted); then what goes into the
    /// transcript, or the call that waits.
    async fn answer(
        &self,
        done: Executed,
        took: Duration,
        reasoning: Option<String>,
        conversation_id: &str,
        scope: &Scope,
        tally: &mut Tally,
    ) -> Answer {
        let Scope { out, context, .. } = scope;
        let outcome = match &done.result {
            CallResult::Finished(result) if result.ok => CallOutcome::Ok,
            CallResult::Finished(_) => CallOutcome::Failed,
            CallResult::Suspended(_) => CallOutcome::Suspended,
        };
        tally.summary.record_call(&done.name, took, outcome);
        let mut result = done.result;
        if let CallResult::Finished(finished) = &mut result
            && finished.retry
            && let Some(retries) = self.over_retries(&done.name, &mut tally.retried)
        {
            tracing::warn!(tool = %done.name, retries, "a tool asked for more tries than it allows");
            out.emit(AgentEvent::RetriesExhausted {
                id: done.id.clone(),
                name: done.name.clone(),
                kind: self.kind_of(&done.name),
                retries,
            })
            .await;
            *finished = call::ResultText::from_envelope(Envelope::error(
                EnvelopeIds {
                    tool_call_id: done.id.as_str().into(),
                    conversation_id: Some(conversation_id.into()),
                    session_id: context.session_id().map(Into::into),
                },
                ErrorCode::Failed,
                format!(
                    "The tool `{}` asked for another try {} times in this run, more than the {} it allows, so this call counts as failed. Do not call it again for this request; tell the user what went wrong.",
                    done.name,
                    u32::from(retries) + 1,
                    retries
                ),
            ));
        }
        match result {
            CallResult::Finished(result) => {
                out.emit(AgentEvent::ToolCallResult {
                    kind: self.kind_of(&done.name),
                    id: done.id.clone(),
                    name: done.name.clone(),
                    envelope: redact::redacted_envelope(
                        result.to_value(),
                        self.redactions(&done.name),
                    ),
                })
                .await;
                // What a hook rewrote replaces the envelope and
                // its attachments: a hook that rewrites what the
                // model sees (to hide something) hides both.
                let (content, attachments) = match done.model_text {
                    Some(text) => (text, Vec::new()),
                    None => (result.json, result.attachments),
                };
                Answer::Result(Message::Tool {
                    tool_call_id: done.id,
                    name: done.name,
                    content,
                    is_error: !result.ok,
                    attachments,
                })
            }
            CallResult::Suspended(awaiting) => {
                let redaction = self.redactions(&done.name);
                let mut call = SuspendedCall::new(done.id, done.name, awaiting, redaction);
                call.reasoning = reasoning;
                Answer::Waits(call)
            }
        }
    }

    /// What the turn's calls left, settled: on a halt, the calls that wait
    /// are withdrawn and answered; then the turn is saved (a durable run
    /// saves a suspending turn itself, as suspended). `Break`: why the run
    /// ends here; a failed store drops the turn's results, which the
    /// journal gives back to the resumed run.
    async fn settle_turn(
        &self,
        ran: Ran,
        turn_end: usize,
        conversation: &mut Conversation,
        scope: &Scope,
    ) -> ControlFlow<DoneReason> {
        let Ran {
            mut suspended,
            halted,
        } = ran;
        let Scope {
            out,
            context,
            journal,
            ..
        } = scope;
        // A halt ends the run: a call of the turn that waits for
        // someone is withdrawn and answered, never left waiting for
        // a run that is over.
        let mut withdraw_failed = None;
        if let Some((by, _)) = &halted {
            for call in std::mem::take(&mut suspended) {
                if let Some(journal) = journal
                    && let Err(error) = journal
                        .withdraw(&conversation.id, &call.tool_call_id, call.awaiting.reason)
                        .await
                {
                    withdraw_failed = Some(error);
                }
                let (event, message) = self.withdrawn(call, by, &conversation.id, context);
                out.emit(event).await;
                conversation.messages.push(message);
            }
        }
        if let Some(error) = withdraw_failed {
            // As when the turn cannot be saved: the journal has the
            // results of the calls that ran, and the wait it could
            // not close is settled by the resumed run.
            conversation.messages.truncate(turn_end);
            return ControlFlow::Break(DoneReason::StoreFailed(error));
        }
        // A suspending turn is saved once, by the durable run, as
        // suspended; finished results are in the journal meanwhile.
        if let Some(journal) = journal
            && suspended.is_empty()
            && let Err(error) = journal.checkpoint(conversation).await
        {
            // The turn's results are not kept: those of calls that
            // ran are in the journal, which gives them back when the
            // run is resumed, and the others were not run, so the
            // resumed run runs them.
            conversation.messages.truncate(turn_end);
            return ControlFlow::Break(DoneReason::StoreFailed(error));
        }
        if let Some((by, message)) = halted {
            tracing::warn!(hook = %by, "a hook halted the run");
            return ControlFlow::Break(DoneReason::Halted { by, message });
        }
        if !suspended.is_empty() {
            return ControlFlow::Break(DoneReason::Suspended(suspended));
        }
        ControlFlow::Continue(())
    }

    /// The result of a call that waited when the hook `by` halted the run:
    /// its event and its transcript message (the caller closes its wait).
    pub(crate) fn withdrawn(
        &self,
        call: SuspendedCall,
        by: &str,
        conversation_id: &str,
        context: &ToolContext,
    ) -> (AgentEvent, Message) {
        let envelope = Envelope::error(
            EnvelopeIds {
                tool_call_id: call.tool_call_id.as_str().into(),
                conversation_id: Some(conversation_id.into()),
                session_id: context.session_id().map(Into::into),
            },
            ErrorCode::Cancelled,
            format!(
                "This call to `{}` was not run: the hook `{by}` halted the run before anyone answered it.",
                call.name
            ),
        );
        let event = AgentEvent::ToolCallResult {
            kind: self.kind_of(&call.name),
            id: call.tool_call_id.clone(),
            name: call.name.clone(),
            envelope: envelope.to_value(),
        };
        let message = Message::Tool {
            tool_call_id: call.tool_call_id,
            name: call.name,
            content: envelope.into_json_string(),
            is_error: true,
            attachments: Vec::new(),
        };
        (event, message)
    }

    /// Counts a `retry` result of `name`; past the tool's budget, the
    /// budget.
    fn over_retries(&self, name: &str, retried: &mut Vec<(String, u8)>) -> Option<u8> {
        let budget = self.inner.executor.catalog().get(name)?.retries();
        let count = match retried.iter_mut().find(|(tool, _)| tool == name) {
            Some((_, count)) => count,
            None => {
                retried.push((name.to_owned(), 0));
                &mut retried.last_mut()?.1
            }
        };
        *count = count.saturating_add(1);
        (*count > budget).then_some(budget)
    }

    /// The event for what a running call reported, unless its call is over
    /// (a tool's spawned work reporting late) or unknown. A partial result
    /// is redacted as the tool's result is.
    fn live_event(
        &self,
        live: Live,
        running: &[(String, String)],
        finished: &[&str],
    ) -> Option<AgentEvent> {
        let (id, _) = match &live {
            Live::Progress(id, _) | Live::Partial(id, _) | Live::Elicitation(id, _, _) => (id, ()),
        };
        if finished.contains(&id.as_str()) {
            return None;
        }
        let name = running
            .iter()
            .find(|(running, _)| running == id)
            .map(|(_, name)| name.clone())?;
        Some(match live {
            Live::Progress(id, update) => AgentEvent::ToolProgress {
                kind: self.kind_of(&name),
                id,
                name,
                done: update.done,
                total: update.total,
                message: update.message,
            },
            Live::Partial(id, mut value) => {
                redact::redact(&mut value, self.redactions(&name));
                AgentEvent::ToolPartial {
                    kind: self.kind_of(&name),
                    id,
                    name,
                    value,
                }
            }
            Live::Elicitation(id, request, reply) => AgentEvent::Elicitation {
                kind: self.kind_of(&name),
                id,
                name,
                request,
                reply,
            },
        })
    }
}

/// The result of a call of a turn cut off (`reason`): not run, and why,
/// in words the model can act on.
fn not_run_cut_off(reason: &FinishReason, ids: EnvelopeIds) -> Envelope {
    let message = match reason {
        FinishReason::ContentFilter => {
            "Your turn was stopped by the provider's content filter before its end, so this call was not run, nor any other call of that turn. Nothing happened."
        }
        _ => {
            "Your turn was cut off at the output token limit before its end, so this call was not run, nor any other call of that turn, even one whose arguments were complete. Nothing happened. Make the calls you still need again in a shorter turn: fewer calls, shorter arguments, less text before them."
        }
    };
    Envelope::error(ids, ErrorCode::Failed, message)
}

/// `conversation` as a durable run stores it after the model's turn: with
/// the results of the calls refused before anything ran, when there are
/// any (a copy; the live transcript gets them in call order later).
fn with_refusals<'c>(
    conversation: &'c Conversation,
    calls: &[crate::model::assembly::AssembledCall],
    refusals: &[Option<Envelope>],
) -> std::borrow::Cow<'c, Conversation> {
    if refusals.iter().all(Option::is_none) {
        return std::borrow::Cow::Borrowed(conversation);
    }
    let mut saved = conversation.clone();
    for (call, refusal) in calls.iter().zip(refusals) {
        if let Some(envelope) = refusal {
            saved.messages.push(Message::Tool {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                content: envelope.to_json_string(),
                is_error: true,
                attachments: Vec::new(),
            });
        }
    }
    std::borrow::Cow::Owned(saved)
}
