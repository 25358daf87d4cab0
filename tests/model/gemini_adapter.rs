//! The Gemini adapter over the wire: a real HTTP mock streaming
//! Gemini-format bodies (`streamGenerateContent?alt=sse`), every event fed
//! through the one `TurnAssembler`, and agents run end to end against it.

use std::time::Duration;

use aptix_core::Dialect;
use aptix_core::model::HttpPolicy;
use aptix_core::model::adapter::{AssembledTurn, CallStatus, TurnAssembler, TurnLimits};
use aptix_core::model::gemini::Gemini;
use aptix_core::model::{
    ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ModelStream, ToolChoice,
    ToolSpec, Usage,
};
use aptix_core::transcript::{Message, ThinkingBlock};
use aptix_testkit::conformance::{
    GeminiWire, ProviderWire, WireCall, WireHosted, WireMessage, WireReasoning, WireTurn,
};
use aptix_testkit::mock_gemini::{
    GeminiCall, GeminiTurn, MockGeminiServer, error_frame, error_response,
};
use aptix_testkit::mock_server::ScriptedResponse;
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const MODEL: &str = "gemini-2.5-flash";
const KEY: &str = "AIza-test-key";

fn fast_policy() -> HttpPolicy {
    HttpPolicy {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_retries: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        ..HttpPolicy::default()
    }
}

fn model_for(server: &MockGeminiServer) -> Gemini {
    Gemini::new(MODEL, KEY)
        .with_base_url(server.base_url())
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
        }),
        dialect: Dialect::Gemini,
        hosted: false,
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        messages,
        tools: vec![weather_tool()].into(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: None,
    }
}

fn ask(text: &str) -> ChatRequest {
    request(vec![Message::user(text)])
}

async fn next_event(stream: &mut ModelStream<'_>) -> Option<Result<ModelEvent, ModelError>> {
    std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await
}

/// Every item of the stream, errors included.
async fn collect(model: &Gemini, request: &ChatRequest) -> Vec<Result<ModelEvent, ModelError>> {
    let mut stream = model.stream(request);
    let mut items = Vec::new();
    while let Some(item) = next_event(&mut stream).await {
        items.push(item);
    }
    items
}

/// The stream through the assembler, as the agent loop reads it.
async fn assemble(model: &Gemini, request: &ChatRequest) -> Result<AssembledTurn, ModelError> {
    let mut stream = model.stream(request);
    let mut assembler = TurnAssembler::new();
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

/// Arguments of `city_weather`.
#[derive(Debug, aptix::prelude::Deserialize, aptix::prelude::JsonSchema)]
pub struct CityWeatherArgs {
    /// The city.
    pub city: String,
}

/// The weather in a city.
#[aptix::prelude::agent_tool(
    name = "city_weather",
    usage = "Call when the user asks about the weather."
)]
async fn city_weather(args: CityWeatherArgs) -> Result<String, aptix::prelude::ToolError> {
    Ok(format!("Sunny in {}", args.city))
}

/// Google Search, run by Gemini itself.
#[aptix::prelude::agent_tool(
    name = "google_search",
    usage = "Call to look up current facts on the web.",
    executor = provider
)]
#[derive(Debug, aptix::prelude::Deserialize, aptix::prelude::JsonSchema)]
pub struct GoogleSearch {
    /// What to search for.
    pub query: String,
}

fn agent_for(server: &MockGeminiServer) -> Result<aptix::Agent, Box<dyn std::error::Error>> {
    Ok(aptix::Agent::builder()
        .model(model_for(server))
        .catalog(aptix::tools![CityWeatherTool].build()?)
        .max_iterations(4)
        .build()?)
}

async fn run(
    agent: &aptix::Agent,
    conversation: &mut aptix::Conversation,
    input: &str,
) -> Vec<aptix::AgentEvent> {
    futures_util::StreamExt::collect(agent.run(conversation, aptix::Input::User(input.to_owned())))
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
        "{events:?}"
    );
}

/// Signatures are base64: `+`, `/` and `=` must come back as they were.
const SIGNATURE: &str = "EpEgCo4gAb4+9vvWwdN/NkNiCCwr==";

#[tokio::test]
async fn text_in_pieces_with_usage() -> TestResult {
    let server = MockGeminiServer::start([GeminiTurn::new()
        .text_chunks(&["Hello", ", wörld", "!"])
        .usage(12, 7)
        .thoughts_tokens(5)
        .cached_tokens(4)
        .into_response()])
    .await?;
    let turn = assemble(&model_for(&server), &ask("hi")).await?;
    assert_eq!(turn.text, "Hello, wörld!");
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(
        turn.usage,
        Some(Usage {
            input_tokens: 12,
            output_tokens: 12,
            cache_read_tokens: 4,
            cache_write_tokens: 0,
        })
    );
    Ok(())
}

/// A first turn's request, byte for byte: the URL with the model and
/// `alt=sse`, the key in `x-goog-api-key` (never in the URL), and the body.
#[tokio::test]
async fn the_first_request_byte_for_byte() -> TestResult {
    let server = MockGeminiServer::start([GeminiTurn::new().text("Hi.").into_response()]).await?;
    let mut chat = request(vec![
        Message::system("Be brief."),
        Message::user("Weather in Paris?"),
    ]);
    chat.temperature = Some(0.2);
    chat.max_tokens = Some(256);
    let turn = assemble(&model_for(&server), &chat).await?;
    assert_eq!(turn.text, "Hi.");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some(KEY));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.raw_body,
        concat!(
            r#"{"contents":[{"parts":[{"text":"Weather in Paris?"}],"role":"user"}],"#,
            r#""generationConfig":{"maxOutputTokens":256,"temperature":0.2},"#,
            r#""systemInstruction":{"parts":[{"text":"Be brief."}]},"#,
            r#""toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},"#,
            r#""tools":[{"functionDeclarations":[{"description":"The weather in a city.","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}}]}]}"#,
        )
    );
    Ok(())
}

/// Parallel calls, their thought signature and the request after them,
/// byte for byte, through an agent: the model turn goes back with its
/// thought part, its text and both calls (the signature on the first, as
/// it came), and both results in one `user` content in the calls' order.
#[tokio::test]
async fn parallel_calls_are_answered_in_one_content_in_order() -> TestResult {
    let server = MockGeminiServer::start([
        GeminiTurn::new()
            .thought("Two cities: call twice.")
            .text("Checking both.")
            .calls(vec![
                GeminiCall::new("city_weather", json!({ "city": "Paris" }))
                    .id("fc_1")
                    .signed(SIGNATURE),
                GeminiCall::new("city_weather", json!({ "city": "Oslo" })).id("fc_2"),
            ])
            .into_response(),
        GeminiTurn::new().text("Sunny in both.").into_response(),
    ])
    .await?;
    let agent = agent_for(&server)?;
    let mut conversation = aptix::Conversation::new("parallel");
    let events = run(&agent, &mut conversation, "Weather in Paris and Oslo?").await;
    assert_completed(&events);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let contents = &requests[1].body["contents"];
    assert_eq!(
        contents[1],
        json!({ "role": "model", "parts": [
            { "text": "Two cities: call twice.", "thought": true },
            { "text": "Checking both." },
            { "functionCall": { "id": "fc_1", "name": "city_weather", "args": { "city": "Paris" } }, "thoughtSignature": SIGNATURE },
            { "functionCall": { "id": "fc_2", "name": "city_weather", "args": { "city": "Oslo" } } },
        ] })
    );
    assert_eq!(
        requests[1].raw_body,
        concat!(
            r#"{"contents":[{"parts":[{"text":"Weather in Paris and Oslo?"}],"role":"user"},"#,
            r#"{"parts":[{"text":"Two cities: call twice.","thought":true},{"text":"Checking both."},"#,
            r#"{"functionCall":{"args":{"city":"Paris"},"id":"fc_1","name":"city_weather"},"thoughtSignature":"EpEgCo4gAb4+9vvWwdN/NkNiCCwr=="},"#,
            r#"{"functionCall":{"args":{"city":"Oslo"},"id":"fc_2","name":"city_weather"}}],"role":"model"},"#,
            r#"{"parts":[{"functionResponse":{"id":"fc_1","name":"city_weather","response":{"output":{"conversation_id":"parallel","ok":true,"result":"Sunny in Paris","session_id":null,"tool_call_id":"fc_1"}}}},"#,
            r#"{"functionResponse":{"id":"fc_2","name":"city_weather","response":{"output":{"conversation_id":"parallel","ok":true,"result":"Sunny in Oslo","session_id":null,"tool_call_id":"fc_2"}}}}],"role":"user"}],"#,
            r#""toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},"#,
            r#""tools":[{"functionDeclarations":[{"description":"The weather in a city.\n\nUsage: Call when the user asks about the weather.","name":"city_weather","#,
            r#""parameters":{"description":"Arguments of `city_weather`.","properties":{"city":{"description":"The city.","type":"string"}},"required":["city"],"type":"object"}}]}]}"#,
        )
    );
    Ok(())
}

/// The bar of the issue: a thought signature that came on a function call
/// goes back on that call's part in the next request, unchanged, with the
/// id made for the call when Gemini gave none (the same id answers it).
#[tokio::test]
async fn a_thought_signature_on_a_call_comes_back_on_that_call_unchanged() -> TestResult {
    let server = MockGeminiServer::start([
        GeminiTurn::new()
            .thought("The user wants \"weather\" — ask the tool.")
            .call(GeminiCall::new("city_weather", json!({ "city": "Paris" })).signed(SIGNATURE))
            .into_response(),
        GeminiTurn::new()
            .text("Sunny.")
            .text_signature("Eq+/text=")
            .into_response(),
        GeminiTurn::new().text("Again sunny.").into_response(),
    ])
    .await?;
    let agent = agent_for(&server)?;
    let mut conversation = aptix::Conversation::new("signature");
    let events = run(&agent, &mut conversation, "Weather in Paris?").await;
    assert_completed(&events);
    assert!(
        events.iter().any(|event| matches!(
            event,
            aptix::AgentEvent::ReasoningDelta(text) if text.contains("ask the tool")
        )),
        "the thought is shown: {events:?}"
    );
    let events = run(&agent, &mut conversation, "And tomorrow?").await;
    assert_completed(&events);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let parts = &requests[1].body["contents"][1]["parts"];
    assert_eq!(
        parts[0],
        json!({ "text": "The user wants \"weather\" — ask the tool.", "thought": true })
    );
    assert_eq!(parts[1]["thoughtSignature"], SIGNATURE);
    let id = parts[1]["functionCall"]["id"]
        .as_str()
        .ok_or("the call has no id")?;
    assert!(!id.is_empty());
    assert_eq!(
        requests[1].body["contents"][2]["parts"][0]["functionResponse"]["id"],
        id
    );
    // The whole history goes back each time, the text's signature too.
    assert_eq!(
        requests[2].body["contents"][1],
        requests[1].body["contents"][1]
    );
    assert_eq!(
        requests[2].body["contents"][3],
        json!({ "role": "model", "parts": [{ "text": "Sunny.", "thoughtSignature": "Eq+/text=" }] })
    );
    // And the transcript keeps it with its call.
    let kept = conversation
        .messages
        .iter()
        .find_map(|message| match message {
            Message::Assistant { thinking, .. } if !thinking.is_empty() => Some(thinking.clone()),
            _ => None,
        });
    assert!(
        kept.is_some_and(|thinking| thinking.contains(&ThinkingBlock::Gemini {
            part: json!({ "thoughtSignature": SIGNATURE }),
            tool_call_id: Some(id.to_owned()),
        })),
        "{:?}",
        conversation.messages
    );
    Ok(())
}

/// Google Search as an `executor = provider` tool: the agent builds, the
/// request carries `{"googleSearch":{}}` (not a function), and the
/// grounding is shown as the tool's call and result.
#[tokio::test]
async fn google_search_is_a_provider_tool_that_builds_and_runs() -> TestResult {
    let server = MockGeminiServer::start([GeminiTurn::new()
        .text("Node 24 is the current LTS.")
        .google_search(
            &["node js current LTS version"],
            &[(
                "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZ",
                "nodejs.org",
            )],
        )
        .into_response()])
    .await?;
    let agent = aptix::Agent::builder()
        .model(model_for(&server))
        .catalog(aptix::tools![CityWeatherTool, GoogleSearch].build()?)
        .build()?;
    let mut conversation = aptix::Conversation::new("search");
    let events = run(&agent, &mut conversation, "Which Node is LTS?").await;
    assert_completed(&events);
    let body = &server.requests()[0].body;
    assert_eq!(body["tools"][1], json!({ "googleSearch": {} }));
    assert_eq!(
        body["tools"][0]["functionDeclarations"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{body}"
    );
    let started = events.iter().find_map(|event| match event {
        aptix::AgentEvent::ToolCallStart {
            id,
            name,
            arguments,
            ..
        } if name == "google_search" => Some((id.clone(), arguments.clone())),
        _ => None,
    });
    let (id, arguments) = started.ok_or("no ToolCallStart for the search")?;
    assert_eq!(
        arguments,
        json!({ "queries": ["node js current LTS version"] })
    );
    let result = events.iter().find_map(|event| match event {
        aptix::AgentEvent::ToolCallResult {
            id: done, envelope, ..
        } if *done == id => Some(envelope.clone()),
        _ => None,
    });
    assert_eq!(
        result.ok_or("no ToolCallResult for the search")?["result"]["sources"][0]["title"],
        "nodejs.org"
    );
    Ok(())
}

/// An agent that is not Gemini's keeps refusing a tool Gemini hosts under
/// a name nothing maps; Gemini's own names build.
#[test]
fn only_names_gemini_hosts_are_hosted() {
    let model = Gemini::new(MODEL, KEY);
    assert!(model.hosts_tool("google_search"));
    assert!(!model.hosts_tool("file_search"));
}

/// Composed mode: the calls schema goes as Gemini's structured output
/// (`responseMimeType` + `responseSchema`), no function tools, and the
/// answer's calls run.
#[tokio::test]
async fn structured_output_carries_composed_calls() -> TestResult {
    let server = MockGeminiServer::start([
        GeminiTurn::new()
            .text_chunks(&[
                r#"{"message": "Checking.", "calls": [{"_tool": "city_weather","#,
                r#" "city": "Paris"}]}"#,
            ])
            .into_response(),
        GeminiTurn::new()
            .text(r#"{"message": "Sunny.", "calls": []}"#)
            .into_response(),
    ])
    .await?;
    let agent = aptix::Agent::builder()
        .model(model_for(&server))
        .catalog(aptix::tools![CityWeatherTool].build()?)
        .call_mode(aptix::agent::CallMode::Composed)
        .max_iterations(4)
        .build()?;
    let mut conversation = aptix::Conversation::new("composed");
    let events = run(&agent, &mut conversation, "Weather in Paris?").await;
    assert_completed(&events);
    assert!(
        events.iter().any(|event| matches!(
            event,
            aptix::AgentEvent::ToolCallResult { name, .. } if name == "city_weather"
        )),
        "{events:?}"
    );
    let body = &server.requests()[0].body;
    assert_eq!(body.get("tools"), None);
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    let schema = &body["generationConfig"]["responseSchema"];
    assert_eq!(schema["type"], "object");
    assert!(schema["properties"]["calls"].is_object(), "{schema}");
    // Gemini is told to write a call's `_tool` first.
    assert!(
        schema
            .to_string()
            .contains(r#""propertyOrdering":["_tool","_activity","city"]"#),
        "{schema}"
    );
    Ok(())
}

#[tokio::test]
async fn an_error_body_is_an_http_error_and_busy_is_retried() -> TestResult {
    let server = MockGeminiServer::start([
        error_response(
            400,
            "Invalid JSON payload received. Unknown name \"x\": Cannot find field.",
        ),
        error_response(429, "Resource has been exhausted (e.g. check quota)."),
        error_response(503, "The model is overloaded. Please try again later."),
        GeminiTurn::new().text("Finally.").into_response(),
    ])
    .await?;
    let model = model_for(&server);
    let failed = collect(&model, &ask("hi")).await;
    match assert_failed_without_finish(&failed) {
        ModelError::Http { status, body } => {
            assert_eq!(status, 400);
            assert!(body.contains("\"status\": \"INVALID_ARGUMENT\""), "{body}");
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "a bad request is not retried");
    let turn = assemble(&model, &ask("hi")).await?;
    assert_eq!(turn.text, "Finally.");
    assert_eq!(server.requests().len(), 4);
    Ok(())
}

#[tokio::test]
async fn an_error_in_the_stream_ends_the_turn() -> TestResult {
    let mut frames = GeminiTurn::new().text("Part").unfinished_frames();
    frames.push(error_frame(500, "An internal error has occurred."));
    let server = MockGeminiServer::start([ScriptedResponse::sse(frames)]).await?;
    let items = collect(&model_for(&server), &ask("hi")).await;
    match assert_failed_without_finish(&items) {
        ModelError::Protocol(message) => {
            assert_eq!(message, "INTERNAL (500): An internal error has occurred.");
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
    Ok(())
}

/// A stream cut before the `finishReason` (cleanly or by a broken
/// connection) is an error, never a finished turn.
#[tokio::test]
async fn a_cut_stream_is_an_error_never_a_finish() -> TestResult {
    let turn = GeminiTurn::new()
        .text("Let me")
        .call(GeminiCall::new("get_weather", json!({ "city": "Paris" })));
    let pause = Duration::from_millis(5);
    let server = MockGeminiServer::start([
        ScriptedResponse::sse(turn.unfinished_frames()),
        ScriptedResponse::sse(turn.unfinished_frames())
            .with_chunk_delay(pause)
            .closing_early(),
        // Cut inside a frame: half a chunk, never its end.
        ScriptedResponse::sse(vec![turn.body()[..200].to_owned()]),
    ])
    .await?;
    let model = model_for(&server);
    let ended = collect(&model, &ask("hi")).await;
    assert_eq!(assert_failed_without_finish(&ended), ModelError::Incomplete);
    assert!(
        ended
            .iter()
            .any(|item| matches!(item, Ok(ModelEvent::ToolCallDelta(_)))),
        "{ended:?}"
    );
    let broken = collect(&model, &ask("hi")).await;
    assert!(matches!(
        assert_failed_without_finish(&broken),
        ModelError::Transport(_)
    ));
    let half = collect(&model, &ask("hi")).await;
    assert_eq!(assert_failed_without_finish(&half), ModelError::Incomplete);
    assert_eq!(server.requests().len(), 3, "a broken stream is not retried");
    Ok(())
}

/// Cut anywhere (inside an escape, between the bytes of one character,
/// between `\r` and `\n`), the body reads the same.
#[tokio::test]
async fn a_body_cut_at_every_byte_reads_the_same() -> TestResult {
    let turn = || {
        GeminiTurn::new()
            .thought("Ünïcode \"thought\"")
            .text_chunks(&["Tschüß ", "<b>&</b> 🌍"])
            .call(
                GeminiCall::new("get_weather", json!({ "city": "Zürich \"Z\"" }))
                    .id("fc_9")
                    .signed(SIGNATURE),
            )
    };
    let server =
        MockGeminiServer::start([turn().into_response(), turn().into_response_in_chunks(1)])
            .await?;
    let model = model_for(&server);
    let whole = assemble(&model, &ask("hi")).await?;
    let cut = assemble(&model, &ask("hi")).await?;
    assert_eq!(whole, cut);
    assert_eq!(whole.text, "Tschüß <b>&</b> 🌍");
    assert_eq!(whole.tool_calls[0].arguments, r#"{"city":"Zürich \"Z\""}"#);
    assert_eq!(whole.thinking.len(), 2);
    Ok(())
}

/// `MAX_TOKENS` is `Length`; a call in a turn cut at the limit is never
/// run.
#[tokio::test]
async fn a_max_tokens_turn_is_length_and_its_call_truncated() -> TestResult {
    let server = MockGeminiServer::start([
        GeminiTurn::new()
            .text("The answer is")
            .finish("MAX_TOKENS")
            .into_response(),
        GeminiTurn::new()
            .call(GeminiCall::new("get_weather", json!({ "city": "Pa" })))
            .finish("MAX_TOKENS")
            .into_response(),
    ])
    .await?;
    let model = model_for(&server);
    let text = assemble(&model, &ask("hi")).await?;
    assert_eq!(text.finish_reason, FinishReason::Length);
    assert_eq!(text.text, "The answer is");
    let call = assemble(&model, &ask("hi")).await?;
    assert_eq!(call.finish_reason, FinishReason::Length);
    assert_eq!(call.tool_calls[0].status, CallStatus::Truncated);
    Ok(())
}

/// A server that streams text forever without finishing is read only up
/// to the turn's limit: the model call ends there, long before the stream.
#[tokio::test]
async fn a_hostile_endless_stream_stops_at_its_limit() -> TestResult {
    let chunk = GeminiTurn::new()
        .text(&"x".repeat(1024))
        .unfinished_frames();
    let frames: Vec<String> = std::iter::repeat_n(chunk[0].clone(), 4096).collect();
    let server = MockGeminiServer::start([ScriptedResponse::sse(frames)]).await?;
    let model = model_for(&server);
    let limits = TurnLimits {
        turn_bytes: 64 * 1024,
        argument_bytes: 1024,
    };
    let request = ask("hi");
    let mut stream = model.stream(&request);
    let mut assembler = TurnAssembler::with_limits(limits);
    let mut read = 0;
    let error = loop {
        match next_event(&mut stream).await {
            Some(Ok(event)) => {
                read += 1;
                if let Err(error) = assembler.push(event) {
                    break error;
                }
            }
            Some(Err(error)) => break error,
            None => return Err("the endless stream ended".into()),
        }
    };
    drop(stream);
    assert!(
        matches!(&error, ModelError::Protocol(message) if message.contains("went past 65536 bytes")),
        "{error:?}"
    );
    assert!(read <= 65, "read {read} events past the limit");
    assert!(assembler.limit_exceeded().is_some());
    Ok(())
}

#[tokio::test]
async fn a_bad_base_url_is_a_config_error() {
    let model = Gemini::new(MODEL, KEY).with_base_url("not a url");
    let items = collect(&model, &ask("hi")).await;
    assert!(
        matches!(items.as_slice(), [Err(ModelError::Config(_))]),
        "{items:?}"
    );
}

/// The conformance wire's turns, streamed into the adapter: reasoning with
/// its token on the first of two parallel calls, a search, and the next
/// request read back with the token in it.
#[tokio::test]
async fn the_conformance_wire_speaks_to_the_adapter() -> TestResult {
    let wire = GeminiWire;
    let scripted = WireTurn {
        reasoning: Some(WireReasoning {
            text: vec!["Two ".into(), "calls.".into()],
            token: SIGNATURE.into(),
        }),
        hosted: Some(WireHosted {
            id: "s1".into(),
            input: json!({ "query": "weather" }),
            output: json!([{ "web": { "uri": "https://example.com", "title": "Example" } }]),
        }),
        text: vec!["Checking ".into(), "both.".into()],
        calls: vec![
            WireCall {
                id: "c1".into(),
                name: "get_weather".into(),
                arguments: vec!["{\"city\":".into(), "\"Paris\"}".into()],
            },
            WireCall {
                id: "c2".into(),
                name: "get_weather".into(),
                arguments: vec!["{\"city\":\"Oslo\"}".into()],
            },
        ],
        cut_at_limit: false,
        usage: (30, 8),
    };
    let server = MockGeminiServer::start([
        wire.turn(&scripted),
        wire.turn(&WireTurn {
            text: vec!["Done.".into()],
            ..WireTurn::default()
        }),
        wire.error(429, "Quota exceeded."),
        wire.error(400, "Bad."),
    ])
    .await?;
    let model = Gemini::new(MODEL, KEY)
        .with_base_url(server.base_url())
        .with_policy(HttpPolicy {
            max_retries: 0,
            ..fast_policy()
        });
    let first = ask("Weather?");
    let mut stream = model.stream(&first);
    let mut assembler = TurnAssembler::new();
    let mut hosted = 0;
    while let Some(item) = next_event(&mut stream).await {
        let event = item?;
        hosted += usize::from(matches!(event, ModelEvent::Hosted(_)));
        assembler.push(event)?;
    }
    drop(stream);
    let turn = assembler.finish()?;
    assert_eq!(hosted, 2, "the search's call and result");
    assert_eq!(turn.text, "Checking both.");
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.usage, Some(Usage::new(30, 8)));
    let calls: Vec<(&str, &str)> = turn
        .tool_calls
        .iter()
        .map(|call| (call.id.as_str(), call.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [("c1", r#"{"city":"Paris"}"#), ("c2", r#"{"city":"Oslo"}"#)]
    );
    // The next request, built from the turn as the agent keeps it.
    let next = request(vec![
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
            tool_call_id: "c1".into(),
            name: "get_weather".into(),
            content: "{\"ok\":true}".into(),
            is_error: false,
            attachments: vec![],
        },
        Message::Tool {
            tool_call_id: "c2".into(),
            name: "get_weather".into(),
            content: "{\"ok\":true}".into(),
            is_error: false,
            attachments: vec![],
        },
    ]);
    let done = assemble(&model, &next).await?;
    assert_eq!(done.text, "Done.");
    let read = wire.read_request(&server.requests()[1].body)?;
    assert_eq!(read.tools, ["get_weather"]);
    assert_eq!(
        read.messages,
        vec![
            WireMessage::User("Weather?".into()),
            WireMessage::Assistant {
                text: "Checking both.".into(),
                calls: vec![
                    (
                        "c1".into(),
                        "get_weather".into(),
                        json!({ "city": "Paris" })
                    ),
                    ("c2".into(), "get_weather".into(), json!({ "city": "Oslo" })),
                ],
                reasoning: vec![SIGNATURE.into()],
                hosted: false,
            },
            WireMessage::ToolResult {
                id: "c1".into(),
                content: "{\"ok\":true}".into(),
            },
            WireMessage::ToolResult {
                id: "c2".into(),
                content: "{\"ok\":true}".into(),
            },
        ]
    );
    // Its error answers are Google's, read as HTTP errors.
    for status in [429, 400] {
        let items = collect(&model, &ask("hi")).await;
        assert!(
            matches!(assert_failed_without_finish(&items), ModelError::Http { status: s, .. } if s == status),
            "{items:?}"
        );
    }
    // A request of no Gemini shape is refused by the reader.
    assert!(
        wire.read_request(
            &json!({ "contents": [{ "role": "assistant", "parts": [{ "text": "x" }] }] })
        )
        .is_err()
    );
    assert_eq!(wire.hosted_tool(), Some("google_search"));
    Ok(())
}
