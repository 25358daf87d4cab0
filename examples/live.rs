//! One run rendered live on the terminal, every kind of event: the
//! arguments of each call as the model streams them, a question a tool asks
//! the operator (an elicitation), a progress bar and partial results for a
//! progressive tool, refunds whose approval an approval policy decides per
//! call (small ones run, large ones wait for a person, the largest are
//! refused), and a tool that runs out of retries.
//!
//! `cargo run --example live`
//!
//! With no configuration it runs on an embedded scripted model that streams
//! slowly enough to watch. With `OPENAI_BASE_URL` (and `OPENAI_API_KEY`,
//! `OPENAI_MODEL` where needed) a real OpenAI-compatible model drives it.
//! A call the policy holds is approved here, as an operator would, and its
//! result handed back to the model.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aptix::agent::{ApprovalCall, ApprovalDecision, SuspendedCall};
use aptix::executor::{Outcome, ToolCall};
use aptix::live::{ElicitationAnswer, ElicitationRequest};
use aptix::model::ChatModel;
use aptix::model::openai::OpenAiChat;
use aptix::prelude::*;
use aptix::{Agent, AgentEvent, Conversation, DoneReason, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;

/// What to export.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Export {
    /// How many rows.
    #[schemars(range(min = 1, max = 1000))]
    pub(crate) rows: u32,
}

/// One exported row.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Row {
    /// Its number.
    pub(crate) number: u32,
    /// Its customer.
    pub(crate) customer: String,
}

/// The finished export.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Exported {
    /// Rows written.
    pub(crate) rows: u32,
    /// Where the file is.
    pub(crate) file: String,
}

/// How long each exported row takes (shorter in tests).
pub(crate) struct Pace(pub(crate) Duration);

/// Exports customer rows to a file, reporting progress and every tenth row.
#[agent_tool(
    name = "export_rows",
    usage = "Call to export customer rows to a CSV file.",
    progressive = true,
    partial = Row
)]
pub(crate) async fn export_rows(
    args: Export,
    ctx: &ToolContext<Row>,
) -> Result<Exported, ToolError> {
    let pace = ctx
        .state::<Pace>()
        .map_or(Duration::from_millis(40), |pace| pace.0);
    // A question for whoever watches the run (answered by the renderer
    // below); with nobody to ask it reads as `Cancel`.
    let archived = match ctx
        .elicit(ElicitationRequest::form(
            "export_rows",
            "Include archived customers?",
            serde_json::json!({
                "type": "object",
                "properties": { "archived": { "type": "boolean", "description": "Include them." } },
                "required": ["archived"]
            }),
        ))
        .await
    {
        ElicitationAnswer::Accept(answer) => answer["archived"] == true,
        ElicitationAnswer::Decline | ElicitationAnswer::Cancel => false,
    };
    for number in 1..=args.rows {
        tokio::time::sleep(pace).await;
        if number % 10 == 0 {
            ctx.partial(&Row {
                number,
                customer: format!("customer-{number:04}"),
            });
        }
        ctx.progress(
            f64::from(number),
            Some(f64::from(args.rows)),
            Some("writing rows"),
        );
    }
    Ok(Exported {
        rows: args.rows,
        file: if archived {
            "export-with-archived.csv".into()
        } else {
            "export.csv".into()
        },
    })
}

/// A refund.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Refund {
    /// The order.
    pub(crate) order: String,
    /// Cents to give back.
    pub(crate) cents: u32,
}

/// Refunds an order (declared `auto`: the policy decides per call). An
/// order that does not exist asks the model for another try, which this
/// tool allows none of (`retries = 0`): the run says so.
#[agent_tool(name = "refund", usage = "Call to refund an order.", retries = 0)]
pub(crate) async fn refund(args: Refund) -> Result<String, ToolError> {
    if args.order.starts_with('Z') {
        return Err(ToolError::retry(format!(
            "There is no order {}; ask the user for the right one.",
            args.order
        )));
    }
    Ok(format!("refunded {} cents on {}", args.cents, args.order))
}

/// The policy: refunds up to 100 euros run, up to 1000 wait for a person,
/// more are refused. Each decision is logged for the renderer.
pub(crate) fn policy(
    decisions: Arc<Mutex<Vec<(String, String)>>>,
) -> impl Fn(&ApprovalCall<'_>) -> ApprovalDecision + Send + Sync + 'static {
    move |call: &ApprovalCall<'_>| {
        let decision = match (
            call.call.definition.name(),
            call.call.arguments["cents"].as_u64(),
        ) {
            ("refund", Some(0..=10_000)) | ("export_rows", _) => ApprovalDecision::Auto,
            ("refund", Some(10_001..=100_000)) => ApprovalDecision::Ask,
            _ => ApprovalDecision::Deny("Refunds over 1000 euros go through finance.".into()),
        };
        let shown = match &decision {
            ApprovalDecision::Auto => "auto".to_owned(),
            ApprovalDecision::Ask => "ask a person".to_owned(),
            ApprovalDecision::Deny(message) => format!("deny: {message}"),
        };
        if let Ok(mut decisions) = decisions.lock() {
            decisions.push((call.call.id.to_owned(), shown));
        }
        decision
    }
}

/// The embedded model: arguments streamed in small pieces, slowly.
pub(crate) fn scripted(delay: Duration) -> ScriptedModel {
    ScriptedModel::new([
        ScriptedTurn::new()
            .text("I'll export the rows and handle the three refunds. ")
            .tool_call_chunks("call_export", "export_rows", &["{\"ro", "ws\":", " 60}"])
            .tool_call_chunks(
                "call_small",
                "refund",
                &["{\"order\":", "\"A-17\",", "\"cents\":", "2500}"],
            )
            .tool_call_chunks(
                "call_large",
                "refund",
                &["{\"order\":", "\"B-42\",", "\"cents\":", "45000}"],
            )
            .tool_call_chunks(
                "call_huge",
                "refund",
                &["{\"order\":", "\"C-99\",", "\"cents\":", "250000}"],
            )
            .tool_call_chunks(
                "call_typo",
                "refund",
                &["{\"order\":", "\"Z-00\",", "\"cents\":", "900}"],
            )
            .with_delay(delay),
        ScriptedTurn::new()
            .text("The export is written, A-17 and B-42 are refunded, C-99 needs finance, and Z-00 is no order: which one did you mean?")
            .with_delay(delay),
    ])
}

/// Renders events as they come: one line per call, live arguments, a
/// progress bar, partial results, and the policy's decision by each result.
pub(crate) struct Renderer<'w> {
    out: &'w mut (dyn Write + Send),
    decisions: Arc<Mutex<Vec<(String, String)>>>,
    /// A progress bar is on the current line.
    bar: bool,
    /// Streamed arguments are on the current line.
    arguments: bool,
}

impl<'w> Renderer<'w> {
    /// A renderer writing to `out`, showing the policy's `decisions`.
    pub(crate) fn new(
        out: &'w mut (dyn Write + Send),
        decisions: Arc<Mutex<Vec<(String, String)>>>,
    ) -> Self {
        Renderer {
            out,
            decisions,
            bar: false,
            arguments: false,
        }
    }

    fn end_bar(&mut self) -> std::io::Result<()> {
        if self.bar {
            self.bar = false;
            writeln!(self.out)?;
        }
        Ok(())
    }

    fn decision(&self, id: &str) -> Option<String> {
        let decisions = self.decisions.lock().ok()?;
        decisions
            .iter()
            .rev()
            .find(|(call, _)| call == id)
            .map(|(_, shown)| shown.clone())
    }

    /// Renders one event.
    pub(crate) fn show(&mut self, event: &AgentEvent) -> std::io::Result<()> {
        match event {
            AgentEvent::TextDelta(text) => {
                self.end_bar()?;
                write!(self.out, "{text}")?;
            }
            // The model's reasoning, dimmed: for people, never logged.
            AgentEvent::ReasoningDelta(text) => {
                self.end_bar()?;
                write!(self.out, "\x1b[2m{text}\x1b[0m")?;
            }
            AgentEvent::ToolCallOpened { name, kind, .. } => {
                self.end_bar()?;
                let kind = kind.as_ref().map_or("unknown tool".to_owned(), |kind| {
                    format!("{}, {}", kind.executor.as_str(), kind.approval.as_str())
                });
                write!(self.out, "\n  ⋯ {name} [{kind}] ")?;
                self.arguments = true;
            }
            AgentEvent::ToolCallDelta { text, .. } => write!(self.out, "{text}")?,
            AgentEvent::ToolCallStart { id, name, .. } => {
                if std::mem::take(&mut self.arguments) {
                    writeln!(self.out)?;
                }
                writeln!(self.out, "  ▶ {name} ({id})")?;
            }
            AgentEvent::ToolProgress {
                name,
                done,
                total,
                message,
                ..
            } => {
                let fraction = total.map_or(0.0, |total| (done / total).clamp(0.0, 1.0));
                let filled = (fraction * 30.0).round() as usize;
                write!(
                    self.out,
                    "\r  {name} [{}{}] {:>3.0}% {}",
                    "#".repeat(filled),
                    ".".repeat(30 - filled),
                    fraction * 100.0,
                    message.as_deref().unwrap_or("")
                )?;
                self.bar = true;
            }
            AgentEvent::ToolPartial { name, value, .. } => {
                self.end_bar()?;
                writeln!(self.out, "  {name} partial: {value}")?;
            }
            AgentEvent::Elicitation {
                name,
                request,
                reply,
                ..
            } => {
                self.end_bar()?;
                // The operator at this terminal answers: no archived rows.
                // (A reader that drops the reply answers `Cancel`.)
                writeln!(
                    self.out,
                    "  ? {name} asks: {}  operator: no",
                    request.message
                )?;
                reply.answer(ElicitationAnswer::Accept(
                    serde_json::json!({ "archived": false }),
                ));
            }
            AgentEvent::ToolCallResult {
                id, name, envelope, ..
            } => {
                self.end_bar()?;
                let policy = self
                    .decision(id)
                    .map(|shown| format!("  [policy: {shown}]"))
                    .unwrap_or_default();
                let mark = if envelope["ok"] == true { "✓" } else { "✗" };
                let shown = if envelope["ok"] == true {
                    envelope["result"].to_string()
                } else {
                    envelope["error"]["message"].to_string()
                };
                writeln!(self.out, "  {mark} {name} ({id}): {shown}{policy}")?;
            }
            AgentEvent::RetriesExhausted {
                id, name, retries, ..
            } => {
                self.end_bar()?;
                writeln!(
                    self.out,
                    "  ↻ {name} ({id}) asked for another try, past its {retries} retries: the model is told not to try again"
                )?;
            }
            AgentEvent::Done {
                reason, summary, ..
            } => {
                self.end_bar()?;
                match reason {
                    DoneReason::Suspended(calls) => {
                        for call in calls {
                            let policy = self.decision(&call.tool_call_id).unwrap_or_default();
                            writeln!(
                                self.out,
                                "\n  ⏸ {} ({}) waits for a person [policy: {policy}]: {}",
                                call.name, call.tool_call_id, call.awaiting.payload
                            )?;
                        }
                    }
                    other => writeln!(self.out, "\n[done: {other:?}]")?,
                }
                for (tool, stats) in &summary.tools {
                    writeln!(
                        self.out,
                        "  {tool}: {} call(s), {} failed, {} waiting, longest {:?}",
                        stats.calls, stats.failed, stats.suspended, stats.longest
                    )?;
                }
            }
            // `AgentEvent` is `#[non_exhaustive]`: a kind added later is
            // named here, for this demo to be extended.
            other => writeln!(self.out, "  (an event this demo does not know: {other:?})")?,
        }
        self.out.flush()
    }
}

/// Runs the demo against `model`, rendering into `out`; calls the policy
/// holds are approved, as an operator would, and the run goes on. Returns
/// how the last run ended.
pub(crate) async fn demo(
    out: &mut (dyn Write + Send),
    model: Arc<dyn ChatModel>,
    pace: Duration,
) -> Result<DoneReason, Box<dyn std::error::Error>> {
    let decisions = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .shared_model(model)
        .catalog(aptix::tools![ExportRowsTool, RefundTool].build()?)
        .approval_policy(policy(decisions.clone()))
        .context(ToolContext::new().with_state(Pace(pace)))
        .max_iterations(4)
        .build()?;
    let mut conversation = Conversation::new("live").with_system(
        "You run a shop's back office. Use the tools; refunds need an order id and cents.",
    );
    let mut renderer = Renderer::new(out, decisions);
    let mut input = Input::User(
        "Export the 60 customer rows, then refund A-17 (25 euros), B-42 (450 euros) and C-99 (2500 euros).".into(),
    );
    loop {
        let mut events = agent.run(&mut conversation, input);
        let mut held: Vec<SuspendedCall> = Vec::new();
        let mut reason = None;
        while let Some(event) = events.next().await {
            renderer.show(&event)?;
            if let AgentEvent::Done { reason: done, .. } = event {
                if let DoneReason::Suspended(calls) = &done {
                    held = calls.clone();
                }
                reason = Some(done);
            }
        }
        drop(events);
        if held.is_empty() {
            return reason.ok_or_else(|| "the run ended without Done".into());
        }
        // The operator approves each held call: it runs past its gate now.
        let mut results = Vec::new();
        for call in &held {
            writeln!(renderer.out, "  operator: approve {}", call.tool_call_id)?;
            let tool_call = ToolCall::new(
                call.tool_call_id.as_str(),
                call.name.as_str(),
                call.payload().as_str(),
            );
            let context = ToolContext::new().with_conversation_id("live");
            match agent
                .executor()
                .execute_approved(&tool_call, &context)
                .await
                .outcome
            {
                Outcome::Final(envelope) => {
                    writeln!(
                        renderer.out,
                        "  {} {} ({}): {}  [approved by the operator]",
                        if envelope.is_ok() { "✓" } else { "✗" },
                        call.name,
                        call.tool_call_id,
                        envelope.to_value()["result"]
                    )?;
                    results.push((call.tool_call_id.clone(), envelope));
                }
                other => return Err(format!("an approved refund did not finish: {other:?}").into()),
            }
        }
        input = Input::ToolResults(results);
    }
}

#[allow(dead_code)] // `main` is unused where tests include this file.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model: Arc<dyn ChatModel> = match std::env::var("OPENAI_BASE_URL") {
        Ok(_) => Arc::new(OpenAiChat::from_env()?),
        Err(_) => {
            println!("model: the embedded scripted model (set OPENAI_BASE_URL to use a real one)");
            Arc::new(scripted(Duration::from_millis(60)))
        }
    };
    let mut stdout = std::io::stdout();
    let reason = demo(&mut stdout, model, Duration::from_millis(40)).await?;
    match reason {
        DoneReason::Completed => Ok(()),
        other => Err(format!("the run ended {other:?}").into()),
    }
}
