//! What a running tool may know about its call: ids, who the run is for,
//! which tool was called and why, cancellation, user state; and where it
//! reports progress and partial results.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
/// The token a call's cancellation travels on (tokio-util's), named here so
/// a user needs no direct dependency to make one.
pub use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::live::{
    ElicitationAnswer, ElicitationReply, ElicitationRequest, LiveSink, ProgressUpdate,
};

/// The context handed to a tool function.
///
/// Cheap to clone: the per-call parts (id, tool, reason) are reference
/// counted and everything else sits behind one shared pointer, because the
/// executor makes a copy for every call.
///
/// `P` is the type of the partial results the tool may report
/// ([`ToolContext::partial`]): a tool declared `progressive = true` takes
/// `ctx: &ToolContext<T>`, `T` being its output type or the declared
/// `partial = T`, and `#[agent_tool]` checks that the two agree. Every other
/// tool takes `&ToolContext` and reports no partial results; a call of
/// `partial` on it does not compile.
pub struct ToolContext<P = NoPartials> {
    tool_call_id: Option<Arc<str>>,
    /// The called tool's name: borrowed from the program for a declared
    /// tool, so that it costs no copy per call.
    tool: Option<ToolName>,
    /// The model's `_reasoningForCall`, when it gave one.
    reasoning: Option<Arc<str>>,
    shared: Arc<Shared>,
    partials: PhantomData<fn(P)>,
}

/// The partial-result type of a context whose tool reports none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoPartials {}

/// A value a tool may report as a partial result.
#[diagnostic::on_unimplemented(
    message = "this tool reports no partial results of type `{Self}`",
    label = "`partial` needs the tool's partial type",
    note = "declare the tool `progressive = true` (partial results of its output type) or `partial = T`, and take `ctx: &ToolContext<T>`"
)]
pub trait PartialValue: Serialize {}

impl<T: Serialize> PartialValue for T {}

impl<P> Clone for ToolContext<P> {
    fn clone(&self) -> Self {
        ToolContext {
            tool_call_id: self.tool_call_id.clone(),
            tool: self.tool.clone(),
            reasoning: self.reasoning.clone(),
            shared: Arc::clone(&self.shared),
            partials: PhantomData,
        }
    }
}

impl Default for ToolContext {
    fn default() -> Self {
        ToolContext {
            tool_call_id: None,
            tool: None,
            reasoning: None,
            shared: Arc::default(),
            partials: PhantomData,
        }
    }
}

#[derive(Clone, Default)]
struct Shared {
    conversation_id: Option<Arc<str>>,
    session_id: Option<Arc<str>>,
    agent_name: Option<Arc<str>>,
    user_id: Option<Arc<str>>,
    tenant_id: Option<Arc<str>>,
    cancellation: CancellationToken,
    state: StateMap,
    live: Option<Arc<dyn LiveSink>>,
}

type StateMap = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

impl<P> std::fmt::Debug for ToolContext<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // State values are the user's (pools, clients, secrets): never print them.
        f.debug_struct("ToolContext")
            .field("tool_call_id", &self.tool_call_id)
            .field("tool_name", &self.tool.as_ref().map(ToolName::as_str))
            .field("reasoning", &self.reasoning.is_some())
            .field("conversation_id", &self.shared.conversation_id)
            .field("session_id", &self.shared.session_id)
            .field("agent_name", &self.shared.agent_name)
            .field("user_id", &self.shared.user_id)
            .field("tenant_id", &self.shared.tenant_id)
            .field("cancelled", &self.shared.cancellation.is_cancelled())
            .field("state_entries", &self.shared.state.len())
            .field("live", &self.shared.live.is_some())
            .finish()
    }
}

impl ToolContext {
    /// An empty context: no ids, a fresh cancellation token, no state.
    pub fn new() -> Self {
        Self::default()
    }

    /// This context, for a tool whose partial results are of type `P`.
    /// `#[agent_tool]` calls it for a tool that takes `&ToolContext<P>`.
    pub fn for_partials<P>(&self) -> ToolContext<P> {
        ToolContext {
            tool_call_id: self.tool_call_id.clone(),
            tool: self.tool.clone(),
            reasoning: self.reasoning.clone(),
            shared: Arc::clone(&self.shared),
            partials: PhantomData,
        }
    }

    /// Sends this context's progress and partial results to `sink` (the
    /// agent and the MCP server plug in their own; set one to run the
    /// executor elsewhere and still see them). Without one they go nowhere.
    pub fn with_live(mut self, sink: Arc<dyn LiveSink>) -> Self {
        Arc::make_mut(&mut self.shared).live = Some(sink);
        self
    }

    /// Sets the conversation id.
    pub fn with_conversation_id(mut self, id: impl Into<Arc<str>>) -> Self {
        Arc::make_mut(&mut self.shared).conversation_id = Some(id.into());
        self
    }

    /// Sets the session id.
    pub fn with_session_id(mut self, id: impl Into<Arc<str>>) -> Self {
        Arc::make_mut(&mut self.shared).session_id = Some(id.into());
        self
    }

    /// Names the agent the run belongs to. The agent does this from
    /// [`AgentBuilder::name`](crate::agent::AgentBuilder::name).
    pub fn with_agent_name(mut self, name: impl Into<Arc<str>>) -> Self {
        Arc::make_mut(&mut self.shared).agent_name = Some(name.into());
        self
    }

    /// Sets the user the run is for. The agent copies it from the
    /// conversation ([`Conversation::with_user_id`](crate::transcript::Conversation::with_user_id)).
    pub fn with_user_id(mut self, id: impl Into<Arc<str>>) -> Self {
        Arc::make_mut(&mut self.shared).user_id = Some(id.into());
        self
    }

    /// Sets the tenant the run is for. The agent copies it from the
    /// conversation ([`Conversation::with_tenant_id`](crate::transcript::Conversation::with_tenant_id)).
    pub fn with_tenant_id(mut self, id: impl Into<Arc<str>>) -> Self {
        Arc::make_mut(&mut self.shared).tenant_id = Some(id.into());
        self
    }

    /// Sets the tool call id. The executor does this for every call.
    pub fn with_tool_call_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    /// Sets the model's reason for the call (`_reasoningForCall`). The agent
    /// does this for every call the model gave a reason for.
    pub fn with_reasoning(mut self, reasoning: impl Into<Arc<str>>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// This context with `reason` as the call's reason, when there is
    /// one (borrowed unchanged otherwise).
    pub(crate) fn reasoned(&self, reason: Option<&str>) -> std::borrow::Cow<'_, Self> {
        match reason {
            Some(reason) => std::borrow::Cow::Owned(self.clone().with_reasoning(reason)),
            None => std::borrow::Cow::Borrowed(self),
        }
    }

    /// The context of one call of the tool `tool`, with the call's id:
    /// what the executor hands the tool.
    pub(crate) fn for_call(&self, id: &Arc<str>, tool: ToolName) -> Self {
        ToolContext {
            tool_call_id: Some(Arc::clone(id)),
            tool: Some(tool),
            reasoning: self.reasoning.clone(),
            shared: Arc::clone(&self.shared),
            partials: PhantomData,
        }
    }

    /// Uses `token` for cancellation, e.g. a child of the agent run's token.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        Arc::make_mut(&mut self.shared).cancellation = token;
        self
    }

    /// Adds a typed value (a database pool, an HTTP client) for tools to read
    /// with [`ToolContext::state`]. One value per type; a second replaces it.
    pub fn with_state<T: Any + Send + Sync>(mut self, value: T) -> Self {
        Arc::make_mut(&mut self.shared)
            .state
            .insert(TypeId::of::<T>(), Arc::new(value));
        self
    }
}

impl<P> ToolContext<P> {
    /// Reports how far the call is: `done` of `total`, when the tool knows
    /// it, and what it is doing. Returns at once; never fails the call.
    /// Progress is advisory: a slow reader may see only the latest report,
    /// and the MCP server drops one that does not increase (MCP requires
    /// progress to increase). It never reaches the model.
    pub fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        if let (Some(sink), Some(id)) = (&self.shared.live, &self.tool_call_id) {
            sink.progress(
                id,
                ProgressUpdate {
                    done,
                    total,
                    message: message.map(str::to_owned),
                },
            );
        }
    }

    /// Reports a partial result: a value of the tool's partial type, shown
    /// to whoever watches the run (`AgentEvent::ToolPartial`), every one and
    /// in order. Returns at once; never reaches the model, which gets only
    /// the final result. A value that cannot be serialized is logged and
    /// dropped.
    pub fn partial(&self, value: &P)
    where
        P: PartialValue,
    {
        let (Some(sink), Some(id)) = (&self.shared.live, &self.tool_call_id) else {
            return;
        };
        match serde_json::to_value(value) {
            Ok(value) => sink.partial(id, value),
            Err(error) => {
                tracing::warn!(%error, "a partial result could not be serialized; it was dropped")
            }
        }
    }

    /// Asks a person while the call runs, and waits for the answer: a form
    /// to fill in, or a page to visit. In an agent run the question is the
    /// event `AgentEvent::Elicitation`, answered through its reply; where
    /// nobody can be asked (the executor alone, the MCP server) the answer
    /// is [`ElicitationAnswer::Cancel`] at once. The wait counts against
    /// the call's time limit, and ends with `Cancel` if the run is
    /// cancelled. A remote MCP server's elicitation is asked through this.
    pub async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
        let (Some(sink), Some(id)) = (&self.shared.live, &self.tool_call_id) else {
            return ElicitationAnswer::Cancel;
        };
        let (reply, answer) = ElicitationReply::channel();
        sink.elicit(id, request, reply);
        tokio::select! {
            biased;
            answer = answer => answer.unwrap_or(ElicitationAnswer::Cancel),
            () = self.shared.cancellation.cancelled() => ElicitationAnswer::Cancel,
        }
    }

    /// The id of this call, as the model gave it. Use it as the idempotency
    /// key of side effects: a retried call carries the same id.
    pub fn tool_call_id(&self) -> &str {
        self.tool_call_id.as_deref().unwrap_or("")
    }

    /// The name of the tool being called, as the catalog knows it: several
    /// tools that share one activity (`activity = "..."`) tell by it which
    /// of them was called. Empty outside a call (a context not handed out
    /// by the executor).
    pub fn tool_name(&self) -> &str {
        self.tool.as_ref().map_or("", ToolName::as_str)
    }

    /// Why the model made this call, when it said so (`_reasoningForCall`,
    /// asked for with
    /// [`AgentBuilder::ask_reasoning`](crate::agent::AgentBuilder::ask_reasoning)).
    /// It is the model's text: use it to explain or log, never to decide
    /// what the call may do.
    pub fn reasoning(&self) -> Option<&str> {
        self.reasoning.as_deref()
    }

    /// The name of the agent running the call
    /// ([`AgentBuilder::name`](crate::agent::AgentBuilder::name)), when it
    /// has one.
    pub fn agent_name(&self) -> Option<&str> {
        self.shared.agent_name.as_deref()
    }

    /// The user the run is for, as the application set it on the
    /// conversation; `None` when it set none. Aptix never checks it: it is
    /// the application's word, for a tool to scope what it reads and writes.
    pub fn user_id(&self) -> Option<&str> {
        self.shared.user_id.as_deref()
    }

    /// The tenant the run is for, as the application set it on the
    /// conversation; `None` when it set none.
    pub fn tenant_id(&self) -> Option<&str> {
        self.shared.tenant_id.as_deref()
    }

    /// The conversation this call belongs to, when known.
    pub fn conversation_id(&self) -> Option<&str> {
        self.shared.conversation_id.as_deref()
    }

    /// The session this call belongs to, when known.
    pub fn session_id(&self) -> Option<&str> {
        self.shared.session_id.as_deref()
    }

    /// The shared ids, cloned without copying the text.
    pub(crate) fn shared_ids(&self) -> (Option<Arc<str>>, Option<Arc<str>>) {
        (
            self.shared.conversation_id.clone(),
            self.shared.session_id.clone(),
        )
    }

    /// Cancelled when the caller cancels the run. Long-running tools should
    /// watch it and stop cooperatively. (When a call's time limit passes, the
    /// executor drops the tool's future instead: work the tool spawned on its
    /// own is not stopped by that, so such tools should watch this token.)
    pub fn cancellation(&self) -> &CancellationToken {
        &self.shared.cancellation
    }

    /// Whether cancellation has been requested.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancellation.is_cancelled()
    }

    /// The value of type `T` added with [`ToolContext::with_state`].
    pub fn state<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.shared
            .state
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// Like [`ToolContext::state`], but a missing value is an internal error
    /// (a wiring mistake of the application, not something the model can fix).
    pub fn require_state<T: Any + Send + Sync>(&self) -> Result<&T, ToolError> {
        self.state::<T>().ok_or_else(|| {
            ToolError::internal_message(format!(
                "no state of type `{}` was added to the ToolContext",
                std::any::type_name::<T>()
            ))
        })
    }
}

/// A type of state a tool takes from its context (`state = [Db, Mailer]`
/// in `#[agent_tool]`, [`ToolEntryBuilder::takes_state`](crate::catalog::ToolEntryBuilder::takes_state)
/// for a tool made at run time). Declared, it is checked where a context
/// meets the catalog ([`AgentBuilder::build`](crate::agent::AgentBuilder::build),
/// [`Catalog::missing_state`](crate::Catalog::missing_state)):
/// a missing pool is a start-up error instead of a failed call.
///
/// Made in a constant (`StateType::of::<Db>()`): the type's id and name are
/// read through functions, which a constant can hold.
#[derive(Clone, Copy)]
pub struct StateType {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
}

impl StateType {
    /// The state type `T`, as [`ToolContext::with_state`] files it.
    pub const fn of<T: Any + Send + Sync>() -> StateType {
        StateType {
            type_id: TypeId::of::<T>,
            type_name: std::any::type_name::<T>,
        }
    }

    /// The type's id, the key of [`ToolContext::state`]. (Not `type_id`:
    /// that would be taken for [`Any::type_id`] through a reference.)
    pub fn id(&self) -> TypeId {
        (self.type_id)()
    }

    /// The type's name, for messages (as [`std::any::type_name`] gives it).
    pub fn name(&self) -> &'static str {
        (self.type_name)()
    }
}

// By the type's id: two function pointers to one function need not be
// equal, two ids of one type are.
impl PartialEq for StateType {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

impl Eq for StateType {}

impl std::hash::Hash for StateType {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}

impl std::fmt::Debug for StateType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StateType").field(&self.name()).finish()
    }
}

/// A state type a tool declares that a context does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingState {
    /// The tool that declares it.
    pub tool: String,
    /// The type's name.
    pub type_name: &'static str,
}

impl std::fmt::Display for MissingState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the tool `{}` takes `{}` from its context, and none was added (`ToolContext::with_state`)",
            self.tool, self.type_name
        )
    }
}

impl<P> ToolContext<P> {
    /// Whether a value of the type `id` names was added with
    /// [`ToolContext::with_state`].
    pub(crate) fn holds_state(&self, id: TypeId) -> bool {
        self.shared.state.contains_key(&id)
    }
}

/// A tool's name as a context holds it: cheap to clone.
#[derive(Clone)]
pub(crate) enum ToolName {
    /// A declared tool's, from the program.
    Static(&'static str),
    /// A tool's made at run time.
    Shared(Arc<str>),
}

impl ToolName {
    fn as_str(&self) -> &str {
        match self {
            ToolName::Static(name) => name,
            ToolName::Shared(name) => name,
        }
    }
}
