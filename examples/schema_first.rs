//! Schema-first tools: three tools declared as schemas only, and the code
//! behind them chosen per environment.
//!
//! `cargo run --example schema_first` (`APTIX_ENV=prod` binds the
//! production activity of `notify_by_email`)
//!
//! - `sentiment` stays latent: the model works the result out itself and
//!   gives it in the call's `_output` member, which Aptix checks against
//!   the output schema.
//! - `word_count` has a development activity (plain Rust, bound by name).
//! - `notify_by_email` has a production activity when `APTIX_ENV=prod` and a
//!   development double otherwise; its declaration is the same in both.
//!
//! The agent answers one question twice, with native tool calls and then
//! with the tools composed into one structured-output schema (`CallMode::
//! Composed`), on the embedded scripted model, or on an OpenAI-compatible
//! server when `OPENAI_BASE_URL` is set (`APTIX_CALL_MODE=native` or
//! `composed` runs one of the two). It asks for `_reasoningForCall`.

// The tool types are `pub` as they would be in a library crate; here they
// are also included as modules of tests, where nothing re-exports them. In
// a binary, the fields of a latent tool's arguments are read by the model
// only, which rustc's dead-code lint cannot see.
#![allow(unreachable_pub, dead_code)]

use aptix::prelude::*;
use aptix::{Catalog, activity::Activities, catalog::CatalogError};

/// How a text feels.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Feeling {
    /// `positive`, `neutral` or `negative`.
    pub label: Label,
    /// How sure, from 0 to 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: f64,
}

/// A sentiment label.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Pleased, glad, enthusiastic.
    Positive,
    /// Neither.
    Neutral,
    /// Unhappy, angry, sad.
    Negative,
}

/// Classifies how a text feels.
#[agent_tool(
    name = "sentiment",
    usage = "Call to classify how a piece of text feels.",
    output = Feeling
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Sentiment {
    /// The text to classify.
    pub text: String,
}

/// How many words.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Count {
    /// The number of whitespace-separated words.
    pub words: u64,
}

/// Counts the words of a text.
#[agent_tool(
    name = "word_count",
    usage = "Call when the user asks how long a text is.",
    output = Count
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WordCount {
    /// The text to count.
    pub text: String,
}

/// What happened to the email.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Delivery {
    /// The id the mail server gave the message.
    pub message_id: String,
    /// Whether it really left (false for the development double).
    pub delivered: bool,
}

/// Sends an email.
#[agent_tool(
    name = "notify_by_email",
    usage = "Call only when the user asks to send an email.",
    executor = latent,
    output = Delivery
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NotifyByEmail {
    /// The recipient's address.
    pub to: String,
    /// The subject line.
    pub subject: String,
}

/// The activities of the development environment.
pub fn development() -> Activities {
    Activities::new()
        .bind::<WordCount, _, _>(|args, _ctx| async move {
            Ok(Count {
                words: args.text.split_whitespace().count() as u64,
            })
        })
        .bind::<NotifyByEmail, _, _>(|args, ctx| async move {
            // Nothing leaves the machine.
            tracing::info!(to = %args.to, "development: email not sent");
            Ok(Delivery {
                message_id: format!("dev-{}", ctx.tool_call_id()),
                delivered: false,
            })
        })
}

/// The activities of production: development's, with the real mailer.
pub fn production() -> Activities {
    development().bind::<NotifyByEmail, _, _>(|args, ctx| async move {
        // A real mailer goes here; the call id is the idempotency key.
        if !args.to.contains('@') {
            return Err(ToolError::failed(format!(
                "`{}` is not an email address",
                args.to
            )));
        }
        Ok(Delivery {
            message_id: format!("smtp-{}", ctx.tool_call_id()),
            delivered: true,
        })
    })
}

/// The catalog with the activities of the environment `APTIX_ENV` names.
pub fn catalog(environment: &str) -> Result<Catalog, CatalogError> {
    let activities = if environment == "prod" {
        production()
    } else {
        development()
    };
    aptix::tools![Sentiment, WordCount, NotifyByEmail]
        .activities(activities)
        .build()
}

/// The embedded model: the same turn as native calls or as the composed
/// object a model without tool calling answers with.
fn scripted(mode: aptix::agent::CallMode) -> aptix_testkit::ScriptedModel {
    use aptix_testkit::{ScriptedModel, ScriptedTurn};
    if mode == aptix::agent::CallMode::Composed {
        return ScriptedModel::new([
            ScriptedTurn::new().text(
                r#"{"message":"Let me check.","calls":[
                    {"_tool":"sentiment","_activity":"","text":"I love this!","_output":{"label":"positive","confidence":0.95}},
                    {"_tool":"word_count","_activity":"word_count","text":"I love this!"},
                    {"_tool":"notify_by_email","_activity":"notify_by_email","_reasoningForCall":"The user asked to email Ada.","to":"ada@example.com","subject":"Good news"}
                ]}"#,
            ),
            ScriptedTurn::new().text(
                r#"{"message":"Positive, three words, and the email is on its way.","calls":[]}"#,
            ),
        ]);
    }
    ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call(
                "call_feel",
                "sentiment",
                r#"{"text":"I love this!","_output":{"label":"positive","confidence":0.95}}"#,
            )
            .tool_call("call_count", "word_count", r#"{"text":"I love this!"}"#)
            .tool_call(
                "call_mail",
                "notify_by_email",
                r#"{"to":"ada@example.com","subject":"Good news","_reasoningForCall":"The user asked to email Ada."}"#,
            ),
        ScriptedTurn::new().text("Positive, three words, and the email is on its way."),
    ])
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    use aptix::agent::CallMode;
    use aptix::model::ChatModel;
    use aptix::model::openai::OpenAiChat;
    use aptix::{Agent, AgentEvent, Conversation, Input};
    use futures_util::StreamExt;

    let environment = std::env::var("APTIX_ENV").unwrap_or_else(|_| "dev".to_owned());
    let catalog = catalog(&environment)?;
    println!("environment: {environment}");
    for entry in catalog.entries() {
        let runs = match entry.activity() {
            Some(activity) => format!("activity `{activity}`"),
            None if entry.is_latent() => "latent: the model gives `_output`".to_owned(),
            None => "its own code".to_owned(),
        };
        println!("  {:<11} {runs}", entry.name());
    }

    // The same question twice: with native tool calls, then with the tools
    // composed into one structured-output schema.
    let modes = match std::env::var("APTIX_CALL_MODE").as_deref() {
        Err(_) => vec![CallMode::Native, CallMode::Composed],
        Ok("native") => vec![CallMode::Native],
        Ok("composed") => vec![CallMode::Composed],
        Ok(other) => {
            return Err(format!("APTIX_CALL_MODE is `{other}`; use `native` or `composed`").into());
        }
    };
    let real = std::env::var("OPENAI_BASE_URL").is_ok();
    for mode in modes {
        let model: Box<dyn ChatModel> = match std::env::var("OPENAI_BASE_URL") {
            Ok(_) => Box::new(OpenAiChat::from_env()?.with_strict(false)),
            Err(_) => Box::new(scripted(mode)),
        };
        let agent = Agent::builder()
            .shared_model(model.into())
            .catalog(catalog.clone())
            .call_mode(mode)
            .ask_reasoning(true)
            .max_iterations(4)
            .build()?;
        let mut conversation = Conversation::new("schema-first");
        let question = "How does 'I love this!' feel, how many words is it, and email Ada (ada@example.com) the news.";
        println!("\n[{mode:?} calls]\nuser: {question}");
        let mut events = agent.run(&mut conversation, Input::User(question.into()));
        let mut results = 0;
        while let Some(event) = events.next().await {
            match event {
                AgentEvent::TextDelta(text) => print!("{text}"),
                AgentEvent::ToolCallStart {
                    name,
                    arguments,
                    reasoning,
                    ..
                } => {
                    println!("  → {name}({arguments})");
                    if let Some(reasoning) = reasoning {
                        println!("    because: {reasoning}");
                    }
                }
                AgentEvent::ToolCallResult { envelope, .. } => {
                    results += 1;
                    println!("  ← {envelope}");
                }
                AgentEvent::Done { reason, .. } => println!("\ndone: {reason:?}"),
                // Progress and partial results: these tools report none.
                _ => {}
            }
        }
        // A real model may answer without tools; the scripted one never does.
        if results == 0 && !real {
            return Err("the model called no tool".into());
        }
    }
    Ok(())
}
