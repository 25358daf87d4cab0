//! Settling: before each model turn, the ledger turned back into results
//! for every unanswered call of the last assistant turn. A recorded result
//! is read back; an approval runs the approved call (or prepares the
//! approved client call); a denial, an expiry, a client's or a person's
//! answer becomes the call's result; a call never recorded runs now, through
//! the hooks and the approval policy as the stopped run would have run it.
//! A call a crash interrupted while it ran is `recover`'s to answer.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use super::messages::{interrupted_message, not_this_call_message};
use super::writes::same_arguments;
use super::{Ledger, Made};
use crate::agent::{
    After, AgentEvent, Before, CallResult, ResultText, SuspendedCall, kept_runnable, redact,
    requested, split_reasoning,
};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::durable::lease::now_ms;
use crate::durable::resolve::Resolution;
use crate::envelope::{ARGUMENTS_CHANGED_BY_APPROVER, Envelope, EnvelopeIds, JsonText};
use crate::error::ErrorCode;
use crate::executor::{Awaiting, Outcome, ToolCall, humanize};
use crate::meta::{AwaitReason, Gate};
use crate::store::{CallRecord, CallState, Step, StoreError};
use crate::transcript::{AssistantToolCall, Conversation, Message};

impl Ledger {
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
                CallResult::Suspended(awaiting) => {
                    let mut suspended = SuspendedCall::new(
                        call.id.clone(),
                        call.name.clone(),
                        awaiting,
                        self.agent.redactions(&call.name),
                    );
                    // As a live run reports it: with the model's reason.
                    suspended.reasoning =
                        split_reasoning(&call.arguments).and_then(|(_, reasoning)| reasoning);
                    waiting.push(suspended);
                }
            }
        }
        Ok(settlement)
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
        // Kept with every row this settling writes, as the live run did.
        let reasoning = split_reasoning(&call.arguments).and_then(|(_, reasoning)| reasoning);
        let made = Made {
            requested: Some(requested),
            reasoning: reasoning.as_deref(),
        };
        // The tool sees the reason as the live run's call did
        // (`ToolContext::reasoning`), whichever path runs it here: after an
        // approval, after a crash, or never recorded.
        let context = &*context.reasoned(reasoning.as_deref());
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
                    .execute_recorded_as(&call_now, context, gate, None, made)
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
                .record_outcome(&call_now, &conversation.id, outcome, None, made)
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
        let (name, arguments, gate) = match steered {
            Ok(steered) => steered,
            Err(decided) => return Ok(decided),
        };
        let call_now = ToolCall::new(call.id.as_str(), name, arguments);
        steering.ran = Some(call_now.clone());
        self.execute_recorded_as(&call_now, context, gate, None, made)
            .await
    }

    /// What the hooks and the approval policy make of a call of `name`
    /// that settling is about to run: the call to run (a hook may rewrite
    /// its arguments, or rename an unknown name to a tool of `runnable`) and
    /// the gate the policy holds it to; or the call's result, when a
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
    ) -> Result<(String, String, Gate), CallResult> {
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
        let gate = if self.agent.has_approval_policy() {
            self.agent
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
                .map_err(finished)?
        } else {
            Gate::Declared
        };
        Ok((name, arguments, gate))
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
}

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
pub(super) struct Steering {
    pub(super) ran: Option<ToolCall>,
    halt: Option<(String, String)>,
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
pub(super) fn ids_for(conversation: &Conversation, tool_call_id: &str) -> EnvelopeIds {
    EnvelopeIds {
        tool_call_id: tool_call_id.into(),
        conversation_id: Some(conversation.id.as_str().into()),
        session_id: conversation.session_id.as_deref().map(Into::into),
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
