//! The streamed-event throughput of each model adapter, against the Chat
//! Completions adapter's in the same run: one long scripted turn (2,000
//! text deltas, then a call whose arguments stream in 500 deltas), written
//! by each provider's conformance wire (`ProviderWire::turn`), served by a
//! local mock server, and read through `ChatModel::stream` to its end.
//! What is measured is the adapter's whole read path: HTTP, SSE framing,
//! JSON of each event, and the `ModelEvent`s it yields (events/s).
//!
//! `cargo bench --bench adapters`

use std::sync::Arc;

use aptix::model::anthropic::Anthropic;
use aptix::model::gemini::Gemini;
use aptix::model::openai::OpenAiChat;
use aptix::model::responses::OpenAiResponses;
use aptix::model::{ChatModel, ChatRequest, ModelEvent, ToolChoice};
use aptix::transcript::Message;
use aptix_testkit::conformance::{
    AnthropicWire, GeminiWire, OpenAiChatWire, OpenAiResponsesWire, ProviderWire, WireCall,
    WireTurn,
};
use aptix_testkit::mock_server::MockSseServer;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::StreamExt;

/// Text deltas of the turn.
const TEXT_DELTAS: usize = 2_000;
/// Argument deltas of its call.
const ARGUMENT_DELTAS: usize = 500;

/// An adapter under test: its wire, and the adapter pointed at a mock's
/// URL (`http://127.0.0.1:PORT`).
struct Adapter {
    name: &'static str,
    wire: Box<dyn ProviderWire>,
    model: fn(&str) -> Arc<dyn ChatModel>,
}

/// Every adapter measured, Chat Completions (the baseline) first. Another
/// adapter is one line here.
fn adapters() -> Vec<Adapter> {
    vec![
        Adapter {
            name: "baseline: openai_chat",
            wire: Box::new(OpenAiChatWire),
            model: |url| {
                Arc::new(OpenAiChat::new("gpt-4o-mini").with_base_url(format!("{url}/v1")))
            },
        },
        Adapter {
            name: "openai_responses",
            wire: Box::new(OpenAiResponsesWire),
            model: |url| {
                Arc::new(
                    OpenAiResponses::new("gpt-5-mini")
                        .with_base_url(format!("{url}/v1"))
                        .with_api_key("bench-key"),
                )
            },
        },
        Adapter {
            name: "anthropic",
            wire: Box::new(AnthropicWire),
            model: |url| {
                Arc::new(Anthropic::new("claude-sonnet-4-5", "bench-key").with_base_url(url))
            },
        },
        Adapter {
            name: "gemini",
            wire: Box::new(GeminiWire),
            model: |url| {
                Arc::new(
                    Gemini::new("gemini-2.5-flash", "bench-key")
                        .with_base_url(format!("{url}/v1beta")),
                )
            },
        },
    ]
}

/// The long turn: text, then one call with many argument pieces.
fn long_turn() -> WireTurn {
    let mut arguments = vec!["{\"items\":[".to_owned()];
    arguments.extend((0..ARGUMENT_DELTAS - 2).map(|index| format!("{index},")));
    arguments.push("0]}".to_owned());
    WireTurn {
        text: (0..TEXT_DELTAS)
            .map(|index| format!("word {index} "))
            .collect(),
        calls: vec![WireCall {
            id: "call_bench_1".into(),
            name: "record".into(),
            arguments,
        }],
        usage: (1_000, 4_000),
        ..WireTurn::default()
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("Write a lot, then call `record`.")],
        tools: Arc::from(Vec::new()),
        tool_choice: ToolChoice::default(),
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: None,
    }
}

/// Reads one answer to its end; the events it yielded, or the first error.
async fn read(model: &dyn ChatModel, request: &ChatRequest) -> Result<u64, String> {
    let mut stream = model.stream(request);
    let mut events = 0u64;
    let mut finished = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(ModelEvent::Finish { .. }) => {
                finished = true;
                events += 1;
            }
            Ok(_) => events += 1,
            Err(error) => return Err(error.to_string()),
        }
    }
    if finished {
        Ok(events)
    } else {
        Err("the stream ended without its Finish event".into())
    }
}

fn bench_adapters(c: &mut Criterion) {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => panic!("no runtime: {error}"),
    };
    let request = request();
    let turn = long_turn();
    let mut group = c.benchmark_group("adapter stream (2,000 text + 500 argument deltas)");
    for adapter in adapters() {
        let response = adapter.wire.turn(&turn);
        let bytes: usize = response.chunks.iter().map(|chunk| chunk.len()).sum();
        let server =
            match runtime.block_on(MockSseServer::start_responding(move |_| response.clone())) {
                Ok(server) => server,
                Err(error) => panic!("the mock did not start: {error}"),
            };
        let model = (adapter.model)(&server.url());
        // Once outside the measurement: the adapter reads the turn whole,
        // and the event count is the throughput's unit.
        let events = match runtime.block_on(read(model.as_ref(), &request)) {
            Ok(events) => events,
            Err(error) => panic!("{}: {error}", adapter.name),
        };
        println!("{}: {events} events from {bytes} bytes", adapter.name);
        group.throughput(Throughput::Elements(events));
        group.bench_function(adapter.name, |b| {
            b.to_async(&runtime).iter(|| async {
                match read(model.as_ref(), &request).await {
                    Ok(seen) => assert_eq!(seen, events),
                    Err(error) => panic!("{}: {error}", adapter.name),
                }
            });
        });
        drop(server);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_adapters
}
criterion_main!(benches);
