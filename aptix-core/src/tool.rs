//! The tool contract: what `#[agent_tool]` implements for every declared tool.
//!
//! Two traits, because two kinds of declaration exist. Every tool is a [`Tool`]
//! (name, usage, execution mode, argument schema). Only the function form also
//! has server code to run, and so also implements [`ToolFn`]; the struct form
//! ("schema only" tools whose final behaviour happens in a client, a person or
//! the provider) does not, and the type system keeps anyone from calling it.

use std::future::Future;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

pub use crate::meta::{Annotations, Approval, ExecutorKind, Redaction, SourceLocation};
use serde::de::DeserializeOwned;

use crate::catalog::DynTool;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::schema::{DefinitionError, ToolDefinition};

/// A tool an LLM may call. Implemented by `#[agent_tool]`; implementing it by
/// hand is possible but the macro's compile-time checks are then yours to do.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls; unique in a catalog, `^[A-Za-z0-9_-]{1,64}$`.
    const NAME: &'static str;
    /// When the model should call the tool (surfaced in prompts and the CLI).
    const USAGE: &'static str;
    /// What the tool does: the schema's `description`.
    const DESCRIPTION: &'static str;
    /// Where the final behaviour happens.
    const EXECUTOR: ExecutorKind;
    /// Whether a person must approve each call.
    const APPROVAL: Approval;
    /// The tool's own time limit; `None` uses the executor's default.
    const TIMEOUT: Option<Duration>;
    /// Where the tool was declared.
    const SOURCE: SourceLocation;
    /// Which values of the arguments and the result may reach events and
    /// logs (`redact = [...]` or `log_fields = [...]`); the tool and the
    /// model always see the real values.
    const REDACTION: Redaction = Redaction::Undeclared;
    /// How long a suspended call (waiting for an approval, a client or a
    /// person) may wait before it resolves to a `timeout` error; `None`
    /// uses the agent's default.
    const SUSPEND_TIMEOUT: Option<Duration> = None;
    /// Whether running a call twice with the same `tool_call_id` is safe.
    /// After a crash, a call that was executing is run again only when its
    /// tool is idempotent; otherwise it gets an "interrupted" error result.
    const IDEMPOTENT: bool = false;
    /// A short human-readable name for user interfaces (MCP `title`).
    const TITLE: Option<&'static str> = None;
    /// The tool changes nothing (MCP `readOnlyHint`; default false).
    const READ_ONLY: bool = false;
    /// When it changes something, the change may destroy or overwrite
    /// (MCP `destructiveHint`; default true, as the MCP spec says).
    const DESTRUCTIVE: bool = true;
    /// It reaches beyond a closed set of things, e.g. the web (MCP
    /// `openWorldHint`; default true).
    const OPEN_WORLD: bool = true;

    /// The arguments the model sends: always a JSON object.
    type Args: ToolArgs;
    /// What the model finally receives as the result: the function's output
    /// for server tools, the declared `output` for client and human tools.
    type Output: ToolOutputSchema;

    /// The canonical definition, built once and cached for the process.
    fn definition() -> Result<&'static ToolDefinition, &'static DefinitionError>;

    /// The type-erased form the catalog and executor hold.
    fn dyn_tool() -> &'static dyn DynTool;
}

/// A tool with server code: the function form of `#[agent_tool]`.
///
/// For server tools `call` produces the final result; for client and human
/// tools it is the server preflight (AGN-005): it validates, authorises and
/// shapes the payload that the client or person then acts on.
pub trait ToolFn: Tool {
    /// What `call` returns on success.
    type Returned: ToolOutput;

    /// Runs the declared function.
    fn call(
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<Self::Returned, ToolError>> + Send;
}

// The three traits below carry the compile-time messages of `#[agent_tool]`.
// Their serde/schemars requirements are bounds of a `do_not_recommend`
// blanket impl and of a hidden associated type, never supertraits: with a
// supertrait rustc reports the inner bound ("`Args: Deserialize<'_>` is not
// satisfied", plus a list of unrelated types) instead of the message here.

/// What an arguments type needs: it is parsed from the model's JSON and
/// described to the model by its schema. Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the arguments of an agent tool",
    label = "this type must derive `Deserialize` and `JsonSchema`",
    note = "add `#[derive(Deserialize, JsonSchema)]` to `{Self}` (both derives are in `aptix::prelude`)"
)]
pub trait ToolArgs: Send + Sized + 'static {
    /// `Self`, with the bounds generic code needs (always `Self`).
    #[doc(hidden)]
    type Serde: DeserializeOwned + JsonSchema + Into<Self>;
}
#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned + JsonSchema + Send + 'static> ToolArgs for T {
    type Serde = T;
}

/// What a tool function's success type needs: it is serialized into the
/// envelope. Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the output of an agent tool",
    label = "this type must derive `Serialize`",
    note = "the result is sent to the model as JSON: add `#[derive(Serialize)]` to `{Self}` (it is in `aptix::prelude`)"
)]
pub trait ToolOutput: Send + Sized + 'static {
    /// `Self`, with the bounds generic code needs (always `Self`).
    #[doc(hidden)]
    type Serde: Serialize + From<Self>;
}
#[diagnostic::do_not_recommend]
impl<T: Serialize + Send + 'static> ToolOutput for T {
    type Serde = T;
}

/// What a tool's result type needs: the model is told its schema.
/// Implemented for every such type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the output of an agent tool",
    label = "this type must derive `JsonSchema`",
    note = "the model is told the result's schema: add `#[derive(JsonSchema)]` to `{Self}` (it is in `aptix::prelude`)"
)]
pub trait ToolOutputSchema {
    /// `Self`, with the bounds generic code needs (always `Self`).
    #[doc(hidden)]
    type Schema: JsonSchema;
}
#[diagnostic::do_not_recommend]
impl<T: JsonSchema> ToolOutputSchema for T {
    type Schema = T;
}
