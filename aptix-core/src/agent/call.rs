//! One tool call of a turn: run in a task of its own, its time limit kept
//! from outside that task, its result in the form the transcript takes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;

use super::members::Members;
use super::steer::Before;
use super::watchdog;
use super::{Agent, Journal};
use crate::catalog::Catalog;
use crate::content::Content;
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::envelope::{Envelope, EnvelopeError, EnvelopeIds};
use crate::error::ErrorCode;
use crate::executor::{Awaiting, Outcome, ToolCall, humanize};
use crate::meta::Gate;
use crate::model::ToolChoice;
use crate::model::assembly::{AssembledCall, CallStatus};
use crate::schema::meta_fields::REASONING;
use crate::transcript::Message;

/// What one executed call contributes to the transcript and the events.
pub(super) struct Executed {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) result: CallResult,
    /// What the model sees instead of the result, when a hook rewrote it.
    pub(super) model_text: Option<String>,
    /// A hook that ends the run after this turn, and its message.
    pub(super) halt: Option<(String, String)>,
}

/// How a call of a turn ended: with a result, or waiting.
pub(crate) enum CallResult {
    /// It has its result.
    Finished(ResultText),
    /// It waits for an approval, a client or a person.
    Suspended(Awaiting),
}

/// A finished call's result as the transcript and the events need it.
pub(crate) struct ResultText {
    pub(crate) json: String,
    pub(crate) ok: bool,
    /// The tool asked for another try (`ErrorCode::Retry`): known when the
    /// envelope is made, so the loop's retry budget reads no JSON.
    pub(crate) retry: bool,
    /// What the tool attached for the model to see.
    pub(crate) attachments: Vec<Content>,
}

impl ResultText {
    /// Takes the envelope's JSON without copying it (it was written when
    /// the envelope was made).
    pub(crate) fn from_envelope(mut envelope: Envelope) -> Self {
        let ok = envelope.is_ok();
        let retry = envelope.error_code() == Some(ErrorCode::Retry);
        let attachments = envelope.take_attachments();
        ResultText {
            json: envelope.into_json_string(),
            ok,
            retry,
            attachments,
        }
    }

    /// A result read back as JSON text (the ledger's copy,
    /// [`Envelope::to_stored_json`]): failed unless it says `"ok": true`.
    pub(crate) fn from_stored(json: String) -> Self {
        if Envelope::may_have_attachments(&json)
            && let Ok(envelope) = serde_json::from_str::<Envelope>(&json)
        {
            return ResultText::from_envelope(envelope);
        }
        let value = serde_json::from_str::<Value>(&json).ok();
        let ok = value
            .as_ref()
            .and_then(|value| value.get("ok").and_then(Value::as_bool))
            .unwrap_or(false);
        let retry = value.is_some_and(|value| value["error"]["code"] == ErrorCode::Retry.as_str());
        ResultText {
            json,
            ok,
            retry,
            attachments: Vec::new(),
        }
    }

    pub(crate) fn to_value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or_else(|_| Value::String(self.json.clone()))
    }
}

impl Agent {
    /// Why a call of a turn may not run, decided before any call of the
    /// turn runs, so that a durable run stores the decision with the turn
    /// and a revival reads it back instead of deciding again: past the
    /// turn's limit (`over` is `(calls made, calls allowed)`), or a tool of
    /// the agent that `runnable` (the step's offer and tool choice) leaves
    /// out. `None`: the call goes on to the hooks, the approval policy and
    /// the executor (an unknown name is theirs to answer or repair).
    pub(super) fn refusal(
        &self,
        call: &AssembledCall,
        over: Option<(usize, usize)>,
        runnable: Option<&Catalog>,
        choice: &ToolChoice,
        ids: impl FnOnce() -> EnvelopeIds,
    ) -> Option<Envelope> {
        if let Some((made, allowed)) = over {
            return Some(Envelope::error(
                ids(),
                ErrorCode::Failed,
                format!(
                    "This turn made {made} tool calls and at most {allowed} run per turn, so this call was not run. Make it again in a later turn if it is still needed."
                ),
            ));
        }
        let runnable = runnable?;
        if runnable.entry(&call.name).is_some()
            || self.inner.executor.catalog().entry(&call.name).is_none()
        {
            return None;
        }
        let available: Vec<&str> = runnable.names().collect();
        let available_text = if available.is_empty() {
            "none".to_owned()
        } else {
            available.join(", ")
        };
        let message = match choice {
            ToolChoice::None => format!(
                "No tool may be called at this step, so this call to `{}` was not run. Answer without calling a tool.",
                call.name
            ),
            ToolChoice::Tool(only) => format!(
                "Only `{only}` may be called at this step, so this call to `{}` was not run.",
                call.name
            ),
            _ if self.searches_tools() => format!(
                "The tool `{}` is not loaded yet, so this call was not run. Search for the tools you need first; the tools you may call now: {available_text}.",
                call.name,
            ),
            _ => format!(
                "The tool `{}` is not available at this step, so this call was not run. The tools you may call now: {available_text}.",
                call.name,
            ),
        };
        Some(Envelope::error_with(
            ids(),
            EnvelopeError {
                code: ErrorCode::UnknownTool,
                message,
                details: Some(serde_json::json!({ "available": available })),
            },
        ))
    }

    /// [`Agent::refusal`] for a call of a stored turn that was never
    /// recorded (a revival after a crash): `(position, made)` is its place
    /// in the turn, `runnable` the tools the turn kept. Its step's tool
    /// choice is not kept, so the message is the one for a tool not
    /// offered.
    pub(crate) fn refusal_of_stored(
        &self,
        name: &str,
        (position, made): (usize, usize),
        runnable: Option<&Catalog>,
        ids: EnvelopeIds,
    ) -> Option<Envelope> {
        let call = AssembledCall {
            id: ids.tool_call_id.to_string(),
            name: name.to_owned(),
            arguments: String::new(),
            status: CallStatus::Complete,
        };
        let allowed = self.inner.settings.max_calls_per_turn;
        let over = (position >= allowed).then_some((made, allowed));
        self.refusal(&call, over, runnable, &ToolChoice::Auto, || ids)
    }

    /// Runs one call of a turn in a task of its own, so that a tool that
    /// blocks its thread (sync I/O, a CPU loop) stalls neither the other
    /// calls of the turn nor this call's time limit: the limit is kept here,
    /// outside the task, and answers `timeout` even while the tool's thread
    /// is still blocked (the task is aborted, and stops at its next await).
    /// The limit counts only while the executor runs the call (each try of
    /// an idempotent call's transient retries, and the waits between them):
    /// hooks and the approval policy, before and after, take what they take.
    /// `refused` is the call's [`Agent::refusal`], answered without running;
    /// `runnable` the tools a hook may rename it into; `requested` its
    /// identity in the transcript ([`requested`]), recorded with it.
    /// `transcript` is the conversation so far, for the approval policy
    /// (`None` without one); `reasoning` the model's reason for the call,
    /// which the tool reads from its context.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn execute_in_task(
        &self,
        call: AssembledCall,
        refused: Option<Envelope>,
        runnable: Option<&Catalog>,
        requested: String,
        context: &ToolContext,
        reasoning: Option<String>,
        conversation_id: &str,
        journal: Option<Arc<dyn Journal>>,
        transcript: Option<Arc<[Message]>>,
    ) -> Executed {
        let context = &*context.reasoned(reasoning.as_deref());
        let ids = |id: &str| EnvelopeIds {
            tool_call_id: id.into(),
            conversation_id: Some(conversation_id.into()),
            session_id: context.session_id().map(Into::into),
        };
        let finished = |id: String, name: String, envelope: Envelope| Executed {
            id,
            name,
            result: CallResult::Finished(ResultText::from_envelope(envelope)),
            model_text: None,
            halt: None,
        };
        if let Some(envelope) = refused {
            return finished(call.id, call.name, envelope);
        }
        let offered = runnable;
        if call.status != CallStatus::Complete || tokio::runtime::Handle::try_current().is_err() {
            // Nothing runs (or there is no runtime to spawn on): inline.
            return self
                .execute(
                    call,
                    &requested,
                    context,
                    conversation_id,
                    journal.as_deref(),
                    transcript.as_deref(),
                    offered,
                    None,
                )
                .await;
        }
        let limit = self.call_time_limit(&call.name);
        let idempotent = self
            .inner
            .executor
            .catalog()
            .get(&call.name)
            .is_some_and(ToolDefinition::idempotent);
        let (id, name) = (call.id.clone(), call.name.clone());
        let (phase_tx, mut phase) = watch::channel(Phase::Deciding);
        // Not aborted when this wait is dropped (a loop dropped mid-turn):
        // the call runs to its end in its task, never stopped half-done at
        // some await of the tool's. Only its time limit, below, aborts it.
        let mut task = {
            let agent = self.clone();
            let context = context.clone();
            let conversation_id = conversation_id.to_owned();
            let journal = journal.clone();
            let offered = offered.cloned();
            // Inside the run's span (and under its subscriber, on whichever
            // worker runs it): the call's `tool_call` span nests under
            // `agent_run`, as a trace viewer shows it.
            let body = async move {
                agent
                    .execute(
                        call,
                        &requested,
                        &context,
                        &conversation_id,
                        journal.as_deref(),
                        transcript.as_deref(),
                        offered.as_ref(),
                        Some(&phase_tx),
                    )
                    .await
            };
            tokio::spawn(
                body.instrument(tracing::Span::current())
                    .with_current_subscriber(),
            )
        };
        // The grace lets a tool that does reach an await point be stopped
        // by the executor's own limit, which also records it in the ledger.
        let joined = match limit {
            Some(limit) => {
                let budget = crate::executor::execution_budget(
                    limit.saturating_add(TIMEOUT_GRACE),
                    idempotent,
                );
                wait_in_phases(&mut task, &mut phase, budget)
                    .await
                    .map_err(|()| limit)
            }
            None => Ok((&mut task).await),
        };
        match joined {
            Ok(Ok(executed)) => executed,
            Ok(Err(error)) => {
                tracing::error!(%error, tool = %name, tool_call_id = %id, "the task running the call failed");
                let envelope = Envelope::error(
                    ids(&id),
                    ErrorCode::Internal,
                    crate::error::INTERNAL_MESSAGE,
                );
                finished(id, name, envelope)
            }
            Err(limit) => {
                task.abort();
                tracing::warn!(
                    tool = %name,
                    tool_call_id = %id,
                    limit_ms = limit.as_millis() as u64,
                    "tool timed out without yielding (it blocks its thread); its task is aborted"
                );
                let envelope = Envelope::error(
                    ids(&id),
                    ErrorCode::Timeout,
                    format!(
                        "The tool `{name}` did not finish within {} and was stopped.",
                        humanize(limit)
                    ),
                );
                // The aborted task will never close the call's record: the
                // journal closes it with the result the model gets. (Should
                // the tool still finish in the poll it is stuck in, its own
                // close finds the record settled and drops its result.)
                if let Some(journal) = &journal {
                    journal.abandoned(conversation_id, &id, envelope.to_json_string());
                }
                finished(id, name, envelope)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        call: AssembledCall,
        requested: &str,
        context: &ToolContext,
        conversation_id: &str,
        journal: Option<&dyn Journal>,
        transcript: Option<&[Message]>,
        offered: Option<&Catalog>,
        phase: Option<&watch::Sender<Phase>>,
    ) -> Executed {
        let enter = |next: Phase| {
            if let Some(phase) = phase {
                phase.send_replace(next);
            }
        };
        let ids = || EnvelopeIds {
            tool_call_id: call.id.as_str().into(),
            conversation_id: Some(conversation_id.into()),
            session_id: context.session_id().map(Into::into),
        };
        let finished =
            |envelope: Envelope| CallResult::Finished(ResultText::from_envelope(envelope));
        let mut model_text = None;
        let mut halt = None;
        let result = match call.status {
            CallStatus::Truncated => finished(Envelope::error(
                ids(),
                ErrorCode::InvalidJson,
                "The arguments were cut off because the model reached its output token limit. Call the tool again with complete (and, if possible, shorter) arguments.",
            )),
            CallStatus::Unnamed => finished(Envelope::error(
                ids(),
                ErrorCode::UnknownTool,
                "The tool call has no tool name. Call a tool by its name.",
            )),
            CallStatus::Complete => 'run: {
                // Hooks may repair, rewrite, answer, deny or halt first.
                let (name, arguments, validated) = if self.has_hooks() {
                    match self
                        .before_run(
                            &call.id,
                            &call.name,
                            &call.arguments,
                            context,
                            offered,
                            &ids,
                        )
                        .await
                    {
                        Before::Run {
                            name,
                            arguments,
                            validated,
                        } => (Some(name), Some(arguments), validated),
                        Before::Done(envelope) => break 'run finished(envelope),
                        Before::Halted {
                            by,
                            message,
                            envelope,
                        } => {
                            halt = Some((by, message));
                            break 'run finished(envelope);
                        }
                    }
                } else {
                    (None, None, None)
                };
                let tool_call = ToolCall::new(
                    call.id.as_str(),
                    name.as_deref().unwrap_or(call.name.as_str()),
                    arguments.as_deref().unwrap_or(call.arguments.as_str()),
                );
                // The approval policy, after the hooks: it sees the call
                // as it will run.
                let gate = if self.has_approval_policy() {
                    let gate = self
                        .gate(
                            &call.id,
                            &tool_call.name,
                            &tool_call.arguments,
                            validated.as_ref(),
                            context,
                            transcript.unwrap_or_default(),
                            &ids,
                        )
                        .await;
                    match gate {
                        Ok(gate) => gate,
                        Err(denied) => break 'run finished(denied),
                    }
                } else {
                    Gate::Declared
                };
                // `ran`: the tool's own result, which the hooks' `after_call` sees.
                enter(Phase::Running {
                    since: tokio::time::Instant::now(),
                });
                // Entering `Running` woke the wait that keeps the call's
                // limit (`wait_in_phases`), and on a multi-threaded runtime
                // a wake from a worker lands in that worker's LIFO slot,
                // which no other worker steals. A tool that then blocks
                // this worker would hold the wait there, already woken, so
                // its timer could not wake it again: the limit would pass
                // unseen. Yielding once lets the wait run first and arm its
                // timer (`agent_limits::a_blocking_tool_times_out_when_the_run_is_a_task`).
                tokio::task::yield_now().await;
                let (result, ran) = if let Some(journal) = journal {
                    match journal.execute(&tool_call, requested, context, gate).await {
                        Ok(result) => (result, true),
                        Err(error) => {
                            tracing::error!(%error, tool = %call.name, tool_call_id = %call.id, "the call could not be recorded, so it was not run");
                            // The journal's error means the call did not run.
                            let envelope = Envelope::error(
                                ids(),
                                ErrorCode::Failed,
                                "This call was not run: the conversation store could not record it. Nothing happened; call the tool again if it is still needed.",
                            );
                            (finished(envelope), false)
                        }
                    }
                } else {
                    let execution = self
                        .inner
                        .executor
                        .execute_gated(&tool_call, context, gate)
                        .await;
                    match execution.outcome {
                        Outcome::Final(envelope) => (finished(envelope), true),
                        Outcome::Awaiting(awaiting) => (CallResult::Suspended(awaiting), true),
                        // Provider tools run at the provider, which returns their
                        // results itself; there is nothing to add here.
                        Outcome::PassThrough => {
                            let envelope = Envelope::error(
                                ids(),
                                ErrorCode::Failed,
                                "This tool runs at the model provider and cannot be called as a function here.",
                            );
                            (finished(envelope), false)
                        }
                    }
                };
                enter(Phase::Finishing);
                if ran
                    && let (CallResult::Finished(finished), Some(validated), Some(definition)) = (
                        &result,
                        &validated,
                        self.inner.executor.catalog().get(&tool_call.name),
                    )
                {
                    let after = self
                        .after_run(
                            &call.id,
                            definition,
                            validated,
                            context,
                            finished.to_value(),
                        )
                        .await;
                    model_text = after.model_text;
                    halt = after.halt;
                }
                result
            }
        };
        Executed {
            id: call.id,
            name: call.name,
            result,
            model_text,
            halt,
        }
    }
}

/// Takes `_reasoningForCall` out of a call's arguments: the model's reason
/// for the call, which is no argument of the tool. Arguments that do not
/// name it once, or are no JSON object, are left as they are (and validated
/// as they are: a repeated member is refused there).
pub(super) fn take_reasoning(call: &mut AssembledCall) -> Option<String> {
    let (arguments, reasoning) = split_reasoning(&call.arguments)?;
    call.arguments = arguments;
    reasoning
}

/// `arguments` without `_reasoningForCall`, and the reason it held; `None`
/// when the text does not name it exactly once in one JSON object. The
/// other members are kept as they were written, repeats included (see
/// [`Members`]): what the validator sees is what the model sent, less its
/// reason.
pub(crate) fn split_reasoning(arguments: &str) -> Option<(String, Option<String>)> {
    if !arguments.contains(REASONING) {
        return None;
    }
    let mut members = Members::parse(arguments)?;
    let reasoning = members.take_one(REASONING)?;
    let reason = match serde_json::from_str::<Value>(reasoning.get()) {
        Ok(Value::String(text)) => Some(text),
        Ok(Value::Null) | Err(_) => None,
        Ok(other) => Some(other.to_string()),
    };
    Some((members.to_text(), reason))
}

/// The identity of a call as the model made it (its tool name and argument
/// text in the transcript), recorded with every ledger row of the call: a
/// hook may rename or rewrite it and `_reasoningForCall` is taken out
/// before it is recorded, so the row's tool and arguments need not be the
/// transcript's, and this is what ties the two together.
pub(crate) fn requested(name: &str, arguments: &str) -> String {
    crate::digest::sha256_hex_of_parts([name.as_bytes(), arguments.as_bytes()])
}

/// How much longer than a call's time limit the loop waits for its task
/// before answering `timeout` itself.
const TIMEOUT_GRACE: Duration = Duration::from_millis(250);

/// Where a call's task stands: its time limit counts only while the
/// executor runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Hooks' `before_call` and the approval policy.
    Deciding,
    /// The executor (and the journal's records around it), since `since`.
    Running { since: tokio::time::Instant },
    /// Hooks' `after_call`.
    Finishing,
}

/// Waits for `task`, timing out only while it is in [`Phase::Running`], for
/// at most `budget` from the moment it entered it. `Err` when it ran out.
///
/// The deadline is taken from when the task says it started running, and
/// the phase is read again at least every [`PHASE_CHECK`] while the task
/// decides. The deadline is kept twice: by the runtime's timer, and by the
/// watchdog thread (`watchdog.rs`), since a tool that blocks its worker
/// may leave no worker driving the runtime's timer.
async fn wait_in_phases(
    task: &mut tokio::task::JoinHandle<Executed>,
    phase: &mut watch::Receiver<Phase>,
    budget: Duration,
) -> Result<Result<Executed, tokio::task::JoinError>, ()> {
    loop {
        let now = *phase.borrow_and_update();
        let deadline = match now {
            Phase::Finishing => return Ok(task.await),
            // A budget past what an `Instant` holds is no limit.
            Phase::Running { since } => match since.checked_add(budget) {
                Some(deadline) => Some(deadline),
                None => return Ok(task.await),
            },
            Phase::Deciding => None,
        };
        let wake = deadline.unwrap_or_else(|| tokio::time::Instant::now() + PHASE_CHECK);
        // The runtime's timer, and the watchdog's for a deadline: a tool
        // that blocks its worker may leave nobody to drive the runtime's.
        let watchdog = async {
            match deadline {
                Some(deadline) => watchdog::at(deadline.into_std()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            joined = &mut *task => return Ok(joined),
            changed = phase.changed() => {
                // The task dropped its end: it is over, or about to be.
                if changed.is_err() {
                    return Ok(task.await);
                }
            }
            // Out of time; or, while deciding, time to read the phase again.
            () = tokio::time::sleep_until(wake) => {
                if deadline.is_some() {
                    return Err(());
                }
            }
            () = watchdog => return Err(()),
        }
    }
}

/// How often a call's phase is read again while hooks and the policy decide.
const PHASE_CHECK: Duration = Duration::from_millis(100);
