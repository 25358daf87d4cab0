//! Unit tests of the adapter's two halves: request bodies (attachments,
//! tool inputs, temperature, message grouping) and event decoding, including
//! hostile events that must never make the decoder panic.

use std::collections::VecDeque;

use serde_json::json;

use super::Anthropic;
use super::request::{messages, temperature, tool_input};
use super::stream::Decoder;
use crate::content::Content;
use crate::model::http::SseEvent;
use crate::model::{
    ChatModel, ChatRequest, FinishReason, Message, ModelError, ModelEvent, ToolSpec, Usage,
};

#[test]
fn every_kind_of_attachment_has_a_block_or_a_note() {
    let tool = Message::Tool {
        tool_call_id: "toolu_1".into(),
        name: "report".into(),
        content: "{}".into(),
        is_error: false,
        attachments: vec![
            Content::text("Caption"),
            Content::text("  \n"),
            Content::image("AAAA", "image/webp"),
            Content::image("BBBB", "image/tiff"),
            Content::audio("CCCC", "audio/wav"),
            Content::resource("file:///notes.txt", "text/plain", "Notes"),
            Content::resource_blob("file:///a/report.pdf", "application/pdf", "DDDD"),
            Content::resource_blob("file:///b.jpg", "image/jpeg", "EEEE"),
            Content::resource_blob("file:///c.bin", "application/octet-stream", "FFFF"),
        ],
    };
    let lowered = messages(&[tool]);
    let content = &lowered[0]["content"][0]["content"];
    assert_eq!(
        *content,
        json!([
            { "type": "text", "text": "{}" },
            { "type": "text", "text": "Caption" },
            { "type": "image", "source": { "type": "base64", "media_type": "image/webp", "data": "AAAA" } },
            { "type": "text", "text": "[The tool attached an image (image/tiff), which Anthropic does not accept; it was left out.]" },
            { "type": "text", "text": "[The tool attached an audio clip (audio/wav), which Anthropic does not accept; it was left out.]" },
            { "type": "document", "source": { "type": "text", "media_type": "text/plain", "data": "Notes" }, "title": "file:///notes.txt" },
            { "type": "document", "source": { "type": "base64", "media_type": "application/pdf", "data": "DDDD" }, "title": "file:///a/report.pdf" },
            { "type": "image", "source": { "type": "base64", "media_type": "image/jpeg", "data": "EEEE" } },
            { "type": "text", "text": "[The tool attached the resource file:///c.bin (application/octet-stream), which Anthropic does not accept; it was left out.]" },
        ])
    );
}

#[test]
fn a_result_without_attachments_is_sent_as_a_string_as_before() {
    let tool = Message::Tool {
        tool_call_id: "toolu_1".into(),
        name: "report".into(),
        content: "{\"ok\":true}".into(),
        is_error: false,
        attachments: Vec::new(),
    };
    assert_eq!(
        messages(&[tool])[0]["content"][0]["content"],
        json!("{\"ok\":true}")
    );
}

fn decode_all(events: &[(&str, &str)]) -> Vec<Result<Vec<ModelEvent>, ModelError>> {
    let mut decoder = Decoder::default();
    events
        .iter()
        .map(|(event, data)| {
            let mut out = VecDeque::new();
            decoder
                .decode(
                    &SseEvent {
                        event: (*event).to_owned(),
                        data: (*data).to_owned(),
                    },
                    &mut out,
                )
                .map(|()| out.into_iter().collect())
        })
        .collect()
}

#[test]
fn hostile_events_are_errors_or_nothing_never_panics() {
    let names = [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "error",
        "message",
        "",
    ];
    let datas = [
        "",
        "null",
        "[]",
        "{}",
        "{not json",
        r#"{"index":-1}"#,
        r#"{"index":18446744073709551615,"content_block":{"type":"tool_use","id":5,"name":null}}"#,
        r#"{"index":0,"delta":{"type":"input_json_delta","partial_json":7}}"#,
        r#"{"index":0,"delta":{"type":"text_delta"}}"#,
        r#"{"index":0,"delta":{"type":"thinking_delta"}}"#,
        r#"{"index":0,"delta":{"type":"signature_delta","signature":1}}"#,
        r#"{"index":0,"content_block":{"type":"thinking","thinking":5,"signature":null}}"#,
        r#"{"index":0,"content_block":{"type":"redacted_thinking"}}"#,
        r#"{"message":{"usage":{"input_tokens":18446744073709551615,"cache_creation_input_tokens":18446744073709551615,"cache_read_input_tokens":18446744073709551615}}}"#,
        r#"{"error":null}"#,
        r#"{"type":"message_stop"}"#,
    ];
    for name in names {
        for data in datas {
            let _ = decode_all(&[(name, data)]);
        }
    }
}

#[test]
fn message_stop_without_a_stop_reason_is_a_protocol_error() {
    let results = decode_all(&[("message_stop", r#"{"type":"message_stop"}"#)]);
    assert!(matches!(results[0], Err(ModelError::Protocol(_))));
}

#[test]
fn cached_input_counts_as_read() {
    let results = decode_all(&[
        (
            "message_start",
            r#"{"message":{"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":100,"output_tokens":1}}}"#,
        ),
        (
            "message_delta",
            r#"{"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    assert_eq!(
        results[2],
        Ok(vec![ModelEvent::Finish {
            reason: FinishReason::Stop,
            usage: Some(Usage {
                cache_read_tokens: 100,
                cache_write_tokens: 10,
                ..Usage::new(113, 4)
            }),
        }])
    );
}

#[test]
fn temperature_is_sent_as_written() {
    assert_eq!(temperature(0.2), Some(json!(0.2)));
    assert_eq!(temperature(1.0), Some(json!(1.0)));
    assert_eq!(temperature(f32::NAN), None);
}

#[test]
fn tool_input_is_always_an_object() {
    assert_eq!(tool_input(r#"{"a":1}"#), json!({ "a": 1 }));
    assert_eq!(tool_input(r#"{"a":"#), json!({}));
    assert_eq!(tool_input("[1]"), json!({}));
    assert_eq!(tool_input(""), json!({}));
}

#[test]
fn consecutive_user_texts_stay_separate_unless_they_follow_results() {
    let lowered = messages(&[Message::user("a"), Message::user("b")]);
    assert_eq!(lowered.len(), 2);
}

/// Feeds `events` to a decoder that knows `hosted` (wire name, catalog
/// name) and returns every model event.
fn decode_hosted(hosted: &[(&str, &str)], events: &[(&str, &str)]) -> Vec<ModelEvent> {
    let mut decoder = Decoder::new(
        hosted
            .iter()
            .map(|(wire, name)| ((*wire).to_owned(), (*name).to_owned()))
            .collect(),
    );
    let mut out = VecDeque::new();
    for (event, data) in events {
        let decoded = decoder.decode(
            &SseEvent {
                event: (*event).to_owned(),
                data: (*data).to_owned(),
            },
            &mut out,
        );
        assert_eq!(decoded, Ok(()), "{event} {data}");
    }
    out.into_iter().collect()
}

#[test]
fn hosted_calls_and_results_are_shown_and_kept_and_the_tool_search_only_kept() {
    use crate::model::HostedToolEvent;
    let events = decode_hosted(
        &[("web_search", "search_web")],
        &[
            (
                "content_block_start",
                r#"{"index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"rust\"}"}}"#,
            ),
            ("content_block_stop", r#"{"index":0}"#),
            (
                "content_block_start",
                r#"{"index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://www.rust-lang.org","title":"Rust"}]}}"#,
            ),
            ("content_block_stop", r#"{"index":1}"#),
            (
                "content_block_start",
                r#"{"index":2,"content_block":{"type":"server_tool_use","id":"srvtoolu_2","name":"web_search","input":{"query":"x"}}}"#,
            ),
            ("content_block_stop", r#"{"index":2}"#),
            (
                "content_block_start",
                r#"{"index":3,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"web_search_tool_result_error","error_code":"max_uses_exceeded"}}}"#,
            ),
            ("content_block_stop", r#"{"index":3}"#),
            (
                "content_block_start",
                r#"{"index":4,"content_block":{"type":"server_tool_use","id":"srvtoolu_3","name":"tool_search_tool_bm25","input":{"query":"w"}}}"#,
            ),
            ("content_block_stop", r#"{"index":4}"#),
            (
                "content_block_start",
                r#"{"index":5,"content_block":{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_3","content":{}}}"#,
            ),
            ("content_block_stop", r#"{"index":5}"#),
        ],
    );
    let server_blocks = events
        .iter()
        .filter(|event| matches!(event, ModelEvent::ServerBlock(_)))
        .count();
    assert_eq!(server_blocks, 6);
    let hosted: Vec<&HostedToolEvent> = events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::Hosted(hosted) => Some(hosted),
            _ => None,
        })
        .collect();
    assert_eq!(
        hosted,
        [
            &HostedToolEvent::Called {
                id: "srvtoolu_1".into(),
                name: "search_web".into(),
                input: json!({ "query": "rust" }),
            },
            &HostedToolEvent::Finished {
                id: "srvtoolu_1".into(),
                name: "search_web".into(),
                output: json!([{ "type": "web_search_result", "url": "https://www.rust-lang.org", "title": "Rust" }]),
                is_error: false,
            },
            &HostedToolEvent::Called {
                id: "srvtoolu_2".into(),
                name: "search_web".into(),
                input: json!({ "query": "x" }),
            },
            &HostedToolEvent::Finished {
                id: "srvtoolu_2".into(),
                name: "search_web".into(),
                output: json!({ "type": "web_search_tool_result_error", "error_code": "max_uses_exceeded" }),
                is_error: true,
            },
        ]
    );
}

fn hosted_spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: "Searches the web.".into(),
        parameters: json!({ "type": "object", "properties": { "query": { "type": "string" } } }),
        dialect: crate::schema::Dialect::Anthropic,
        hosted: true,
    }
}

fn custom_spec(name: &str) -> ToolSpec {
    ToolSpec {
        hosted: false,
        ..hosted_spec(name)
    }
}

fn request_with(messages: Vec<Message>, tools: Vec<ToolSpec>) -> ChatRequest {
    ChatRequest {
        messages,
        tools: tools.into(),
        tool_choice: crate::model::ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: None,
    }
}

#[test]
fn hosted_tools_go_in_their_server_form_with_their_betas() {
    let model = Anthropic::new("m", "k").hosted_tool(
        "web_search",
        json!({ "type": "web_search_20250305", "name": "web_search", "max_uses": 2 }),
    );
    assert!(model.hosts_tool("web_search"));
    assert!(model.hosts_tool("code_execution"));
    assert!(model.hosts_tool("web_fetch"));
    assert!(!model.hosts_tool("file_search"));
    let request = request_with(
        vec![Message::user("hi")],
        vec![
            hosted_spec("web_search"),
            hosted_spec("code_execution"),
            hosted_spec("file_search"),
            custom_spec("lookup"),
        ],
    );
    let body = model.request_body(&request);
    assert_eq!(
        body["tools"],
        json!([
            { "type": "web_search_20250305", "name": "web_search", "max_uses": 2 },
            { "type": "code_execution_20250825", "name": "code_execution" },
            {
                "name": "lookup",
                "description": "Searches the web.",
                "input_schema": { "type": "object", "properties": { "query": { "type": "string" } } },
            },
        ])
    );
    assert_eq!(
        model.betas(&request).as_deref(),
        Some(super::CODE_EXECUTION_BETA)
    );
    let names = model.hosted_names(&request);
    assert_eq!(
        names.get("web_search").map(String::as_str),
        Some("web_search")
    );
    assert_eq!(
        names.get("bash_code_execution").map(String::as_str),
        Some("code_execution")
    );
    assert_eq!(names.get("lookup"), None);
}

#[test]
fn strict_custom_tools_and_prompt_cache_breakpoints() {
    let model = Anthropic::new("m", "k")
        .with_strict(true)
        .with_prompt_cache(true);
    let request = request_with(
        vec![
            Message::system("Be brief."),
            Message::user("hi"),
            Message::assistant("Hello.", vec![]),
            Message::user("again"),
        ],
        vec![
            custom_spec("a"),
            hosted_spec("web_search"),
            custom_spec("b"),
        ],
    );
    let body = model.request_body(&request);
    assert_eq!(
        body["system"],
        json!([{ "type": "text", "text": "Be brief.", "cache_control": { "type": "ephemeral" } }])
    );
    assert_eq!(body["tools"][0]["strict"], true);
    assert_eq!(body["tools"][0].get("cache_control"), None);
    // Server tools take no `strict`.
    assert_eq!(
        body["tools"][1],
        json!({ "type": "web_search_20250305", "name": "web_search" })
    );
    assert_eq!(body["tools"][2]["strict"], true);
    assert_eq!(
        body["tools"][2]["cache_control"],
        json!({ "type": "ephemeral" })
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{ "type": "text", "text": "again", "cache_control": { "type": "ephemeral" } }])
    );
    assert_eq!(body["messages"][1]["content"][0].get("cache_control"), None);
    // Off (the default): none of it.
    let plain = Anthropic::new("m", "k").request_body(&request);
    assert_eq!(plain["system"], "Be brief.");
    assert!(!plain.to_string().contains("cache_control"));
    assert!(!plain.to_string().contains("strict"));
}

#[test]
fn only_anthropic_thinking_goes_back() {
    use crate::transcript::ThinkingBlock;
    let assistant = Message::Assistant {
        content: "Done.".into(),
        tool_calls: Vec::new(),
        thinking: vec![
            ThinkingBlock::Reasoning {
                text: "a compatible server's".into(),
            },
            ThinkingBlock::Thinking {
                thinking: "mine".into(),
                signature: "sig".into(),
            },
            ThinkingBlock::OpenaiReasoning {
                item: json!({ "type": "reasoning", "id": "rs_1", "encrypted_content": "x" }),
            },
            ThinkingBlock::Gemini {
                part: json!({ "text": "g", "thought": true, "thoughtSignature": "s" }),
                tool_call_id: None,
            },
            ThinkingBlock::RedactedThinking { data: "r".into() },
        ],
        server_blocks: Vec::new(),
        runnable: None,
    };
    let lowered = messages(&[Message::user("q"), assistant]);
    assert_eq!(
        lowered[1]["content"],
        json!([
            { "type": "thinking", "thinking": "mine", "signature": "sig" },
            { "type": "redacted_thinking", "data": "r" },
            { "type": "text", "text": "Done." },
        ])
    );
}

/// A server block's input is held until its block stops, out of the
/// assembler's sight: a server that streams it without end is stopped at
/// [`SERVER_INPUT_BYTES`](super::stream::SERVER_INPUT_BYTES), not held.
#[test]
fn a_server_blocks_endless_input_is_bounded() {
    let mut decoder = Decoder::default();
    let mut out = VecDeque::new();
    let start = SseEvent {
        event: "content_block_start".into(),
        data: r#"{"index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}"#.into(),
    };
    assert_eq!(decoder.decode(&start, &mut out), Ok(()));
    let piece = "x".repeat(64 * 1024);
    let delta = SseEvent {
        event: "content_block_delta".into(),
        data: json!({ "index": 0, "delta": { "type": "input_json_delta", "partial_json": piece } })
            .to_string(),
    };
    let mut failed = None;
    for sent in 0..(super::stream::SERVER_INPUT_BYTES / piece.len() + 2) {
        if let Err(error) = decoder.decode(&delta, &mut out) {
            failed = Some((sent, error));
            break;
        }
    }
    match failed {
        Some((sent, ModelError::Protocol(message))) => {
            // The block's start counts too, so the last whole piece is refused.
            assert_eq!(sent, super::stream::SERVER_INPUT_BYTES / piece.len() - 1);
            assert!(message.contains("server tool blocks"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
