//! Schema-first tools: a tool declared as a schema, run latent (the model
//! gives the result in `_output`) or through an activity bound by name,
//! with the same declaration in every environment.

use aptix::model::ToolSpec;
use aptix::prelude::*;
use aptix::{
    Activities, Agent, AgentEvent, Catalog, CatalogProblem, Conversation, DefinitionError, Dialect,
    ErrorCode, ExecutorKind, Input, ToolEntry,
};
use aptix_testkit::{Fake, FakeActivities, ScriptedModel, ScriptedTurn, ToolHarness};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// What a text's sentiment is.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SentimentResult {
    /// `positive`, `neutral` or `negative`.
    pub label: Label,
    /// How sure, from 0 to 1.
    pub confidence: f64,
}

/// A sentiment label.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Good.
    Positive,
    /// Neither.
    Neutral,
    /// Bad.
    Negative,
}

/// Analyses the sentiment of a text.
#[agent_tool(
    name = "sentiment",
    usage = "Call to classify how a text feels.",
    output = SentimentResult
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Sentiment {
    /// The text to classify.
    pub text: String,
}

/// Whether the email went out.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    /// True once the message was handed to the mail server.
    pub sent: bool,
}

/// Sends an email.
#[agent_tool(
    name = "send_email",
    usage = "Call to send an email the user asked for.",
    executor = latent,
    output = Sent
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SendEmail {
    /// The address to send to.
    pub to: String,
    /// The subject line.
    pub subject: String,
}

/// Asks the user to pick a colour (a client tool: no activity can run it).
#[agent_tool(
    name = "pick_colour",
    usage = "Call to let the user pick a colour.",
    executor = client,
    output = String
)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PickColour {
    /// The question to show.
    pub question: String,
}

fn catalog(activities: Activities) -> Catalog {
    aptix::tools![Sentiment, SendEmail]
        .activities(activities)
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn a_struct_with_an_output_and_no_executor_is_latent() {
    assert_eq!(Sentiment::META.executor, ExecutorKind::Latent);
    assert_eq!(SendEmail::META.executor, ExecutorKind::Latent);
    let catalog = catalog(Activities::new());
    for entry in catalog.entries() {
        assert!(entry.is_latent(), "{}", entry.name());
        assert_eq!(entry.activity(), None);
        // The definition is the schema an application reads: no meta field.
        assert!(
            entry.definition().parameters()["properties"]
                .get("_output")
                .is_none()
        );
        // What the model is offered asks for the result.
        let offered = entry.offered_parameters();
        assert!(offered["properties"].get("_output").is_some(), "{offered}");
        assert!(
            offered["required"]
                .as_array()
                .is_some_and(|names| names.iter().any(|name| name == "_output")),
            "{offered}"
        );
    }
}

#[test]
fn binding_an_activity_changes_only_whether_output_is_asked_for() {
    let latent = catalog(Activities::new());
    let bound = catalog(
        Activities::new().bind::<SendEmail, _, _>(|_args, _ctx| async { Ok(Sent { sent: true }) }),
    );
    let (before, after) = (
        latent.entry("send_email").expect("held"),
        bound.entry("send_email").expect("held"),
    );
    assert_eq!(
        before.definition().canonical_json(),
        after.definition().canonical_json()
    );
    assert!(!after.is_latent());
    assert_eq!(after.activity(), Some("send_email"));
    let mut offered = before.offered_parameters().into_owned();
    offered["properties"]
        .as_object_mut()
        .expect("properties")
        .remove("_output");
    offered["required"]
        .as_array_mut()
        .expect("required")
        .retain(|name| name != "_output");
    assert_eq!(&offered, after.offered_parameters().as_ref());
    // The offered tools differ, and so does the fingerprint.
    assert_ne!(latent.fingerprint(), bound.fingerprint());
    // The other tool is untouched.
    assert!(bound.entry("sentiment").expect("held").is_latent());
}

#[test]
fn every_dialect_offers_the_output_member() {
    let catalog = catalog(Activities::new());
    let entry = catalog.entry("sentiment").expect("held");
    for dialect in [
        Dialect::OpenAiStrict,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Mcp,
    ] {
        let spec = ToolSpec::for_entry(entry, dialect)
            .unwrap_or_else(|error| panic!("{dialect:?}: {error}"));
        let text = spec.parameters.to_string();
        assert!(text.contains("_output"), "{dialect:?}: {text}");
        assert!(text.contains("confidence"), "{dialect:?}: {text}");
    }
    let lowered = catalog.lower(Dialect::OpenAiStrict).expect("lowers");
    assert!(lowered[0].to_string().contains("_output"));
}

#[tokio::test]
async fn a_latent_call_returns_the_output_the_model_gave() {
    let harness = ToolHarness::new(catalog(Activities::new()));
    let result = harness
        .call_named(
            "sentiment",
            r#"{"text":"What a day!","_output":{"label":"positive","confidence":0.9}}"#,
        )
        .await;
    assert_eq!(
        result.ok::<SentimentResult>(),
        SentimentResult {
            label: Label::Positive,
            confidence: 0.9
        }
    );
}

#[tokio::test]
async fn a_wrong_output_is_fed_back_like_wrong_arguments() {
    let harness = ToolHarness::new(catalog(Activities::new()));
    // Missing.
    let missing = harness.call_named("sentiment", r#"{"text":"Fine."}"#).await;
    assert_eq!(missing.code(), ErrorCode::InvalidArguments);
    assert!(
        missing.error().message.contains("missing `_output`"),
        "{}",
        missing.error().message
    );
    // Of the wrong shape: an unknown label and an unknown member.
    let wrong = harness
        .call_named(
            "sentiment",
            r#"{"text":"Fine.","_output":{"label":"meh","confidence":0.5,"extra":1}}"#,
        )
        .await;
    assert_eq!(wrong.code(), ErrorCode::InvalidArguments);
    let paths: Vec<&str> = wrong
        .error()
        .details
        .as_ref()
        .and_then(Value::as_array)
        .expect("details")
        .iter()
        .filter_map(|item| item["path"].as_str())
        .collect();
    assert!(paths.contains(&"/_output/label"), "{paths:?}");
    assert!(paths.contains(&"/_output"), "{paths:?}");
    // Problems of the arguments and of the output come back together, so
    // the model fixes both in one retry.
    let both = harness
        .call_named("sentiment", r#"{"text":7,"_output":{"label":"positive"}}"#)
        .await;
    assert_eq!(both.code(), ErrorCode::InvalidArguments);
    let message = &both.error().message;
    assert!(message.contains("/text"), "{message}");
    assert!(message.contains("/_output"), "{message}");
    // A repeated `_output` is refused, not silently read as the last one.
    let repeated = harness
        .call_named(
            "sentiment",
            r#"{"text":"a","_output":{"label":"positive","confidence":1},"_output":{"label":"negative","confidence":1}}"#,
        )
        .await;
    assert_eq!(repeated.code(), ErrorCode::InvalidArguments);
}

#[tokio::test]
async fn the_same_declaration_runs_a_production_activity_or_a_fake() {
    // Production: the activity's own code.
    let production = Activities::new().bind::<SendEmail, _, _>(|args, _ctx| async move {
        if args.to.ends_with("@example.com") {
            Ok(Sent { sent: true })
        } else {
            Err(ToolError::failed(format!("no route to {}", args.to)))
        }
    });
    let harness = ToolHarness::new(catalog(production.clone()));
    let sent = harness
        .call_named("send_email", r#"{"to":"ada@example.com","subject":"Hi"}"#)
        .await;
    assert!(sent.ok::<Sent>().sent);
    let refused = harness
        .call_named("send_email", r#"{"to":"ada@elsewhere","subject":"Hi"}"#)
        .await;
    assert_eq!(refused.code(), ErrorCode::Failed);
    // `_output` is no longer asked for, so one sent anyway is refused as
    // an unknown member, like any other.
    let extra = harness
        .call_named(
            "send_email",
            r#"{"to":"ada@example.com","subject":"Hi","_output":{"sent":true}}"#,
        )
        .await;
    assert_eq!(extra.code(), ErrorCode::InvalidArguments);

    // A test: the fake replaces the production activity of that name only.
    let fake = Fake::<SendEmail>::returning(|_args| Ok(Sent { sent: false }));
    let activities = production.merge(Activities::new().fake(&fake));
    let harness = ToolHarness::new(catalog(activities));
    let result = harness
        .call_named("send_email", r#"{"to":"bob@nowhere","subject":"Test"}"#)
        .await;
    assert!(!result.ok::<Sent>().sent);
    let calls = fake.take_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].to, "bob@nowhere");
    assert_eq!(calls[0].subject, "Test");
    // Arguments the schema refuses never reach the fake.
    let wrong = harness
        .call_named("send_email", r#"{"to":"bob@nowhere"}"#)
        .await;
    assert_eq!(wrong.code(), ErrorCode::InvalidArguments);
    assert_eq!(fake.count(), 0);
}

#[tokio::test]
async fn a_catalog_can_swap_activities_after_it_was_built() {
    let latent = catalog(Activities::new());
    let fake = Fake::<Sentiment>::returning(|args| {
        Ok(SentimentResult {
            label: if args.text.contains('!') {
                Label::Positive
            } else {
                Label::Neutral
            },
            confidence: 1.0,
        })
    });
    let with_fake = latent
        .with_activities(&Activities::new().fake(&fake))
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(latent.entry("sentiment").expect("held").is_latent());
    let harness = ToolHarness::new(with_fake);
    let result = harness.call_named("sentiment", r#"{"text":"Yes!"}"#).await;
    assert_eq!(result.ok::<SentimentResult>().label, Label::Positive);
    assert_eq!(fake.count(), 1);
}

#[tokio::test]
async fn an_activity_result_outside_the_output_schema_is_an_internal_error() {
    let activities = Activities::new().bind_json("send_email", |_args, _ctx| async {
        Ok(json!({"sent": "yes"}))
    });
    let harness = ToolHarness::new(catalog(activities));
    let result = harness
        .call_named("send_email", r#"{"to":"a@example.com","subject":"s"}"#)
        .await;
    assert_eq!(result.code(), ErrorCode::Internal);
}

#[test]
fn activities_that_cannot_be_bound_are_catalog_problems_all_at_once() {
    let hand_made = ToolEntry::latent(
        "sentiment",
        "Call to classify a text.",
        "Classifies a text.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "string"}),
    );
    let activities = Activities::new()
        .bind_json("sentimnet", |_args, _ctx| async { Ok(json!(null)) })
        .bind::<PickColour, _, _>(|_args, _ctx| async { Ok("red".to_owned()) })
        .bind::<Sentiment, _, _>(|_args, _ctx| async {
            Ok(SentimentResult {
                label: Label::Neutral,
                confidence: 0.0,
            })
        });
    let error = Catalog::builder()
        .entry(hand_made)
        .tool::<PickColour>()
        .activities(activities)
        .build()
        .expect_err("refused");
    assert_eq!(error.problems.len(), 3, "{error}");
    assert!(error.problems.iter().any(|problem| matches!(
        problem,
        CatalogProblem::ActivityNotOnServer { name, executor: "client", .. } if name == "pick_colour"
    )));
    assert!(error.problems.iter().any(|problem| matches!(
        problem,
        CatalogProblem::ActivityForAnotherTool { name, .. } if name == "sentiment"
    )));
    assert!(error.problems.iter().any(|problem| matches!(
        problem,
        CatalogProblem::UnknownActivity { name, known, .. }
            if name == "sentimnet" && known == &["pick_colour", "sentiment"]
    )));
    let text = error.to_string();
    assert!(text.contains("tests/schema_first.rs"), "{text}");
}

#[tokio::test]
async fn a_run_time_latent_tool_takes_a_json_activity() {
    let entry = ToolEntry::latent(
        "word_count",
        "Call to count the words of a text.",
        "Counts words.",
        json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text."}},
            "required": ["text"],
            "additionalProperties": false
        }),
        json!({"type": "integer", "minimum": 0}),
    );
    let latent = Catalog::builder()
        .entry(entry)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let harness = ToolHarness::new(latent.clone());
    let given = harness
        .call_named("word_count", r#"{"text":"a b c","_output":3}"#)
        .await;
    assert_eq!(given.ok::<u64>(), 3);
    let negative = harness
        .call_named("word_count", r#"{"text":"a b c","_output":-1}"#)
        .await;
    assert_eq!(negative.code(), ErrorCode::InvalidArguments);

    let counted = latent
        .with_activities(
            &Activities::new().bind_json("word_count", |args, _ctx| async move {
                let text = args["text"].as_str().unwrap_or_default();
                Ok(json!(text.split_whitespace().count()))
            }),
        )
        .unwrap_or_else(|error| panic!("{error}"));
    let harness = ToolHarness::new(counted);
    let result = harness
        .call_named("word_count", r#"{"text":"one two"}"#)
        .await;
    assert_eq!(result.ok::<u64>(), 2);
}

/// Arguments with a member named like a meta field.
#[derive(Deserialize, JsonSchema)]
pub struct Sneaky {
    /// Looks like the result.
    #[serde(rename = "_output")]
    pub output: String,
}

/// Echoes.
#[agent_tool(name = "sneaky", usage = "Never called.")]
async fn sneaky(args: Sneaky) -> Result<String, ToolError> {
    Ok(args.output)
}

#[test]
fn a_parameter_named_like_a_meta_field_is_refused() {
    let error = aptix::tools![SneakyTool].build().expect_err("refused");
    assert!(
        matches!(
            &error.problems[..],
            [CatalogProblem::Definition(DefinitionError::ReservedField { field, .. })] if field == "_output"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn the_agent_runs_a_latent_call_on_the_output_the_model_gave() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call(
            "call_1",
            "sentiment",
            r#"{"text":"Great!","_output":{"label":"positive","confidence":0.8}}"#,
        ),
        ScriptedTurn::new().text("It reads as positive."),
    ]));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(catalog(Activities::new()))
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let mut conversation = Conversation::new("conv-latent");
    let events: Vec<AgentEvent> = agent
        .run(
            &mut conversation,
            Input::User("How does Great! feel?".into()),
        )
        .collect()
        .await;
    let envelope = events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolCallResult { envelope, .. } => Some(envelope.clone()),
            _ => None,
        })
        .expect("a result");
    assert_eq!(
        envelope["result"],
        json!({"label": "positive", "confidence": 0.8})
    );
    // The model was offered the `_output` member.
    let requests = model.requests();
    let offered = requests[0]
        .tools
        .iter()
        .find(|tool| tool.name == "sentiment")
        .expect("offered");
    assert!(offered.parameters.to_string().contains("_output"));
}
