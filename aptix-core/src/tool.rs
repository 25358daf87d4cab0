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
use serde::de::DeserializeOwned;

use crate::catalog::DynTool;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::schema::{DefinitionError, ToolDefinition};

/// Where a tool's final behaviour happens (the seeds' execution mode).
///
/// Every call is still mediated by the server: arguments are parsed and
/// validated here before anything else sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// The server runs the tool and its result goes straight back to the model.
    Server,
    /// The server validates and shapes a payload; a client (browser, IDE) runs it.
    Client,
    /// A person answers; the answer is the result.
    Human,
    /// The model provider runs it (e.g. hosted web search); never dispatched here.
    Provider,
}

impl ExecutorKind {
    /// The attribute spelling (`server`, `client`, `human`, `provider`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Server => "server",
            ExecutorKind::Client => "client",
            ExecutorKind::Human => "human",
            ExecutorKind::Provider => "provider",
        }
    }
}

/// Whether a person must approve a call before it proceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// The call proceeds without asking anyone.
    Auto,
    /// The call waits for an approval; only valid for server and client tools
    /// (a human tool already asks a person; a provider tool never stops here).
    RequiresApproval,
}

impl Approval {
    /// The attribute spelling (`auto`, `requires_approval`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Approval::Auto => "auto",
            Approval::RequiresApproval => "requires_approval",
        }
    }
}

/// What a tool's calls do, as hints for clients that decide whether to ask
/// a person first (the MCP tool annotations). Hints only: never a security
/// boundary, since a tool's author writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Annotations {
    /// It changes nothing.
    pub read_only: bool,
    /// A change it makes may destroy or overwrite (meaningless when read-only).
    pub destructive: bool,
    /// Calling it again with the same arguments has no further effect.
    pub idempotent: bool,
    /// It interacts with an open world (the web), not a closed set of things.
    pub open_world: bool,
}

/// Which values of a tool's arguments and result events and logs may show.
///
/// The pointers (RFC 6901, e.g. `/card/number`) apply to the arguments and
/// to the result alike; a pointer covers the value it points at and
/// everything under it. Whatever is hidden reads `"[redacted]"`. This
/// governs what this process shows (agent events, suspended payloads in
/// events, error envelopes in events); the tool, the model and whoever
/// must act on a suspended call (an approver, a client) see the real values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Redaction {
    /// Neither key was declared: everything is shown. A tool whose
    /// argument or output fields look secret cannot stay undeclared (see
    /// [`crate::secrets::undeclared_secrets`]).
    Undeclared,
    /// `redact = [...]`: everything is shown except these values.
    /// `redact = []` declares that nothing in the tool is secret.
    Deny(&'static [&'static str]),
    /// `log_fields = [...]`: only these values are shown; everything else
    /// is hidden, including fields added to the tool later.
    Allow(&'static [&'static str]),
}

impl Redaction {
    /// Whether the tool declared a policy (`redact` or `log_fields`).
    pub const fn is_declared(self) -> bool {
        !matches!(self, Redaction::Undeclared)
    }

    /// Whether anything is hidden: a non-empty `redact`, or any `log_fields`.
    pub const fn hides_anything(self) -> bool {
        match self {
            Redaction::Undeclared => false,
            Redaction::Deny(pointers) => !pointers.is_empty(),
            Redaction::Allow(_) => true,
        }
    }
}

/// Where a tool was declared, so that catalog errors can point at source code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    /// `file!()` of the declaration.
    pub file: &'static str,
    /// `line!()` of the declaration.
    pub line: u32,
    /// `module_path!()` of the declaration.
    pub module_path: &'static str,
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} ({})", self.file, self.line, self.module_path)
    }
}

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
