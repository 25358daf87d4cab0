//! `send_email`, a server tool gated by approval: the executor validates the
//! arguments and stops; the function runs only once a person approves.
//!
//! `cargo run --example send_email`
// The tool types are `pub` as they would be in a library crate; here they
// are also included as modules of tests and benches, where nothing re-exports them.
#![allow(unreachable_pub)]

use std::sync::Mutex;

use aptix::prelude::*;

/// Arguments of `send_email`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendEmailArgs {
    /// The recipient's address.
    #[schemars(regex(pattern = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"))]
    pub to: String,
    /// The subject line.
    #[schemars(length(min = 1, max = 120))]
    pub subject: String,
    /// The plain-text body.
    #[schemars(length(max = 10000))]
    pub body: String,
}

/// What `send_email` reports once the message is out.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    /// The id of the sent message.
    pub message_id: String,
}

/// Where sent messages go: a stand-in for an SMTP client, handed to the tool
/// through `ToolContext` state.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Every message sent.
    pub sent: Mutex<Vec<Email>>,
}

/// One sent message.
#[derive(Debug, Clone, PartialEq)]
pub struct Email {
    /// The id `send_email` reported.
    pub message_id: String,
    /// The recipient.
    pub to: String,
    /// The subject line.
    pub subject: String,
    /// The body.
    pub body: String,
}

/// Sends an email on the user's behalf.
#[agent_tool(
    name = "send_email",
    usage = "Call only when the user explicitly asks to send an email; a person approves every message before it is sent.",
    approval = requires_approval,
    timeout = "10s"
)]
pub async fn send_email(args: SendEmailArgs, ctx: &ToolContext) -> Result<Sent, ToolError> {
    let outbox = ctx.require_state::<Outbox>()?;
    // The call id is the idempotency key: a retried call sends nothing twice.
    let message_id = format!("msg-{}", ctx.tool_call_id());
    let mut sent = outbox
        .sent
        .lock()
        .map_err(|_| ToolError::internal_message("the outbox lock is poisoned"))?;
    if !sent.iter().any(|email| email.message_id == message_id) {
        sent.push(Email {
            message_id: message_id.clone(),
            to: args.to,
            subject: args.subject,
            body: args.body,
        });
    }
    Ok(Sent { message_id })
}

#[allow(dead_code)]
#[tokio::main]
async fn main() {
    let executor = aptix::Executor::new(
        aptix::Catalog::builder()
            .tool::<SendEmailTool>()
            .build()
            .unwrap_or_else(|error| panic!("{error}")),
    );
    let call = aptix::ToolCall::new(
        "call-1",
        "send_email",
        r#"{"to":"ada@example.com","subject":"Hi","body":"Hello"}"#,
    );
    let execution = executor.execute(&call, &ToolContext::new()).await;
    println!("{:?}", execution.outcome);
}
