//! A mock of each provider serving the quickstart's conversation, to run
//! `cargo run --example quickstart` against any provider without a key:
//! `cargo run -p aptix-testkit --example mock_model -- anthropic` prints
//! the variables to set and serves until stopped.
//!
//! Every conversation gets the same two turns, in the provider's wire
//! format ([`ProviderWire::turn`]): the first calls `agent_hello_world`
//! `{"name":"Ada"}` and `get_current_time` `{"utc_offset_minutes":60}` in
//! parallel, the second answers in text. Which turn a request gets is
//! read from the request itself (no model turn in it yet: the first), so
//! any number of runs, one after another or at once, are served.

use aptix_core::model::provider::Provider;

use super::{
    AnthropicWire, GeminiWire, OpenAiChatWire, OpenAiResponsesWire, ProviderWire, WireCall,
    WireMessage, WireTurn,
};
use crate::mock_server::{MockSseServer, ScriptedResponse};

/// The wire of the provider named `provider` (`openai-chat`, ...), for the
/// providers the testkit has a mock of.
pub fn wire(provider: &str) -> Option<Box<dyn ProviderWire>> {
    match provider {
        "openai-chat" => Some(Box::new(OpenAiChatWire)),
        "openai-responses" => Some(Box::new(OpenAiResponsesWire)),
        "anthropic" => Some(Box::new(AnthropicWire)),
        "gemini" => Some(Box::new(GeminiWire)),
        _ => None,
    }
}

/// The quickstart's first turn: two calls in parallel.
pub fn calling_turn() -> WireTurn {
    WireTurn {
        text: vec!["Let me greet you and look up the time. ".into()],
        calls: vec![
            WireCall {
                id: "call_greet".into(),
                name: "agent_hello_world".into(),
                arguments: vec!["{\"name\":".into(), "\"Ada\"}".into()],
            },
            WireCall {
                id: "call_time".into(),
                name: "get_current_time".into(),
                arguments: vec!["{\"utc_offset_minutes\":".into(), "60}".into()],
            },
        ],
        usage: (120, 30),
        ..WireTurn::default()
    }
}

/// The quickstart's answer once it has the results.
pub fn answering_turn() -> WireTurn {
    WireTurn {
        text: vec![
            "Hello, Ada! ".into(),
            "I greeted you and looked up the time in Paris.".into(),
        ],
        usage: (240, 12),
        ..WireTurn::default()
    }
}

/// The turn the mock answers `body` with: the first turn for a request
/// that holds no model turn yet, the answer after it; an error body
/// naming the problem for a request the wire cannot read.
pub fn respond(wire: &dyn ProviderWire, body: &serde_json::Value) -> ScriptedResponse {
    match wire.read_request(body) {
        Ok(request) => {
            let answered = request
                .messages
                .iter()
                .any(|message| matches!(message, WireMessage::Assistant { .. }));
            wire.turn(&if answered {
                answering_turn()
            } else {
                calling_turn()
            })
        }
        Err(problem) => wire.error(
            400,
            &format!("the mock cannot read this request: {problem}"),
        ),
    }
}

/// Starts the mock of `wire`'s provider on a free port: it answers every
/// conversation with the quickstart's turns, for as long as it runs.
pub async fn serve(wire: Box<dyn ProviderWire>) -> std::io::Result<MockSseServer> {
    MockSseServer::start_responding(move |request| respond(wire.as_ref(), &request.body)).await
}

/// The variables that point `provider`'s adapter at a mock listening at
/// `url` (`http://127.0.0.1:PORT`): `APTIX_PROVIDER`, the provider's base
/// URL (with the path its adapter expects) and a placeholder key where
/// the adapter requires one.
pub fn variables(provider: Provider, url: &str) -> Vec<(&'static str, String)> {
    let [base_url, api_key, _] = provider.variables();
    let path = match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => "/v1",
        Provider::Gemini => "/v1beta",
        Provider::Anthropic => "",
    };
    vec![
        ("APTIX_PROVIDER", provider.as_str().to_owned()),
        (base_url, format!("{url}{path}")),
        (api_key, "mock-key".to_owned()),
    ]
}
