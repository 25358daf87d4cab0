//! What a server sends the client on its own: progress of a call, a
//! changed tool list, elicitation and sampling requests.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::Value;

use super::Shared;
use super::limits::McpLimits;
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
/// a changed list, and what the server may still ask for.
pub(super) struct Hub {
    label: String,
    elicitor: Option<Arc<dyn Elicitor>>,
    sampler: Option<Sampler>,
    limits: McpLimits,
    /// The calls in flight, by the order they started in.
    calls: Mutex<HashMap<u64, CallRoute>>,
    started: std::sync::atomic::AtomicU64,
    toolset: Mutex<Weak<Shared>>,
    /// When each sampling request of the last minute was answered.
    sampled: Mutex<VecDeque<tokio::time::Instant>>,
    /// One question at a time is asked; this many more may wait.
    asking: tokio::sync::Semaphore,
    questions_waiting: Mutex<usize>,
}

/// One call in flight: its context, and what the server has asked for
/// during it.
struct CallRoute {
    /// Its request's progress token, once the request is sent.
    token: Option<ProgressToken>,
    ctx: ToolContext,
    /// Sampling requests the model answered for it, and the tokens they
    /// were granted.
    sampled: u32,
    tokens: u64,
    /// Questions asked of the person for it.
    asked: u32,
}

/// Questions of one server that may wait behind the one being asked;
/// more are answered `cancel` at once.
const QUESTIONS_QUEUED: usize = 3;

/// The window of [`McpLimits::sampling_requests_per_minute`].
const MINUTE: Duration = Duration::from_secs(60);

impl Hub {
    pub(super) fn new(
        label: String,
        elicitor: Option<Arc<dyn Elicitor>>,
        sampler: Option<Sampler>,
        limits: McpLimits,
    ) -> Self {
        Hub {
            label,
            elicitor,
            sampler,
            limits,
            calls: Mutex::new(HashMap::new()),
            started: std::sync::atomic::AtomicU64::new(0),
            toolset: Mutex::new(Weak::new()),
            sampled: Mutex::new(VecDeque::new()),
            asking: tokio::sync::Semaphore::new(1),
            questions_waiting: Mutex::new(0),
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<u64, CallRoute>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The call a server request belongs to, to count it against and ask
    /// through: `decide` sees its route and says what to do. MCP does not
    /// say which call a request comes from (over stdio nothing carries it),
    /// so with several calls in flight the earliest is taken: the question
    /// then shows under that call, and the answer still goes to the server
    /// that asked. `None` when no call of this server runs.
    fn for_asking_call<T>(&self, decide: impl FnOnce(&mut CallRoute) -> T) -> Option<T> {
        self.calls()
            .iter_mut()
            .min_by_key(|(started, _)| **started)
            .map(|(_, route)| decide(route))
    }

    pub(super) fn watch_list(&self, toolset: Weak<Shared>) {
        *self.toolset.lock().unwrap_or_else(|e| e.into_inner()) = toolset;
    }

    /// Counts a call of `ctx` as in flight until the returned guard is
    /// dropped: made before its request is sent, since the server may ask
    /// for something (a sampling, a question) before the request's send
    /// returns. [`Route::progress`] then routes its progress.
    pub(super) fn begin_call(self: &Arc<Self>, ctx: &ToolContext) -> Route {
        let started = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls().insert(
            started,
            CallRoute {
                token: None,
                ctx: ctx.clone(),
                sampled: 0,
                tokens: 0,
                asked: 0,
            },
        );
        Route {
            hub: Arc::downgrade(self),
            started,
        }
    }

    /// The person's answer to `asked`, within the budgets: one question
    /// of this server at a time, a few more waiting, and at most
    /// [`McpLimits::elicitations_per_call`] for the call it arrives during;
    /// `Cancel` otherwise, and when no call of the server runs.
    async fn elicit(&self, asked: ElicitationRequest) -> ElicitationAnswer {
        let budget = self.limits.elicitations_per_call;
        let ctx = self.for_asking_call(|route| {
            if route.asked >= budget {
                return None;
            }
            route.asked += 1;
            Some(route.ctx.clone())
        });
        let ctx = match ctx {
            None => {
                tracing::warn!(server = %self.label, "an MCP server asked a question while none of its calls runs; answered `cancel`");
                return ElicitationAnswer::Cancel;
            }
            Some(None) => {
                tracing::warn!(server = %self.label, budget, "an MCP server asked more questions during one call than its budget (McpLimits::elicitations_per_call); answered `cancel`");
                return ElicitationAnswer::Cancel;
            }
            Some(Some(ctx)) => ctx,
        };
        {
            let mut waiting = self
                .questions_waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if *waiting > QUESTIONS_QUEUED {
                tracing::warn!(server = %self.label, "an MCP server asked a question while others wait; answered `cancel`");
                return ElicitationAnswer::Cancel;
            }
            *waiting += 1;
        }
        let _waiting = Waiting(&self.questions_waiting);
        let Ok(_turn) = self.asking.acquire().await else {
            return ElicitationAnswer::Cancel;
        };
        match self.elicitor.clone() {
            Some(elicitor) => elicitor.answer(asked).await,
            None => ctx.elicit(asked).await,
        }
    }

    /// Counts a sampling request granted `tokens` against its call's and
    /// the toolset's budgets: the run's cancellation when it may go on,
    /// the refusal the server reads when it may not.
    fn sampling_allowed(&self, tokens: u32) -> Result<tokio_util::sync::CancellationToken, String> {
        let limits = &self.limits;
        {
            let now = tokio::time::Instant::now();
            let mut sampled = self.sampled.lock().unwrap_or_else(|e| e.into_inner());
            while sampled
                .front()
                .is_some_and(|at| now.saturating_duration_since(*at) >= MINUTE)
            {
                sampled.pop_front();
            }
            if sampled.len() >= limits.sampling_requests_per_minute as usize {
                return Err(format!(
                    "this client answers at most {} sampling requests of a server a minute",
                    limits.sampling_requests_per_minute
                ));
            }
            let decided = self.for_asking_call(|route| {
                if route.sampled >= limits.sampling_requests_per_call {
                    return Err(format!(
                        "this client answers at most {} sampling requests during one call",
                        limits.sampling_requests_per_call
                    ));
                }
                let total = route.tokens.saturating_add(u64::from(tokens));
                if total > limits.sampling_tokens_per_call {
                    return Err(format!(
                        "this client grants at most {} tokens of sampling during one call",
                        limits.sampling_tokens_per_call
                    ));
                }
                route.sampled += 1;
                route.tokens = total;
                Ok(route.ctx.cancellation().clone())
            });
            match decided {
                None => Err("this client answers sampling requests only during a call of the server's tools".to_owned()),
                Some(Err(refusal)) => Err(refusal),
                Some(Ok(cancellation)) => {
                    sampled.push_back(now);
                    Ok(cancellation)
                }
            }
        }
    }
}

/// Counts a question out of the waiting ones when it is answered.
struct Waiting<'a>(&'a Mutex<usize>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *waiting = waiting.saturating_sub(1);
    }
}

/// A call in flight; dropped when it ends.
pub(super) struct Route {
    hub: Weak<Hub>,
    started: u64,
}

impl Route {
    /// Sends the progress notifications of `token` (the call's request's)
    /// to the call's context.
    pub(super) fn progress(&self, token: ProgressToken) {
        if let Some(hub) = self.hub.upgrade()
            && let Some(route) = hub.calls().get_mut(&self.started)
        {
            route.token = Some(token);
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.calls().remove(&self.started);
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
            .calls()
            .values()
            .find(|route| route.token.as_ref() == Some(&params.progress_token))
            .map(|route| route.ctx.clone());
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
        if let Some(toolset) = toolset {
            toolset.list_changed();
        }
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
        let answer = self.hub.elicit(asked).await;
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
        let prompt = params.system_prompt.as_ref().map_or(0, String::len)
            + super::limits::json_bytes(&params.messages);
        let most = self.hub.limits.max_sampling_prompt_bytes;
        if prompt > most {
            tracing::warn!(server = %self.hub.label, prompt, most, "refused an MCP server's sampling request: its prompt is larger than the limit");
            return Err(ErrorData::invalid_request(
                format!(
                    "the sampling request's prompt is {}, more than the {} this client sends its model",
                    super::limits::size(prompt),
                    super::limits::size(most)
                ),
                None,
            ));
        }
        let granted = sampler.granted(&params);
        let cancellation = self.hub.sampling_allowed(granted).map_err(|refusal| {
            tracing::warn!(server = %self.hub.label, %refusal, "refused an MCP server's sampling request");
            ErrorData::invalid_request(refusal, None)
        })?;
        sampler.sample(&self.hub.label, params, cancellation).await
    }
}
