//! Anthropic: full JSON Schema, except a composition at the root of
//! `input_schema`.

use serde_json::{Map, Value};

use super::DialectError;
use super::lowering::{Lowering, pointer_push};

/// The parameters as Anthropic takes them: unchanged, once the root is known
/// not to be a composition (the API answers "input_schema does not support
/// oneOf, allOf, or anyOf at the top level").
pub(super) fn lower(cx: &Lowering, root: &Map<String, Value>) -> Result<Value, DialectError> {
    for keyword in ["allOf", "anyOf", "oneOf"] {
        if root.contains_key(keyword) {
            return Err(cx.error(
                &pointer_push("", keyword),
                format!("Anthropic does not accept `{keyword}` at the top level of `input_schema`"),
            ));
        }
    }
    Ok(cx.root.clone())
}

/// A Messages API tool.
pub(super) fn provider_tool(name: &str, description: &str, input_schema: Value) -> Value {
    serde_json::json!({
        "name": name,
        "description": description,
        "input_schema": input_schema,
    })
}
