//! The OpenAI Responses adapter over the wire: a real HTTP mock streaming
//! the Responses API's events byte for byte, every event fed through the
//! one `TurnAssembler`, and agents run end to end against it.

use std::time::Duration;

use aptix_core::Dialect;
use aptix_core::model::HttpPolicy;
use aptix_core::model::adapter::{AssembledTurn, CallStatus, TurnAssembler, TurnLimits};
use aptix_core::model::responses::{OpenAiResponses, ReasoningEffort, ReasoningSummary};
use aptix_core::model::{
    ChatModel, ChatRequest, FinishReason, HostedToolEvent, ModelError, ModelEvent, ModelStream,
    ResponseFormat, ThinkingDelta, ToolChoice, ToolSpec, Usage,
};
use aptix_core::transcript::{Message, ThinkingBlock};
use aptix_testkit::conformance::{
    OpenAiResponsesWire, ProviderWire, WireCall, WireHosted, WireMessage, WireReasoning, WireTurn,
};
use aptix_testkit::mock_responses::{
    MockResponsesServer, ResponsesTurn, error_frame, error_response, huge_delta_response,
};
use aptix_testkit::mock_server::ScriptedResponse;
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn fast_policy() -> HttpPolicy {
    HttpPolicy {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_retries: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        ..HttpPolicy::default()
    }
}

fn model_for(server: &MockResponsesServer) -> OpenAiResponses {
    OpenAiResponses::new("gpt-5-mini")
        .with_base_url(server.base_url())
        .with_api_key("sk-test-key")
        .with_policy(fast_policy())
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        parameters: json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
            "additionalProperties": false,
        }),
        dialect: Dialect::OpenAiStrict,
        hosted: false,
    }
}

fn hosted(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: "Run by the provider.".into(),
        parameters: json!({ "type": "object", "properties": {} }),
        dialect: Dialect::OpenAiStrict,
        hosted: true,
    }
}

fn request(messages: Vec<Message>, tools: Vec<ToolSpec>) -> ChatRequest {
    ChatRequest {
        messages,
        tools: tools.into(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: None,
    }
}

fn ask(text: &str) -> ChatRequest {
    request(vec![Message::user(text)], vec![weather_tool()])
}

async fn next_event(stream: &mut ModelStream<'_>) -> Option<Result<ModelEvent, ModelError>> {
    std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await
}

/// Every item of the stream, errors included.
async fn collect(
    model: &OpenAiResponses,
    request: &ChatRequest,
) -> Vec<Result<ModelEvent, ModelError>> {
    let mut stream = model.stream(request);
    let mut items = Vec::new();
    while let Some(item) = next_event(&mut stream).await {
        items.push(item);
    }
    items
}

/// The stream through the assembler, as the agent loop reads it.
async fn assemble(
    model: &OpenAiResponses,
    request: &ChatRequest,
    limits: TurnLimits,
) -> Result<AssembledTurn, ModelError> {
    let mut stream = model.stream(request);
    let mut assembler = TurnAssembler::with_limits(limits);
    while let Some(item) = next_event(&mut stream).await {
        assembler.push(item?)?;
    }
    assembler.finish()
}

/// Asserts the stream failed and never claimed the turn finished.
fn assert_failed_without_finish(items: &[Result<ModelEvent, ModelError>]) -> ModelError {
    assert!(
        !items
            .iter()
            .any(|item| matches!(item, Ok(ModelEvent::Finish { .. }))),
        "a failed stream yielded Finish: {items:?}"
    );
    match items.last() {
        Some(Err(error)) => error.clone(),
        other => panic!("expected the stream to end in an error, got {other:?}"),
    }
}

/// Arguments of `weather`.
#[derive(Debug, aptix::prelude::Deserialize, aptix::prelude::JsonSchema)]
pub struct WeatherArgs {
    /// The city.
    pub city: String,
}

/// The weather in a city.
#[aptix::prelude::agent_tool(
    name = "weather",
    usage = "Call when the user asks about the weather."
)]
async fn weather(args: WeatherArgs) -> Result<String, aptix::prelude::ToolError> {
    Ok(format!("Sunny in {}", args.city))
}

use crate::WebSearch;

async fn run_agent(
    agent: &aptix::Agent,
    conversation: &mut aptix::Conversation,
    input: &str,
) -> Vec<aptix::AgentEvent> {
    futures_util::StreamExt::collect(agent.run(conversation, aptix::Input::User(input.into())))
        .await
}

fn assert_completed(events: &[aptix::AgentEvent]) {
    assert!(
        matches!(
            events.last(),
            Some(aptix::AgentEvent::Done {
                reason: aptix::DoneReason::Completed,
                ..
            })
        ),
        "{events:#?}"
    );
}

/// Base64 with `+`, `/` and `=`: must come back as it was.
const ENCRYPTED: &str = "gAAAAABpPDIV+OKrs/HNZ0Gws==";

/// The first request of a conversation, byte for byte: instructions from
/// the system message, the user's words as an input item, the function
/// tool strict, stateless with the encrypted reasoning asked for, the
/// reasoning options, and no temperature for a reasoning model.
#[tokio::test]
async fn the_first_request_is_exactly_the_documented_shape() -> TestResult {
    let server =
        MockResponsesServer::start([ResponsesTurn::new().text("Hi.").into_response()]).await?;
    let model = model_for(&server)
        .with_reasoning(ReasoningEffort::Low, ReasoningSummary::Auto)
        .with_max_output_tokens(2000);
    let mut chat = request(
        vec![
            Message::system("Be brief."),
            Message::user("Weather in Paris?"),
        ],
        vec![weather_tool()],
    );
    chat.temperature = Some(0.2);
    let turn = assemble(&model, &chat, TurnLimits::default()).await?;
    assert_eq!(turn.text, "Hi.");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/responses");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-test-key")
    );
    assert_eq!(requests[0].header("accept"), Some("text/event-stream"));
    assert_eq!(
        requests[0].raw_body,
        concat!(
            r#"{"include":["reasoning.encrypted_content"],"#,
            r#""input":[{"content":"Weather in Paris?","role":"user"}],"#,
            r#""instructions":"Be brief.","max_output_tokens":2000,"model":"gpt-5-mini","#,
            r#""parallel_tool_calls":true,"reasoning":{"effort":"low","summary":"auto"},"#,
            r#""store":false,"stream":true,"tool_choice":"auto","#,
            r#""tools":[{"description":"The weather in a city.","name":"get_weather","#,
            r#""parameters":{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"#,
            r#""strict":true,"type":"function"}]}"#,
        )
    );
    Ok(())
}

/// The bar of the issue: a reasoning model's reasoning item reaches the
/// request after its tool call unchanged (`encrypted_content` and all), in
/// its place before the call, followed by the call's output; an agent runs
/// the whole round trip.
#[tokio::test]
async fn reasoning_reaches_the_request_after_a_tool_call_unchanged() -> TestResult {
    let server = MockResponsesServer::start([
        ResponsesTurn::new()
            .reasoning(&["Checking ", "the \"weather\" — "], ENCRYPTED)
            .function_call("call_w", "weather", &["{\"city\":", "\"Paris\"}"])
            .into_response(),
        ResponsesTurn::new().text("Sunny.").into_response(),
    ])
    .await?;
    let agent = aptix::Agent::builder()
        .model(model_for(&server))
        .catalog(aptix::tools![WeatherTool].build()?)
        .max_iterations(4)
        .build()?;
    let mut conversation = aptix::Conversation::new("responses-reasoning");
    let events = run_agent(&agent, &mut conversation, "Weather in Paris?").await;
    assert_completed(&events);
    let shown: String = events
        .iter()
        .filter_map(|event| match event {
            aptix::AgentEvent::ReasoningDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, "Checking the \"weather\" — ");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body["input"],
        json!([
            { "role": "user", "content": "Weather in Paris?" },
            {
                "id": "rs_0aptix0000000000000000000000000000000000000000",
                "type": "reasoning",
                "encrypted_content": ENCRYPTED,
                "summary": [{ "type": "summary_text", "text": "Checking the \"weather\" — " }],
            },
            { "type": "function_call", "call_id": "call_w", "name": "weather", "arguments": "{\"city\":\"Paris\"}" },
            { "type": "function_call_output", "call_id": "call_w", "output": requests[1].body["input"][3]["output"] },
        ])
    );
    let output: Value = serde_json::from_str(
        requests[1].body["input"][3]["output"]
            .as_str()
            .unwrap_or_default(),
    )?;
    assert_eq!(output["result"], "Sunny in Paris");
    assert!(
        requests[1]
            .raw_body
            .contains(&format!(r#""encrypted_content":"{ENCRYPTED}""#))
    );
    assert_eq!(requests[1].body["store"], false);
    assert_eq!(requests[1].body.get("previous_response_id"), None);
    // The reasoning is kept with the turn in the transcript.
    let kept = conversation.messages.iter().any(|message| {
        matches!(message, Message::Assistant { thinking, .. }
            if matches!(thinking.as_slice(), [ThinkingBlock::OpenaiReasoning { item }] if item["encrypted_content"] == ENCRYPTED))
    });
    assert!(kept, "{:#?}", conversation.messages);
    Ok(())
}

/// The request after a tool call, byte for byte: the turn's record is
/// never sent, the call goes back as the model made it.
#[tokio::test]
async fn the_request_after_a_tool_call_is_exactly_the_documented_shape() -> TestResult {
    let server = MockResponsesServer::start([
        ResponsesTurn::new()
            .text("Checking.")
            .function_call("call_w", "weather", &["{\"city\":\"Paris\"}"])
            .into_response(),
        ResponsesTurn::new().text("Sunny.").into_response(),
    ])
    .await?;
    let model = OpenAiResponses::new("gpt-4.1")
        .with_base_url(server.base_url())
        .with_policy(fast_policy());
    let agent = aptix::Agent::builder()
        .model(model)
        .catalog(aptix::tools![WeatherTool].build()?)
        .temperature(0.5)
        .max_iterations(4)
        .build()?;
    let mut conversation =
        aptix::Conversation::new("responses-after-call").with_system("Be brief.");
    let events = run_agent(&agent, &mut conversation, "Weather?").await;
    assert_completed(&events);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].raw_body,
        concat!(
            r#"{"input":[{"content":"Weather?","role":"user"},"#,
            r#"{"content":[{"text":"Checking.","type":"output_text"}],"role":"assistant","type":"message"},"#,
            r#"{"arguments":"{\"city\":\"Paris\"}","call_id":"call_w","name":"weather","type":"function_call"},"#,
            r#"{"call_id":"call_w","output":"{\"ok\":true,\"result\":\"Sunny in Paris\",\"tool_call_id\":\"call_w\",\"conversation_id\":\"responses-after-call\",\"session_id\":null}","type":"function_call_output"}],"#,
            r#""instructions":"Be brief.","model":"gpt-4.1","parallel_tool_calls":true,"store":false,"stream":true,"temperature":0.5,"tool_choice":"auto","#,
            r#""tools":[{"description":"The weather in a city.\n\nUsage: Call when the user asks about the weather.","name":"weather","#,
            r#""parameters":{"additionalProperties":false,"description":"Arguments of `weather`.","properties":{"city":{"description":"The city.","type":"string"}},"required":["city"],"type":"object"},"#,
            r#""strict":true,"type":"function"}]}"#,
        )
    );
    // Not a reasoning model: its temperature goes, no encrypted reasoning
    // is asked for.
    assert_eq!(requests[1].body["temperature"], json!(0.5));
    assert_eq!(requests[1].body.get("include"), None);
    assert_eq!(requests[1].body["instructions"], "Be brief.");
    Ok(())
}

#[tokio::test]
async fn parallel_function_calls_each_get_their_own_index_and_call_id() -> TestResult {
    let server = MockResponsesServer::start([ResponsesTurn::new()
        .function_call("call_a", "get_weather", &["{\"city\":", "\"Paris\"}"])
        .function_call("call_b", "get_weather", &["{\"city\":\"Zürich\"}"])
        .usage(40, 22)
        .cached_tokens(32)
        .into_response()])
    .await?;
    let turn = assemble(
        &model_for(&server),
        &ask("Two cities?"),
        TurnLimits::default(),
    )
    .await?;
    let calls: Vec<(&str, &str, &str)> = turn
        .tool_calls
        .iter()
        .map(|call| {
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "get_weather", "{\"city\":\"Paris\"}"),
            ("call_b", "get_weather", "{\"city\":\"Zürich\"}"),
        ]
    );
    assert!(
        turn.tool_calls
            .iter()
            .all(|call| call.status == CallStatus::Complete)
    );
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        turn.usage,
        Some(Usage {
            cache_read_tokens: 32,
            ..Usage::new(40, 22)
        })
    );
    assert_eq!(
        turn.server_blocks,
        [json!({
            "type": "aptix_responses_turn",
            "response_id": "resp_0aptix0000000000000000000000000000000001",
            "output": ["function_call", "function_call"],
        })]
    );
    Ok(())
}

/// A hosted web search: an agent with an `executor = provider` tool
/// builds, the request offers it in the API's form, the search the
/// provider ran is shown as the tool's call and result, and its item goes
/// back in its place (after the reasoning before it) in the next request.
#[tokio::test]
async fn a_hosted_web_search_runs_is_shown_and_goes_back() -> TestResult {
    let server = MockResponsesServer::start([
        ResponsesTurn::new()
            .reasoning(&[], "enc-1")
            .web_search("ws_1", "weather Paris", &["https://example.com/paris"])
            .reasoning(&[], "enc-2")
            .function_call("call_w", "weather", &["{\"city\":\"Paris\"}"])
            .into_response(),
        ResponsesTurn::new().text("Sunny.").into_response(),
    ])
    .await?;
    let agent = aptix::Agent::builder()
        .model(model_for(&server))
        .catalog(aptix::tools![WeatherTool, WebSearch].build()?)
        .max_iterations(4)
        .build()?;
    let mut conversation = aptix::Conversation::new("responses-web-search");
    let events = run_agent(&agent, &mut conversation, "Weather in Paris?").await;
    assert_completed(&events);
    let started = events.iter().any(|event| {
        matches!(event, aptix::AgentEvent::ToolCallStart { id, name, arguments, .. }
            if id == "ws_1" && name == "web_search" && arguments["query"] == "weather Paris")
    });
    let finished = events.iter().any(|event| {
        matches!(event, aptix::AgentEvent::ToolCallResult { id, name, envelope, .. }
            if id == "ws_1" && name == "web_search"
                && envelope["ok"] == true
                && envelope["result"]["sources"][0]["url"] == "https://example.com/paris")
    });
    assert!(started && finished, "{events:#?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0].body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tools.contains(&json!({ "type": "web_search" })),
        "{tools:?}"
    );
    let kinds: Vec<&str> = requests[1].body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| item["type"].as_str().unwrap_or("user"))
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "reasoning",
            "web_search_call",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(
        requests[1].body["input"][2],
        json!({
            "id": "ws_1",
            "type": "web_search_call",
            "status": "completed",
            "action": {
                "type": "search",
                "query": "weather Paris",
                "sources": [{ "type": "url", "url": "https://example.com/paris" }],
            },
        })
    );
    assert_eq!(requests[1].body["input"][3]["encrypted_content"], "enc-2");
    Ok(())
}

#[tokio::test]
async fn hosted_tools_are_sent_in_their_forms_and_file_search_needs_its_stores() -> TestResult {
    let server =
        MockResponsesServer::start([ResponsesTurn::new().text("ok").into_response()]).await?;
    let tools = vec![
        hosted("code_interpreter"),
        hosted("file_search"),
        hosted("images"),
    ];
    // Without vector stores, file search is refused before any request.
    let model = model_for(&server);
    assert!(model.hosts_tool("web_search") && model.hosts_tool("file_search"));
    assert!(!model.hosts_tool("images"));
    let items = collect(&model, &request(vec![Message::user("Hi")], tools.clone())).await;
    match items.as_slice() {
        [Err(ModelError::Config(message))] => {
            assert!(message.contains("vector_store_ids"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(server.requests().is_empty());
    let model = model
        .hosted_tool(
            "file_search",
            json!({ "type": "file_search", "vector_store_ids": ["vs_1"] }),
        )
        .hosted_tool("images", json!({ "type": "image_generation" }));
    assert!(model.hosts_tool("images"));
    let mut chat = request(vec![Message::user("Hi")], tools);
    chat.tool_choice = ToolChoice::Tool("code_interpreter".into());
    let turn = assemble(&model, &chat, TurnLimits::default()).await?;
    assert_eq!(turn.text, "ok");
    let body = &server.requests()[0].body;
    assert_eq!(
        body["tools"],
        json!([
            { "type": "code_interpreter", "container": { "type": "auto" } },
            { "type": "file_search", "vector_store_ids": ["vs_1"] },
            { "type": "image_generation" },
        ])
    );
    assert_eq!(body["tool_choice"], json!({ "type": "code_interpreter" }));
    Ok(())
}

/// A code interpreter's item, and an item type this adapter has never
/// heard of, are kept and shown like any hosted tool's.
#[tokio::test]
async fn other_hosted_items_are_shown_and_kept() -> TestResult {
    let done = json!({
        "id": "ci_1",
        "type": "code_interpreter_call",
        "status": "completed",
        "code": "print(1 + 1)",
        "container_id": "cntr_1",
        "outputs": [{ "type": "logs", "logs": "2\n" }],
    });
    let server = MockResponsesServer::start([ResponsesTurn::new()
        .raw_item(
            json!({ "id": "ci_1", "type": "code_interpreter_call", "status": "in_progress" }),
            done.clone(),
        )
        .text("2")
        .into_response()])
    .await?;
    let model = model_for(&server);
    let mut chat = ask("1+1?");
    chat.tools = vec![hosted("code_interpreter")].into();
    let items = collect(&model, &chat).await;
    let events: Vec<ModelEvent> = items.into_iter().collect::<Result<_, _>>()?;
    assert!(
        events.contains(&ModelEvent::Hosted(HostedToolEvent::Called {
            id: "ci_1".into(),
            name: "code_interpreter".into(),
            input: json!({ "code": "print(1 + 1)" }),
        }))
    );
    assert!(
        events.contains(&ModelEvent::Hosted(HostedToolEvent::Finished {
            id: "ci_1".into(),
            name: "code_interpreter".into(),
            output: json!({ "outputs": [{ "type": "logs", "logs": "2\n" }] }),
            is_error: false,
        }))
    );
    assert!(events.contains(&ModelEvent::ServerBlock(done)));
    Ok(())
}

/// Composed mode's structured output goes in `text.format`.
#[tokio::test]
async fn structured_output_is_sent_as_text_format() -> TestResult {
    let server =
        MockResponsesServer::start([ResponsesTurn::new().text("{\"calls\":[]}").into_response()])
            .await?;
    let mut chat = request(vec![Message::user("Hi")], Vec::new());
    chat.response_format = Some(ResponseFormat {
        name: "calls".into(),
        schema: std::sync::Arc::new(
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        ),
        strict: true,
    });
    let turn = assemble(&model_for(&server), &chat, TurnLimits::default()).await?;
    assert_eq!(turn.text, "{\"calls\":[]}");
    let body = &server.requests()[0].body;
    assert_eq!(
        body["text"],
        json!({ "format": {
            "type": "json_schema",
            "name": "calls",
            "schema": { "type": "object", "properties": {}, "additionalProperties": false },
            "strict": true,
        } })
    );
    assert_eq!(body.get("tools"), None);
    Ok(())
}

#[tokio::test]
async fn an_error_status_is_an_http_error_with_the_body() -> TestResult {
    let server = MockResponsesServer::start([error_response(
        400,
        "Invalid schema for function 'get_weather'.",
    )])
    .await?;
    let items = collect(&model_for(&server), &ask("Hi")).await;
    match items.as_slice() {
        [Err(ModelError::Http { status: 400, body })] => {
            assert!(body.contains("Invalid schema for function"), "{body}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "a 400 is not retried");
    Ok(())
}

#[tokio::test]
async fn a_failed_response_and_an_error_event_end_in_errors() -> TestResult {
    let server = MockResponsesServer::start([
        ResponsesTurn::new()
            .text("Partial")
            .failed("server_error", "The model failed.")
            .into_response(),
        ResponsesTurn::new()
            .text("Partial")
            .error_event("rate_limit_exceeded", "Slow down.")
            .into_response(),
        ScriptedResponse::sse([
            ResponsesTurn::new().frames()[0].clone(),
            format!(
                "event: error\ndata: {}\n\n",
                json!({"type": "error", "sequence_number": 1, "error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "You exceeded your quota.", "param": null}})
            ),
        ]),
    ])
    .await?;
    let model = model_for(&server);
    for expected in [
        "the response failed: The model failed. (code server_error)",
        "the provider reported an error: Slow down. (code rate_limit_exceeded)",
        "the provider reported an error: You exceeded your quota. (type insufficient_quota, code insufficient_quota)",
    ] {
        let items = collect(&model, &ask("Hi")).await;
        match assert_failed_without_finish(&items) {
            ModelError::Protocol(message) => assert_eq!(message, expected),
            other => panic!("{other:?}"),
        }
    }
    let frame = error_frame(3, "server_error", "x");
    assert!(frame.starts_with("event: error\ndata: {\"type\":\"error\",\"sequence_number\":3,"));
    Ok(())
}

/// A stream cut inside a call, cleanly or by a broken connection, ends in
/// an error: the half call is never run.
#[tokio::test]
async fn a_stream_cut_mid_call_ends_in_an_error_not_a_half_call() -> TestResult {
    let turn =
        ResponsesTurn::new().function_call("call_w", "get_weather", &["{\"city\":", "\"Par"]);
    let frames = turn.frames();
    // Up to the second arguments delta: the call is open.
    let cut: Vec<String> = frames
        .iter()
        .take_while(|frame| !frame.starts_with("event: response.function_call_arguments.done"))
        .cloned()
        .collect();
    let server = MockResponsesServer::start([
        ScriptedResponse::sse(cut.clone()),
        ScriptedResponse::sse(cut).closing_early(),
        ResponsesTurn::new()
            .function_call("call_w", "get_weather", &["{\"city\":\"Paris\"}"])
            .without_end()
            .into_response(),
    ])
    .await?;
    let model = model_for(&server);
    for expected in ["incomplete", "transport", "incomplete"] {
        let items = collect(&model, &ask("Hi")).await;
        let error = assert_failed_without_finish(&items);
        match (expected, &error) {
            ("incomplete", ModelError::Incomplete) | ("transport", ModelError::Transport(_)) => {}
            _ => panic!("expected {expected}, got {error:?}"),
        }
    }
    Ok(())
}

/// `previous_response_id`: stored on OpenAI's side, the next request names
/// the last response and sends only what came after it.
#[tokio::test]
async fn previous_response_id_sends_only_the_new_items() -> TestResult {
    let server = MockResponsesServer::start([
        ResponsesTurn::new()
            .id("resp_first")
            .stored(true)
            .reasoning(&[], "")
            .function_call("call_w", "weather", &["{\"city\":\"Paris\"}"])
            .into_response(),
        ResponsesTurn::new()
            .id("resp_second")
            .stored(true)
            .text("Sunny.")
            .into_response(),
        ResponsesTurn::new()
            .id("resp_third")
            .stored(true)
            .text("Still sunny.")
            .into_response(),
    ])
    .await?;
    let agent = aptix::Agent::builder()
        .model(model_for(&server).with_previous_response_id(true))
        .catalog(aptix::tools![WeatherTool].build()?)
        .max_iterations(4)
        .build()?;
    let mut conversation = aptix::Conversation::new("responses-previous").with_system("Be brief.");
    assert_completed(&run_agent(&agent, &mut conversation, "Weather?").await);
    assert_completed(&run_agent(&agent, &mut conversation, "And now?").await);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["store"], true);
    assert_eq!(requests[0].body.get("previous_response_id"), None);
    assert_eq!(requests[0].body.get("include"), None);
    assert_eq!(requests[1].body["previous_response_id"], "resp_first");
    let input = &requests[1].body["input"];
    assert_eq!(input.as_array().map(Vec::len), Some(1), "{input}");
    assert_eq!(input[0]["type"], "function_call_output");
    assert_eq!(input[0]["call_id"], "call_w");
    assert_eq!(requests[2].body["previous_response_id"], "resp_second");
    assert_eq!(
        requests[2].body["input"],
        json!([{ "role": "user", "content": "And now?" }])
    );
    for request in &requests {
        assert_eq!(request.body["instructions"], "Be brief.");
    }
    Ok(())
}

#[tokio::test]
async fn incomplete_responses_finish_with_their_reason() -> TestResult {
    let server = MockResponsesServer::start([
        ResponsesTurn::new()
            .text("Long answ")
            .incomplete("max_output_tokens")
            .into_response(),
        ResponsesTurn::new()
            .text("Blocked")
            .incomplete("content_filter")
            .into_response(),
    ])
    .await?;
    let model = model_for(&server);
    for expected in [FinishReason::Length, FinishReason::ContentFilter] {
        let turn = assemble(&model, &ask("Hi"), TurnLimits::default()).await?;
        assert_eq!(turn.finish_reason, expected);
    }
    Ok(())
}

/// Hostile bodies stop at their limits: an endless text at the turn's
/// limit (the assembler's), one huge event at the adapter's event limit,
/// and in either case without reading on.
#[tokio::test]
async fn an_endless_delta_and_a_huge_event_stop_at_their_limits() -> TestResult {
    let endless = {
        let pieces: Vec<String> = (0..2000).map(|_| "x".repeat(512)).collect();
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        ResponsesTurn::new().text_chunks(&pieces).into_response()
    };
    let server = MockResponsesServer::start([endless, huge_delta_response(64 * 1024)]).await?;
    let limits = TurnLimits {
        turn_bytes: 64 * 1024,
        argument_bytes: 16 * 1024,
    };
    let model = model_for(&server).with_max_event_bytes(16 * 1024);
    match assemble(&model, &ask("Hi"), limits).await {
        Err(ModelError::Protocol(message)) => assert!(message.contains("65536 bytes"), "{message}"),
        other => panic!("{other:?}"),
    }
    let items = collect(&model, &ask("Hi")).await;
    match assert_failed_without_finish(&items) {
        ModelError::Protocol(message) => {
            assert!(message.contains("larger than the 16384 bytes"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    Ok(())
}

/// Written one byte at a time: every seam (inside `\"`, inside a UTF-8
/// character, between the two newlines) at once.
#[tokio::test]
async fn a_body_cut_at_every_byte_reads_the_same() -> TestResult {
    let turn = || {
        ResponsesTurn::new()
            .reasoning(&["Zür", "ich \"quoted\""], ENCRYPTED)
            .text_chunks(&["Grüezi ", "😀"])
            .function_call("call_z", "get_weather", &["{\"city\":\"Z", "ürich\"}"])
    };
    let server =
        MockResponsesServer::start([turn().into_response(), turn().into_response_in_chunks(1)])
            .await?;
    let model = model_for(&server);
    let whole = assemble(&model, &ask("Hi"), TurnLimits::default()).await?;
    let cut = assemble(&model, &ask("Hi"), TurnLimits::default()).await?;
    assert_eq!(whole, cut);
    assert_eq!(cut.text, "Grüezi 😀");
    assert_eq!(cut.tool_calls[0].arguments, "{\"city\":\"Zürich\"}");
    assert_eq!(
        cut.thinking,
        [ThinkingBlock::OpenaiReasoning {
            item: json!({
                "id": "rs_0aptix0000000000000000000000000000000000000000",
                "type": "reasoning",
                "encrypted_content": ENCRYPTED,
                "summary": [{ "type": "summary_text", "text": "Zürich \"quoted\"" }],
            })
        }]
    );
    Ok(())
}

/// The conformance wire's turns, streamed into this adapter, read as the
/// turn they script; its request reader reads what this adapter sends.
#[tokio::test]
async fn the_conformance_wire_speaks_what_the_adapter_reads() -> TestResult {
    let wire = OpenAiResponsesWire;
    let scripted = WireTurn {
        reasoning: Some(WireReasoning {
            text: vec!["Look ".into(), "it up.".into()],
            token: ENCRYPTED.into(),
        }),
        hosted: Some(WireHosted {
            id: "ws_9".into(),
            input: json!({ "query": "Paris weather" }),
            output: json!([{ "type": "url", "url": "https://example.com" }]),
        }),
        text: vec!["Let me ".into(), "check.".into()],
        calls: vec![
            WireCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: vec!["{\"city\":".into(), "\"Paris\"}".into()],
            },
            WireCall {
                id: "call_2".into(),
                name: "get_weather".into(),
                arguments: vec!["{\"city\":\"Rome\"}".into()],
            },
        ],
        cut_at_limit: false,
        usage: (30, 9),
    };
    let server = MockResponsesServer::start([
        wire.turn(&scripted),
        wire.turn(&WireTurn {
            text: vec!["Cut".into()],
            cut_at_limit: true,
            ..WireTurn::default()
        }),
        wire.error(503, "Overloaded"),
        wire.error(503, "Overloaded"),
        wire.error(503, "Overloaded"),
    ])
    .await?;
    let model = model_for(&server);
    let mut chat = ask("Weather?");
    chat.tools = vec![weather_tool(), hosted("web_search")].into();
    let mut stream = model.stream(&chat);
    let mut assembler = TurnAssembler::new();
    let mut hosted_seen = Vec::new();
    let mut previews = String::new();
    while let Some(item) = next_event(&mut stream).await {
        let event = item?;
        match &event {
            ModelEvent::Hosted(hosted) => hosted_seen.push(hosted.clone()),
            ModelEvent::ThinkingDelta(ThinkingDelta::Preview { text }) => previews.push_str(text),
            _ => {}
        }
        assembler.push(event)?;
    }
    drop(stream);
    let turn = assembler.finish()?;
    assert_eq!(previews, "Look it up.");
    assert_eq!(turn.text, "Let me check.");
    assert_eq!(turn.tool_calls.len(), 2);
    assert_eq!(turn.usage, Some(Usage::new(30, 9)));
    assert_eq!(
        hosted_seen.first(),
        Some(&HostedToolEvent::Called {
            id: "ws_9".into(),
            name: "web_search".into(),
            input: json!({ "query": "Paris weather", "type": "search" }),
        })
    );
    let cut = assemble(&model, &ask("Hi"), TurnLimits::default()).await?;
    assert_eq!(cut.finish_reason, FinishReason::Length);
    match collect(&model, &ask("Hi")).await.as_slice() {
        [Err(ModelError::Http { status: 503, body })] => assert!(body.contains("Overloaded")),
        other => panic!("{other:?}"),
    }
    // The request of the turn after, read back by the wire.
    let transcript = vec![
        Message::system("Be brief."),
        Message::user("Weather?"),
        Message::Assistant {
            content: turn.text.clone(),
            tool_calls: turn
                .tool_calls
                .iter()
                .map(|call| aptix_core::transcript::AssistantToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .collect(),
            thinking: turn.thinking.clone(),
            server_blocks: turn.server_blocks.clone(),
            runnable: None,
        },
        Message::Tool {
            tool_call_id: "call_1".into(),
            name: "get_weather".into(),
            content: "{\"ok\":true}".into(),
            is_error: false,
            attachments: Vec::new(),
        },
    ];
    let body = model.request_body(&request(
        transcript,
        vec![weather_tool(), hosted("web_search")],
    ))?;
    let read = wire.read_request(&body)?;
    assert_eq!(read.tools, ["get_weather"]);
    assert_eq!(read.hosted_tools, ["web_search"]);
    assert_eq!(
        read.messages,
        [
            WireMessage::System("Be brief.".into()),
            WireMessage::User("Weather?".into()),
            WireMessage::Assistant {
                text: "Let me check.".into(),
                calls: vec![
                    (
                        "call_1".into(),
                        "get_weather".into(),
                        json!({ "city": "Paris" })
                    ),
                    (
                        "call_2".into(),
                        "get_weather".into(),
                        json!({ "city": "Rome" })
                    ),
                ],
                reasoning: vec![ENCRYPTED.into()],
                hosted: true,
            },
            WireMessage::ToolResult {
                id: "call_1".into(),
                content: "{\"ok\":true}".into(),
            },
        ]
    );
    Ok(())
}

#[test]
fn from_vars_reads_the_usual_variables_and_debug_hides_the_key() -> Result<(), ModelError> {
    let vars = |name: &str| match name {
        "OPENAI_API_KEY" => Some("sk-secret".to_owned()),
        "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1/".to_owned()),
        "OPENAI_MODEL" => Some(" o4-mini ".to_owned()),
        _ => None,
    };
    let model = OpenAiResponses::from_vars(vars)?;
    assert_eq!(model.model(), "o4-mini");
    assert_eq!(model.base_url(), "http://127.0.0.1:9/v1");
    assert!(model.reasons());
    assert_eq!(model.dialect(), Dialect::OpenAiStrict);
    assert_eq!(
        model.clone().with_strict(false).dialect(),
        Dialect::OpenAiCompatible
    );
    let shown = format!("{model:?}");
    assert!(
        !shown.contains("sk-secret") && shown.contains("[redacted]"),
        "{shown}"
    );
    let defaults = OpenAiResponses::from_vars(|_| None)?;
    assert_eq!(defaults.model(), "gpt-5-mini");
    assert_eq!(defaults.base_url(), "https://api.openai.com/v1");
    assert!(matches!(
        OpenAiResponses::from_vars(|name| (name == "OPENAI_BASE_URL").then(|| "ftp://x".to_owned())),
        Err(ModelError::Config(_))
    ));
    Ok(())
}

/// The adapter's own event limit (32 MiB by default, as
/// `response.completed` repeats the whole turn) holds over the transport's
/// default (16 MiB): a 20 MiB event is read, not cut at the transport.
#[tokio::test]
async fn the_adapters_event_limit_raises_the_transports() -> TestResult {
    let server = MockResponsesServer::start([huge_delta_response(20 * 1024 * 1024)]).await?;
    let model = model_for(&server);
    let items = collect(&model, &ask("Hi")).await;
    let longest = items
        .iter()
        .filter_map(|item| match item {
            Ok(ModelEvent::TextDelta(text)) => Some(text.len()),
            _ => None,
        })
        .max();
    assert_eq!(longest, Some(20 * 1024 * 1024), "{:?}", items.last());
    Ok(())
}
