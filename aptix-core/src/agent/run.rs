//! The loop over model turns: ask the model, run the calls it made, feed
//! their results back, until it answers without calling tools.
//!
//! The loop reads as its stages, each of which may end the run with its
//! [`DoneReason`]: take the input (`take_input`), build the step's request
//! (`step_request`, here), stream the model's turn into an assistant
//! message (`model_turn`, in `turn.rs`), run the turn's calls
//! (`run_calls`, in `turn_calls.rs`), and finish with the `Done` event
//! (`finish`, here).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::live_feed;
use super::step::{self, Step};
use super::summary::{Framing, RunSummary};
use super::{Agent, AgentEvent, AgentStream, DoneReason, Input, Journal, composed};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::Envelope;
use crate::generator::Emitter;
use crate::model::{ChatRequest, ToolChoice, Usage};
use crate::transcript::{Conversation, Message};

/// What every stage of a run reaches for: where its events go, its
/// cancellation, the context its calls run in, and the store of a durable
/// run (through which every call is recorded).
pub(super) struct Scope {
    pub(super) out: Emitter<AgentEvent>,
    pub(super) cancellation: CancellationToken,
    pub(super) context: ToolContext,
    pub(super) journal: Option<Arc<dyn Journal>>,
}

/// What a run adds up over its turns, for its `Done` event.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) usage: Usage,
    pub(super) summary: RunSummary,
    /// What the last request offered, hashed once at the end.
    pub(super) last_offered: Option<(Option<Catalog>, ToolChoice)>,
    /// How often each tool asked for another try in this run.
    pub(super) retried: Vec<(String, u8)>,
}

/// One step's model request, with what the step offered: the turn's calls
/// are held to it.
pub(super) struct StepRequest {
    /// Which request of the run this is, from 0.
    pub(super) iteration: usize,
    pub(super) chat: ChatRequest,
    /// The tools offered, when narrower than the agent's catalog (tool
    /// search, `prepare_step`); widened by what the provider's own search
    /// finds in the turn.
    pub(super) narrowed: Option<Catalog>,
    /// Whether `prepare_step` chose this step's tools itself: the
    /// provider's search then reveals none beyond them.
    pub(super) step_chose: bool,
    /// The step's tool choice, which also bounds what its calls may run
    /// (see `step::runnable`).
    pub(super) step_choice: ToolChoice,
}

impl Agent {
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
            let mut tally = Tally::default();
            let (live, mut feed) = live_feed::channel();
            let context = self
                .context_for(conversation, &cancellation)
                .with_live(live);
            let scope = Scope {
                out,
                cancellation,
                context,
                journal,
            };
            let (mut reason, iterations) = match self.take_input(conversation, input) {
                Err(problem) => (DoneReason::InvalidToolResults(problem), 0),
                Ok(()) => (DoneReason::MaxIterations, inner.settings.max_iterations),
            };
            for iteration in 0..iterations {
                if scope.cancellation.is_cancelled() {
                    reason = DoneReason::Cancelled;
                    break;
                }
                let mut request = self.step_request(conversation, iteration);
                tally.summary.iterations += 1;
                tally.last_offered =
                    Some((request.narrowed.clone(), request.chat.tool_choice.clone()));
                let turn = match self
                    .model_turn(&request, conversation, &scope, &mut tally)
                    .await
                {
                    ControlFlow::Continue(turn) => turn,
                    ControlFlow::Break(ended) => {
                        reason = ended;
                        break;
                    }
                };
                // The provider's own tool search may have found tools this
                // very turn calls, unless the step chose its tools.
                if !request.step_chose
                    && let Some(turn) = conversation.messages.last()
                {
                    request.narrowed = self.widened(request.narrowed.take(), turn);
                }
                // A turn cut off says so; its calls are refused in
                // `run_calls`.
                if self.cut_off(&turn.finish_reason) {
                    let calls: Vec<String> =
                        turn.tool_calls.iter().map(|call| call.id.clone()).collect();
                    tracing::warn!(
                        finish = ?turn.finish_reason,
                        calls = calls.len(),
                        "the model's turn was cut off; none of its calls run"
                    );
                    scope
                        .out
                        .emit(AgentEvent::TurnCutOff {
                            reason: turn.finish_reason.clone(),
                            calls,
                        })
                        .await;
                }
                if turn.tool_calls.is_empty() {
                    reason = DoneReason::Completed;
                    break;
                }
                if let ControlFlow::Break(ended) = self
                    .run_calls(turn, &request, conversation, &scope, &mut feed, &mut tally)
                    .await
                {
                    reason = ended;
                    break;
                }
            }
            self.finish(reason, tally, conversation, started, &scope.out)
                .await;
        });
        Box::pin(tracing_futures::Instrument::instrument(stream, span))
    }

    /// Puts `input` in the transcript. `Err`: why the results handed in
    /// were refused (nothing is put in then, and the run ends at once).
    fn take_input(&self, conversation: &mut Conversation, input: Input) -> Result<(), String> {
        match input {
            Input::User(text) => conversation.messages.push(Message::user(text)),
            Input::ToolResults(results) => {
                match self.check_results(&conversation.messages, &results) {
                    Ok(()) => append_results(conversation, results),
                    Err(problem) => {
                        tracing::warn!(%problem, "results handed in were refused");
                        return Err(problem);
                    }
                }
            }
            Input::Continue => {}
        }
        Ok(())
    }

    /// The request of step `iteration`, the transcript repaired first: the
    /// tools it offers (those tool search loaded, narrowed by
    /// `prepare_step`), its tool choice, and in composed mode the response
    /// format that stands for both.
    fn step_request(&self, conversation: &mut Conversation, iteration: usize) -> StepRequest {
        let inner = &*self.inner;
        let fixes =
            crate::transcript::repair(&mut conversation.messages, Some(conversation.id.as_str()));
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
        let chat = match &inner.composed {
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
                let narrowed =
                    offered.narrowed.is_some() || offered.tool_choice != inner.settings.tool_choice;
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
        StepRequest {
            iteration,
            chat,
            narrowed: offered.narrowed,
            step_chose,
            step_choice,
        }
    }

    /// The end of the run: what its last request offered, hashed into its
    /// summary, its log line, and its `Done` event, always the last one.
    async fn finish(
        &self,
        reason: DoneReason,
        tally: Tally,
        conversation: &Conversation,
        started: Instant,
        out: &Emitter<AgentEvent>,
    ) {
        let inner = &*self.inner;
        let Tally {
            usage,
            mut summary,
            last_offered,
            ..
        } = tally;
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
