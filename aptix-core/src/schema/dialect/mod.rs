//! Provider dialects of a tool's JSON Schema.
//!
//! Every tool has one *canonical* parameters schema: JSON Schema draft 2020-12
//! as produced by schemars and post-processed by Aptix (object root,
//! `additionalProperties: false` on every object that has `properties`, or
//! `unevaluatedProperties: false` when they sit beside `oneOf`/`anyOf`,
//! reusable types under root `$defs`). Each LLM provider accepts a different
//! subset of JSON Schema in its tool definitions; [`lower`] turns the
//! canonical schema into the schema one provider accepts. Putting it into a
//! provider's tool object is the adapter's business (`model::openai`,
//! `model::anthropic`, `mcp`); [`provider_tool`] shows the whole tool as the
//! provider documents it, for people and snapshots.
//!
//! # The contract
//!
//! **A lowering that would change meaning is an error, never a silent change.**
//! A provider that is handed a schema it cannot enforce either rejects the
//! request or, worse, constrains the model to arguments the tool will then
//! refuse (or accepts ones it should not). So every keyword is either
//! expressed exactly in the target dialect, rewritten into an equivalent form,
//! or refused with a [`DialectError`] that names the keyword's JSON pointer in
//! the canonical schema. The only things ever dropped are those that cannot
//! change which arguments are valid, and each is listed here:
//!
//! * annotations: `default`, `examples`, `deprecated`, `readOnly`,
//!   `writeOnly`, `$comment` (OpenAI strict and Gemini only; Anthropic and MCP
//!   receive the canonical schema untouched);
//! * schemars' numeric `format`s (`int32`, `uint64`, `double`, ...), which
//!   only restate the Rust type; its range is already in `minimum`/`maximum`
//!   where it matters (Gemini keeps the four numeric formats it knows);
//! * `uniqueItems: false`, which asserts nothing;
//! * the root `$schema`, which names the canonical dialect;
//! * OpenAI only: the `description`/`title` beside a `$ref` that points back
//!   into a schema being lowered (strict mode accepts no keywords beside
//!   `$ref`, and such a reference cannot be inlined), or whose inlining would
//!   pass the bound on copies below;
//! * Gemini only: `additionalProperties: false` and `unevaluatedProperties:
//!   false`, which Gemini cannot express
//!   (the executor validates arguments against the canonical schema, so extra
//!   properties are still rejected); `$defs`, once every `$ref` is inlined;
//!   string `format`s other than `date-time` and `enum`, since draft 2020-12
//!   makes `format` an annotation (OpenAI strict mode, which rejects unknown
//!   formats outright, refuses them instead).
//!
//! OpenAI strict mode also forces two rewrites, each documented where it is
//! made:
//!
//! * Every property must be listed in `required`, so a property the canonical
//!   schema leaves optional becomes required-but-nullable: the model sends
//!   `null` where it would have left the property out. Callers that
//!   deserialize OpenAI arguments should treat `null` for such a property as
//!   "absent" (serde already does for `Option` fields, not for
//!   `#[serde(default)]` ones).
//! * Every object must be closed. An object closed as a whole beside
//!   `oneOf`/`anyOf` (`unevaluatedProperties: false`: serde's flattened enum)
//!   becomes one closed object per branch, with the outer members in each;
//!   one that does not merge that simply is refused.
//! * An object that declares no properties and
//!   says nothing about additional ones (schemars' schema for a struct
//!   without fields, i.e. a tool without arguments) becomes the closed empty
//!   object; any other open object or map is refused.
//!
//! # The dialects
//!
//! * [`Dialect::OpenAiStrict`]: OpenAI Structured Outputs strict mode. Objects
//!   closed with every property required (see above); `$defs`/`$ref` kept,
//!   recursion included, except that a `$ref` carrying a description is
//!   replaced by its definition (within the bounds below); `oneOf` becomes `anyOf` when its branches
//!   are provably mutually exclusive (serde's tagged enum shapes are);
//!   unsupported keywords and formats refused.
//! * [`Dialect::OpenAiCompatible`]: OpenAI tools without strict mode, for
//!   OpenAI-compatible servers that lack Structured Outputs: the canonical
//!   schema as is.
//! * [`Dialect::Anthropic`]: the canonical schema as is; Anthropic accepts
//!   full JSON Schema except a composition at the root.
//! * [`Dialect::Gemini`]: Gemini's OpenAPI 3 subset. Every `$ref` inlined (a
//!   recursive one is an error), `[T, "null"]` and `anyOf[.., {"type":"null"}]`
//!   turned into `nullable: true`, `const` into a one-value `enum`, `oneOf`
//!   into `anyOf` as for OpenAI; unsupported keywords refused.
//! * [`Dialect::Mcp`]: the canonical schema as is; MCP clients read 2020-12.
//!
//! Every dialect checks that the root is an object schema and that every
//! `$ref` resolves inside the parameters.
//!
//! # Bounds
//!
//! A schema may come from another MCP server, and its lowering is sent with
//! every model request, so no schema lowers to much more than itself, nor
//! takes much more work than its size:
//!
//! * the copies one tool's lowering makes (definitions inlined for a `$ref`,
//!   an object written out once per branch) come to at most 4 times the
//!   canonical schema, or 256 KiB for a smaller one, in bytes of JSON; past
//!   it, OpenAI strict mode keeps the bare `$ref` and drops its annotations,
//!   and what cannot be expressed without the copy (Gemini's inlining, a
//!   distributed object) is a [`DialectError`] that names the bound; at most
//!   1024 `$ref`s are inlined, however small;
//! * the proof that `oneOf` branches are mutually exclusive takes one pass
//!   for the shapes of serde's enums, and at most 20,000 comparisons of two
//!   subschemas otherwise;
//! * a chain of bare `$ref`s is followed once, not once per reference into
//!   it; nesting, inlined references included, stops at 128 levels.
//!
//! All functions here are pure and deterministic: the same input always gives
//! the same output, and the input is never modified.

mod anthropic;
mod exclusive;
mod gemini;
mod lowering;
mod openai;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use lowering::{Lowering, check_references};

/// A provider's dialect of JSON Schema for tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// OpenAI function tools with `strict: true` (Structured Outputs).
    OpenAiStrict,
    /// OpenAI function tools without strict mode, as OpenAI-compatible
    /// servers that do not support Structured Outputs (llama.cpp, vLLM,
    /// Ollama) take them: the canonical schema as is.
    OpenAiCompatible,
    /// Anthropic Messages API tools (`input_schema`).
    Anthropic,
    /// Gemini function declarations (the OpenAPI 3 `Schema` subset).
    Gemini,
    /// Model Context Protocol `tools/list` entries (`inputSchema`).
    Mcp,
}

impl Dialect {
    /// The dialects a provider documents and tool definitions are checked
    /// and snapshotted in, in a fixed order. [`Dialect::OpenAiCompatible`]
    /// is left out: it is the canonical schema, which [`Dialect::Mcp`]
    /// already shows.
    pub const ALL: [Dialect; 4] = [
        Dialect::OpenAiStrict,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Mcp,
    ];

    /// The dialect's stable identifier, as accepted by [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAiStrict => "openai_strict",
            Dialect::OpenAiCompatible => "openai_compatible",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
            Dialect::Mcp => "mcp",
        }
    }

    /// How error messages name the provider's schema support.
    fn provider(self) -> &'static str {
        match self {
            Dialect::OpenAiStrict => "OpenAI strict mode",
            Dialect::OpenAiCompatible => "OpenAI without strict mode",
            Dialect::Anthropic => "Anthropic",
            Dialect::Gemini => "Gemini",
            Dialect::Mcp => "MCP",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Dialect`] from a string that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown dialect `{input}`; expected one of openai_strict, openai, openai_compatible, anthropic, gemini, mcp"
)]
pub struct ParseDialectError {
    /// The string that was not recognised.
    pub input: String,
}

impl FromStr for Dialect {
    type Err = ParseDialectError;

    /// Accepts the [`Dialect::as_str`] identifiers, plus `openai` for
    /// [`Dialect::OpenAiStrict`], the mode OpenAI itself should be sent.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "openai_strict" | "openai" => Ok(Dialect::OpenAiStrict),
            "openai_compatible" => Ok(Dialect::OpenAiCompatible),
            "anthropic" => Ok(Dialect::Anthropic),
            "gemini" => Ok(Dialect::Gemini),
            "mcp" => Ok(Dialect::Mcp),
            _ => Err(ParseDialectError {
                input: s.to_owned(),
            }),
        }
    }
}

/// A canonical schema that a dialect cannot express without changing meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialectError {
    /// The tool's name; empty when the error comes straight from
    /// [`lower`], which sees only a schema ([`DialectError::for_tool`]
    /// names it).
    pub tool: String,
    /// The dialect that was asked for.
    pub dialect: Dialect,
    /// JSON pointer into the canonical parameters, e.g.
    /// `/properties/when/pattern`; `""` for the root.
    pub path: String,
    /// What cannot be expressed, and why.
    pub reason: String,
}

impl DialectError {
    /// The same error, naming the tool whose parameters could not be lowered.
    pub fn for_tool(mut self, tool: &str) -> Self {
        tool.clone_into(&mut self.tool);
        self
    }
}

impl fmt::Display for DialectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let DialectError {
            tool,
            dialect,
            path,
            reason,
        } = self;
        if tool.is_empty() {
            write!(f, "the schema cannot be expressed")?;
        } else {
            write!(f, "tool `{tool}` cannot be expressed")?;
        }
        write!(f, " in the {dialect} dialect at `{path}`: {reason}")
    }
}

impl std::error::Error for DialectError {}

/// A tool's canonical parameters schema lowered to `dialect`: the schema
/// that provider accepts, with the same meaning. Adapters put it into their
/// own wire shape of a tool.
///
/// Every dialect requires `parameters` to be an object schema with
/// `"type": "object"` whose `$ref`s all resolve inside it.
/// [`Dialect::Anthropic`], [`Dialect::Mcp`] and [`Dialect::OpenAiCompatible`]
/// return it unchanged once checked.
pub fn lower(dialect: Dialect, parameters: &Value) -> Result<Value, DialectError> {
    let mut cx = Lowering::new(dialect, parameters);
    let root = cx.check_root()?;
    check_references(
        &cx,
        parameters,
        "",
        0,
        &mut std::collections::HashSet::new(),
    )?;
    match dialect {
        Dialect::OpenAiStrict => openai::lower(&mut cx, root),
        Dialect::Anthropic => anthropic::lower(&cx, root),
        Dialect::Gemini => gemini::lower(&mut cx),
        Dialect::OpenAiCompatible | Dialect::Mcp => Ok(parameters.clone()),
    }
}

/// The whole tool definition as `dialect`'s provider documents it, for
/// people and snapshots (`schema --dialect`): [`lower`]'s schema
/// with the name and description around it. Model adapters build their own
/// request shapes instead.
///
/// * [`Dialect::OpenAiStrict`] gives
///   `{"type":"function","name","description","parameters","strict":true}`
///   (the flat Responses-API shape);
///   [`Dialect::OpenAiCompatible`] the same without `strict`.
/// * [`Dialect::Anthropic`] gives `{"name","description","input_schema"}`.
/// * [`Dialect::Gemini`] gives `{"name","description","parameters"}`;
///   `parameters` is omitted for a tool without properties, because Gemini
///   rejects an `OBJECT` schema whose `properties` is empty.
/// * [`Dialect::Mcp`] gives `{"name","description","inputSchema"}`.
pub fn provider_tool(
    dialect: Dialect,
    name: &str,
    description: &str,
    parameters: &Value,
) -> Result<Value, DialectError> {
    let schema = lower(dialect, parameters).map_err(|error| error.for_tool(name))?;
    Ok(match dialect {
        Dialect::OpenAiStrict => openai::provider_tool(name, description, schema, true),
        Dialect::OpenAiCompatible => openai::provider_tool(name, description, schema, false),
        Dialect::Anthropic => anthropic::provider_tool(name, description, schema),
        Dialect::Gemini => gemini::provider_tool(name, description, schema),
        Dialect::Mcp => serde_json::json!({
            "name": name,
            "description": description,
            "inputSchema": schema,
        }),
    })
}
