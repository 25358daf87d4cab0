//! The main job: an agent with the example tools answers a question by
//! calling tools (one model turn with two parallel calls), printing events
//! as they stream.
//!
//! `cargo run --example quickstart`
//!
//! With no configuration it runs on an embedded scripted model. With
//! `OPENAI_BASE_URL` (and `OPENAI_API_KEY`, `OPENAI_MODEL` where needed) it
//! talks to that OpenAI-compatible endpoint instead, with the same tools.
//! Strict schemas are sent to api.openai.com; other servers get the
//! canonical schema. `APTIX_PROVIDER` (`openai-chat`, `openai-responses`,
//! `anthropic`, `gemini`) picks another provider, configured by its own
//! variables (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, ...): see the guide's
//! page on choosing a provider, which also shows how to start a mock of each
//! (`cargo run -p aptix-testkit --example mock_model -- anthropic`).
//!
//! `APTIX_CALL_MODE=composed` offers the tools as one structured-output
//! schema instead of native tool calls (for models without tool calling;
//! `OPENAI_STRUCTURED_OUTPUT=json_object` for llama-cpp-python's server).
//! `APTIX_SHOW_ENVELOPES=1` prints each result envelope whole, as the model
//! receives it.

#[path = "get_current_time.rs"]
mod get_current_time;
#[path = "get_location.rs"]
mod get_location;
#[path = "hello_world.rs"]
mod hello_world;
#[path = "send_email.rs"]
mod send_email;

use std::io::Write;
use std::sync::Arc;

use aptix::agent::CallMode;
use aptix::model::{ChatModel, ChatRequest, provider};
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input, ToolContext};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;

const QUESTION: &str = "Hi, I'm Ada. Please greet me and tell me the time in Paris (UTC+01:00).";

fn scripted(mode: CallMode) -> ScriptedModel {
    if mode == CallMode::Composed {
        // The same turns, as the composed objects the model answers with.
        return ScriptedModel::new([
            ScriptedTurn::new().text(
                r#"{"message":"Let me greet you and look up the time.","calls":[{"_tool":"agent_hello_world","_activity":"agent_hello_world","name":"Ada"},{"_tool":"get_current_time","_activity":"get_current_time","utc_offset_minutes":60}]}"#,
            ),
            ScriptedTurn::replying(|request| {
                let answer = serde_json::json!({ "message": answer(request), "calls": [] });
                ScriptedTurn::new().text(&answer.to_string())
            }),
        ]);
    }
    ScriptedModel::new([
        ScriptedTurn::new()
            .text("Let me greet you and look up the time. ")
            .tool_call("call_greet", "agent_hello_world", r#"{"name":"Ada"}"#)
            .tool_call(
                "call_time",
                "get_current_time",
                r#"{"utc_offset_minutes":60}"#,
            ),
        // The answer is written from the tool results the model receives.
        ScriptedTurn::replying(|request| ScriptedTurn::new().text(&answer(request))),
    ])
}

/// What the scripted model says once it has the tool results: the greeting
/// and the time that `get_current_time` fetched.
fn answer(request: &ChatRequest) -> String {
    let mut greeting = None;
    let mut time = None;
    for message in &request.messages {
        // Native calls come back as tool messages, one envelope each;
        // composed ones as one user message, a line per result.
        let text = match message {
            Message::Tool { content, .. } | Message::User { content } => content,
            _ => continue,
        };
        for line in text.lines() {
            let Some(start) = line.find('{') else {
                continue;
            };
            let mut values = serde_json::Deserializer::from_str(&line[start..]).into_iter();
            let Some(Ok(envelope)) = values.next() else {
                continue;
            };
            let envelope: serde_json::Value = envelope;
            let Some(result) = envelope.get("result") else {
                continue;
            };
            if let Some(text) = result.get("message").and_then(|m| m.as_str()) {
                greeting = Some(text.to_owned());
            }
            if let Some(rfc3339) = result.get("rfc3339").and_then(|t| t.as_str()) {
                // `2026-11-27T04:57:08.8+01:00` → `04:57`
                time = rfc3339.get(11..16).map(str::to_owned);
            }
        }
    }
    match (greeting, time) {
        (Some(greeting), Some(time)) => format!("{greeting} In Paris it is {time} right now."),
        _ => "I could not reach my tools; please try again.".to_owned(),
    }
}

/// A result as a person reads it: the value, or the error's code and
/// message; the whole envelope when `APTIX_SHOW_ENVELOPES` is set.
fn shown(envelope: &serde_json::Value) -> String {
    if std::env::var_os("APTIX_SHOW_ENVELOPES").is_some() {
        return envelope.to_string();
    }
    if let Some(result) = envelope.get("result") {
        return result.to_string();
    }
    match envelope.get("error") {
        Some(error) => format!(
            "error {}: {}",
            error["code"].as_str().unwrap_or("?"),
            error["message"].as_str().unwrap_or_default()
        ),
        None => envelope.to_string(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    let catalog = aptix::tools![
        get_current_time::GetCurrentTimeTool,
        get_location::GetLocation,
        hello_world::HelloWorldTool,
        send_email::SendEmailTool,
    ]
    .build()?;
    println!(
        "{} tools (fingerprint {}):",
        catalog.len(),
        &catalog.fingerprint()[..12]
    );
    for tool in catalog.definitions() {
        println!(
            "  {:<18} {:<8} {:<17} {}",
            tool.name(),
            tool.executor().as_str(),
            tool.approval().as_str(),
            tool.description()
        );
    }

    let mode = match std::env::var("APTIX_CALL_MODE").as_deref() {
        Err(_) | Ok("native") => CallMode::Native,
        Ok("composed") => CallMode::Composed,
        Ok(other) => {
            return Err(format!("APTIX_CALL_MODE is `{other}`; use `native` or `composed`").into());
        }
    };
    println!("call mode: {mode:?}");
    // `APTIX_PROVIDER` and that provider's variables, or `OPENAI_BASE_URL`
    // alone for Chat Completions; nothing set: the scripted model.
    let model: Arc<dyn ChatModel> = match provider::chosen_from_env()? {
        Some(chosen) => {
            println!("\nmodel: {} ({})", chosen.described, chosen.provider);
            chosen.model
        }
        None => {
            println!(
                "\nmodel: the embedded scripted model (set APTIX_PROVIDER or OPENAI_BASE_URL to use a real one)"
            );
            Arc::new(scripted(mode))
        }
    };
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(catalog)
        .call_mode(mode)
        .context(ToolContext::new().with_state(send_email::Outbox::default()))
        .max_iterations(4)
        .build()?;

    let mut conversation = Conversation::new("quickstart")
        .with_system("You are a helpful assistant. Use the tools when they help.");
    println!("\nuser: {QUESTION}\nassistant: ");
    let mut events = agent.run(&mut conversation, Input::User(QUESTION.into()));
    let mut failed = false;
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::TextDelta(text) => {
                print!("{text}");
                std::io::stdout().flush()?;
            }
            AgentEvent::ToolCallStart {
                name, arguments, ..
            } => println!("\n  → {name}({arguments})"),
            AgentEvent::ToolCallResult { name, envelope, .. } => {
                println!("  ← {name}: {}", shown(&envelope))
            }
            AgentEvent::Done {
                reason,
                usage,
                summary,
            } => {
                let reason = match reason {
                    DoneReason::Completed => "completed".to_owned(),
                    DoneReason::Suspended(calls) => format!(
                        "suspended, waiting on {}",
                        calls
                            .iter()
                            .map(|c| format!("{} ({:?})", c.name, c.awaiting.reason))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    DoneReason::MaxIterations => "stopped at the iteration limit".to_owned(),
                    DoneReason::Cancelled => "cancelled".to_owned(),
                    DoneReason::ModelError(error) => {
                        failed = true;
                        format!("model error: {error}")
                    }
                    DoneReason::StoreFailed(error) => {
                        failed = true;
                        format!("store error: {error}")
                    }
                    DoneReason::LimitExceeded(limit) => {
                        failed = true;
                        format!("stopped: {limit}")
                    }
                    DoneReason::InvalidToolResults(problem) => {
                        failed = true;
                        format!("results refused: {problem}")
                    }
                    DoneReason::Halted { by, message } => format!("halted by {by}: {message}"),
                    other => format!("{other:?}"),
                };
                println!(
                    "\n\ndone: {reason} ({} tokens in, {} out; {} tool calls in {} model turns, {:.1?})",
                    usage.input_tokens,
                    usage.output_tokens,
                    summary.tool_calls(),
                    summary.iterations,
                    summary.elapsed,
                );
            }
            // Progress and partial results: the quickstart's tools report none.
            _ => {}
        }
    }
    drop(events);
    println!(
        "{} messages in the conversation",
        conversation.messages.len()
    );
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            messages,
            tools: std::sync::Arc::from(Vec::new()),
            tool_choice: Default::default(),
            parallel_tool_calls: true,
            max_tokens: None,
            temperature: None,
            response_format: None,
            deferred_tools: None,
        }
    }

    const GREETING: &str =
        r#"{"ok":true,"result":{"message":"Hello, Ada! Welcome."},"tool_call_id":"call_greet"}"#;
    const TIME: &str = r#"{"ok":true,"result":{"rfc3339":"2026-11-27T04:57:08.8+01:00"},"tool_call_id":"call_time"}"#;

    fn tool(id: &str, name: &str, content: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn the_answer_says_the_time_the_tool_fetched_in_either_call_mode() {
        let native = request(vec![
            Message::user(QUESTION),
            tool("call_greet", "agent_hello_world", GREETING),
            tool("call_time", "get_current_time", TIME),
        ]);
        let expected = "Hello, Ada! Welcome. In Paris it is 04:57 right now.";
        assert_eq!(answer(&native), expected);
        let composed = request(vec![
            Message::user(QUESTION),
            Message::user(format!(
                "Results of your calls:\n- `agent_hello_world` (c1): {GREETING}\n- `get_current_time` (c2): {TIME}"
            )),
        ]);
        assert_eq!(answer(&composed), expected);
        assert_eq!(
            answer(&request(vec![Message::user(QUESTION)])),
            "I could not reach my tools; please try again."
        );
    }
}
