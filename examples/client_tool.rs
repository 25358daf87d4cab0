//! A client tool resolved by a second process through the store: the agent
//! asks for the user's location (`get_location`, `executor = client`), the
//! run suspends, and a separate process — standing in for the browser's
//! request to a web handler — sends the result with nothing but the two
//! ids. The first process then resumes the conversation from the store.
//!
//! `cargo run --example client_tool`
//!
//! The example starts the second process itself (it re-runs its own binary
//! with `resolve <db> <conversation> <call>`); the result it sends is
//! validated against the tool's declared output schema.

#[path = "get_location.rs"]
mod get_location;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use aptix::durable::{DurableAgent, Revival};
use aptix::store::SqliteStore;
use aptix::{Agent, AgentEvent, Catalog, DoneReason, Input, Resolution};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::json;

fn agent(
    store: SqliteStore,
    model: ScriptedModel,
) -> Result<DurableAgent, Box<dyn std::error::Error>> {
    Ok(DurableAgent::builder(
        Agent::builder()
            .model(model)
            .catalog(
                Catalog::builder()
                    .tool::<get_location::GetLocation>()
                    .build()?,
            )
            .build()?,
        store,
    )
    // This process only records the result; the one running the
    // conversation continues it.
    .resume_on_resolve(false)
    .build())
}

fn print_event(process: &str, event: &AgentEvent) {
    match event {
        AgentEvent::TextDelta(text) => {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
        AgentEvent::ToolCallStart {
            name, arguments, ..
        } => {
            println!("\n[{process}]  → {name}({arguments})")
        }
        AgentEvent::ToolCallResult { envelope, .. } => println!("[{process}]  ← {envelope}"),
        AgentEvent::Done { reason, .. } => match reason {
            DoneReason::Suspended(calls) => println!(
                "\n[{process}] suspended: {} waits for a client",
                calls
                    .iter()
                    .map(|call| call.tool_call_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            other => println!("\n[{process}] done: {other:?}"),
        },
        // Progress and partial results: none of this example's tools report them.
        _ => {}
    }
}

/// The second process: resolves the call with a location, and exits.
async fn resolve(
    db: &Path,
    conversation: &str,
    call: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let agent = agent(SqliteStore::open(db).await?, ScriptedModel::new([]))?;
    for pending in agent.pending(conversation).await? {
        println!(
            "[client] {} asks for {} with {}",
            pending.tool_call_id, pending.tool, pending.payload
        );
    }
    // A first attempt with a field the schema does not have is refused:
    // client data is never trusted.
    let bad = json!({"latitude": 48.85, "longitude": 2.35, "accuracy_m": 30.0, "city": "Paris"});
    if let Err(error) = agent
        .resolve(conversation, call, Resolution::Result(bad))
        .await
    {
        println!("[client] refused: {error}");
    }
    let location = json!({"latitude": 48.8566, "longitude": 2.3522, "accuracy_m": 30.0});
    let resolved = agent
        .resolve(conversation, call, Resolution::Result(location))
        .await?;
    println!("[client] recorded; {} still pending", resolved.pending);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, command, db, conversation, call] = args.as_slice()
        && command == "resolve"
    {
        return resolve(Path::new(db), conversation, call).await;
    }

    let db = std::env::temp_dir().join(format!("aptix-client-tool-{}.db", std::process::id()));
    let model = ScriptedModel::new([
        ScriptedTurn::new()
            .text("Let me check where you are. ")
            .tool_call(
                "call_where",
                "get_location",
                r#"{"reason":"to find restaurants near you"}"#,
            ),
        ScriptedTurn::new().text("You are in central Paris; here are three bistros nearby."),
    ]);
    let agent = agent(SqliteStore::open(&db).await?, model)?;
    let conversation = "client-tool-demo";
    // The browser tab is open: client calls wait their full time.
    let _client = agent.attach_client(conversation).await?;

    println!("[agent] user: Find me a restaurant nearby.\n[agent] assistant: ");
    let mut events = agent
        .send(
            conversation,
            Input::User("Find me a restaurant nearby.".into()),
        )
        .await?;
    while let Some(event) = events.next().await {
        print_event("agent", &event);
    }

    let status = std::process::Command::new(std::env::current_exe()?)
        .args(["resolve", &db.to_string_lossy(), conversation, "call_where"])
        .status()?;
    println!("[agent] the client process exited: {status}");

    // The result is in the store; continue the conversation from there.
    let mut background = agent.subscribe();
    let revival = agent.ensure_started(conversation).await?;
    println!("[agent] revival: {revival:?}\n[agent] assistant: ");
    if revival == Revival::Resumed {
        while let Ok(Ok(event)) =
            tokio::time::timeout(Duration::from_secs(30), background.recv()).await
        {
            print_event("agent", &event.event);
            if matches!(event.event, AgentEvent::Done { .. }) {
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&db);
    Ok(())
}
