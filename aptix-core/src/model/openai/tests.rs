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
    let lowered = messages_json(&transcript);
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
    let mut decoder = ChunkDecoder::default();
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
