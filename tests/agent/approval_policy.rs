//! Approval decided at run time: a policy sees each validated call and its
//! conversation, and answers run, ask a person, or deny; the declared
//! `approval = requires_approval` is a floor no policy lowers. (The durable
//! paths, `ApproveAlways` and argument-bound approvals are in
//! `tests/durable/durable.rs`.)

use crate::common::done;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aptix::agent::{
    ApprovalCall, ApprovalDecision, BeforeCall, HookCall, HookFuture, SuspendedCall, ToolHook,
};
use aptix::executor::ToolCall;
use aptix::meta::AwaitReason;
use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Runs of `refund` per conversation (tests run at once).
static RUNS: std::sync::LazyLock<Mutex<Vec<String>>> = std::sync::LazyLock::new(Default::default);

fn runs(conversation: &str) -> usize {
    RUNS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|id| *id == conversation)
        .count()
}

/// Arguments of `refund`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Refund {
    /// Cents to give back.
    pub cents: u32,
}

/// Gives money back (declared `auto`).
#[agent_tool(name = "refund", usage = "Call to refund a customer.")]
async fn refund(args: Refund, ctx: &ToolContext) -> Result<String, ToolError> {
    RUNS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ctx.conversation_id().unwrap_or_default().to_owned());
    Ok(format!("refunded {}", args.cents))
}

/// Deletes an account (declared `requires_approval`).
#[agent_tool(
    name = "delete_account",
    usage = "Call to delete the account.",
    approval = requires_approval
)]
async fn delete_account(args: Refund, ctx: &ToolContext) -> Result<String, ToolError> {
    let _ = args;
    RUNS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ctx.conversation_id().unwrap_or_default().to_owned());
    Ok("deleted".into())
}

fn agent(
    name: &str,
    arguments: &str,
    policy: impl aptix::agent::ApprovalPolicy,
    hook: Option<Halve>,
) -> Agent {
    let mut builder = Agent::builder()
        .model(ScriptedModel::new(vec![
            ScriptedTurn::new().tool_call("call_1", name, arguments),
            ScriptedTurn::new().text("Done."),
        ]))
        .catalog(
            aptix::tools![RefundTool, DeleteAccountTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .approval_policy(policy);
    if let Some(hook) = hook {
        builder = builder.hook(hook);
    }
    builder.build().unwrap_or_else(|e| panic!("{e}"))
}

/// Refunds over 100 euros need a person; more than 1000 are refused.
fn limits(call: &ApprovalCall<'_>) -> ApprovalDecision {
    match call.call.arguments["cents"].as_u64().unwrap_or(0) {
        0..=10_000 => ApprovalDecision::Auto,
        10_001..=100_000 => ApprovalDecision::Ask,
        _ => ApprovalDecision::Deny("Refunds over 1000 euros are not allowed.".into()),
    }
}

async fn run(agent: &Agent, conversation: &mut Conversation) -> Vec<AgentEvent> {
    agent
        .run(conversation, Input::User("Refund the customer.".into()))
        .collect()
        .await
}

fn suspended(events: &[AgentEvent]) -> &[SuspendedCall] {
    match done(events) {
        DoneReason::Suspended(calls) => calls,
        other => panic!("not suspended: {other:?}"),
    }
}

fn results(conversation: &Conversation) -> Vec<Value> {
    aptix_testkit::tool_results(&conversation.messages)
}

#[tokio::test]
async fn a_policy_lets_small_calls_run_holds_large_ones_and_refuses_the_largest() {
    // Small: runs without asking.
    let mut small = Conversation::new("policy-small");
    let events = run(
        &agent("refund", r#"{"cents":500}"#, limits, None),
        &mut small,
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed));
    assert_eq!(runs("policy-small"), 1);

    // Large: waits for a person, and has not run.
    let mut large = Conversation::new("policy-large");
    let agent_large = agent("refund", r#"{"cents":50000}"#, limits, None);
    let events = run(&agent_large, &mut large).await;
    let waiting = suspended(&events);
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].awaiting.reason, AwaitReason::Approval);
    assert_eq!(waiting[0].payload().as_str(), r#"{"cents":50000}"#);
    assert_eq!(runs("policy-large"), 0, "a held call ran");
    // Approved: the application runs it past the gate and hands the result in.
    let call = ToolCall::new("call_1", "refund", r#"{"cents":50000}"#);
    let context = ToolContext::new().with_conversation_id("policy-large");
    let execution = agent_large
        .executor()
        .execute_approved(&call, &context)
        .await;
    let aptix::executor::Outcome::Final(envelope) = execution.outcome else {
        panic!("the approved call did not finish");
    };
    assert!(envelope.is_ok());
    let events: Vec<AgentEvent> = agent_large
        .run(
            &mut large,
            Input::ToolResults(vec![("call_1".into(), envelope)]),
        )
        .collect()
        .await;
    assert!(matches!(done(&events), DoneReason::Completed));
    assert_eq!(runs("policy-large"), 1);

    // Largest: refused with the policy's words; never runs.
    let mut huge = Conversation::new("policy-huge");
    let events = run(
        &agent("refund", r#"{"cents":500000}"#, limits, None),
        &mut huge,
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed));
    let results = results(&huge);
    assert_eq!(results[0]["error"]["code"], "denied");
    assert_eq!(
        results[0]["error"]["message"],
        "Refunds over 1000 euros are not allowed."
    );
    assert_eq!(runs("policy-huge"), 0, "a denied call ran");
}

#[tokio::test]
async fn a_declared_approval_is_a_floor_no_policy_lowers() {
    let always_auto = |_: &ApprovalCall<'_>| ApprovalDecision::Auto;
    let mut conversation = Conversation::new("policy-floor");
    let events = run(
        &agent("delete_account", r#"{"cents":1}"#, always_auto, None),
        &mut conversation,
    )
    .await;
    let waiting = suspended(&events);
    assert_eq!(waiting[0].awaiting.reason, AwaitReason::Approval);
    assert_eq!(runs("policy-floor"), 0, "a declared approval was waived");
}

/// Halves every refund (a hook, which runs before the policy).
struct Halve;

impl ToolHook for Halve {
    fn name(&self) -> &str {
        "halve"
    }

    fn before_call<'a>(&'a self, call: HookCall<'a>) -> HookFuture<'a, BeforeCall> {
        let cents = call.arguments["cents"].as_u64().unwrap_or(0);
        Box::pin(async move { BeforeCall::Rewrite(json!({ "cents": cents / 2 })) })
    }
}

#[derive(Default)]
struct Seen {
    arguments: Vec<Value>,
    conversation: Vec<String>,
    transcript: Vec<usize>,
    last_user: Vec<String>,
}

#[tokio::test]
async fn the_policy_sees_the_call_as_the_hooks_left_it_and_the_conversation() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    let policy = move |call: &ApprovalCall<'_>| {
        let mut seen = record.lock().unwrap_or_else(|e| e.into_inner());
        seen.arguments.push(call.call.arguments.clone());
        seen.conversation.push(call.conversation_id.to_owned());
        seen.transcript.push(call.transcript.len());
        if let Some(Message::User { content, .. }) = call
            .transcript
            .iter()
            .find(|message| matches!(message, Message::User { .. }))
        {
            seen.last_user.push(content.clone());
        }
        // 30 000 cents halved is 15 000: held.
        limits(call)
    };
    let mut conversation = Conversation::new("policy-sees");
    let events = run(
        &agent("refund", r#"{"cents":30000}"#, policy, Some(Halve)),
        &mut conversation,
    )
    .await;
    let waiting = suspended(&events);
    // The held call carries the hook's arguments.
    assert_eq!(waiting[0].payload().as_str(), r#"{"cents":15000}"#);
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(seen.arguments, vec![json!({"cents": 15000})]);
    assert_eq!(seen.conversation, vec!["policy-sees".to_owned()]);
    // The user's message and the model's turn that made the call.
    assert_eq!(seen.transcript, vec![2]);
    assert_eq!(seen.last_user, vec!["Refund the customer.".to_owned()]);
}

#[tokio::test]
async fn arguments_that_do_not_fit_never_reach_the_policy() {
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    let policy = move |_: &ApprovalCall<'_>| {
        count.fetch_add(1, Ordering::SeqCst);
        ApprovalDecision::Deny("no".into())
    };
    let mut conversation = Conversation::new("policy-invalid");
    run(
        &agent("refund", r#"{"cents":"a lot"}"#, policy, None),
        &mut conversation,
    )
    .await;
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    assert_eq!(
        results(&conversation)[0]["error"]["code"],
        "invalid_arguments"
    );
}
