//! Schema-first tools: a tool declared as a schema, run latent (the model
//! gives the result in `_output`) or through an activity bound by name,
//! with the same declaration in every environment.

use aptix::agent::CallMode;
use aptix::model::ToolSpec;
use aptix::prelude::*;
use aptix::{
    Agent, AgentEvent, Catalog, Conversation, Dialect, ErrorCode, Input, ToolEntry,
    activity::Activities, catalog::CatalogProblem, meta::ExecutorKind, schema::DefinitionError,
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
    assert!(text.contains("tests/agent/schema_first.rs"), "{text}");
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

/// An agent over the latent `sentiment` and `send_email` (with an
/// activity), in `mode`.
fn composed_agent(
    model: std::sync::Arc<dyn aptix::model::ChatModel>,
    mode: CallMode,
    reasoning: bool,
) -> Agent {
    let activities =
        Activities::new().bind::<SendEmail, _, _>(|_args, _ctx| async { Ok(Sent { sent: true }) });
    Agent::builder()
        .shared_model(model)
        .catalog(catalog(activities))
        .call_mode(mode)
        .ask_reasoning(reasoning)
        .max_iterations(3)
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

async fn run_agent(agent: &Agent, text: &str) -> (Vec<AgentEvent>, Conversation) {
    let mut conversation = Conversation::new("conv-composed");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User(text.into()))
        .collect()
        .await;
    (events, conversation)
}

fn results_of(events: &[AgentEvent]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { name, envelope, .. } => {
                Some((name.clone(), envelope.clone()))
            }
            _ => None,
        })
        .collect()
}

const COMPOSED_TURN: &str = r#"{"message":"Checking.","calls":[
    {"_tool":"sentiment","_activity":"","text":"Great!","_output":{"label":"positive","confidence":0.8}},
    {"_tool":"send_email","_activity":"send_email","_reasoningForCall":"The user asked to tell Ada.","to":"ada@example.com","subject":"It is great"}
]}"#;

#[tokio::test]
async fn composed_mode_runs_each_element_as_a_call() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().text(COMPOSED_TURN),
        ScriptedTurn::new().text(r#"{"message":"It is positive, and Ada knows.","calls":[]}"#),
    ]));
    let agent = composed_agent(model.clone(), CallMode::Composed, true);
    let (events, conversation) = run_agent(&agent, "How does 'Great!' feel? Tell Ada.").await;

    // Each element ran through the executor, as a native call would.
    let results = results_of(&events);
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!(results[0].0, "sentiment");
    assert_eq!(
        results[0].1["result"],
        json!({"label": "positive", "confidence": 0.8})
    );
    assert_eq!(results[1].0, "send_email");
    assert_eq!(results[1].1["result"], json!({"sent": true}));
    // Stable ids, and the reasoning taken out of the arguments.
    let starts: Vec<(String, Option<String>, Value)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStart {
                id,
                reasoning,
                arguments,
                ..
            } => Some((id.clone(), reasoning.clone(), arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(starts[0].0, "composed-0-0");
    assert_eq!(starts[1].0, "composed-0-1");
    assert_eq!(starts[1].1.as_deref(), Some("The user asked to tell Ada."));
    assert!(starts[1].2.get("_reasoningForCall").is_none());
    // The message is the text; the JSON never streams as text.
    let text: String = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Checking.It is positive, and Ada knows.");
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            reason: aptix::DoneReason::Completed,
            ..
        })
    ));

    // The request asked for the composed object, with no native tools.
    let requests = model.requests();
    let format = requests[0]
        .response_format
        .as_ref()
        .expect("a response format");
    assert!(requests[0].tools.is_empty());
    let branches = format.schema["properties"]["calls"]["items"]["anyOf"]
        .as_array()
        .expect("branches");
    let consts: Vec<&Value> = branches
        .iter()
        .map(|branch| &branch["properties"]["_tool"]["const"])
        .collect();
    assert_eq!(consts, [&json!("send_email"), &json!("sentiment")]);
    // The latent tool asks for `_output`; the one with an activity names it.
    assert!(branches[1]["properties"].get("_output").is_some());
    assert_eq!(
        branches[0]["properties"]["_activity"]["const"],
        "send_email"
    );
    assert_eq!(branches[1]["properties"]["_activity"]["const"], "");
    assert!(branches[0]["properties"].get("_reasoningForCall").is_some());
    // The second request shows the model its own composed turn and the
    // results as a user message (no tool roles).
    let second = &requests[1].messages;
    assert!(
        matches!(&second[1], aptix::transcript::Message::Assistant { content, tool_calls, .. }
        if tool_calls.is_empty() && content.contains("\"_tool\":\"send_email\""))
    );
    assert!(
        matches!(&second[2], aptix::transcript::Message::User { content }
        if content.contains("composed-0-1"))
    );
    // The transcript itself is an ordinary one.
    assert!(
        matches!(&conversation.messages[1], aptix::transcript::Message::Assistant { tool_calls, .. }
        if tool_calls.len() == 2)
    );
}

#[tokio::test]
async fn composed_mode_validates_a_latent_output_and_feeds_it_back() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().text(
            r#"{"message":"","calls":[{"_tool":"sentiment","_activity":"","text":"Meh","_output":{"label":"meh"}}]}"#,
        ),
        ScriptedTurn::new().text(r#"{"message":"Neutral.","calls":[]}"#),
    ]));
    let agent = composed_agent(model.clone(), CallMode::Composed, false);
    let (events, _) = run_agent(&agent, "How does 'Meh' feel?").await;
    let results = results_of(&events);
    assert_eq!(results[0].1["error"]["code"], "invalid_arguments");
    assert!(
        results[0].1["error"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("/_output")),
        "{}",
        results[0].1
    );
    // The model got the refusal back.
    let requests = model.requests();
    assert!(requests[1].messages.iter().any(
        |message| matches!(message, aptix::transcript::Message::User { content }
                if content.contains("invalid_arguments"))
    ));
}

#[tokio::test]
async fn ask_reasoning_in_native_mode_offers_and_strips_it() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call(
            "call_1",
            "send_email",
            r#"{"to":"ada@example.com","subject":"Hi","_reasoningForCall":"Ada asked for it."}"#,
        ),
        ScriptedTurn::new().text("Sent."),
    ]));
    let agent = composed_agent(model.clone(), CallMode::Native, true);
    let (events, conversation) = run_agent(&agent, "Email Ada.").await;
    let reasoning = events.iter().find_map(|event| match event {
        AgentEvent::ToolCallStart { reasoning, .. } => reasoning.clone(),
        _ => None,
    });
    assert_eq!(reasoning.as_deref(), Some("Ada asked for it."));
    assert_eq!(results_of(&events)[0].1["ok"], json!(true));
    // Offered as an optional member of every tool.
    let requests = model.requests();
    for tool in requests[0].tools.iter() {
        assert!(
            tool.parameters["properties"]
                .get("_reasoningForCall")
                .is_some(),
            "{}",
            tool.name
        );
    }
    // The transcript keeps what the model wrote.
    assert!(
        matches!(&conversation.messages[1], aptix::transcript::Message::Assistant { tool_calls, .. }
        if tool_calls[0].arguments.contains("_reasoningForCall"))
    );
}

/// Sends money; a person approves each transfer.
#[agent_tool(
    name = "send_money",
    usage = "Call to send money.",
    approval = requires_approval,
    output = Sent
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SendMoney {
    /// Whom to pay.
    pub to: String,
}

#[tokio::test]
async fn an_approver_sees_why_the_model_made_the_call() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![ScriptedTurn::new().tool_call(
        "call_1",
        "send_money",
        r#"{"to":"Bob","_reasoningForCall":"Bob sent the invoice.","_output":{"sent":true}}"#,
    )]));
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(
            aptix::tools![SendMoney]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .ask_reasoning(true)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let (events, _) = run_agent(&agent, "Pay Bob.").await;
    let Some(AgentEvent::Done {
        reason: aptix::DoneReason::Suspended(calls),
        ..
    }) = events.last()
    else {
        panic!("suspended: {events:?}");
    };
    assert_eq!(calls[0].reasoning.as_deref(), Some("Bob sent the invoice."));
    // The approver's payload: the arguments and the output the model gave.
    assert_eq!(
        calls[0].awaiting.payload.to_value(),
        json!({"to": "Bob", "_output": {"sent": true}})
    );
}

#[test]
fn a_dialect_without_a_response_format_refuses_composed_mode() {
    let model = ScriptedModel::new(Vec::new()).with_dialect(Dialect::Anthropic);
    let error = Agent::builder()
        .model(model)
        .catalog(catalog(Activities::new()))
        .call_mode(CallMode::Composed)
        .build()
        .expect_err("refused");
    assert!(error.to_string().contains("CallMode::Native"), "{error}");
}

#[tokio::test]
async fn composed_mode_sends_a_json_schema_response_format_to_an_openai_server() {
    use aptix::model::openai::OpenAiChat;
    use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
    let server = MockOpenAiServer::start([
        OpenAiTurn::text(
            r#"{"message":"","calls":[{"_tool":"sentiment","_activity":"","text":"Yay","_output":{"label":"positive","confidence":1}}]}"#,
        )
        .into_response(),
        OpenAiTurn::text(r#"{"message":"Positive.","calls":[]}"#).into_response(),
    ])
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    let model = OpenAiChat::new("local").with_base_url(server.base_url());
    let agent = composed_agent(std::sync::Arc::new(model), CallMode::Composed, false);
    let (events, _) = run_agent(&agent, "How does 'Yay' feel?").await;
    assert_eq!(results_of(&events)[0].1["ok"], json!(true), "{events:?}");
    let requests = server.requests();
    let body = &requests[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "tool_calls");
    assert!(body.get("tools").is_none());
    assert!(
        body["response_format"]["json_schema"]["schema"]["properties"]["calls"]["items"]["anyOf"]
            .is_array()
    );
}

#[tokio::test]
async fn a_run_time_tool_is_added_for_one_run_and_removed_for_the_next() {
    let base = catalog(Activities::new());
    let shout = ToolEntry::from_json_schema(
        "shout",
        "Call to shout a word.",
        "Shouts a word.",
        json!({
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word."}},
            "required": ["word"],
            "additionalProperties": false
        }),
        |args: Value, _ctx| async move {
            Ok(json!(
                args["word"].as_str().unwrap_or_default().to_uppercase()
            ))
        },
    );
    let with_shout = base.with(shout).unwrap_or_else(|error| panic!("{error}"));
    let script = || {
        std::sync::Arc::new(ScriptedModel::new(vec![
            ScriptedTurn::new().tool_call("call_1", "shout", r#"{"word":"hey"}"#),
            ScriptedTurn::new().text("Done."),
        ]))
    };
    for (catalog, expected) in [
        (with_shout.clone(), json!({"ok": true, "result": "HEY"})),
        (
            with_shout.without("shout"),
            json!({"ok": false, "code": "unknown_tool"}),
        ),
    ] {
        let model = script();
        let agent = Agent::builder()
            .shared_model(model.clone())
            .catalog(catalog)
            .build()
            .unwrap_or_else(|error| panic!("{error}"));
        let (events, _) = run_agent(&agent, "Shout hey.").await;
        let envelope = &results_of(&events)[0].1;
        assert_eq!(envelope["ok"], expected["ok"], "{envelope}");
        match expected.get("result") {
            Some(result) => assert_eq!(&envelope["result"], result),
            None => assert_eq!(envelope["error"]["code"], expected["code"]),
        }
        let offered: Vec<String> = model.requests()[0]
            .tools
            .iter()
            .map(|tool| tool.name.clone())
            .collect();
        assert_eq!(
            offered.contains(&"shout".to_owned()),
            expected["ok"] == json!(true)
        );
    }
    // The base catalog never had it.
    assert!(base.entry("shout").is_none());
}

/// Notifies the on-call engineer (shares the `deliver` activity).
#[agent_tool(
    name = "notify_ops",
    usage = "Call to tell the on-call engineer about an outage.",
    output = Sent,
    activity = "deliver"
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NotifyOps {
    /// What happened.
    pub subject: String,
}

/// Notifies a customer (shares the `deliver` activity).
#[agent_tool(
    name = "notify_customer",
    usage = "Call to tell a customer their order shipped.",
    output = Sent,
    activity = "deliver"
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NotifyCustomer {
    /// What to tell them.
    pub subject: String,
}

/// Guesses a number (always latent: the model's guess is the result).
#[agent_tool(
    name = "guess",
    usage = "Call to guess a number between 1 and 10.",
    output = u8,
    activity = ""
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Guess {
    /// What the guess is about.
    pub topic: String,
}

fn problems_of(builder: aptix::CatalogBuilder) -> Vec<CatalogProblem> {
    builder.build().expect_err("refused").problems
}

#[tokio::test]
async fn tools_that_name_one_activity_share_it() {
    assert_eq!(NotifyOps::META.activity, Some("deliver"));
    let delivered = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = delivered.clone();
    let catalog = aptix::tools![NotifyOps, NotifyCustomer]
        .activities(Activities::new().bind_json("deliver", move |args, _ctx| {
            let log = log.clone();
            async move {
                let subject = args["subject"].as_str().unwrap_or_default().to_owned();
                log.lock()
                    .map_err(|_| ToolError::internal_message("the log is poisoned"))?
                    .push(subject);
                Ok(json!({"sent": true}))
            }
        }))
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    for name in ["notify_ops", "notify_customer"] {
        let entry = catalog.entry(name).expect("held");
        assert!(!entry.is_latent(), "{name}");
        assert_eq!(entry.activity(), Some("deliver"), "{name}");
        assert_eq!(entry.definition().activity(), Some("deliver"));
        assert!(
            entry.offered_parameters()["properties"]
                .get("_output")
                .is_none()
        );
    }
    let harness = ToolHarness::new(catalog.clone());
    let ops = harness
        .call_named("notify_ops", r#"{"subject":"db down"}"#)
        .await;
    assert_eq!(ops.ok::<Value>(), json!({"sent": true}));
    let customer = harness
        .call_named("notify_customer", r#"{"subject":"shipped"}"#)
        .await;
    assert_eq!(customer.ok::<Value>(), json!({"sent": true}));
    assert_eq!(
        *delivered.lock().expect("not poisoned"),
        ["db down", "shipped"]
    );
    // The composed schema names the activity each call goes to.
    let composed = aptix::agent::composed_schema(&catalog, &aptix::model::ToolChoice::Auto, false);
    let text = composed.to_string();
    assert_eq!(text.matches(r#""const":"deliver""#).count(), 2, "{text}");
    // The name is part of what the fingerprint hashes.
    let definition = catalog.entry("notify_ops").expect("held").definition();
    assert_eq!(definition.canonical_json()["activity"], "deliver");
}

#[test]
fn a_named_activity_must_be_bound_and_beats_the_same_name() {
    // Nothing bound: each tool that names an activity says so.
    let missing = problems_of(aptix::tools![NotifyOps, NotifyCustomer]);
    assert_eq!(missing.len(), 2, "{missing:?}");
    for problem in &missing {
        assert!(
            matches!(problem, CatalogProblem::MissingActivity { activity, .. } if activity == "deliver"),
            "{problem}"
        );
        assert!(
            problem.to_string().contains("bind_json(\"deliver\""),
            "{problem}"
        );
    }
    // Bound to the tool's own name: the named one wins, and the other
    // would never run.
    let shadowed = problems_of(
        aptix::tools![NotifyOps].activities(
            Activities::new()
                .bind_json("deliver", |_args, _ctx| async { Ok(json!({"sent": true})) })
                .bind_json("notify_ops", |_args, _ctx| async {
                    Ok(json!({"sent": false}))
                }),
        ),
    );
    assert_eq!(shadowed.len(), 1, "{shadowed:?}");
    assert!(matches!(
        &shadowed[0],
        CatalogProblem::ActivityShadowed { name, named, .. } if name == "notify_ops" && named == "deliver"
    ));
    assert!(shadowed[0].to_string().contains("bind `deliver` instead"));
}

#[tokio::test]
async fn a_typed_activity_and_a_fake_bind_under_the_named_activity() {
    let catalog = aptix::tools![NotifyOps]
        .activities(
            Activities::new().bind::<NotifyOps, _, _>(|args, _ctx| async move {
                Ok(Sent {
                    sent: !args.subject.is_empty(),
                })
            }),
        )
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(
        catalog.entry("notify_ops").expect("held").activity(),
        Some("deliver")
    );
    let harness = ToolHarness::new(catalog);
    let sent = harness.call_named("notify_ops", r#"{"subject":"x"}"#).await;
    assert!(sent.ok::<Sent>().sent);

    let fake = Fake::<NotifyOps>::returning(|_args| Ok(Sent { sent: true }));
    let faked = aptix::tools![NotifyOps]
        .activities(Activities::new().fake(&fake))
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let harness = ToolHarness::new(faked);
    harness.call_named("notify_ops", r#"{"subject":"y"}"#).await;
    assert_eq!(fake.count(), 1);

    // A typed activity of one tool is not taken by another that names the
    // same activity: its arguments are another type.
    let problems = problems_of(aptix::tools![NotifyOps, NotifyCustomer].activities(
        Activities::new().bind::<NotifyOps, _, _>(|_args, _ctx| async { Ok(Sent { sent: true }) }),
    ));
    assert!(
        problems.iter().any(|problem| matches!(
            problem,
            CatalogProblem::ActivityForAnotherTool { name, .. } if name == "notify_customer"
        )),
        "{problems:?}"
    );
}

#[tokio::test]
async fn an_empty_activity_keeps_a_tool_latent() {
    assert_eq!(Guess::META.activity, Some(""));
    let catalog = aptix::tools![Guess]
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let entry = catalog.entry("guess").expect("held");
    assert!(entry.is_latent());
    assert_eq!(entry.activity(), None);
    let harness = ToolHarness::new(catalog);
    let guessed = harness
        .call_named("guess", r#"{"topic":"dice","_output":4}"#)
        .await;
    assert_eq!(guessed.ok::<u8>(), 4);
    // An activity bound to its name would never run: a problem, not a
    // silent switch away from latent.
    let problems = problems_of(
        aptix::tools![Guess]
            .activities(Activities::new().bind_json("guess", |_args, _ctx| async { Ok(json!(7)) })),
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].to_string().contains("declared latent"),
        "{}",
        problems[0]
    );
}

#[tokio::test]
async fn a_run_time_entry_names_its_activity() {
    let entry = ToolEntry::latent(
        "page_ops",
        "Call to page the on-call engineer.",
        "Pages.",
        json!({
            "type": "object",
            "properties": {"subject": {"type": "string", "description": "What happened."}},
            "required": ["subject"],
            "additionalProperties": false
        }),
        json!({"type": "object", "properties": {"sent": {"type": "boolean"}}, "required": ["sent"]}),
    )
    .activity("deliver");
    let catalog = aptix::tools![NotifyOps]
        .entry(entry)
        .activities(
            Activities::new()
                .bind_json("deliver", |_args, _ctx| async { Ok(json!({"sent": true})) }),
        )
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let page = catalog.entry("page_ops").expect("held");
    assert_eq!(page.definition().activity(), Some("deliver"));
    assert_eq!(page.activity(), Some("deliver"));
    let harness = ToolHarness::new(catalog);
    let paged = harness.call_named("page_ops", r#"{"subject":"x"}"#).await;
    assert_eq!(paged.ok::<Value>(), json!({"sent": true}));
}

/// Review 2026-11-26, N17: a member repeated in a call's arguments is
/// refused, as the README says, also when the call carries
/// `_reasoningForCall` or comes in composed mode: taking the meta fields
/// out used to keep only the last of the repeats, so the validator never
/// saw them.
#[tokio::test]
async fn a_repeated_member_is_refused_beside_meta_fields() {
    let repeated = r#""to":"ada@example.com","subject":"Hi","to":"mallory@example.com""#;
    for (mode, turn) in [
        (
            CallMode::Native,
            ScriptedTurn::new().tool_call(
                "c1",
                "send_email",
                &format!(r#"{{{repeated},"_reasoningForCall":"The user asked."}}"#),
            ),
        ),
        (
            CallMode::Composed,
            ScriptedTurn::new().text(&format!(
                r#"{{"message":"","calls":[{{"_tool":"send_email","_activity":"send_email",{repeated}}}]}}"#
            )),
        ),
    ] {
        let model = std::sync::Arc::new(ScriptedModel::new(vec![
            turn,
            ScriptedTurn::new().text(r#"{"message":"Stopped."}"#),
        ]));
        let agent = composed_agent(model, mode, true);
        let (events, _) = run_agent(&agent, "Tell Ada.").await;
        let results = results_of(&events);
        assert_eq!(results.len(), 1, "{mode:?}: {results:?}");
        let envelope = &results[0].1;
        assert_eq!(envelope["ok"], json!(false), "{mode:?}: a repeated `to` ran: {envelope}");
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("more than once"), "{mode:?}: {envelope}");
    }
}

/// What `count_words` counts.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CountWordsArgs {
    /// The text to count the words of.
    pub text: String,
}

/// Counts the words of a text (a tool with code of its own).
#[agent_tool(name = "count_words", usage = "Call to count the words of a text.")]
async fn count_words(args: CountWordsArgs) -> Result<usize, ToolError> {
    Ok(args.text.split_whitespace().count())
}

/// A function tool, a latent tool and a tool bound to an activity, asked
/// for their reasons.
fn three_kinds(model: std::sync::Arc<dyn aptix::model::ChatModel>, mode: CallMode) -> Agent {
    let activities =
        Activities::new().bind::<SendEmail, _, _>(|_args, _ctx| async { Ok(Sent { sent: true }) });
    let catalog = Catalog::builder()
        .tool::<CountWordsTool>()
        .tool::<Sentiment>()
        .tool::<SendEmail>()
        .activities(activities)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    Agent::builder()
        .shared_model(model)
        .catalog(catalog)
        .call_mode(mode)
        .ask_reasoning(true)
        .max_iterations(3)
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// Where `needle` is in `haystack`, or a failure that shows both.
fn at(haystack: &str, needle: &str) -> usize {
    haystack
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not in {haystack}"))
}

#[test]
fn a_tool_with_code_names_its_own_activity_and_only_a_latent_one_is_empty() {
    let model = std::sync::Arc::new(ScriptedModel::new([]));
    let agent = three_kinds(model, CallMode::Composed);
    let schema = aptix::agent::composed_schema(
        agent.executor().catalog(),
        &aptix::model::ToolChoice::Auto,
        true,
    );
    let activities: Vec<(&Value, &Value)> = schema["properties"]["calls"]["items"]["anyOf"]
        .as_array()
        .expect("branches")
        .iter()
        .map(|branch| {
            (
                &branch["properties"]["_tool"]["const"],
                &branch["properties"]["_activity"]["const"],
            )
        })
        .collect();
    assert_eq!(
        activities,
        [
            (&json!("count_words"), &json!("count_words")),
            (&json!("send_email"), &json!("send_email")),
            (&json!("sentiment"), &json!("")),
        ]
    );
}

#[tokio::test]
async fn composed_bytes_put_the_meta_fields_first_and_the_output_last() {
    use aptix::model::openai::OpenAiChat;
    use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
    for strict in [false, true] {
        let server = MockOpenAiServer::start([OpenAiTurn::text(
            r#"{"message":"Nothing to do.","calls":[]}"#,
        )
        .into_response()])
        .await
        .unwrap_or_else(|error| panic!("{error}"));
        let model = OpenAiChat::new("local")
            .with_base_url(server.base_url())
            .with_strict(strict);
        let agent = three_kinds(std::sync::Arc::new(model), CallMode::Composed);
        let (events, _) = run_agent(&agent, "Hello.").await;
        assert!(
            matches!(
                events.last(),
                Some(AgentEvent::Done {
                    reason: aptix::DoneReason::Completed,
                    ..
                })
            ),
            "{events:?}"
        );
        let raw = &server.requests()[0].raw_body;
        // A function tool: `_tool`, `_activity`, `_reasoningForCall`, then
        // its parameter; `required` in the same order.
        let function = at(raw, r#""_tool":{"const":"count_words","type":"string"}"#);
        let latent = at(raw, r#""_tool":{"const":"sentiment","type":"string"}"#);
        let bound = at(raw, r#""_tool":{"const":"send_email","type":"string"}"#);
        let branch = |from: usize| {
            let rest = &raw[from..];
            // A branch's `required` follows its properties, before the
            // next branch's `_tool`.
            let end = rest[1..]
                .find(r#""_tool":{"const":"#)
                .map_or(rest.len(), |next| next + 1);
            &rest[..end]
        };
        for (start, name, activity, parameters, output) in [
            (function, "count_words", "count_words", &["text"][..], false),
            (latent, "sentiment", "", &["text"][..], true),
            (
                bound,
                "send_email",
                "send_email",
                &["subject", "to"][..],
                false,
            ),
        ] {
            // The branch's properties open with `_tool`.
            assert!(
                raw[..start].ends_with(r#""properties":{"#),
                "strict {strict}, {name}: {raw}"
            );
            let branch = branch(start);
            let activity_at = at(
                branch,
                &format!(r#""_activity":{{"const":"{activity}","type":"string"}}"#),
            );
            let reason_at = at(branch, r#""_reasoningForCall":{"#);
            assert!(activity_at < reason_at, "strict {strict}, {name}: {branch}");
            let mut last = reason_at;
            for parameter in parameters {
                let parameter_at = at(branch, &format!(r#""{parameter}":{{"#));
                assert!(last < parameter_at, "strict {strict}, {name}: {branch}");
                last = parameter_at;
            }
            let mut required = vec!["_tool", "_activity", "_reasoningForCall"];
            required.extend(parameters);
            if output {
                assert!(last < at(branch, r#""_output":{"#), "{branch}");
                required.push("_output");
            } else {
                assert!(!branch.contains(r#""_output""#), "{branch}");
            }
            let required = serde_json::to_string(&required).unwrap_or_default();
            assert!(
                branch.contains(&format!(r#""required":{required}"#)),
                "strict {strict}, {name}: `required` is not {required}: {branch}"
            );
        }
        // The schema built, written in call order, byte for byte.
        let built = aptix::agent::composed_schema_in(
            if strict {
                Dialect::OpenAiStrict
            } else {
                Dialect::OpenAiCompatible
            },
            agent.executor().catalog(),
            &aptix::model::ToolChoice::Auto,
            true,
        )
        .unwrap_or_else(|error| panic!("{error}"));
        let written = serde_json::to_string(&aptix::schema::meta_fields::InCallOrder(&built))
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(
            raw.contains(&format!(r#""schema":{written}"#)),
            "strict {strict}: {raw}"
        );
    }
}

#[tokio::test]
async fn a_native_latent_tool_is_sent_with_its_reason_first_and_its_output_last() {
    use aptix::model::openai::OpenAiChat;
    use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
    let server = MockOpenAiServer::start([OpenAiTurn::text("Nothing to do.").into_response()])
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let model = OpenAiChat::new("local")
        .with_base_url(server.base_url())
        .with_strict(true);
    let agent = three_kinds(std::sync::Arc::new(model), CallMode::Native);
    let _ = run_agent(&agent, "Hello.").await;
    let raw = &server.requests()[0].raw_body;
    let start = at(raw, r#""name":"sentiment""#);
    let tool = &raw[start..];
    let reason = at(tool, r#""properties":{"_reasoningForCall":{"#);
    let text = at(tool, r#""text":{"#);
    let output = at(tool, r#""_output":{"#);
    assert!(reason < text && text < output, "{tool}");
    assert!(
        tool.contains(r#""required":["_reasoningForCall","text","_output"]"#),
        "{tool}"
    );
}

const SENTIMENT_CALL: &str = r#"{"message":"Checking.","calls":[{"_tool":"sentiment","_activity":"","text":"Yay","_output":{"label":"positive","confidence":0.9}}]}"#;

/// The text a run streamed to its reader.
fn shown(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_composed_answer_that_is_not_the_object_is_sent_back_and_never_shown() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().text("Sure! I will check the sentiment for you."),
        ScriptedTurn::new().text(SENTIMENT_CALL),
        ScriptedTurn::new().text(r#"{"message":"It is positive.","calls":[]}"#),
    ]));
    let agent = composed_agent(model.clone(), CallMode::Composed, false);
    let (events, conversation) = run_agent(&agent, "How does 'Yay' feel?").await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::Done {
                reason: aptix::DoneReason::Completed,
                ..
            })
        ),
        "{events:?}"
    );
    assert_eq!(results_of(&events)[0].1["ok"], json!(true));
    // The plain text never reached the reader, nor the transcript.
    assert_eq!(shown(&events), "Checking.It is positive.");
    assert!(
        !format!("{:?}", conversation.messages).contains("Sure!"),
        "{:?}",
        conversation.messages
    );
    // The second request asked again: the answer, then what was wrong.
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let asked = &requests[1].messages;
    assert_eq!(asked.len(), requests[0].messages.len() + 2);
    assert!(matches!(
        &asked[asked.len() - 2],
        aptix::transcript::Message::Assistant { content, tool_calls, .. }
            if content == "Sure! I will check the sentiment for you." && tool_calls.is_empty()
    ));
    assert!(
        matches!(&asked[asked.len() - 1], aptix::transcript::Message::User { content }
            if content.contains("not the JSON object asked for")),
        "{asked:?}"
    );
    // Same response format: the model is held to the same schema.
    assert_eq!(requests[1].response_format, requests[0].response_format);
    // The next step is built from the transcript: no correction in it.
    assert!(!format!("{:?}", requests[2].messages).contains("could not be read"));
}

#[tokio::test]
async fn a_truncated_composed_answer_is_sent_back_as_cut_off() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new()
            .text(
                r#"{"message":"Checking.","calls":[{"_tool":"sentiment","_activity":"","text":"Ya"#,
            )
            .finish(aptix::model::FinishReason::Length),
        ScriptedTurn::new().text(SENTIMENT_CALL),
        ScriptedTurn::new().text(r#"{"message":"It is positive.","calls":[]}"#),
    ]));
    let agent = composed_agent(model.clone(), CallMode::Composed, false);
    let (events, _) = run_agent(&agent, "How does 'Yay' feel?").await;
    assert_eq!(results_of(&events)[0].1["ok"], json!(true), "{events:?}");
    assert_eq!(shown(&events), "Checking.It is positive.");
    let requests = model.requests();
    assert!(
        matches!(requests[1].messages.last(), Some(aptix::transcript::Message::User { content })
            if content.contains("cut off at the token limit")),
        "{:?}",
        requests[1].messages
    );
}

#[tokio::test]
async fn composed_answers_of_the_wrong_shape_end_the_run_once_the_budget_is_spent() {
    let wrong = || ScriptedTurn::new().text(r#"{"message":"Hi.","calls":{"_tool":"sentiment"}}"#);
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        wrong(),
        wrong(),
        ScriptedTurn::new().text(r#"{"message":"Too late.","calls":[]}"#),
    ]));
    let activities =
        Activities::new().bind::<SendEmail, _, _>(|_args, _ctx| async { Ok(Sent { sent: true }) });
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(catalog(activities))
        .call_mode(CallMode::Composed)
        .composed_retries(1)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let (events, conversation) = run_agent(&agent, "Hello.").await;
    // Asked once, then once again; then the run ends, the garbage unshown.
    assert_eq!(model.requests().len(), 2);
    assert_eq!(model.remaining(), 1);
    assert_eq!(shown(&events), "");
    match events.last() {
        Some(AgentEvent::Done {
            reason: aptix::DoneReason::ModelError(aptix::model::ModelError::Protocol(message)),
            ..
        }) => {
            assert!(message.contains("2 times"), "{message}");
            assert!(message.contains("`calls` must be an array"), "{message}");
        }
        other => panic!("the run did not end with a protocol error: {other:?}"),
    }
    // The transcript holds the user's message only.
    assert_eq!(
        conversation.messages.len(),
        1,
        "{:?}",
        conversation.messages
    );
    // With the default budget: three tries.
    let model = std::sync::Arc::new(ScriptedModel::new(
        std::iter::repeat_with(|| ScriptedTurn::new().text("no")).take(4),
    ));
    let agent = composed_agent(model.clone(), CallMode::Composed, false);
    let (events, _) = run_agent(&agent, "Hello.").await;
    assert_eq!(model.requests().len(), 3);
    assert_eq!(model.remaining(), 1);
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::Done {
                reason: aptix::DoneReason::ModelError(_),
                ..
            })
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_composed_call_of_an_unknown_tool_is_answered_for_the_model_to_correct() {
    let model = std::sync::Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new()
            .text(r#"{"message":"","calls":[{"_tool":"feelings","_activity":"","text":"Yay"}]}"#),
        ScriptedTurn::new().text(SENTIMENT_CALL),
        ScriptedTurn::new().text(r#"{"message":"It is positive.","calls":[]}"#),
    ]));
    let agent = composed_agent(model.clone(), CallMode::Composed, false);
    let (events, _) = run_agent(&agent, "How does 'Yay' feel?").await;
    let results = results_of(&events);
    assert_eq!(results[0].1["error"]["code"], "unknown_tool", "{results:?}");
    assert_eq!(results[1].1["ok"], json!(true));
    assert!(model.requests()[1].messages.iter().any(
        |message| matches!(message, aptix::transcript::Message::User { content }
                if content.contains("unknown_tool"))
    ));
}

#[tokio::test]
async fn an_openai_server_that_ignores_the_schema_is_asked_again() {
    use aptix::model::openai::OpenAiChat;
    use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
    let server = MockOpenAiServer::start([
        OpenAiTurn::text("I think it feels positive.").into_response(),
        OpenAiTurn::text(SENTIMENT_CALL).into_response(),
        OpenAiTurn::text(r#"{"message":"Positive.","calls":[]}"#).into_response(),
    ])
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    let model = OpenAiChat::new("local").with_base_url(server.base_url());
    let agent = composed_agent(std::sync::Arc::new(model), CallMode::Composed, false);
    let (events, _) = run_agent(&agent, "How does 'Yay' feel?").await;
    assert_eq!(results_of(&events)[0].1["ok"], json!(true), "{events:?}");
    assert_eq!(shown(&events), "Checking.Positive.");
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().expect("messages");
    let [.., answer, told] = messages.as_slice() else {
        panic!("{messages:?}")
    };
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["content"], "I think it feels positive.");
    assert_eq!(told["role"], "user");
    assert!(
        told["content"]
            .as_str()
            .is_some_and(|text| text.contains("not the JSON object asked for")),
        "{told}"
    );
    assert_eq!(
        requests[1].body["response_format"],
        requests[0].body["response_format"]
    );
}
