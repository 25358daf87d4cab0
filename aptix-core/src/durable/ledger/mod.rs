//! The call ledger of durable runs: every call recorded before it runs,
//! every wait recorded with its deadline, and, before each model turn, the
//! ledger turned back into results ([`Ledger::settle`]): approvals run,
//! denials, expiries, client and human answers, and calls a crash
//! interrupted (run again only when the tool is idempotent).
//!
//! This file holds the ledger itself and the recording of a call
//! ([`Ledger::execute_recorded`]): its execution row before its server step
//! runs, its envelope after, its wait with a deadline. Settling, the
//! recovery of interrupted calls, the retried store writes and the texts
//! the model reads about calls the ledger did not run are modules of their
//! own.

mod messages;
mod recover;
mod settle;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use super::checkpoint::Checkpoint;
use super::clients::Clients;
use super::lease::{millis, now_ms};
use super::resolve::Resolution;
use crate::agent::{Agent, CallResult, ResultText};
use crate::context::ToolContext;
use crate::envelope::{Envelope, EnvelopeIds, JsonText};
use crate::error::ErrorCode;
use crate::executor::{Outcome, ToolCall};
use crate::meta::{AwaitReason, Gate, Route, ServerStep, route};
use crate::store::{CallRecord, CallState, Step, Store, StoreError};
use messages::{id_taken_message, interrupted_message};
use writes::{CLOSE_RETRIES, insert_or_confirm, same_arguments};

pub(crate) use settle::{Settlement, has_unanswered_calls};
pub(crate) use writes::close_in_background;

/// The ledger of one durable agent: its agent's tools, the store, and how
/// long waits last.
#[derive(Clone)]
pub(crate) struct Ledger {
    agent: Agent,
    store: Arc<dyn Store>,
    suspend_timeout: Duration,
    client_grace: Duration,
    clients: Arc<Clients>,
}

impl Ledger {
    pub(crate) fn new(
        agent: Agent,
        store: Arc<dyn Store>,
        suspend_timeout: Duration,
        client_grace: Duration,
        clients: Arc<Clients>,
    ) -> Self {
        Ledger {
            agent,
            store,
            suspend_timeout,
            client_grace,
            clients,
        }
    }

    /// The route of a call of `tool` (see [`route`]) through `gate`: as
    /// declared, past its gate once a person approved it, or held at one
    /// the approval policy asked for. `None` for a tool not in the catalog.
    fn route_of(&self, tool: &str, gate: Gate) -> Option<Route> {
        let definition = self.agent.executor().catalog().get(tool)?;
        Some(route(
            definition.executor(),
            gate.approval(definition.approval()),
        ))
    }

    /// Whether an earlier call of `tool` in the conversation was approved
    /// with [`Resolution::ApproveAlways`]: its approval is the ledger row.
    async fn approved_always(&self, conversation_id: &str, tool: &str) -> Result<bool, StoreError> {
        Ok(self
            .store
            .calls(conversation_id)
            .await?
            .iter()
            .any(|record| {
                record.step == Step::Approval
                    && record.tool == tool
                    && record.state == CallState::Resolved
                    && record.outcome.as_deref().is_some_and(|outcome| {
                        matches!(
                            Resolution::decode(outcome),
                            Ok(Resolution::ApproveAlways { .. })
                        )
                    })
            }))
    }

    /// The store the ledger is kept in.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// How long a wait of the tool `tool` lasts: its declared
    /// `suspend_timeout`, or the agent's.
    pub(crate) fn wait_timeout(&self, tool: &str) -> Duration {
        self.agent
            .executor()
            .catalog()
            .get(tool)
            .and_then(|definition| definition.suspend_timeout())
            .unwrap_or(self.suspend_timeout)
    }

    /// How many waits of the conversation are still pending.
    pub(crate) async fn pending_count(&self, conversation_id: &str) -> Result<usize, StoreError> {
        Ok(self
            .store
            .calls(conversation_id)
            .await?
            .iter()
            .filter(|record| record.state == CallState::Pending)
            .count())
    }

    /// Expires `record` if it is a pending wait whose deadline has passed:
    /// the one place a deadline fires, whoever notices it (a sweep, a
    /// revival, a late resolution). Returns whether this call expired it.
    pub(crate) async fn expire_if_due(
        &self,
        record: &CallRecord,
        now: i64,
    ) -> Result<bool, StoreError> {
        if record.state != CallState::Pending || record.deadline.is_none_or(|at| at > now) {
            return Ok(false);
        }
        let moved = self
            .store
            .transition(
                &record.conversation_id,
                &record.tool_call_id,
                record.step,
                CallState::Pending,
                CallState::Expired,
                None,
                now,
            )
            .await?;
        if moved {
            tracing::info!(
                conversation_id = %record.conversation_id,
                tool_call_id = %record.tool_call_id,
                tool = %record.tool,
                step = %record.step,
                "suspended call expired"
            );
        }
        Ok(moved)
    }

    /// Closes the pending wait of a call whose run a hook halted, so that
    /// no resolution is taken for it any more. The turn that made the call
    /// was saved before its wait was recorded, so no checkpoint is due. A
    /// wait that is no longer pending (a resolution landed meanwhile) is
    /// left as it is: the halted run answers the call either way.
    pub(crate) async fn withdraw(
        &self,
        conversation_id: &str,
        tool_call_id: &str,
        reason: AwaitReason,
    ) -> Result<(), StoreError> {
        let closed = self
            .store
            .transition(
                conversation_id,
                tool_call_id,
                step_for(reason),
                CallState::Pending,
                CallState::Cancelled,
                None,
                now_ms(),
            )
            .await?;
        if !closed {
            tracing::warn!(
                conversation_id,
                tool_call_id,
                "a halted run's waiting call was answered meanwhile; the run stays halted and the call does not run"
            );
        }
        Ok(())
    }

    /// Executes a call inside a durable run: records server execution
    /// before it starts and its envelope after, and records every wait with
    /// its deadline. The run's parked transcript (see [`Checkpoint`]) goes
    /// into the store with the call's first record.
    ///
    /// An `Err` means the call did not run (it could not be recorded
    /// first); once the tool ran, its result is returned even when the
    /// store fails afterwards (the ledger row is closed later).
    /// `requested` names the call of the transcript the rows are for
    /// ([`requested`](crate::agent::requested)).
    pub(crate) async fn execute_recorded(
        &self,
        call: &ToolCall,
        requested: &str,
        context: &ToolContext,
        checkpoint: &Checkpoint,
        gate: Gate,
    ) -> Result<CallResult, StoreError> {
        // The loop put the call's reason on its context when it took it
        // out of the arguments.
        let made = Made {
            requested: Some(requested),
            reasoning: context.reasoning(),
        };
        self.execute_recorded_as(call, context, gate, Some(checkpoint), made)
            .await
    }

    async fn execute_recorded_as(
        &self,
        call: &ToolCall,
        context: &ToolContext,
        gate: Gate,
        checkpoint: Option<&Checkpoint>,
        made: Made<'_>,
    ) -> Result<CallResult, StoreError> {
        let store = &self.store;
        let conversation_id = context.conversation_id().unwrap_or_default();
        // A call that would wait for an approval, of a tool a person
        // already approved for every call of this conversation, runs.
        let mut gate = gate;
        if matches!(gate, Gate::Declared | Gate::Asked)
            && self
                .route_of(&call.name, gate)
                .is_some_and(|route| route.awaits == Some(AwaitReason::Approval))
            && self.approved_always(conversation_id, &call.name).await?
        {
            tracing::info!(tool = %call.name, tool_call_id = &*call.id, "approved by an earlier ApproveAlways in this conversation");
            gate = Gate::Approved { changed: false };
        }
        // A call past its gate is recorded before its server step runs (a
        // server tool's body, a client tool's preflight), so a crash is
        // noticed and it never runs twice. Before an approval the step
        // only validates or shapes what the approver sees, and a person's
        // question is only shaped: nothing to guard.
        let runs_code = self.route_of(&call.name, gate).is_some_and(|route| {
            route.step == ServerStep::Run
                && matches!(route.awaits, None | Some(AwaitReason::Client))
        });
        if runs_code {
            let now = now_ms();
            let record = CallRecord {
                conversation_id: conversation_id.to_owned(),
                tool_call_id: call.id.to_string(),
                step: Step::Execution,
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                payload: "null".to_owned(),
                state: CallState::Executing,
                outcome: None,
                deadline: None,
                created_at: now,
                updated_at: now,
                requested: made.requested.map(str::to_owned),
                reasoning: made.reasoning.map(str::to_owned),
            };
            if !insert_or_confirm(store, &record, checkpoint).await? {
                // Recorded before: the model reused an id, or another
                // process got here first. Never run it a second time.
                let existing = store
                    .call(conversation_id, &call.id, Step::Execution)
                    .await?;
                let ids = EnvelopeIds {
                    tool_call_id: call.id.clone(),
                    conversation_id: context.conversation_id().map(Into::into),
                    session_id: context.session_id().map(Into::into),
                };
                match existing {
                    Some(existing)
                        if existing.tool != call.name
                            || !same_arguments(&existing.arguments, &call.arguments) =>
                    {
                        tracing::error!(tool = %call.name, tool_call_id = &*call.id, recorded = %existing.tool, "the call's id is already recorded for another call; it is not run");
                        return Ok(CallResult::Finished(ResultText::from_envelope(
                            Envelope::error(ids, ErrorCode::Failed, id_taken_message(&call.name)),
                        )));
                    }
                    Some(CallRecord {
                        state: CallState::Done,
                        outcome: Some(envelope),
                        ..
                    }) => return Ok(CallResult::Finished(ResultText::from_stored(envelope))),
                    _ => {}
                }
                return Ok(CallResult::Finished(ResultText::from_envelope(
                    Envelope::error(
                        EnvelopeIds {
                            tool_call_id: call.id.clone(),
                            conversation_id: context.conversation_id().map(Into::into),
                            session_id: context.session_id().map(Into::into),
                        },
                        ErrorCode::Cancelled,
                        interrupted_message(&call.name),
                    ),
                )));
            }
        }
        let execution = self
            .agent
            .executor()
            .execute_gated(call, context, gate)
            .await;
        let outcome = mark_changed(gate, call, execution.outcome);
        if runs_code {
            self.finish_execution(call, conversation_id, outcome, checkpoint, made)
                .await
        } else {
            self.record_outcome(call, conversation_id, outcome, checkpoint, made)
                .await
        }
    }

    /// Closes an execution record, then records what it led to.
    async fn finish_execution(
        &self,
        call: &ToolCall,
        conversation_id: &str,
        outcome: Outcome,
        checkpoint: Option<&Checkpoint>,
        made: Made<'_>,
    ) -> Result<CallResult, StoreError> {
        let envelope = match &outcome {
            Outcome::Final(envelope) => Some(envelope.to_stored_json()),
            _ => None,
        };
        // The tool ran: from here on a store error must not turn into
        // "not run". The row is closed with retries, in the background if
        // the store stays down, and the real result goes on.
        let mut closed = None;
        for delay in CLOSE_RETRIES {
            match self
                .store
                .transition(
                    conversation_id,
                    &call.id,
                    Step::Execution,
                    CallState::Executing,
                    CallState::Done,
                    envelope.as_deref(),
                    now_ms(),
                )
                .await
            {
                Ok(moved) => {
                    closed = Some(moved);
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, tool = %call.name, tool_call_id = &*call.id, "the call ran, but its ledger row could not be closed; retrying");
                    tokio::time::sleep(delay).await;
                }
            }
        }
        match closed {
            Some(true) => {}
            Some(false) => {
                tracing::warn!(tool = %call.name, tool_call_id = &*call.id, "another process settled this call while it ran here (it took the conversation over); its result here is dropped");
            }
            None => {
                tracing::error!(tool = %call.name, tool_call_id = &*call.id, "the call ran, but its ledger row could not be closed; the model gets its result, and the row is closed in the background");
                close_in_background(
                    self.store.clone(),
                    conversation_id.to_owned(),
                    call.id.to_string(),
                    envelope,
                );
            }
        }
        self.record_outcome(call, conversation_id, outcome, checkpoint, made)
            .await
    }

    /// Records the wait an outcome asks for (with its deadline), or passes
    /// a final result through.
    async fn record_outcome(
        &self,
        call: &ToolCall,
        conversation_id: &str,
        outcome: Outcome,
        checkpoint: Option<&Checkpoint>,
        made: Made<'_>,
    ) -> Result<CallResult, StoreError> {
        match outcome {
            Outcome::Final(envelope) => {
                Ok(CallResult::Finished(ResultText::from_envelope(envelope)))
            }
            Outcome::PassThrough => Ok(CallResult::Finished(ResultText::from_envelope(
                Envelope::error(
                    EnvelopeIds {
                        tool_call_id: call.id.clone(),
                        conversation_id: Some(conversation_id.into()),
                        session_id: None,
                    },
                    ErrorCode::Failed,
                    "This tool runs at the model provider and cannot be called as a function here.",
                ),
            ))),
            Outcome::Awaiting(awaiting) => {
                let step = step_for(awaiting.reason);
                let now = now_ms();
                let mut wait = self.wait_timeout(&call.name);
                if step == Step::Client && !self.clients.attached(conversation_id) {
                    wait = wait.min(self.client_grace);
                }
                let record = CallRecord {
                    conversation_id: conversation_id.to_owned(),
                    tool_call_id: call.id.to_string(),
                    step,
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    payload: awaiting.payload.as_str().to_owned(),
                    state: CallState::Pending,
                    outcome: None,
                    deadline: Some(now.saturating_add(millis(wait))),
                    created_at: now,
                    updated_at: now,
                    requested: made.requested.map(str::to_owned),
                    reasoning: made.reasoning.map(str::to_owned),
                };
                if !insert_or_confirm(&self.store, &record, checkpoint).await? {
                    // Another call of the conversation holds this id's wait:
                    // its approval or answer must never settle this call,
                    // so this one is refused, not suspended.
                    tracing::error!(tool = %call.name, tool_call_id = &*call.id, %step, "the call's id already has a wait in this conversation; it is not run");
                    return Ok(CallResult::Finished(ResultText::from_envelope(
                        Envelope::error(
                            EnvelopeIds {
                                tool_call_id: call.id.clone(),
                                conversation_id: Some(conversation_id.into()),
                                session_id: None,
                            },
                            ErrorCode::Failed,
                            id_taken_message(&call.name),
                        ),
                    )));
                }
                tracing::info!(tool = %call.name, tool_call_id = &*call.id, %step, wait_ms = millis(wait), "call suspended");
                Ok(CallResult::Suspended(awaiting))
            }
        }
    }
}

/// The call of the transcript a ledger row is for, as the model made it:
/// its identity ([`requested`](crate::agent::requested)), and the reason it
/// gave (`_reasoningForCall`), kept with the row for whoever decides on it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Made<'a> {
    pub(super) requested: Option<&'a str>,
    pub(super) reasoning: Option<&'a str>,
}

/// Marks the result of a call approved with changed arguments (through
/// `gate`), so that the model learns which arguments ran.
fn mark_changed(gate: Gate, call: &ToolCall, outcome: Outcome) -> Outcome {
    match (gate, outcome) {
        (Gate::Approved { changed: true }, Outcome::Final(envelope)) => {
            match JsonText::parse(call.arguments.clone()) {
                Ok(arguments) => {
                    Outcome::Final(envelope.with_arguments_changed_by_approver(arguments))
                }
                Err(_) => Outcome::Final(envelope),
            }
        }
        (_, outcome) => outcome,
    }
}

/// The ledger step that records a wait for `reason`.
fn step_for(reason: AwaitReason) -> Step {
    match reason {
        AwaitReason::Approval => Step::Approval,
        AwaitReason::Client => Step::Client,
        AwaitReason::Human => Step::Human,
    }
}
