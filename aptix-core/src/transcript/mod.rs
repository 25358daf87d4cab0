//! The transcript: what a conversation said, in provider-neutral form.
//!
//! [`Message`] and [`Conversation`] are what the model adapters translate,
//! what the agent loop appends to and what a store keeps; [`repair`] keeps a
//! transcript acceptable to every provider before each model request. This
//! module depends on nothing but envelopes and content blocks, so every layer above can use it.

mod repair;

pub use repair::{INTERRUPTED_MESSAGE, interrupted, repair};

use serde::{Deserialize, Serialize};

use crate::content::Content;

/// A conversation: its id, and the transcript the model sees.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Conversation {
    /// The conversation id, carried into every tool context and envelope.
    pub id: String,
    /// The session id, when the application has one.
    pub session_id: Option<String>,
    /// The user the conversation is for, when the application says so:
    /// carried into every tool context ([`crate::ToolContext::user_id`]).
    /// Every store keeps it (for a durable conversation, set it on the
    /// conversation given to `DurableAgent::create_conversation`); one
    /// stored before it existed reads as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The tenant the conversation is for, when the application says so:
    /// carried into every tool context ([`crate::ToolContext::tenant_id`]).
    /// A stored conversation without it reads as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The transcript.
    pub messages: Vec<Message>,
}

impl Conversation {
    /// An empty conversation called `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Conversation {
            id: id.into(),
            session_id: None,
            user_id: None,
            tenant_id: None,
            messages: Vec::new(),
        }
    }

    /// Sets the session id.
    pub fn with_session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// Sets the user the conversation is for; each tool call sees it as
    /// [`ToolContext::user_id`](crate::ToolContext::user_id).
    pub fn with_user_id(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// Sets the tenant the conversation is for; each tool call sees it as
    /// [`ToolContext::tenant_id`](crate::ToolContext::tenant_id).
    pub fn with_tenant_id(mut self, tenant_id: impl Into<String>) -> Self {
        self.tenant_id = Some(tenant_id.into());
        self
    }

    /// Adds a system message.
    pub fn with_system(mut self, content: impl Into<String>) -> Self {
        self.messages.push(Message::system(content));
        self
    }
}

/// One message of a conversation, in provider-neutral form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions for the model.
    System {
        /// The instructions.
        content: String,
    },
    /// What the user said.
    User {
        /// The text.
        content: String,
    },
    /// What the model said, and the tools it called.
    Assistant {
        /// The text (may be empty when the model only called tools).
        content: String,
        /// The tool calls, in the model's order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<AssistantToolCall>,
        /// The model's extended-thinking blocks, in its order. Anthropic
        /// rejects the request after a tool-using turn unless they come back
        /// unchanged, so they are kept with the turn; other providers never
        /// see them. A transcript without the field reads as none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<ThinkingBlock>,
        /// Blocks of the turn the provider ran itself, exactly as it sent
        /// them (Anthropic's `server_tool_use` and its result, e.g. a tool
        /// search and the tools it found). Anthropic needs them back with
        /// the turn (a deferred tool is loaded by the `tool_reference` in
        /// them), and they show what the provider found; other providers
        /// never see them. A transcript without the field reads as none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        server_blocks: Vec<serde_json::Value>,
        /// The tools this turn's calls could run, when its step let the
        /// model call fewer than the agent holds (`prepare_step`, tool
        /// search, a step's tool choice); `None`: any tool of the agent.
        /// Kept with the turn so that a call revived after a crash is held
        /// to what the live run held it to (a hook may not rename it into
        /// another tool); never sent to a model. A transcript without the
        /// field reads as `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runnable: Option<Vec<String>>,
    },
    /// The result of one tool call.
    Tool {
        /// The call this answers.
        tool_call_id: String,
        /// The tool's name (Gemini and some servers need it).
        name: String,
        /// The envelope, as JSON text.
        content: String,
        /// Whether the envelope is a failure (Anthropic's `is_error`).
        is_error: bool,
        /// What the tool attached for the model to see beside the result
        /// (images, documents: [`crate::content::ToolReturn`]). Each model
        /// adapter sends them in its provider's form. A transcript without
        /// the field reads as none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Content>,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// An assistant message without thinking blocks.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<AssistantToolCall>) -> Self {
        Message::Assistant {
            content: content.into(),
            tool_calls,
            thinking: Vec::new(),
            server_blocks: Vec::new(),
            runnable: None,
        }
    }
}

/// One block of a model's reasoning, kept as the provider sent it, so that
/// it can go back to that provider with the turn.
///
/// Reasoning models expect their reasoning handed back after a tool call:
/// Anthropic rejects a tool-using turn whose thinking is missing or altered,
/// the Responses API reasons on from its encrypted items, Gemini from its
/// thought signatures, and DeepSeek-style servers from `reasoning_content`.
/// Each provider's blocks are a variant of their own, tagged by `type` and
/// stored with the conversation in that form; an adapter sends back only
/// its own provider's kinds and leaves the others out, so a transcript
/// moved to another provider stays valid. Signatures, encrypted content and
/// redacted data are opaque: they are only ever sent back.
///
/// The Anthropic kinds are serialized exactly as Anthropic's content blocks
/// (`{"type":"thinking","thinking":…,"signature":…}`,
/// `{"type":"redacted_thinking","data":…}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ThinkingBlock {
    /// Anthropic thinking the model shows.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The provider's signature over the text.
        signature: String,
    },
    /// Anthropic thinking the provider encrypted.
    RedactedThinking {
        /// The encrypted thinking.
        data: String,
    },
    /// An OpenAI-compatible server's reasoning text (`reasoning_content`
    /// from DeepSeek, vLLM and llama.cpp; `reasoning` from Ollama and
    /// OpenRouter), sent back by the Chat Completions adapter only.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// A Responses API reasoning item exactly as it arrived (`id`,
    /// `summary`, `encrypted_content`), sent back as an input item by the
    /// Responses adapter only.
    OpenaiReasoning {
        /// The item.
        item: serde_json::Value,
    },
    /// A Gemini part that carries thought or a thought signature, exactly
    /// as it arrived (`{"text":…,"thought":true}`, or any part with a
    /// `thoughtSignature`), sent back by the Gemini adapter only. A
    /// signature that came on a function call is kept with its call's id in
    /// `tool_call_id`, so it goes back on that call's part.
    Gemini {
        /// The part.
        part: serde_json::Value,
        /// The call whose part carried it, when it came on a function call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
    },
}

impl ThinkingBlock {
    /// The reasoning text a person may be shown, if the block has any: the
    /// thinking, the reasoning text, a Responses item's summary, a Gemini
    /// thought. `None` for redacted or encrypted-only blocks.
    pub fn shown_text(&self) -> Option<String> {
        let text = match self {
            ThinkingBlock::Thinking { thinking, .. } => thinking.clone(),
            ThinkingBlock::Reasoning { text } => text.clone(),
            ThinkingBlock::RedactedThinking { .. } => return None,
            ThinkingBlock::OpenaiReasoning { item } => item
                .get("summary")
                .and_then(serde_json::Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|part| part.get("text").and_then(serde_json::Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n\n")
                })
                .unwrap_or_default(),
            ThinkingBlock::Gemini { part, .. } => {
                if part.get("thought").and_then(serde_json::Value::as_bool) != Some(true) {
                    return None;
                }
                part.get("text")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            }
        };
        (!text.is_empty()).then_some(text)
    }
}

/// A tool call as it stands in the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantToolCall {
    /// The call's id, identical in the call and its result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model wrote them.
    pub arguments: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_conversation_stored_before_thinking_was_kept_still_reads() -> Result<(), serde_json::Error>
    {
        let stored = r#"{"id":"c1","session_id":null,"messages":[
            {"role":"user","content":"hi"},
            {"role":"assistant","content":"","tool_calls":[{"id":"a","name":"t","arguments":"{}"}]},
            {"role":"tool","tool_call_id":"a","name":"t","content":"{}","is_error":false},
            {"role":"assistant","content":"done"}
        ]}"#;
        let conversation: Conversation = serde_json::from_str(stored)?;
        assert_eq!(
            conversation.messages[1],
            Message::assistant(
                "",
                vec![AssistantToolCall {
                    id: "a".into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                }],
            )
        );
        assert_eq!(conversation.messages[3], Message::assistant("done", vec![]));
        // And a message without thinking is written as before.
        assert_eq!(
            serde_json::to_value(&conversation.messages[3])?,
            json!({ "role": "assistant", "content": "done" })
        );
        Ok(())
    }

    #[test]
    fn thinking_blocks_round_trip_in_anthropic_form() -> Result<(), serde_json::Error> {
        let message = Message::Assistant {
            content: String::new(),
            tool_calls: Vec::new(),
            runnable: None,
            server_blocks: vec![
                json!({ "type": "server_tool_use", "id": "srvtoolu_1", "input": {} }),
            ],
            thinking: vec![
                ThinkingBlock::Thinking {
                    thinking: "a \"quoted\" thought — ü".into(),
                    signature: "Eq+/=".into(),
                },
                ThinkingBlock::RedactedThinking {
                    data: "Em+/==".into(),
                },
            ],
        };
        let value = serde_json::to_value(&message)?;
        assert_eq!(
            value,
            json!({
                "role": "assistant",
                "content": "",
                "thinking": [
                    { "type": "thinking", "thinking": "a \"quoted\" thought — ü", "signature": "Eq+/=" },
                    { "type": "redacted_thinking", "data": "Em+/==" },
                ],
                "server_blocks": [{ "type": "server_tool_use", "id": "srvtoolu_1", "input": {} }],
            })
        );
        assert_eq!(serde_json::from_value::<Message>(value)?, message);
        Ok(())
    }

    #[test]
    fn each_providers_reasoning_round_trips_in_its_own_form() -> Result<(), serde_json::Error> {
        let blocks = vec![
            ThinkingBlock::Reasoning {
                text: "think".into(),
            },
            ThinkingBlock::OpenaiReasoning {
                item: json!({ "type": "reasoning", "id": "rs_1", "summary": [{ "type": "summary_text", "text": "S" }], "encrypted_content": "gAAA" }),
            },
            ThinkingBlock::Gemini {
                part: json!({ "text": "T", "thought": true }),
                tool_call_id: None,
            },
            ThinkingBlock::Gemini {
                part: json!({ "thoughtSignature": "c2ln" }),
                tool_call_id: Some("call_1".into()),
            },
        ];
        let value = serde_json::to_value(&blocks)?;
        assert_eq!(
            value,
            json!([
                { "type": "reasoning", "text": "think" },
                { "type": "openai_reasoning", "item": { "type": "reasoning", "id": "rs_1", "summary": [{ "type": "summary_text", "text": "S" }], "encrypted_content": "gAAA" } },
                { "type": "gemini", "part": { "text": "T", "thought": true } },
                { "type": "gemini", "part": { "thoughtSignature": "c2ln" }, "tool_call_id": "call_1" },
            ])
        );
        assert_eq!(serde_json::from_value::<Vec<ThinkingBlock>>(value)?, blocks);
        let shown: Vec<_> = blocks.iter().map(ThinkingBlock::shown_text).collect();
        assert_eq!(
            shown,
            [
                Some("think".into()),
                Some("S".into()),
                Some("T".into()),
                None
            ]
        );
        Ok(())
    }
}
