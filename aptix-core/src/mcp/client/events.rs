//! What a server sends the client on its own: progress of a call, a
//! changed tool list, elicitation and sampling requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::Value;

use super::Shared;
use super::sampling::Sampler;
use crate::context::ToolContext;
use crate::live::{ElicitationAnswer, ElicitationRequest};
use crate::tool::BoxFuture;

/// Answers a server's elicitation requests in place of the person watching
/// the run ([`super::McpToolset::elicitation`]).
/// A closure `Fn(ElicitationRequest) -> impl Future<Output = ElicitationAnswer>`
/// is one.
pub trait Elicitor: Send + Sync + 'static {
    /// The person's answer to `request`.
    fn answer(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer>;
}

impl<F, Fut> Elicitor for F
where
    F: Fn(ElicitationRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ElicitationAnswer> + Send + 'static,
{
    fn answer(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        Box::pin(self(request))
    }
}

/// What the connection's handler shares with the toolset: where progress
/// and questions go, who answers elicitations and samples, whom to tell of
/// a changed list.
pub(super) struct Hub {
    label: String,
    elicitor: Option<Arc<dyn Elicitor>>,
    sampler: Option<Sampler>,
    /// The calls in flight, by progress token, with the order they started
    /// in.
    calls: Mutex<HashMap<ProgressToken, (u64, ToolContext)>>,
    started: std::sync::atomic::AtomicU64,
    toolset: Mutex<Weak<Shared>>,
}

impl Hub {
    pub(super) fn new(
        label: String,
        elicitor: Option<Arc<dyn Elicitor>>,
        sampler: Option<Sampler>,
    ) -> Self {
        Hub {
            label,
            elicitor,
            sampler,
            calls: Mutex::new(HashMap::new()),
            started: std::sync::atomic::AtomicU64::new(0),
            toolset: Mutex::new(Weak::new()),
        }
    }

    /// The context of the call a server request belongs to. MCP does not
    /// say which call a request comes from (over stdio nothing carries
    /// it), so with several calls in flight the earliest is taken: the
    /// question then shows under that call, and the answer still goes to
    /// the server that asked.
    fn asking_call(&self) -> Option<ToolContext> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .min_by_key(|(started, _)| *started)
            .map(|(_, ctx)| ctx.clone())
    }

    pub(super) fn watch_list(&self, toolset: Weak<Shared>) {
        *self.toolset.lock().unwrap_or_else(|e| e.into_inner()) = toolset;
    }

    /// Sends the progress notifications of `token` to `ctx` until the
    /// returned guard is dropped.
    pub(super) fn route_progress(
        self: &Arc<Self>,
        token: ProgressToken,
        ctx: &ToolContext,
    ) -> Route {
        let started = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), (started, ctx.clone()));
        Route {
            hub: Arc::downgrade(self),
            token,
        }
    }
}

/// Ends a call's progress route.
pub(super) struct Route {
    hub: Weak<Hub>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.token);
        }
    }
}

/// The rmcp client handler of one connection.
pub(super) struct Events {
    hub: Arc<Hub>,
}

impl Events {
    pub(super) fn new(hub: Arc<Hub>) -> Self {
        Events { hub }
    }
}

impl ClientHandler for Events {
    fn get_info(&self) -> ClientConfig {
        // Elicitation is always offered: without an elicitor the person
        // watching the run answers. Sampling only when enabled.
        #[allow(deprecated)]
        let capabilities = if self.hub.sampler.is_some() {
            ClientCapabilities::builder()
                .enable_elicitation()
                .enable_sampling()
                .build()
        } else {
            ClientCapabilities::builder().enable_elicitation().build()
        };
        ClientConfig::new(
            capabilities,
            Implementation::new("aptix", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let ctx = self
            .hub
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&params.progress_token)
            .map(|(_, ctx)| ctx.clone());
        if let Some(ctx) = ctx {
            ctx.progress(params.progress, params.total, params.message.as_deref());
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let toolset = self
            .hub
            .toolset
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade();
        let Some(toolset) = toolset else { return };
        // Listing is a request on this same connection: it is sent from a
        // task of its own, not from inside the handler that must read its
        // answer.
        tokio::spawn(async move {
            match toolset.refresh().await {
                Ok(()) => {
                    tracing::info!(server = %toolset.offer.label, "the MCP server's tools changed; listed again")
                }
                Err(error) => {
                    tracing::warn!(%error, "could not list the MCP server's changed tools")
                }
            }
        });
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = match &request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => ElicitationRequest::form(
                self.hub.label.clone(),
                message.clone(),
                serde_json::to_value(requested_schema).unwrap_or(Value::Null),
            ),
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                ElicitationRequest::url(self.hub.label.clone(), message.clone(), url.clone())
            }
            // A kind of request this client does not know.
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        let answer = match (self.hub.elicitor.clone(), self.hub.asking_call()) {
            (Some(elicitor), _) => elicitor.answer(asked).await,
            (None, Some(ctx)) => ctx.elicit(asked).await,
            // Nobody to ask: no call of this toolset is running.
            (None, None) => ElicitationAnswer::Cancel,
        };
        Ok(match answer {
            ElicitationAnswer::Accept(Value::Object(content)) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            ElicitationAnswer::Accept(_) => {
                return Err(ErrorData::internal_error(
                    "the elicitation answer must be a JSON object",
                    None,
                ));
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        let Some(sampler) = &self.hub.sampler else {
            return Err(ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >());
        };
        let cancellation = self.hub.asking_call().map(|ctx| ctx.cancellation().clone());
        sampler.sample(&self.hub.label, params, cancellation).await
    }
}
