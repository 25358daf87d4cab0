//! The Anthropic adapter over the wire: a real HTTP mock streaming
//! Anthropic-format bodies, every event fed through the one `TurnAssembler`.

use std::time::Duration;

use aptix_core::Dialect;
use aptix_core::model::HttpPolicy;
use aptix_core::model::adapter::{AssembledTurn, CallStatus, TurnAssembler};
use aptix_core::model::anthropic::Anthropic;
use aptix_core::model::{
    ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ModelStream, ToolChoice,
    ToolSpec, Usage,
};
use aptix_core::transcript::{AssistantToolCall, Message, ThinkingBlock};
use aptix_testkit::mock_anthropic::{
    AnthropicTurn, MockAnthropicServer, error_frame, error_response, frame, ping_frame,
};
use aptix_testkit::mock_server::ScriptedResponse;
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

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

fn model_for(server: &MockAnthropicServer) -> Anthropic {
    Anthropic::new("claude-sonnet-4-5", "sk-ant-test-key")
        .with_base_url(server.base_url())
        .with_policy(fast_policy())
}

/// The weather tool as the Messages API takes it.
fn weather_tool_json() -> Value {
    json!({
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
        },
    })
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
        dialect: Dialect::Anthropic,
        hosted: false,
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
async fn collect(model: &Anthropic, request: &ChatRequest) -> Vec<Result<ModelEvent, ModelError>> {
    let mut stream = model.stream(request);
    let mut items = Vec::new();
    while let Some(item) = next_event(&mut stream).await {
        items.push(item);
    }
    items
}

/// The stream through the assembler, as the agent loop reads it.
async fn assemble(model: &Anthropic, request: &ChatRequest) -> Result<AssembledTurn, ModelError> {
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

#[tokio::test]
async fn text_only() -> TestResult {
    let server = MockAnthropicServer::start([AnthropicTurn::new()
        .text_chunks(&["Hello", ", world", "!"])
        .usage(12, 7)
        .into_response()])
    .await?;
    let turn = assemble(&model_for(&server), &ask("hi")).await?;
    assert_eq!(turn.text, "Hello, world!");
    assert!(turn.tool_calls.is_empty());
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(turn.usage, Some(Usage::new(12, 7)));
    Ok(())
}

#[tokio::test]
async fn one_tool_use() -> TestResult {
    let server = MockAnthropicServer::start([AnthropicTurn::new()
        .tool_use(
            "toolu_01A09q90qw90lq917835lq9",
            "get_weather",
            &["{\"city\"", ": \"Par", "is\"}"],
        )
        .into_response()])
    .await?;
    let turn = assemble(&model_for(&server), &ask("weather in Paris?")).await?;
    assert_eq!(turn.text, "");
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.tool_calls.len(), 1);
    let call = &turn.tool_calls[0];
    assert_eq!(call.id, "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(call.name, "get_weather");
    assert_eq!(call.arguments, "{\"city\": \"Paris\"}");
    assert_eq!(call.status, CallStatus::Complete);
    Ok(())
}

#[tokio::test]
async fn two_parallel_tool_uses_after_text() -> TestResult {
    let server = MockAnthropicServer::start([AnthropicTurn::new()
        .text_chunks(&["Let me check ", "both."])
        .tool_use("toolu_a", "get_weather", &["{\"city\":", "\"Paris\"}"])
        .tool_use("toolu_b", "get_weather", &["{\"city\":\"Oslo\"}"])
        .into_response()])
    .await?;
    let turn = assemble(&model_for(&server), &ask("Paris and Oslo?")).await?;
    assert_eq!(turn.text, "Let me check both.");
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    let calls: Vec<(&str, &str, &str, CallStatus)> = turn
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.name.as_str(),
                c.arguments.as_str(),
                c.status,
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            (
                "toolu_a",
                "get_weather",
                "{\"city\":\"Paris\"}",
                CallStatus::Complete
            ),
            (
                "toolu_b",
                "get_weather",
                "{\"city\":\"Oslo\"}",
                CallStatus::Complete
            ),
        ]
    );
    Ok(())
}

/// Arguments whose `partial_json` pieces split the model's own escapes
/// (`\"`, `\u20ac`, a surrogate pair), and a body whose bytes are then cut
/// inside the wire escapes and inside multi-byte characters.
fn tricky_turn() -> AnthropicTurn {
    AnthropicTurn::new()
        .text_chunks(&["Pr\u{e9}cis: 5 \u{20ac} ", "\u{1f600}"])
        .tool_use(
            "toolu_esc",
            "echo",
            &[
                "{\"text\": \"say \\\"h",
                "i\\\" \u{20ac} \u{1f600} \\u20",
                "ac \\ud83d",
                "\\ude00 \\\\ end\"}",
            ],
        )
}

const TRICKY_ARGUMENTS: &str =
    "{\"text\": \"say \\\"hi\\\" \u{20ac} \u{1f600} \\u20ac \\ud83d\\ude00 \\\\ end\"}";

fn assert_tricky(turn: &AssembledTurn) -> TestResult {
    assert_eq!(turn.text, "Pr\u{e9}cis: 5 \u{20ac} \u{1f600}");
    assert_eq!(turn.tool_calls.len(), 1);
    let call = &turn.tool_calls[0];
    assert_eq!(call.arguments, TRICKY_ARGUMENTS);
    assert_eq!(call.status, CallStatus::Complete);
    let parsed: Value = serde_json::from_str(&call.arguments)?;
    assert_eq!(
        parsed["text"],
        "say \"hi\" \u{20ac} \u{1f600} \u{20ac} \u{1f600} \\ end"
    );
    Ok(())
}

#[tokio::test]
async fn partial_json_split_mid_escape_and_mid_utf8() -> TestResult {
    let body = tricky_turn().body();
    let bytes = body.as_bytes();
    // Cut inside every multi-byte character (after its first byte and, for
    // the longer ones, in the middle) and inside every wire escape `\\\"`.
    let mut cuts = Vec::new();
    for (offset, character) in body.char_indices() {
        let width = character.len_utf8();
        if width > 1 {
            cuts.push(offset + 1);
            cuts.push(offset + width - 1);
        }
    }
    let mut search = 0;
    while let Some(found) = body[search..].find("\\\\\\\"") {
        let at = search + found;
        cuts.extend([at + 1, at + 2, at + 3]);
        search = at + 4;
    }
    cuts.sort_unstable();
    cuts.dedup();
    assert!(
        cuts.len() > 10,
        "the body has the characters to cut: {cuts:?}"
    );
    assert!(cuts.iter().all(|&cut| cut < bytes.len()));

    let server = MockAnthropicServer::start([
        tricky_turn().into_response_cut_at(&cuts),
        tricky_turn().into_response_in_chunks(1),
        tricky_turn().into_response_in_chunks(7),
    ])
    .await?;
    let model = model_for(&server);
    for _ in 0..3 {
        let turn = assemble(&model, &ask("echo")).await?;
        assert_tricky(&turn)?;
    }
    Ok(())
}

#[tokio::test]
async fn max_tokens_with_an_open_tool_use_is_truncated() -> TestResult {
    let server = MockAnthropicServer::start([AnthropicTurn::new()
        .text("Writing both files.")
        .tool_use(
            "toolu_1",
            "write_file",
            &["{\"path\":\"a.txt\",\"content\":\"a\"}"],
        )
        .tool_use(
            "toolu_2",
            "write_file",
            &["{\"path\":\"b.txt\",", "\"content\":\"long text tha"],
        )
        .stop("max_tokens")
        .into_response()])
    .await?;
    let turn = assemble(&model_for(&server), &ask("write")).await?;
    assert_eq!(turn.finish_reason, FinishReason::Length);
    assert_eq!(turn.tool_calls.len(), 2);
    assert_eq!(turn.tool_calls[0].status, CallStatus::Complete);
    assert_eq!(turn.tool_calls[1].status, CallStatus::Truncated);
    assert_eq!(
        turn.tool_calls[1].arguments,
        "{\"path\":\"b.txt\",\"content\":\"long text tha"
    );
    Ok(())
}

#[tokio::test]
async fn stop_reasons_map_to_finish_reasons() -> TestResult {
    let cases = [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ];
    let server = MockAnthropicServer::start(
        cases
            .iter()
            .map(|(reason, _)| AnthropicTurn::new().text("x").stop(reason).into_response()),
    )
    .await?;
    let model = model_for(&server);
    for (reason, expected) in cases {
        let turn = assemble(&model, &ask("x")).await?;
        assert_eq!(turn.finish_reason, expected, "stop_reason {reason}");
    }
    Ok(())
}

#[tokio::test]
async fn malformed_json_data_is_a_protocol_error() -> TestResult {
    let frames = AnthropicTurn::new().text("Hello").frames();
    let server = MockAnthropicServer::start([ScriptedResponse::sse([
        frames[0].clone(),
        frame(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","te"#,
        ),
        frames[frames.len() - 2].clone(),
        frames[frames.len() - 1].clone(),
    ])])
    .await?;
    let items = collect(&model_for(&server), &ask("hi")).await;
    let error = assert_failed_without_finish(&items);
    assert!(matches!(error, ModelError::Protocol(_)), "{error:?}");
    Ok(())
}

#[tokio::test]
async fn an_overloaded_error_event_fails_the_stream() -> TestResult {
    let frames = AnthropicTurn::new().text("Hello").frames();
    // message_start, content_block_start, ping, one text delta, then the error.
    let mut body: Vec<String> = frames[..4].to_vec();
    body.push(error_frame("overloaded_error", "Overloaded"));
    body.extend(frames[4..].iter().cloned());
    let server = MockAnthropicServer::start([ScriptedResponse::sse(body)]).await?;
    let items = collect(&model_for(&server), &ask("hi")).await;
    assert_eq!(items[0], Ok(ModelEvent::TextDelta("Hello".into())));
    let error = assert_failed_without_finish(&items);
    assert_eq!(
        error,
        ModelError::Protocol("overloaded_error: Overloaded".into())
    );
    assert_eq!(items.len(), 2, "nothing is read after the error: {items:?}");
    Ok(())
}

#[tokio::test]
async fn overloaded_and_rate_limited_statuses_are_retried() -> TestResult {
    let server = MockAnthropicServer::start([
        error_response(529, "overloaded_error", "Overloaded"),
        error_response(429, "rate_limit_error", "Slow down").with_header("retry-after", "0"),
        AnthropicTurn::new().text("Finally.").into_response(),
    ])
    .await?;
    let turn = assemble(&model_for(&server), &ask("hi")).await?;
    assert_eq!(turn.text, "Finally.");
    assert_eq!(server.requests().len(), 3);
    Ok(())
}

#[tokio::test]
async fn a_bad_request_is_not_retried() -> TestResult {
    let server = MockAnthropicServer::start([
        error_response(400, "invalid_request_error", "messages: field required"),
        AnthropicTurn::new().text("never sent").into_response(),
    ])
    .await?;
    let items = collect(&model_for(&server), &ask("hi")).await;
    let error = assert_failed_without_finish(&items);
    match error {
        ModelError::Http { status, body } => {
            assert_eq!(status, 400);
            assert!(body.contains("messages: field required"), "{body}");
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert_eq!(items.len(), 1);
    assert_eq!(server.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_connection_closed_early_is_an_error_never_a_finish() -> TestResult {
    let frames = AnthropicTurn::new()
        .text("Let me")
        .tool_use("toolu_1", "get_weather", &["{\"city\":\"Pa"])
        .frames();
    // Everything up to and including message_delta: only message_stop missing.
    let without_stop = frames[..frames.len() - 1].to_vec();
    // The pause lets the status line out before the connection breaks;
    // without it the break can come first, and a failure before the first
    // byte is (rightly) retried.
    let pause = Duration::from_millis(5);
    let server = MockAnthropicServer::start([
        ScriptedResponse::sse(frames[..8].to_vec())
            .with_chunk_delay(pause)
            .closing_early(),
        ScriptedResponse::sse(without_stop.clone())
            .with_chunk_delay(pause)
            .closing_early(),
        ScriptedResponse::sse(without_stop),
    ])
    .await?;
    let model = model_for(&server);

    let broken = collect(&model, &ask("hi")).await;
    assert!(matches!(
        assert_failed_without_finish(&broken),
        ModelError::Transport(_)
    ));
    assert!(
        broken
            .iter()
            .any(|item| matches!(item, Ok(ModelEvent::ToolCallDelta(_)))),
        "the stream broke after the first byte: {broken:?}"
    );
    let broken_late = collect(&model, &ask("hi")).await;
    assert!(matches!(
        assert_failed_without_finish(&broken_late),
        ModelError::Transport(_)
    ));
    let ended = collect(&model, &ask("hi")).await;
    assert_eq!(assert_failed_without_finish(&ended), ModelError::Incomplete);
    assert_eq!(server.requests().len(), 3, "a broken stream is not retried");
    Ok(())
}

#[tokio::test]
async fn pings_unknown_events_and_trailing_bytes_are_ignored_and_thinking_is_kept() -> TestResult {
    let mut frames = vec![AnthropicTurn::new().frames()[0].clone(), ping_frame()];
    frames.push(frame(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
    ));
    frames.push(frame(
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
    ));
    frames.push(frame(
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#,
    ));
    frames.push(frame(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ));
    frames.push(frame("future_event", r#"{"type":"future_event","x":1}"#));
    // A tool without parameters: no input_json_delta at all.
    frames.push(frame(
        "content_block_start",
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_now","name":"get_current_time","input":{}}}"#,
    ));
    frames.push(ping_frame());
    frames.push(frame(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":1}"#,
    ));
    // An event without its `event:` line still says what it is in `type`.
    frames.push(
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n"
            .to_owned(),
    );
    frames.push(frame("message_stop", r#"{"type":"message_stop"}"#));
    frames.push("event: garbage\ndata: {not json\n\n".to_owned());
    let server = MockAnthropicServer::start([ScriptedResponse::sse(frames)]).await?;
    let turn = assemble(&model_for(&server), &ask("time?")).await?;
    assert_eq!(turn.text, "");
    assert_eq!(
        turn.thinking,
        vec![ThinkingBlock::Thinking {
            thinking: "hmm".into(),
            signature: "abc".into(),
        }]
    );
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].id, "toolu_now");
    assert_eq!(turn.tool_calls[0].name, "get_current_time");
    assert_eq!(turn.tool_calls[0].arguments, "{}");
    assert_eq!(turn.tool_calls[0].status, CallStatus::Complete);
    assert_eq!(turn.usage, Some(Usage::new(25, 9)));
    Ok(())
}

#[tokio::test]
async fn request_shape() -> TestResult {
    let server =
        MockAnthropicServer::start([AnthropicTurn::new().text("Done.").into_response()]).await?;
    let model = model_for(&server).with_max_tokens(1000);
    let mut chat = request(
        vec![
            Message::system("You are terse."),
            Message::user("Weather in Paris and Oslo, and write a note?"),
            Message::system("Use metric units."),
            Message::Assistant {
                runnable: None,
                content: "Checking.".into(),
                tool_calls: vec![
                    AssistantToolCall {
                        id: "toolu_a".into(),
                        name: "get_weather".into(),
                        arguments: "{\"city\":\"Paris\"}".into(),
                    },
                    AssistantToolCall {
                        id: "toolu_b".into(),
                        name: "write_note".into(),
                        // Truncated at the token limit: replayed as {}.
                        arguments: "{\"text\":\"unfinish".into(),
                    },
                ],
                thinking: Vec::new(),
                server_blocks: Vec::new(),
            },
            Message::Tool {
                tool_call_id: "toolu_a".into(),
                name: "get_weather".into(),
                content: "{\"ok\":true,\"result\":{\"celsius\":21}}".into(),
                is_error: false,
                attachments: Vec::new(),
            },
            Message::Tool {
                tool_call_id: "toolu_b".into(),
                name: "write_note".into(),
                content: "{\"ok\":false,\"error\":{\"code\":\"truncated\"}}".into(),
                is_error: true,
                attachments: Vec::new(),
            },
            Message::user("Also Oslo, please."),
            // Nothing to send: skipped rather than sent empty.
            Message::Assistant {
                runnable: None,
                content: String::new(),
                tool_calls: vec![],
                thinking: Vec::new(),
                server_blocks: Vec::new(),
            },
            Message::Assistant {
                runnable: None,
                content: String::new(),
                tool_calls: vec![AssistantToolCall {
                    id: "toolu_c".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Oslo\"}".into(),
                }],
                thinking: Vec::new(),
                server_blocks: Vec::new(),
            },
            Message::Tool {
                tool_call_id: "toolu_c".into(),
                name: "get_weather".into(),
                content: "{\"ok\":true,\"result\":{\"celsius\":9}}".into(),
                is_error: false,
                attachments: Vec::new(),
            },
        ],
        vec![weather_tool()],
    );
    chat.temperature = Some(0.2);
    assemble(&model, &chat).await?;

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let recorded = &requests[0];
    assert_eq!(recorded.method, "POST");
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("sk-ant-test-key"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        recorded.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "stream": true,
            "system": "You are terse.\n\nUse metric units.",
            "temperature": 0.2,
            "tools": [weather_tool_json()],
            "tool_choice": { "type": "auto" },
            "messages": [
                {
                    "role": "user",
                    "content": [
                        { "type": "text", "text": "Weather in Paris and Oslo, and write a note?" },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        { "type": "text", "text": "Checking." },
                        {
                            "type": "tool_use",
                            "id": "toolu_a",
                            "name": "get_weather",
                            "input": { "city": "Paris" },
                        },
                        { "type": "tool_use", "id": "toolu_b", "name": "write_note", "input": {} },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_a",
                            "content": "{\"ok\":true,\"result\":{\"celsius\":21}}",
                            "is_error": false,
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_b",
                            "content": "{\"ok\":false,\"error\":{\"code\":\"truncated\"}}",
                            "is_error": true,
                        },
                        { "type": "text", "text": "Also Oslo, please." },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_c",
                            "name": "get_weather",
                            "input": { "city": "Oslo" },
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_c",
                            "content": "{\"ok\":true,\"result\":{\"celsius\":9}}",
                            "is_error": false,
                        },
                    ],
                },
            ],
        })
    );
    Ok(())
}

#[tokio::test]
async fn tool_choice_mapping_and_tool_free_requests() -> TestResult {
    let cases: Vec<(ToolChoice, bool, Value)> = vec![
        (ToolChoice::Auto, true, json!({ "type": "auto" })),
        (
            ToolChoice::Auto,
            false,
            json!({ "type": "auto", "disable_parallel_tool_use": true }),
        ),
        (ToolChoice::Required, true, json!({ "type": "any" })),
        (
            ToolChoice::Required,
            false,
            json!({ "type": "any", "disable_parallel_tool_use": true }),
        ),
        (ToolChoice::None, false, json!({ "type": "none" })),
        (
            ToolChoice::Tool("get_weather".into()),
            true,
            json!({ "type": "tool", "name": "get_weather" }),
        ),
        (
            ToolChoice::Tool("get_weather".into()),
            false,
            json!({ "type": "tool", "name": "get_weather", "disable_parallel_tool_use": true }),
        ),
    ];
    let server = MockAnthropicServer::start(
        (0..=cases.len()).map(|_| AnthropicTurn::new().text("ok").into_response()),
    )
    .await?;
    let model = model_for(&server);
    for (choice, parallel, _) in &cases {
        let mut chat = ask("hi");
        chat.tool_choice = choice.clone();
        chat.parallel_tool_calls = *parallel;
        assemble(&model, &chat).await?;
    }
    // No tools: neither `tools` nor `tool_choice`; no system either.
    let mut bare = request(vec![Message::user("hi")], vec![]);
    bare.tool_choice = ToolChoice::Required;
    bare.parallel_tool_calls = false;
    bare.max_tokens = Some(64);
    assemble(&model, &bare).await?;

    let requests = server.requests();
    assert_eq!(requests.len(), cases.len() + 1);
    for ((choice, parallel, expected), recorded) in cases.iter().zip(&requests) {
        assert_eq!(
            recorded.body["tool_choice"], *expected,
            "{choice:?} parallel={parallel}"
        );
        assert_eq!(recorded.body["max_tokens"], 4096);
    }
    let bare_body = requests[cases.len()]
        .body
        .as_object()
        .ok_or("the body is an object")?;
    for key in ["tools", "tool_choice", "system", "temperature"] {
        assert!(!bare_body.contains_key(key), "unexpected `{key}`");
    }
    assert_eq!(bare_body["max_tokens"], 64);
    Ok(())
}

#[test]
fn debug_hides_the_key() {
    let model = Anthropic::new("claude-sonnet-4-5", "sk-ant-very-secret");
    let printed = format!("{model:?}");
    assert!(printed.contains("api_key: \"[redacted]\""), "{printed}");
    assert!(!printed.contains("sk-ant-very-secret"), "{printed}");
    assert_eq!(model.dialect(), Dialect::Anthropic);
}

#[test]
fn from_env_needs_a_key() {
    let missing = Anthropic::from_vars(|_| None);
    assert!(matches!(missing, Err(ModelError::Config(_))), "{missing:?}");
    let empty = Anthropic::from_vars(|name| (name == "ANTHROPIC_API_KEY").then(String::new));
    assert!(matches!(empty, Err(ModelError::Config(_))), "{empty:?}");

    // The process environment itself: only checked when the key is absent,
    // since changing the environment would race with other tests' reads.
    if std::env::var_os("ANTHROPIC_API_KEY").is_none() {
        let missing = Anthropic::from_env();
        assert!(matches!(missing, Err(ModelError::Config(_))), "{missing:?}");
    }
}

#[test]
fn from_env_defaults_and_overrides() -> Result<(), ModelError> {
    let defaults =
        Anthropic::from_vars(|name| (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned()))?;
    assert_eq!(defaults.model(), "claude-sonnet-4-5");
    assert_eq!(defaults.endpoint(), "https://api.anthropic.com/v1/messages");

    let custom = Anthropic::from_vars(|name| {
        match name {
            "ANTHROPIC_API_KEY" => Some("k"),
            "ANTHROPIC_BASE_URL" => Some("http://localhost:8080/"),
            "ANTHROPIC_MODEL" => Some("claude-haiku-4-5"),
            _ => None,
        }
        .map(str::to_owned)
    })?;
    assert_eq!(custom.model(), "claude-haiku-4-5");
    assert_eq!(custom.endpoint(), "http://localhost:8080/v1/messages");
    Ok(())
}

#[tokio::test]
async fn a_bad_base_url_is_a_config_error() {
    let model = Anthropic::new("claude-sonnet-4-5", "k").with_base_url("not a url");
    let items = collect(&model, &ask("hi")).await;
    assert!(
        matches!(items.as_slice(), [Err(ModelError::Config(_))]),
        "{items:?}"
    );
}

/// Arguments of `get_weather`.
#[derive(Debug, aptix::prelude::Deserialize, aptix::prelude::JsonSchema)]
pub struct WeatherArgs {
    /// The city.
    pub city: String,
}

/// The weather in a city.
#[aptix::prelude::agent_tool(
    name = "get_weather",
    usage = "Call when the user asks about the weather."
)]
async fn get_weather(args: WeatherArgs) -> Result<String, aptix::prelude::ToolError> {
    Ok(format!("Sunny in {}", args.city))
}

fn thinking_agent(
    server: &MockAnthropicServer,
) -> Result<aptix::Agent, Box<dyn std::error::Error>> {
    Ok(aptix::Agent::builder()
        .model(model_for(server))
        .catalog(aptix::tools![GetWeatherTool].build()?)
        .max_iterations(4)
        .build()?)
}

/// Signatures are base64: `+`, `/` and `=` must come back as they were.
const SIGNATURE: &str = "EqQBCkgIARABGAIiQL+/yXp9=";
const REDACTED: &str = "EmwKAhgBEgy3va3pZ+/Qq7W4ksJ==";

/// The thinking pieces, with an escape and a character outside ASCII, so
/// that anything but the joined text sent back as it came shows.
const THINKING: [&str; 3] = [
    "The user wants ",
    "the \"weather\" in Paris",
    " — ask the tool.",
];

fn thinking_blocks() -> Vec<Value> {
    vec![
        json!({ "type": "thinking", "thinking": THINKING.concat(), "signature": SIGNATURE }),
        json!({ "type": "redacted_thinking", "data": REDACTED }),
    ]
}

#[tokio::test]
async fn thinking_blocks_go_back_unchanged_before_the_tool_use() -> TestResult {
    let server = MockAnthropicServer::start([
        AnthropicTurn::new()
            .thinking(&THINKING, SIGNATURE)
            .redacted_thinking(REDACTED)
            .text("Checking.")
            .tool_use("toolu_w", "get_weather", &["{\"city\":", "\"Paris\"}"])
            .into_response(),
        AnthropicTurn::new().text("Sunny.").into_response(),
    ])
    .await?;
    let agent = thinking_agent(&server)?;
    let mut conversation = aptix::Conversation::new("thinking-tools");
    let events: Vec<aptix::AgentEvent> = futures_util::StreamExt::collect(agent.run(
        &mut conversation,
        aptix::Input::User("Weather in Paris?".into()),
    ))
    .await;
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
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let mut expected = thinking_blocks();
    expected.push(json!({ "type": "text", "text": "Checking." }));
    expected.push(json!({
        "type": "tool_use",
        "id": "toolu_w",
        "name": "get_weather",
        "input": { "city": "Paris" },
    }));
    assert_eq!(
        requests[1].body["messages"][1],
        json!({ "role": "assistant", "content": expected })
    );
    assert_eq!(
        requests[1].body["messages"][2]["content"][0]["tool_use_id"],
        "toolu_w"
    );
    Ok(())
}

#[tokio::test]
async fn thinking_in_a_turn_without_tools_is_kept() -> TestResult {
    let server = MockAnthropicServer::start([
        AnthropicTurn::new()
            .thinking(&THINKING, SIGNATURE)
            .redacted_thinking(REDACTED)
            .text("Hello.")
            .into_response(),
        AnthropicTurn::new().text("Again.").into_response(),
    ])
    .await?;
    let agent = thinking_agent(&server)?;
    let mut conversation = aptix::Conversation::new("thinking-text");
    for input in ["Hi", "Once more"] {
        let _: Vec<aptix::AgentEvent> = futures_util::StreamExt::collect(
            agent.run(&mut conversation, aptix::Input::User(input.into())),
        )
        .await;
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let mut expected = thinking_blocks();
    expected.push(json!({ "type": "text", "text": "Hello." }));
    assert_eq!(
        requests[1].body["messages"][1],
        json!({ "role": "assistant", "content": expected })
    );
    Ok(())
}

/// Thinking turned on by the adapter (`with_thinking`): every request asks
/// for it (a fixed budget with the interleaved-thinking beta and
/// `max_tokens` raised above the budget; adaptive with its effort and no
/// beta), a forced tool choice and a temperature, which Anthropic refuses
/// with thinking, are left as `auto` and out; and the thinking the model
/// wrote before its call goes back before the tool's result, as the
/// keep-and-resend path promised.
#[tokio::test]
async fn thinking_turned_on_is_asked_for_and_its_blocks_go_back() -> TestResult {
    use aptix_core::model::anthropic::{Effort, INTERLEAVED_THINKING_BETA, Thinking};
    for (thinking, expected, beta) in [
        (
            Thinking::Budget(8000),
            json!({ "type": "enabled", "budget_tokens": 8000 }),
            Some(INTERLEAVED_THINKING_BETA),
        ),
        (
            Thinking::Adaptive {
                effort: Some(Effort::Medium),
            },
            json!({ "type": "adaptive" }),
            None,
        ),
    ] {
        let server = MockAnthropicServer::start([
            AnthropicTurn::new()
                .thinking(&THINKING, SIGNATURE)
                .tool_use("toolu_w", "get_weather", &["{\"city\":\"Paris\"}"])
                .into_response(),
            AnthropicTurn::new().text("Sunny.").into_response(),
        ])
        .await?;
        let agent = aptix::Agent::builder()
            .model(model_for(&server).with_thinking(thinking))
            .catalog(aptix::tools![GetWeatherTool].build()?)
            .tool_choice(aptix::model::ToolChoice::Required)
            .temperature(0.3)
            .max_iterations(4)
            .build()?;
        let mut conversation = aptix::Conversation::new("thinking-on");
        let events: Vec<aptix::AgentEvent> = futures_util::StreamExt::collect(agent.run(
            &mut conversation,
            aptix::Input::User("Weather in Paris?".into()),
        ))
        .await;
        assert!(
            matches!(events.last(), Some(aptix::AgentEvent::Done { .. })),
            "{events:?}"
        );
        let requests = server.requests();
        assert!(requests.len() >= 2, "{events:?}");
        for request in &requests {
            assert_eq!(request.body["thinking"], expected, "{thinking:?}");
            assert_eq!(request.header("anthropic-beta"), beta, "{thinking:?}");
            assert_eq!(request.body["tool_choice"]["type"], "auto");
            assert_eq!(request.body.get("temperature"), None);
        }
        match thinking {
            Thinking::Budget(budget) => {
                assert!(requests[0].body["max_tokens"].as_u64() > Some(u64::from(budget)));
                assert_eq!(requests[0].body.get("output_config"), None);
            }
            _ => assert_eq!(
                requests[0].body["output_config"],
                json!({ "effort": "medium" })
            ),
        }
        assert_eq!(
            requests[1].body["messages"][1]["content"][0],
            json!({ "type": "thinking", "thinking": THINKING.concat(), "signature": SIGNATURE }),
        );
    }
    Ok(())
}

use crate::WebSearch;

/// An agent with the provider's `web_search` and the weather tool builds
/// on Anthropic and runs: the request offers the search in its server-tool
/// form (never as a custom tool, bytes asserted), the search is shown as a
/// call and a result of `web_search`, and its blocks go back with the turn,
/// before the call they led to. With strict tools and prompt caching on,
/// the custom tool is strict, the breakpoints are where the guide says,
/// and the cache's tokens reach the run's usage.
#[tokio::test]
async fn a_provider_web_search_builds_runs_and_its_blocks_go_back() -> TestResult {
    let server = MockAnthropicServer::start([
        AnthropicTurn::new()
            .server_tool_use(
                "srvtoolu_1",
                "web_search",
                &["{\"query\":", "\"Paris weather\"}"],
            )
            .web_search_result("srvtoolu_1", &[("https://example.com/paris", "Paris")])
            .text("Let me check the tool too.")
            .tool_use("toolu_w", "get_weather", &["{\"city\":\"Paris\"}"])
            .cache_usage(0, 1200)
            .into_response(),
        AnthropicTurn::new()
            .text("Sunny.")
            .cache_usage(1200, 40)
            .into_response(),
    ])
    .await?;
    let model = model_for(&server).with_strict(true).with_prompt_cache(true);
    assert!(model.hosts_tool("web_search"));
    let agent = aptix::Agent::builder()
        .model(model)
        .catalog(aptix::tools![GetWeatherTool, WebSearch].build()?)
        .max_iterations(4)
        .build()?;
    let mut conversation = aptix::Conversation::new("hosted");
    conversation.messages.push(Message::system("Be brief."));
    let events: Vec<aptix::AgentEvent> = futures_util::StreamExt::collect(agent.run(
        &mut conversation,
        aptix::Input::User("Weather in Paris?".into()),
    ))
    .await;
    match events.last() {
        Some(aptix::AgentEvent::Done { reason, usage, .. }) => {
            assert!(matches!(reason, aptix::DoneReason::Completed), "{events:?}");
            assert_eq!(usage.cache_write_tokens, 1240);
            assert_eq!(usage.cache_read_tokens, 1200);
        }
        other => panic!("{other:?}"),
    }
    let started = events.iter().find_map(|event| match event {
        aptix::AgentEvent::ToolCallStart {
            id,
            name,
            arguments,
            ..
        } if name == "web_search" => Some((id.clone(), arguments.clone())),
        _ => None,
    });
    assert_eq!(
        started,
        Some(("srvtoolu_1".to_owned(), json!({ "query": "Paris weather" })))
    );
    let finished = events.iter().find_map(|event| match event {
        aptix::AgentEvent::ToolCallResult {
            id, name, envelope, ..
        } if name == "web_search" => Some((id.clone(), envelope.clone())),
        _ => None,
    });
    let Some((id, envelope)) = finished else {
        panic!("no web_search result in {events:?}");
    };
    assert_eq!(id, "srvtoolu_1");
    assert_eq!(envelope["ok"], true);
    assert_eq!(envelope["result"][0]["url"], "https://example.com/paris");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        // The hosted form, last of the tools with the breakpoint; the
        // custom tool strict; no custom tool named web_search.
        // serde_json writes members in key order.
        assert!(
            request.raw_body.contains(
                r#"{"cache_control":{"type":"ephemeral"},"name":"web_search","type":"web_search_20250305"}]"#
            ),
            "{}",
            request.raw_body
        );
        assert!(
            request
                .raw_body
                .contains(r#""name":"get_weather","strict":true}"#),
            "{}",
            request.raw_body
        );
        let tools = request.body["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(tools.len(), 2, "{tools:?}");
        let custom: Vec<&Value> = tools
            .iter()
            .filter(|tool| tool.get("input_schema").is_some())
            .collect();
        assert_eq!(custom.len(), 1);
        assert_eq!(custom[0]["name"], "get_weather");
        assert_eq!(custom[0]["strict"], true);
        assert_eq!(tools[1]["cache_control"], json!({ "type": "ephemeral" }));
        assert_eq!(
            request.body["system"],
            json!([{ "type": "text", "text": "Be brief.", "cache_control": { "type": "ephemeral" } }])
        );
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let last_block = messages
            .last()
            .and_then(|message| message["content"].as_array())
            .and_then(|blocks| blocks.last())
            .cloned()
            .unwrap_or_default();
        assert_eq!(last_block["cache_control"], json!({ "type": "ephemeral" }));
    }
    let content = &requests[1].body["messages"][1]["content"];
    assert_eq!(
        content[0],
        json!({
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": { "query": "Paris weather" },
        })
    );
    assert_eq!(content[1]["type"], "web_search_tool_result");
    assert_eq!(content[1]["tool_use_id"], "srvtoolu_1");
    assert_eq!(
        content[1]["content"][0]["encrypted_content"],
        "EqgfCioIARgBIiQ3YTAw"
    );
    assert_eq!(
        content[2],
        json!({ "type": "text", "text": "Let me check the tool too." })
    );
    assert_eq!(content[3]["type"], "tool_use");
    Ok(())
}

/// A transcript moved from other providers: only Anthropic's own thinking
/// goes back, whatever else the assistant turn holds.
#[tokio::test]
async fn other_providers_reasoning_is_never_sent() -> TestResult {
    let server =
        MockAnthropicServer::start([AnthropicTurn::new().text("Fine.").into_response()]).await?;
    let model = model_for(&server);
    let assistant = Message::Assistant {
        content: "Earlier.".into(),
        tool_calls: Vec::new(),
        thinking: vec![
            ThinkingBlock::Reasoning {
                text: "deepseek's".into(),
            },
            ThinkingBlock::OpenaiReasoning {
                item: json!({ "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA" }),
            },
            ThinkingBlock::Gemini {
                part: json!({ "text": "gemini's", "thought": true }),
                tool_call_id: None,
            },
            ThinkingBlock::Thinking {
                thinking: "claude's".into(),
                signature: SIGNATURE.into(),
            },
        ],
        // Other providers' blocks of a turn they ran: a Responses turn
        // record and hosted item, a Gemini code-execution part.
        server_blocks: vec![
            json!({ "type": "aptix_responses_turn", "response_id": "resp_1", "output": ["web_search_call"] }),
            json!({ "type": "web_search_call", "id": "ws_1", "status": "completed" }),
            json!({ "executableCode": { "language": "PYTHON", "code": "print(1)" } }),
        ],
        runnable: None,
    };
    let items = collect(
        &model,
        &request(
            vec![Message::user("Hi"), assistant, Message::user("And now?")],
            Vec::new(),
        ),
    )
    .await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Finish { .. }))));
    let requests = server.requests();
    assert!(
        requests[0].raw_body.contains(&format!(
            r#""content":[{{"signature":"{SIGNATURE}","thinking":"claude's","type":"thinking"}},{{"text":"Earlier.","type":"text"}}]"#
        )),
        "{}",
        requests[0].raw_body
    );
    for foreign in [
        "deepseek's",
        "rs_1",
        "gemini's",
        "resp_1",
        "ws_1",
        "executableCode",
    ] {
        assert!(!requests[0].raw_body.contains(foreign), "{foreign}");
    }
    Ok(())
}

/// The conformance suite's Anthropic wire against the real adapter: the
/// turns it scripts run, and the requests the adapter sends read back into
/// neutral form, with the reasoning token and the hosted tool's blocks
/// where the suite will look for them.
#[tokio::test]
async fn the_conformance_wire_reads_what_the_adapter_sends() -> TestResult {
    use aptix_testkit::conformance::{
        AnthropicWire, ProviderWire, WireCall, WireHosted, WireMessage, WireReasoning, WireTurn,
    };
    let wire = AnthropicWire;
    let server = MockAnthropicServer::start([
        wire.turn(&WireTurn {
            reasoning: Some(WireReasoning {
                text: vec!["Search, then ask.".into()],
                token: SIGNATURE.into(),
            }),
            hosted: Some(WireHosted {
                id: "srvtoolu_9".into(),
                input: json!({ "query": "Paris" }),
                output: json!([{ "type": "web_search_result", "url": "https://example.com", "title": "P" }]),
            }),
            text: vec!["Checking.".into()],
            calls: vec![WireCall {
                id: "toolu_9".into(),
                name: "get_weather".into(),
                arguments: vec!["{\"city\":".into(), "\"Paris\"}".into()],
            }],
            cut_at_limit: false,
            usage: (10, 5),
        }),
        wire.turn(&WireTurn {
            text: vec!["Sunny.".into()],
            usage: (20, 2),
            ..WireTurn::default()
        }),
    ])
    .await?;
    let agent = aptix::Agent::builder()
        .model(model_for(&server))
        .catalog(aptix::tools![GetWeatherTool, WebSearch].build()?)
        .max_iterations(4)
        .build()?;
    let mut conversation = aptix::Conversation::new("conformance");
    let events: Vec<aptix::AgentEvent> = futures_util::StreamExt::collect(agent.run(
        &mut conversation,
        aptix::Input::User("Weather in Paris?".into()),
    ))
    .await;
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
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = wire.read_request(&requests[0].body)?;
    assert_eq!(first.tools, ["get_weather"]);
    assert_eq!(first.hosted_tools, [wire.hosted_tool().unwrap_or_default()]);
    let second = wire.read_request(&requests[1].body)?;
    assert_eq!(second.messages.len(), 3, "{:?}", second.messages);
    assert_eq!(
        second.messages[0],
        WireMessage::User("Weather in Paris?".into())
    );
    assert_eq!(
        second.messages[1],
        WireMessage::Assistant {
            text: "Checking.".into(),
            calls: vec![(
                "toolu_9".into(),
                "get_weather".into(),
                json!({ "city": "Paris" })
            )],
            reasoning: vec![SIGNATURE.into()],
            hosted: true,
        }
    );
    assert!(matches!(
        &second.messages[2],
        WireMessage::ToolResult { id, content } if id == "toolu_9" && content.contains("Sunny in Paris")
    ));
    Ok(())
}
