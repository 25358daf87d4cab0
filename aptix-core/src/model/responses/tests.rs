//! Unit tests of the adapter's two halves: the input items a transcript
//! becomes (order, other providers' blocks, attachments, continuation) and
//! the event decoder (each event kind, leniency, limits), including a
//! property test that no event makes the decoder panic.

use serde_json::json;

use super::request::{continued_from, input_items};
use super::stream::{Decoder, MAX_OUTPUT_ITEMS, Step};
use super::*;
use crate::content::Content;
use crate::model::http::SseEvent;
use crate::model::{
    FinishReason, HostedToolEvent, Message, ModelEvent, ThinkingDelta, ToolCallDelta, ToolChoice,
    ToolSpec,
};
use crate::transcript::{AssistantToolCall, ThinkingBlock};

fn call(id: &str) -> AssistantToolCall {
    AssistantToolCall {
        id: id.into(),
        name: "weather".into(),
        arguments: "{}".into(),
    }
}

fn reasoning(id: &str) -> ThinkingBlock {
    ThinkingBlock::OpenaiReasoning {
        item: json!({ "id": id, "type": "reasoning", "encrypted_content": format!("enc-{id}"), "summary": [] }),
    }
}

fn record(id: &str, output: &[&str]) -> serde_json::Value {
    json!({ "type": TURN_RECORD, "response_id": id, "output": output })
}

fn kinds(items: &[serde_json::Value]) -> Vec<String> {
    items
        .iter()
        .map(|item| {
            let kind = item["type"].as_str().unwrap_or("");
            match item["id"].as_str().or(item["call_id"].as_str()) {
                Some(id) => format!("{kind}:{id}"),
                None => format!("{kind}:{}", item["role"].as_str().unwrap_or("")),
            }
        })
        .collect()
}

fn turn(server_blocks: Vec<serde_json::Value>) -> Message {
    Message::Assistant {
        content: "Here.".into(),
        tool_calls: vec![call("c1"), call("c2")],
        thinking: vec![
            reasoning("rs_1"),
            ThinkingBlock::Thinking {
                thinking: "Anthropic's".into(),
                signature: "sig".into(),
            },
            reasoning("rs_2"),
        ],
        server_blocks,
        runnable: None,
    }
}

#[test]
fn a_turns_items_go_back_in_the_order_its_record_lists() {
    let search = json!({ "id": "ws_1", "type": "web_search_call", "status": "completed" });
    let anthropic = json!({ "type": "server_tool_use", "id": "srvtoolu_1", "input": {} });
    let items = input_items(&[turn(vec![
        anthropic.clone(),
        search.clone(),
        record(
            "resp_1",
            &[
                "reasoning",
                "web_search_call",
                "reasoning",
                "message",
                "function_call",
                "function_call",
            ],
        ),
    ])]);
    assert_eq!(
        kinds(&items),
        [
            "reasoning:rs_1",
            "web_search_call:ws_1",
            "reasoning:rs_2",
            "message:assistant",
            "function_call:c1",
            "function_call:c2",
        ]
    );
    assert_eq!(items[1], search);
    assert_eq!(items[0]["encrypted_content"], "enc-rs_1");
    // Without a record: reasoning, hosted items, text, calls; another
    // provider's blocks are never sent.
    let items = input_items(&[turn(vec![anthropic, search])]);
    assert_eq!(
        kinds(&items),
        [
            "reasoning:rs_1",
            "reasoning:rs_2",
            "web_search_call:ws_1",
            "message:assistant",
            "function_call:c1",
            "function_call:c2",
        ]
    );
    // A record that lists fewer items than the turn has loses none.
    let items = input_items(&[turn(vec![record("resp_1", &["function_call"])])]);
    assert_eq!(
        kinds(&items),
        [
            "function_call:c1",
            "reasoning:rs_1",
            "reasoning:rs_2",
            "message:assistant",
            "function_call:c2",
        ]
    );
}

#[test]
fn attachments_follow_the_turns_outputs_as_one_user_message() {
    let tool = |id: &str, attachments: Vec<Content>| Message::Tool {
        tool_call_id: id.into(),
        name: "report".into(),
        content: "{}".into(),
        is_error: false,
        attachments,
    };
    let items = input_items(&[
        Message::system("Left to instructions."),
        Message::assistant("", vec![call("a"), call("b")]),
        tool(
            "a",
            vec![
                Content::text("Caption"),
                Content::text(" "),
                Content::image("AAAA", "image/png"),
                Content::audio("CCCC", "audio/mpeg"),
            ],
        ),
        tool(
            "b",
            vec![
                Content::resource("file:///notes.txt", "text/plain", "Notes"),
                Content::resource_blob("file:///a/report.pdf", "application/pdf", "DDDD"),
            ],
        ),
        Message::user("Thanks."),
    ]);
    assert_eq!(
        kinds(&items),
        [
            "function_call:a",
            "function_call:b",
            "function_call_output:a",
            "function_call_output:b",
            ":user",
            ":user",
        ]
    );
    assert_eq!(
        items[4]["content"],
        json!([
            { "type": "input_text", "text": "Attached by the `report` result of call a:" },
            { "type": "input_text", "text": "Caption" },
            { "type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto" },
            { "type": "input_text", "text": "[The tool attached an audio clip (audio/mpeg), which the Responses API does not accept; it was left out.]" },
            { "type": "input_text", "text": "Attached by the `report` result of call b:" },
            { "type": "input_text", "text": "file:///notes.txt:\nNotes" },
            { "type": "input_file", "filename": "report.pdf", "file_data": "data:application/pdf;base64,DDDD" },
        ])
    );
    assert_eq!(items[5], json!({ "role": "user", "content": "Thanks." }));
}

#[test]
fn a_continued_request_starts_after_the_last_recorded_turn() {
    let transcript = [
        Message::user("One"),
        turn(vec![record("resp_1", &["message"])]),
        Message::user("Two"),
        turn(vec![record("resp_2", &["message"])]),
        Message::user("Three"),
    ];
    assert_eq!(continued_from(&transcript), (Some("resp_2".into()), 4));
    assert_eq!(continued_from(&transcript[..3]), (Some("resp_1".into()), 2));
    assert_eq!(continued_from(&[Message::user("One")]), (None, 0));
}

fn spec(name: &str, hosted: bool, dialect: Dialect) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: "d".into(),
        parameters: json!({ "type": "object" }),
        dialect,
        hosted,
    }
}

fn chat(tools: Vec<ToolSpec>, choice: ToolChoice) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("Hi")],
        tools: tools.into(),
        tool_choice: choice,
        parallel_tool_calls: false,
        max_tokens: None,
        temperature: Some(0.7),
        response_format: None,
        deferred_tools: None,
    }
}

#[test]
fn tools_choices_strictness_and_temperature() -> Result<(), ModelError> {
    let model = OpenAiResponses::new("gpt-4.1").with_strict(false);
    let body = model.request_body(&chat(
        vec![spec("lookup", false, Dialect::OpenAiCompatible)],
        ToolChoice::Tool("lookup".into()),
    ))?;
    assert_eq!(body["tools"][0]["strict"], false);
    assert_eq!(
        body["tool_choice"],
        json!({ "type": "function", "name": "lookup" })
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["temperature"].to_string(), "0.7");
    // A function named like a hosted tool is still a function.
    let body = model.request_body(&chat(
        vec![spec("web_search", false, Dialect::OpenAiCompatible)],
        ToolChoice::Tool("web_search".into()),
    ))?;
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tool_choice"]["type"], "function");
    // An unknown hosted name is refused, saying what to do.
    match model.request_body(&chat(
        vec![spec("images", true, Dialect::OpenAiStrict)],
        ToolChoice::Auto,
    )) {
        Err(ModelError::Config(message)) => assert!(message.contains("hosted_tool"), "{message}"),
        other => panic!("{other:?}"),
    }
    Ok(())
}

#[test]
fn reasoning_models_are_told_apart_by_name_or_by_asking() {
    for name in [
        "o3",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
        "openai/o1",
        "codex-mini-latest",
    ] {
        assert!(OpenAiResponses::new(name).reasons(), "{name}");
    }
    for name in ["gpt-4.1", "gpt-4o-mini", "gpt-5-chat-latest", "omni"] {
        assert!(!OpenAiResponses::new(name).reasons(), "{name}");
    }
    assert!(
        OpenAiResponses::new("my-finetune")
            .with_reasoning(ReasoningEffort::High, ReasoningSummary::Off)
            .reasons()
    );
}

fn event(data: serde_json::Value) -> SseEvent {
    SseEvent {
        event: data["type"].as_str().unwrap_or("").to_owned(),
        data: data.to_string(),
    }
}

fn decoder() -> Decoder {
    Decoder::new(
        vec![("web_search_preview".into(), "search".into())],
        DEFAULT_MAX_EVENT_BYTES,
    )
}

fn ok_events(step: Step) -> Vec<ModelEvent> {
    step.events.into_iter().filter_map(Result::ok).collect()
}

#[test]
fn a_call_that_comes_whole_or_without_arguments_still_has_an_object() {
    let mut decoder = decoder();
    // Added, no arguments streamed: `{}` at its end.
    let added = json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "now", "arguments": "" } });
    assert_eq!(
        ok_events(decoder.on_event(&event(added))),
        [ModelEvent::ToolCallDelta(ToolCallDelta {
            index: 0,
            id: Some("call_1".into()),
            name: Some("now".into()),
            arguments: String::new(),
        })]
    );
    let done = json!({ "type": "response.output_item.done", "output_index": 0, "item": { "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "now", "arguments": "" } });
    assert_eq!(
        ok_events(decoder.on_event(&event(done))),
        [ModelEvent::ToolCallDelta(ToolCallDelta {
            index: 0,
            id: None,
            name: None,
            arguments: "{}".into(),
        })]
    );
    // Only at its end, whole: opened and given its arguments there.
    let whole = json!({ "type": "response.output_item.done", "output_index": 1, "item": { "type": "function_call", "call_id": "call_2", "name": "now", "arguments": "{\"tz\":\"UTC\"}" } });
    assert_eq!(
        ok_events(decoder.on_event(&event(whole))),
        [ModelEvent::ToolCallDelta(ToolCallDelta {
            index: 1,
            id: Some("call_2".into()),
            name: Some("now".into()),
            arguments: "{\"tz\":\"UTC\"}".into(),
        })]
    );
    // Arguments only in `.done`, none streamed: taken from there, once.
    let added = json!({ "type": "response.output_item.added", "output_index": 2, "item": { "type": "function_call", "call_id": "call_3", "name": "now", "arguments": "" } });
    decoder.on_event(&event(added));
    let arguments = json!({ "type": "response.function_call_arguments.done", "output_index": 2, "arguments": "{\"a\":1}" });
    assert_eq!(
        ok_events(decoder.on_event(&event(arguments))),
        [ModelEvent::ToolCallDelta(ToolCallDelta {
            index: 2,
            id: None,
            name: None,
            arguments: "{\"a\":1}".into(),
        })]
    );
    let done = json!({ "type": "response.output_item.done", "output_index": 2, "item": { "type": "function_call", "call_id": "call_3", "name": "now", "arguments": "{\"a\":1}" } });
    assert!(ok_events(decoder.on_event(&event(done))).is_empty());
    let completed =
        json!({ "type": "response.completed", "response": { "id": "resp_9", "usage": null } });
    let step = decoder.on_event(&event(completed));
    assert!(step.ended);
    assert_eq!(
        ok_events(step),
        [
            ModelEvent::ServerBlock(
                json!({ "type": TURN_RECORD, "response_id": "resp_9", "output": ["function_call", "function_call", "function_call"] })
            ),
            ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: None,
            },
        ]
    );
}

#[test]
fn text_reasoning_and_hosted_items_and_unknown_events() {
    let mut decoder = decoder();
    let events = [
        json!({ "type": "response.created", "response": { "id": "resp_1" } }),
        json!({ "type": "response.some_future_event", "whatever": [1, 2] }),
        json!({ "type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Hm." }),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": { "type": "reasoning", "id": "rs_1", "summary": [] } }),
        json!({ "type": "response.output_item.added", "output_index": 1, "item": { "type": "web_search_call", "id": "ws_1", "status": "in_progress" } }),
        json!({ "type": "response.output_item.done", "output_index": 1, "item": { "type": "web_search_call", "id": "ws_1", "status": "failed", "action": { "type": "search", "query": "q" } } }),
        // A message whose text never streamed: its text at its end.
        json!({ "type": "response.output_item.added", "output_index": 2, "item": { "type": "message", "content": [] } }),
        json!({ "type": "response.output_item.done", "output_index": 2, "item": { "type": "message", "content": [{ "type": "output_text", "text": "Whole." }] } }),
        // A server that leaves out where its text belongs.
        json!({ "type": "response.output_text.delta", "delta": " More." }),
    ];
    let produced: Vec<ModelEvent> = events
        .into_iter()
        .flat_map(|data| ok_events(decoder.on_event(&event(data))))
        .collect();
    assert_eq!(
        produced,
        [
            ModelEvent::ThinkingDelta(ThinkingDelta::Preview { text: "Hm.".into() }),
            ModelEvent::ThinkingDelta(ThinkingDelta::Block {
                index: 0,
                block: ThinkingBlock::OpenaiReasoning {
                    item: json!({ "type": "reasoning", "id": "rs_1", "summary": [] })
                },
            }),
            ModelEvent::Hosted(HostedToolEvent::Called {
                id: "ws_1".into(),
                name: "search".into(),
                input: json!({ "type": "search", "query": "q" }),
            }),
            ModelEvent::Hosted(HostedToolEvent::Finished {
                id: "ws_1".into(),
                name: "search".into(),
                output: json!({ "status": "failed" }),
                is_error: true,
            }),
            ModelEvent::ServerBlock(
                json!({ "type": "web_search_call", "id": "ws_1", "status": "failed", "action": { "type": "search", "query": "q" } })
            ),
            ModelEvent::TextDelta("Whole.".into()),
            ModelEvent::TextDelta(" More.".into()),
        ]
    );
    let incomplete = json!({ "type": "response.incomplete", "response": { "incomplete_details": { "reason": "something_new" } } });
    assert_eq!(
        ok_events(decoder.on_event(&event(incomplete))).last(),
        Some(&ModelEvent::Finish {
            reason: FinishReason::Other("something_new".into()),
            usage: None,
        })
    );
}

#[test]
fn malformed_or_oversized_events_end_the_turn() {
    let failed =
        |step: Step| step.ended && matches!(step.events.as_slice(), [Err(ModelError::Protocol(_))]);
    assert!(failed(decoder().on_event(&SseEvent {
        event: "response.output_text.delta".into(),
        data: "{not json".into(),
    })));
    assert!(failed(decoder().on_event(&event(
        json!({ "type": "response.function_call_arguments.delta", "output_index": 5, "delta": "{" })
    ))));
    assert!(failed(decoder().on_event(&event(
        json!({ "type": "response.output_item.added", "item": { "type": "message" } })
    ))));
    let mut small = Decoder::new(Vec::new(), 64);
    assert!(failed(small.on_event(&event(
        json!({ "type": "response.output_text.delta", "output_index": 0, "delta": "x".repeat(64) })
    ))));
    assert!(failed(decoder().on_event(&event(
        json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "x".repeat(65) } })
    ))));
    let mut decoder = decoder();
    for index in 0..MAX_OUTPUT_ITEMS {
        let step = decoder.on_event(&event(json!({ "type": "response.output_item.added", "output_index": index, "item": { "type": "message" } })));
        assert!(!step.ended);
    }
    assert!(failed(decoder.on_event(&event(
        json!({ "type": "response.output_item.added", "output_index": MAX_OUTPUT_ITEMS, "item": { "type": "message" } })
    ))));
}

proptest::proptest! {
    #[test]
    fn any_event_decodes_without_panicking(
        kinds in proptest::collection::vec(proptest::sample::select(vec![
            "response.created", "response.output_item.added", "response.output_item.done",
            "response.output_text.delta", "response.function_call_arguments.delta",
            "response.function_call_arguments.done", "response.completed", "response.failed",
            "error", "response.incomplete", "unknown",
        ]), 0..8),
        item_kind in proptest::sample::select(vec!["function_call", "message", "reasoning", "web_search_call", "", "x_call"]),
        index in proptest::num::i64::ANY,
        text in ".{0,12}",
    ) {
        let mut decoder = decoder();
        for kind in kinds {
            let data = json!({
                "type": kind,
                "output_index": index,
                "delta": text,
                "arguments": text,
                "item": { "type": item_kind, "call_id": text, "name": text, "arguments": text, "content": [{ "text": text }] },
                "response": { "id": text, "usage": { "input_tokens": index }, "error": text },
            });
            let step = decoder.on_event(&event(data));
            if step.ended {
                break;
            }
        }
    }
}

/// What a hosted tool found comes back only when `include` asks for it;
/// and unstored, a reasoning item without its encrypted content cannot be
/// found by OpenAI ("Items are not persisted when `store` is set to
/// false"), so it stays out rather than failing the request.
#[test]
fn hosted_results_are_asked_for_and_unstored_reasoning_goes_back_only_encrypted()
-> Result<(), ModelError> {
    let model = OpenAiResponses::new("gpt-4.1");
    let mut request = chat(
        vec![
            spec("web_search", true, Dialect::OpenAiStrict),
            spec("code_interpreter", true, Dialect::OpenAiStrict),
        ],
        ToolChoice::Auto,
    );
    request.messages.push(Message::Assistant {
        content: "Here.".into(),
        tool_calls: Vec::new(),
        thinking: vec![
            ThinkingBlock::OpenaiReasoning {
                item: json!({ "id": "rs_plain", "type": "reasoning", "summary": [] }),
            },
            reasoning("rs_sealed"),
        ],
        server_blocks: Vec::new(),
        runnable: None,
    });
    request.messages.push(Message::user("And?"));
    let body = model.request_body(&request)?;
    assert_eq!(
        body["include"],
        json!([
            "web_search_call.action.sources",
            "code_interpreter_call.outputs"
        ])
    );
    let ids: Vec<&str> = body["input"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["id"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, ["rs_sealed"]);
    // Stored, the API finds its items by id: both go back.
    let body = model
        .with_previous_response_id(true)
        .request_body(&request)?;
    assert!(body["input"].to_string().contains("rs_plain"), "{body}");
    Ok(())
}
