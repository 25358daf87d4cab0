//! Hooks: see every call before and after it runs; rewrite, answer, deny or
//! halt; repair what the model got wrong; compose in order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aptix::agent::{
    AfterCall, BeforeCall, HookCall, HookFuture, Invalid, InvalidCall, Repair, ToolHook,
};
use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Arguments of `transfer`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Transfer {
    /// Whole euros to send.
    pub euros: u32,
    /// To whom.
    pub to: String,
}

/// Sends money (counts its runs).
#[agent_tool(name = "transfer", usage = "Call to send money.")]
async fn transfer(args: Transfer, ctx: &ToolContext) -> Result<String, ToolError> {
    if ctx
        .conversation_id()
        .is_some_and(|id| id.starts_with("count-"))
    {
        RUNS.fetch_add(1, Ordering::SeqCst);
    }
    Ok(format!("sent {} to {}", args.euros, args.to))
}

type BeforeFn = Box<dyn for<'c> Fn(&HookCall<'c>) -> BeforeCall + Send + Sync>;
type AfterFn = Box<dyn Fn(&Value) -> AfterCall + Send + Sync>;
type InvalidFn = Box<dyn for<'c> Fn(&InvalidCall<'c>) -> Repair + Send + Sync>;

/// Arguments of `pay`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Pay {
    /// The card number.
    pub card: String,
}

/// What `pay` charged.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Paid {
    /// The card number charged.
    pub card: String,
}

/// Pays by card (its card number never reaches an event).
#[agent_tool(name = "pay", usage = "Call to pay by card.", redact = ["/card"])]
async fn pay(args: Pay) -> Result<Paid, ToolError> {
    Ok(Paid { card: args.card })
}

/// A hook written as a few closures.
#[derive(Default)]
struct Scripted {
    name: &'static str,
    before: Option<BeforeFn>,
    after: Option<AfterFn>,
    invalid: Option<InvalidFn>,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl ToolHook for Scripted {
    fn name(&self) -> &str {
        self.name
    }

    fn before_call<'a>(&'a self, call: HookCall<'a>) -> HookFuture<'a, BeforeCall> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(call.arguments.clone());
        let decision = self
            .before
            .as_ref()
            .map_or(BeforeCall::Continue, |before| before(&call));
        Box::pin(async move { decision })
    }

    fn after_call<'a>(
        &'a self,
        _call: HookCall<'a>,
        envelope: &'a Value,
    ) -> HookFuture<'a, AfterCall> {
        let decision = self
            .after
            .as_ref()
            .map_or(AfterCall::Keep, |after| after(envelope));
        Box::pin(async move { decision })
    }

    fn on_invalid_call<'a>(&'a self, call: InvalidCall<'a>) -> HookFuture<'a, Repair> {
        let decision = self
            .invalid
            .as_ref()
            .map_or(Repair::Return, |invalid| invalid(&call));
        Box::pin(async move { decision })
    }
}

fn agent_with(arguments: &str, name: &str, hooks: Vec<Scripted>) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_1", name, arguments),
        ScriptedTurn::new().text("Done."),
    ]));
    let mut builder = Agent::builder().shared_model(model.clone()).catalog(
        aptix::tools![TransferTool, PayTool]
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    for hook in hooks {
        builder = builder.hook(hook);
    }
    (builder.build().unwrap_or_else(|e| panic!("{e}")), model)
}

async fn run(agent: &Agent, conversation: &str) -> (Vec<AgentEvent>, Conversation) {
    let mut conversation = Conversation::new(conversation);
    let events = agent
        .run(&mut conversation, Input::User("Pay Ada.".into()))
        .collect()
        .await;
    (events, conversation)
}

/// The envelope the `ToolCallResult` event shows, and the text the model got.
fn result(events: &[AgentEvent], conversation: &Conversation) -> (Value, String) {
    let event = events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolCallResult { envelope, .. } => Some(envelope.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result: {events:?}"));
    let text = conversation
        .messages
        .iter()
        .find_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default();
    (event, text)
}

/// Halts the run on a transfer to Mallory.
fn mallory_guard() -> Scripted {
    Scripted {
        name: "fraud_guard",
        before: Some(Box::new(|call| {
            if call.arguments["to"] == "Mallory" {
                BeforeCall::Halt("Mallory is on the blocklist.".into())
            } else {
                BeforeCall::Continue
            }
        })),
        ..Scripted::default()
    }
}

fn reason(events: &[AgentEvent]) -> &DoneReason {
    match events.last() {
        Some(AgentEvent::Done { reason, .. }) => reason,
        other => panic!("not Done: {other:?}"),
    }
}

#[tokio::test]
async fn a_hook_denies_a_call_with_a_message_the_model_sees() {
    let guard = Scripted {
        name: "limit",
        before: Some(Box::new(|call| {
            if call.arguments["euros"].as_u64().unwrap_or(0) > 100 {
                BeforeCall::Deny("Transfers over 100 euros need a person.".into())
            } else {
                BeforeCall::Continue
            }
        })),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":500,"to":"Ada"}"#, "transfer", vec![guard]);
    let before = RUNS.load(Ordering::SeqCst);
    let (events, conversation) = run(&agent, "count-deny").await;
    let (envelope, text) = result(&events, &conversation);
    assert_eq!(envelope["error"]["code"], "denied");
    assert!(text.contains("need a person"), "{text}");
    assert_eq!(RUNS.load(Ordering::SeqCst), before, "the tool ran");
    assert!(matches!(reason(&events), DoneReason::Completed));
}

#[tokio::test]
async fn a_rewrite_is_validated_and_runs_and_the_next_hook_sees_it() {
    let clamp = Scripted {
        name: "clamp",
        before: Some(Box::new(|call| {
            let mut arguments = call.arguments.clone();
            arguments["euros"] = json!(100);
            BeforeCall::Rewrite(arguments)
        })),
        ..Scripted::default()
    };
    let watcher = Scripted {
        name: "watcher",
        ..Scripted::default()
    };
    let seen = watcher.seen.clone();
    let (agent, _) = agent_with(
        r#"{"euros":500,"to":"Ada"}"#,
        "transfer",
        vec![clamp, watcher],
    );
    let (events, conversation) = run(&agent, "rewrite").await;
    let (envelope, _) = result(&events, &conversation);
    assert_eq!(envelope["result"], "sent 100 to Ada");
    assert_eq!(
        *seen.lock().unwrap_or_else(|e| e.into_inner()),
        [json!({"euros": 100, "to": "Ada"})]
    );

    // A rewrite that does not fit the schema is the hook's fault.
    let broken = Scripted {
        name: "broken",
        before: Some(Box::new(|_| BeforeCall::Rewrite(json!({"euros": "many"})))),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":5,"to":"Ada"}"#, "transfer", vec![broken]);
    let (events, conversation) = run(&agent, "rewrite-broken").await;
    assert_eq!(
        result(&events, &conversation).0["error"]["code"],
        "internal"
    );
}

#[tokio::test]
async fn a_hook_answers_without_running_the_tool() {
    let cache = Scripted {
        name: "cache",
        before: Some(Box::new(|_| {
            BeforeCall::Answer(json!("sent 5 to Ada (cached)"))
        })),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":5,"to":"Ada"}"#, "transfer", vec![cache]);
    let before = RUNS.load(Ordering::SeqCst);
    let (events, conversation) = run(&agent, "count-answer").await;
    assert_eq!(
        result(&events, &conversation).0["result"],
        "sent 5 to Ada (cached)"
    );
    assert_eq!(RUNS.load(Ordering::SeqCst), before, "the tool ran");

    // An answer that is not of the tool's output type is refused.
    let wrong = Scripted {
        name: "wrong",
        before: Some(Box::new(|_| BeforeCall::Answer(json!({"not": "a string"})))),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":5,"to":"Ada"}"#, "transfer", vec![wrong]);
    let (events, conversation) = run(&agent, "answer-wrong").await;
    assert_eq!(
        result(&events, &conversation).0["error"]["code"],
        "internal"
    );
}

#[tokio::test]
async fn a_tripped_guardrail_halts_the_run_with_every_call_answered() {
    let guard = mallory_guard();
    let (agent, model) = agent_with(r#"{"euros":5,"to":"Mallory"}"#, "transfer", vec![guard]);
    let (events, conversation) = run(&agent, "halt").await;
    let DoneReason::Halted { by, message } = reason(&events) else {
        panic!("not halted: {events:?}")
    };
    assert_eq!(by, "fraud_guard");
    assert_eq!(message, "Mallory is on the blocklist.");
    // The model was not asked again, and the call has its result.
    assert_eq!(model.requests().len(), 1);
    assert_eq!(result(&events, &conversation).0["error"]["code"], "denied");
}

/// Refunds a payment, once a person approves.
#[agent_tool(
    name = "refund_payment",
    usage = "Call to refund a payment.",
    approval = requires_approval
)]
async fn refund_payment(args: Transfer) -> Result<String, ToolError> {
    Ok(format!("refunded {} to {}", args.euros, args.to))
}

#[tokio::test]
async fn a_halt_in_a_turn_that_also_waits_for_an_approval_answers_the_waiting_call() {
    let guard = mallory_guard();
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new()
            .tool_call("call_refund", "refund_payment", r#"{"euros":5,"to":"Ada"}"#)
            .tool_call("call_mallory", "transfer", r#"{"euros":5,"to":"Mallory"}"#),
        ScriptedTurn::new().text("never asked"),
    ]));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(
            aptix::tools![TransferTool, RefundPaymentTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .hook(guard)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (events, conversation) = run(&agent, "halt-and-wait").await;
    assert!(
        matches!(reason(&events), DoneReason::Halted { by, .. } if by == "fraud_guard"),
        "{events:?}"
    );
    assert_eq!(model.requests().len(), 1);
    // Halted means over: the call that waited for an approval is answered
    // (nobody can approve it any more), so no call of the turn is left
    // without a result.
    let answered = aptix_testkit::tool_results_by_id(&conversation.messages);
    assert_eq!(answered.len(), 2, "{answered:?}");
    let refund = answered
        .iter()
        .find(|(id, _)| id == "call_refund")
        .map(|(_, envelope)| envelope.clone())
        .unwrap_or_default();
    assert_eq!(refund["error"]["code"], "cancelled", "{refund}");
    assert!(
        refund["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("fraud_guard")),
        "{refund}"
    );
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolCallResult { id, .. } if id == "call_refund"
    )));
}

/// Takes its time in both hook methods, as a hook that asks a service does.
struct Slow(std::time::Duration);

impl ToolHook for Slow {
    fn name(&self) -> &str {
        "slow"
    }

    fn before_call<'a>(&'a self, _call: HookCall<'a>) -> HookFuture<'a, BeforeCall> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            BeforeCall::Continue
        })
    }

    fn after_call<'a>(
        &'a self,
        _call: HookCall<'a>,
        _envelope: &'a Value,
    ) -> HookFuture<'a, AfterCall> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            AfterCall::Keep
        })
    }
}

#[tokio::test]
async fn slow_hooks_do_not_count_against_the_tools_time_limit() {
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_1", "transfer", r#"{"euros":5,"to":"Ada"}"#),
        ScriptedTurn::new().text("Done."),
    ]));
    // The tool answers at once; each hook takes longer than the limit and
    // its grace together.
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(
            aptix::tools![TransferTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .tool_timeout(std::time::Duration::from_millis(100))
        .hook(Slow(std::time::Duration::from_millis(400)))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (events, conversation) = run(&agent, "slow-hooks").await;
    let (envelope, _) = result(&events, &conversation);
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert_eq!(envelope["result"], "sent 5 to Ada");
}

#[tokio::test]
async fn what_a_hook_and_the_policy_decide_is_what_reaches_the_provider() {
    use aptix_testkit::mock_openai::{MockOpenAiServer, OpenAiTurn};
    let server = MockOpenAiServer::start([
        OpenAiTurn::new()
            .tool_call("call_send", "transfer", &[r#"{"euros":5,"to":"Ada"}"#])
            .tool_call(
                "call_refund",
                "refund_payment",
                &[r#"{"euros":5,"to":"Ada"}"#],
            )
            .into_response(),
        OpenAiTurn::text("Done.").into_response(),
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let rewrite = Scripted {
        name: "summarize",
        after: Some(Box::new(|_| AfterCall::Replace("Sent.".into()))),
        ..Scripted::default()
    };
    let agent = Agent::builder()
        .model(
            aptix::model::openai::OpenAiChat::new("gpt-4o-mini").with_base_url(server.base_url()),
        )
        .catalog(
            aptix::tools![TransferTool, RefundPaymentTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .hook(rewrite)
        .approval_policy(|call: &aptix::agent::ApprovalCall<'_>| {
            if call.call.definition.name() == "refund_payment" {
                aptix::agent::ApprovalDecision::Deny("Refunds are closed today.".into())
            } else {
                aptix::agent::ApprovalDecision::Auto
            }
        })
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (events, _) = run(&agent, "provider-bytes").await;
    assert!(
        matches!(reason(&events), DoneReason::Completed),
        "{events:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let tool_messages: Vec<(String, String)> = requests[1].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        tool_messages[0],
        ("call_send".to_owned(), "Sent.".to_owned())
    );
    assert_eq!(tool_messages[1].0, "call_refund");
    let denied: Value = serde_json::from_str(&tool_messages[1].1).unwrap_or(Value::Null);
    assert_eq!(denied["error"]["code"], "denied", "{denied}");
    assert_eq!(denied["error"]["message"], "Refunds are closed today.");
}

#[tokio::test]
async fn after_call_changes_what_the_model_sees_not_what_the_events_show() {
    let summarize = Scripted {
        name: "summarize",
        after: Some(Box::new(|_| AfterCall::Replace("Transfer done.".into()))),
        ..Scripted::default()
    };
    let (agent, model) = agent_with(r#"{"euros":5,"to":"Ada"}"#, "transfer", vec![summarize]);
    let (events, conversation) = run(&agent, "after").await;
    let (envelope, text) = result(&events, &conversation);
    assert_eq!(envelope["result"], "sent 5 to Ada");
    assert_eq!(text, "Transfer done.");
    let sent = serde_json::to_string(&model.requests()[1].messages).unwrap_or_default();
    assert!(
        sent.contains("Transfer done.") && !sent.contains("sent 5 to Ada"),
        "{sent}"
    );

    let stop = Scripted {
        name: "stop_after",
        after: Some(Box::new(|_| {
            AfterCall::Halt("One transfer per run.".into())
        })),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":5,"to":"Ada"}"#, "transfer", vec![stop]);
    let (events, conversation) = run(&agent, "after-halt").await;
    assert!(matches!(reason(&events), DoneReason::Halted { by, .. } if by == "stop_after"));
    assert_eq!(result(&events, &conversation).0["result"], "sent 5 to Ada");
}

#[tokio::test]
async fn a_hook_repairs_a_misspelled_tool_and_malformed_arguments() {
    let speller = Scripted {
        name: "speller",
        invalid: Some(Box::new(|call| match call.invalid {
            Invalid::UnknownTool { known } if call.name == "transfre" => {
                assert_eq!(known, ["pay", "transfer"]);
                Repair::Rename("transfer".into())
            }
            Invalid::Arguments { problem, .. } => {
                assert!(problem.contains("euros"), "{problem}");
                Repair::Arguments(call.arguments.replace("\"five\"", "5"))
            }
            _ => Repair::Return,
        })),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":"five","to":"Ada"}"#, "transfre", vec![speller]);
    let (events, conversation) = run(&agent, "repair").await;
    let (envelope, text) = result(&events, &conversation);
    assert!(text.contains("sent 5 to Ada"), "{text}");
    // Events of a call made under a name no tool has show nothing: a hook
    // may have renamed it to a tool that declares secrets.
    assert_eq!(envelope["result"], "[redacted]");

    // Without a repair the model is told, as without hooks.
    let idle = Scripted {
        name: "idle",
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"euros":5,"to":"Ada"}"#, "nope", vec![idle]);
    let (events, conversation) = run(&agent, "no-repair").await;
    assert_eq!(
        result(&events, &conversation).0["error"]["code"],
        "unknown_tool"
    );
}

#[tokio::test]
async fn a_call_renamed_to_a_tool_with_secrets_shows_none_of_them() {
    let speller = Scripted {
        name: "speller",
        invalid: Some(Box::new(|call| match call.invalid {
            Invalid::UnknownTool { .. } if call.name == "pya" => Repair::Rename("pay".into()),
            _ => Repair::Return,
        })),
        ..Scripted::default()
    };
    let (agent, _) = agent_with(r#"{"card":"4111-1111-secret"}"#, "pya", vec![speller]);
    let (events, conversation) = run(&agent, "rename-secret").await;
    // It ran as `pay`.
    let text = conversation
        .messages
        .iter()
        .find_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default();
    assert!(text.contains("4111-1111-secret"), "{text}");
    // And no event shows the card, whole or streamed in pieces.
    let streamed: String = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(!streamed.contains("secret"), "{streamed}");
    assert!(
        !format!("{events:?}").contains("4111-1111-secret"),
        "{events:?}"
    );
}

/// Found in review: a hook's `Rename` was checked against the agent's whole
/// catalog, so it could run a tool `prepare_step` had taken away at that
/// step (the model offered only `pay` could reach `transfer`).
#[tokio::test]
async fn a_rename_to_a_tool_the_step_did_not_offer_does_not_run_it() {
    let speller = Scripted {
        name: "speller",
        invalid: Some(Box::new(|call| match call.invalid {
            Invalid::UnknownTool { .. } => Repair::Rename("transfer".into()),
            _ => Repair::Return,
        })),
        ..Scripted::default()
    };
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_1", "transfre", r#"{"euros":5,"to":"Ada"}"#),
        ScriptedTurn::new().text("Done."),
    ]));
    let catalog = aptix::tools![TransferTool, PayTool]
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let only_pay = catalog.only(["pay"]).unwrap_or_else(|e| panic!("{e}"));
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(catalog)
        .prepare_step(move |_| aptix::agent::PreparedStep::all().tools(only_pay.clone()))
        .hook(speller)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let before = RUNS.load(Ordering::SeqCst);
    let (events, conversation) = run(&agent, "count-rename-offered").await;
    let (envelope, _) = result(&events, &conversation);
    assert_eq!(
        RUNS.load(Ordering::SeqCst),
        before,
        "a tool the step did not offer ran"
    );
    assert_eq!(envelope["error"]["code"], "unknown_tool", "{envelope}");
}
