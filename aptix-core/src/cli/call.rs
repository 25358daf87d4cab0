//! `call NAME [JSON] [--yes]`: one call through the executor, as an agent
//! would make it, with the approval asked on the terminal.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

use super::{Cli, CliError, PrettyEnvelope, confirm, envelope_ids, unknown_tool, write_pretty};
use crate::envelope::Envelope;
use crate::error::ErrorCode;
use crate::executor::{Executor, Outcome, ToolCall};
use crate::meta::AwaitReason;

/// What the command line asked for.
pub(super) struct Request<'a> {
    pub(super) name: &'a str,
    pub(super) arguments: Option<&'a str>,
    pub(super) yes: bool,
    pub(super) id: &'a str,
}

/// What a call that waits for a client or a person prints: enough for that
/// client or person to act on it (the validated payload and the call id).
#[derive(Serialize)]
struct Waiting<'a> {
    awaiting: AwaitReason,
    then: Option<AwaitReason>,
    tool: &'a str,
    tool_call_id: &'a str,
    payload: Value,
}

/// What a provider tool's call prints: the provider runs it, not us.
#[derive(Serialize)]
struct PassThrough<'a> {
    pass_through: bool,
    tool: &'a str,
    tool_call_id: &'a str,
}

/// Runs the call. The arguments are passed to the executor as raw text,
/// never parsed here first, so that malformed JSON gets the same
/// `invalid_json` envelope a model would get.
pub(super) async fn run(
    cli: &Cli,
    request: Request<'_>,
    stdin: &mut impl BufRead,
    stdout: &mut impl Write,
    stderr: &mut impl Write,
) -> Result<ExitCode, CliError> {
    let Request {
        name,
        arguments,
        yes,
        id,
    } = request;
    // An unknown name is a mistake on the command line (exit 2), not a
    // result for a model: say so before running anything.
    if cli.catalog.get(name).is_none() {
        return Err(unknown_tool(&cli.catalog, name));
    }
    let arguments = match arguments {
        None => "{}".to_owned(),
        Some("-") => {
            let mut text = String::new();
            stdin.read_to_string(&mut text)?;
            text
        }
        Some(text) => text.to_owned(),
    };
    let executor = Executor::new(cli.catalog.clone());
    let context = &cli.context;
    let mut call = ToolCall::new(id, name, arguments);
    let mut execution = executor.execute(&call, context).await;
    loop {
        match execution.outcome {
            Outcome::Final(envelope) => {
                write_pretty(stdout, &PrettyEnvelope::new(&envelope))?;
                return Ok(if envelope.is_ok() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                });
            }
            Outcome::Awaiting(awaiting) if awaiting.reason == AwaitReason::Approval => {
                let payload = awaiting.payload.to_value();
                writeln!(
                    stderr,
                    "`{name}` needs an approval before it runs. Arguments:\n{}",
                    serde_json::to_string_pretty(&payload).unwrap_or_default()
                )?;
                let approved = if yes {
                    writeln!(stderr, "Approved (--yes).")?;
                    true
                } else {
                    confirm(stdin, stderr, "Approve? [y/N] ")?
                };
                if !approved {
                    let envelope = Envelope::error(
                        envelope_ids(id, context),
                        ErrorCode::Denied,
                        "The user declined to run this call.",
                    );
                    write_pretty(stdout, &PrettyEnvelope::new(&envelope))?;
                    return Ok(ExitCode::FAILURE);
                }
                // The validated arguments are what was shown and approved.
                call.arguments = awaiting.payload.as_str().to_owned();
                execution = executor.execute_approved(&call, context).await;
            }
            Outcome::Awaiting(awaiting) => {
                let who = match awaiting.reason {
                    AwaitReason::Human => "a person must answer it; the answer becomes the result",
                    AwaitReason::Client => {
                        "a client (browser, app) must run its payload and send the result back"
                    }
                    AwaitReason::Approval => "it waits for an approval",
                };
                writeln!(
                    stderr,
                    "`{name}` was validated and now waits: {who}. Nothing more runs here."
                )?;
                write_pretty(
                    stdout,
                    &Waiting {
                        awaiting: awaiting.reason,
                        then: awaiting.then,
                        tool: name,
                        tool_call_id: id,
                        payload: awaiting.payload.to_value(),
                    },
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            Outcome::PassThrough => {
                writeln!(
                    stderr,
                    "`{name}` is a provider tool: the model provider runs it, never this program."
                )?;
                write_pretty(
                    stdout,
                    &PassThrough {
                        pass_through: true,
                        tool: name,
                        tool_call_id: id,
                    },
                )?;
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}
