//! `tools/list`: catalog definitions in MCP shape.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::Value;

use crate::catalog::Catalog;
use crate::definition::ToolDefinition;
use crate::meta::ServerStep;
use crate::schema::dialect::{self, Dialect};

/// Whether MCP clients may see and call the tool: only tools whose final
/// behaviour this server can bring about (server tools, and human tools
/// through elicitation). Client and provider tools need the agent's own
/// client or the model provider.
pub(crate) fn is_listed(definition: &ToolDefinition) -> bool {
    let route = definition.route();
    route.step != ServerStep::PassThrough && !route.reaches_client()
}

/// Every listed tool, in the catalog's (name) order. A tool whose schema
/// cannot be lowered is left out and logged: one bad tool must not hide
/// the others (the catalog checks definitions, so this does not happen).
pub(crate) fn tools(catalog: &Catalog) -> Vec<Tool> {
    catalog
        .entries()
        .filter(|entry| is_listed(entry.definition()))
        .filter_map(
            |entry| match tool(entry.definition(), &entry.offered_parameters()) {
                Ok(tool) => Some(tool),
                Err(error) => {
                    tracing::error!(tool = entry.name(), %error, "tool left out of tools/list");
                    None
                }
            },
        )
        .collect()
}

/// One definition as an MCP tool, with the parameters its catalog entry
/// offers (a latent tool's include `_output`).
pub(crate) fn tool(definition: &ToolDefinition, parameters: &Value) -> Result<Tool, String> {
    let lowered = dialect::lower(Dialect::Mcp, parameters)
        .map_err(|error| error.for_tool(definition.name()).to_string())?;
    let Value::Object(mut input_schema) = lowered else {
        return Err("the MCP dialect gave no object schema".to_owned());
    };
    declare_dialect(&mut input_schema);
    let mut tool = Tool::new(
        definition.name().to_owned(),
        definition.offered_description(),
        Arc::new(input_schema),
    );
    if let Some(title) = definition.title() {
        tool = tool.with_title(title);
    }
    if let Some(mut schema) = output_schema(definition) {
        declare_dialect(&mut schema);
        tool = tool.with_raw_output_schema(Arc::new(schema));
    }
    let hints = definition.annotations();
    let mut annotations = ToolAnnotations::new()
        .read_only(hints.read_only)
        .open_world(hints.open_world);
    // MCP gives these meaning only for tools that change something; on a
    // read-only tool they would only confuse a client.
    if !hints.read_only {
        annotations = annotations
            .destructive(hints.destructive)
            .idempotent(hints.idempotent);
    }
    annotations.title = definition.title().map(str::to_owned);
    Ok(tool.with_annotations(annotations))
}

/// The JSON Schema dialect every Aptix schema is written in.
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Puts `"$schema"` (2020-12) at the root of a listed schema. MCP says a
/// schema without `$schema` is 2020-12, but clients and validators that
/// predate that rule assume draft-07, where `$defs` and other keywords the
/// canonical schemas use mean nothing; naming the dialect leaves no doubt.
/// It is added here rather than in [`Dialect::Mcp`], which is defined as the
/// canonical schema unchanged (an identity the dialect's tests and
/// snapshots pin, and what `schema --dialect mcp` prints): the dialect
/// says what the schema is, the listing names its dialect.
fn declare_dialect(schema: &mut serde_json::Map<String, Value>) {
    schema
        .entry("$schema")
        .or_insert_with(|| Value::String(DRAFT_2020_12.to_owned()));
}

/// The output schema when it is an object schema (MCP requires `type:
/// "object"` at the root of `outputSchema`), else `None`.
pub(crate) fn output_schema(definition: &ToolDefinition) -> Option<serde_json::Map<String, Value>> {
    let schema = definition.output_schema().as_object()?;
    let is_object = schema.get("type").and_then(Value::as_str) == Some("object");
    is_object.then(|| schema.clone())
}
