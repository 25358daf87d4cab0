//! Progressive tools: progress and partial results reach whoever watches the
//! run, in order, and never the model; a slow reader never holds a tool up.

use std::sync::Arc;
use std::time::Duration;

use aptix::prelude::*;
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input, ToolEntry};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// One exported row.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Row {
    /// Its number.
    pub id: u32,
    /// A secret it carries.
    pub token: String,
}

/// What an export did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Exported {
    /// Rows written.
    pub rows: u32,
}

/// Arguments of `export`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Export {
    /// How many rows.
    pub rows: u32,
    /// Progress reports to make, at most one per row... or many more.
    pub reports: u32,
}

/// Exports rows, showing each as it goes.
#[agent_tool(
    name = "export",
    usage = "Call to export rows.",
    progressive = true,
    partial = Row,
    redact = ["/token"]
)]
async fn export(args: Export, ctx: &ToolContext<Row>) -> Result<Exported, ToolError> {
    for report in 1..=args.reports {
        ctx.progress(f64::from(report), Some(f64::from(args.reports)), None);
    }
    for id in 1..=args.rows {
        ctx.partial(&Row {
            id,
            token: format!("secret-{id}"),
        });
        ctx.progress(f64::from(id), Some(f64::from(args.rows)), Some("writing"));
    }
    Ok(Exported { rows: args.rows })
}

/// Arguments of `count_to`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CountTo {
    /// Where to stop.
    pub to: u32,
}

/// Counts, showing every number so far (partial results of its output type).
#[agent_tool(name = "count_to", usage = "Call to count.", progressive = true)]
async fn count_to(args: CountTo, ctx: &ToolContext<Vec<u32>>) -> Result<Vec<u32>, ToolError> {
    let mut seen = Vec::new();
    for number in 1..=args.to {
        seen.push(number);
        ctx.partial(&seen);
    }
    Ok(seen)
}

/// Arguments of `plain`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Plain {}

/// Reports progress although it declares nothing: progress is open to every
/// tool with code.
#[agent_tool(name = "plain", usage = "Call to do a plain thing.")]
async fn plain(_args: Plain, ctx: &ToolContext) -> Result<bool, ToolError> {
    ctx.progress(1.0, Some(2.0), Some("half"));
    Ok(true)
}

fn agent(turns: Vec<ScriptedTurn>) -> (Agent, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new(turns));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(
            aptix::tools![ExportTool, CountToTool, PlainTool]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    (agent, model)
}

async fn run(agent: &Agent, text: &str) -> (Vec<AgentEvent>, Conversation) {
    let mut conversation = Conversation::new("conv-live");
    let events = agent
        .run(&mut conversation, Input::User(text.into()))
        .collect()
        .await;
    (events, conversation)
}

fn partials(events: &[AgentEvent], of: &str) -> Vec<Value> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolPartial { id, value, .. } if id == of => Some(value.clone()),
            _ => None,
        })
        .collect()
}

fn position(events: &[AgentEvent], matches: impl Fn(&AgentEvent) -> bool) -> usize {
    events
        .iter()
        .position(matches)
        .unwrap_or_else(|| panic!("no such event: {events:?}"))
}

#[test]
fn the_declaration_says_the_tool_is_progressive() {
    const { assert!(ExportTool::META.progressive) };
    const { assert!(!PlainTool::META.progressive) };
    let definition = ExportTool::definition().unwrap_or_else(|e| panic!("{e}"));
    assert!(definition.progressive());
    assert_eq!(definition.canonical_json()["progressive"], json!(true));
    // Only a progressive tool writes the member: other fingerprints stay.
    let plain = PlainTool::definition().unwrap_or_else(|e| panic!("{e}"));
    assert!(plain.canonical_json().get("progressive").is_none());
}

#[tokio::test]
async fn partial_results_and_progress_are_shown_in_order_and_never_reach_the_model() {
    let (agent, model) = agent(vec![
        ScriptedTurn::new().tool_call("call_1", "export", r#"{"rows":3,"reports":0}"#),
        ScriptedTurn::new().text("Exported."),
    ]);
    let (events, conversation) = run(&agent, "Export three rows.").await;
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            reason: DoneReason::Completed,
            ..
        })
    ));
    // Every partial result, in order, redacted as the result would be.
    assert_eq!(
        partials(&events, "call_1"),
        [
            json!({"id": 1, "token": "[redacted]"}),
            json!({"id": 2, "token": "[redacted]"}),
            json!({"id": 3, "token": "[redacted]"}),
        ]
    );
    // All of them between the call's start and its result.
    let start = position(&events, |e| matches!(e, AgentEvent::ToolCallStart { .. }));
    let result = position(&events, |e| matches!(e, AgentEvent::ToolCallResult { .. }));
    let first_partial = position(&events, |e| matches!(e, AgentEvent::ToolPartial { .. }));
    let last_progress = events
        .iter()
        .rposition(|e| matches!(e, AgentEvent::ToolProgress { .. }))
        .expect("progress was reported");
    assert!(
        start < first_partial && last_progress < result,
        "{events:?}"
    );
    // The latest progress is always shown, whatever was coalesced.
    let AgentEvent::ToolProgress {
        name,
        done,
        total,
        message,
        ..
    } = &events[last_progress]
    else {
        unreachable!()
    };
    assert_eq!(
        (name.as_str(), *done, *total, message.as_deref()),
        ("export", 3.0, Some(3.0), Some("writing"))
    );
    // The model saw the final result only, in the transcript and the request.
    let tool_messages: Vec<&str> = conversation
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tool_messages.len(), 1);
    assert!(
        tool_messages[0].contains(r#""rows":3"#),
        "{}",
        tool_messages[0]
    );
    assert!(
        !tool_messages[0].contains("secret-"),
        "{}",
        tool_messages[0]
    );
    let second = &model.requests()[1];
    let sent = serde_json::to_string(&second.messages).unwrap_or_default();
    assert!(!sent.contains("secret-1"), "{sent}");
}

#[tokio::test]
async fn a_partial_result_of_the_output_type() {
    let (agent, _) = agent(vec![
        ScriptedTurn::new().tool_call("call_1", "count_to", r#"{"to":3}"#),
        ScriptedTurn::new().text("Counted."),
    ]);
    let (events, _) = run(&agent, "Count to three.").await;
    assert_eq!(
        partials(&events, "call_1"),
        [json!([1]), json!([1, 2]), json!([1, 2, 3])]
    );
}

#[tokio::test]
async fn any_tool_with_code_may_report_progress() {
    let (agent, _) = agent(vec![
        ScriptedTurn::new().tool_call("call_1", "plain", "{}"),
        ScriptedTurn::new().text("Done."),
    ]);
    let (events, _) = run(&agent, "Do it.").await;
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolProgress { name, done, message, .. }
            if name == "plain" && *done == 1.0 && message.as_deref() == Some("half")
    )));
}

#[tokio::test]
async fn a_slow_reader_coalesces_progress_and_keeps_every_partial_result() {
    let (agent, _) = agent(vec![
        ScriptedTurn::new().tool_call("call_1", "export", r#"{"rows":50,"reports":10000}"#),
        ScriptedTurn::new().text("Exported."),
    ]);
    let mut conversation = Conversation::new("conv-slow");
    let mut stream = agent.run(&mut conversation, Input::User("Export.".into()));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        // A reader that takes its time over every event.
        tokio::time::sleep(Duration::from_millis(1)).await;
        events.push(event);
    }
    drop(stream);
    let progress = events
        .iter()
        .filter(|event| matches!(event, AgentEvent::ToolProgress { .. }))
        .count();
    // 10,050 reports were made; the reader saw far fewer, the last of them
    // the final one.
    assert!(progress < 10_050 / 2, "{progress} progress events");
    let rows: Vec<u64> = partials(&events, "call_1")
        .iter()
        .filter_map(|row| row["id"].as_u64())
        .collect();
    assert_eq!(rows, (1..=50).collect::<Vec<u64>>());
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            reason: DoneReason::Completed,
            ..
        })
    ));
}

#[tokio::test]
async fn a_run_time_tool_reports_json_partial_results() {
    let entry = ToolEntry::from_json_schema(
        "fetch_pages",
        "Call to fetch pages.",
        "Fetches pages.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        |_args, ctx| async move {
            let partials = ctx.for_partials::<Value>();
            for page in 1..=2 {
                partials.partial(&json!({"page": page}));
            }
            Ok(json!({"pages": 2}))
        },
    )
    .progressive(true)
    .build()
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(entry.definition().progressive());
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_1", "fetch_pages", "{}"),
        ScriptedTurn::new().text("Fetched."),
    ]));
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(
            aptix::Catalog::builder()
                .entry(entry)
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (events, _) = run(&agent, "Fetch.").await;
    assert_eq!(
        partials(&events, "call_1"),
        [json!({"page": 1}), json!({"page": 2})]
    );
}
