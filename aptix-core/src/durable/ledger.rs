//! The call ledger of durable runs: every call recorded before it runs,
//! every wait recorded with its deadline, and, before each model turn, the
//! ledger turned back into results ([`Ledger::settle`]): approvals run,
//! denials, expiries, client and human answers, and calls a crash
//! interrupted (run again only when the tool is idempotent).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::checkpoint::{Carried, Checkpoint};
use super::clients::Clients;
use super::lease::{millis, now_ms};
use super::resolve::Resolution;
use crate::agent::{
    After, Agent, AgentEvent, Before, CallResult, PolicyGate, ResultText, SuspendedCall,
    kept_runnable, redact, requested, split_reasoning,
};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::{ARGUMENTS_CHANGED_BY_APPROVER, Envelope, EnvelopeIds, JsonText};
use crate::error::ErrorCode;
use crate::executor::{Awaiting, Outcome, ToolCall};
use crate::meta::{Approval, AwaitReason, Route, ServerStep, route};
use crate::store::{CallRecord, CallState, Step, Store, StoreError};
use crate::transcript::{AssistantToolCall, Conversation, Message};

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
        Some(match gate {
            Gate::Model => definition.route(),
            Gate::Approved { .. } => route(definition.executor(), Approval::Auto),
            Gate::Asked => route(definition.executor(), Approval::RequiresApproval),
        })
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

    /// Turns the ledger into results for every unanswered call of the last
    /// assistant turn: recorded results, approvals (running the approved
    /// server call, or preparing the approved client call), denials,
    /// expiries, client and human answers, and calls a crash interrupted.
    /// Returns the events of the results it added, the calls still
    /// waiting, and a hook's halt: the hooks decide on what settling runs
    /// or reads back as they do in a run (`before_call` on calls never
    /// recorded, `after_call` on every result of the tool's own run, also one
    /// read from the ledger), so a crash between a run's steps changes
    /// nothing the model sees.
    pub(crate) async fn settle(
        &self,
        conversation: &mut Conversation,
        context: &ToolContext,
    ) -> Result<Settlement, StoreError> {
        let unanswered = unanswered_calls(conversation);
        let mut settlement = Settlement::default();
        if unanswered.is_empty() {
            return Ok(settlement);
        }
        // What the live run held the turn's calls to.
        let runnable = kept_runnable(
            last_turn_runnable(conversation),
            self.agent.executor().catalog(),
        );
        let Settlement {
            events,
            waiting,
            halt,
        } = &mut settlement;
        for (place, call) in unanswered {
            // Read for every call: settling an earlier call of the turn
            // changes the ledger. Only rows of this very call count: an id
            // the model gave two calls must never let one call's row (an
            // approval above all) settle the other.
            let requested = requested(&call.name, &call.arguments);
            let records = self.store.calls(&conversation.id).await?;
            let of_call: Vec<&CallRecord> = records
                .iter()
                .filter(|record| {
                    record.tool_call_id == call.id && is_for(record, &call, &requested)
                })
                .collect();
            let mut steering = Steering::default();
            let settled = self
                .settle_call(
                    conversation,
                    context,
                    (&call, &requested, place),
                    runnable.as_ref(),
                    &of_call,
                    &mut steering,
                )
                .await?;
            match settled {
                CallResult::Finished(result) => {
                    let after = match &steering.ran {
                        Some(ran) if self.agent.has_hooks() => {
                            self.after_call(&call.id, ran, context, &result).await
                        }
                        _ => After::default(),
                    };
                    if halt.is_none() {
                        *halt = steering.halt.or(after.halt);
                    }
                    let redaction = self.agent.redactions(&call.name);
                    let mut envelope = redact::redacted_envelope(result.to_value(), redaction);
                    if let Some(arguments) = envelope.get_mut(ARGUMENTS_CHANGED_BY_APPROVER) {
                        redact::redact(arguments, redaction);
                    }
                    events.push(AgentEvent::ToolCallResult {
                        kind: self.agent.kind_of(&call.name),
                        id: call.id.clone(),
                        name: call.name.clone(),
                        envelope,
                    });
                    // As in a run: what a hook rewrote replaces the
                    // envelope and its attachments.
                    let (content, attachments) = match after.model_text {
                        Some(text) => (text, Vec::new()),
                        None => (result.json, result.attachments),
                    };
                    conversation.messages.push(Message::Tool {
                        tool_call_id: call.id.clone(),
                        name: call.name.clone(),
                        content,
                        is_error: !result.ok,
                        attachments,
                    });
                }
                CallResult::Suspended(awaiting) => waiting.push(SuspendedCall::new(
                    call.id.clone(),
                    call.name.clone(),
                    awaiting,
                    self.agent.redactions(&call.name),
                )),
            }
        }
        Ok(settlement)
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

    /// What the hooks' `after_call` makes of the result of `ran`.
    async fn after_call(
        &self,
        id: &str,
        ran: &ToolCall,
        context: &ToolContext,
        result: &ResultText,
    ) -> After {
        let definition = self.agent.executor().catalog().get(&ran.name);
        let arguments = serde_json::from_str::<Value>(&ran.arguments);
        match (definition, arguments) {
            (Some(definition), Ok(arguments)) => {
                self.agent
                    .after_run(id, definition, &arguments, context, result.to_value())
                    .await
            }
            _ => After::default(),
        }
    }

    /// The result of one unanswered call of the last turn, from `records`
    /// (the ledger rows of that very call): `requested` is its identity
    /// ([`requested`]), `place` where it stands in its turn, `runnable`
    /// what the live run held the turn to.
    async fn settle_call(
        &self,
        conversation: &Conversation,
        context: &ToolContext,
        (call, requested, place): (&AssistantToolCall, &str, Place),
        runnable: Option<&Catalog>,
        records: &[&CallRecord],
        steering: &mut Steering,
    ) -> Result<CallResult, StoreError> {
        let find = |step: Step| records.iter().copied().find(|record| record.step == step);
        let ids = || ids_for(conversation, &call.id);
        let error = |code: ErrorCode, message: String| {
            CallResult::Finished(ResultText::from_envelope(Envelope::error(
                ids(),
                code,
                message,
            )))
        };
        // The tool the call was recorded as: a hook may have renamed it.
        let ran_as = records
            .first()
            .map_or(call.name.as_str(), |record| record.tool.as_str());
        let tool_call = |arguments: String| ToolCall::new(call.id.as_str(), ran_as, arguments);

        if let Some(execution) = find(Step::Execution) {
            match (execution.state, &execution.outcome) {
                (CallState::Done, Some(envelope)) => {
                    steering.ran = Some(ToolCall::new(
                        call.id.as_str(),
                        execution.tool.as_str(),
                        execution.arguments.as_str(),
                    ));
                    return Ok(CallResult::Finished(ResultText::from_stored(
                        envelope.clone(),
                    )));
                }
                (CallState::Executing, _) => {
                    return self
                        .recover_interrupted(conversation, context, call, execution, steering)
                        .await;
                }
                (CallState::Cancelled, _) => {
                    return Ok(error(ErrorCode::Cancelled, interrupted_message(&call.name)));
                }
                // Done without an envelope: a client call's server step; its
                // client wait below decides.
                _ => {}
            }
        }
        let approval = find(Step::Approval);
        let resolution = match approval {
            Some(approval) if approval.state == CallState::Resolved => approval
                .outcome
                .as_deref()
                .map(Resolution::decode)
                .transpose()?,
            _ => None,
        };
        for step in [Step::Client, Step::Human] {
            if let Some(record) = find(step) {
                let settled = self.settle_wait(conversation, call, record, &error)?;
                // The client ran the arguments its approver changed the
                // call to: the model learns it with the result.
                return Ok(match (settled, &resolution) {
                    (
                        CallResult::Finished(result),
                        Some(Resolution::ApproveWithArgs(arguments)),
                    ) => CallResult::Finished(with_changed_arguments(result, arguments)),
                    (settled, _) => settled,
                });
            }
        }
        if let Some(approval) = approval {
            // A row written before rows named their call: it must hold the
            // call's own arguments. (A row that names it is this call's,
            // whatever a hook or the loop made of its arguments.)
            if approval.requested.is_none() && !same_arguments(&approval.arguments, &call.arguments)
            {
                // Shown to the approver with other arguments than the call
                // carries: the approval is not for this call.
                tracing::error!(tool = %call.name, tool_call_id = %call.id, "an approval recorded for other arguments than the call's; the call is not run");
                if approval.state == CallState::Pending {
                    // Nobody may approve it any more: it answers nothing.
                    self.store
                        .transition(
                            &conversation.id,
                            &call.id,
                            Step::Approval,
                            CallState::Pending,
                            CallState::Cancelled,
                            None,
                            now_ms(),
                        )
                        .await?;
                }
                return Ok(error(ErrorCode::Denied, not_this_call_message(&call.name)));
            }
            let (arguments, changed) = match resolution {
                Some(resolution) if resolution.approves_as_held() => {
                    (approval.arguments.clone(), None)
                }
                Some(Resolution::ApproveWithArgs(arguments)) => {
                    (arguments.to_string(), Some(arguments))
                }
                _ => return self.settle_wait(conversation, call, approval, &error),
            };
            // The approver's edit is an outside input like the model's
            // call: the hooks and the approval policy decide on it as they
            // did on the call, before anything runs with it (a policy that
            // asks for a person is met: one approved these very arguments).
            let arguments = if changed.is_some() {
                match self
                    .steer(
                        conversation,
                        context,
                        (&call.id, ran_as),
                        arguments,
                        runnable,
                        steering,
                    )
                    .await
                {
                    Ok((_, arguments, _)) => arguments,
                    Err(decided) => return Ok(decided),
                }
            } else {
                arguments
            };
            let call_now = tool_call(arguments);
            let next = self
                .route_of(ran_as, Gate::Asked)
                .and_then(|route| route.after(AwaitReason::Approval));
            let Some(next) = next else {
                // Approved, and nobody else is awaited: run the server step
                // now, recorded like any other.
                let gate = Gate::Approved {
                    changed: changed.is_some(),
                };
                steering.ran = Some(call_now.clone());
                return self
                    .execute_recorded_as(&call_now, context, gate, None, Some(requested))
                    .await;
            };
            // Approved, and the client acts next: with the payload its
            // preflight shaped before the approval, or, for changed
            // arguments, with a payload shaped from them now (preflights
            // only shape, so running one again is harmless).
            let outcome = if changed.is_some() {
                self.agent
                    .executor()
                    .execute_approved(&call_now, context)
                    .await
                    .outcome
            } else {
                let payload = JsonText::parse(approval.payload.clone()).map_err(|error| {
                    StoreError::Corrupt(format!("payload of `{}`: {error}", call.id))
                })?;
                Outcome::Awaiting(Awaiting {
                    reason: next,
                    then: None,
                    payload,
                })
            };
            return self
                .record_outcome(&call_now, &conversation.id, outcome, None, Some(requested))
                .await;
        }
        // Never recorded: the run stopped between saving the model's turn
        // and executing it. Nothing ran, so run it now as the stopped run
        // would have: its reason taken out, held to the tools the turn
        // could run, through the hooks and the approval policy (a call a
        // hook denies must not run, one the policy holds must wait).
        let ids = || ids_for(conversation, &call.id);
        let arguments = split_reasoning(&call.arguments)
            .map_or_else(|| call.arguments.clone(), |(arguments, _)| arguments);
        // Decided again from the stored turn (the live run's refusal is
        // stored with it, but a save that failed may have lost it): the
        // same place in the turn, the same tools the turn could run.
        if let Some(refusal) =
            self.agent
                .refusal_of_stored(&call.name, (place.position, place.made), runnable, ids())
        {
            return Ok(CallResult::Finished(ResultText::from_envelope(refusal)));
        }
        let steered = self
            .steer(
                conversation,
                context,
                (&call.id, &call.name),
                arguments,
                runnable,
                steering,
            )
            .await;
        let (name, arguments, asked) = match steered {
            Ok(steered) => steered,
            Err(decided) => return Ok(decided),
        };
        let gate = if asked { Gate::Asked } else { Gate::Model };
        let call_now = ToolCall::new(call.id.as_str(), name, arguments);
        steering.ran = Some(call_now.clone());
        self.execute_recorded_as(&call_now, context, gate, None, Some(requested))
            .await
    }

    /// What the hooks and the approval policy make of a call of `name`
    /// that settling is about to run: the call to run (a hook may rewrite
    /// its arguments, or rename an unknown name to a tool of `runnable`) and
    /// whether the policy asks for a person; or the call's result, when a
    /// hook answers, denies or halts it, or the policy denies it. As a run
    /// decides for the model's calls, so settling decides for a call a
    /// crash left unrecorded and for arguments an approver changed.
    async fn steer(
        &self,
        conversation: &Conversation,
        context: &ToolContext,
        (id, name): (&str, &str),
        arguments: String,
        runnable: Option<&Catalog>,
        steering: &mut Steering,
    ) -> Result<(String, String, bool), CallResult> {
        let ids = || ids_for(conversation, id);
        let finished = |envelope| CallResult::Finished(ResultText::from_envelope(envelope));
        let (name, arguments, validated) = if self.agent.has_hooks() {
            match self
                .agent
                .before_run(id, name, &arguments, context, runnable, &ids)
                .await
            {
                Before::Done(envelope) => return Err(finished(envelope)),
                Before::Halted {
                    by,
                    message,
                    envelope,
                } => {
                    steering.halt = Some((by, message));
                    return Err(finished(envelope));
                }
                Before::Run {
                    name,
                    arguments,
                    validated,
                } => (name, arguments, validated),
            }
        } else {
            (name.to_owned(), arguments, None)
        };
        let asked = if self.agent.has_approval_policy() {
            match self
                .agent
                .gate(
                    id,
                    &name,
                    &arguments,
                    validated.as_ref(),
                    context,
                    &conversation.messages,
                    &ids,
                )
                .await
            {
                PolicyGate::Declared => false,
                PolicyGate::Ask => true,
                PolicyGate::Denied(envelope) => return Err(finished(envelope)),
            }
        } else {
            false
        };
        Ok((name, arguments, asked))
    }

    /// The result of a wait that has not led to an execution: pending,
    /// expired, denied, or answered.
    fn settle_wait(
        &self,
        conversation: &Conversation,
        call: &AssistantToolCall,
        record: &CallRecord,
        error: &dyn Fn(ErrorCode, String) -> CallResult,
    ) -> Result<CallResult, StoreError> {
        let resolution = match record.state {
            CallState::Pending => {
                let reason = awaited_at(record.step).ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "the execution of `{}` is recorded as a pending wait",
                        record.tool_call_id
                    ))
                })?;
                // A wait for an approval means the call was gated (declared,
                // or asked for by the policy): who comes after it is that
                // route's.
                let then = self
                    .route_of(&record.tool, Gate::Asked)
                    .and_then(|route| route.after(reason));
                let payload = JsonText::parse(record.payload.clone()).map_err(|error| {
                    StoreError::Corrupt(format!("payload of `{}`: {error}", record.tool_call_id))
                })?;
                return Ok(CallResult::Suspended(Awaiting {
                    reason,
                    then,
                    payload,
                }));
            }
            CallState::Expired => {
                let waited = record
                    .deadline
                    .map(|deadline| {
                        Duration::from_millis(
                            u64::try_from(deadline - record.created_at).unwrap_or(0),
                        )
                    })
                    .unwrap_or_else(|| self.wait_timeout(&record.tool));
                let message = match record.step {
                    Step::Approval => format!(
                        "Nobody approved the call to `{}` within {}, so it was not run.",
                        call.name,
                        humanize(waited)
                    ),
                    Step::Client => format!(
                        "The client did not run `{}` within {} (no client was attached to the conversation, or it did not answer), so there is no result.",
                        call.name,
                        humanize(waited)
                    ),
                    _ => format!(
                        "Nobody answered `{}` within {}, so there is no answer.",
                        call.name,
                        humanize(waited)
                    ),
                };
                return Ok(error(ErrorCode::Timeout, message));
            }
            CallState::Resolved => record
                .outcome
                .as_deref()
                .map(Resolution::decode)
                .transpose()?,
            _ => None,
        };
        Ok(match resolution {
            Some(Resolution::Deny { message }) => error(ErrorCode::Denied, message),
            Some(Resolution::Result(value)) => {
                let text = JsonText::from_serialize(&value).map_err(|error| {
                    StoreError::Corrupt(format!("result of `{}`: {error}", record.tool_call_id))
                })?;
                CallResult::Finished(ResultText::from_envelope(Envelope::ok(
                    ids_for(conversation, &call.id),
                    text,
                )))
            }
            _ => error(
                ErrorCode::Cancelled,
                format!(
                    "The call to `{}` was abandoned before it finished.",
                    call.name
                ),
            ),
        })
    }

    /// A server step that was executing when its process stopped.
    async fn recover_interrupted(
        &self,
        conversation: &Conversation,
        context: &ToolContext,
        call: &AssistantToolCall,
        execution: &CallRecord,
        steering: &mut Steering,
    ) -> Result<CallResult, StoreError> {
        let store = &self.store;
        // The tool it was recorded as (a hook may have renamed the call).
        let tool = execution.tool.as_str();
        let row_requested = execution.requested.as_deref();
        let idempotent = self
            .agent
            .executor()
            .catalog()
            .get(tool)
            .is_some_and(|definition| definition.idempotent());
        if idempotent {
            tracing::warn!(tool, tool_call_id = %call.id, "re-running an idempotent call a crash interrupted, with the same tool_call_id");
            let tool_call = ToolCall::new(call.id.as_str(), tool, execution.arguments.clone());
            let approval = store
                .call(&conversation.id, &call.id, Step::Approval)
                .await?
                .filter(|approval| {
                    approval.tool == tool
                        && approval.requested == execution.requested
                        && approval.state == CallState::Resolved
                });
            let resolution = approval
                .and_then(|approval| approval.outcome)
                .as_deref()
                .map(Resolution::decode)
                .transpose()?;
            // A gated tool's execution row is written only once its gate
            // is passed: by the approval on record, or, without one, by an
            // earlier `ApproveAlways`.
            let gated = self
                .route_of(tool, Gate::Model)
                .is_some_and(|route| route.awaits == Some(AwaitReason::Approval));
            let gate = match resolution {
                Some(Resolution::ApproveWithArgs(_)) => Gate::Approved { changed: true },
                Some(resolution) if resolution.approves_as_held() => {
                    Gate::Approved { changed: false }
                }
                _ if gated => Gate::Approved { changed: false },
                _ => Gate::Model,
            };
            let execution = if gate == Gate::Model {
                self.agent.executor().execute(&tool_call, context).await
            } else {
                self.agent
                    .executor()
                    .execute_approved(&tool_call, context)
                    .await
            };
            let outcome = gate.mark(&tool_call, execution.outcome);
            let finished = self
                .finish_execution(&tool_call, &conversation.id, outcome, None, row_requested)
                .await;
            steering.ran = Some(tool_call);
            return finished;
        }
        tracing::warn!(tool = %call.name, tool_call_id = %call.id, "a crash interrupted a call that is not idempotent; it is not run again");
        store
            .transition(
                &conversation.id,
                &call.id,
                Step::Execution,
                CallState::Executing,
                CallState::Cancelled,
                None,
                now_ms(),
            )
            .await?;
        Ok(CallResult::Finished(ResultText::from_envelope(
            Envelope::error(
                ids_for(conversation, &call.id),
                ErrorCode::Cancelled,
                interrupted_message(&call.name),
            ),
        )))
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
    /// ([`requested`]).
    pub(crate) async fn execute_recorded(
        &self,
        call: &ToolCall,
        requested: &str,
        context: &ToolContext,
        checkpoint: &Checkpoint,
        ask: bool,
    ) -> Result<CallResult, StoreError> {
        let gate = if ask { Gate::Asked } else { Gate::Model };
        self.execute_recorded_as(call, context, gate, Some(checkpoint), Some(requested))
            .await
    }

    async fn execute_recorded_as(
        &self,
        call: &ToolCall,
        context: &ToolContext,
        gate: Gate,
        checkpoint: Option<&Checkpoint>,
        requested: Option<&str>,
    ) -> Result<CallResult, StoreError> {
        let store = &self.store;
        let conversation_id = context.conversation_id().unwrap_or_default();
        // A call that would wait for an approval, of a tool a person
        // already approved for every call of this conversation, runs.
        let mut gate = gate;
        if matches!(gate, Gate::Model | Gate::Asked)
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
                requested: requested.map(str::to_owned),
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
        let execution = match gate {
            Gate::Approved { .. } => self.agent.executor().execute_approved(call, context).await,
            Gate::Model => self.agent.executor().execute(call, context).await,
            Gate::Asked => {
                self.agent
                    .executor()
                    .execute_asking_approval(call, context)
                    .await
            }
        };
        let outcome = gate.mark(call, execution.outcome);
        if runs_code {
            self.finish_execution(call, conversation_id, outcome, checkpoint, requested)
                .await
        } else {
            self.record_outcome(call, conversation_id, outcome, checkpoint, requested)
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
        requested: Option<&str>,
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
        self.record_outcome(call, conversation_id, outcome, checkpoint, requested)
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
        requested: Option<&str>,
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
                    requested: requested.map(str::to_owned),
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

/// How long to wait after each failed attempt to close an execution row,
/// before the result is handed on and the closing goes to the background.
const CLOSE_RETRIES: [Duration; 3] = [
    Duration::from_millis(20),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// What [`Ledger::settle`] did: the events of the results it added, the
/// calls still waiting, and a hook's halt (the first), which ends the run.
#[derive(Debug, Default)]
pub(crate) struct Settlement {
    pub(crate) events: Vec<AgentEvent>,
    pub(crate) waiting: Vec<SuspendedCall>,
    pub(crate) halt: Option<(String, String)>,
}

/// What settling one call learned besides its result: the call that ran
/// (its tool and the arguments it ran with), whose result the hooks'
/// `after_call` sees, and a `before_call` halt.
#[derive(Debug, Default)]
struct Steering {
    ran: Option<ToolCall>,
    halt: Option<(String, String)>,
}

/// Keeps trying to close an execution row whose call is answered (its tool
/// ran, or was stopped from outside its task), so that a store that
/// recovers ends up holding the result.
pub(crate) fn close_in_background(
    store: Arc<dyn Store>,
    conversation_id: String,
    tool_call_id: String,
    envelope: Option<String>,
) {
    tokio::spawn(async move {
        let closed = retry_transition(
            &store,
            &conversation_id,
            &tool_call_id,
            Step::Execution,
            (CallState::Executing, CallState::Done),
            envelope.as_deref(),
        )
        .await;
        if !closed {
            tracing::error!(%conversation_id, %tool_call_id, "gave up closing the ledger row of a call that ran; it stays `executing`");
        }
    });
}

/// Moves a row from one state to another, retrying store errors with
/// backoff (1 s doubling up to a minute, 12 attempts). Returns whether
/// the store answered (the row moved, or was not in `from`).
async fn retry_transition(
    store: &Arc<dyn Store>,
    conversation_id: &str,
    tool_call_id: &str,
    step: Step,
    (from, to): (CallState, CallState),
    outcome: Option<&str>,
) -> bool {
    let mut delay = Duration::from_secs(1);
    for _ in 0..12 {
        tokio::time::sleep(delay).await;
        match store
            .transition(
                conversation_id,
                tool_call_id,
                step,
                from,
                to,
                outcome,
                now_ms(),
            )
            .await
        {
            Ok(_) => return true,
            Err(error) => {
                tracing::warn!(%error, %conversation_id, %tool_call_id, %step, "still cannot update a ledger row");
            }
        }
        delay = (delay * 2).min(Duration::from_secs(60));
    }
    false
}

/// Inserts a ledger row, telling a lost acknowledgement from a failure: a
/// store error may come after the row was written, and then the row, read
/// back, decides. `Ok(true)`: the row is in the store; `Ok(false)`: another
/// call's row holds the id and step; `Err`: it was not recorded. When even
/// the read back fails, the row (if it was written after all) is withdrawn,
/// at once or, while the store keeps failing, in the background: the call
/// is reported as not run, so nothing may wait or run for it.
///
/// With a `checkpoint`, its parked transcript is saved in the same batch.
async fn insert_or_confirm(
    store: &Arc<dyn Store>,
    record: &CallRecord,
    checkpoint: Option<&Checkpoint>,
) -> Result<bool, StoreError> {
    let carried = match checkpoint {
        Some(checkpoint) => checkpoint.insert_with(record).await,
        None => None,
    };
    let inserted = match carried {
        Some(carried) => carried.map(|carried| matches!(carried, Carried::Inserted)),
        None => store.insert_call(record).await,
    };
    let error = match inserted {
        Ok(inserted) => return Ok(inserted),
        Err(error) => error,
    };
    let confirmed = confirm_insert(store, record, error).await;
    if let (Err(error), Some(checkpoint)) = (&confirmed, checkpoint) {
        checkpoint.failed(error);
    }
    confirmed
}

/// After an insert answered `error`: whether the row was written after all.
async fn confirm_insert(
    store: &Arc<dyn Store>,
    record: &CallRecord,
    error: StoreError,
) -> Result<bool, StoreError> {
    if let StoreError::LostLease { .. } = error {
        // Refused, not lost on the way: the conversation was taken over,
        // and nothing of this run may go on.
        return Err(error);
    }
    let conversation_id = &record.conversation_id;
    let tool_call_id = &record.tool_call_id;
    match store.call(conversation_id, tool_call_id, record.step).await {
        Ok(Some(found))
            if found.tool == record.tool
                && found.created_at == record.created_at
                && same_arguments(&found.arguments, &record.arguments) =>
        {
            tracing::warn!(%error, %conversation_id, %tool_call_id, step = %record.step, "the store reported an error, but the ledger row was written; going on with it");
            Ok(true)
        }
        Ok(Some(_)) => Ok(false),
        Ok(None) => Err(error),
        Err(read_error) => {
            // Withdrawn at once when the store answers: until then a row
            // written after all would be listed as pending, resolvable, for
            // a call the model is told did not run.
            let withdrawn = store
                .transition(
                    conversation_id,
                    tool_call_id,
                    record.step,
                    record.state,
                    CallState::Cancelled,
                    None,
                    now_ms(),
                )
                .await;
            if withdrawn.is_ok() {
                tracing::warn!(%error, %read_error, %conversation_id, %tool_call_id, step = %record.step, "cannot tell whether the ledger row was written; withdrew it");
                return Err(error);
            }
            tracing::warn!(%error, %read_error, %conversation_id, %tool_call_id, step = %record.step, "cannot tell whether the ledger row was written; withdrawing it in the background");
            let store = store.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let answered = retry_transition(
                    &store,
                    &record.conversation_id,
                    &record.tool_call_id,
                    record.step,
                    (record.state, CallState::Cancelled),
                    None,
                )
                .await;
                if !answered {
                    tracing::error!(conversation_id = %record.conversation_id, tool_call_id = %record.tool_call_id, step = %record.step, "gave up withdrawing a ledger row that may have been written for a call reported as not run");
                }
            });
            Err(error)
        }
    }
}

/// How a call passes its approval gate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// As the model made it: a gated call stops at its gate.
    Model,
    /// Approved; `changed` when the approver changed its arguments.
    Approved { changed: bool },
    /// Held for an approval the tool does not declare: the approval
    /// policy asked for one.
    Asked,
}

impl Gate {
    /// Marks the result of a call approved with changed arguments, so that
    /// the model learns which arguments ran.
    fn mark(self, call: &ToolCall, outcome: Outcome) -> Outcome {
        match (self, outcome) {
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
}

/// The result of a call its approver changed, marked with the arguments
/// that ran.
fn with_changed_arguments(result: ResultText, arguments: &Value) -> ResultText {
    let marked = serde_json::from_str::<Envelope>(&result.json)
        .ok()
        .zip(JsonText::from_serialize(arguments).ok())
        .map(|(envelope, arguments)| {
            envelope
                .with_arguments_changed_by_approver(arguments)
                .into_json_string()
        });
    match marked {
        Some(json) => ResultText { json, ..result },
        None => result,
    }
}

/// Whether two argument texts are the same arguments: equal as JSON (key
/// order and spacing aside), or equal as text when either is not JSON.
fn same_arguments(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn id_taken_message(tool: &str) -> String {
    format!(
        "This call to `{tool}` was not run: another call in this conversation already has its tool_call_id. Call the tool again if it is still needed."
    )
}

fn not_this_call_message(tool: &str) -> String {
    format!(
        "The call to `{tool}` was not run: the approval on record was given for other arguments than this call's."
    )
}

fn interrupted_message(tool: &str) -> String {
    format!(
        "The call to `{tool}` was interrupted (the process running it stopped) and was not run again, because the tool is not declared idempotent. It may or may not have taken effect; check before calling it again."
    )
}

/// Whether `record` is a row of `call` (whose identity is `requested`): a
/// row that names its call must name this one; a row written before rows
/// named their call must hold this call's tool.
fn is_for(record: &CallRecord, call: &AssistantToolCall, requested: &str) -> bool {
    match &record.requested {
        Some(named) => named == requested,
        None => record.tool == call.name,
    }
}

/// What the last assistant turn kept as the tools its calls could run.
fn last_turn_runnable(conversation: &Conversation) -> Option<&[String]> {
    conversation
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Assistant { runnable, .. } => Some(runnable.as_deref()),
            _ => None,
        })?
}

/// Whether calls of the last assistant turn have no result yet.
pub(crate) fn has_unanswered_calls(conversation: &Conversation) -> bool {
    !unanswered_calls(conversation).is_empty()
}

/// The calls of the last assistant turn that have no result yet, in order,
/// each with its place in the turn and the number of calls the turn made.
fn unanswered_calls(conversation: &Conversation) -> Vec<(Place, AssistantToolCall)> {
    let Some(position) = conversation
        .messages
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &conversation.messages[position] else {
        return Vec::new();
    };
    // By id and tool: of two calls the model gave one id, the answered
    // one must not hide the other. A result without a name answers by id.
    let answered: BTreeSet<(&str, &str)> = conversation.messages[position + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool {
                tool_call_id, name, ..
            } => Some((tool_call_id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    let made = tool_calls.len();
    tool_calls
        .iter()
        .enumerate()
        .filter(|(_, call)| {
            !answered.contains(&(call.id.as_str(), call.name.as_str()))
                && !answered.contains(&(call.id.as_str(), ""))
        })
        .map(|(position, call)| (Place { position, made }, call.clone()))
        .collect()
}

/// Where a call stands in its turn: its position, and how many calls the
/// turn made (for the turn's limit of calls that run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    position: usize,
    made: usize,
}

/// The envelope ids of a call of `conversation`.
fn ids_for(conversation: &Conversation, tool_call_id: &str) -> EnvelopeIds {
    EnvelopeIds {
        tool_call_id: tool_call_id.into(),
        conversation_id: Some(conversation.id.as_str().into()),
        session_id: conversation.session_id.as_deref().map(Into::into),
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

/// Who a ledger step waits for (`None`: an execution waits for nobody).
fn awaited_at(step: Step) -> Option<AwaitReason> {
    match step {
        Step::Approval => Some(AwaitReason::Approval),
        Step::Client => Some(AwaitReason::Client),
        Step::Human => Some(AwaitReason::Human),
        Step::Execution => None,
    }
}

fn humanize(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0 => format!("{}ms", duration.as_millis()),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
