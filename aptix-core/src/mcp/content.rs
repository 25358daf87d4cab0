//! Tool results that are MCP content blocks (text, image, audio, embedded
//! resources) rather than JSON.
//!
//! How the server recognizes them: by the tool's *output schema*, not by
//! the shape of a result. A tool whose output type is [`Content`] or
//! `Vec<Content>` has exactly the canonical schema of that type (the schema
//! is generated from the type by the same generator), so the decision is
//! made per tool, from its declaration, and a tool that happens to return
//! an object with a `type` field is never mistaken for content. The result
//! is then parsed back into `Content`; should that fail (it cannot for the
//! types themselves), the result is sent as JSON text like any other.
//!
//! Outside MCP (the agent loop, the CLI) a content result is what it
//! serializes to: the same JSON as the MCP content block, e.g.
//! `{"type":"image","data":"iVBO…","mimeType":"image/png"}`.

use std::sync::LazyLock;

use rmcp::model::{ContentBlock, ResourceContents as McpResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::definition::ToolDefinition;
use crate::envelope::JsonText;
use crate::schema::canonical_output;

/// One MCP content block a tool returns: return `Content` for one block,
/// `Vec<Content>` for several (e.g. a caption and an image). The MCP server
/// sends these as the result's `content` blocks (not as JSON text);
/// elsewhere the result is their JSON, which is MCP's content-block shape.
///
/// ```
/// use aptix_core::mcp::Content;
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
#[derive(Debug, Clone, Eq, Serialize, Deserialize, JsonSchema)]
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

crate::safe_derive::enum_eq!(Content {
    Text { text },
    Image { data, mime_type },
    Audio { data, mime_type },
    Resource { resource },
});

/// The contents of an embedded resource: text, or base64 bytes (`blob`).
#[derive(Debug, Clone, Eq, Serialize, Deserialize, JsonSchema)]
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

crate::safe_derive::enum_eq!(ResourceContents {
    Text { uri, mime_type, text },
    Blob { uri, mime_type, blob },
});

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

    /// The rmcp block this content is sent as.
    fn to_block(&self) -> ContentBlock {
        match self {
            Content::Text { text } => ContentBlock::text(text.clone()),
            Content::Image { data, mime_type } => ContentBlock::image(data.clone(), mime_type),
            Content::Audio { data, mime_type } => ContentBlock::audio(data.clone(), mime_type),
            Content::Resource { resource } => ContentBlock::resource(match resource {
                ResourceContents::Text {
                    uri,
                    mime_type,
                    text,
                } => McpResourceContents::text(text.clone(), uri).with_mime_type(mime_type),
                ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob,
                } => McpResourceContents::blob(blob.clone(), uri).with_mime_type(mime_type),
            }),
        }
    }
}

/// The canonical output schemas of `Content` and `Vec<Content>`, made once.
static SINGLE: LazyLock<Value> = LazyLock::new(canonical_output::<Content>);
static LIST: LazyLock<Value> = LazyLock::new(canonical_output::<Vec<Content>>);

/// How a tool's results are sent: as content blocks or as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The output type is `Content`.
    Single,
    /// The output type is `Vec<Content>`.
    List,
    /// Anything else: JSON.
    Json,
}

/// Whether `definition`'s results are content blocks, from its output
/// schema (see the module documentation for why the schema).
pub(crate) fn shape(definition: &ToolDefinition) -> Shape {
    let schema = definition.output_schema();
    if *schema == *SINGLE {
        Shape::Single
    } else if *schema == *LIST {
        Shape::List
    } else {
        Shape::Json
    }
}

/// The result as MCP blocks, when the tool returns content and the result
/// parses as such; `None` means "send it as JSON".
pub(crate) fn blocks(shape: Shape, result: &JsonText) -> Option<Vec<ContentBlock>> {
    let parsed = match shape {
        Shape::Json => return None,
        Shape::Single => result.parse_as::<Content>().map(|content| vec![content]),
        Shape::List => result.parse_as::<Vec<Content>>(),
    };
    match parsed {
        Ok(contents) => Some(contents.iter().map(Content::to_block).collect()),
        Err(error) => {
            tracing::warn!(%error, "a content result does not parse as content; sent as JSON");
            None
        }
    }
}

// `Copy` by hand: `#[derive(Clone, Copy)]` adds an `unsafe impl` of a
// compiler marker (`TrivialClone`) to this crate, and no `unsafe` may be
// compiled here. The derived `Clone` copies field by field instead.
impl Copy for Shape {}
