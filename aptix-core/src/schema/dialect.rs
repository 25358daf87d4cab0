//! Placeholder until the dialect lowerings land.
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    OpenAiStrict,
    Anthropic,
    Gemini,
    Mcp,
}
impl Dialect {
    pub const ALL: [Dialect; 4] = [
        Dialect::OpenAiStrict,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Mcp,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAiStrict => "openai_strict",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
            Dialect::Mcp => "mcp",
        }
    }
}
impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}` cannot be expressed in the {dialect} dialect at `{path}`: {reason}")]
pub struct DialectError {
    pub tool: String,
    pub dialect: Dialect,
    pub path: String,
    pub reason: String,
}
pub fn lower(
    _dialect: Dialect,
    name: &str,
    description: &str,
    parameters: &Value,
) -> Result<Value, DialectError> {
    Ok(json!({"name": name, "description": description, "parameters": parameters}))
}
