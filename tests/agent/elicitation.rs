//! A running call asks a person something (`ToolContext::elicit`): in an
//! agent run the question is `AgentEvent::Elicitation`, answered through its
//! reply; unanswered, or where nobody can be asked, it is `Cancel` at once,
//! so no call hangs for want of a reader. (Remote MCP servers' elicitations
//! go the same way: tests/mcp/mcp_client.rs.)

use std::sync::Arc;

use aptix::live::{ElicitationAnswer, ElicitationRequest};
use aptix::prelude::*;
use aptix::{Agent, AgentEvent, Conversation, Envelope, Executor, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Arguments of `sign_up`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SignUp {
    /// The plan.
    pub plan: String,
}

/// Signs a person up, asking for their name while it runs.
#[agent_tool(name = "sign_up", usage = "Call to sign a person up.")]
async fn sign_up(args: SignUp, ctx: &ToolContext) -> Result<String, ToolError> {
    let asked = ElicitationRequest::form(
        "sign_up",
        format!("Your name for the {} plan?", args.plan),
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    );
    Ok(match ctx.elicit(asked).await {
        ElicitationAnswer::Accept(answer) => {
            format!("signed up {}", answer["name"].as_str().unwrap_or("?"))
        }
        ElicitationAnswer::Decline => "declined".to_owned(),
        ElicitationAnswer::Cancel => "cancelled".to_owned(),
    })
}

fn agent() -> Agent {
    Agent::builder()
        .shared_model(Arc::new(ScriptedModel::new(vec![
            ScriptedTurn::new().tool_call("call_1", "sign_up", r#"{"plan":"pro"}"#),
            ScriptedTurn::new().text("Done."),
        ])))
        .catalog(
            aptix::tools![SignUpTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The result of `call_1` among `events`.
fn result_of(events: &[AgentEvent]) -> Value {
    aptix_testkit::call_envelope(events, "call_1")["result"].clone()
}

#[tokio::test]
async fn a_question_is_an_event_and_its_answer_reaches_the_call() {
    let agent = agent();
    let mut conversation = Conversation::new("conv-elicit");
    let mut run = agent.run(&mut conversation, Input::User("Sign me up.".into()));
    let mut events = Vec::new();
    let mut asked = Vec::new();
    while let Some(event) = run.next().await {
        if let AgentEvent::Elicitation {
            id,
            name,
            request,
            reply,
            kind,
        } = &event
        {
            assert_eq!((id.as_str(), name.as_str()), ("call_1", "sign_up"));
            assert!(kind.is_some());
            assert!(reply.is_open());
            asked.push(request.clone());
            assert!(reply.answer(ElicitationAnswer::Accept(json!({"name": "Ada"}))));
            // The first answer counts.
            assert!(!reply.answer(ElicitationAnswer::Decline));
        }
        events.push(event);
    }
    drop(run);
    assert_eq!(asked.len(), 1, "{events:#?}");
    assert_eq!(asked[0].asked_by, "sign_up");
    assert_eq!(asked[0].message, "Your name for the pro plan?");
    assert_eq!(
        asked[0].schema.as_ref().map(|s| &s["type"]),
        Some(&json!("object"))
    );
    assert_eq!(result_of(&events), json!("signed up Ada"));
    // The question never reaches the model: only the result does.
    let transcript = serde_json::to_string(&conversation.messages).unwrap_or_default();
    assert!(!transcript.contains("Your name for"), "{transcript}");
}

#[tokio::test]
async fn a_question_nobody_answers_is_cancelled_and_the_run_goes_on() {
    let agent = agent();
    let mut conversation = Conversation::new("conv-elicit-ignored");
    // A reader that collects every event and answers none: each
    // reply is dropped with its event, unanswered.
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("Sign me up.".into()))
        .filter(|event| std::future::ready(!matches!(event, AgentEvent::Elicitation { .. })))
        .collect()
        .await;
    assert_eq!(result_of(&events), json!("cancelled"));
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            reason: aptix::DoneReason::Completed,
            ..
        })
    ));
}

#[tokio::test]
async fn a_declined_question_is_the_calls_to_handle() {
    let agent = agent();
    let mut conversation = Conversation::new("conv-elicit-declined");
    let mut run = agent.run(&mut conversation, Input::User("Sign me up.".into()));
    let mut events = Vec::new();
    while let Some(event) = run.next().await {
        if let AgentEvent::Elicitation { reply, .. } = &event {
            reply.answer(ElicitationAnswer::Decline);
        }
        events.push(event);
    }
    assert_eq!(result_of(&events), json!("declined"));
}

#[tokio::test]
async fn without_a_run_nobody_is_asked_and_the_answer_is_cancel() {
    let catalog = aptix::tools![SignUpTool]
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let call = aptix::executor::ToolCall::new("c1", "sign_up", r#"{"plan":"pro"}"#);
    let envelope: Envelope = Executor::new(catalog)
        .execute(&call, &ToolContext::new().with_tool_call_id("c1"))
        .await
        .into_envelope()
        .unwrap_or_else(|| panic!("no envelope"));
    assert_eq!(
        envelope.result_as::<String>().and_then(Result::ok),
        Some("cancelled".to_owned())
    );
}

/// Charges (behind an approval), so that what follows runs in the
/// background once approved.
#[agent_tool(
    name = "charge",
    usage = "Call to charge the card.",
    approval = requires_approval
)]
async fn charge(args: SignUp) -> Result<String, ToolError> {
    Ok(format!("charged for {}", args.plan))
}

/// `sign_up` with a short time limit: a question left waiting shows as a
/// timeout rather than the `Cancel` it must be.
#[agent_tool(
    name = "sign_up_soon",
    usage = "Call to sign a person up.",
    timeout = "3s"
)]
async fn sign_up_soon(args: SignUp, ctx: &ToolContext) -> Result<String, ToolError> {
    sign_up(args, ctx).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_runs_question_held_by_subscribers_does_not_wait_out_the_time_limit() {
    let agent = Agent::builder()
        .shared_model(Arc::new(ScriptedModel::new(vec![
            ScriptedTurn::new().tool_call("call_charge", "charge", r#"{"plan":"pro"}"#),
            ScriptedTurn::new().tool_call("call_1", "sign_up_soon", r#"{"plan":"pro"}"#),
            ScriptedTurn::new().text("Done."),
        ])))
        .catalog(
            aptix::tools![ChargeTool, SignUpSoonTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let durable =
        aptix::durable::DurableAgent::builder(agent, Arc::new(aptix::store::MemoryStore::new()))
            .deadline_worker(None)
            .build();
    let suspended: Vec<AgentEvent> = durable
        .send("conv-background", Input::User("Sign me up.".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    assert!(
        matches!(
            suspended.last(),
            Some(AgentEvent::Done {
                reason: aptix::DoneReason::Suspended(_),
                ..
            })
        ),
        "{suspended:#?}"
    );
    // A subscriber that reads every event of the background run and
    // answers none: the broadcast channel keeps a copy of each event
    // after every subscriber has read it.
    let mut background = durable.subscribe();
    durable
        .resolve("conv-background", "call_charge", aptix::Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut events = Vec::new();
    loop {
        let received = tokio::time::timeout(std::time::Duration::from_secs(30), background.recv())
            .await
            .unwrap_or_else(|_| panic!("the background run never ended: {events:#?}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let done = matches!(received.event, AgentEvent::Done { .. });
        events.push(received.event);
        if done {
            break;
        }
    }
    let envelope = aptix_testkit::call_envelope(&events, "call_1");
    assert_eq!(envelope["result"], json!("cancelled"), "{envelope}");
}
