//! The OpenAI-compatible adapter over the wire: every test runs the real
//! adapter against `MockOpenAiServer` on 127.0.0.1, feeds what it emits
//! through the one `TurnAssembler`, and checks the assembled turn and the
//! request the server recorded.

use std::error::Error;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aptix::prelude::*;
use aptix::{Dialect, ToolDefinition};
use aptix_core::model::HttpPolicy;
use aptix_core::model::adapter::{AssembledTurn, CallStatus, TurnAssembler};
use aptix_core::model::openai::OpenAiChat;
use aptix_core::model::{
    ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ToolChoice, ToolSpec, Usage,
};
use aptix_core::transcript::{AssistantToolCall, Message};
use aptix_testkit::mock_openai::{
    MockOpenAiServer, OpenAiTurn, collect_events, cut_at, cut_every_byte, error_response, truncate,
};
use serde_json::json;

type TestResult = Result<(), Box<dyn Error>>;

/// Arguments of `lookup_weather`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WeatherArgs {
    /// The city to look up.
    pub city: String,
    /// How many days ahead; omit it for today.
    pub days: Option<u8>,
}

/// The weather report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Weather {
    /// A one-line summary.
    pub summary: String,
}

/// Looks up the weather of a city.
#[agent_tool(
    name = "lookup_weather",
    usage = "Call when the user asks about the weather."
)]
pub async fn lookup_weather(args: WeatherArgs) -> Result<Weather, ToolError> {
    Ok(Weather {
        summary: format!("Sunny in {}", args.city),
    })
}

/// Short waits, so the retry tests run in milliseconds.
fn fast_policy() -> HttpPolicy {
    HttpPolicy {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_retries: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(10),
        ..HttpPolicy::default()
    }
}

fn model_for(server: &MockOpenAiServer) -> OpenAiChat {
    OpenAiChat::new("gpt-4o-mini")
        .with_base_url(server.base_url())
        .with_policy(fast_policy())
}

/// The weather tool, lowered for `model`.
fn tools_for(model: &OpenAiChat) -> Result<Vec<ToolSpec>, Box<dyn Error>> {
    let definition = ToolDefinition::build::<LookupWeatherTool>()?;
    Ok(vec![ToolSpec::new(&definition, model.dialect())?])
}

fn ask(text: &str, tools: Vec<ToolSpec>) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        tools: tools.into(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: None,
    }
}

/// Feeds the events through the assembler, as the agent loop does: the
/// first error ends the turn.
fn assemble(events: &[Result<ModelEvent, ModelError>]) -> Result<AssembledTurn, ModelError> {
    let mut assembler = TurnAssembler::new();
    for event in events {
        assembler.push(event.clone()?)?;
    }
    assembler.finish()
}

/// Streams one turn of `model` and assembles it.
async fn turn(
    model: &OpenAiChat,
    request: &ChatRequest,
) -> (
    Vec<Result<ModelEvent, ModelError>>,
    Result<AssembledTurn, ModelError>,
) {
    let events = collect_events(model.stream(request)).await;
    let turn = assemble(&events);
    (events, turn)
}

fn finishes(events: &[Result<ModelEvent, ModelError>]) -> usize {
    events
        .iter()
        .filter(|event| matches!(event, Ok(ModelEvent::Finish { .. })))
        .count()
}

fn calls(turn: &AssembledTurn) -> Vec<(&str, &str, &str, CallStatus)> {
    turn.tool_calls
        .iter()
        .map(|call| {
            (
                call.id.as_str(),
                call.name.as_str(),
                call.arguments.as_str(),
                call.status,
            )
        })
        .collect()
}

/// The byte offsets just after the start of every occurrence of `needle`
/// in `body`, plus `within` (offsets inside the needle).
fn offsets_inside(body: &str, needle: &str, within: &[usize]) -> Vec<usize> {
    body.match_indices(needle)
        .flat_map(|(start, _)| within.iter().map(move |offset| start + offset))
        .collect()
}

#[tokio::test]
async fn text_only() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text_pieces(&["Hel", "lo", ", wörld"])
        .usage(9, 3)
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    let turn = turn?;
    assert_eq!(turn.text, "Hello, wörld");
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(turn.usage, Some(Usage::new(9, 3)));
    // The role chunk's empty content is not a text delta.
    assert_eq!(events.len(), 4);
    assert_eq!(finishes(&events), 1);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), None);
    let body = &requests[0].body;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({ "include_usage": true }));
    Ok(())
}

#[tokio::test]
async fn one_tool_call() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::new()
        .tool_call(
            "call_abc",
            "lookup_weather",
            &["{\"ci", "ty\":\"Par", "is\",\"days\":null}"],
        )
        .usage(20, 11)
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Weather in Paris?", tools_for(&model)?)).await;
    let turn = turn?;
    assert_eq!(turn.text, "");
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        calls(&turn),
        vec![(
            "call_abc",
            "lookup_weather",
            "{\"city\":\"Paris\",\"days\":null}",
            CallStatus::Complete
        )]
    );
    Ok(())
}

#[tokio::test]
async fn two_parallel_calls_split_across_chunks() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("Checking both. ")
        .tool_call(
            "call_1",
            "lookup_weather",
            &["{\"city\"", ":\"Oslo\"", ",\"days\":1}"],
        )
        .tool_call("call_2", "lookup_weather", &["{\"city\":", "\"Rome\"}"])
        .parallel()
        .usage(30, 25)
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Oslo and Rome?", tools_for(&model)?)).await;
    // Interleaved on the wire: the adapter passes the deltas on as they come.
    let indices: Vec<usize> = events
        .iter()
        .filter_map(|event| match event {
            Ok(ModelEvent::ToolCallDelta(delta)) => Some(delta.index),
            _ => None,
        })
        .collect();
    assert_eq!(indices, vec![0, 1, 0, 1, 0, 1, 0]);
    let turn = turn?;
    assert_eq!(turn.text, "Checking both. ");
    assert_eq!(
        calls(&turn),
        vec![
            (
                "call_1",
                "lookup_weather",
                "{\"city\":\"Oslo\",\"days\":1}",
                CallStatus::Complete
            ),
            (
                "call_2",
                "lookup_weather",
                "{\"city\":\"Rome\"}",
                CallStatus::Complete
            ),
        ]
    );
    Ok(())
}

/// Arguments full of seams: an escaped quote, a literal `\u00e9` escape the
/// model wrote itself, and raw 2-, 3- and 4-byte characters.
const TRICKY_ARGUMENTS: &str = r#"{"city":"Saint-\u00e9tienne","note":"say \"€5\" 😀 é"}"#;

fn tricky_turn() -> OpenAiTurn {
    OpenAiTurn::text("Voilà € 😀 ")
        .tool_call(
            "call_x",
            "lookup_weather",
            &[&TRICKY_ARGUMENTS[..20], &TRICKY_ARGUMENTS[20..]],
        )
        .usage(5, 5)
}

fn assert_tricky(turn: &AssembledTurn) {
    assert_eq!(turn.text, "Voilà € 😀 ");
    assert_eq!(
        calls(turn),
        vec![(
            "call_x",
            "lookup_weather",
            TRICKY_ARGUMENTS,
            CallStatus::Complete
        )]
    );
}

#[tokio::test]
async fn arguments_split_mid_escape_and_mid_utf8() -> TestResult {
    let body = tricky_turn().sse_body();
    let mut offsets = Vec::new();
    // Inside "€" (3 bytes) and "😀" (4 bytes), in the text and the arguments.
    offsets.extend(offsets_inside(&body, "€", &[1, 2]));
    offsets.extend(offsets_inside(&body, "😀", &[1, 2, 3]));
    offsets.extend(offsets_inside(&body, "é", &[1]));
    // Between the backslash and the quote of `\"` (the arguments' quotes are
    // escaped in the chunk JSON, the model's own escaped quote twice).
    offsets.extend(offsets_inside(&body, "\\\"", &[1]));
    offsets.extend(offsets_inside(&body, "\\\\\\\"", &[1, 2, 3]));
    // Inside the model's own `\u00e9`, written `\\u00e9` in the chunk.
    offsets.extend(offsets_inside(&body, "\\\\u00e9", &[1, 2, 3, 5]));
    // Between the two newlines that end an event, and inside `data:`.
    offsets.extend(offsets_inside(&body, "\n\n", &[1]));
    offsets.extend(offsets_inside(&body, "data: ", &[2, 5]));
    assert!(offsets.len() > 40, "the body lost its seams: {body}");

    let server = MockOpenAiServer::start([
        tricky_turn().into_response_cut_at(&offsets, Duration::from_millis(1))
    ])
    .await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Weather?", tools_for(&model)?)).await;
    assert_tricky(&turn?);
    Ok(())
}

#[tokio::test]
async fn ascii_escaped_bodies_split_inside_unicode_escapes() -> TestResult {
    // A Python server writes "€" as `\u20ac` and "😀" as a surrogate pair.
    let escaped = tricky_turn().ascii_escaped();
    let body = escaped.sse_body();
    assert!(body.is_ascii());
    let mut offsets = Vec::new();
    offsets.extend(offsets_inside(&body, "\\u20ac", &[1, 2, 4]));
    offsets.extend(offsets_inside(&body, "\\ud83d\\ude00", &[3, 6, 7, 9]));
    offsets.extend(offsets_inside(&body, "\\u00e9", &[1, 5]));
    assert!(offsets.len() > 15, "the body lost its escapes: {body}");
    let server =
        MockOpenAiServer::start([escaped.into_response_cut_at(&offsets, Duration::from_millis(1))])
            .await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Weather?", tools_for(&model)?)).await;
    assert_tricky(&turn?);
    Ok(())
}

#[tokio::test]
async fn a_body_written_one_byte_at_a_time() -> TestResult {
    let response = cut_every_byte(
        OpenAiTurn::new()
            .tool_call("c", "lookup_weather", &["{\"city\":\"€😀\\\"\"}"])
            .into_response(),
    )
    .with_chunk_delay(Duration::from_micros(100));
    let server = MockOpenAiServer::start([response]).await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Weather?", Vec::new())).await;
    assert_eq!(
        calls(&turn?),
        vec![(
            "c",
            "lookup_weather",
            "{\"city\":\"€😀\\\"\"}",
            CallStatus::Complete
        )]
    );
    Ok(())
}

#[tokio::test]
async fn length_with_an_open_call_is_truncated() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::new()
        .tool_call("call_1", "lookup_weather", &["{\"city\":\"Ber"])
        .finish("length")
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Weather?", tools_for(&model)?)).await;
    let turn = turn?;
    assert_eq!(turn.finish_reason, FinishReason::Length);
    assert_eq!(
        calls(&turn),
        vec![(
            "call_1",
            "lookup_weather",
            "{\"city\":\"Ber",
            CallStatus::Truncated
        )]
    );
    Ok(())
}

#[tokio::test]
async fn malformed_json_in_a_data_line_is_a_protocol_error() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("Hi")
        .raw_data("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"oops\"}")
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(finishes(&events), 0);
    assert!(
        matches!(events.last(), Some(Err(ModelError::Protocol(message))) if message.contains("not JSON")),
        "{events:?}"
    );
    assert!(matches!(turn, Err(ModelError::Protocol(_))));
    Ok(())
}

#[tokio::test]
async fn an_error_object_mid_stream_is_a_protocol_error() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("Let me")
        .error("The server had an error while processing your request.")
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(finishes(&events), 0);
    assert_eq!(
        events.first(),
        Some(&Ok(ModelEvent::TextDelta("Let me".into())))
    );
    match turn {
        Err(ModelError::Protocol(message)) => assert!(
            message.contains("The server had an error while processing your request.")
                && message.contains("server_error"),
            "{message}"
        ),
        other => panic!("expected a protocol error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn an_unknown_tool_name_passes_through() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::new()
        .tool_call("call_9", "launch_rockets", &["{\"count\":3}"])
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Weather?", tools_for(&model)?)).await;
    assert_eq!(
        calls(&turn?),
        vec![(
            "call_9",
            "launch_rockets",
            "{\"count\":3}",
            CallStatus::Complete
        )]
    );
    Ok(())
}

#[tokio::test]
async fn rate_limited_then_success_is_one_turn_from_two_requests() -> TestResult {
    let server = MockOpenAiServer::start([
        error_response(429, "Rate limit reached for gpt-4o-mini").with_header("retry-after", "0"),
        OpenAiTurn::text("Hello").into_response(),
    ])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(turn?.text, "Hello");
    assert_eq!(finishes(&events), 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);
    Ok(())
}

#[tokio::test]
async fn three_server_errors_then_success_within_three_retries() -> TestResult {
    let server = MockOpenAiServer::start([
        error_response(500, "boom"),
        error_response(502, "bad gateway"),
        error_response(503, "overloaded"),
        OpenAiTurn::text("Finally").into_response(),
    ])
    .await?;
    let model = model_for(&server);
    let (_, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(turn?.text, "Finally");
    assert_eq!(server.requests().len(), 4);
    Ok(())
}

#[tokio::test]
async fn a_bad_request_is_an_http_error_and_not_retried() -> TestResult {
    let server = MockOpenAiServer::start([
        error_response(400, "Invalid schema for function 'lookup_weather'"),
        OpenAiTurn::text("never sent").into_response(),
    ])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(events.len(), 1);
    match turn {
        Err(ModelError::Http { status, body }) => {
            assert_eq!(status, 400);
            assert!(body.contains("Invalid schema"), "{body}");
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_connection_closed_mid_stream_is_an_error_never_a_finish() -> TestResult {
    // The pause before each piece lets the headers and the first events
    // reach the client before the break (a break before the first byte
    // would be retried instead).
    let pause = Duration::from_millis(5);
    let server = MockOpenAiServer::start([
        OpenAiTurn::new()
            .tool_call("call_1", "lookup_weather", &["{\"city\":"])
            .without_finish()
            .without_done()
            .into_response()
            .with_chunk_delay(pause)
            .closing_early(),
        // The finish_reason arrived, then the connection broke before [DONE].
        OpenAiTurn::text("Hi")
            .without_done()
            .into_response()
            .with_chunk_delay(pause)
            .closing_early(),
        // Broken in the middle of a data line.
        cut_at(
            truncate(OpenAiTurn::text("Hello").into_response(), 300),
            &[200],
        )
        .with_chunk_delay(pause)
        .closing_early(),
    ])
    .await?;
    let model = model_for(&server);
    for attempt in 0..3 {
        let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
        assert_eq!(finishes(&events), 0, "attempt {attempt}: {events:?}");
        assert!(
            matches!(
                events.last(),
                Some(Err(ModelError::Transport(_) | ModelError::Incomplete))
            ),
            "attempt {attempt}: {events:?}"
        );
        assert!(turn.is_err());
    }
    // Each break came after the first byte, so none was retried.
    assert_eq!(server.requests().len(), 3);
    Ok(())
}

#[tokio::test]
async fn an_unfinished_body_that_ends_cleanly_is_incomplete() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("Hel")
        .without_finish()
        .without_done()
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(events.last(), Some(&Err(ModelError::Incomplete)));
    assert_eq!(turn, Err(ModelError::Incomplete));
    Ok(())
}

#[tokio::test]
async fn no_done_but_a_finish_reason_still_finishes() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("Bye")
        .usage(4, 1)
        .without_done()
        .into_response()])
    .await?;
    let model = model_for(&server);
    let (events, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(finishes(&events), 1);
    let turn = turn?;
    assert_eq!(turn.text, "Bye");
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(turn.usage, Some(Usage::new(4, 1)));
    Ok(())
}

fn transcript() -> Vec<Message> {
    vec![
        Message::system("Be brief."),
        Message::user("Weather in Zürich?"),
        Message::Assistant {
            runnable: None,
            content: String::new(),
            tool_calls: vec![AssistantToolCall {
                id: "call_1".into(),
                name: "lookup_weather".into(),
                arguments: "{\"city\":\"Zürich\",\"days\":null}".into(),
            }],
            thinking: Vec::new(),
            server_blocks: Vec::new(),
        },
        Message::Tool {
            tool_call_id: "call_1".into(),
            name: "lookup_weather".into(),
            content: "{\"ok\":true,\"result\":{\"summary\":\"Sunny\"}}".into(),
            is_error: false,
            attachments: Vec::new(),
        },
        Message::Assistant {
            runnable: None,
            content: "It is sunny.".into(),
            tool_calls: Vec::new(),
            thinking: Vec::new(),
            server_blocks: Vec::new(),
        },
        Message::user("And tomorrow?"),
    ]
}

#[tokio::test]
async fn request_body_maps_messages_and_wraps_strict_tools() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("ok").into_response()]).await?;
    let model = model_for(&server);
    assert_eq!(model.dialect(), Dialect::OpenAiStrict);
    let lowered = tools_for(&model)?;
    let request = ChatRequest {
        messages: transcript(),
        tools: lowered.clone().into(),
        tool_choice: ToolChoice::Tool("lookup_weather".into()),
        parallel_tool_calls: false,
        max_tokens: Some(256),
        temperature: Some(0.2),
        response_format: None,
        deferred_tools: None,
    };
    turn(&model, &request).await.1?;
    let requests = server.requests();
    let body = &requests[0].body;
    assert_eq!(
        body["messages"],
        json!([
            { "role": "system", "content": "Be brief." },
            { "role": "user", "content": "Weather in Zürich?" },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "lookup_weather",
                        "arguments": "{\"city\":\"Zürich\",\"days\":null}"
                    }
                }]
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": "{\"ok\":true,\"result\":{\"summary\":\"Sunny\"}}"
            },
            { "role": "assistant", "content": "It is sunny." },
            { "role": "user", "content": "And tomorrow?" },
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "lookup_weather",
                "description": lowered[0].description,
                "parameters": lowered[0].parameters,
                "strict": true,
            }
        }])
    );
    // Strict mode: the optional `days` is required but nullable.
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["city", "days"])
    );
    assert_eq!(
        body["tool_choice"],
        json!({ "type": "function", "function": { "name": "lookup_weather" } })
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["temperature"], json!(0.2));
    Ok(())
}

#[tokio::test]
async fn request_body_without_strict_sends_the_canonical_schema() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("ok").into_response()]).await?;
    let mut extra = serde_json::Map::new();
    extra.insert("seed".into(), json!(7));
    extra.insert("stream".into(), json!(false));
    let model = model_for(&server).with_strict(false).with_extra_body(extra);
    assert_eq!(model.dialect(), Dialect::OpenAiCompatible);
    let lowered = tools_for(&model)?;
    let mut request = ask("Weather?", lowered.clone());
    request.tool_choice = ToolChoice::Required;
    turn(&model, &request).await.1?;
    let requests = server.requests();
    let body = &requests[0].body;
    let function = &body["tools"][0]["function"];
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(function["name"], "lookup_weather");
    assert_eq!(function["parameters"], lowered[0].parameters);
    assert_eq!(function["parameters"]["required"], json!(["city"]));
    assert_eq!(function.get("strict"), None);
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["parallel_tool_calls"], true);
    // Extra fields are merged; `stream` stays on.
    assert_eq!(body["seed"], 7);
    assert_eq!(body["stream"], true);
    Ok(())
}

#[tokio::test]
async fn request_body_without_tools_has_no_tool_keys() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text("ok").into_response()]).await?;
    let model = model_for(&server);
    let mut request = ask("Hi", Vec::new());
    request.tool_choice = ToolChoice::Required;
    turn(&model, &request).await.1?;
    let requests = server.requests();
    let body = requests[0]
        .body
        .as_object()
        .ok_or("the body is not an object")?;
    let mut keys: Vec<&str> = body.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, vec!["messages", "model", "stream", "stream_options"]);
    Ok(())
}

#[tokio::test]
async fn authorization_is_sent_only_with_a_key() -> TestResult {
    let server = MockOpenAiServer::start([
        OpenAiTurn::text("one").into_response(),
        OpenAiTurn::text("two").into_response(),
    ])
    .await?;
    turn(&model_for(&server), &ask("Hi", Vec::new())).await.1?;
    let keyed = model_for(&server).with_api_key("sk-test-123");
    turn(&keyed, &ask("Hi", Vec::new())).await.1?;
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(
        requests[1].header("authorization"),
        Some("Bearer sk-test-123")
    );
    Ok(())
}

/// Collects everything the tracing subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut buffer) = self.0.lock() {
            buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn debug_and_logs_never_show_the_key() -> TestResult {
    let key = "sk-secret-5f3a9c";
    let model = OpenAiChat::new("gpt-4o").with_api_key(key);
    let printed = format!("{model:?}");
    assert!(printed.contains("api_key: \"[redacted]\""), "{printed}");
    assert!(!printed.contains(key), "{printed}");
    assert!(!format!("{model:#?}").contains(key));
    assert!(format!("{:?}", OpenAiChat::new("m")).contains("api_key: None"));

    // Every log line of a whole turn, at TRACE, from every crate.
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let server = MockOpenAiServer::start([
        error_response(503, "busy").with_header("retry-after", "0"),
        OpenAiTurn::text("Hi").into_response(),
    ])
    .await?;
    {
        let _guard = crate::common::capture_logs(subscriber);
        let model = model_for(&server).with_api_key(key);
        turn(&model, &ask("Hi", Vec::new())).await.1?;
    }
    let logs = String::from_utf8_lossy(&captured.0.lock().map_err(|_| "poisoned")?).into_owned();
    assert!(logs.contains("openai_chat"), "{logs}");
    assert!(logs.contains("model=gpt-4o-mini"), "{logs}");
    assert!(logs.contains(&server.base_url()), "{logs}");
    assert!(!logs.contains(key), "{logs}");
    assert_eq!(
        server.requests()[1].header("authorization"),
        Some(format!("Bearer {key}").as_str())
    );
    Ok(())
}

#[test]
fn from_vars_reads_the_configuration() -> TestResult {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    };
    let defaults = OpenAiChat::from_vars(vars(&[]))?;
    assert_eq!(defaults.base_url(), "https://api.openai.com/v1");
    assert_eq!(defaults.model(), "gpt-4o-mini");
    assert!(format!("{defaults:?}").contains("api_key: None"));

    let local = OpenAiChat::from_vars(vars(&[
        ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/"),
        ("OPENAI_API_KEY", ""),
        ("OPENAI_MODEL", "smollm2"),
    ]))?;
    assert_eq!(local.base_url(), "http://127.0.0.1:8080/v1");
    assert_eq!(local.model(), "smollm2");
    assert!(format!("{local:?}").contains("api_key: None"));

    let bad = OpenAiChat::from_vars(vars(&[("OPENAI_BASE_URL", "127.0.0.1:8080")]));
    assert!(
        matches!(&bad, Err(ModelError::Config(message)) if message.contains("OPENAI_BASE_URL")),
        "{bad:?}"
    );
    Ok(())
}

/// The environment is process-wide and changing it while other tests run
/// is unsound, so `from_env` is tested in a child process of this test
/// binary: it runs [`from_env_child`] with the variables set.
#[tokio::test]
async fn from_env_reads_the_environment() -> TestResult {
    let server =
        MockOpenAiServer::start([OpenAiTurn::text("from the environment").into_response()]).await?;
    let executable = std::env::current_exe()?;
    let base_url = format!("{}/", server.base_url());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(executable)
            .args([
                crate::common::test_name(module_path!(), "from_env_child").as_str(),
                "--exact",
                "--ignored",
                "--test-threads=1",
            ])
            .env("APTIX_FROM_ENV_CHILD", "1")
            .env("OPENAI_BASE_URL", base_url)
            .env("OPENAI_API_KEY", "sk-from-env")
            .env("OPENAI_MODEL", "env-model")
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{stderr}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-from-env")
    );
    assert_eq!(requests[0].body["model"], "env-model");
    Ok(())
}

#[tokio::test]
#[ignore = "run by from_env_reads_the_environment, in a child process with OPENAI_* set"]
async fn from_env_child() -> TestResult {
    if std::env::var_os("APTIX_FROM_ENV_CHILD").is_none() {
        return Ok(());
    }
    let model = OpenAiChat::from_env()?.with_policy(fast_policy());
    assert_eq!(model.model(), "env-model");
    assert!(!model.base_url().ends_with('/'));
    let (_, turn) = turn(&model, &ask("Hi", Vec::new())).await;
    assert_eq!(turn?.text, "from the environment");
    Ok(())
}

/// A one-connection HTTP server on 127.0.0.1 that answers the first request
/// with `head` and then `body` bytes of `x` (in 64 KiB writes), then holds the
/// connection open for `hold`. Returns the base URL and a handle giving how
/// many body bytes the client let it write before closing.
fn raw_error_server(
    head: String,
    body: usize,
    hold: Duration,
) -> std::io::Result<(String, std::thread::JoinHandle<usize>)> {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    let handle = std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return 0;
        };
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        while !request.windows(4).any(|window| window == b"\r\n\r\n") {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => return 0,
                Ok(read) => request.extend_from_slice(&buffer[..read]),
            }
        }
        if stream.write_all(head.as_bytes()).is_err() {
            return 0;
        }
        let chunk = vec![b'x'; 64 * 1024];
        let mut written = 0;
        while written < body {
            let piece = chunk.len().min(body - written);
            match stream.write(&chunk[..piece]) {
                Ok(0) | Err(_) => return written,
                Ok(sent) => written += sent,
            }
        }
        std::thread::sleep(hold);
        written
    });
    Ok((url, handle))
}

fn error_policy() -> HttpPolicy {
    HttpPolicy {
        connect_timeout: Duration::from_secs(1),
        first_byte_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        max_retries: 0,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(1),
        ..HttpPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_body_that_stalls_ends_the_run_within_the_policy() -> TestResult {
    let head = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"error\"".to_owned();
    let (url, server) = raw_error_server(head, 0, Duration::from_secs(30))?;
    let model = OpenAiChat::new("gpt-4o-mini")
        .with_base_url(url)
        .with_policy(error_policy());
    let request = ask("Hi", Vec::new());
    let events = tokio::time::timeout(
        Duration::from_secs(10),
        collect_events(model.stream(&request)),
    )
    .await
    .map_err(|_| "the run was still going 10 s after a stalled error body (every limit is 1 s)")?;
    match assemble(&events) {
        Err(ModelError::Http { status, body }) => {
            assert_eq!(status, 400);
            assert_eq!(body, "{\"error\"");
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    drop(server);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_error_body_is_read_only_up_to_its_cap() -> TestResult {
    let size = 128 * 1024 * 1024;
    let head = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
    );
    let (url, server) = raw_error_server(head, size, Duration::ZERO)?;
    let model = OpenAiChat::new("gpt-4o-mini")
        .with_base_url(url)
        .with_policy(error_policy());
    let request = ask("Hi", Vec::new());
    let events = tokio::time::timeout(
        Duration::from_secs(60),
        collect_events(model.stream(&request)),
    )
    .await
    .map_err(|_| "no answer within 60 s")?;
    match assemble(&events) {
        Err(ModelError::Http { status, body }) => {
            assert_eq!(status, 400);
            assert!(
                !body.is_empty() && body.len() <= 4096,
                "{} bytes kept",
                body.len()
            );
            assert!(body.bytes().all(|byte| byte == b'x'));
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    let written = tokio::task::spawn_blocking(move || server.join())
        .await?
        .map_err(|_| "server thread panicked")?;
    // What the loopback socket buffers hold plus what the client read: far
    // below the body, which the client stopped reading.
    assert!(
        written < 32 * 1024 * 1024,
        "the client let the server write {written} of {size} bytes"
    );
    Ok(())
}

#[test]
fn a_model_without_strict_mode_reports_the_openai_compatible_dialect() {
    let model = OpenAiChat::new("smollm2").with_strict(false);
    assert_eq!(model.dialect().as_str(), "openai_compatible");
    assert_eq!(
        OpenAiChat::new("gpt-4o-mini").dialect(),
        Dialect::OpenAiStrict
    );
}

/// An agent on `model` with the weather tool.
fn weather_agent(model: OpenAiChat) -> Result<aptix::Agent, Box<dyn Error>> {
    Ok(aptix::Agent::builder()
        .model(model)
        .catalog(aptix::tools![LookupWeatherTool].build()?)
        .max_iterations(4)
        .build()?)
}

async fn run(
    agent: &aptix::Agent,
    conversation: &mut aptix::Conversation,
    input: &str,
) -> Vec<aptix::AgentEvent> {
    futures_util::StreamExt::collect(agent.run(conversation, aptix::Input::User(input.into())))
        .await
}

/// A DeepSeek-style server: reasoning streams as `reasoning_content`, is
/// shown as it streams, kept with the turn, and goes back on the
/// assistant message that called the tool, byte for byte, in the next
/// request; the cached prompt tokens reach the run's usage.
#[tokio::test]
async fn reasoning_content_is_shown_kept_and_sent_back_after_a_tool_call() -> TestResult {
    let server = MockOpenAiServer::start([
        OpenAiTurn::new()
            .reasoning(&["The user wants ", "the \"weather\" — ask."])
            .tool_call("call_1", "lookup_weather", &["{\"city\":\"Paris\"}"])
            .usage(30, 9)
            .cached_tokens(16)
            .into_response(),
        OpenAiTurn::new()
            .reasoning(&["It is sunny."])
            .with_text("Sunny in Paris.")
            .usage(50, 4)
            .cached_tokens(30)
            .into_response(),
        OpenAiTurn::text("Hello again.")
            .usage(60, 3)
            .into_response(),
    ])
    .await?;
    let agent = weather_agent(model_for(&server).with_strict(false))?;
    let mut conversation = aptix::Conversation::new("reasoning");
    let events = run(&agent, &mut conversation, "Weather in Paris?").await;
    let shown: String = events
        .iter()
        .filter_map(|event| match event {
            aptix::AgentEvent::ReasoningDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, "The user wants the \"weather\" — ask.It is sunny.");
    match events.last() {
        Some(aptix::AgentEvent::Done { reason, usage, .. }) => {
            assert!(matches!(reason, aptix::DoneReason::Completed), "{reason:?}");
            assert_eq!(usage.cache_read_tokens, 46);
            assert_eq!(usage.input_tokens, 80);
        }
        other => panic!("{other:?}"),
    }
    // A second user turn: the first turn's reasoning still goes back
    // (DeepSeek requires it in every later request).
    let _ = run(&agent, &mut conversation, "Thanks!").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        // serde_json writes members in key order.
        requests[1].raw_body.contains(concat!(
            r#"{"content":"","reasoning_content":"The user wants the \"weather\" — ask.","role":"assistant","#,
            r#""tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"lookup_weather"},"id":"call_1","type":"function"}]}"#
        )),
        "{}",
        requests[1].raw_body
    );
    let third = &requests[2].body["messages"];
    assert_eq!(
        third[1]["reasoning_content"],
        "The user wants the \"weather\" — ask."
    );
    assert_eq!(third[3]["content"], "Sunny in Paris.");
    assert_eq!(third[3]["reasoning_content"], "It is sunny.");
    assert_eq!(third[4], json!({ "role": "user", "content": "Thanks!" }));
    Ok(())
}

/// Ollama's field name, asked for with `with_reasoning_field`.
#[tokio::test]
async fn reasoning_goes_back_in_the_field_the_server_reads() -> TestResult {
    use aptix_core::model::openai::{ReasoningEcho, ReasoningField};
    let server = MockOpenAiServer::start([
        OpenAiTurn::new()
            .raw_data(r#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Hmm."},"finish_reason":null}]}"#)
            .with_text("Hi.")
            .into_response(),
        OpenAiTurn::text("Again.").into_response(),
    ])
    .await?;
    let agent = weather_agent(
        model_for(&server)
            .with_strict(false)
            .with_reasoning_field(ReasoningField::Reasoning)
            .with_reasoning_echo(ReasoningEcho::Always),
    )?;
    let mut conversation = aptix::Conversation::new("ollama");
    let _ = run(&agent, &mut conversation, "Hi").await;
    let _ = run(&agent, &mut conversation, "Once more").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]
            .raw_body
            .contains(r#"{"content":"Hi.","reasoning":"Hmm.","role":"assistant"}"#),
        "{}",
        requests[1].raw_body
    );
    Ok(())
}

/// A server that cannot stream tool calls writes the call as text and
/// ends with `[DONE]` and no finish_reason: the run ends with an error
/// that names the cause and the fix, not with the text as an answer.
#[tokio::test]
async fn a_server_that_writes_the_call_as_text_ends_the_run_naming_the_fix() -> TestResult {
    let server = MockOpenAiServer::start([OpenAiTurn::text_pieces(&[
        "{\"name\": \"lookup_weather\", ",
        "\"arguments\": {\"city\": \"Paris\"}}",
    ])
    .without_finish()
    .into_response()])
    .await?;
    let agent = weather_agent(model_for(&server).with_strict(false))?;
    let mut conversation = aptix::Conversation::new("no-native-calls");
    let events = run(&agent, &mut conversation, "Weather in Paris?").await;
    match events.last() {
        Some(aptix::AgentEvent::Done {
            reason: aptix::DoneReason::ModelError(ModelError::Protocol(message)),
            ..
        }) => {
            assert!(
                message.contains("cannot stream native tool calls"),
                "{message}"
            );
            assert!(message.contains("CallMode::Composed"), "{message}");
            assert!(
                message.contains("with_native_tool_calls(false)"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    Ok(())
}

/// A server that answers an error status about tools to `stream: true`
/// with `tools` (llama.cpp's server before it streamed calls): the error
/// names the cause and the fix.
#[tokio::test]
async fn a_server_that_refuses_streamed_tools_ends_the_run_naming_the_fix() -> TestResult {
    let refusal = || {
        aptix_testkit::mock_server::ScriptedResponse::error(
            500,
            json!({ "error": { "code": 500, "message": "Cannot use tools with stream", "type": "server_error" } }),
        )
    };
    let server = MockOpenAiServer::start((0..4).map(|_| refusal())).await?;
    let agent = weather_agent(model_for(&server).with_strict(false))?;
    let mut conversation = aptix::Conversation::new("refused");
    let events = run(&agent, &mut conversation, "Weather in Paris?").await;
    match events.last() {
        Some(aptix::AgentEvent::Done {
            reason: aptix::DoneReason::ModelError(ModelError::Config(message)),
            ..
        }) => {
            assert!(
                message.contains("Cannot use tools with stream"),
                "{message}"
            );
            assert!(message.contains("CallMode::Composed"), "{message}");
            assert!(
                message.contains("OPENAI_NATIVE_TOOL_CALLS=false"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    Ok(())
}

/// `OPENAI_NATIVE_TOOL_CALLS=false`: an agent in `CallMode::Auto` offers
/// the tools as one structured-output schema, so the same server answers.
#[tokio::test]
async fn native_tool_calls_off_makes_auto_mode_composed() -> TestResult {
    let server = MockOpenAiServer::start([
        OpenAiTurn::text(r#"{"message":"Hello.","calls":[]}"#).into_response()
    ])
    .await?;
    let base_url = server.base_url();
    let model = OpenAiChat::from_vars(|name| match name {
        "OPENAI_BASE_URL" => Some(base_url.clone()),
        "OPENAI_NATIVE_TOOL_CALLS" => Some("false".into()),
        _ => None,
    })?
    .with_strict(false)
    .with_policy(fast_policy());
    assert!(!model.calls_tools_natively());
    let agent = aptix::Agent::builder()
        .model(model)
        .catalog(aptix::tools![LookupWeatherTool].build()?)
        .call_mode(aptix::agent::CallMode::Auto)
        .max_iterations(2)
        .build()?;
    let mut conversation = aptix::Conversation::new("auto");
    let _ = run(&agent, &mut conversation, "Hi").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body.get("tools"), None);
    assert_eq!(requests[0].body["response_format"]["type"], "json_schema");
    Ok(())
}

/// One event that never ends, sent fast: a `data:` line of 20 MiB in 16 KiB
/// pieces. The transport refuses it at `HttpPolicy::max_event_bytes`
/// (16 MiB by default) in time linear in what was read, rather than
/// holding all of it and parsing the unfinished line again on each piece.
#[tokio::test]
async fn an_event_that_never_ends_is_refused_at_its_limit() -> TestResult {
    let mut chunks = vec![b"data: ".to_vec()];
    let piece = vec![b'x'; 16 * 1024];
    chunks.extend(std::iter::repeat_n(piece, 20 * 64));
    let server =
        MockOpenAiServer::start([aptix_testkit::mock_server::ScriptedResponse::sse(chunks)])
            .await?;
    let model = model_for(&server);
    let started = std::time::Instant::now();
    let events = collect_events(model.stream(&ask("Hi", Vec::new()))).await;
    match events.last() {
        Some(Err(ModelError::Protocol(message))) => {
            assert!(message.contains("16777216 bytes"), "{message}")
        }
        other => panic!("{other:?} after {:?}", started.elapsed()),
    }
    Ok(())
}
