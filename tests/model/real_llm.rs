//! End to end against a real model: llama.cpp's OpenAI-compatible server
//! with SmolLM2-135M-Instruct, started by `scripts/test.sh` (through
//! `scripts/llm-server.sh`), which sets `APTIX_TEST_LLM_URL`.
//!
//! Without that variable the test says so and passes locally; with `CI=true`
//! it fails, so CI can never skip it silently.

use crate::hello_world;

use aptix::agent::CallMode;
use aptix::model::ToolChoice;
use aptix::model::openai::{OpenAiChat, StructuredOutput};
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, Input, agent::PreparedStep};
use futures_util::StreamExt;
use hello_world::HelloWorldTool;

/// The model server answers one request at a time, and a second request
/// while one streams fails: the tests take turns.
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_real_model_makes_a_streamed_tool_call_that_is_executed_and_fed_back() {
    let Ok(url) = std::env::var("APTIX_TEST_LLM_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "APTIX_TEST_LLM_URL is not set: scripts/test.sh starts the model server and sets it"
        );
        eprintln!("skipped: start a model with scripts/llm-server.sh and set APTIX_TEST_LLM_URL");
        return;
    };
    let _one_at_a_time = SERVER.lock().await;
    let model = OpenAiChat::new("SmolLM2-135M-Instruct")
        .with_base_url(url)
        .with_strict(false);
    let catalog = Catalog::builder()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let agent = Agent::builder()
        .model(model)
        .catalog(catalog)
        .tool_choice(ToolChoice::Tool("agent_hello_world".into()))
        .temperature(0.0)
        .max_tokens(64)
        .max_iterations(2)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation =
        Conversation::new("real-llm").with_system("You are a helpful assistant.");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("Please greet Ada.".into()))
        .collect()
        .await;

    let started: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStart { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    assert!(
        !started.is_empty(),
        "the model made no tool call: {events:?}"
    );
    assert_eq!(started[0].1, "agent_hello_world");
    let first_result = events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolCallResult { id, envelope, .. } if id == started[0].0 => {
                Some(envelope.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for the first call: {events:?}"));
    // The grammar-constrained model writes a well-formed call; the tool ran.
    assert_eq!(
        first_result["ok"],
        serde_json::json!(true),
        "{first_result}"
    );
    assert!(
        first_result["result"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Hello, ")),
        "{first_result}"
    );
    // The envelope went back to the model: the second request followed it.
    let position = conversation
        .messages
        .iter()
        .position(
            |m| matches!(m, Message::Tool { tool_call_id, .. } if tool_call_id == started[0].0),
        )
        .unwrap_or_else(|| panic!("the result is not in the transcript"));
    assert!(
        conversation.messages.len() > position + 1,
        "the model was asked again after the result: {:?}",
        conversation.messages
    );
    match events.last() {
        Some(AgentEvent::Done { reason, .. }) => assert!(
            matches!(reason, DoneReason::Completed | DoneReason::MaxIterations),
            "{reason:?}"
        ),
        other => panic!("the run did not end with Done: {other:?}"),
    }
}

/// Composed calls on a model that answers nothing with native tool choice
/// `auto`: the tools are one structured-output schema, which the server
/// turns into a grammar, so the answer is a valid call by construction.
/// The first step requires a call and the second allows none, so the run
/// ends after the greeting came back.
#[tokio::test]
async fn a_real_model_in_composed_mode_calls_the_tool_through_the_schema() {
    let Ok(url) = std::env::var("APTIX_TEST_LLM_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "APTIX_TEST_LLM_URL is not set: scripts/test.sh starts the model server and sets it"
        );
        eprintln!("skipped: start a model with scripts/llm-server.sh and set APTIX_TEST_LLM_URL");
        return;
    };
    let _one_at_a_time = SERVER.lock().await;
    // llama-cpp-python's server reads the schema of JSON mode only.
    let model = OpenAiChat::new("SmolLM2-135M-Instruct")
        .with_base_url(url)
        .with_strict(false)
        .with_structured_output(StructuredOutput::JsonObjectSchema)
        .with_native_tool_calls(false);
    let catalog = Catalog::builder()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let agent = Agent::builder()
        .model(model)
        .catalog(catalog)
        .call_mode(CallMode::Auto)
        .prepare_step(|step| {
            PreparedStep::all().tool_choice(if step.iteration == 0 {
                ToolChoice::Required
            } else {
                ToolChoice::None
            })
        })
        .temperature(0.0)
        .max_tokens(96)
        .max_iterations(2)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation =
        Conversation::new("real-llm-composed").with_system("You are a helpful assistant.");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("Please greet Ada.".into()))
        .collect()
        .await;
    let result = events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolCallResult { name, envelope, .. } if name == "agent_hello_world" => {
                Some(envelope.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no agent_hello_world result: {events:?}"));
    assert_eq!(result["ok"], serde_json::json!(true), "{result}");
    assert!(
        result["result"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Hello, ")),
        "{result}"
    );
    // The reader saw the model's `message`s, never the JSON of an answer
    // (one the agent could not read is sent back to the model instead).
    let shown: String = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !shown.contains("\"calls\"") && !shown.trim_start().starts_with('{'),
        "{shown}"
    );
    match events.last() {
        Some(AgentEvent::Done { reason, .. }) => {
            assert!(
                matches!(reason, DoneReason::Completed),
                "{reason:?}: {events:?}"
            )
        }
        other => panic!("the run did not end with Done: {other:?}"),
    }
}
