//! `ToolReturn { value, content }`: a typed result with images or documents
//! for the model. The value is the result everywhere (schema, envelope,
//! events); the content reaches the model in each provider's own form,
//! checked here in the bytes each adapter sends to its mock server.

use crate::chart;

use std::sync::Arc;

use aptix::agent::{AfterCall, HookCall, HookFuture, ToolHook};
use aptix::model::anthropic::Anthropic;
use aptix::model::openai::OpenAiChat;
use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_testkit::ToolHarness;
use aptix_testkit::mock_anthropic::{AnthropicTurn, MockAnthropicServer};
use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::StreamExt;
use serde_json::{Value, json};

use chart::{HEIGHT, PlotSeriesTool, SeriesSummary, WIDTH};

const SERIES: &str = r#"{"values":[12,15,11,18,24,22,30]}"#;

/// The chart's PNG as the tool makes it, base64.
fn expected_png() -> String {
    let values = [12.0, 15.0, 11.0, 18.0, 24.0, 22.0, 30.0];
    let png = chart::line_chart_png(&values, 11.0, 30.0).unwrap_or_else(|e| panic!("{e}"));
    BASE64.encode(png)
}

async fn run(agent: &Agent, conversation: &mut Conversation) -> Vec<AgentEvent> {
    let events: Vec<AgentEvent> = agent
        .run(conversation, Input::User("Plot the week.".into()))
        .collect()
        .await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::Done {
                reason: DoneReason::Completed,
                ..
            })
        ),
        "{events:?}"
    );
    events
}

fn agent_on(model: impl aptix::model::ChatModel + 'static) -> Agent {
    Agent::builder()
        .model(model)
        .catalog(chart::catalog())
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn the_chart_is_a_real_png_beside_a_typed_summary() {
    let harness = ToolHarness::for_tool::<PlotSeriesTool>();
    let result = harness.call_raw(SERIES).await;
    let summary: SeriesSummary = result.ok();
    assert_eq!(
        summary,
        SeriesSummary {
            points: 7,
            min: 11.0,
            max: 30.0,
            mean: 132.0 / 7.0,
        }
    );
    // The envelope's JSON, what the model reads as the result, holds the
    // summary only.
    let json = result.envelope().to_json_string();
    assert!(!json.contains("iVBOR"), "{json}");
    let [
        Content::Image {
            data, mime_type, ..
        },
    ] = result.envelope().attachments()
    else {
        panic!("one image expected: {:?}", result.envelope().attachments())
    };
    assert_eq!(mime_type, "image/png");
    let bytes = BASE64.decode(data).unwrap_or_else(|e| panic!("{e}"));
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let reader = decoder.read_info().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((reader.info().width, reader.info().height), (WIDTH, HEIGHT));

    // The tool's output schema is the summary's, not the wrapper's.
    let definition = PlotSeriesTool::definition().unwrap_or_else(|e| panic!("{e}"));
    let output = definition.output_schema();
    assert_eq!(
        output["properties"]["points"]["type"], "integer",
        "{output}"
    );
    assert!(output["properties"].get("value").is_none(), "{output}");
}

#[tokio::test]
async fn the_image_reaches_anthropic_inside_the_tool_result() {
    let server = MockAnthropicServer::start([
        AnthropicTurn::new()
            .tool_use("toolu_chart", "plot_series", &[SERIES])
            .into_response(),
        AnthropicTurn::new().text("It rose.").into_response(),
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let model = Anthropic::new("claude-sonnet-4-5", "sk-ant-test").with_base_url(server.base_url());
    let mut conversation = Conversation::new("chart-anthropic");
    run(&agent_on(model), &mut conversation).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = &requests[1].body["messages"];
    assert_eq!(messages.as_array().map(Vec::len), Some(3), "{messages}");
    let result_message = &messages[2];
    assert_eq!(result_message["role"], "user");
    let block = &result_message["content"][0];
    assert_eq!(block["type"], "tool_result");
    assert_eq!(block["tool_use_id"], "toolu_chart");
    assert_eq!(block["is_error"], false);
    let content = &block["content"];
    // The envelope as text, then the image block.
    assert_eq!(content[0]["type"], "text");
    let envelope: Value = serde_json::from_str(content[0]["text"].as_str().unwrap_or_default())
        .unwrap_or(Value::Null);
    assert_eq!(envelope["result"]["points"], 7);
    assert_eq!(
        content[1],
        json!({
            "type": "image",
            "source": { "type": "base64", "media_type": "image/png", "data": expected_png() },
        })
    );
    assert_eq!(content.as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn the_image_reaches_openai_chat_in_a_user_message_after_the_tool_messages() {
    let server = MockOpenAiServer::start([
        OpenAiTurn::new()
            .tool_call("call_chart", "plot_series", &[SERIES])
            .tool_call("call_plain", "plot_series", &[r#"{"values":[1,2]}"#])
            .parallel()
            .into_response(),
        OpenAiTurn::text("It rose.").into_response(),
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let model = OpenAiChat::new("gpt-4o-mini").with_base_url(server.base_url());
    let mut conversation = Conversation::new("chart-openai");
    run(&agent_on(model), &mut conversation).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    // Both tool messages right after the assistant's calls, as the API
    // requires; the attachments after them, in one user message.
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
    assert!(messages[2]["content"].is_string());
    let text = messages[2]["content"].as_str().unwrap_or_default();
    assert!(!text.contains("iVBOR"), "{text}");
    let second_png = BASE64
        .encode(chart::line_chart_png(&[1.0, 2.0], 1.0, 2.0).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        messages[4]["content"],
        json!([
            { "type": "text", "text": "Attached by the `plot_series` result of call call_chart:" },
            { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{}", expected_png()) } },
            { "type": "text", "text": "Attached by the `plot_series` result of call call_plain:" },
            { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{second_png}") } },
        ])
    );
}

#[tokio::test]
async fn the_scripted_model_sees_the_attachments_and_events_never_carry_them() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("call_chart", "plot_series", SERIES),
        ScriptedTurn::new().text("It rose."),
    ]));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(chart::catalog())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("chart-scripted");
    let events = run(&agent, &mut conversation).await;
    let requests = model.requests();
    let Some(Message::Tool { attachments, .. }) = requests[1].messages.last() else {
        panic!("the second request ends with the tool result")
    };
    assert_eq!(
        attachments,
        &vec![Content::image(expected_png(), "image/png")]
    );
    for event in &events {
        let shown = format!("{event:?}");
        assert!(
            !shown.contains("iVBOR"),
            "an event carries the image: {shown}"
        );
    }
    // The transcript keeps them, and a stored transcript reads them back.
    let stored = serde_json::to_string(&conversation).unwrap_or_default();
    let read: Conversation = serde_json::from_str(&stored).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read, conversation);
}

/// Rewrites what the model sees of every result.
struct Summarize;

impl ToolHook for Summarize {
    fn name(&self) -> &str {
        "summarize"
    }

    fn after_call<'a>(
        &'a self,
        _call: HookCall<'a>,
        _envelope: &'a Value,
    ) -> HookFuture<'a, AfterCall> {
        Box::pin(async { AfterCall::Replace("A chart was drawn.".into()) })
    }
}

#[tokio::test]
async fn a_hook_that_rewrites_the_result_hides_the_attachments_too() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("call_chart", "plot_series", SERIES),
        ScriptedTurn::new().text("Fine."),
    ]));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(chart::catalog())
        .hook(Summarize)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("chart-hook");
    run(&agent, &mut conversation).await;
    let requests = model.requests();
    let Some(Message::Tool {
        content,
        attachments,
        ..
    }) = requests[1].messages.last()
    else {
        panic!("the second request ends with the tool result")
    };
    assert_eq!(content, "A chart was drawn.");
    assert!(attachments.is_empty());
}
