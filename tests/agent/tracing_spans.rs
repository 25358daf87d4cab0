//! The spans a run opens, with their fields (README, "Observability"): one
//! per run, per model call and per tool call, nested, so a log line written
//! inside a tool carries the tool's name, the call's id and the
//! conversation's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use aptix::prelude::*;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span as it was opened: its name, its fields and the names of the
/// spans it is inside, innermost first.
#[derive(Debug, Clone)]
struct Opened {
    name: &'static str,
    fields: BTreeMap<String, String>,
    inside: Vec<&'static str>,
}

/// A log line: its message and the spans it was written in, with their
/// fields, innermost first.
#[derive(Debug, Clone)]
struct Logged {
    message: String,
    scope: Vec<(&'static str, BTreeMap<String, String>)>,
}

#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Opened>>>,
    events: Arc<Mutex<Vec<Logged>>>,
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields.0.clone());
            let inside = span
                .scope()
                .skip(1)
                .map(|ancestor| ancestor.name())
                .collect();
            self.spans
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Opened {
                    name: span.name(),
                    fields: fields.0,
                    inside,
                });
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let scope = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .map(|span| {
                        let fields = span
                            .extensions()
                            .get::<BTreeMap<String, String>>()
                            .cloned()
                            .unwrap_or_default();
                        (span.name(), fields)
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Logged {
                message: fields.0.remove("message").unwrap_or_default(),
                scope,
            });
    }
}

/// Arguments of `weigh`.
#[derive(Deserialize, JsonSchema)]
pub struct WeighArgs {
    /// What to weigh.
    pub item: String,
}

/// Weighs an item, and says so in the logs.
#[agent_tool(name = "weigh", usage = "Call to weigh an item.")]
pub async fn weigh(args: WeighArgs) -> Result<u32, ToolError> {
    tracing::info!(item = %args.item, "weighing inside the tool");
    Ok(3)
}

#[tokio::test]
async fn a_run_opens_nested_spans_for_itself_its_model_calls_and_its_tool_calls() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let _guard = crate::common::capture_logs(subscriber);

    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("w1", "weigh", r#"{"item":"apple"}"#),
        ScriptedTurn::new().text("Three."),
    ]));
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(
            aptix::tools![WeighTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let fingerprint = agent.executor().catalog().fingerprint().to_owned();
    let mut conversation = Conversation::new("conv-spans").with_session_id("sess-spans");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("weigh an apple".into()))
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
        "{events:?}"
    );

    let spans = recorder
        .spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let named =
        |name: &str| -> Vec<&Opened> { spans.iter().filter(|span| span.name == name).collect() };
    let runs = named("agent_run");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    assert_eq!(runs[0].fields["conversation_id"], "conv-spans");
    assert_eq!(runs[0].fields["catalog_fingerprint"], fingerprint);

    let model_calls = named("model_call");
    assert_eq!(model_calls.len(), 2, "one per model turn: {spans:#?}");
    for (iteration, span) in model_calls.iter().enumerate() {
        assert_eq!(span.fields["iteration"], iteration.to_string());
        assert_eq!(span.fields["tools_fingerprint"], fingerprint);
        assert_eq!(span.inside.first(), Some(&"agent_run"), "{span:?}");
    }

    let tool_calls = named("tool_call");
    assert_eq!(tool_calls.len(), 1, "{spans:#?}");
    let call = tool_calls[0];
    assert_eq!(call.fields["tool"], "weigh");
    assert_eq!(call.fields["tool_call_id"], "w1");
    assert_eq!(call.fields["conversation_id"], "conv-spans");
    assert_eq!(call.fields["session_id"], "sess-spans");
    assert!(call.inside.contains(&"agent_run"), "{call:?}");

    // A line the tool writes carries the call's span, inside the run's.
    let events = recorder
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let line = events
        .iter()
        .find(|event| event.message == "weighing inside the tool")
        .unwrap_or_else(|| panic!("the tool's line was captured: {events:#?}"));
    let names: Vec<&str> = line.scope.iter().map(|(name, _)| *name).collect();
    assert_eq!(names.first(), Some(&"tool_call"), "{line:?}");
    assert!(names.contains(&"agent_run"), "{line:?}");
    assert_eq!(line.scope[0].1["tool"], "weigh");
    assert_eq!(line.scope[0].1["tool_call_id"], "w1");
    // The run ends with its summary line inside its span.
    assert!(
        events
            .iter()
            .any(|event| event.message == "agent run finished"
                && event.scope.first().map(|(name, _)| *name) == Some("agent_run")),
        "{events:#?}"
    );
}
