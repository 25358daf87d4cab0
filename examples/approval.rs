//! Human in the loop: `send_email` needs a person's approval, asked for on
//! the terminal. The suspended call lives in a SQLite file, so the process
//! could stop while it waits and another could resolve it.
//!
//! `cargo run --example approval`
//!
//! Answer `y` to send, `n` to refuse (the model is told why), or `e` to
//! change the subject first (the new arguments are validated again). With
//! no terminal (stdin closed) the call is refused. With `OPENAI_BASE_URL`
//! set, a real OpenAI-compatible model drives the conversation instead of
//! the embedded scripted one.

#[path = "send_email.rs"]
mod send_email;

use std::io::{BufRead, Write};
use std::sync::Arc;

use aptix::durable::DurableAgent;
use aptix::model::ChatModel;
use aptix::model::openai::OpenAiChat;
use aptix::store::SqliteStore;
use aptix::{Agent, AgentEvent, Catalog, DoneReason, Input, Resolution, ToolContext};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::Value;

const REQUEST: &str = "Please email ada@example.com that the quarterly report is ready.";

fn scripted() -> ScriptedModel {
    ScriptedModel::new([
        ScriptedTurn::new().text("I'll send that email. ").tool_call(
            "call_email",
            "send_email",
            r#"{"to":"ada@example.com","subject":"Quarterly report","body":"Hi Ada, the quarterly report is ready."}"#,
        ),
        ScriptedTurn::new().text("That is settled; the tool result above says how."),
    ])
}

fn print_event(event: &AgentEvent) {
    match event {
        AgentEvent::TextDelta(text) => {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
        AgentEvent::ToolCallStart {
            name, arguments, ..
        } => println!("\n  → {name}({arguments})"),
        AgentEvent::ToolCallResult { envelope, .. } => println!("  ← {envelope}"),
        AgentEvent::Done { reason, .. } => match reason {
            DoneReason::Suspended(calls) => {
                println!("\n[suspended: {} call(s) wait for a person]", calls.len())
            }
            other => println!("\n[done: {other:?}]"),
        },
        // Progress and partial results: none of this example's tools report them.
        _ => {}
    }
}

/// Asks on the terminal; `None` when nobody can answer (stdin closed).
fn ask(question: &str) -> Option<String> {
    print!("{question}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

fn decide(arguments: &Value) -> Resolution {
    println!("\nThe assistant wants to send this email:");
    println!(
        "{}",
        serde_json::to_string_pretty(arguments).unwrap_or_default()
    );
    let Some(answer) = ask("Send it? [y]es / [n]o / [e]dit subject: ") else {
        println!("(no terminal: refusing)");
        return Resolution::Deny {
            message: "Nobody was available to approve the email.".into(),
        };
    };
    match answer.as_str() {
        "y" | "yes" => Resolution::Approve,
        "e" | "edit" => {
            let subject = ask("New subject: ").unwrap_or_default();
            let mut changed = arguments.clone();
            changed["subject"] = Value::String(subject);
            Resolution::ApproveWithArgs(changed)
        }
        _ => {
            let reason = ask("Why not? ").unwrap_or_default();
            Resolution::Deny {
                message: if reason.is_empty() {
                    "The user declined to send this email.".into()
                } else {
                    reason
                },
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join("aptix-approval-example.db");
    let store = SqliteStore::open(&path).await?;
    let model: Arc<dyn ChatModel> = match std::env::var("OPENAI_BASE_URL") {
        Ok(_) => Arc::new(OpenAiChat::from_env()?),
        Err(_) => Arc::new(scripted()),
    };
    // Tool state (here, a stand-in for an SMTP client) travels in the base
    // context; this handle reads it back at the end.
    let context = ToolContext::new().with_state(send_email::Outbox::default());
    let agent = DurableAgent::builder(
        Agent::builder()
            .shared_model(model)
            .catalog(
                Catalog::builder()
                    .tool::<send_email::SendEmailTool>()
                    .build()?,
            )
            .context(context.clone())
            .build()?,
        store,
    )
    .build();
    let conversation_id = format!("approval-{}", std::process::id());
    println!(
        "store: {}\nconversation: {conversation_id}\n",
        path.display()
    );
    println!("user: {REQUEST}\nassistant: ");

    let mut events = agent
        .send(&conversation_id, Input::User(REQUEST.into()))
        .await?;
    while let Some(event) = events.next().await {
        print_event(&event);
    }

    // Everything needed to decide is in the store: another process (a web
    // handler, a job) could do this part with only the two ids.
    for pending in agent.pending(&conversation_id).await? {
        let resolution = decide(&pending.payload);
        match agent
            .resolve(&conversation_id, &pending.tool_call_id, resolution)
            .await
        {
            Ok(resolved) => println!("[recorded; {} still pending]", resolved.pending),
            Err(error) => println!("[refused: {error}]"),
        }
    }

    // The next model turn runs in the background; follow it to its end
    // (a watch of one conversation: it ends with the run's `Done`).
    println!("assistant: ");
    let mut resumed = agent.watch(&conversation_id);
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(30), resumed.next()).await {
            Ok(Some(event)) => print_event(&event),
            Ok(None) => break,
            Err(_) => {
                println!("\n[no more events]");
                break;
            }
        }
    }
    let sent = context
        .state::<send_email::Outbox>()
        .and_then(|outbox| outbox.sent.lock().ok().map(|sent| sent.len()))
        .unwrap_or(0);
    println!("emails in the outbox: {sent}");
    Ok(())
}
