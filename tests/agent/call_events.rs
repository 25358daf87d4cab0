//! What a renderer sees of a call as it forms and runs: the call opened as
//! soon as its name streams, its argument text as it comes (never for a
//! tool that declares secrets), and the tool's kind on every call event.

use std::sync::Arc;

use aptix::model::ToolCallDelta;
use aptix::prelude::*;
use aptix::{
    Agent, AgentEvent, Conversation, Input, agent::ToolKind, meta::Approval, meta::ExecutorKind,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;

/// Arguments of `lookup`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Lookup {
    /// What to look up.
    pub query: String,
}

/// Looks something up.
#[agent_tool(name = "lookup", usage = "Call to look something up.")]
async fn lookup(args: Lookup) -> Result<String, ToolError> {
    Ok(format!("found {}", args.query))
}

/// Arguments of `login`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Login {
    /// Who.
    pub user: String,
    /// Their password.
    pub password: String,
}

/// Logs in (its password must never stream into an event).
#[agent_tool(
    name = "login",
    usage = "Call to log in.",
    approval = requires_approval,
    redact = ["/password"]
)]
async fn login(args: Login) -> Result<bool, ToolError> {
    Ok(!args.user.is_empty())
}

async fn events_of(turns: Vec<ScriptedTurn>) -> Vec<AgentEvent> {
    let agent = Agent::builder()
        .shared_model(Arc::new(ScriptedModel::new(turns)))
        .catalog(
            aptix::tools![LookupTool, LoginTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conversation = Conversation::new("conv-call-events");
    agent
        .run(&mut conversation, Input::User("Go.".into()))
        .collect()
        .await
}

const SERVER: Option<ToolKind> = Some(ToolKind {
    executor: ExecutorKind::Server,
    approval: Approval::Auto,
});

#[tokio::test]
async fn a_call_opens_streams_its_arguments_then_starts() {
    let arguments = r#"{"query":"the weather in Paris"}"#;
    let events = events_of(vec![
        ScriptedTurn::new().tool_call("call_1", "lookup", arguments),
        ScriptedTurn::new().text("Done."),
    ])
    .await;
    let opened = events
        .iter()
        .position(|event| matches!(event, AgentEvent::ToolCallOpened { id, name, kind } if id == "call_1" && name == "lookup" && *kind == SERVER))
        .unwrap_or_else(|| panic!("not opened: {events:?}"));
    let start = events
        .iter()
        .position(
            |event| matches!(event, AgentEvent::ToolCallStart { kind, .. } if *kind == SERVER),
        )
        .unwrap_or_else(|| panic!("no start: {events:?}"));
    let deltas: Vec<(usize, &str)> = events
        .iter()
        .enumerate()
        .filter_map(|(at, event)| match event {
            AgentEvent::ToolCallDelta { id, text } if id == "call_1" => Some((at, text.as_str())),
            _ => None,
        })
        .collect();
    // The scripted model streams five characters at a time.
    assert!(deltas.len() > 1, "{deltas:?}");
    assert!(deltas.iter().all(|(at, _)| opened < *at && *at < start));
    let streamed: String = deltas.iter().map(|(_, text)| *text).collect();
    assert_eq!(streamed, arguments);
    // The result and its events name the kind too.
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolCallResult { kind, .. } if *kind == SERVER
    )));
}

#[tokio::test]
async fn a_tool_with_secrets_opens_but_never_streams_its_arguments() {
    let events = events_of(vec![
        ScriptedTurn::new().tool_call("call_1", "login", r#"{"user":"ada","password":"hunter2"}"#),
        ScriptedTurn::new().text("Done."),
    ])
    .await;
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolCallOpened {
            kind: Some(ToolKind {
                approval: Approval::RequiresApproval,
                ..
            }),
            ..
        }
    )));
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, AgentEvent::ToolCallDelta { .. })),
        "{events:?}"
    );
    assert!(!format!("{events:?}").contains("hunter2"), "{events:?}");
}

#[tokio::test]
async fn a_call_of_no_tool_opens_without_a_kind() {
    let events = events_of(vec![
        ScriptedTurn::new().tool_call("call_1", "teleport", r#"{"to":"Mars"}"#),
        ScriptedTurn::new().text("Done."),
    ])
    .await;
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolCallOpened { name, kind: None, .. } if name == "teleport"
    )));
    assert!(
        events
            .iter()
            .any(|event| matches!(event, AgentEvent::ToolCallResult { kind: None, .. }))
    );
}

#[tokio::test]
async fn a_call_without_an_id_streams_under_the_id_it_keeps() {
    let events = events_of(vec![
        ScriptedTurn::new().tool_call("", "lookup", r#"{"query":"x"}"#),
        ScriptedTurn::new().text("Done."),
    ])
    .await;
    let opened = events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolCallOpened { id, .. } => Some(id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("not opened: {events:?}"));
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolCallStart { id, .. } if *id == opened
    )));
}

#[tokio::test]
async fn a_reused_id_never_streams_a_secret_under_another_call() {
    // Two calls of one turn with the same id: the second declares secrets.
    let events = events_of(vec![
        ScriptedTurn::new()
            .tool_call("call_0", "lookup", r#"{"query":"x"}"#)
            .tool_call("call_0", "login", r#"{"user":"ada","password":"hunter2"}"#),
        ScriptedTurn::new().text("Done."),
    ])
    .await;
    // The pieces stream five characters at a time: join them to look.
    let streamed: String = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, r#"{"query":"x"}"#);
    assert!(!format!("{events:?}").contains("hunter2"), "{events:?}");
}

#[tokio::test]
async fn a_tool_name_in_pieces_never_streams_a_secret() {
    // The name streams as `log` + `in`: the arguments of `login` must not
    // be shown on the strength of the first piece.
    let delta = |id: Option<&str>, name: &str, arguments: &str| ToolCallDelta {
        index: 0,
        id: id.map(str::to_owned),
        name: (!name.is_empty()).then(|| name.to_owned()),
        arguments: arguments.to_owned(),
    };
    let turn = ScriptedTurn::new()
        .tool_call_delta(delta(Some("call_1"), "log", ""))
        .tool_call_delta(delta(None, "in", r#"{"user":"ada","password":"hunter2"}"#));
    let events = events_of(vec![turn, ScriptedTurn::new().text("Done.")]).await;
    assert!(!format!("{events:?}").contains("hunter2"), "{events:?}");
    // Red team 2026-11-27, L1: the first piece of the name (`lo`, no tool)
    // comes with the first piece of the arguments.
    let turn = ScriptedTurn::new()
        .tool_call_delta(delta(
            Some("call_1"),
            "lo",
            r#"{"user":"ada","password":"STREAMED-SECRET-1""#,
        ))
        .tool_call_delta(delta(None, "gin", "}"));
    let events = events_of(vec![turn, ScriptedTurn::new().text("Done.")]).await;
    assert!(
        !format!("{events:?}").contains("STREAMED-SECRET-1"),
        "{events:?}"
    );
}
