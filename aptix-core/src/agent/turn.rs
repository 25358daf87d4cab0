//! One model turn: the step's request sent, its stream read (the run's
//! cancellation first, then the model's time limit, then the model's
//! events) and assembled into the assistant message the transcript gets,
//! with the events a reader sees while the turn forms (text, calls
//! opening). A stage of the loop in `run.rs`, kept apart because it is
//! the one place the model is waited on.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;
use std::pin::pin;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::run::{Scope, StepRequest, Tally};
use super::summary::{CallOutcome, RunSummary};
use super::{Agent, AgentEvent, DoneReason, call_ids, composed};
use crate::model::HostedToolEvent;
use crate::model::assembly::{AssembledTurn, CallSeen, TurnAssembler};
use crate::model::{ChatRequest, ModelError};
use crate::transcript::{AssistantToolCall, Conversation, Message, ThinkingBlock};

impl Agent {
    /// Asks the model for the turn of `request`, appends it to
    /// `conversation` as an assistant message, and hands it back: its
    /// calls, with a unique id each, their reasons still in their
    /// arguments. `Break`: why the run ends (cancelled, the model's time
    /// limit, a model error, a limit of the turn).
    pub(super) async fn model_turn(
        &self,
        request: &StepRequest,
        conversation: &mut Conversation,
        scope: &Scope,
        tally: &mut Tally,
    ) -> ControlFlow<DoneReason, AssembledTurn> {
        let inner = &*self.inner;
        let out = &scope.out;
        let catalog = inner.executor.catalog();
        // The fingerprint of the tools this request offers.
        let model_span = tracing::info_span!(
            "model_call",
            iteration = request.iteration,
            tools_fingerprint = request.narrowed.as_ref().unwrap_or(catalog).fingerprint(),
        );
        let model_started = Instant::now();
        // The ids the provider's own calls were shown under: the turn's
        // calls stay clear of them.
        let mut hosted_ids = Vec::new();
        let mut turn = self
            .stream_turn(
                &request.chat,
                &model_span,
                scope,
                &mut tally.summary,
                &mut hosted_ids,
            )
            .await?;
        model_span.in_scope(|| {
            tracing::info!(
                elapsed_ms = model_started.elapsed().as_millis() as u64,
                tool_calls = turn.tool_calls.len(),
                finish = ?turn.finish_reason,
                "model turn finished"
            )
        });
        if let Some(turn_usage) = turn.usage {
            tally.usage += turn_usage;
        }
        if inner.composed.is_some() {
            let number = conversation
                .messages
                .iter()
                .filter(|message| matches!(message, Message::Assistant { .. }))
                .count();
            // An answer that is not the composed object is never shown:
            // the model is told what was wrong and asked again, within
            // the agent's budget; then the run ends.
            let mut again: Option<ChatRequest> = None;
            let mut failures = 0u8;
            let parsed = loop {
                match composed::read(&turn.text, &turn.finish_reason, number) {
                    Ok(parsed) => break parsed,
                    Err(problem) if failures >= inner.settings.composed_retries => {
                        tracing::warn!(%problem, failures, "the model's answer is still not the composed object it was asked for; the run ends");
                        return ControlFlow::Break(DoneReason::ModelError(ModelError::Protocol(
                            format!(
                                "the model's answer was not the composed object it was asked for, {} times (the last: {problem})",
                                failures + 1
                            ),
                        )));
                    }
                    Err(problem) => {
                        failures += 1;
                        tracing::warn!(%problem, failures, "the model's answer is not the composed object it was asked for; it is asked again");
                        let retry = again.get_or_insert_with(|| request.chat.clone());
                        retry
                            .messages
                            .extend(composed::correction(&turn.text, &problem));
                        turn = self
                            .stream_turn(
                                retry,
                                &model_span,
                                scope,
                                &mut tally.summary,
                                &mut hosted_ids,
                            )
                            .await?;
                        if let Some(turn_usage) = turn.usage {
                            tally.usage += turn_usage;
                        }
                    }
                }
            };
            // The assembler bounds a native turn's calls as they stream;
            // a composed turn's come whole, out of the answer, and are held
            // to the same limits.
            if let Err(exceeded) = inner
                .settings
                .limits
                .check_whole(&parsed.message, &parsed.calls)
            {
                model_span
                    .in_scope(|| tracing::warn!(%exceeded, "the model turn went past a limit"));
                return ControlFlow::Break(DoneReason::LimitExceeded(exceeded.to_string()));
            }
            turn.text = parsed.message;
            turn.tool_calls = parsed.calls;
            if !turn.text.is_empty() {
                out.emit(AgentEvent::TextDelta(turn.text.clone())).await;
            }
        }
        let before: Vec<String> = turn.tool_calls.iter().map(|call| call.id.clone()).collect();
        for (original, renamed) in
            call_ids::make_ids_unique(&mut turn.tool_calls, &conversation.messages, &hosted_ids)
        {
            tracing::warn!(
                model_id = %original,
                id = %renamed,
                "the model reused a tool call id; the call goes by a new one"
            );
        }
        keyed_blocks_follow(&mut turn.thinking, &before, &turn.tool_calls);
        conversation.messages.push(Message::Assistant {
            content: turn.text.clone(),
            tool_calls: turn
                .tool_calls
                .iter()
                .map(|call| AssistantToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .collect(),
            thinking: std::mem::take(&mut turn.thinking),
            server_blocks: std::mem::take(&mut turn.server_blocks),
            runnable: None,
        });
        ControlFlow::Continue(turn)
    }

    /// Sends `request` and reads its stream to the end, assembled. Text
    /// and the calls forming are shown as they come (a composed answer is
    /// JSON: it is shown once it is read). `Break`: why the run ends.
    async fn stream_turn(
        &self,
        request: &ChatRequest,
        model_span: &tracing::Span,
        scope: &Scope,
        summary: &mut RunSummary,
        hosted_ids: &mut Vec<String>,
    ) -> ControlFlow<DoneReason, AssembledTurn> {
        let inner = &*self.inner;
        let out = &scope.out;
        let mut assembler = TurnAssembler::with_limits(inner.settings.limits);
        let mut events = inner.model.stream(request);
        let mut model_deadline = pin!(model_deadline(inner.settings.model_call_timeout));
        let mut cancelled = pin!(scope.cancellation.cancelled());
        // Calls seen forming in this turn, by place (the model may
        // reuse an id): whether their arguments may be shown.
        let mut seen = Vec::new();
        let mut shown: Vec<bool> = Vec::new();
        // The provider's own calls of this turn, by id, since they started:
        // the summary counts them with the agent's.
        let mut hosted = HostedCalls::new(&request.messages);
        loop {
            // Cancellation first, then the deadline, then the model.
            let next = tokio::select! {
                biased;
                () = &mut cancelled => {
                    return ControlFlow::Break(DoneReason::Cancelled);
                }
                () = &mut model_deadline => {
                    model_span.in_scope(|| {
                        tracing::warn!(
                            limit_ms = inner
                                .settings
                                .model_call_timeout
                                .map_or(0, |limit| limit.as_millis() as u64),
                            "the model call took too long and was ended"
                        )
                    });
                    return ControlFlow::Break(DoneReason::ModelError(ModelError::Timeout));
                }
                next = std::future::poll_fn(|cx| {
                    let _entered = model_span.enter();
                    events.poll_next_unpin(cx)
                }) => next,
            };
            let Some(event) = next else { break };
            match event {
                Ok(event) => {
                    // A composed answer is JSON; its message is
                    // shown once it is read.
                    if let crate::model::ModelEvent::TextDelta(text) = &event
                        && inner.composed.is_none()
                    {
                        out.emit(AgentEvent::TextDelta(text.clone())).await;
                    }
                    let display = match &event {
                        crate::model::ModelEvent::Hosted(event) => {
                            Some(self.hosted_shown(event, hosted.saw(event, summary)))
                        }
                        event => self.shown(event),
                    };
                    if let Some(display) = display {
                        out.emit(display).await;
                    }
                    let streams_a_call = inner.composed.is_none()
                        && matches!(event, crate::model::ModelEvent::ToolCallDelta(_));
                    let pushed = if streams_a_call {
                        assembler.push_seen(event, Some(&mut seen))
                    } else {
                        assembler.push(event)
                    };
                    for call in seen.drain(..) {
                        if let Some(event) = self.forming(call, &mut shown) {
                            out.emit(event).await;
                        }
                    }
                    if let Err(error) = pushed {
                        return ControlFlow::Break(match assembler.limit_exceeded() {
                            Some(exceeded) => {
                                model_span.in_scope(|| tracing::warn!(%exceeded, "the model turn went past a limit"));
                                DoneReason::LimitExceeded(exceeded.to_string())
                            }
                            None => DoneReason::ModelError(error),
                        });
                    }
                }
                Err(error) => {
                    return ControlFlow::Break(DoneReason::ModelError(error));
                }
            }
        }
        drop(events);
        hosted_ids.extend(hosted.shown_ids().map(str::to_owned));
        hosted.unfinished(summary);
        match assembler.finish() {
            Ok(turn) => ControlFlow::Continue(turn),
            Err(error) => ControlFlow::Break(DoneReason::ModelError(error)),
        }
    }

    /// What a person is shown of a model event besides its text and its
    /// calls forming: reasoning as it streams (never a redacted or encrypted
    /// block: those have no text), and the tools the provider ran, as the
    /// calls and results of `executor = provider` tools. Reasoning is shown,
    /// never logged.
    fn shown(&self, event: &crate::model::ModelEvent) -> Option<AgentEvent> {
        use crate::model::{ModelEvent, ThinkingDelta};
        match event {
            ModelEvent::ThinkingDelta(
                ThinkingDelta::Text { text, .. }
                | ThinkingDelta::Reasoning { text, .. }
                | ThinkingDelta::Preview { text },
            ) if !text.is_empty() => Some(AgentEvent::ReasoningDelta(text.clone())),
            _ => None,
        }
    }

    /// A tool the provider ran, shown as a call and a result of its
    /// `executor = provider` tool, under `id` ([`HostedCalls::saw`]).
    fn hosted_shown(&self, event: &HostedToolEvent, id: String) -> AgentEvent {
        match event {
            HostedToolEvent::Called { name, input, .. } => AgentEvent::ToolCallStart {
                id,
                reasoning: None,
                kind: self.kind_of(name),
                name: name.clone(),
                arguments: input.clone(),
            },
            HostedToolEvent::Finished {
                name,
                output,
                is_error,
                ..
            } => AgentEvent::ToolCallResult {
                id,
                kind: self.kind_of(name),
                name: name.clone(),
                envelope: if *is_error {
                    serde_json::json!({
                        "ok": false,
                        "error": {
                            "code": "failed",
                            "message": "the provider reports that its tool failed",
                            "details": output,
                        },
                    })
                } else {
                    serde_json::json!({ "ok": true, "result": output })
                },
            },
        }
    }

    /// The event for a call forming in the model's stream: opened with its
    /// kind, then its argument text, only when the tool is known and
    /// declares no secrets. A call is looked up by its place in the turn,
    /// never by its id: a model may give two calls one id, and one of them
    /// may hold secrets. A name the agent does not know shows no argument
    /// text: it may be the first piece of one it does (`lo`, then `gin`).
    fn forming(&self, seen: CallSeen, shown: &mut Vec<bool>) -> Option<AgentEvent> {
        match seen {
            CallSeen::Opened { call, id, name } => {
                if shown.len() <= call {
                    shown.resize(call + 1, false);
                }
                shown[call] = self.inner.executor.catalog().get(&name).is_some()
                    && !self.redactions(&name).hides_anything();
                Some(AgentEvent::ToolCallOpened {
                    kind: self.kind_of(&name),
                    id,
                    name,
                })
            }
            CallSeen::Arguments { call, id, text } => shown
                .get(call)
                .copied()
                .unwrap_or(false)
                .then_some(AgentEvent::ToolCallDelta { id, text }),
        }
    }
}

/// The calls a provider ran during one turn: counted in the run's summary
/// like the agent's own, each from its start to its result, and shown
/// under ids a reader can trust.
///
/// The provider picks a hosted call's id, and may send none, one id twice,
/// or the id of a call of the conversation: a renderer that keys calls by
/// id would then show the provider's result as that call's. Such an id is
/// shown as a fresh `hosted_<uuid>` instead (the kept blocks keep the
/// provider's own). Calls are looked up by id in a map: a turn may hold
/// tens of thousands of them within its byte limit.
struct HostedCalls<'a> {
    /// Calls started and not yet finished, by the provider's id.
    started: HashMap<String, VecDeque<(String, String, Instant)>>,
    /// The conversation before the turn, whose calls' ids are taken.
    earlier: &'a [Message],
    /// Every id shown or used by a call of the conversation, gathered at
    /// the turn's first hosted call: a turn without one (most) pays
    /// nothing for it.
    used: Option<HashSet<String>>,
    /// The ids this turn's hosted calls were shown under.
    shown: Vec<String>,
}

impl<'a> HostedCalls<'a> {
    fn new(earlier: &'a [Message]) -> Self {
        HostedCalls {
            started: HashMap::new(),
            earlier,
            used: None,
            shown: Vec::new(),
        }
    }

    /// The ids taken so far.
    fn used(&mut self) -> &mut HashSet<String> {
        let earlier = self.earlier;
        self.used.get_or_insert_with(|| {
            earlier
                .iter()
                .flat_map(|message| match message {
                    Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                    _ => &[],
                })
                .map(|call| call.id.clone())
                .collect()
        })
    }

    /// Notes `event` and returns the id it is shown under.
    fn saw(&mut self, event: &HostedToolEvent, summary: &mut RunSummary) -> String {
        match event {
            HostedToolEvent::Called { id, name, .. } => {
                let shown = if id.is_empty() || !self.used().insert(id.clone()) {
                    let fresh = format!("hosted_{}", uuid::Uuid::new_v4().simple());
                    self.used().insert(fresh.clone());
                    fresh
                } else {
                    id.clone()
                };
                self.started.entry(id.clone()).or_default().push_back((
                    shown.clone(),
                    name.clone(),
                    Instant::now(),
                ));
                self.shown.push(shown.clone());
                shown
            }
            HostedToolEvent::Finished {
                id, name, is_error, ..
            } => {
                let started = self.started.get_mut(id).and_then(VecDeque::pop_front);
                let (shown, took) = match started {
                    Some((shown, _, at)) => (shown, at.elapsed()),
                    // A result of no call the provider started: shown
                    // under an id of its own, never under another's.
                    None => {
                        let fresh = if id.is_empty() || self.used().contains(id) {
                            format!("hosted_{}", uuid::Uuid::new_v4().simple())
                        } else {
                            id.clone()
                        };
                        self.used().insert(fresh.clone());
                        self.shown.push(fresh.clone());
                        (fresh, Duration::ZERO)
                    }
                };
                let outcome = if *is_error {
                    CallOutcome::Failed
                } else {
                    CallOutcome::Ok
                };
                summary.record_call(name, took, outcome);
                shown
            }
        }
    }

    /// The ids the turn's hosted calls were shown under, for the turn's
    /// own calls to stay clear of.
    fn shown_ids(&self) -> impl Iterator<Item = &str> {
        self.shown.iter().map(String::as_str)
    }

    /// Calls the provider started and never reported on: they happened,
    /// and count, without an outcome of their own.
    fn unfinished(self, summary: &mut RunSummary) {
        for (_, name, at) in self.started.into_values().flatten() {
            summary.record_call(&name, at.elapsed(), CallOutcome::Ok);
        }
    }
}

/// What the provider keyed by a call's id (a Gemini thought signature)
/// follows the call when the call was given a new id: the `n`-th block of
/// an id belongs to the `n`-th call of that id in the turn. Without it the
/// signature would go back on no call, and Gemini refuses the request.
fn keyed_blocks_follow(
    thinking: &mut [ThinkingBlock],
    before: &[String],
    calls: &[crate::model::adapter::AssembledCall],
) {
    // Read before any is changed: the blocks keyed by each id, in order.
    let keyed: Vec<(usize, String)> = thinking
        .iter()
        .enumerate()
        .filter_map(|(at, block)| match block {
            ThinkingBlock::Gemini {
                tool_call_id: Some(id),
                ..
            } => Some((at, id.clone())),
            _ => None,
        })
        .collect();
    for (place, (original, call)) in before.iter().zip(calls).enumerate() {
        if *original == call.id {
            continue;
        }
        let nth = before[..place].iter().filter(|id| *id == original).count();
        let block = keyed
            .iter()
            .filter(|(_, id)| id == original)
            .nth(nth)
            .map(|(at, _)| *at);
        if let Some(ThinkingBlock::Gemini { tool_call_id, .. }) =
            block.and_then(|at| thinking.get_mut(at))
        {
            *tool_call_id = Some(call.id.clone());
        }
    }
}

/// Completes after `limit`, or never.
async fn model_deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}
