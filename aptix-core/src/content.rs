//! What a tool gives the model besides JSON: [`Content`] blocks (text,
//! images, audio, embedded documents), and [`ToolReturn`], a typed result
//! with such blocks attached.
//!
//! Two ways to use them, for two needs:
//! - A tool whose output *is* content returns `Content` or `Vec<Content>`:
//!   the MCP server sends the blocks as they are; elsewhere the result is
//!   their JSON (MCP's content-block shape).
//! - A tool with a typed result *and* something for the model to look at
//!   returns [`ToolReturn`]: the value is the result (its schema is the
//!   tool's output schema, the envelope and the ledger hold it), the
//!   content travels beside it as the result's *attachments*: the model
//!   adapters send images and documents in the provider's own form, the
//!   MCP server adds them as content blocks, and events and the typed
//!   result never carry them.
//!
//! The block types follow MCP's content blocks (the protocol most tools are
//! also served over), so one type serves both, and MCP's JSON shape is
//! their serialized form.

use std::borrow::Cow;

use schemars::{JsonSchema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// One content block a tool returns: return `Content` for one block,
/// `Vec<Content>` for several (e.g. a caption and an image). The MCP server
/// sends these as the result's `content` blocks (not as JSON text);
/// elsewhere the result is their JSON, which is MCP's content-block shape.
///
/// ```
/// use aptix_core::content::Content;
/// use aptix_core::ToolError;
///
/// async fn chart() -> Result<Vec<Content>, ToolError> {
///     Ok(vec![
///         Content::text("Sales by month:"),
///         Content::image("iVBORw0KGgo…", "image/png"),
///     ])
/// }
/// ```
///
/// The data of images, audio and blob resources is base64, as MCP carries
/// it; it is passed through unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// Text for the model to read.
    #[non_exhaustive]
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    #[non_exhaustive]
    Image {
        /// The image bytes, base64.
        data: String,
        /// The image's media type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// An audio clip.
    #[non_exhaustive]
    Audio {
        /// The audio bytes, base64.
        data: String,
        /// The audio's media type, e.g. `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource embedded in the result: its URI and its contents.
    #[non_exhaustive]
    Resource {
        /// The resource.
        resource: ResourceContents,
    },
}

/// The contents of an embedded resource: text, or base64 bytes (`blob`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ResourceContents {
    /// A text resource.
    #[non_exhaustive]
    Text {
        /// The resource's URI.
        uri: String,
        /// The media type of `text`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// The resource's text.
        text: String,
    },
    /// A binary resource.
    #[non_exhaustive]
    Blob {
        /// The resource's URI.
        uri: String,
        /// The media type of the bytes.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// The resource's bytes, base64.
        blob: String,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image block: `data` is the base64 of the image bytes.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio block: `data` is the base64 of the audio bytes.
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An embedded text resource.
    pub fn resource(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Content::Resource {
            resource: ResourceContents::Text {
                uri: uri.into(),
                mime_type: mime_type.into(),
                text: text.into(),
            },
        }
    }

    /// An embedded binary resource: `blob` is the base64 of its bytes.
    pub fn resource_blob(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        blob: impl Into<String>,
    ) -> Self {
        Content::Resource {
            resource: ResourceContents::Blob {
                uri: uri.into(),
                mime_type: mime_type.into(),
                blob: blob.into(),
            },
        }
    }
}

/// A tool's typed result together with content for the model to see: an
/// image of a chart beside the series it plots, the page of a PDF beside the
/// extracted fields.
///
/// ```
/// use aptix_core::content::{Content, ToolReturn};
/// use aptix_core::ToolError;
/// # #[derive(serde::Serialize)] struct Summary { points: usize }
///
/// async fn chart() -> Result<ToolReturn<Summary>, ToolError> {
///     let png_base64 = String::from("iVBORw0KGgo…");
///     Ok(ToolReturn::new(Summary { points: 12 })
///         .with(Content::image(png_base64, "image/png")))
/// }
/// ```
///
/// The tool's output schema is `T`'s: `value` is the result (the envelope,
/// the typed result and the ledger hold it). `content` reaches the model
/// only: Anthropic receives it inside the `tool_result` block; OpenAI-compatible
/// chat, whose tool messages are text, receives it in a user message right
/// after the turn's tool results; the MCP server adds it to the result's
/// content blocks. See the README ("Images and documents for the model").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReturn<T> {
    /// The typed result.
    pub value: T,
    /// What the model sees besides the result.
    pub content: Vec<Content>,
}

impl<T> ToolReturn<T> {
    /// `value` with nothing attached yet.
    pub fn new(value: T) -> Self {
        ToolReturn {
            value,
            content: Vec::new(),
        }
    }

    /// Attaches one more block.
    pub fn with(mut self, content: Content) -> Self {
        self.content.push(content);
        self
    }
}

// The schema of a `ToolReturn<T>` is `T`'s: the model is told the value's
// shape; the attachments are not part of the result it parses.
impl<T: JsonSchema> JsonSchema for ToolReturn<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}
