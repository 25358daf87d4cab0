//! A remote server's `sampling/createMessage` answered by a model of ours
//! ([`super::McpToolset::sampling`]).
//!
//! rmcp marks sampling deprecated (SEP-2577 drops it from a future protocol
//! version); servers on today's versions still send it, so the deprecated
//! items are used here behind `#[allow(deprecated)]`.

#![allow(deprecated)]

use std::sync::Arc;

use futures_util::StreamExt;
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role, SamplingMessage,
    SamplingMessageContentBlock,
};
use tokio_util::sync::CancellationToken;

use crate::model::assembly::TurnAssembler;
use crate::model::{ChatModel, ChatRequest, FinishReason, ToolChoice};
use crate::transcript::Message;

/// The most tokens one sampling request may have the model produce unless
/// the toolset says otherwise.
pub(super) const DEFAULT_SAMPLING_LIMIT: u32 = 4096;

/// The model that answers a server's sampling requests, and its bound.
pub(super) struct Sampler {
    model: Arc<dyn ChatModel>,
    max_tokens: u32,
}

impl Sampler {
    pub(super) fn new(model: Arc<dyn ChatModel>, max_tokens: u32) -> Self {
        Sampler { model, max_tokens }
    }

    /// The tokens a request is granted: what it asks for, at most the
    /// toolset's [`super::McpToolset::sampling_limit`].
    pub(super) fn granted(&self, params: &CreateMessageRequestParams) -> u32 {
        params.max_tokens.clamp(1, self.max_tokens)
    }

    /// The model's answer to `params`, or the error the server reads.
    /// `cancellation` is the run's of the call the request came during.
    pub(super) async fn sample(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
        cancellation: CancellationToken,
    ) -> Result<CreateMessageResult, ErrorData> {
        let span = tracing::info_span!("mcp_sampling", server = %server);
        let _entered = span.enter();
        let request = self.request(params)?;
        drop(_entered);
        let (text, finish) = tokio::select! {
            biased;
            answer = self.complete(&request) => answer?,
            () = cancellation.cancelled() => {
                return Err(ErrorData::internal_error(
                    "the run that made the call was cancelled",
                    None,
                ));
            }
        };
        tracing::debug!(parent: &span, chars = text.len(), "answered a sampling request");
        let stop = match finish {
            FinishReason::Length => CreateMessageResult::STOP_REASON_END_MAX_TOKEN,
            _ => CreateMessageResult::STOP_REASON_END_TURN,
        };
        let model = self.model.model_name().unwrap_or("aptix").to_owned();
        Ok(
            CreateMessageResult::new(SamplingMessage::assistant_text(text), model)
                .with_stop_reason(stop),
        )
    }

    /// The chat request for `params`: its system prompt and text messages,
    /// no tools. What a text model cannot be given is refused, not dropped.
    fn request(&self, params: CreateMessageRequestParams) -> Result<ChatRequest, ErrorData> {
        let granted = self.granted(&params);
        if params.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
            return Err(ErrorData::invalid_params(
                "this client does not offer tools in sampling requests",
                None,
            ));
        }
        let mut messages = Vec::with_capacity(params.messages.len() + 1);
        if let Some(system) = params.system_prompt.filter(|s| !s.trim().is_empty()) {
            messages.push(Message::system(system));
        }
        for (index, message) in params.messages.into_iter().enumerate() {
            let mut text = String::new();
            for block in message.content.into_vec() {
                match block {
                    SamplingMessageContentBlock::Text(part) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(&part.text);
                    }
                    other => {
                        let kind = match other {
                            SamplingMessageContentBlock::Image(_) => "an image",
                            SamplingMessageContentBlock::Audio(_) => "audio",
                            _ => "a tool block",
                        };
                        return Err(ErrorData::invalid_params(
                            format!(
                                "message {index} of the sampling request holds {kind}; this client samples text only"
                            ),
                            None,
                        ));
                    }
                }
            }
            messages.push(match message.role {
                Role::User => Message::user(text),
                Role::Assistant => Message::assistant(text, Vec::new()),
            });
        }
        if !messages
            .iter()
            .any(|message| matches!(message, Message::User { .. }))
        {
            return Err(ErrorData::invalid_params(
                "the sampling request has no user message",
                None,
            ));
        }
        Ok(ChatRequest {
            messages,
            tools: Arc::from([]),
            tool_choice: ToolChoice::None,
            parallel_tool_calls: false,
            max_tokens: Some(granted),
            temperature: params.temperature,
            response_format: None,
            deferred_tools: None,
        })
    }

    /// The model's whole answer: its text and why it stopped.
    async fn complete(&self, request: &ChatRequest) -> Result<(String, FinishReason), ErrorData> {
        let failed = |error: crate::model::ModelError| {
            ErrorData::internal_error(format!("the client's model failed: {error}"), None)
        };
        let mut stream = self.model.stream(request);
        let mut turn = TurnAssembler::new();
        while let Some(event) = stream.next().await {
            turn.push(event.map_err(failed)?).map_err(failed)?;
        }
        let turn = turn.finish().map_err(failed)?;
        Ok((turn.text, turn.finish_reason))
    }
}
