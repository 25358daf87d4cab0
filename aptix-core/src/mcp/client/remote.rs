//! A remote tool: its entry (made from the server's listing) and its code
//! (a `tools/call` on the server).

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::Value;

use super::limits::{McpLimits, json_bytes, schema_within, size};
use super::link::Link;
use super::{Listing, Offer, RefusedTool};
use crate::catalog::erased::{ErasedTool, Produced, RunFailure, RunFuture};
use crate::catalog::{ToolEntry, ToolEntryBuilder};
use crate::content::Content;
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::error::ToolError;
use crate::meta::{Annotations, Approval, Redaction};
use crate::tool::{serialize_output, validated_value};

/// What `args_type` says of a remote tool's schema in catalog errors.
const REMOTE_SCHEMA: &str = "the MCP server's inputSchema";

/// The entries of `tools` (each with its size as JSON), and the tools
/// refused; `Err` with how many were checked when `deadline` passed first
/// (the checks stop there, and so does their CPU cost).
pub(super) fn listing(
    offer: &Offer,
    link: &Arc<Link>,
    tools: Vec<(Tool, usize)>,
    deadline: std::time::Instant,
) -> Result<Listing, usize> {
    let mut listing = Listing::default();
    for (checked, (tool, bytes)) in tools.into_iter().enumerate() {
        if std::time::Instant::now() >= deadline {
            return Err(checked);
        }
        let remote = tool.name.to_string();
        // Bounded before anything walks it: the checks below (secrets,
        // references, the validator, dialects) are linear in the schema,
        // and the schema's size is the server's choice.
        if let Err(problem) = within_limits(&tool, bytes, link.limits()) {
            listing.refused.push(RefusedTool::Invalid {
                server: offer.label.clone(),
                tool: cut(&remote, 64),
                problem,
            });
            continue;
        }
        let listed = serde_json::to_value(&tool).unwrap_or(Value::Null);
        if let Some(pins) = &offer.pins
            && let Err(change) = pins.check(&offer.label, &remote, &listed)
        {
            listing.refused.push(RefusedTool::Drifted {
                server: offer.label.clone(),
                tool: remote.clone(),
                change,
            });
            listing.listed.insert(remote, listed);
            continue;
        }
        match entry(offer, link, &tool) {
            Ok(entry) => match offer
                .dialect
                .map(|dialect| (dialect, entry.definition().lower(dialect)))
            {
                Some((dialect, Err(error))) => listing.refused.push(RefusedTool::Dialect {
                    server: offer.label.clone(),
                    tool: remote.clone(),
                    dialect: format!("{dialect:?}"),
                    problem: error.to_string(),
                }),
                _ => listing.entries.push(entry),
            },
            Err(problem) => listing.refused.push(RefusedTool::Invalid {
                server: offer.label.clone(),
                tool: remote.clone(),
                problem,
            }),
        }
        listing.listed.insert(remote, listed);
    }
    Ok(listing)
}

/// Why a listed tool is too big to be checked, if it is: its definition's
/// bytes, its schemas' values and depth.
fn within_limits(tool: &Tool, bytes: usize, limits: &McpLimits) -> Result<(), String> {
    if bytes > limits.max_definition_bytes {
        return Err(format!(
            "its definition is {} of JSON, more than the limit of {} (McpLimits::max_definition_bytes)",
            size(bytes),
            size(limits.max_definition_bytes)
        ));
    }
    let schemas = serde_json::json!([&*tool.input_schema, tool.output_schema.as_deref()]);
    schema_within(&schemas, limits.max_schema_nodes, limits.max_schema_depth)
}

/// `text` cut at `chars` characters: a refused tool's name is the server's
/// choice too.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The entry of one listed tool, or why it cannot be one.
fn entry(offer: &Offer, link: &Arc<Link>, tool: &Tool) -> Result<ToolEntry, String> {
    let remote = tool.name.to_string();
    let name = match &offer.prefix {
        Some(prefix) => format!("{prefix}_{remote}"),
        None => remote.clone(),
    };
    let description = tool
        .description
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
        .or_else(|| tool.title.clone())
        .unwrap_or_else(|| format!("The tool `{remote}` of the MCP server `{}`.", offer.label));
    let usage = format!(
        "When its description fits the task (a tool of the MCP server `{}`).",
        offer.label
    );
    let mut parameters = Value::Object((*tool.input_schema).clone());
    if let Some(schema) = parameters.as_object_mut() {
        // The dialect says which JSON Schema it is; the canonical schema
        // names none.
        schema.remove("$schema");
    }
    let output = tool
        .output_schema
        .as_ref()
        .map(|schema| Value::Object((**schema).clone()));
    let code = Arc::new(RemoteTool {
        link: link.clone(),
        remote: remote.clone(),
        checks_output: output.is_some(),
    });
    let mut builder = ToolEntryBuilder::foreign(
        name.clone(),
        usage,
        description,
        parameters,
        code,
        offer.source,
        REMOTE_SCHEMA,
    )
    .namespace(offer.prefix.as_deref().unwrap_or(&offer.label))
    .annotations(annotations(tool));
    if let Some(title) = tool
        .title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
    {
        builder = builder.title(title);
    }
    if let Some(output) = output {
        builder = builder.output_schema(output);
    }
    if let Some(timeout) = offer.timeout {
        builder = builder.timeout(timeout);
    }
    if offer.approval.applies(&remote, &name) {
        builder = builder.approval(Approval::RequiresApproval);
    }
    // A third party's fields: when any looks secret, no value is shown
    // (the per-field pointers of `redact` are the program's own strings).
    let secret = builder
        .schemas()
        .iter()
        .any(crate::secrets::has_secret_field);
    if offer.hide_values || secret {
        builder = builder.redaction(Redaction::Allow(&[]));
    }
    builder.build().map_err(|error| {
        error
            .problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// MCP's annotations, with MCP's defaults for the hints left out.
fn annotations(tool: &Tool) -> Annotations {
    let given = tool.annotations.as_ref();
    let hint = |pick: fn(&rmcp::model::ToolAnnotations) -> Option<bool>, default: bool| {
        given.and_then(pick).unwrap_or(default)
    };
    let read_only = hint(|a| a.read_only_hint, false);
    Annotations {
        read_only,
        // Meaningless for a read-only tool, and refused beside it.
        destructive: !read_only && hint(|a| a.destructive_hint, true),
        idempotent: hint(|a| a.idempotent_hint, false),
        open_world: hint(|a| a.open_world_hint, true),
    }
}

/// A remote tool's code.
struct RemoteTool {
    link: Arc<Link>,
    /// Its name on the server.
    remote: String,
    /// Whether the server declared an `outputSchema` to check
    /// `structuredContent` against.
    checks_output: bool,
}

impl ErasedTool for RemoteTool {
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> RunFuture<'a> {
        Box::pin(async move {
            let Value::Object(arguments) = validated_value(definition, raw)? else {
                // The validator accepts objects only.
                return Err(RunFailure::Tool(ToolError::internal_message(
                    "validated arguments are not an object",
                )));
            };
            let result = self
                .link
                .call(&self.remote, arguments, ctx)
                .await
                .map_err(|failure| RunFailure::Tool(failure.into_tool_error()))?;
            self.produced(definition, result, ctx)
        })
    }

    fn runs_function(&self) -> bool {
        true
    }
}

impl RemoteTool {
    /// The result and attachments of a call's answer.
    fn produced(
        &self,
        definition: &ToolDefinition,
        result: CallToolResult,
        ctx: &ToolContext,
    ) -> Result<Produced, RunFailure> {
        let server = self.link.label();
        let limit = self.link.limits().max_result_bytes;
        let bytes = result_bytes(&result);
        if bytes > limit {
            tracing::warn!(server, tool = %self.remote, bytes, limit, "an MCP server's result is larger than the limit; it is not kept");
            return Err(RunFailure::Tool(ToolError::failed(format!(
                "the MCP server `{server}` answered with a result of {}, more than the limit of {} (McpLimits::max_result_bytes); it was not kept",
                size(bytes),
                size(limit)
            ))));
        }
        let mut texts = Vec::new();
        let mut attachments = Vec::new();
        for block in &result.content {
            match block_content(block) {
                Some(Content::Text { text }) => texts.push(text),
                Some(other) => attachments.push(other),
                None => texts.push(format!(
                    "(a content block Aptix cannot show: {})",
                    serde_json::to_string(block).unwrap_or_default()
                )),
            }
        }
        if result.is_error == Some(true) {
            let message = if texts.is_empty() {
                format!("the MCP server `{server}` reported an error with no text")
            } else {
                texts.join("\n")
            };
            return Err(RunFailure::Tool(ToolError::failed(message)));
        }
        let value = match result.structured_content {
            Some(structured) => {
                if self.checks_output {
                    definition.check_output(&structured).map_err(|problem| {
                        RunFailure::Tool(ToolError::failed(format!(
                            "the MCP server `{server}` returned structured content that does not match its outputSchema: {problem}"
                        )))
                    })?;
                }
                structured
            }
            None if self.checks_output => {
                return Err(RunFailure::Tool(ToolError::failed(format!(
                    "the MCP server `{server}` declared an outputSchema for `{}` but returned no structuredContent",
                    self.remote
                ))));
            }
            None => text_value(texts),
        };
        let json = serialize_output(&value, ctx)?;
        Ok(Produced::new(
            json,
            (!attachments.is_empty()).then_some(attachments),
        ))
    }
}

/// The bytes of a result as JSON: its content blocks (text, and the
/// base64 of images and audio) and its structured content.
fn result_bytes(result: &CallToolResult) -> usize {
    json_bytes(&result.content) + result.structured_content.as_ref().map_or(0, json_bytes)
}

/// One text block is the result as it reads: its JSON value when it is
/// JSON (Aptix's own server sends a number result as its text), else the
/// string; several are a list of strings; none is `null`.
fn text_value(mut texts: Vec<String>) -> Value {
    match texts.len() {
        0 => Value::Null,
        1 => {
            let text = texts.remove(0);
            serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text))
        }
        _ => Value::Array(texts.into_iter().map(Value::String).collect()),
    }
}

/// A block as Aptix content (the same JSON shape), or `None` for a kind it
/// has no form for (a resource link, say).
fn block_content(block: &ContentBlock) -> Option<Content> {
    serde_json::to_value(block)
        .ok()
        .and_then(|value| serde_json::from_value(value).ok())
}

/// The listed tools by name, for a lock.
pub(super) type Listed = BTreeMap<String, Value>;
