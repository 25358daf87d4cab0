//! What a tool can rely on in its context: who the run is for (the agent's
//! name, the conversation's user and tenant), which tool was called and
//! why, and the state its declaration says it takes.

use std::sync::Arc;

use aptix::agent::AgentError;
use aptix::prelude::*;
use aptix::{
    Agent, AgentEvent, Catalog, Conversation, Input, ToolEntry, activity::Activities,
    context::StateType,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn, ToolHarness};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// How a message went out.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Delivery {
    /// `pager` or `email`.
    pub via: String,
    /// Why the model sent it, when it said.
    pub because: Option<String>,
}

/// Pages whoever is on call (shares the `deliver` activity).
#[agent_tool(
    name = "page_on_call",
    usage = "Call when production is down.",
    output = Delivery,
    activity = "deliver"
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct PageOnCall {
    /// What happened.
    pub subject: String,
}

/// Emails a customer (shares the `deliver` activity).
#[agent_tool(
    name = "email_customer",
    usage = "Call to tell a customer their order shipped.",
    output = Delivery,
    activity = "deliver"
)]
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EmailCustomer {
    /// What to tell them.
    pub subject: String,
}

/// The one activity behind both tools: it goes out by pager or by email
/// depending on which tool was called.
fn deliver_activity(sent: Arc<std::sync::Mutex<Vec<String>>>) -> Activities {
    Activities::new().bind_json("deliver", move |args, ctx| {
        let sent = sent.clone();
        async move {
            let via = match ctx.tool_name() {
                "page_on_call" => "pager",
                "email_customer" => "email",
                other => {
                    return Err(ToolError::internal_message(format!(
                        "`deliver` is bound for no tool named `{other}`"
                    )));
                }
            };
            let subject = args["subject"].as_str().unwrap_or_default();
            sent.lock()
                .map_err(|_| ToolError::internal_message("the log is poisoned"))?
                .push(format!("{via}: {subject}"));
            Ok(json!({ "via": via, "because": ctx.reasoning() }))
        }
    })
}

fn results_by_name(events: &[AgentEvent]) -> Vec<(String, Value)> {
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

#[tokio::test]
async fn one_activity_bound_for_two_tools_tells_them_apart_and_reads_the_reason() {
    let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
    let catalog = aptix::tools![PageOnCall, EmailCustomer]
        .activities(deliver_activity(sent.clone()))
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let model = ScriptedModel::new(vec![
        ScriptedTurn::new()
            .tool_call(
                "call_1",
                "page_on_call",
                r#"{"subject":"db down","_reasoningForCall":"The database stopped answering."}"#,
            )
            .tool_call("call_2", "email_customer", r#"{"subject":"shipped"}"#),
        ScriptedTurn::new().text("Done."),
    ]);
    let agent = Agent::builder()
        .model(model)
        .catalog(catalog.clone())
        .ask_reasoning(true)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let mut conversation = Conversation::new("conv-deliver");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("Handle it.".into()))
        .collect()
        .await;
    let results = results_by_name(&events);
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!(results[0].0, "page_on_call");
    assert_eq!(
        results[0].1["result"],
        json!({"via": "pager", "because": "The database stopped answering."}),
        "{}",
        results[0].1
    );
    // No reason given: none seen, and not the other call's.
    assert_eq!(results[1].0, "email_customer");
    assert_eq!(
        results[1].1["result"],
        json!({"via": "email", "because": null}),
        "{}",
        results[1].1
    );
    let mut log = sent.lock().expect("not poisoned").clone();
    log.sort();
    assert_eq!(log, ["email: shipped", "pager: db down"]);

    // The harness runs through the same executor: the tool's name is set.
    let harness = ToolHarness::new(catalog);
    let paged = harness
        .call_named("page_on_call", r#"{"subject":"disk full"}"#)
        .await;
    assert_eq!(
        paged.ok::<Delivery>(),
        Delivery {
            via: "pager".into(),
            because: None
        }
    );
}

/// The arguments of [`whoami`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// Says who the run is for, as its context tells it.
#[agent_tool(name = "whoami", usage = "Call to learn whom you are working for.")]
async fn whoami(args: NoArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
    let NoArgs {} = args;
    Ok(json!({
        "agent": ctx.agent_name(),
        "user": ctx.user_id(),
        "tenant": ctx.tenant_id(),
        "tool": ctx.tool_name(),
        "call": ctx.tool_call_id(),
        "session": ctx.session_id(),
    }))
}

fn whoami_agent(name: Option<&str>) -> Agent {
    let model = ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_w", "whoami", "{}"),
        ScriptedTurn::new().text("Done."),
    ]);
    let catalog = Catalog::builder()
        .tool::<WhoamiTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let mut builder = Agent::builder().model(model).catalog(catalog);
    if let Some(name) = name {
        builder = builder.name(name);
    }
    builder.build().unwrap_or_else(|error| panic!("{error}"))
}

async fn whoami_result(agent: &Agent, mut conversation: Conversation) -> Value {
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("Who?".into()))
        .collect()
        .await;
    let results = results_by_name(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    results[0].1["result"].clone()
}

#[tokio::test]
async fn the_context_says_which_agent_user_and_tenant_the_run_is_for() {
    let agent = whoami_agent(Some("support"));
    let conversation = Conversation::new("conv-who")
        .with_session_id("s-1")
        .with_user_id("user-7")
        .with_tenant_id("acme");
    assert_eq!(
        whoami_result(&agent, conversation).await,
        json!({
            "agent": "support",
            "user": "user-7",
            "tenant": "acme",
            "tool": "whoami",
            "call": "call_w",
            "session": "s-1",
        })
    );
}

#[tokio::test]
async fn without_a_name_or_an_identity_the_context_says_none() {
    let agent = whoami_agent(None);
    let result = whoami_result(&agent, Conversation::new("conv-anon")).await;
    assert_eq!(result["agent"], Value::Null);
    assert_eq!(result["user"], Value::Null);
    assert_eq!(result["tenant"], Value::Null);
    assert_eq!(result["tool"], "whoami");
}

#[test]
fn a_stored_conversation_without_user_or_tenant_still_loads() {
    // As written before the fields existed.
    let old = r#"{"id":"c-1","session_id":"s-1","messages":[{"role":"user","content":"hi"}]}"#;
    let loaded: Conversation = serde_json::from_str(old).expect("an old row loads");
    assert_eq!(loaded.user_id, None);
    assert_eq!(loaded.tenant_id, None);
    assert_eq!(loaded.session_id.as_deref(), Some("s-1"));
    // Written without them when unset, so an older reader loads it too.
    assert_eq!(
        serde_json::to_value(&loaded).expect("encodes"),
        serde_json::from_str::<Value>(old).expect("json")
    );
    // Kept when set.
    let set = Conversation::new("c-2")
        .with_user_id("u")
        .with_tenant_id("t");
    let text = serde_json::to_string(&set).expect("encodes");
    let back: Conversation = serde_json::from_str(&text).expect("decodes");
    assert_eq!(back, set);
    assert_eq!(back.user_id.as_deref(), Some("u"));
    assert_eq!(back.tenant_id.as_deref(), Some("t"));
}

/// A database pool, as state.
#[derive(Debug)]
pub struct Db {
    /// Where it points.
    pub url: String,
}

/// A mail client, as state.
#[derive(Debug)]
pub struct Mailer;

/// Something the tool reads without declaring it.
#[derive(Debug)]
pub struct Flags(pub bool);

/// The arguments of [`archive_order`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ArchiveArgs {
    /// The order to archive.
    pub order: u32,
}

/// Archives an order and mails its owner.
#[agent_tool(
    name = "archive_order",
    usage = "Call to archive a finished order.",
    state = [Db, Mailer]
)]
async fn archive_order(args: ArchiveArgs, ctx: &ToolContext) -> Result<Value, ToolError> {
    let db = ctx.require_state::<Db>()?;
    ctx.require_state::<Mailer>()?;
    // Undeclared state is still there to read.
    let flagged = ctx.state::<Flags>().is_some_and(|flags| flags.0);
    Ok(json!({"order": args.order, "db": db.url, "flagged": flagged}))
}

fn archive_catalog() -> Catalog {
    Catalog::builder()
        .tool::<ArchiveOrderTool>()
        .entry(
            ToolEntry::from_json_schema(
                "count_orders",
                "Call to count the orders.",
                "Counts the orders.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                |_args, ctx| async move {
                    ctx.require_state::<Db>()?;
                    Ok(json!(3))
                },
            )
            .takes_state::<Db>()
            .takes_state::<Db>(),
        )
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

fn build_with(context: ToolContext) -> Result<Agent, AgentError> {
    Agent::builder()
        .model(ScriptedModel::new(Vec::<ScriptedTurn>::new()))
        .catalog(archive_catalog())
        .context(context)
        .build()
}

#[test]
fn declared_state_is_recorded_on_the_definition() {
    assert_eq!(
        ArchiveOrderTool::META.state,
        [StateType::of::<Db>(), StateType::of::<Mailer>()]
    );
    let catalog = archive_catalog();
    let declared = |name: &str| -> Vec<&'static str> {
        catalog
            .get(name)
            .expect("held")
            .state_types()
            .iter()
            .map(StateType::name)
            .collect()
    };
    assert_eq!(
        declared("archive_order"),
        [std::any::type_name::<Db>(), std::any::type_name::<Mailer>()]
    );
    // A second declaration of one type is kept once.
    assert_eq!(declared("count_orders"), [std::any::type_name::<Db>()]);
    assert_eq!(StateType::of::<Db>().id(), std::any::TypeId::of::<Db>());
}

#[test]
fn an_agent_whose_context_lacks_declared_state_is_not_built() {
    let Err(error) = build_with(ToolContext::new().with_state(Flags(true))) else {
        panic!("built without the declared state");
    };
    let AgentError::MissingState(missing) = &error else {
        panic!("{error}");
    };
    // Every missing pair at once, in the catalog's order.
    let pairs: Vec<(&str, &str)> = missing
        .iter()
        .map(|missing| (missing.tool.as_str(), missing.type_name))
        .collect();
    assert_eq!(
        pairs,
        [
            ("archive_order", std::any::type_name::<Db>()),
            ("archive_order", std::any::type_name::<Mailer>()),
            ("count_orders", std::any::type_name::<Db>()),
        ]
    );
    let message = error.to_string();
    for named in ["archive_order", "count_orders", "Db", "Mailer"] {
        assert!(message.contains(named), "{message}");
    }
    // Half of it: only what is still missing is named.
    let Err(AgentError::MissingState(missing)) = build_with(ToolContext::new().with_state(Db {
        url: "db://".into(),
    })) else {
        panic!("built without `Mailer`");
    };
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].tool, "archive_order");
    assert_eq!(missing[0].type_name, std::any::type_name::<Mailer>());
}

#[tokio::test]
async fn an_agent_whose_context_holds_the_declared_state_runs_its_tools() {
    let context = ToolContext::new()
        .with_state(Db {
            url: "db://orders".into(),
        })
        .with_state(Mailer)
        .with_state(Flags(true));
    let model = ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_a", "archive_order", r#"{"order":12}"#),
        ScriptedTurn::new().text("Archived."),
    ]);
    let agent = Agent::builder()
        .model(model)
        .catalog(archive_catalog())
        .context(context)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let mut conversation = Conversation::new("conv-archive");
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("Archive 12.".into()))
        .collect()
        .await;
    let results = results_by_name(&events);
    assert_eq!(
        results[0].1["result"],
        json!({"order": 12, "db": "db://orders", "flagged": true}),
        "{events:?}"
    );
}

#[test]
#[should_panic(expected = "the tool `archive_order` takes `")]
fn a_harness_given_a_context_without_declared_state_refuses_it() {
    let _ = ToolHarness::new(archive_catalog()).with_context(ToolContext::new().with_state(Db {
        url: "db://".into(),
    }));
}

#[tokio::test]
async fn a_harness_without_a_context_runs_the_tool_without_its_state() {
    // Left unset, the harness checks nothing: a test can see how a tool
    // fails when its state is missing.
    let harness = ToolHarness::new(archive_catalog());
    let result = harness.call_named("archive_order", r#"{"order":1}"#).await;
    assert_eq!(result.code(), aptix::ErrorCode::Internal);
}

#[tokio::test]
async fn a_tool_made_at_run_time_knows_its_name_too() {
    let echo = ToolEntry::from_json_schema(
        format!("echo_{}", 7),
        "Call to hear your tool's name.",
        "Answers with the name it was called by.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        |_args, ctx| async move { Ok(json!(ctx.tool_name())) },
    );
    let catalog = Catalog::builder()
        .entry(echo)
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let result = ToolHarness::new(catalog).call_named("echo_7", "{}").await;
    assert_eq!(result.ok::<String>(), "echo_7");
}

/// A durable conversation created for a user and a tenant keeps them in
/// the store (SQLite here; the store suite checks every backend), so a
/// tool of a run the durable agent loads from it knows them too.
#[tokio::test]
async fn a_durable_conversation_gives_its_tools_the_user_and_tenant_it_was_created_for() {
    let directory = std::env::temp_dir().join(format!(
        "aptix-tool-context-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    ));
    std::fs::create_dir_all(&directory).unwrap_or_else(|error| panic!("{error}"));
    let store = aptix::store::SqliteStore::open(directory.join("store.db"))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let durable = aptix::durable::DurableAgent::new(whoami_agent(Some("support")), store);
    durable
        .create_conversation(
            &Conversation::new("conv-durable-who")
                .with_user_id("user-9")
                .with_tenant_id("globex"),
        )
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let events: Vec<AgentEvent> = durable
        .send("conv-durable-who", Input::User("Who?".into()))
        .await
        .unwrap_or_else(|error| panic!("{error}"))
        .collect()
        .await;
    let results = results_by_name(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0].1["result"]["user"], "user-9");
    assert_eq!(results[0].1["result"]["tenant"], "globex");
    assert_eq!(results[0].1["result"]["agent"], "support");
    let _ = std::fs::remove_dir_all(&directory);
}
