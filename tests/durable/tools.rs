//! The tools several durable test files call, and the record of their runs.
//! `#[agent_tool]` makes a tool's name unique in a crate, and the files are
//! modules of one test binary: a tool they share is declared here, once.

use std::sync::{LazyLock, Mutex, PoisonError};

use aptix::prelude::*;
use serde_json::{Value, json};

/// (conversation, tool, tool_call_id, arguments) of every run.
type Run = (String, String, String, Value);

static RUNS: LazyLock<Mutex<Vec<Run>>> = LazyLock::new(Default::default);

/// Records a run of `tool` with `arguments`, in the call `ctx` is for.
pub fn ran(ctx: &ToolContext, tool: &str, arguments: Value) {
    RUNS.lock().unwrap_or_else(PoisonError::into_inner).push((
        ctx.conversation_id().unwrap_or_default().to_owned(),
        tool.to_owned(),
        ctx.tool_call_id().to_owned(),
        arguments,
    ));
}

/// The arguments of every run of `tool` in `conversation`, in order.
pub fn runs_of(conversation: &str, tool: &str) -> Vec<Value> {
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|run| run.0 == conversation && run.1 == tool)
        .map(|run| run.3.clone())
        .collect()
}

/// How often call `tool_call_id` ran (ids made with `uuid()` are unique
/// to their test, so the tests of all backends can run at once).
pub fn runs(tool_call_id: &str) -> usize {
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|run| run.2 == tool_call_id)
        .count()
}

/// Arguments of `charge`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Charge {
    /// The amount in cents.
    #[schemars(range(min = 1, max = 100000))]
    pub cents: u32,
}

/// Charges the card on file, once a person approves.
#[agent_tool(name = "charge", usage = "Test tool.", approval = requires_approval)]
pub async fn charge(args: Charge, ctx: &ToolContext) -> Result<String, ToolError> {
    ran(ctx, "charge", json!({"cents": args.cents}));
    Ok(format!("charged {}", args.cents))
}

/// A path.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FilePath {
    /// The path.
    pub path: String,
}

/// Deletes a file, once a person approves.
#[agent_tool(name = "delete_file", usage = "Test tool.", approval = requires_approval)]
pub async fn delete_file(args: FilePath, ctx: &ToolContext) -> Result<String, ToolError> {
    ran(ctx, "delete_file", json!({"path": args.path}));
    Ok(format!("deleted {}", args.path))
}

/// A page the browser opened.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Opened {
    /// The page title.
    pub title: String,
}

/// Opens a page in the user's browser, once a person approves.
#[agent_tool(
    name = "open_page",
    usage = "Test tool.",
    executor = client,
    approval = requires_approval,
    output = Opened
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct OpenPage {
    /// The address.
    pub url: String,
}

/// A person's answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Answer {
    /// Whether the person agreed.
    pub agreed: bool,
}

/// Asks the user.
#[agent_tool(
    name = "confirm",
    usage = "Test tool.",
    executor = human,
    output = Answer,
    suspend_timeout = "1h"
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct Confirm {
    /// The question.
    pub question: String,
}
