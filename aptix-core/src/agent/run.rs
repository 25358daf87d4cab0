//! The loop over model turns: ask the model, run the calls it made, feed
//! their results back, until it answers without calling tools.

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::live_feed::{self, Live};
use super::step::{self, Step};
use super::summary::{CallOutcome, Framing, RunSummary};
use super::{
    Agent, AgentEvent, AgentStream, CallResult, DoneReason, Input, Journal, SuspendedCall,
    call_ids, redact,
};
use super::{call, composed};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::{Envelope, EnvelopeIds};
use crate::error::ErrorCode;
use crate::model::assembly::{CallSeen, TurnAssembler};
use crate::model::{ChatRequest, ModelError, ToolChoice, Usage};
use crate::transcript::{AssistantToolCall, Conversation, Message};

impl Agent {
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

    /// The loop itself. With a `journal` (durable runs) every call is
    /// recorded through it and the transcript is checkpointed after the
    /// model's turn and after its results.
    pub(crate) fn run_loop<'a>(
        &'a self,
        conversation: &'a mut Conversation,
        input: Input,
        cancellation: CancellationToken,
        journal: Option<Arc<dyn Journal>>,
    ) -> AgentStream<'a> {
        let inner = &*self.inner;
        let span = tracing::info_span!(
            "agent_run",
            conversation_id = %conversation.id,
            catalog_fingerprint = %inner.executor.catalog().fingerprint(),
        );
        let started = Instant::now();
        let stream = crate::generator::generate(move |out| async move {
            let mut usage = Usage::default();
            let mut summary = RunSummary::default();
            // What the last request offered, hashed once at the end.
            let mut last_offered: Option<(Option<Catalog>, ToolChoice)> = None;
            // How often each tool asked for another try in this run.
            let mut retried: Vec<(String, u8)> = Vec::new();
            let (live, mut feed) = live_feed::channel();
            let context = self
                .context_for(conversation, &cancellation)
                .with_live(live);
            let mut refused = None;
            match input {
                Input::User(text) => conversation.messages.push(Message::user(text)),
                Input::ToolResults(results) => {
                    match self.check_results(&conversation.messages, &results) {
                        Ok(()) => append_results(conversation, results),
                        Err(problem) => {
                            tracing::warn!(%problem, "results handed in were refused");
                            refused = Some(problem);
                        }
                    }
                }
                Input::Continue => {}
            }
            let (mut reason, iterations) = match refused {
                Some(problem) => (DoneReason::InvalidToolResults(problem), 0),
                None => (DoneReason::MaxIterations, inner.settings.max_iterations),
            };
            'turns: for iteration in 0..iterations {
                if cancellation.is_cancelled() {
                    reason = DoneReason::Cancelled;
                    break;
                }
                let fixes = crate::transcript::repair(
                    &mut conversation.messages,
                    Some(conversation.id.as_str()),
                );
                if fixes > 0 {
                    tracing::warn!(fixes, "repaired the transcript before the model request");
                }
                let catalog = inner.executor.catalog();
                // With tool search: the tools found so far, and the rest
                // deferred to the provider's search.
                let loaded = self.loaded_tools(&conversation.messages);
                let (specs, step_catalog) = match &loaded {
                    Some(loaded) => (&loaded.specs, &loaded.catalog),
                    None => (&inner.tools, catalog),
                };
                let mut offered = match &inner.prepare_step {
                    Some(prepare) => {
                        let prepared = prepare(&Step {
                            iteration,
                            messages: &conversation.messages,
                            catalog: step_catalog,
                        });
                        step::offered(specs, step_catalog, prepared, &inner.settings.tool_choice)
                    }
                    None => step::Offered {
                        specs: specs.clone(),
                        narrowed: None,
                        tool_choice: inner.settings.tool_choice.clone(),
                    },
                };
                // Whether `prepare_step` chose this step's tools itself: the
                // provider's search then reveals none beyond them.
                let step_chose = offered.narrowed.is_some();
                let deferred_tools = match loaded {
                    Some(loaded) => {
                        offered.narrowed.get_or_insert(loaded.catalog);
                        loaded.deferred
                    }
                    None => None,
                };
                // The step's tool choice, which also bounds what its calls
                // may run (see `step::runnable`).
                let step_choice = offered.tool_choice.clone();
                // Old results stubbed by the tools' retention and the budget.
                let messages = inner
                    .retainer
                    .request_messages(&conversation.messages, catalog);
                let request = match &inner.composed {
                    None => ChatRequest {
                        messages,
                        tools: offered.specs,
                        tool_choice: offered.tool_choice,
                        parallel_tool_calls: inner.settings.parallel_tool_calls,
                        max_tokens: inner.settings.max_tokens,
                        temperature: inner.settings.temperature,
                        response_format: None,
                        deferred_tools,
                    },
                    Some(every_tool) => {
                        let narrowed = offered.narrowed.is_some()
                            || offered.tool_choice != inner.settings.tool_choice;
                        let format = if narrowed {
                            composed::response_format(
                                offered.narrowed.as_ref().unwrap_or(catalog),
                                &offered.tool_choice,
                                inner.settings.ask_reasoning,
                                inner.model.dialect(),
                            )
                            .unwrap_or_else(|error| {
                                // The agent lowered every tool when it was
                                // built; a subset of them lowers too.
                                tracing::error!(%error, "the step's composed schema could not be lowered; every tool is offered");
                                every_tool.clone()
                            })
                        } else {
                            every_tool.clone()
                        };
                        ChatRequest {
                            messages: composed::render(&messages, catalog),
                            tools: Vec::new().into(),
                            tool_choice: ToolChoice::Auto,
                            parallel_tool_calls: inner.settings.parallel_tool_calls,
                            max_tokens: inner.settings.max_tokens,
                            temperature: inner.settings.temperature,
                            response_format: Some(format),
                            deferred_tools: None,
                        }
                    }
                };
                summary.iterations += 1;
                last_offered = Some((offered.narrowed.clone(), request.tool_choice.clone()));
                // The fingerprint of the tools this request offers.
                let model_span = tracing::info_span!(
                    "model_call",
                    iteration,
                    tools_fingerprint = offered.narrowed.as_ref().unwrap_or(catalog).fingerprint(),
                );
                let model_started = Instant::now();
                let mut assembler = TurnAssembler::with_limits(inner.settings.limits);
                let mut events = inner.model.stream(&request);
                let mut model_deadline = pin!(model_deadline(inner.settings.model_call_timeout));
                let mut cancelled = pin!(cancellation.cancelled());
                // Calls seen forming in this turn, by place (the model may
                // reuse an id): whether their arguments may be shown.
                let mut seen = Vec::new();
                let mut shown: Vec<bool> = Vec::new();
                loop {
                    // Cancellation first, then the deadline, then the model.
                    let next = tokio::select! {
                        biased;
                        () = &mut cancelled => {
                            reason = DoneReason::Cancelled;
                            break 'turns;
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
                            reason = DoneReason::ModelError(ModelError::Timeout);
                            break 'turns;
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
                                reason = match assembler.limit_exceeded() {
                                    Some(exceeded) => {
                                        model_span.in_scope(|| tracing::warn!(%exceeded, "the model turn went past a limit"));
                                        DoneReason::LimitExceeded(exceeded.to_string())
                                    }
                                    None => DoneReason::ModelError(error),
                                };
                                break 'turns;
                            }
                        }
                        Err(error) => {
                            reason = DoneReason::ModelError(error);
                            break 'turns;
                        }
                    }
                }
                drop(events);
                let mut turn = match assembler.finish() {
                    Ok(turn) => turn,
                    Err(error) => {
                        reason = DoneReason::ModelError(error);
                        break;
                    }
                };
                model_span.in_scope(|| {
                    tracing::info!(
                        elapsed_ms = model_started.elapsed().as_millis() as u64,
                        tool_calls = turn.tool_calls.len(),
                        finish = ?turn.finish_reason,
                        "model turn finished"
                    )
                });
                if let Some(turn_usage) = turn.usage {
                    usage += turn_usage;
                }
                if inner.composed.is_some() {
                    let number = conversation
                        .messages
                        .iter()
                        .filter(|message| matches!(message, Message::Assistant { .. }))
                        .count();
                    match composed::parse(&turn.text, number) {
                        Some(parsed) => {
                            turn.text = parsed.message;
                            turn.tool_calls = parsed.calls;
                        }
                        None => tracing::warn!(
                            "the model's answer is not the composed object it was asked for; it is read as text"
                        ),
                    }
                    if !turn.text.is_empty() {
                        out.emit(AgentEvent::TextDelta(turn.text.clone())).await;
                    }
                }
                for (original, renamed) in
                    call_ids::make_ids_unique(&mut turn.tool_calls, &conversation.messages)
                {
                    tracing::warn!(
                        model_id = %original,
                        id = %renamed,
                        "the model reused a tool call id; the call goes by a new one"
                    );
                }
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
                // The provider's own tool search may have found tools this
                // very turn calls, unless the step chose its tools.
                if !step_chose && let Some(turn) = conversation.messages.last() {
                    offered.narrowed = self.widened(offered.narrowed.take(), turn);
                }
                if turn.tool_calls.is_empty() {
                    reason = DoneReason::Completed;
                    break;
                }
                // What the turn's calls may run, kept with the turn: a call
                // revived after a crash is held to it.
                let runnable = step::runnable(offered.narrowed.as_ref(), &step_choice, catalog);
                if let (Some(runnable), Some(Message::Assistant { runnable: kept, .. })) =
                    (&runnable, conversation.messages.last_mut())
                {
                    *kept = Some(runnable.names().map(str::to_owned).collect());
                }
                let turn_end = conversation.messages.len();
                let made = turn.tool_calls.len();
                let allowed = inner.settings.max_calls_per_turn;
                // Decided before anything runs, and stored with the turn.
                let refusals: Vec<Option<Envelope>> = turn
                    .tool_calls
                    .iter()
                    .enumerate()
                    .map(|(position, call)| {
                        self.refusal(
                            call,
                            (position >= allowed).then_some((made, allowed)),
                            runnable.as_ref(),
                            &step_choice,
                            || EnvelopeIds {
                                tool_call_id: call.id.as_str().into(),
                                conversation_id: Some(conversation.id.as_str().into()),
                                session_id: context.session_id().map(Into::into),
                            },
                        )
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
                if let Some(journal) = &journal {
                    let saved = with_refusals(conversation, &turn.tool_calls, &refusals);
                    if let Err(error) = journal.checkpoint(&saved).await {
                        reason = DoneReason::StoreFailed(error);
                        break;
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
                        arguments: redact::redacted_arguments(
                            &call.arguments,
                            self.redactions(&call.name),
                        ),
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
                // Who made each call, for the live reports that name only its id.
                let running: Vec<(String, String)> = turn
                    .tool_calls
                    .iter()
                    .map(|call| (call.id.clone(), call.name.clone()))
                    .collect();
                let mut finished: Vec<&str> = Vec::with_capacity(running.len());
                // What the approval policy sees of the conversation; one
                // copy a turn, only when there is a policy.
                let transcript: Option<Arc<[Message]>> = self
                    .has_approval_policy()
                    .then(|| conversation.messages.as_slice().into());
                let mut executed = futures_util::stream::iter(
                    turn.tool_calls.into_iter().zip(refusals).zip(requested),
                )
                .map(|((call, refused), requested)| {
                    let execution = self.execute_in_task(
                        call,
                        refused,
                        runnable.as_ref(),
                        requested,
                        &context,
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
                    let (done, took) = tokio::select! {
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
                        halted = done.halt;
                    }
                    let outcome = match &done.result {
                        CallResult::Finished(result) if result.ok => CallOutcome::Ok,
                        CallResult::Finished(_) => CallOutcome::Failed,
                        CallResult::Suspended(_) => CallOutcome::Suspended,
                    };
                    summary.record_call(&done.name, took, outcome);
                    let mut result = done.result;
                    if let CallResult::Finished(finished) = &mut result
                        && finished.retry
                        && let Some(retries) = self.over_retries(&done.name, &mut retried)
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
                                conversation_id: Some(conversation.id.as_str().into()),
                                session_id: context.session_id().map(Into::into),
                            },
                            ErrorCode::Failed,
                            format!(
                                "The tool `{}` asked for another try {} times in this run, the most it allows, so this call counts as failed. Do not call it again for this request; tell the user what went wrong.",
                                done.name,
                                u32::from(retries) + 1
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
                            conversation.messages.push(Message::Tool {
                                tool_call_id: done.id,
                                name: done.name,
                                content,
                                is_error: !result.ok,
                                attachments,
                            });
                        }
                        CallResult::Suspended(awaiting) => {
                            let redaction = self.redactions(&done.name);
                            let mut call =
                                SuspendedCall::new(done.id, done.name, awaiting, redaction);
                            call.reasoning = reasoning;
                            suspended.push(call);
                        }
                    }
                }
                drop(executed);
                // Reports of calls that are over are not shown after their results.
                feed.clear();
                // A halt ends the run: a call of the turn that waits for
                // someone is withdrawn and answered, never left waiting for
                // a run that is over.
                let mut withdraw_failed = None;
                if let Some((by, _)) = &halted {
                    for call in std::mem::take(&mut suspended) {
                        if let Some(journal) = &journal
                            && let Err(error) = journal
                                .withdraw(
                                    &conversation.id,
                                    &call.tool_call_id,
                                    call.awaiting.reason,
                                )
                                .await
                        {
                            withdraw_failed = Some(error);
                        }
                        let (event, message) = self.withdrawn(call, by, &conversation.id, &context);
                        out.emit(event).await;
                        conversation.messages.push(message);
                    }
                }
                if let Some(error) = withdraw_failed {
                    // As when the turn cannot be saved: the journal has the
                    // results of the calls that ran, and the wait it could
                    // not close is settled by the resumed run.
                    conversation.messages.truncate(turn_end);
                    reason = DoneReason::StoreFailed(error);
                    break;
                }
                // A suspending turn is saved once, by the durable run, as
                // suspended; finished results are in the journal meanwhile.
                if let Some(journal) = &journal
                    && suspended.is_empty()
                    && let Err(error) = journal.checkpoint(conversation).await
                {
                    // The turn's results are not kept: those of calls that
                    // ran are in the journal, which gives them back when the
                    // run is resumed, and the others were not run, so the
                    // resumed run runs them.
                    conversation.messages.truncate(turn_end);
                    reason = DoneReason::StoreFailed(error);
                    break;
                }
                if let Some((by, message)) = halted {
                    tracing::warn!(hook = %by, "a hook halted the run");
                    reason = DoneReason::Halted { by, message };
                    break;
                }
                if !suspended.is_empty() {
                    reason = DoneReason::Suspended(suspended);
                    break;
                }
            }
            if let Some((narrowed, tool_choice)) = &last_offered {
                let catalog = narrowed.as_ref().unwrap_or(inner.executor.catalog());
                let fingerprint = catalog.fingerprint();
                summary.framed(Framing {
                    model: inner.model.model_name().map(str::to_owned),
                    dialect: inner.model.dialect(),
                    system: Framing::system_of(&conversation.messages),
                    tools_fingerprint: fingerprint.to_owned(),
                    tool_choice: tool_choice.clone(),
                    composed: inner.composed.is_some(),
                    ask_reasoning: inner.settings.ask_reasoning,
                });
            }
            summary.elapsed = started.elapsed();
            tracing::info!(
                tool_calls = summary.tool_calls(),
                iterations = summary.iterations,
                input_tokens = usage.input_tokens,
                output_tokens = usage.output_tokens,
                elapsed_ms = started.elapsed().as_millis() as u64,
                reason = reason_name(&reason),
                "agent run finished"
            );
            out.emit(AgentEvent::Done {
                reason,
                usage,
                summary,
            })
            .await;
        });
        Box::pin(tracing_futures::Instrument::instrument(stream, span))
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

    /// Checks results handed in with [`Input::ToolResults`] as
    /// [`DurableAgent::resolve`](crate::durable::DurableAgent::resolve)
    /// checks a client's result: each answers a call of
    /// the conversation, of a catalogued tool, and a successful one matches
    /// the tool's declared output. Client results are user-controlled data
    /// headed for the model.
    fn check_results(
        &self,
        messages: &[Message],
        results: &[(String, Envelope)],
    ) -> Result<(), String> {
        for (tool_call_id, envelope) in results {
            let name = call_name(messages, tool_call_id).ok_or_else(|| {
                format!("no call in the conversation has the id `{tool_call_id}`")
            })?;
            let definition = self.inner.executor.catalog().get(name).ok_or_else(|| {
                format!("the tool `{name}` of call `{tool_call_id}` is not in the catalog")
            })?;
            // Attachments come from a tool's own server code only: a result
            // handed back holds the output, which its schema checks.
            if !envelope.attachments().is_empty() {
                return Err(format!(
                    "the result for call `{tool_call_id}` carries attachments; a result handed back holds the tool's output only"
                ));
            }
            if let Some(result) = envelope.result() {
                definition.check_output(&result.to_value()).map_err(|problem| {
                    // The message travels in the `Done` event and the log:
                    // violations quote the refused values, so a tool that
                    // hides anything gets none of them.
                    if definition.redaction().hides_anything() {
                        format!(
                            "the result for call `{tool_call_id}` does not match the output of `{name}` (the violations are not shown because the tool declares secrets; `ToolDefinition::check_output` lists them)"
                        )
                    } else {
                        format!(
                            "the result for call `{tool_call_id}` does not match the output of `{name}`: {problem}"
                        )
                    }
                })?;
            }
        }
        Ok(())
    }
}

fn reason_name(reason: &DoneReason) -> &'static str {
    match reason {
        DoneReason::Completed => "completed",
        DoneReason::Suspended(_) => "suspended",
        DoneReason::MaxIterations => "max_iterations",
        DoneReason::Cancelled => "cancelled",
        DoneReason::ModelError(_) => "model_error",
        DoneReason::StoreFailed(_) => "store_failed",
        DoneReason::LimitExceeded(_) => "limit_exceeded",
        DoneReason::InvalidToolResults(_) => "invalid_tool_results",
        DoneReason::Halted { .. } => "halted",
    }
}

/// Completes after `limit`, or never.
async fn model_deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
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

/// The tool name of the call `tool_call_id`, latest turn first.
fn call_name<'m>(messages: &'m [Message], tool_call_id: &str) -> Option<&'m str> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|call| call.id == tool_call_id)
            .map(|call| call.name.as_str()),
        _ => None,
    })
}

/// Appends results handed in for suspended calls, right after the
/// assistant turn and results already there; the repair before the next
/// request puts them in call order and drops any that answer nothing.
fn append_results(conversation: &mut Conversation, results: Vec<(String, Envelope)>) {
    for (tool_call_id, mut envelope) in results {
        let name = conversation
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|call| call.id == tool_call_id)
                    .map(|call| call.name.clone()),
                _ => None,
            })
            .unwrap_or_default();
        conversation.messages.push(Message::Tool {
            tool_call_id,
            name,
            content: envelope.to_json_string(),
            is_error: !envelope.is_ok(),
            attachments: envelope.take_attachments(),
        });
    }
}
