//! What a running tool may know about its call: ids, cancellation, user state.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::ToolError;

/// The context handed to a tool function.
///
/// Cheap to clone: the per-call id is one reference-counted string and
/// everything else sits behind one shared pointer, because the executor
/// makes a copy for every call.
#[derive(Clone, Default)]
pub struct ToolContext {
    tool_call_id: Option<Arc<str>>,
    shared: Arc<Shared>,
}

#[derive(Clone, Default)]
struct Shared {
    conversation_id: Option<Arc<str>>,
    session_id: Option<Arc<str>>,
    cancellation: CancellationToken,
    state: StateMap,
}

type StateMap = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // State values are the user's (pools, clients, secrets): never print them.
        f.debug_struct("ToolContext")
            .field("tool_call_id", &self.tool_call_id)
            .field("conversation_id", &self.shared.conversation_id)
            .field("session_id", &self.shared.session_id)
            .field("cancelled", &self.shared.cancellation.is_cancelled())
            .field("state_entries", &self.shared.state.len())
            .finish()
    }
}

impl ToolContext {
    /// An empty context: no ids, a fresh cancellation token, no state.
    pub fn new() -> Self {
        Self::default()
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

    /// Sets the tool call id. The executor does this for every call.
    pub fn with_tool_call_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.tool_call_id = Some(id.into());
        self
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

    /// The id of this call, as the model gave it. Use it as the idempotency
    /// key of side effects: a retried call carries the same id.
    pub fn tool_call_id(&self) -> &str {
        self.tool_call_id.as_deref().unwrap_or("")
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
