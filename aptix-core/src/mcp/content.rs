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
use serde_json::Value;

use crate::content::{Content, ResourceContents};
use crate::definition::ToolDefinition;
use crate::envelope::JsonText;
use crate::schema::canonical_output;

/// How each block is sent over MCP.
pub(crate) trait ToBlock {
    /// The rmcp block this content is sent as.
    fn to_block(&self) -> ContentBlock;
}

impl ToBlock for Content {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
