//! Asking the person at the client: approval forms and human-tool forms,
//! sent as MCP form elicitations.

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use serde_json::{Map, Value, json};

use crate::definition::ToolDefinition;
use crate::envelope::JsonText;

/// The property of the approval form.
pub(crate) const APPROVE: &str = "approve";

/// One form to put before the person.
pub(crate) struct Question {
    /// The key of the request in an MRTR `inputRequests` map.
    pub(crate) key: &'static str,
    pub(crate) message: String,
    pub(crate) schema: ElicitationSchema,
}

impl Question {
    pub(crate) fn params(&self) -> ElicitRequestParams {
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: self.message.clone(),
            requested_schema: self.schema.clone(),
        }
    }
}

/// What the person did.
pub(crate) enum Answer {
    /// Accepted, with the form's content (`{}` when none was sent).
    Accepted(Value),
    /// Explicitly declined.
    Declined,
    /// Dismissed without choosing.
    Cancelled,
}

impl From<ElicitResult> for Answer {
    fn from(result: ElicitResult) -> Self {
        match result.action {
            ElicitationAction::Accept => {
                Answer::Accepted(result.content.unwrap_or_else(|| json!({})))
            }
            ElicitationAction::Decline => Answer::Declined,
            // `Cancel`, and whatever later protocol versions add: not a yes.
            _ => Answer::Cancelled,
        }
    }
}

/// Pretty JSON of the validated arguments, for the person to read.
fn pretty(payload: &JsonText) -> String {
    serde_json::to_string_pretty(&payload.to_value()).unwrap_or_else(|_| payload.to_string())
}

/// The yes/no form of an approval-gated call: one required boolean.
pub(crate) fn approval(definition: &ToolDefinition, payload: &JsonText) -> Question {
    let message = format!(
        "Approve this call of `{}`?\n{}\n\nArguments:\n{}",
        definition.name(),
        definition.description(),
        pretty(payload)
    );
    let schema = json!({
        "type": "object",
        "properties": {
            APPROVE: {
                "type": "boolean",
                "title": "Approve",
                "description": format!("Run `{}` with these arguments.", definition.name()),
                "default": false,
            }
        },
        "required": [APPROVE],
    });
    Question {
        key: "approval",
        message,
        // A fixed, valid form: conversion cannot fail, but an empty form
        // would still be answered (and refused below) rather than panic.
        schema: form_schema(schema).unwrap_or_else(|_| ElicitationSchema::new(Default::default())),
    }
}

/// Whether an accepted approval form says yes.
pub(crate) fn approved(content: &Value) -> bool {
    content.get(APPROVE).and_then(Value::as_bool) == Some(true)
}

/// The form of a human tool, from its output schema; `Err` says why the
/// schema cannot be a form (MCP forms are flat objects of primitives).
pub(crate) fn human(definition: &ToolDefinition, payload: &JsonText) -> Result<Question, String> {
    let schema = elicitation_schema(definition.output_schema())?;
    let message = format!(
        "`{}` needs your answer.\n{}\n\nRequest:\n{}",
        definition.name(),
        definition.description(),
        pretty(payload)
    );
    Ok(Question {
        key: "answer",
        message,
        schema: form_schema(schema)?,
    })
}

fn form_schema(schema: Value) -> Result<ElicitationSchema, String> {
    match schema {
        Value::Object(object) => ElicitationSchema::from_json_schema(object)
            .map_err(|error| format!("it is not a valid MCP elicitation schema: {error}")),
        _ => Err("it is not an object schema".to_owned()),
    }
}

/// Keywords a primitive property of an elicitation form may carry.
const PROPERTY_KEYWORDS: [&str; 9] = [
    "type",
    "title",
    "description",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "enum",
];

/// The string formats MCP elicitation knows.
const STRING_FORMATS: [&str; 4] = ["email", "uri", "date", "date-time"];

/// An output schema restated as an MCP elicitation schema: an object whose
/// properties are all strings, numbers, integers, booleans or string
/// enums. An optional field (`["T","null"]`, not required) becomes a plain
/// optional `T`; Rust-only keywords (numeric `format`s) are dropped.
fn elicitation_schema(output: &Value) -> Result<Value, String> {
    let root = output
        .as_object()
        .filter(|root| root.get("type").and_then(Value::as_str) == Some("object"))
        .ok_or("its output schema is not an object")?;
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut properties = Map::new();
    let empty = Map::new();
    let declared = match root.get("properties") {
        Some(Value::Object(declared)) => declared,
        None => &empty,
        Some(_) => return Err("its `properties` is not an object".to_owned()),
    };
    for (name, schema) in declared {
        let property = primitive(schema, required.contains(&name.as_str()))
            .map_err(|why| format!("field `{name}` {why}"))?;
        properties.insert(name.clone(), property);
    }
    let mut form = Map::new();
    form.insert("type".into(), Value::from("object"));
    form.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        form.insert("required".into(), json!(required));
    }
    if let Some(description) = root.get("description") {
        form.insert("description".into(), description.clone());
    }
    Ok(Value::Object(form))
}

fn primitive(schema: &Value, required: bool) -> Result<Value, String> {
    let object = schema.as_object().ok_or("has no schema object")?;
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        // `Option<T>`: `["T", "null"]`; only an optional field may omit it.
        Some(Value::Array(kinds)) if !required => {
            let mut kinds = kinds
                .iter()
                .filter_map(Value::as_str)
                .filter(|kind| *kind != "null");
            match (kinds.next(), kinds.next()) {
                (Some(kind), None) => kind,
                _ => return Err("has several types".to_owned()),
            }
        }
        _ => return Err("is not a single primitive type".to_owned()),
    };
    if !matches!(kind, "string" | "number" | "integer" | "boolean") {
        return Err(format!(
            "is of type `{kind}`; an elicitation form holds only strings, numbers, integers and booleans"
        ));
    }
    let mut property = Map::new();
    for keyword in PROPERTY_KEYWORDS {
        if let Some(value) = object.get(keyword) {
            property.insert(keyword.into(), value.clone());
        }
    }
    property.insert("type".into(), Value::from(kind));
    if kind == "string"
        && let Some(Value::String(format)) = object.get("format")
        && STRING_FORMATS.contains(&format.as_str())
    {
        property.insert("format".into(), Value::from(format.as_str()));
    }
    if property.contains_key("enum") && kind != "string" {
        return Err("is an enum of non-strings".to_owned());
    }
    Ok(Value::Object(property))
}

/// The `requestState` of an MRTR question: binds the answer to the tool,
/// the question and the exact validated arguments, so that an answer given
/// for one call cannot be replayed with other arguments.
pub(crate) fn binding(definition: &ToolDefinition, key: &str, payload: &JsonText) -> String {
    crate::digest::sha256_hex_of_parts(
        ["aptix-mcp-v1", definition.name(), key, payload.as_str()].map(str::as_bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_primitive_objects_become_forms() {
        let output = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "note": {"type": ["string", "null"], "description": "Anything else."},
                "lat": {"type": "number", "format": "double", "minimum": -90.0},
            },
            "required": ["city", "lat"],
        });
        let form = elicitation_schema(&output).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(form["properties"]["note"]["type"], "string");
        assert_eq!(form["properties"]["lat"].get("format"), None);
        assert!(form_schema(form).is_ok());
    }

    #[test]
    fn nested_objects_are_refused_with_the_field() {
        let output = json!({
            "type": "object",
            "properties": {"place": {"type": "object", "properties": {}}},
            "required": ["place"],
        });
        let error = elicitation_schema(&output).err().unwrap_or_default();
        assert!(error.contains("`place`"), "{error}");
        assert!(elicitation_schema(&json!({"type": "string"})).is_err());
    }
}
