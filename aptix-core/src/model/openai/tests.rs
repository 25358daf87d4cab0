//! Unit tests of the adapter's two halves: request bodies (transcript,
//! attachments, tools, options) and chunk decoding, including property tests
//! that no data line makes the decoder panic.

use serde_json::json;

use super::request::{messages_json, temperature_json};
use super::stream::ChunkDecoder;
use super::*;
use crate::content::Content;
use crate::model::{FinishReason, Message, ModelEvent, ToolCallDelta, ToolChoice, ToolSpec, Usage};
use crate::transcript::AssistantToolCall;

#[test]
fn every_kind_of_attachment_has_a_part_or_a_note_after_the_turns_tool_messages() {
    let tool = |id: &str, attachments: Vec<Content>| Message::Tool {
        tool_call_id: id.into(),
        name: "report".into(),
        content: "{}".into(),
        is_error: false,
        attachments,
    };
    let transcript = [
        Message::assistant(
            "",
            vec![
                AssistantToolCall {
                    id: "a".into(),
                    name: "report".into(),
                    arguments: "{}".into(),
                },
                AssistantToolCall {
                    id: "b".into(),
                    name: "report".into(),
                    arguments: "{}".into(),
                },
            ],
        ),
        tool(
            "a",
            vec![
                Content::text("Caption"),
                Content::text(""),
                Content::image("AAAA", "image/png"),
                Content::image("TTTT", "image/tiff"),
                Content::audio("CCCC", "audio/mpeg"),
                Content::audio("GGGG", "audio/ogg"),
            ],
        ),
        tool(
            "b",
            vec![
                Content::resource("file:///notes.txt", "text/plain", "Notes"),
                Content::resource_blob("file:///a/report.pdf", "application/pdf", "DDDD"),
                Content::resource_blob("file:///b.jpg", "image/jpeg", "EEEE"),
                Content::resource_blob("file:///c.bin", "application/octet-stream", "FFFF"),
            ],
        ),
        Message::user("Thanks."),
    ];
    let lowered = messages_json(
        &transcript,
        ReasoningEcho::default(),
        ReasoningField::default(),
    );
    let roles: Vec<&str> = lowered
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(roles, ["assistant", "tool", "tool", "user", "user"]);
    assert_eq!(lowered[1]["content"], "{}");
    assert_eq!(
        lowered[3]["content"],
        json!([
            { "type": "text", "text": "Attached by the `report` result of call a:" },
            { "type": "text", "text": "Caption" },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,AAAA" } },
            { "type": "text", "text": "[The tool attached an image (image/tiff), which this API does not accept; it was left out.]" },
            { "type": "input_audio", "input_audio": { "data": "CCCC", "format": "mp3" } },
            { "type": "text", "text": "[The tool attached an audio clip (audio/ogg), which this API does not accept; it was left out.]" },
            { "type": "text", "text": "Attached by the `report` result of call b:" },
            { "type": "text", "text": "file:///notes.txt:\nNotes" },
            { "type": "file", "file": { "filename": "report.pdf", "file_data": "data:application/pdf;base64,DDDD" } },
            { "type": "image_url", "image_url": { "url": "data:image/jpeg;base64,EEEE" } },
            { "type": "text", "text": "[The tool attached the resource file:///c.bin (application/octet-stream), which this API does not accept; it was left out.]" },
        ])
    );
    assert_eq!(lowered[4], json!({ "role": "user", "content": "Thanks." }));
}

fn decode_all(lines: &[&str]) -> Vec<Result<ModelEvent, ModelError>> {
    decode_with(false, lines)
}

/// [`decode_all`] for a request that offered tools (`tools_offered`) or not.
fn decode_with(tools_offered: bool, lines: &[&str]) -> Vec<Result<ModelEvent, ModelError>> {
    let mut decoder = ChunkDecoder::new(tools_offered);
    let mut out = Vec::new();
    for line in lines {
        let step = decoder.on_data(line);
        out.extend(step.events);
        if step.ended {
            return out;
        }
    }
    out.extend(decoder.on_end().events);
    out
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
fn text_then_finish_with_usage_at_done() {
    let events = decode_all(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::TextDelta("Hi".into())),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Some(Usage::new(3, 1)),
            }),
        ]
    );
}

#[test]
fn odd_fields_are_ignored_and_a_missing_index_is_the_position() {
    let events = decode_all(&[
        r#"{"choices":[{"delta":{"content":5,"tool_calls":[{"id":"a","function":{"name":"x","arguments":{"k":1}}},7,{"index":"z"}]}}]}"#,
        r#"{"choices":"nope","usage":[1]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}"#,
    ]);
    assert_eq!(
        events,
        vec![
            Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                index: 0,
                id: Some("a".into()),
                name: Some("x".into()),
                arguments: "{\"k\":1}".into(),
            })),
            Ok(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: None
            }),
        ]
    );
}

#[test]
fn a_legacy_function_call_beside_tool_calls_is_not_counted_twice() {
    // llama.cpp's server sends every piece in both fields.
    let events = decode_all(&[
        r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"x","arguments":"{"},"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"x","arguments":"{"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"function_call":{"name":"x","arguments":"}"},"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"x","arguments":"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    let arguments: String = events
        .iter()
        .filter_map(|event| match event {
            Ok(ModelEvent::ToolCallDelta(delta)) => Some(delta.arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(arguments, "{}");
}

#[test]
fn done_without_a_finish_reason_infers_one() {
    let events = decode_all(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x"}}]}}]}"#,
        "[DONE]",
    ]);
    assert!(matches!(
        events.last(),
        Some(Ok(ModelEvent::Finish {
            reason: FinishReason::ToolCalls,
            ..
        }))
    ));
    assert_eq!(
        decode_all(&["[DONE]"]),
        vec![Ok(ModelEvent::Finish {
            reason: FinishReason::Stop,
            usage: None
        })]
    );
}

#[test]
fn errors_end_the_stream() {
    assert!(matches!(
        decode_all(&["{not json", "[DONE]"]).as_slice(),
        [Err(ModelError::Protocol(_))]
    ));
    assert!(matches!(
        decode_all(&["[1,2]"]).as_slice(),
        [Err(ModelError::Protocol(_))]
    ));
    assert_eq!(
        decode_all(&[r#"{"error":{"message":"overloaded","type":"server_error","code":529}}"#]),
        vec![Err(ModelError::Protocol(
            "the provider reported an error: overloaded (type server_error, code 529)".into()
        ))]
    );
    assert_eq!(
        decode_all(&[r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#]),
        vec![
            Ok(ModelEvent::TextDelta("x".into())),
            Err(ModelError::Incomplete)
        ]
    );
}

#[test]
fn assistant_content_is_never_null_and_tools_are_wrapped() {
    let model = OpenAiChat::new("m");
    let body = model.request_body(&request(
        vec![
            Message::assistant(
                "",
                vec![AssistantToolCall {
                    id: "c".into(),
                    name: "x".into(),
                    arguments: "{}".into(),
                }],
            ),
            Message::assistant("done", Vec::new()),
        ],
        vec![ToolSpec {
            name: "x".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
            dialect: model.dialect(),
            hosted: false,
        }],
    ));
    assert_eq!(body["messages"][0]["content"], json!(""));
    assert_eq!(body["messages"][1].get("tool_calls"), None);
    assert_eq!(
        body["tools"][0],
        json!({"type":"function","function":{"name":"x","description":"d","parameters":{"type":"object"},"strict":true}})
    );
}

#[test]
fn thinking_blocks_are_never_sent() {
    let model = OpenAiChat::new("m");
    let body = model.request_body(&request(
        vec![
            Message::user("hi"),
            Message::Assistant {
                content: "Checking.".into(),
                server_blocks: Vec::new(),
                runnable: None,
                tool_calls: vec![AssistantToolCall {
                    id: "c".into(),
                    name: "x".into(),
                    arguments: "{}".into(),
                }],
                thinking: vec![
                    crate::transcript::ThinkingBlock::Thinking {
                        thinking: "secret reasoning".into(),
                        signature: "sig-value".into(),
                    },
                    crate::transcript::ThinkingBlock::RedactedThinking {
                        data: "redacted-data".into(),
                    },
                ],
            },
        ],
        Vec::new(),
    ));
    let text = body.to_string();
    for needle in ["thinking", "secret reasoning", "sig-value", "redacted-data"] {
        assert!(!text.contains(needle), "`{needle}` in {text}");
    }
    assert_eq!(
        body["messages"][1],
        json!({
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{
                "id": "c",
                "type": "function",
                "function": { "name": "x", "arguments": "{}" },
            }],
        })
    );
}

#[test]
fn temperature_is_sent_as_written() {
    assert_eq!(temperature_json(0.7), Some(json!(0.7)));
    assert_eq!(temperature_json(f32::NAN), None);
}

#[test]
fn base_urls_are_checked() {
    assert!(check_base_url("http://127.0.0.1:8080/v1").is_ok());
    assert!(check_base_url("ftp://example.com").is_err());
    assert!(check_base_url("localhost:8080").is_err());
    assert!(
        OpenAiChat::from_vars(|name| (name == "OPENAI_BASE_URL").then(|| "nope".to_owned()))
            .is_err()
    );
}

proptest::proptest! {
    #[test]
    fn any_data_line_decodes_without_panicking(lines in proptest::collection::vec(".{0,80}", 0..6)) {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let _ = decode_all(&lines);
    }

    #[test]
    fn any_json_chunk_decodes_without_panicking(
        content in proptest::option::of(".{0,10}"),
        index in proptest::num::i64::ANY,
        reason in proptest::option::of("[a-z_]{0,12}"),
        tokens in proptest::num::i64::ANY,
    ) {
        let chunk = json!({
            "choices": [{
                "index": 0,
                "delta": {
                    "content": content,
                    "tool_calls": [{"index": index, "id": content, "function": {"arguments": content}}]
                },
                "finish_reason": reason,
            }],
            "usage": {"prompt_tokens": tokens, "completion_tokens": -1.5},
        });
        let _ = decode_all(&[&chunk.to_string(), "[DONE]"]);
    }
}

fn reasoning(index: usize, text: &str) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::ThinkingDelta(
        crate::model::ThinkingDelta::Reasoning {
            index,
            text: text.into(),
        },
    ))
}

#[test]
fn reasoning_content_and_reasoning_deltas_are_reasoning_and_never_counted_twice() {
    let events = decode_all(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let me "}}]}"#,
        // Ollama's and OpenRouter's name.
        r#"{"choices":[{"index":0,"delta":{"reasoning":"think."}}]}"#,
        // Both names with the same text (vLLM while renaming): once.
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":" Done.","reasoning":" Done."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"","content":"Hi"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":null,"reasoning":7}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        vec![
            reasoning(0, "Let me "),
            reasoning(0, "think."),
            reasoning(0, " Done."),
            Ok(ModelEvent::TextDelta("Hi".into())),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: None,
            }),
        ]
    );
}

#[test]
fn cached_prompt_tokens_are_cache_reads() {
    for usage in [
        r#"{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":64}}"#,
        // DeepSeek's name.
        r#"{"prompt_tokens":100,"completion_tokens":5,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}"#,
    ] {
        let chunk = format!(r#"{{"choices":[],"usage":{usage}}}"#);
        let events = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            &chunk,
            "[DONE]",
        ]);
        assert_eq!(
            events,
            vec![Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Some(Usage {
                    cache_read_tokens: 64,
                    ..Usage::new(100, 5)
                }),
            })]
        );
    }
}

fn reasoned(text: &str, calls: Vec<AssistantToolCall>) -> Message {
    Message::Assistant {
        content: String::new(),
        tool_calls: calls,
        thinking: vec![
            crate::transcript::ThinkingBlock::Thinking {
                thinking: "anthropic's".into(),
                signature: "sig".into(),
            },
            crate::transcript::ThinkingBlock::Reasoning { text: text.into() },
            crate::transcript::ThinkingBlock::OpenaiReasoning {
                item: json!({ "type": "reasoning", "id": "rs_1" }),
            },
        ],
        server_blocks: Vec::new(),
        runnable: None,
    }
}

fn call(id: &str) -> AssistantToolCall {
    AssistantToolCall {
        id: id.into(),
        name: "lookup".into(),
        arguments: "{}".into(),
    }
}

fn tool_result(id: &str) -> Message {
    Message::Tool {
        tool_call_id: id.into(),
        name: "lookup".into(),
        content: "{}".into(),
        is_error: false,
        attachments: Vec::new(),
    }
}

/// Two user turns: the first answered without tools, the second with a
/// call, its result, and an answer.
fn two_user_turns() -> Vec<Message> {
    vec![
        Message::user("Hi"),
        reasoned("greet", vec![]),
        Message::user("Look it up"),
        reasoned("call it", vec![call("a")]),
        tool_result("a"),
        reasoned("answer", vec![]),
    ]
}

#[test]
fn reasoning_goes_back_on_the_assistant_messages_of_user_turns_with_tool_calls() {
    let lowered = messages_json(
        &two_user_turns(),
        ReasoningEcho::ToolTurns,
        ReasoningField::ReasoningContent,
    );
    // Only its own kind, only in the turn that called a tool: the
    // assistant message with the call and the answer after its result.
    assert_eq!(lowered[1], json!({ "role": "assistant", "content": "" }));
    assert_eq!(
        lowered[3],
        json!({
            "role": "assistant",
            "content": "",
            "tool_calls": [{ "id": "a", "type": "function", "function": { "name": "lookup", "arguments": "{}" } }],
            "reasoning_content": "call it",
        })
    );
    assert_eq!(
        lowered[5],
        json!({ "role": "assistant", "content": "", "reasoning_content": "answer" })
    );
}

#[test]
fn reasoning_echo_always_never_and_the_field_name() {
    let always = messages_json(
        &two_user_turns(),
        ReasoningEcho::Always,
        ReasoningField::Reasoning,
    );
    assert_eq!(
        always[1],
        json!({ "role": "assistant", "content": "", "reasoning": "greet" })
    );
    assert_eq!(always[3]["reasoning"], "call it");
    assert_eq!(always[3].get("reasoning_content"), None);
    let never = messages_json(
        &two_user_turns(),
        ReasoningEcho::Never,
        ReasoningField::ReasoningContent,
    );
    for message in &never {
        assert_eq!(message.get("reasoning_content"), None, "{message}");
        assert_eq!(message.get("reasoning"), None, "{message}");
    }
    // Other providers' kinds alone send nothing, whatever the echo.
    let foreign = Message::Assistant {
        content: "x".into(),
        tool_calls: vec![call("b")],
        thinking: vec![crate::transcript::ThinkingBlock::Gemini {
            part: json!({ "text": "t", "thought": true }),
            tool_call_id: None,
        }],
        server_blocks: vec![json!({ "type": "server_tool_use" })],
        runnable: None,
    };
    let lowered = messages_json(
        &[Message::user("q"), foreign, tool_result("b")],
        ReasoningEcho::Always,
        ReasoningField::ReasoningContent,
    );
    assert_eq!(lowered[1].get("reasoning_content"), None);
}

#[test]
fn from_vars_reads_native_tool_calls_and_the_reasoning_field() -> Result<(), ModelError> {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    };
    let default = OpenAiChat::from_vars(vars(&[]))?;
    assert!(default.calls_tools_natively());
    assert_eq!(default.reasoning_field, ReasoningField::ReasoningContent);
    let composed = OpenAiChat::from_vars(vars(&[
        ("OPENAI_NATIVE_TOOL_CALLS", " False "),
        ("OPENAI_REASONING_FIELD", "reasoning"),
    ]))?;
    assert!(!composed.calls_tools_natively());
    assert_eq!(composed.reasoning_field, ReasoningField::Reasoning);
    for bad in [
        &[("OPENAI_NATIVE_TOOL_CALLS", "maybe")][..],
        &[("OPENAI_REASONING_FIELD", "thoughts")][..],
    ] {
        let pairs: &'static [(&'static str, &'static str)] = bad;
        assert!(matches!(
            OpenAiChat::from_vars(vars(pairs)),
            Err(ModelError::Config(_))
        ));
    }
    Ok(())
}

#[test]
fn a_call_written_as_text_without_a_finish_after_a_tools_request_names_the_fix() {
    let text = r#"{"choices":[{"index":0,"delta":{"content":"{\"name\": \"lookup\", \"arguments\": {}}"}}]}"#;
    for ending in [&["[DONE]"][..], &[][..]] {
        let mut lines = vec![text];
        lines.extend_from_slice(ending);
        let events = decode_with(true, &lines);
        match events.last() {
            Some(Err(ModelError::Protocol(message))) => {
                assert!(
                    message.contains("cannot stream native tool calls"),
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
    }
    // Without tools offered, or with a finish_reason, or with prose, it is
    // an answer as before.
    assert!(matches!(
        decode_with(false, &[text, "[DONE]"]).last(),
        Some(Ok(ModelEvent::Finish { .. }))
    ));
    assert!(matches!(
        decode_with(
            true,
            &[
                text,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                "[DONE]"
            ]
        )
        .last(),
        Some(Ok(ModelEvent::Finish { .. }))
    ));
    assert!(matches!(
        decode_with(
            true,
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"It is sunny."}}]}"#,
                "[DONE]"
            ]
        )
        .last(),
        Some(Ok(ModelEvent::Finish { .. }))
    ));
    // Nothing at all after a request with tools: the likely cause named.
    match decode_with(true, &[]).last() {
        Some(Err(ModelError::Protocol(message))) => {
            assert!(message.contains("without a single chunk"), "{message}");
            assert!(message.contains("CallMode::Composed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        decode_with(false, &[]).last(),
        Some(&Err(ModelError::Incomplete))
    );
    for marker in [
        "<tool_call>\n{",
        "  [TOOL_CALLS][{",
        "<|python_tag|>x",
        "<function=lookup>",
    ] {
        let chunk =
            json!({ "choices": [{ "index": 0, "delta": { "content": marker } }] }).to_string();
        assert!(
            matches!(
                decode_with(true, &[&chunk, "[DONE]"]).last(),
                Some(Err(ModelError::Protocol(_)))
            ),
            "{marker}"
        );
    }
}

#[test]
fn an_error_status_about_tools_after_a_tools_request_names_the_fix() {
    for body in [
        r#"{"error":{"code":500,"message":"Cannot use tools with stream","type":"server_error"}}"#,
        "Automatic streaming tool choice is not supported",
        r#"{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools"}}"#,
        r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","code":400}"#,
        "tools not supported",
    ] {
        let error = super::stream::explain_refusal(
            ModelError::Http {
                status: 500,
                body: body.into(),
            },
            true,
        );
        match error {
            ModelError::Config(message) => {
                assert!(message.contains("500"), "{message}");
                assert!(message.contains("CallMode::Composed"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Not about tools, no tools offered, or a rate limit: as it was.
    for (status, body, offered) in [
        (500, "out of memory", true),
        // A schema the server refused is not a server without tool calls.
        (
            400,
            r#"{"error":{"message":"Invalid schema for function 'lookup': 'minLength' is not supported in strict mode.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}"#,
            true,
        ),
        (
            400,
            r#"{"error":{"message":"Invalid type for 'tools[0]'","param":"tools[0]"}}"#,
            true,
        ),
        (500, "tools not supported", false),
        (429, "too many tool requests", true),
    ] {
        let error = ModelError::Http {
            status,
            body: body.into(),
        };
        assert_eq!(
            super::stream::explain_refusal(error.clone(), offered),
            error
        );
    }
}

/// OpenAI's own endpoint has no reasoning field in messages and refuses
/// unknown ones: a transcript brought from a DeepSeek-style server sends
/// none there unless asked, and does everywhere else.
#[test]
fn openai_itself_gets_no_reasoning_unless_asked() {
    let request = request(two_user_turns(), Vec::new());
    let on_openai = OpenAiChat::new("gpt-4o-mini").request_body(&request);
    assert!(!on_openai.to_string().contains("reasoning_content"));
    let asked = OpenAiChat::new("gpt-4o-mini")
        .with_reasoning_echo(ReasoningEcho::ToolTurns)
        .request_body(&request);
    assert_eq!(asked["messages"][3]["reasoning_content"], "call it");
    let deepseek = OpenAiChat::new("deepseek-chat")
        .with_base_url("https://api.deepseek.com")
        .request_body(&request);
    assert_eq!(deepseek["messages"][3]["reasoning_content"], "call it");
    assert_eq!(deepseek["messages"][1].get("reasoning_content"), None);
}

/// Chat Completions hosts no tool: an `executor = provider` tool in a
/// request (an agent refuses to build with one; a request built by hand
/// may hold one) is left out, never offered as a function nobody runs.
#[test]
fn a_provider_tool_is_never_offered_as_a_function() {
    let spec = |name: &str, hosted: bool| ToolSpec {
        name: name.into(),
        description: "d".into(),
        parameters: json!({ "type": "object", "properties": {} }),
        dialect: crate::schema::Dialect::OpenAiCompatible,
        hosted,
    };
    let model = OpenAiChat::new("m");
    assert!(!model.hosts_tool("web_search"));
    let body = model.request_body(&request(
        vec![Message::user("q")],
        vec![spec("web_search", true), spec("lookup", false)],
    ));
    let names: Vec<&str> = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["lookup"]);
    let only_hosted = model.request_body(&request(
        vec![Message::user("q")],
        vec![spec("web_search", true)],
    ));
    assert_eq!(only_hosted.get("tools"), None);
    assert_eq!(only_hosted.get("tool_choice"), None);
}
