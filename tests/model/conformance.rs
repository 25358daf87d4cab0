//! The conformance suite (`aptix_testkit::conformance`) against each
//! adapter, one test per scenario so a run shows which pass. Each test
//! also snapshots the request bodies the adapter sent in that scenario
//! (`snapshots/*conformance__<provider>__<scenario>.snap`), members in the
//! order they were sent: a change in what a provider is sent shows up as
//! a snapshot diff, reviewed as an API change.

use std::error::Error;
use std::sync::Arc;

use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_core::model::ChatModel;
use aptix_core::model::openai::OpenAiChat;
use aptix_core::model::provider::Provider;
use aptix_testkit::conformance::{
    self, Failure, ModelFactory, OpenAiChatWire, ProviderWire, Scenario, mock_model, pretty_json,
};
use futures_util::StreamExt;

type TestResult = Result<(), Box<dyn Error>>;

/// Runs `scenario` and snapshots its request bodies as
/// `<provider>__<scenario>`.
async fn check(
    wire: &dyn ProviderWire,
    model: &ModelFactory,
    scenario: Scenario,
) -> Result<(), Failure> {
    let report = conformance::run_one(wire, model, scenario).await?;
    let mut shown = report
        .requests
        .iter()
        .enumerate()
        .map(|(index, raw)| format!("# request {}\n{}", index + 1, pretty_json(raw)))
        .collect::<Vec<_>>()
        .join("\n\n");
    if let Some(note) = report.skipped {
        shown = format!("# {note}");
    }
    insta::assert_snapshot!(format!("{}__{}", wire.name(), scenario.name()), shown);
    Ok(())
}

/// One test per scenario for a provider's wire and adapter.
macro_rules! conformance_tests {
    ($provider:ident, $wire:expr, $model:expr) => {
        /// The whole suite, a test per scenario.
        pub mod $provider {
            use super::*;

            async fn scenario(scenario: Scenario) -> Result<(), Failure> {
                check(&$wire, &$model, scenario).await
            }

            #[tokio::test]
            async fn plain_text() -> Result<(), Failure> {
                scenario(Scenario::PlainText).await
            }

            #[tokio::test]
            async fn one_call() -> Result<(), Failure> {
                scenario(Scenario::OneCall).await
            }

            #[tokio::test]
            async fn parallel_calls() -> Result<(), Failure> {
                scenario(Scenario::ParallelCalls).await
            }

            #[tokio::test]
            async fn gated_call() -> Result<(), Failure> {
                scenario(Scenario::GatedCall).await
            }

            #[tokio::test]
            async fn reasoning_kept() -> Result<(), Failure> {
                scenario(Scenario::ReasoningKept).await
            }

            #[tokio::test]
            async fn provider_tool() -> Result<(), Failure> {
                scenario(Scenario::ProviderTool).await
            }

            #[tokio::test]
            async fn error_body() -> Result<(), Failure> {
                scenario(Scenario::ErrorBody).await
            }

            #[tokio::test]
            async fn stream_cut() -> Result<(), Failure> {
                scenario(Scenario::StreamCut).await
            }

            #[tokio::test]
            async fn turn_over_limit() -> Result<(), Failure> {
                scenario(Scenario::TurnOverLimit).await
            }
        }
    };
}

/// Chat Completions at the mock's `/v1`, strict tools as for OpenAI.
fn openai_chat(url: &str) -> Arc<dyn ChatModel> {
    Arc::new(OpenAiChat::new("gpt-4o-mini").with_base_url(format!("{url}/v1")))
}

conformance_tests!(openai_chat, OpenAiChatWire, openai_chat);

/// The Responses API at the mock's `/v1`, as a reasoning model (its
/// reasoning comes back encrypted, stateless).
fn openai_responses(url: &str) -> Arc<dyn ChatModel> {
    Arc::new(
        aptix_core::model::responses::OpenAiResponses::new("gpt-5-mini")
            .with_base_url(format!("{url}/v1"))
            .with_api_key("conformance-key"),
    )
}

conformance_tests!(
    openai_responses,
    conformance::OpenAiResponsesWire,
    openai_responses
);

/// Anthropic at the mock's root (the adapter appends `/v1/messages`).
fn anthropic(url: &str) -> Arc<dyn ChatModel> {
    Arc::new(
        aptix_core::model::anthropic::Anthropic::new("claude-sonnet-4-5", "conformance-key")
            .with_base_url(url),
    )
}

conformance_tests!(anthropic, conformance::AnthropicWire, anthropic);

/// Gemini at the mock's `/v1beta`.
fn gemini(url: &str) -> Arc<dyn ChatModel> {
    Arc::new(
        aptix_core::model::gemini::Gemini::new("gemini-2.5-flash", "conformance-key")
            .with_base_url(format!("{url}/v1beta")),
    )
}

conformance_tests!(gemini, conformance::GeminiWire, gemini);

/// `run` itself, over every scenario: what a new adapter's test calls.
#[tokio::test]
async fn the_whole_suite_runs_in_one_call_and_notes_what_it_skipped() -> Result<(), Failure> {
    let report = conformance::run(&OpenAiChatWire, &openai_chat).await?;
    assert_eq!(report.requests.len(), Scenario::ALL.len());
    assert_eq!(
        report.notes,
        [(
            "provider_tool",
            "skipped: `openai_chat` hosts no tool of its own".to_owned()
        )]
    );
    Ok(())
}

#[path = "../../examples/get_current_time.rs"]
#[allow(dead_code)]
mod get_current_time;

/// The quickstart's agent against the mock `mock_model` serves, configured
/// only by the variables the mock prints (as a user sets them): two runs
/// on one mock, each completing with both tools' results.
async fn quickstart_completes_against_the_mock(provider: Provider) -> TestResult {
    let wire = mock_model::wire(provider.as_str()).ok_or("no mock of this provider")?;
    let server = mock_model::serve(wire).await?;
    let variables = mock_model::variables(provider, &server.url());
    let lookup = |name: &str| {
        variables
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    };
    let model = aptix_core::model::provider::from_vars(lookup)?.ok_or("no model chosen")?;
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(
            aptix::tools![
                crate::hello_world::HelloWorldTool,
                get_current_time::GetCurrentTimeTool
            ]
            .build()?,
        )
        .max_iterations(4)
        .build()?;
    for run in 0..2 {
        let mut conversation = Conversation::new(format!("quickstart-{run}"));
        let events: Vec<AgentEvent> = agent
            .run(
                &mut conversation,
                Input::User("Greet Ada, tell the time.".into()),
            )
            .collect()
            .await;
        assert!(
            matches!(
                events.last(),
                Some(AgentEvent::Done {
                    reason: DoneReason::Completed,
                    ..
                })
            ),
            "{events:#?}"
        );
        for id in ["call_greet", "call_time"] {
            assert_eq!(aptix_testkit::call_envelope(&events, id)["ok"], true);
        }
        let text: String = events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::TextDelta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(text.ends_with("looked up the time in Paris."), "{text}");
    }
    assert_eq!(server.requests().len(), 4);
    Ok(())
}

#[tokio::test]
async fn the_quickstart_completes_against_the_openai_chat_mock() -> TestResult {
    quickstart_completes_against_the_mock(Provider::OpenAiChat).await
}

#[tokio::test]
async fn the_quickstart_completes_against_the_openai_responses_mock() -> TestResult {
    quickstart_completes_against_the_mock(Provider::OpenAiResponses).await
}

#[tokio::test]
async fn the_quickstart_completes_against_the_anthropic_mock() -> TestResult {
    quickstart_completes_against_the_mock(Provider::Anthropic).await
}

#[tokio::test]
async fn the_quickstart_completes_against_the_gemini_mock() -> TestResult {
    quickstart_completes_against_the_mock(Provider::Gemini).await
}

/// A wire that loses every tool result when it reads a request: what an
/// adapter that forgot to send them back would look like to the suite.
struct LosingResults;

impl ProviderWire for LosingResults {
    fn name(&self) -> &'static str {
        "losing_results"
    }

    fn turn(&self, turn: &conformance::WireTurn) -> aptix_testkit::mock_server::ScriptedResponse {
        OpenAiChatWire.turn(turn)
    }

    fn error(&self, status: u16, message: &str) -> aptix_testkit::mock_server::ScriptedResponse {
        OpenAiChatWire.error(status, message)
    }

    fn read_request(&self, body: &serde_json::Value) -> Result<conformance::WireRequest, String> {
        let mut request = OpenAiChatWire.read_request(body)?;
        request
            .messages
            .retain(|message| !matches!(message, conformance::WireMessage::ToolResult { .. }));
        Ok(request)
    }

    fn hosted_tool(&self) -> Option<&'static str> {
        None
    }

    fn reasoning_has_token(&self) -> bool {
        false
    }
}

/// The suite fails an adapter whose requests lose the results, naming the
/// provider, the scenario and what differed, and shows the bodies sent.
#[tokio::test]
async fn a_request_without_the_results_fails_naming_provider_scenario_and_difference() {
    let failure = conformance::run_one(&LosingResults, &openai_chat, Scenario::OneCall)
        .await
        .err();
    let Some(failure) = failure else {
        panic!("the suite passed requests that lost the tool results");
    };
    assert_eq!(
        (failure.provider, failure.scenario),
        ("losing_results", "one_call")
    );
    let message = failure.to_string();
    assert!(
        message.starts_with("conformance of `losing_results`, scenario `one_call`: ")
            && message.contains("followed by 1 result(s)")
            && message.contains("\"tool_call_id\":\"call_conformance_1\""),
        "{message}"
    );
}
