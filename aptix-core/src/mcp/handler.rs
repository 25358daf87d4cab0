//! The rmcp `ServerHandler` over an [`Executor`].

use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitResult, Implementation, InitializeRequestParams, InitializeResult, InputRequest,
    InputRequiredResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tracing::Instrument;

use super::content::{self, Shape, ToBlock};
use super::elicit::{self, Answer, Question};
use super::list;
use super::logging::{LogLevel, McpLog, SessionLevel};
use super::progress::{McpLive, Progress};
use super::{McpServer, Sampling, request_id_text};
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::envelope::{Envelope, EnvelopeError, JsonText};
use crate::error::ErrorCode;
use crate::executor::{Executor, Outcome, ToolCall};
use crate::meta::AwaitReason;

/// The MCP server handler: `tools/list`, `tools/call` and
/// `logging/setLevel` over an [`Executor`]. Cheap to clone; clones share
/// the session's state (its log level), so serve each session with a
/// handler of its own from [`McpServer::handler`].
#[derive(Clone)]
pub struct AptixMcpHandler {
    inner: Arc<Inner>,
    /// What `logging/setLevel` set for this session.
    log_level: SessionLevel,
}

struct Inner {
    executor: Executor,
    context: ToolContext,
    info: ServerConfig,
}

impl std::fmt::Debug for AptixMcpHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AptixMcpHandler")
            .field("catalog", self.inner.executor.catalog())
            .finish_non_exhaustive()
    }
}

impl AptixMcpHandler {
    pub(crate) fn new(server: &McpServer) -> Self {
        let implementation = Implementation::new(&server.name, &server.version);
        // `logging` is deprecated in rmcp (SEP-2577 drops it from a future
        // protocol) but is part of every version this server speaks.
        #[allow(deprecated)]
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .build();
        let mut info = InitializeResult::new(capabilities);
        info.server_info = implementation;
        info.instructions = server.instructions.clone();
        AptixMcpHandler {
            inner: Arc::new(Inner {
                executor: server.executor.clone(),
                context: server.context.clone(),
                info,
            }),
            log_level: SessionLevel::default(),
        }
    }

    /// A handler for another session: the same server, a fresh log level.
    pub(crate) fn new_session(&self) -> Self {
        AptixMcpHandler {
            inner: self.inner.clone(),
            log_level: SessionLevel::default(),
        }
    }
}

/// Whether the request runs on protocol 2026-07-28 or later, where a server
/// may not send requests to the client and asks with `input_required`
/// results instead (versions are ISO dates: text order is time order).
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether the client declared form elicitation (an empty `elicitation`
/// capability means form, as the spec says for older clients).
fn can_elicit_form(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// A failed result: the message as text, the error object as structured
/// content (clients and models read either).
fn error_result(error: &EnvelopeError) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(error.message.clone())]);
    result.structured_content = serde_json::to_value(error).ok();
    result
}

fn error_with(code: ErrorCode, message: impl Into<String>) -> CallToolResult {
    error_result(&EnvelopeError {
        code,
        message: message.into(),
        details: None,
    })
}

/// A successful JSON result: a string as its text (not quoted JSON, which
/// a model would read with the quotes and escapes), anything else as JSON
/// text, and as structured content when it is an object (MCP's
/// `structuredContent` must be one).
fn success(value: Value, json: &str) -> CallToolResult {
    let text = match &value {
        Value::String(text) => text.clone(),
        _ => json.to_owned(),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if value.is_object() {
        result.structured_content = Some(value);
    }
    result
}

/// A successful result of a tool whose output is `shape`: its content
/// blocks as they are when it returns [`super::Content`], else JSON.
fn from_result(shape: Shape, result: &JsonText) -> CallToolResult {
    match content::blocks(shape, result) {
        Some(blocks) => CallToolResult::success(blocks),
        None => success(result.to_value(), result.as_str()),
    }
}

fn from_envelope(definition: &ToolDefinition, envelope: &Envelope) -> CallToolResult {
    match (envelope.result(), envelope.error_body()) {
        (Some(result), _) => {
            let mut answer = from_result(content::shape(definition), result);
            // What the tool attached (`ToolReturn`) follows the result's
            // own blocks.
            answer
                .content
                .extend(envelope.attachments().iter().map(ToBlock::to_block));
            answer
        }
        (None, Some(error)) => error_result(error),
        (None, None) => error_with(ErrorCode::Internal, crate::error::INTERNAL_MESSAGE),
    }
}

/// Whether the client declared sampling and the session may send it
/// requests (not on 2026-07-28 and later).
fn can_sample(context: &RequestContext<RoleServer>) -> bool {
    !is_modern(context)
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.sampling.is_some())
}

/// What asking the person came to.
enum Asked {
    Answer(Answer),
    /// The reply to send now (an MRTR `input_required`, or an error).
    Reply(CallToolResponse),
}

impl AptixMcpHandler {
    /// The context of one call: the base context with this call's id, a
    /// token the client's `notifications/cancelled` cancels, the client's
    /// log, progress reporting when the client asked for it, and sampling
    /// when the client can sample.
    fn call_context(
        &self,
        context: &RequestContext<RoleServer>,
        definition: &ToolDefinition,
        tool_call_id: &str,
    ) -> (ToolContext, Option<Arc<McpLive>>) {
        let cancellation = context.ct.child_token();
        let mut ctx = self
            .inner
            .context
            .clone()
            .with_tool_call_id(tool_call_id)
            .with_cancellation(cancellation.clone())
            .with_state(McpLog::new(
                context.peer.clone(),
                self.log_level.clone(),
                definition.shared_name(),
            ));
        if can_sample(context) {
            ctx = ctx.with_state(Sampling::new(context.peer.clone(), cancellation));
        }
        let live = context
            .meta
            .get_progress_token()
            .and_then(|token| McpLive::new(Progress::new(context.peer.clone(), token)));
        if let Some(live) = &live {
            ctx = ctx.with_live(live.clone());
        }
        (ctx, live)
    }

    async fn run(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        definition: &ToolDefinition,
        call: ToolCall,
    ) -> Result<CallToolResponse, ErrorData> {
        let (ctx, live) = self.call_context(context, definition, &call.id);
        let response = self
            .execute(request, context, definition, &call, &ctx)
            .await;
        if let (Some(live), CallToolResponse::Complete(_)) = (&live, &response) {
            live.finish().await;
        }
        Ok(response)
    }

    /// Runs `call` under the base context's token as well as the client's:
    /// either cancels the tool's token, and the executor reports it.
    async fn guarded(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        approved: bool,
    ) -> crate::executor::Execution {
        let executor = &self.inner.executor;
        let run = async {
            if approved {
                executor.execute_approved(call, ctx).await
            } else {
                executor.execute(call, ctx).await
            }
        };
        // Pinned here: still run to its end after the server's cancellation.
        let mut run = pin!(run);
        let server = self.inner.context.cancellation();
        match server.run_until_cancelled(run.as_mut()).await {
            Some(execution) => execution,
            None => {
                ctx.cancellation().cancel();
                run.await
            }
        }
    }

    async fn execute(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        definition: &ToolDefinition,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> CallToolResponse {
        let execution = self.guarded(call, ctx, false).await;
        let awaiting = match execution.outcome {
            Outcome::Final(envelope) => return from_envelope(definition, &envelope).into(),
            Outcome::Awaiting(awaiting) => awaiting,
            Outcome::PassThrough => {
                return error_with(
                    ErrorCode::Failed,
                    format!(
                        "`{}` is run by the model provider, not by this server.",
                        call.name
                    ),
                )
                .into();
            }
        };
        match awaiting.reason {
            // A gated client call goes on to its client, which MCP cannot reach.
            AwaitReason::Approval if !definition.route().reaches_client() => {
                let question = elicit::approval(definition, &awaiting.payload);
                let binding = elicit::binding(definition, question.key, &awaiting.payload);
                let answer = match self
                    .ask(request, context, definition, question, binding)
                    .await
                {
                    Asked::Answer(answer) => answer,
                    Asked::Reply(reply) => return reply,
                };
                match answer {
                    Answer::Accepted(content) if elicit::approved(&content) => {
                        tracing::info!("call approved through elicitation");
                        match self.guarded(call, ctx, true).await.outcome {
                            Outcome::Final(envelope) => from_envelope(definition, &envelope).into(),
                            _ => error_with(ErrorCode::Internal, crate::error::INTERNAL_MESSAGE)
                                .into(),
                        }
                    }
                    _ => {
                        tracing::info!("call refused through elicitation");
                        error_with(
                            ErrorCode::Denied,
                            format!("The user did not approve this call of `{}`.", call.name),
                        )
                        .into()
                    }
                }
            }
            AwaitReason::Human => {
                let question = match elicit::human(definition, &awaiting.payload) {
                    Ok(question) => question,
                    Err(why) => {
                        return error_with(
                            ErrorCode::Failed,
                            format!(
                                "`{}` asks a person, but its answer cannot be asked through MCP elicitation: {why}.",
                                call.name
                            ),
                        )
                        .into();
                    }
                };
                let binding = elicit::binding(definition, question.key, &awaiting.payload);
                match self
                    .ask(request, context, definition, question, binding)
                    .await
                {
                    Asked::Reply(reply) => reply,
                    Asked::Answer(Answer::Accepted(content)) => {
                        match definition.check_output(&content) {
                            Ok(()) => success(content.clone(), &content.to_string()).into(),
                            Err(problems) => error_with(
                                ErrorCode::Failed,
                                format!(
                                    "The answer does not match what `{}` returns: {problems}",
                                    call.name
                                ),
                            )
                            .into(),
                        }
                    }
                    Asked::Answer(_) => error_with(
                        ErrorCode::Denied,
                        format!("The user declined to answer `{}`.", call.name),
                    )
                    .into(),
                }
            }
            // Client tools are not listed, so never reach here.
            AwaitReason::Approval | AwaitReason::Client => error_with(
                ErrorCode::Failed,
                format!(
                    "`{}` runs in the agent's client and cannot be called through MCP.",
                    call.name
                ),
            )
            .into(),
        }
    }

    /// Puts `question` to the person at the client: with a request to the
    /// client on older protocols, with an `input_required` result (and
    /// this retry's `inputResponses`) on 2026-07-28 and later.
    async fn ask(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        definition: &ToolDefinition,
        question: Question,
        binding: String,
    ) -> Asked {
        if !can_elicit_form(context) {
            tracing::info!("client cannot elicit; call refused");
            return Asked::Reply(
                error_with(
                    ErrorCode::Denied,
                    format!(
                        "`{}` needs a person's answer, and this MCP client cannot ask for one (it did not declare the elicitation capability). The call was not run.",
                        definition.name()
                    ),
                )
                .into(),
            );
        }
        if is_modern(context) {
            let response = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(question.key))
                .filter(|_| request.request_state.as_deref() == Some(binding.as_str()));
            if let Some(response) = response {
                return match serde_json::from_value::<ElicitResult>(response.clone()) {
                    Ok(result) => Asked::Answer(result.into()),
                    Err(error) => Asked::Reply(
                        error_with(
                            ErrorCode::Failed,
                            format!("The client's answer is not an elicitation result: {error}"),
                        )
                        .into(),
                    ),
                };
            }
            let requests = BTreeMap::from([(
                question.key.to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(question.params())),
            )]);
            return Asked::Reply(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(requests),
                Some(binding),
            )));
        }
        let asking = context
            .peer
            .create_elicitation_with_timeout(question.params(), definition.suspend_timeout());
        match context.ct.run_until_cancelled(asking).await {
            None => Asked::Reply(
                error_with(
                    ErrorCode::Cancelled,
                    "The call was cancelled before it finished.",
                )
                .into(),
            ),
            Some(result) => match result {
                Ok(result) => Asked::Answer(result.into()),
                Err(error) => {
                    tracing::warn!(%error, "elicitation failed");
                    Asked::Reply(
                        error_with(
                            ErrorCode::Denied,
                            format!("Asking the user through the MCP client failed ({error}); the call was not run."),
                        )
                        .into(),
                    )
                }
            },
        }
    }
}

impl ServerHandler for AptixMcpHandler {
    fn get_info(&self) -> ServerConfig {
        self.inner.info.clone()
    }

    /// As rmcp's, but the peer info records the negotiated protocol version
    /// rather than the one the client asked for, so that the handler picks
    /// the elicitation style the session actually speaks.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let result = self.negotiate_initialize(&request)?;
        let mut peer_info = request;
        peer_info.protocol_version = result.protocol_version.clone();
        context.peer.set_peer_info(peer_info);
        Ok(result)
    }

    /// Stores the session's level; calls running and to come send only
    /// messages at or above it (see [`McpLog`]).
    #[allow(deprecated)] // rmcp's logging types; see `super::logging`.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = LogLevel::from_mcp(request.level);
        tracing::debug!(?level, "MCP log level set");
        self.log_level.set(level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(list::tools(
            self.inner.executor.catalog(),
        )))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let entry = self.inner.executor.catalog().entry(name)?;
        list::is_listed(entry.definition())
            .then(|| list::tool(entry.definition(), &entry.offered_parameters()).ok())
            .flatten()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let listed = self
            .inner
            .executor
            .catalog()
            .get(&request.name)
            .filter(|definition| list::is_listed(definition));
        let Some(definition) = listed else {
            tracing::info!(tool = %request.name, "tools/call of an unknown tool");
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        };
        let arguments = match &request.arguments {
            Some(arguments) => serde_json::to_string(arguments)
                .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?,
            None => "{}".to_owned(),
        };
        let tool_call_id = format!("mcp-{}", uuid::Uuid::new_v4());
        let span = tracing::info_span!(
            "mcp_tool_call",
            tool = definition.name(),
            tool_call_id = %tool_call_id,
            request_id = %request_id_text(&context.id),
            executor = definition.executor().as_str(),
        );
        debug_assert!(super::list::is_listed(definition));
        let call = ToolCall::new(tool_call_id, definition.name(), arguments);
        self.run(&request, &context, definition, call)
            .instrument(span)
            .await
    }
}
