//! What a tool declares about itself, as plain values: where its final
//! behaviour happens, whether a person approves its calls, what its calls do,
//! which values events may show, and where it was declared.
//!
//! These are the words every later layer speaks: the macro writes them as
//! constants, a definition built at run time fills them in, and the executor,
//! the agent loop, the call ledger, MCP and the CLI all read them. [`route`]
//! is the one place that turns an executor kind and an approval into what
//! runs on the server and who is then awaited; `Gate` says which approval
//! one call meets: as declared, asked for by a policy, or already given.

use std::time::Duration;

use serde::Serialize;

/// Everything a tool declares besides its types, as one constant value.
///
/// `#[agent_tool]` writes one per tool (`const META: ToolMeta`); a
/// definition made at run time starts from [`ToolMeta::new`] too. A new
/// attribute key is a new field here, read where it matters: the
/// definition carries the whole value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ToolMeta {
    /// The name the model calls; unique in a catalog, `^[A-Za-z0-9_-]{1,64}$`.
    pub name: &'static str,
    /// When the model should call the tool (surfaced in prompts and the CLI).
    pub usage: &'static str,
    /// What the tool does: the schema's `description`.
    pub description: &'static str,
    /// Where the final behaviour happens.
    pub executor: ExecutorKind,
    /// Whether a person must approve each call.
    pub approval: Approval,
    /// The tool's own time limit; `None` uses the executor's default.
    pub timeout: Option<Duration>,
    /// How long a suspended call (waiting for an approval, a client or a
    /// person) may wait before it resolves to a `timeout` error; `None`
    /// uses the agent's default.
    pub suspend_timeout: Option<Duration>,
    /// A short human-readable name for user interfaces (MCP `title`).
    pub title: Option<&'static str>,
    /// The name of the activity that computes a latent tool's result, when
    /// it is not the tool's own name (the schema-first specification's
    /// explicit `_activity`): several tools can share one activity. Such a
    /// tool needs that activity bound; `None` binds by the tool's name;
    /// `Some("")` keeps the tool latent whatever is bound.
    pub activity: Option<&'static str>,
    /// Whether the tool reports progress and partial results while it runs
    /// (`progressive = true`): a user interface can expect
    /// `AgentEvent::ToolProgress` / `ToolPartial` for its calls.
    pub progressive: bool,
    /// How often in one run the model may call again after the tool asked
    /// it to (`ToolError::retry`); past it the model gets a `failed` result.
    /// `retries = N` in the attribute; 1 by default.
    pub retries: u8,
    /// How long its results stay whole in the model's requests
    /// (`retention = "keep_last(3)"`); the stored transcript keeps every
    /// result whatever this says.
    pub retention: Retention,
    /// What its calls do, as hints for clients. `idempotent` also decides
    /// whether a call a crash interrupted is run again: only when it is
    /// safe to run twice with the same `tool_call_id`; otherwise the call
    /// gets an "interrupted" error result.
    pub annotations: Annotations,
    /// Which values of the arguments and the result may reach events and
    /// logs (`redact = [...]` or `log_fields = [...]`); the tool and the
    /// model always see the real values.
    pub redaction: Redaction,
    /// The state types the tool takes from its context (`state = [Db]`),
    /// checked to be there when an agent is built.
    pub state: &'static [crate::context::StateType],
    /// Where the tool was declared.
    pub source: SourceLocation,
}

impl ToolMeta {
    /// A server tool that needs no approval, with no limits of its own,
    /// MCP's default annotations and no redaction declared.
    pub const fn new(
        name: &'static str,
        usage: &'static str,
        description: &'static str,
        source: SourceLocation,
    ) -> ToolMeta {
        ToolMeta {
            name,
            usage,
            description,
            executor: ExecutorKind::Server,
            approval: Approval::Auto,
            timeout: None,
            suspend_timeout: None,
            title: None,
            activity: None,
            progressive: false,
            retries: 1,
            retention: Retention::Budget,
            annotations: Annotations::DEFAULT,
            redaction: Redaction::Undeclared,
            state: &[],
            source,
        }
    }

    /// What runs on the server for a call of this tool, and who is awaited.
    pub const fn route(&self) -> Route {
        route(self.executor, self.approval)
    }
}

/// How long a tool's results stay whole in the model's requests, before
/// a short stub takes their place there (the stored transcript keeps them).
///
/// Every rule is a function of the transcript alone, so the same
/// transcript always gives the same request: what is stubbed stays
/// stubbed, and a provider's prompt cache keeps matching the prefix
/// between evictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retention {
    /// Kept until the agent's context budget needs the room, oldest first.
    /// The default.
    Budget,
    /// Only the tool's last `n` results stay whole (`keep_last(n)`).
    KeepLast(u32),
    /// A result stays whole for `n` model turns after the one that made
    /// the call (`turns(n)`).
    Turns(u32),
    /// Never stubbed, even over the budget (`never_evict`).
    NeverEvict,
}

/// The attribute spelling (`#[agent_tool]` reads it at compile time).
impl std::fmt::Display for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Retention::Budget => f.write_str("budget"),
            Retention::KeepLast(n) => write!(f, "keep_last({n})"),
            Retention::Turns(n) => write!(f, "turns({n})"),
            Retention::NeverEvict => f.write_str("never_evict"),
        }
    }
}

/// Where a tool's final behaviour happens.
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
    /// Schema only: the model gives the result itself, in the `_output`
    /// member of its own call, unless an activity bound by the tool's name
    /// computes it on the server (see [`crate::activity`]). Either way the
    /// server validates the call and its result, so it routes as a server
    /// tool.
    Latent,
}

impl ExecutorKind {
    /// The attribute spelling (`server`, `client`, `human`, `provider`, `latent`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Server => "server",
            ExecutorKind::Client => "client",
            ExecutorKind::Human => "human",
            ExecutorKind::Provider => "provider",
            ExecutorKind::Latent => "latent",
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

/// How one call meets its tool's approval gate: the executor routes it
/// through the gate, the ledger records it so, and the approval policy's
/// answer is one of them. Not declared by the tool: decided per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// As the tool declares it: a gated call stops at its gate.
    Declared,
    /// Held for an approval the tool does not declare: the approval
    /// policy asked for one.
    Asked,
    /// A person approved it: past the gate. `changed` when the approver
    /// changed its arguments, so that the ledger tells the model which
    /// arguments ran (routing is the same either way).
    Approved { changed: bool },
}

impl Gate {
    /// The approval a call through this gate is routed with (see
    /// [`route`]), for a tool that declares `declared`.
    pub(crate) const fn approval(self, declared: Approval) -> Approval {
        match self {
            Gate::Declared => declared,
            Gate::Asked => Approval::RequiresApproval,
            Gate::Approved { .. } => Approval::Auto,
        }
    }
}

/// Who a suspended call is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AwaitReason {
    /// A person must approve the call.
    Approval,
    /// A client must execute the prepared payload and send the result.
    Client,
    /// A person must answer; the answer is the result.
    Human,
}

/// What the server does with a call before anyone else sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerStep {
    /// Nothing: the model provider runs the tool (the call passes through).
    PassThrough,
    /// Only the arguments are validated: the tool's code is the action a
    /// person must approve first, so it must not run yet.
    Validate,
    /// The server step runs: the tool function (the final result of a
    /// server tool, the preflight that shapes a client's or person's
    /// payload), or validation alone for a tool declared without code.
    Run,
}

/// What happens to a call of a tool: what runs on the server, and who is
/// awaited after it. Made by [`route`], the only place that decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Route {
    /// What runs on the server first.
    pub step: ServerStep,
    /// Who must act once the server step succeeded; `None`: the server
    /// step's result is final (or, for [`ServerStep::PassThrough`], the
    /// provider answers).
    pub awaits: Option<AwaitReason>,
    /// Who must act after that, if anyone (an approved client call goes on
    /// to the client).
    pub then: Option<AwaitReason>,
}

impl Route {
    /// Whether the server's result is what the model receives.
    pub const fn is_final_on_server(self) -> bool {
        matches!(self.step, ServerStep::Run) && self.awaits.is_none()
    }

    /// Whether a client must execute the call, now or once approved.
    pub const fn reaches_client(self) -> bool {
        matches!(self.awaits, Some(AwaitReason::Client))
            || matches!(self.then, Some(AwaitReason::Client))
    }

    /// The next party after `reason` acted, in this route.
    pub const fn after(self, reason: AwaitReason) -> Option<AwaitReason> {
        match (self.awaits, reason) {
            (Some(AwaitReason::Approval), AwaitReason::Approval) => self.then,
            _ => None,
        }
    }
}

/// Maps a tool's executor kind and approval to what runs on the server and
/// who is awaited after it.
///
/// | executor | approval | server step | awaits | then |
/// | --- | --- | --- | --- | --- |
/// | `server` | `auto` | run | – (final) | – |
/// | `server` | `requires_approval` | validate | approval | – |
/// | `client` | `auto` | run (preflight) | client | – |
/// | `client` | `requires_approval` | run (preflight) | approval | client |
/// | `human` | any | run (preflight) | person | – |
/// | `provider` | any | pass through | – | – |
/// | `latent` | as `server` | | | |
///
/// A gated server tool only validates before its approval because its code
/// is the action itself; a gated client tool's preflight runs first, since
/// it only shapes the payload the approver sees and the client executes.
/// A call a person has approved is routed as `route(executor, Approval::Auto)`:
/// the gate is passed, so a server tool runs and a client tool goes on to
/// its client. A human tool needs no approval (a person answers it anyway),
/// so its approval is ignored. A latent tool's server step is its activity,
/// or the check of the result the model gave: it routes as a server tool,
/// so a gated latent call is held before either runs.
pub const fn route(executor: ExecutorKind, approval: Approval) -> Route {
    let (step, awaits, then) = match (executor, approval) {
        (ExecutorKind::Provider, _) => (ServerStep::PassThrough, None, None),
        (ExecutorKind::Server | ExecutorKind::Latent, Approval::Auto) => {
            (ServerStep::Run, None, None)
        }
        (ExecutorKind::Server | ExecutorKind::Latent, Approval::RequiresApproval) => {
            (ServerStep::Validate, Some(AwaitReason::Approval), None)
        }
        (ExecutorKind::Client, Approval::Auto) => {
            (ServerStep::Run, Some(AwaitReason::Client), None)
        }
        (ExecutorKind::Client, Approval::RequiresApproval) => (
            ServerStep::Run,
            Some(AwaitReason::Approval),
            Some(AwaitReason::Client),
        ),
        (ExecutorKind::Human, _) => (ServerStep::Run, Some(AwaitReason::Human), None),
    };
    Route { step, awaits, then }
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

impl Annotations {
    /// MCP's defaults: may change things, destructively, not idempotent,
    /// in an open world.
    pub const DEFAULT: Annotations = Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
}

impl Default for Annotations {
    fn default() -> Self {
        Annotations::DEFAULT
    }
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

/// The reference tokens of a JSON pointer (RFC 6901), unescaped: `/a~1b/0`
/// → `["a/b", "0"]`; the empty pointer (the whole value) → `[]`. How a
/// [`Redaction`]'s pointers are compared with the places of values.
pub(crate) fn pointer_tokens(pointer: &str) -> Vec<String> {
    if pointer.is_empty() {
        return Vec::new();
    }
    pointer
        .strip_prefix('/')
        .unwrap_or(pointer)
        .split('/')
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect()
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

impl SourceLocation {
    /// Where the function marked `#[track_caller]` that calls this was
    /// called: the place a tool made at run time was made.
    #[track_caller]
    pub fn caller() -> SourceLocation {
        let caller = std::panic::Location::caller();
        SourceLocation {
            file: caller.file(),
            line: caller.line(),
            module_path: "made at run time",
        }
    }
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} ({})", self.file, self.line, self.module_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [ExecutorKind; 5] = [
        ExecutorKind::Server,
        ExecutorKind::Client,
        ExecutorKind::Human,
        ExecutorKind::Provider,
        ExecutorKind::Latent,
    ];
    const APPROVALS: [Approval; 2] = [Approval::Auto, Approval::RequiresApproval];

    #[test]
    fn retention_writes_the_attribute_spellings() {
        for (text, retention) in [
            ("keep_last(3)", Retention::KeepLast(3)),
            ("turns(10)", Retention::Turns(10)),
            ("never_evict", Retention::NeverEvict),
        ] {
            assert_eq!(retention.to_string(), text);
        }
    }

    #[test]
    fn the_table() {
        use AwaitReason::{Approval as A, Client as C, Human as H};
        use ServerStep::{PassThrough, Run, Validate};
        let expected = [
            (ExecutorKind::Server, Approval::Auto, Run, None, None),
            (
                ExecutorKind::Server,
                Approval::RequiresApproval,
                Validate,
                Some(A),
                None,
            ),
            (ExecutorKind::Client, Approval::Auto, Run, Some(C), None),
            (
                ExecutorKind::Client,
                Approval::RequiresApproval,
                Run,
                Some(A),
                Some(C),
            ),
            (ExecutorKind::Human, Approval::Auto, Run, Some(H), None),
            (
                ExecutorKind::Human,
                Approval::RequiresApproval,
                Run,
                Some(H),
                None,
            ),
            (
                ExecutorKind::Provider,
                Approval::Auto,
                PassThrough,
                None,
                None,
            ),
            (
                ExecutorKind::Provider,
                Approval::RequiresApproval,
                PassThrough,
                None,
                None,
            ),
            (ExecutorKind::Latent, Approval::Auto, Run, None, None),
            (
                ExecutorKind::Latent,
                Approval::RequiresApproval,
                Validate,
                Some(A),
                None,
            ),
        ];
        for (kind, approval, step, awaits, then) in expected {
            assert_eq!(
                route(kind, approval),
                Route { step, awaits, then },
                "{kind:?} × {approval:?}"
            );
        }
    }

    #[test]
    fn an_approved_call_never_waits_for_another_approval() {
        for kind in KINDS {
            let approved = route(kind, Approval::Auto);
            assert_ne!(approved.awaits, Some(AwaitReason::Approval), "{kind:?}");
            // What follows an approval is what an approved call awaits.
            let gated = route(kind, Approval::RequiresApproval);
            if gated.awaits == Some(AwaitReason::Approval) {
                assert_eq!(
                    gated.after(AwaitReason::Approval),
                    approved.awaits,
                    "{kind:?}"
                );
                assert_eq!(approved.step, ServerStep::Run, "{kind:?}");
            }
        }
    }

    #[test]
    fn derived_questions() {
        for kind in KINDS {
            for approval in APPROVALS {
                let route = route(kind, approval);
                assert_eq!(
                    route.reaches_client(),
                    kind == ExecutorKind::Client,
                    "{kind:?} × {approval:?}"
                );
                assert_eq!(
                    route.is_final_on_server(),
                    approval == Approval::Auto
                        && matches!(kind, ExecutorKind::Server | ExecutorKind::Latent),
                    "{kind:?} × {approval:?}"
                );
                // Only a client call waits twice, and only after an approval.
                assert_eq!(
                    route.then.is_some(),
                    route.after(AwaitReason::Approval).is_some()
                );
            }
        }
    }
}
