//! What the HTTP adapters share about a tool result's attachments
//! ([`crate::content::ToolReturn::content`]): what kind each block is to a
//! provider ([`classify`]), and how a block a provider cannot take is named
//! in its place, so the model knows something was there.

use crate::content::{Content, ResourceContents};

/// An attachment as the providers tell content apart.
pub(crate) enum Attachment<'a> {
    /// Text to read.
    Text(&'a str),
    /// A PNG, JPEG, GIF or WebP image (what both providers take), from an
    /// image block or a binary resource.
    Image { data: &'a str, mime_type: &'a str },
    /// An audio clip (only OpenAI's chat API takes one).
    #[cfg_attr(not(feature = "openai"), allow(dead_code))]
    Audio { data: &'a str, mime_type: &'a str },
    /// A text resource.
    TextDocument { uri: &'a str, text: &'a str },
    /// A PDF resource.
    Pdf { uri: &'a str, data: &'a str },
    /// Anything else: other image types, other binary resources.
    Other,
}

/// The image types both providers take.
const IMAGES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// What kind of attachment `content` is.
pub(crate) fn classify(content: &Content) -> Attachment<'_> {
    match content {
        Content::Text { text } => Attachment::Text(text),
        Content::Audio { data, mime_type } => Attachment::Audio { data, mime_type },
        Content::Image { data, mime_type }
        | Content::Resource {
            resource:
                ResourceContents::Blob {
                    mime_type,
                    blob: data,
                    ..
                },
        } if IMAGES.contains(&mime_type.as_str()) => Attachment::Image { data, mime_type },
        Content::Resource {
            resource: ResourceContents::Text { uri, text, .. },
        } => Attachment::TextDocument { uri, text },
        Content::Resource {
            resource:
                ResourceContents::Blob {
                    uri,
                    mime_type,
                    blob,
                },
        } if mime_type == "application/pdf" => Attachment::Pdf { uri, data: blob },
        _ => Attachment::Other,
    }
}

/// The text sent in place of an attachment `provider` does not take.
pub(crate) fn left_out(content: &Content, provider: &str) -> String {
    let what = match content {
        Content::Text { .. } => "a text".to_owned(),
        Content::Image { mime_type, .. } => format!("an image ({mime_type})"),
        Content::Audio { mime_type, .. } => format!("an audio clip ({mime_type})"),
        Content::Resource {
            resource: ResourceContents::Text { uri, mime_type, .. },
        }
        | Content::Resource {
            resource: ResourceContents::Blob { uri, mime_type, .. },
        } => format!("the resource {uri} ({mime_type})"),
    };
    format!("[The tool attached {what}, which {provider} does not accept; it was left out.]")
}

/// Whether `content` is text with nothing to read: Anthropic refuses an
/// empty or blank text block (and with it every later request of the
/// conversation, which keeps the attachment), so none is sent.
pub(crate) fn is_blank_text(content: &Content) -> bool {
    matches!(content, Content::Text { text } if text.trim().is_empty())
        || matches!(
            content,
            Content::Resource {
                resource: ResourceContents::Text { text, .. },
            } if text.trim().is_empty()
        )
}

/// A `data:` URL of base64 bytes.
#[cfg(feature = "openai")]
pub(crate) fn data_url(mime_type: &str, base64: &str) -> String {
    format!("data:{mime_type};base64,{base64}")
}
