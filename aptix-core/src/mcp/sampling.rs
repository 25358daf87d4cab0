//! MCP sampling: a tool asks the client's LLM for a completion
//! (`sampling/createMessage`) while its call runs.
//!
//! rmcp marks sampling deprecated (SEP-2577 drops it from a future
//! protocol version); the protocol versions on which this server sends
//! requests to the client all have it, so the deprecated items are used
//! here behind `#[allow(deprecated)]`.

#![allow(deprecated)]

use rmcp::ServiceError;
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, SamplingMessage};
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

/// Why a sampling request gave no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SamplingError {
    /// The client answered with an error (e.g. the person rejected the
    /// request, or the client's model failed).
    #[error("the MCP client refused the sampling request ({code}): {message}")]
    Refused {
        /// The JSON-RPC error code.
        code: i32,
        /// The client's message.
        message: String,
    },
    /// The request could not be sent or its answer not received.
    #[error("the sampling request failed: {0}")]
    Transport(String),
    /// The call was cancelled while waiting for the answer.
    #[error("the call was cancelled while waiting for the client's LLM")]
    Cancelled,
    /// The answer holds no text (only images, audio or tool use).
    #[error("the client's LLM answered without text")]
    NoText,
}

/// The client's LLM, for the current call: found in the tool's context
/// state (`ctx.state::<aptix::mcp::Sampling>()`) when the MCP client
/// declared the `sampling` capability. Absent outside MCP, when the client
/// did not declare it, and on protocol 2026-07-28 and later (which forbids
/// requests from server to client): tools must treat it as optional.
///
/// ```
/// # async fn tool(ctx: &aptix_core::ToolContext) -> Result<String, aptix_core::ToolError> {
/// use aptix_core::mcp::Sampling;
///
/// let Some(llm) = ctx.state::<Sampling>() else {
///     return Err(aptix_core::ToolError::failed("this client cannot sample"));
/// };
/// let summary = llm
///     .create_text_message("Summarize: …", 200)
///     .await
///     .map_err(|error| aptix_core::ToolError::failed(error.to_string()))?;
/// # Ok(summary)
/// # }
/// ```
///
/// The client may ask a person before it samples, so an answer can take
/// long: the wait ends when the call is cancelled (or times out).
#[derive(Clone)]
pub struct Sampling {
    peer: Peer<RoleServer>,
    cancellation: CancellationToken,
}

impl std::fmt::Debug for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampling").finish_non_exhaustive()
    }
}

impl Sampling {
    pub(crate) fn new(peer: Peer<RoleServer>, cancellation: CancellationToken) -> Self {
        Sampling { peer, cancellation }
    }

    /// Sends `sampling/createMessage` with `params` (rmcp's type: messages,
    /// `maxTokens`, preferences, system prompt…) and returns the client's
    /// answer.
    pub async fn create_message(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, SamplingError> {
        let asking = self.peer.create_message(params);
        match self.cancellation.run_until_cancelled(asking).await {
            None => Err(SamplingError::Cancelled),
            Some(result) => result.map_err(|error| match error {
                ServiceError::McpError(error) => SamplingError::Refused {
                    code: error.code.0,
                    message: error.message.into_owned(),
                },
                other => SamplingError::Transport(other.to_string()),
            }),
        }
    }

    /// Asks the client's LLM to answer `prompt` (one user message) in at
    /// most `max_tokens` tokens, and returns the text of its answer (its
    /// text blocks, joined by newlines).
    pub async fn create_text_message(
        &self,
        prompt: impl Into<String>,
        max_tokens: u32,
    ) -> Result<String, SamplingError> {
        let params =
            CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], max_tokens);
        let result = self.create_message(params).await?;
        let texts: Vec<String> = result
            .message
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.clone()))
            .collect();
        if texts.is_empty() {
            return Err(SamplingError::NoText);
        }
        Ok(texts.join("\n"))
    }
}
