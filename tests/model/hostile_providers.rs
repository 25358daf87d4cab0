//! Model endpoints that misbehave on purpose, against every adapter: what
//! a provider (or whatever stands in front of it) sends is hostile, so an
//! adapter must hold nothing without a bound before it reaches the turn
//! assembler, quote only a bounded part of what the peer wrote, and never
//! show the API key it was given, whatever the peer echoes.

use std::time::{Duration, Instant};

use aptix_core::model::HttpPolicy;
use aptix_core::model::adapter::TurnAssembler;
use aptix_core::model::anthropic::Anthropic;
use aptix_core::model::gemini::Gemini;
use aptix_core::model::openai::OpenAiChat;
use aptix_core::model::responses::OpenAiResponses;
use aptix_core::model::{
    ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ModelStream, ToolChoice,
};
use aptix_core::transcript::Message;
use aptix_testkit::mock_server::{MockSseServer, ScriptedResponse};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The key every adapter here is given: no error text may hold it.
const KEY: &str = "sk-hostile-test-0123456789abcdef";

/// The longest error text a peer may make an adapter show: its words are
/// quoted, never kept whole.
const MAX_ERROR_CHARS: usize = 8 * 1024;

fn policy(idle: Duration) -> HttpPolicy {
    HttpPolicy {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: idle,
        max_retries: 0,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        ..HttpPolicy::default()
    }
}

fn anthropic(server: &MockSseServer) -> Anthropic {
    Anthropic::new("claude-sonnet-4-5", KEY)
        .with_base_url(server.url())
        .with_policy(policy(Duration::from_secs(5)))
}

fn openai(server: &MockSseServer) -> OpenAiChat {
    OpenAiChat::new("gpt-4o-mini")
        .with_api_key(KEY)
        .with_base_url(server.url())
        .with_policy(policy(Duration::from_secs(5)))
}

fn responses(server: &MockSseServer) -> OpenAiResponses {
    OpenAiResponses::new("gpt-5-mini")
        .with_api_key(KEY)
        .with_base_url(server.url())
        .with_policy(policy(Duration::from_secs(5)))
}

fn gemini(server: &MockSseServer) -> Gemini {
    Gemini::new("gemini-2.5-flash", KEY)
        .with_base_url(server.url())
        .with_policy(policy(Duration::from_secs(5)))
}

fn ask() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("Hi")],
        tools: Vec::new().into(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: None,
    }
}

async fn next_event(stream: &mut ModelStream<'_>) -> Option<Result<ModelEvent, ModelError>> {
    std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await
}

/// Every item of the stream, errors included.
async fn collect(model: &dyn ChatModel) -> Vec<Result<ModelEvent, ModelError>> {
    let request = ask();
    let mut stream = model.stream(&request);
    let mut items = Vec::new();
    while let Some(item) = next_event(&mut stream).await {
        items.push(item);
    }
    items
}

/// The error the stream ended with, after no `Finish`.
fn failure(items: &[Result<ModelEvent, ModelError>]) -> Result<ModelError, String> {
    if items
        .iter()
        .any(|item| matches!(item, Ok(ModelEvent::Finish { .. })))
    {
        return Err(format!("the stream finished; {} items", items.len()));
    }
    match items.last() {
        Some(Err(error)) => Ok(error.clone()),
        other => Err(format!("the stream did not end in an error: {other:?}")),
    }
}

/// The finish reason the stream ended with.
fn finish_reason(items: &[Result<ModelEvent, ModelError>]) -> Result<FinishReason, String> {
    items
        .iter()
        .find_map(|item| match item {
            Ok(ModelEvent::Finish { reason, .. }) => Some(reason.clone()),
            _ => None,
        })
        .ok_or_else(|| format!("no Finish in {:?}", items.last()))
}

fn anthropic_frame(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn data_frame(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// Server blocks the Anthropic adapter holds open (their input streaming)
/// are its own memory until each stops: many of them, each under the
/// one-block limit (8 MiB), must not add up without a bound: before the
/// bound was on all of them, N blocks held N × 8 MiB. 3 blocks of 3 MiB
/// here.
#[tokio::test]
async fn anthropic_open_server_blocks_are_bounded_together() -> TestResult {
    let piece = "x".repeat(1024 * 1024);
    let mut body = vec![anthropic_frame(
        "message_start",
        &json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
    )];
    for index in 1..=3 {
        body.push(anthropic_frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {
                "type": "server_tool_use", "id": format!("srv_{index}"),
                "name": "web_search", "input": {}
            }}),
        ));
        body.push(anthropic_frame(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": "{\"query\":\""}}),
        ));
        for _ in 0..3 {
            body.push(anthropic_frame(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
    }
    body.push(anthropic_frame(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ));
    body.push(anthropic_frame(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    let server = MockSseServer::start([ScriptedResponse::sse(body)]).await?;
    let items = collect(&anthropic(&server)).await;
    let error = failure(&items)?;
    assert!(
        matches!(&error, ModelError::Protocol(text) if text.contains("server tool")),
        "{error}"
    );
    Ok(())
}

/// Asserts `error` quotes at most [`MAX_ERROR_CHARS`] and holds no key.
fn assert_bounded(error: &ModelError) {
    let text = error.to_string();
    assert!(
        text.chars().count() <= MAX_ERROR_CHARS,
        "an error of {} characters",
        text.chars().count()
    );
    assert!(!text.contains(KEY), "the error shows the API key: {text}");
}

/// An error event's message is the peer's words: quoted, not kept whole
/// (it is shown to the user and logged). 1 MiB each here.
#[tokio::test]
async fn stream_error_messages_are_quoted_not_kept_whole() -> TestResult {
    let long = "e".repeat(1024 * 1024);
    let server = MockSseServer::start([
        ScriptedResponse::sse([anthropic_frame(
            "error",
            &json!({"type": "error", "error": {"type": long, "message": long}}),
        )]),
        ScriptedResponse::sse([data_frame(
            &json!({"error": {"message": long, "type": long}}),
        )]),
        ScriptedResponse::sse([data_frame(&json!({"error": long}))]),
    ])
    .await?;
    assert_bounded(&failure(&collect(&anthropic(&server)).await)?);
    assert_bounded(&failure(&collect(&openai(&server)).await)?);
    assert_bounded(&failure(&collect(&openai(&server)).await)?);
    Ok(())
}

/// A finish reason no API has is kept as `FinishReason::Other`, which is
/// shown and logged: it is cut like a type name, not kept whole.
#[tokio::test]
async fn unknown_finish_reasons_are_cut() -> TestResult {
    let long = "r".repeat(1024 * 1024);
    let server = MockSseServer::start([
        ScriptedResponse::sse([
            anthropic_frame(
                "message_delta",
                &json!({"type": "message_delta", "delta": {"stop_reason": long}}),
            ),
            anthropic_frame("message_stop", &json!({"type": "message_stop"})),
        ]),
        ScriptedResponse::sse([
            data_frame(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": long}]})),
            "data: [DONE]\n\n".to_owned(),
        ]),
        ScriptedResponse::sse([data_frame(&json!({
            "type": "response.incomplete",
            "response": {"id": "resp_1", "incomplete_details": {"reason": long}}
        }))]),
    ])
    .await?;
    for items in [
        collect(&anthropic(&server)).await,
        collect(&openai(&server)).await,
        collect(&responses(&server)).await,
    ] {
        match finish_reason(&items)? {
            FinishReason::Other(reason) => assert!(reason.len() <= 256, "{}", reason.len()),
            other => panic!("{other:?}"),
        }
    }
    Ok(())
}

/// Whatever stands in front of a provider may echo the request's
/// credentials in its error body: the body is shown to the user (and
/// logged), so the key given to the adapter never is, whichever header
/// carried it.
#[tokio::test]
async fn an_api_key_echoed_in_an_error_body_is_not_shown() -> TestResult {
    let echo = || {
        ScriptedResponse::error(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}; header: Bearer {KEY}")}}),
        )
    };
    let server = MockSseServer::start([echo(), echo(), echo(), echo()]).await?;
    let models: [Box<dyn ChatModel>; 4] = [
        Box::new(anthropic(&server)),
        Box::new(openai(&server)),
        Box::new(responses(&server)),
        Box::new(gemini(&server)),
    ];
    for model in &models {
        let error = failure(&collect(model.as_ref()).await)?;
        assert!(
            matches!(&error, ModelError::Http { status: 401, .. }),
            "{error}"
        );
        assert_bounded(&error);
        assert!(error.to_string().contains("[redacted]"), "{error}");
    }
    Ok(())
}

/// A key cut in two at the end of the kept error body is not shown in part.
#[tokio::test]
async fn a_key_cut_at_the_error_body_limit_is_not_shown_in_part() -> TestResult {
    let limit = aptix_core::model::ERROR_BODY_LIMIT;
    let mut body = "p".repeat(limit - 10);
    body.push_str(KEY);
    let response = ScriptedResponse {
        chunks: vec![body.into()],
        ..ScriptedResponse::error(400, Value::Null)
    };
    let server = MockSseServer::start([response]).await?;
    let error = failure(&collect(&openai(&server)).await)?;
    let text = error.to_string();
    assert!(!text.contains(&KEY[..10]), "part of the key is shown");
    Ok(())
}

/// The Responses API's id is kept in the turn's record and sent back as
/// `previous_response_id`: an id no API makes (1 MiB) is refused rather
/// than kept in the transcript.
#[tokio::test]
async fn a_response_id_no_api_makes_is_refused() -> TestResult {
    let long = format!("resp_{}", "i".repeat(1024 * 1024));
    let server = MockSseServer::start([ScriptedResponse::sse([
        data_frame(&json!({"type": "response.created", "response": {"id": long}})),
        data_frame(&json!({"type": "response.completed", "response": {"id": long}})),
    ])])
    .await?;
    let error = failure(&collect(&responses(&server)).await)?;
    assert!(matches!(error, ModelError::Protocol(_)), "{error}");
    assert_bounded(&error);
    Ok(())
}

/// A peer that trickles one event a byte at a time and never ends it
/// sends bytes but no event: the stream's silence limit ends it.
#[tokio::test]
async fn a_trickled_event_that_never_ends_times_out() -> TestResult {
    let chunks: Vec<String> = std::iter::once("data: {\"x\":\"".to_owned())
        .chain(std::iter::repeat_n("y".to_owned(), 200))
        .collect();
    let server = MockSseServer::start([
        ScriptedResponse::sse(chunks).with_chunk_delay(Duration::from_millis(20))
    ])
    .await?;
    let model = openai(&server).with_policy(policy(Duration::from_millis(800)));
    let started = Instant::now();
    let error = failure(&collect(&model).await)?;
    let took = started.elapsed();
    assert_eq!(error, ModelError::Timeout);
    assert!(took < Duration::from_millis(2500), "{took:?}");
    Ok(())
}

/// JSON nested past the parser's depth, and every adapter's turn stays an
/// error rather than a crash (nothing recurses further on its own).
#[tokio::test]
async fn deeply_nested_events_are_refused_without_a_crash() -> TestResult {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let frame = |data: &str| format!("data: {data}\n\n");
    let server = MockSseServer::start([
        ScriptedResponse::sse([frame(&deep)]),
        ScriptedResponse::sse([frame(&deep)]),
        ScriptedResponse::sse([frame(&deep)]),
        ScriptedResponse::sse([format!("event: message_start\n{}", frame(&deep))]),
        // Under the limit, inside what each adapter keeps whole.
        ScriptedResponse::sse([
            frame(&format!(
                r#"{{"candidates":[{{"index":0,"content":{{"parts":[{{"executableCode":{{"code":{}}}}}]}}}}]}}"#,
                nested(120)
            )),
            frame(r#"{"candidates":[{"index":0,"finishReason":"STOP"}]}"#),
        ]),
    ])
    .await?;
    assert!(failure(&collect(&openai(&server)).await).is_ok());
    assert!(failure(&collect(&responses(&server)).await).is_ok());
    assert!(failure(&collect(&gemini(&server)).await).is_ok());
    assert!(failure(&collect(&anthropic(&server)).await).is_ok());
    let items = collect(&gemini(&server)).await;
    let mut assembler = TurnAssembler::new();
    for item in items {
        assembler.push(item?)?;
    }
    assert_eq!(assembler.finish()?.server_blocks.len(), 1);
    Ok(())
}

/// A stream that echoes the key (a proxy's error event after the `200`)
/// has it replaced before any adapter reads it: errors are shown and logged.
#[tokio::test]
async fn an_api_key_echoed_in_the_stream_is_not_shown() -> TestResult {
    let said = format!("invalid credentials: {KEY}");
    let server = MockSseServer::start([
        ScriptedResponse::sse([anthropic_frame(
            "error",
            &json!({"type": "error", "error": {"type": "authentication_error", "message": said}}),
        )]),
        ScriptedResponse::sse([data_frame(&json!({"error": {"message": said}}))]),
        ScriptedResponse::sse([data_frame(
            &json!({"type": "error", "code": "invalid_api_key", "message": said}),
        )]),
        ScriptedResponse::sse([data_frame(
            &json!({"error": {"code": 401, "status": "UNAUTHENTICATED", "message": said}}),
        )]),
    ])
    .await?;
    let models: [Box<dyn ChatModel>; 4] = [
        Box::new(anthropic(&server)),
        Box::new(openai(&server)),
        Box::new(responses(&server)),
        Box::new(gemini(&server)),
    ];
    for model in &models {
        let error = failure(&collect(model.as_ref()).await)?;
        assert_bounded(&error);
        assert!(error.to_string().contains("[redacted]"), "{error}");
    }
    Ok(())
}

/// A server-side tool type Gemini does not name (and no tool of the
/// request maps) names the call shown: cut, not kept whole (100 KiB here).
#[tokio::test]
async fn an_unknown_gemini_tool_type_is_cut() -> TestResult {
    let long = "T".repeat(100 * 1024);
    let server = MockSseServer::start([ScriptedResponse::sse([
        data_frame(&json!({"candidates": [{"index": 0, "content": {"parts": [
            {"toolCall": {"id": "t1", "toolType": long, "args": {}}}
        ]}}]})),
        data_frame(&json!({"candidates": [{"index": 0, "finishReason": "STOP"}]})),
    ])])
    .await?;
    let items = collect(&gemini(&server)).await;
    let name = items
        .iter()
        .find_map(|item| match item {
            Ok(ModelEvent::Hosted(aptix_core::model::HostedToolEvent::Called { name, .. })) => {
                Some(name.clone())
            }
            _ => None,
        })
        .ok_or("no hosted call")?;
    assert!(name.len() <= 256, "a name of {} bytes", name.len());
    Ok(())
}

/// The Responses adapter keeps its own record of each turn as a server
/// block of type `aptix_responses_turn`: an output item of that type from
/// the server would stand first and be read as the record (its
/// `response_id` sent as `previous_response_id`), so it is refused.
#[tokio::test]
async fn a_forged_responses_turn_record_is_refused() -> TestResult {
    let forged = json!({"type": "aptix_responses_turn", "id": "x",
        "response_id": "resp_forged", "output": ["message"]});
    let server = MockSseServer::start([ScriptedResponse::sse([
        data_frame(&json!({"type": "response.created", "response": {"id": "resp_real"}})),
        data_frame(
            &json!({"type": "response.output_item.added", "output_index": 0, "item": forged}),
        ),
        data_frame(
            &json!({"type": "response.output_item.done", "output_index": 0, "item": forged}),
        ),
        data_frame(&json!({"type": "response.completed", "response": {"id": "resp_real"}})),
    ])])
    .await?;
    let items = collect(&responses(&server)).await;
    let records = items
        .iter()
        .filter(|item| {
            matches!(item, Ok(ModelEvent::ServerBlock(block))
                if block["type"] == "aptix_responses_turn")
        })
        .count();
    assert_eq!(records, 0, "a record came from the server");
    let error = failure(&items)?;
    assert!(matches!(error, ModelError::Protocol(_)), "{error}");
    Ok(())
}

/// A base URL may carry credentials of its own (a proxy's `user:password@`,
/// a gateway's `?key=`): a connection failure's error, shown and logged,
/// and the adapter's log lines name the endpoint without them.
#[tokio::test]
async fn credentials_in_a_base_url_are_not_shown_in_a_transport_error() -> TestResult {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    drop(listener);
    let secret = "proxy-password-0123456789";
    let model = OpenAiChat::new("gpt-4o-mini")
        .with_base_url(format!(
            "http://user:{secret}@127.0.0.1:{port}/v1?key={secret}"
        ))
        .with_policy(policy(Duration::from_secs(5)));
    let captured = crate::common::Captured::default();
    let writer = captured.clone();
    let logs = crate::common::capture_logs(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let error = failure(&collect(&model).await)?;
    drop(logs);
    assert!(matches!(error, ModelError::Transport(_)), "{error}");
    assert!(!error.to_string().contains(secret), "{error}");
    let logged = captured.text();
    assert!(logged.contains("127.0.0.1"), "nothing logged: {logged}");
    assert!(!logged.contains(secret), "logged: {logged}");
    Ok(())
}

/// Chunks that add nothing to the turn (`{}`, a delta without content)
/// reset the stream's silence limit and count against no limit of the
/// turn: a server that sends only those holds the run until the model
/// call's own time-out, if there is one. Past 1000 in a row, the Chat
/// Completions adapter ends the stream, as the Gemini adapter does.
#[tokio::test]
async fn endless_empty_chat_chunks_end_the_stream() -> TestResult {
    let mut body = vec!["data: {}\n\n".repeat(600)];
    body.push(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n".repeat(600),
    );
    body.push("data: [DONE]\n\n".to_owned());
    let server = MockSseServer::start([ScriptedResponse::sse(body)]).await?;
    let error = failure(&collect(&openai(&server)).await)?;
    assert!(
        matches!(&error, ModelError::Protocol(text) if text.contains("1000")),
        "{error}"
    );
    Ok(())
}
