//! `chat`: a terminal conversation with an agent over the catalog; tool
//! calls and results are shown inline, approvals and client or human
//! answers are asked inline, and the run goes on with the results.
//!
//! The conversation is not durable (no store): a suspended run's calls are
//! settled right here and handed back with `Input::ToolResults`, which is
//! what a program without a store does too.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::Value;

use super::{Cli, CliError, confirm, envelope_ids, read_line};
use crate::agent::{Agent, AgentEvent, DoneReason, Input, SuspendedCall};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::Envelope;
use crate::error::ErrorCode;
use crate::executor::{Awaiting, Outcome, ToolCall};
use crate::live::{ElicitationAnswer, ElicitationRequest};
use crate::meta::AwaitReason;
use crate::meta::ServerStep;
use crate::model::provider;
use crate::model::{ChatModel, ChatRequest, FinishReason, ModelEvent, ModelStream, ToolCallDelta};
use crate::schema::Dialect;
use crate::transcript::Conversation;
use crate::transcript::Message;

/// The id of the chat's conversation: in every tool context and envelope.
const CONVERSATION_ID: &str = "cli-chat";

/// Runs the chat until end of input or `/quit`. Exit status 1 when the last
/// run ended in a model or store error (so a piped script notices), 0
/// otherwise.
pub(super) async fn run(
    cli: &Cli,
    offline: bool,
    stdin: &mut impl BufRead,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> Result<ExitCode, CliError> {
    let (model, described) = choose_model(cli, offline)?;
    let catalog = hosted_or_local(&cli.catalog, model.as_ref());
    let skipped = cli.catalog.len() - catalog.len();
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(catalog)
        .context(cli.context.clone())
        .build()?;
    // Each tool's usage reaches the model in its description.
    let system = cli
        .system
        .clone()
        .unwrap_or_else(|| "You are a helpful assistant. Use the tools when they help.".to_owned());
    let mut conversation = Conversation::new(CONVERSATION_ID).with_system(system);
    // Calls settled here run with the agent's base context and the
    // conversation's id, as the agent's own calls do.
    let context = cli.context.clone().with_conversation_id(CONVERSATION_ID);
    writeln!(
        stderr,
        "model: {described}\n{} tools; /quit or end of input leaves.",
        cli.catalog.len() - skipped
    )?;
    if skipped > 0 {
        writeln!(
            stderr,
            "{skipped} tool(s) run at a model provider this model does not host, and are left out."
        )?;
    }
    let mut failed = false;
    loop {
        write!(stdout, "you> ")?;
        stdout.flush()?;
        let Some(line) = read_line(stdin)? else {
            writeln!(stdout)?;
            break;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/quit" || line == "/exit" {
            break;
        }
        let mut input = Input::User(line.to_owned());
        loop {
            let (calls, run_failed) = turn(&agent, &mut conversation, input, stdin, stdout).await?;
            failed = run_failed;
            if calls.is_empty() {
                break;
            }
            let mut results = Vec::with_capacity(calls.len());
            for call in calls {
                let envelope = settle(&agent, &context, &call, stdin, stdout).await?;
                writeln!(stdout, "  ← {envelope}")?;
                results.push((call.tool_call_id, envelope));
            }
            input = Input::ToolResults(results);
        }
    }
    stdout.flush()?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The catalog without the provider-executed tools `model` does not host,
/// which an agent refuses (the model would call them as functions, and
/// every call would fail).
fn hosted_or_local(catalog: &Catalog, model: &dyn ChatModel) -> Catalog {
    let kept: Vec<_> = catalog
        .entries()
        .filter(|entry| {
            entry.definition().route().step != ServerStep::PassThrough
                || model.hosts_tool(entry.name())
        })
        .collect();
    if kept.len() == catalog.len() {
        return catalog.clone();
    }
    kept.into_iter()
        .fold(Catalog::builder(), |builder, entry| {
            builder.entry(entry.clone())
        })
        .build()
        // A subset of a valid catalog is valid; keep the whole one otherwise
        // and let the agent name the tool it refuses.
        .unwrap_or_else(|_| catalog.clone())
}

/// The model for this chat and how to describe it: the provider the
/// environment names (`APTIX_PROVIDER`, or `OPENAI_BASE_URL` alone for Chat
/// Completions; see [`crate::model::provider`]) unless `--offline`, else the
/// program's model, else the built-in offline one.
fn choose_model(cli: &Cli, offline: bool) -> Result<(Arc<dyn ChatModel>, String), CliError> {
    if !offline && let Some(chosen) = provider::chosen_from_env()? {
        let described = format!("{} ({})", chosen.described, chosen.provider);
        return Ok((chosen.model, described));
    }
    Ok(match &cli.model {
        Some(model) => (model.clone(), "the program's offline model".to_owned()),
        None => (
            Arc::new(EchoModel),
            "built-in offline echo (set APTIX_PROVIDER or OPENAI_BASE_URL for a real model); \
             a line `TOOL_NAME {json}` calls that tool"
                .to_owned(),
        ),
    })
}

/// Runs the agent once, printing its events; returns the calls it
/// suspended on (none when it ended otherwise) and whether it failed.
async fn turn(
    agent: &Agent,
    conversation: &mut Conversation,
    input: Input,
    stdin: &mut impl BufRead,
    stdout: &mut impl Write,
) -> Result<(Vec<SuspendedCall>, bool), CliError> {
    let mut events = agent.run(conversation, input);
    let mut in_text = false;
    let mut suspended = Vec::new();
    let mut failed = false;
    while let Some(event) = events.next().await {
        if in_text && !matches!(event, AgentEvent::TextDelta(_)) {
            writeln!(stdout)?;
            in_text = false;
        }
        match event {
            AgentEvent::TextDelta(text) => {
                if !in_text {
                    write!(stdout, "assistant> ")?;
                    in_text = true;
                }
                write!(stdout, "{text}")?;
                stdout.flush()?;
            }
            // Reasoning is for people, so the chat shows it, one piece a line.
            AgentEvent::ReasoningDelta(text) => {
                writeln!(stdout, "  thinking: {}", text.trim())?;
            }
            AgentEvent::ToolCallStart {
                id,
                name,
                arguments,
                reasoning,
                ..
            } => {
                writeln!(stdout, "  → {name}({arguments})  [{id}]")?;
                if let Some(reasoning) = reasoning {
                    writeln!(stdout, "    because: {reasoning}")?;
                }
            }
            AgentEvent::ToolCallResult { envelope, .. } => {
                writeln!(stdout, "  ← {}", envelope_line(&envelope))?;
            }
            AgentEvent::ToolProgress {
                done,
                total,
                message,
                ..
            } => {
                let of = total
                    .map(|total| format!(" of {total}"))
                    .unwrap_or_default();
                let what = message.map(|text| format!(": {text}")).unwrap_or_default();
                writeln!(stdout, "    … {done}{of}{what}")?;
            }
            AgentEvent::ToolPartial { value, .. } => writeln!(stdout, "    ⋯ {value}")?,
            AgentEvent::Elicitation { request, reply, .. } => {
                reply.answer(elicited(&request, stdin, stdout)?);
            }
            // The whole call is printed once it is complete.
            AgentEvent::ToolCallOpened { .. } | AgentEvent::ToolCallDelta { .. } => {}
            AgentEvent::TurnCutOff { reason, calls } => {
                writeln!(
                    stdout,
                    "    [the model's turn was cut off ({reason:?}); {} call(s) not run]",
                    calls.len()
                )?;
            }
            AgentEvent::RetriesExhausted { name, retries, .. } => {
                writeln!(
                    stdout,
                    "    [`{name}` asked for more than {retries} retries]"
                )?;
            }
            AgentEvent::Done { reason, .. } => match reason {
                DoneReason::Completed => {}
                DoneReason::Suspended(calls) => suspended = calls,
                DoneReason::MaxIterations => {
                    writeln!(stdout, "[stopped: the iteration limit was reached]")?;
                }
                DoneReason::Cancelled => writeln!(stdout, "[cancelled]")?,
                DoneReason::ModelError(error) => {
                    failed = true;
                    writeln!(stdout, "[model error: {error}]")?;
                }
                DoneReason::StoreFailed(error) => {
                    failed = true;
                    writeln!(stdout, "[store error: {error}]")?;
                }
                DoneReason::LimitExceeded(limit) => {
                    failed = true;
                    writeln!(stdout, "[stopped: {limit}]")?;
                }
                DoneReason::Halted { by, message } => {
                    writeln!(stdout, "[halted by {by}: {message}]")?;
                }
                DoneReason::InvalidToolResults(problem) => {
                    failed = true;
                    writeln!(stdout, "[results refused: {problem}]")?;
                }
            },
        }
    }
    stdout.flush()?;
    Ok((suspended, failed))
}

/// An event's (redacted) envelope on one line, `ok` first as in the
/// envelope itself: the event carries a `Value`, whose members are sorted.
fn envelope_line(envelope: &Value) -> String {
    let Value::Object(members) = envelope else {
        return envelope.to_string();
    };
    let first = ["ok", "result", "error"];
    let ordered = first
        .iter()
        .filter_map(|key| members.get_key_value(*key))
        .chain(
            members
                .iter()
                .filter(|(key, _)| !first.contains(&key.as_str())),
        )
        .map(|(key, value)| format!("{}:{value}", Value::from(key.as_str())))
        .collect::<Vec<_>>();
    format!("{{{}}}", ordered.join(","))
}

/// Settles one suspended call at the terminal: an approval is asked (y/N)
/// and the call then runs with `execute_approved`; a client's or person's
/// answer is typed as JSON and checked against the tool's output schema.
/// Every path ends in an envelope for the model, a refusal included.
async fn settle(
    agent: &Agent,
    context: &ToolContext,
    call: &SuspendedCall,
    stdin: &mut impl BufRead,
    stdout: &mut impl Write,
) -> Result<Envelope, CliError> {
    let name = call.name.as_str();
    let id = call.tool_call_id.as_str();
    // The call runs with the real payload; the terminal shows it redacted
    // like every event (what is typed here may be recorded).
    let mut awaiting: Awaiting = call.unredacted_awaiting();
    loop {
        match awaiting.reason {
            AwaitReason::Approval => {
                writeln!(
                    stdout,
                    "  ? {name}({}) needs your approval",
                    shown_payload(agent, name, &awaiting)
                )?;
                if !confirm(stdin, stdout, "  Approve? [y/N] ")? {
                    return Ok(Envelope::error(
                        envelope_ids(id, context),
                        ErrorCode::Denied,
                        "The user declined to run this call.",
                    ));
                }
                let approved = ToolCall::new(id, name, awaiting.payload.as_str());
                let execution = agent.executor().execute_approved(&approved, context).await;
                match execution.outcome {
                    Outcome::Final(envelope) => return Ok(envelope),
                    // An approved client tool goes on to the client.
                    Outcome::Awaiting(next) => awaiting = next,
                    Outcome::PassThrough => {
                        return Ok(Envelope::error(
                            envelope_ids(id, context),
                            ErrorCode::Failed,
                            "The model provider runs this tool; it cannot run here.",
                        ));
                    }
                }
            }
            AwaitReason::Client | AwaitReason::Human => {
                return answer(agent, context, call, &awaiting, stdin, stdout);
            }
        }
    }
}

/// A suspended call's payload as the terminal shows it: redacted by the
/// tool's declared policy.
fn shown_payload(agent: &Agent, name: &str, awaiting: &Awaiting) -> crate::envelope::JsonText {
    let redaction = agent
        .executor()
        .catalog()
        .get(name)
        .map_or(crate::meta::Redaction::Undeclared, |definition| {
            definition.redaction()
        });
    crate::agent::redact::redacted_payload(&awaiting.payload, redaction)
}

/// Asks the person at the terminal for a client's or person's result, until
/// it is valid JSON that fits the tool's declared output; an empty line or
/// end of input refuses the call.
fn answer(
    agent: &Agent,
    context: &ToolContext,
    call: &SuspendedCall,
    awaiting: &Awaiting,
    stdin: &mut impl BufRead,
    stdout: &mut impl Write,
) -> Result<Envelope, CliError> {
    let (name, id) = (call.name.as_str(), call.tool_call_id.as_str());
    let who = if awaiting.reason == AwaitReason::Human {
        "a person's answer"
    } else {
        "a client's result"
    };
    writeln!(
        stdout,
        "  ? {name}({}) waits for {who}",
        shown_payload(agent, name, awaiting)
    )?;
    let definition = agent.executor().catalog().get(name);
    loop {
        write!(stdout, "  Result as JSON (empty line: refuse): ")?;
        stdout.flush()?;
        let line = read_line(stdin)?.unwrap_or_default();
        if line.trim().is_empty() {
            return Ok(Envelope::error(
                envelope_ids(id, context),
                ErrorCode::Denied,
                "Nobody provided a result for this call.",
            ));
        }
        let value: Value = match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(error) => {
                writeln!(stdout, "  not JSON: {error}")?;
                continue;
            }
        };
        // A typed answer is user data: checked like a client's would be.
        if let Some(Err(problems)) = definition.map(|definition| definition.check_output(&value)) {
            writeln!(stdout, "  does not fit the tool's output: {problems}")?;
            continue;
        }
        return Envelope::ok_value(envelope_ids(id, context), &value)
            .map_err(|error| CliError::Io(error.into()));
    }
}

/// A person's answer, typed at the prompt, to a running call's question.
fn elicited(
    request: &ElicitationRequest,
    stdin: &mut impl BufRead,
    stdout: &mut impl Write,
) -> Result<ElicitationAnswer, CliError> {
    writeln!(stdout, "  ? {} asks: {}", request.asked_by, request.message)?;
    if let Some(url) = &request.url {
        writeln!(stdout, "    open {url}")?;
        return Ok(if confirm(stdin, stdout, "  Done? [y/N] ")? {
            ElicitationAnswer::Accept(Value::Object(serde_json::Map::new()))
        } else {
            ElicitationAnswer::Decline
        });
    }
    if let Some(schema) = &request.schema {
        writeln!(stdout, "    the answer's schema: {schema}")?;
    }
    loop {
        write!(stdout, "  Answer as a JSON object (empty line: decline): ")?;
        stdout.flush()?;
        let line = read_line(stdin)?.unwrap_or_default();
        if line.trim().is_empty() {
            return Ok(ElicitationAnswer::Decline);
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(value @ Value::Object(_)) => return Ok(ElicitationAnswer::Accept(value)),
            Ok(_) => writeln!(stdout, "  not a JSON object")?,
            Err(error) => writeln!(stdout, "  not JSON: {error}")?,
        }
    }
}

/// The built-in offline model of `chat`, for trying tools with no model at
/// hand: a line `TOOL_NAME {json}` (or just `TOOL_NAME`) calls that tool,
/// tool results are read back, and anything else is echoed.
struct EchoModel;

impl ChatModel for EchoModel {
    /// MCP's dialect is the canonical schema as is: lowering never fails,
    /// whatever the tools.
    fn dialect(&self) -> Dialect {
        Dialect::Mcp
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        let events = match request.messages.last() {
            Some(Message::User { content }) => match requested_call(content, request) {
                Some((name, arguments)) => {
                    let calls = request
                        .messages
                        .iter()
                        .filter(|message| {
                            matches!(message, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty())
                        })
                        .count();
                    vec![
                        ModelEvent::ToolCallDelta(ToolCallDelta {
                            index: 0,
                            id: Some(format!("echo_call_{}", calls + 1)),
                            name: Some(name),
                            arguments,
                        }),
                        ModelEvent::Finish {
                            reason: FinishReason::ToolCalls,
                            usage: None,
                        },
                    ]
                }
                None => text(format!("You said: {content}")),
            },
            Some(Message::Tool { .. }) => {
                let results: Vec<String> = request
                    .messages
                    .iter()
                    .rev()
                    .map_while(|message| match message {
                        Message::Tool { name, content, .. } => Some(format!("{name}: {content}")),
                        _ => None,
                    })
                    .collect();
                text(format!(
                    "The tool answered. {}",
                    results.into_iter().rev().collect::<Vec<_>>().join("; ")
                ))
            }
            _ => text("Say something.".to_owned()),
        };
        Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)))
    }
}

/// `TOOL_NAME {json}` when the first word names one of the request's tools.
fn requested_call(line: &str, request: &ChatRequest) -> Option<(String, String)> {
    let line = line.trim();
    let (name, arguments) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let known = request.tools.iter().any(|tool| tool.name == name);
    known.then(|| {
        let arguments = arguments.trim();
        let arguments = if arguments.is_empty() {
            "{}"
        } else {
            arguments
        };
        (name.to_owned(), arguments.to_owned())
    })
}

fn text(text: String) -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta(text),
        ModelEvent::Finish {
            reason: FinishReason::Stop,
            usage: None,
        },
    ]
}
