//! Unit tests of the adapter's two halves: request bodies (attachments,
//! tool inputs, temperature, message grouping) and event decoding, including
//! hostile events that must never make the decoder panic.

use std::collections::VecDeque;

use serde_json::json;

use super::request::{messages, temperature, tool_input};
use super::stream::Decoder;
use crate::content::Content;
use crate::model::http::SseEvent;
use crate::model::{FinishReason, Message, ModelError, ModelEvent, Usage};

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
            usage: Some(Usage::new(113, 4)),
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
