//! What a server sends the client on its own: progress of a call, a
//! changed tool list, elicitation requests.

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
use crate::context::ToolContext;
use crate::tool::BoxFuture;

/// A form the server asks a person to fill in during a call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The server's label.
    pub server: String,
    /// What the server says to the person.
    pub message: String,
    /// The JSON Schema of the answer (a flat object), or `None` for a URL
    /// elicitation (the person is sent to `url`).
    pub schema: Option<Value>,
    /// The page a URL elicitation sends the person to.
    pub url: Option<String>,
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// The answer, an object matching the schema.
    Accept(Value),
    /// The person said no.
    Decline,
    /// The person dismissed the form.
    Cancel,
}

/// Answers a server's elicitation requests ([`super::McpToolset::elicitation`]).
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
/// goes, who answers elicitations, whom to tell of a changed list.
pub(super) struct Hub {
    label: String,
    elicitor: Option<Arc<dyn Elicitor>>,
    progress: Mutex<HashMap<ProgressToken, ToolContext>>,
    toolset: Mutex<Weak<Shared>>,
}

impl Hub {
    pub(super) fn new(label: String, elicitor: Option<Arc<dyn Elicitor>>) -> Self {
        Hub {
            label,
            elicitor,
            progress: Mutex::new(HashMap::new()),
            toolset: Mutex::new(Weak::new()),
        }
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
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), ctx.clone());
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
            hub.progress
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
        let capabilities = if self.hub.elicitor.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
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
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&params.progress_token)
            .cloned();
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
        let Some(elicitor) = self.hub.elicitor.clone() else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let asked = match &request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => ElicitationRequest {
                server: self.hub.label.clone(),
                message: message.clone(),
                schema: serde_json::to_value(requested_schema).ok(),
                url: None,
            },
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => ElicitationRequest {
                server: self.hub.label.clone(),
                message: message.clone(),
                schema: None,
                url: Some(url.clone()),
            },
            // A kind of request this client does not know.
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        Ok(match elicitor.answer(asked).await {
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
}
