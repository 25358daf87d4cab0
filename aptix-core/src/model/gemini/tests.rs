//! Unit tests of the adapter's two halves: request bodies (contents,
//! signatures back in place, grouped function responses, tools, configs)
//! and chunk decoding, including hostile chunks that must never make the
//! decoder panic.

use std::collections::VecDeque;

use serde_json::{Value, json};

use super::request::{call_args, contents, function_calling_config, function_response};
use super::stream::{Decoder, HostedNames};
use super::{Gemini, Thinking, ThinkingLevel};
use crate::content::Content;
use crate::model::http::SseEvent;
use crate::model::{
    ChatModel, ChatRequest, FinishReason, HostedToolEvent, Message, ModelError, ModelEvent,
    ResponseFormat, ThinkingBlock, ThinkingDelta, ToolCallDelta, ToolChoice, ToolSpec, Usage,
};
use crate::schema::Dialect;
use crate::transcript::AssistantToolCall;

fn decode_all(chunks: &[&str]) -> Result<Vec<ModelEvent>, ModelError> {
    let mut decoder = Decoder::new(HostedNames::default());
    let mut out = VecDeque::new();
    for data in chunks {
        decoder.decode(
            &SseEvent {
                event: String::new(),
                data: (*data).to_owned(),
            },
            &mut out,
        )?;
    }
    Ok(out.into_iter().collect())
}

fn call(id: &str, name: &str, arguments: &str) -> AssistantToolCall {
    AssistantToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn tool(name: &str, hosted: bool) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
        }),
        dialect: Dialect::Gemini,
        hosted,
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

#[test]
fn a_signed_call_and_its_parallel_sibling_become_deltas_and_a_block() -> Result<(), ModelError> {
    let events = decode_all(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Thinking it over","thought": true}],"role": "model"},"index": 0}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"city": "Paris"}},"thoughtSignature": "c2ln+/="},{"functionCall": {"id": "g2","name": "get_weather","args": {"city": "Oslo"}}}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 10,"candidatesTokenCount": 4,"thoughtsTokenCount": 6,"cachedContentTokenCount": 3}}"#,
    ])?;
    assert_eq!(
        events[0],
        ModelEvent::ThinkingDelta(ThinkingDelta::Preview {
            text: "Thinking it over".into()
        })
    );
    assert_eq!(
        events[1],
        ModelEvent::ThinkingDelta(ThinkingDelta::Block {
            index: 0,
            block: ThinkingBlock::Gemini {
                part: json!({ "text": "Thinking it over", "thought": true }),
                tool_call_id: None,
            },
        })
    );
    let ModelEvent::ToolCallDelta(ToolCallDelta {
        index: 0,
        id: Some(first_id),
        name: Some(name),
        arguments,
    }) = &events[2]
    else {
        panic!("expected the first call, got {:?}", events[2]);
    };
    assert!(first_id.starts_with("call_"), "{first_id}");
    assert_eq!(name, "get_weather");
    assert_eq!(arguments, r#"{"city":"Paris"}"#);
    assert_eq!(
        events[3],
        ModelEvent::ThinkingDelta(ThinkingDelta::Block {
            index: 1,
            block: ThinkingBlock::Gemini {
                part: json!({ "thoughtSignature": "c2ln+/=" }),
                tool_call_id: Some(first_id.clone()),
            },
        })
    );
    assert_eq!(
        events[4],
        ModelEvent::ToolCallDelta(ToolCallDelta {
            index: 1,
            id: Some("g2".into()),
            name: Some("get_weather".into()),
            arguments: r#"{"city":"Oslo"}"#.into(),
        })
    );
    assert_eq!(
        events[5],
        ModelEvent::Finish {
            reason: FinishReason::ToolCalls,
            usage: Some(Usage {
                input_tokens: 10,
                output_tokens: 10,
                cache_read_tokens: 3,
                cache_write_tokens: 0,
            }),
        }
    );
    assert_eq!(events.len(), 6);
    Ok(())
}

#[test]
fn finish_reasons_map() -> Result<(), ModelError> {
    for (wire, expected) in [
        ("STOP", FinishReason::Stop),
        ("MAX_TOKENS", FinishReason::Length),
        ("SAFETY", FinishReason::ContentFilter),
        ("RECITATION", FinishReason::ContentFilter),
        ("BLOCKLIST", FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", FinishReason::ContentFilter),
        ("SPII", FinishReason::ContentFilter),
        (
            "MALFORMED_FUNCTION_CALL",
            FinishReason::Other("MALFORMED_FUNCTION_CALL".into()),
        ),
        ("OTHER", FinishReason::Other("OTHER".into())),
    ] {
        let chunk = format!(
            r#"{{"candidates": [{{"content": {{"parts": [{{"text": ""}}],"role": "model"}},"finishReason": "{wire}","index": 0}}]}}"#
        );
        let events = decode_all(&[&chunk])?;
        assert_eq!(
            events,
            vec![ModelEvent::Finish {
                reason: expected,
                usage: None
            }],
            "{wire}"
        );
    }
    Ok(())
}

#[test]
fn a_blocked_prompt_is_a_content_filter() -> Result<(), ModelError> {
    let events = decode_all(&[
        r#"{"promptFeedback": {"blockReason": "SAFETY"},"usageMetadata": {"promptTokenCount": 7,"totalTokenCount": 7}}"#,
    ])?;
    assert_eq!(
        events,
        vec![ModelEvent::Finish {
            reason: FinishReason::ContentFilter,
            usage: Some(Usage::new(7, 0)),
        }]
    );
    Ok(())
}

#[test]
fn an_error_in_the_stream_is_a_bounded_protocol_error() {
    let long = "x".repeat(100_000);
    let chunk = format!(r#"{{"error": {{"code": 500,"message": "{long}","status": "INTERNAL"}}}}"#);
    match decode_all(&[&chunk]) {
        Err(ModelError::Protocol(message)) => {
            assert!(message.starts_with("INTERNAL (500): xxx"), "{message}");
            assert!(message.len() < 2000, "{}", message.len());
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn hostile_chunks_never_panic() {
    for chunk in [
        "not json",
        "[]",
        "null",
        r#"{"candidates": 5}"#,
        r#"{"candidates": [5]}"#,
        r#"{"candidates": [{"content": {"parts": 3}}]}"#,
        r#"{"candidates": [{"content": {"parts": [7, null, {"functionCall": 4}, {"text": 9}]}}]}"#,
        r#"{"candidates": [{"content": {"parts": [{"functionCall": {"args": [1]}}]},"finishReason": 3}]}"#,
        r#"{"candidates": [{"groundingMetadata": {"webSearchQueries": "x"},"finishReason": "STOP"}]}"#,
        r#"{"usageMetadata": {"promptTokenCount": -1}}"#,
        r#"{"error": "boom"}"#,
    ] {
        // Anything goes but a panic.
        let _ = decode_all(&[chunk]);
    }
}

#[test]
fn streamed_call_arguments_are_refused_not_misread() {
    let chunk = r#"{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f","willContinue": true}}],"role": "model"},"index": 0}]}"#;
    assert!(matches!(decode_all(&[chunk]), Err(ModelError::Protocol(_))));
}

#[test]
fn code_execution_parts_are_kept_and_shown() -> Result<(), ModelError> {
    let code = json!({ "executableCode": { "language": "PYTHON", "code": "print(1+1)" } });
    let result = json!({ "codeExecutionResult": { "outcome": "OUTCOME_OK", "output": "2\n" } });
    let chunk = json!({
        "candidates": [{
            "content": { "parts": [code, result, { "text": "It is 2." }], "role": "model" },
            "finishReason": "STOP",
            "index": 0,
        }],
    })
    .to_string();
    let events = decode_all(&[&chunk])?;
    assert_eq!(events[0], ModelEvent::ServerBlock(code.clone()));
    let ModelEvent::Hosted(HostedToolEvent::Called { id, name, input }) = &events[1] else {
        panic!("{events:?}");
    };
    assert_eq!(name, "code_execution");
    assert_eq!(input, &code["executableCode"]);
    assert_eq!(events[2], ModelEvent::ServerBlock(result.clone()));
    assert_eq!(
        events[3],
        ModelEvent::Hosted(HostedToolEvent::Finished {
            id: id.clone(),
            name: "code_execution".into(),
            output: result["codeExecutionResult"].clone(),
            is_error: false,
        })
    );
    assert_eq!(events[4], ModelEvent::TextDelta("It is 2.".into()));
    assert!(matches!(
        events[5],
        ModelEvent::Finish {
            reason: FinishReason::Stop,
            ..
        }
    ));
    Ok(())
}

#[test]
fn grounding_is_shown_as_the_search_tool_at_the_end() -> Result<(), ModelError> {
    let events = decode_all(&[
        r#"{"candidates": [{"content": {"parts": [{"text": "Node 24."}],"role": "model"},"finishReason": "STOP","index": 0,"groundingMetadata": {"groundingChunks": [{"web": {"uri": "https://nodejs.org","title": "nodejs.org"}}],"webSearchQueries": ["node lts"]}}],"responseId": "r1"}"#,
    ])?;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Node 24.".into()),
            ModelEvent::Hosted(HostedToolEvent::Called {
                id: "r1_search".into(),
                name: "google_search".into(),
                input: json!({ "queries": ["node lts"] }),
            }),
            ModelEvent::Hosted(HostedToolEvent::Finished {
                id: "r1_search".into(),
                name: "google_search".into(),
                output: json!({ "sources": [{ "uri": "https://nodejs.org", "title": "nodejs.org" }] }),
                is_error: false,
            }),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None
            },
        ]
    );
    Ok(())
}

#[test]
fn signatures_go_back_where_they_came_and_foreign_reasoning_stays_out() {
    let transcript = vec![
        Message::user("Weather in Paris and Oslo?"),
        Message::Assistant {
            content: "Checking.".into(),
            tool_calls: vec![
                call("a", "get_weather", r#"{"city":"Paris"}"#),
                call("b", "get_weather", "{not json"),
            ],
            thinking: vec![
                ThinkingBlock::Thinking {
                    thinking: "Anthropic's".into(),
                    signature: "s".into(),
                },
                ThinkingBlock::Gemini {
                    part: json!({ "text": "T", "thought": true }),
                    tool_call_id: None,
                },
                ThinkingBlock::Gemini {
                    part: json!({ "thoughtSignature": "on-a" }),
                    tool_call_id: Some("a".into()),
                },
                ThinkingBlock::Gemini {
                    part: json!({ "thoughtSignature": "on-text" }),
                    tool_call_id: None,
                },
            ],
            // Another provider's blocks (a Responses turn record, an
            // Anthropic search) stay out; Gemini's own code part goes back.
            server_blocks: vec![
                json!({ "type": "aptix_responses_turn", "output": ["message"] }),
                json!({ "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {} }),
                json!({ "executableCode": { "language": "PYTHON", "code": "print(1)" } }),
            ],
            runnable: None,
        },
        Message::Tool {
            tool_call_id: "a".into(),
            name: "get_weather".into(),
            content: r#"{"ok":true,"result":"Sunny"}"#.into(),
            is_error: false,
            attachments: vec![Content::image("AAAA", "image/png")],
        },
        Message::Tool {
            tool_call_id: "b".into(),
            name: "get_weather".into(),
            content: r#"{"ok":false}"#.into(),
            is_error: true,
            attachments: vec![],
        },
        Message::user("Thanks."),
    ];
    assert_eq!(
        Value::Array(contents(&transcript)),
        json!([
            { "role": "user", "parts": [{ "text": "Weather in Paris and Oslo?" }] },
            { "role": "model", "parts": [
                { "text": "T", "thought": true },
                { "executableCode": { "language": "PYTHON", "code": "print(1)" } },
                { "text": "Checking.", "thoughtSignature": "on-text" },
                { "functionCall": { "id": "a", "name": "get_weather", "args": { "city": "Paris" } }, "thoughtSignature": "on-a" },
                { "functionCall": { "id": "b", "name": "get_weather", "args": {} } },
            ] },
            { "role": "user", "parts": [
                { "functionResponse": { "id": "a", "name": "get_weather", "response": { "output": { "ok": true, "result": "Sunny" } } } },
                { "functionResponse": { "id": "b", "name": "get_weather", "response": { "error": { "ok": false } } } },
                { "inlineData": { "mimeType": "image/png", "data": "AAAA" } },
            ] },
            { "role": "user", "parts": [{ "text": "Thanks." }] },
        ])
    );
}

#[test]
fn a_turn_with_nothing_for_gemini_is_left_out() {
    let transcript = vec![Message::Assistant {
        content: String::new(),
        tool_calls: vec![],
        thinking: vec![ThinkingBlock::Reasoning { text: "r".into() }],
        server_blocks: vec![],
        runnable: None,
    }];
    assert!(contents(&transcript).is_empty());
}

#[test]
fn small_pieces() {
    assert_eq!(call_args("[1]"), json!({}));
    assert_eq!(
        function_response("i", "t", "not json", false),
        json!({ "functionResponse": { "id": "i", "name": "t", "response": { "output": "not json" } } })
    );
    assert_eq!(
        function_calling_config(&ToolChoice::Tool("t".into())),
        json!({ "mode": "ANY", "allowedFunctionNames": ["t"] })
    );
    assert_eq!(
        function_calling_config(&ToolChoice::Required),
        json!({ "mode": "ANY" })
    );
    assert_eq!(
        function_calling_config(&ToolChoice::None),
        json!({ "mode": "NONE" })
    );
}

#[test]
fn a_whole_body() {
    let model = Gemini::new("gemini-2.5-flash", "k")
        .with_max_output_tokens(512)
        .with_thinking(Thinking::Level(ThinkingLevel::Low));
    let mut asked = request(
        vec![Message::system("Be brief."), Message::user("Hi")],
        vec![
            tool("get_weather", false),
            tool("google_search", true),
            ToolSpec {
                parameters: json!({ "type": "object", "properties": {} }),
                ..tool("now", false)
            },
        ],
    );
    asked.temperature = Some(0.2);
    assert_eq!(
        model.request_body(&asked),
        json!({
            "systemInstruction": { "parts": [{ "text": "Be brief." }] },
            "contents": [{ "role": "user", "parts": [{ "text": "Hi" }] }],
            "tools": [
                { "functionDeclarations": [
                    { "name": "get_weather", "description": "The get_weather tool.", "parameters": tool("x", false).parameters },
                    { "name": "now", "description": "The now tool." },
                ] },
                { "googleSearch": {} },
            ],
            "toolConfig": { "functionCallingConfig": { "mode": "AUTO" } },
            "generationConfig": {
                "maxOutputTokens": 512,
                "temperature": 0.2,
                "thinkingConfig": { "includeThoughts": true, "thinkingLevel": "low" },
            },
        })
    );
}

#[test]
fn structured_output_and_only_hosted_tools() {
    let model = Gemini::new("gemini-2.5-flash", "k")
        .with_thinking(Thinking::Budget(1024))
        .hosted_tool(
            "web_search",
            json!({ "googleSearch": { "timeRangeFilter": {} } }),
        );
    let mut asked = request(vec![Message::user("Hi")], vec![tool("web_search", true)]);
    asked.response_format = Some(ResponseFormat {
        name: "calls".into(),
        schema: std::sync::Arc::new(
            json!({ "type": "object", "properties": { "calls": { "type": "array" } } }),
        ),
        strict: true,
    });
    let body = model.request_body(&asked);
    assert_eq!(
        body["tools"],
        json!([{ "googleSearch": { "timeRangeFilter": {} } }])
    );
    assert_eq!(body.get("toolConfig"), None);
    assert_eq!(
        body["generationConfig"],
        json!({
            "responseMimeType": "application/json",
            "responseSchema": {
                "type": "object",
                "properties": { "calls": { "type": "array" } },
                "propertyOrdering": ["calls"],
            },
            "thinkingConfig": { "includeThoughts": true, "thinkingBudget": 1024 },
        })
    );
}

#[test]
fn hosted_tools_by_name() {
    let model = Gemini::new("m", "k").hosted_tool("maps", json!({ "googleMaps": {} }));
    for name in [
        "google_search",
        "web_search",
        "code_execution",
        "url_context",
        "maps",
    ] {
        assert!(model.hosts_tool(name), "{name}");
    }
    assert!(!model.hosts_tool("file_search"));
    assert_eq!(model.dialect(), Dialect::Gemini);
}

#[test]
fn configuration_from_variables() -> Result<(), ModelError> {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    };
    assert!(matches!(
        Gemini::from_vars(vars(&[("GEMINI_API_KEY", " ")])),
        Err(ModelError::Config(_))
    ));
    let model = Gemini::from_vars(vars(&[("GOOGLE_API_KEY", "g")]))?;
    assert_eq!(model.model(), super::DEFAULT_MODEL);
    assert_eq!(
        model.endpoint(),
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    let model = Gemini::from_vars(vars(&[
        ("GEMINI_API_KEY", "k"),
        ("GOOGLE_API_KEY", "g"),
        ("GEMINI_MODEL", "gemini-3-pro-preview"),
        ("GEMINI_BASE_URL", "http://127.0.0.1:9/v1beta/"),
    ]))?;
    assert_eq!(
        model.endpoint(),
        "http://127.0.0.1:9/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    );
    let shown = format!("{model:?}");
    assert!(!shown.contains("\"k\""), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
    Ok(())
}

/// Gemini writes a structured answer's members alphabetically unless the
/// schema says otherwise, which would put a composed call's `_output` (its
/// latent result) and `_activity` before its `_tool`: every object of the
/// response schema is sent with `propertyOrdering` in call order.
#[test]
fn a_response_schema_is_ordered_for_calls() {
    let model = Gemini::new("gemini-2.5-flash", "k");
    let mut asked = request(vec![Message::user("Hi")], vec![]);
    asked.response_format = Some(ResponseFormat {
        name: "calls".into(),
        schema: std::sync::Arc::new(json!({
            "type": "object",
            "properties": {
                "message": { "type": "string" },
                "calls": { "type": "array", "items": { "anyOf": [{
                    "type": "object",
                    "properties": {
                        "_output": { "type": "object", "properties": { "b": {}, "a": {} } },
                        "city": { "type": "string" },
                        "_tool": { "type": "string" },
                        "_activity": { "type": "string" },
                        "_reasoningForCall": { "type": "string" },
                        "properties": { "type": "object", "properties": { "z": {} } },
                    },
                }] } },
            },
            "propertyOrdering": ["message", "calls"],
        })),
        strict: false,
    });
    let body = model.request_body(&asked);
    let schema = &body["generationConfig"]["responseSchema"];
    // One already there is the caller's and stays.
    assert_eq!(schema["propertyOrdering"], json!(["message", "calls"]));
    let call = &schema["properties"]["calls"]["items"]["anyOf"][0];
    assert_eq!(
        call["propertyOrdering"],
        json!([
            "_tool",
            "_activity",
            "_reasoningForCall",
            "city",
            "properties",
            "_output"
        ])
    );
    assert_eq!(
        call["properties"]["_output"]["propertyOrdering"],
        json!(["a", "b"])
    );
    // A parameter named `properties` is a schema, not a list of them.
    assert_eq!(
        call["properties"]["properties"]["propertyOrdering"],
        json!(["z"])
    );
    assert_eq!(call["properties"].get("propertyOrdering"), None);
}

#[test]
fn a_model_path_is_kept_and_a_bad_name_refused() {
    let tuned = Gemini::new("tunedModels/my-model", "k").with_base_url("http://h/v1beta");
    assert_eq!(
        tuned.endpoint(),
        "http://h/v1beta/tunedModels/my-model:streamGenerateContent?alt=sse"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        panic!("no runtime");
    };
    for name in ["", "a b", "x?y", "../secrets", "models//x", "m#1"] {
        let model = Gemini::new(name, "k").with_base_url("http://127.0.0.1:9/v1beta");
        let result = runtime.block_on(model.connect(json!({})));
        assert!(
            matches!(result, Err(ModelError::Config(_))),
            "{name:?} was not refused"
        );
    }
}

/// Chunks that carry nothing (no candidates, empty parts, usage alone)
/// are not counted against the turn's limits by anything downstream, so
/// the decoder bounds them itself: a server that sends only those is cut
/// off rather than holding the run forever.
#[test]
fn endless_empty_chunks_are_cut_off() {
    let empty = r#"{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 1}}"#;
    let allowed = vec![empty; super::stream::MAX_EMPTY_CHUNKS];
    assert!(decode_all(&allowed).is_ok());
    let mut one_more = allowed.clone();
    one_more.push(r#"{"candidates": []}"#);
    assert!(matches!(
        decode_all(&one_more),
        Err(ModelError::Protocol(_))
    ));
    // Content in between starts the count again.
    let mut mixed = allowed.clone();
    mixed.push(r#"{"candidates": [{"content": {"parts": [{"text": "x"}]}}]}"#);
    mixed.extend(allowed);
    assert!(decode_all(&mixed).is_ok());
}
