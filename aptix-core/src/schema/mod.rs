//! Tool definitions: the canonical schema every dialect is lowered from.
//!
//! The canonical schema is what schemars produces for the arguments type
//! (JSON Schema 2020-12, reusable types in `$defs`), made stricter in one
//! way: every object that stands for a whole value is closed (plain objects
//! with `additionalProperties: false`, objects beside `oneOf`/`anyOf` with
//! `unevaluatedProperties: false`; the newtype variant of an internally tagged
//! enum is merged with the struct it wraps into one closed object), because a
//! model that invents a field has made a mistake it should be told about, not
//! one that should be silently ignored. The executor validates
//! against exactly this schema, and every provider dialect is a pure function
//! of it (see [`dialect`]).

pub mod dialect;
pub mod meta_fields;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

pub use dialect::{Dialect, DialectError};

/// Why a tool's definition cannot be used. Reported when the catalog is
/// built (at start-up, or by `aptix_testkit::assert_catalog_valid` in CI).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    /// The arguments type is not a JSON object; models always send objects.
    #[error(
        "tool `{tool}` ({source_location}): its arguments type `{type_name}` is {found}, but tool arguments are always a JSON object; use a struct with named fields"
    )]
    ArgsNotObject {
        /// The tool's name.
        tool: String,
        /// The arguments type.
        type_name: String,
        /// What the schema describes instead.
        found: String,
        /// Where the tool was declared.
        source_location: String,
    },
    /// A field has no doc comment, so the model would have to guess its meaning.
    #[error(
        "tool `{tool}` ({source_location}): field `{field}` of `{type_name}` has no description; add a doc comment (`/// ...`) to the field"
    )]
    UndocumentedField {
        /// The tool's name.
        tool: String,
        /// The type that declares the field.
        type_name: String,
        /// The field's name.
        field: String,
        /// Where the tool was declared.
        source_location: String,
    },
    /// A parameter's name starts with `_`, the prefix of the meta fields
    /// (`_tool`, `_activity`, `_reasoningForCall`, `_output`): a model and
    /// the executor could not tell it from one.
    #[error(
        "tool `{tool}` ({source_location}): parameter `{field}` of `{type_name}` starts with `_`, which is reserved for the meta fields `_tool`, `_activity`, `_reasoningForCall` and `_output`; rename it (e.g. `#[serde(rename = \"{}\")]`)",
        field.trim_start_matches('_')
    )]
    ReservedField {
        /// The tool's name.
        tool: String,
        /// The arguments type.
        type_name: String,
        /// The parameter's name.
        field: String,
        /// Where the tool was declared.
        source_location: String,
    },
    /// The generated schema is not a schema jsonschema accepts.
    #[error("tool `{tool}` ({source_location}): its schema is invalid: {message}")]
    InvalidSchema {
        /// The tool's name.
        tool: String,
        /// What jsonschema reported.
        message: String,
        /// Where the tool was declared.
        source_location: String,
    },
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = false;
        })
        .into_generator()
}

/// The canonical arguments schema of `A`: schemars' 2020-12 output, without
/// the root `title` (the tool name is the title), objects closed.
pub fn canonical_parameters<A: JsonSchema>() -> Value {
    parameters_from(generator().into_root_schema_for::<A>())
}

/// The canonical schema of a result type. Results are produced by our own
/// serializer, so their objects are left as schemars describes them.
pub fn canonical_output<T: JsonSchema>() -> Value {
    untitled(generator().into_root_schema_for::<T>())
}

// The generic functions above only ask schemars for the schema; everything
// else is done once, here, rather than copied into every tool.

fn parameters_from(schema: Schema) -> Value {
    let mut schema = untitled(schema);
    inline_partial_refs(&mut schema);
    close_objects(&mut schema, true);
    schema
}

fn untitled(schema: Schema) -> Value {
    let mut schema = schema.to_value();
    if let Value::Object(root) = &mut schema {
        root.remove("title");
        root.remove("$schema");
    }
    schema
}

const COMBINATORS: [&str; 3] = ["allOf", "anyOf", "oneOf"];

/// Closes every object schema that stands for a whole value, so that an unknown member is
/// refused. A plain object gets `additionalProperties: false`. An object beside a combinator
/// (`properties` and `oneOf` in one schema: serde's `flatten` of an enum) gets
/// `unevaluatedProperties: false` instead, which in 2020-12 sees the members the matching branch
/// declares; its branches are only part of the value, so they stay open. An object beside a
/// `$ref` that [`inline_partial_refs`] could not merge is closed the same way.
pub(crate) fn close_objects(schema: &mut Value, whole: bool) {
    let Value::Object(map) = schema else { return };
    let has_combinator = COMBINATORS.iter().any(|key| map.contains_key(*key));
    let has_properties = map.contains_key("properties");
    let partial = has_combinator || map.contains_key("$ref");
    if whole
        && has_properties
        && !map.contains_key("additionalProperties")
        && !map.contains_key("unevaluatedProperties")
    {
        let keyword = if partial {
            "unevaluatedProperties"
        } else {
            "additionalProperties"
        };
        map.insert(keyword.into(), Value::Bool(false));
    }
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" | "definitions" | "patternProperties" => {
                if let Value::Object(children) = child {
                    children.values_mut().for_each(|c| close_objects(c, true));
                }
            }
            "items" | "additionalProperties" | "not" | "contains" => close_objects(child, true),
            "prefixItems" => {
                if let Value::Array(items) = child {
                    items.iter_mut().for_each(|c| close_objects(c, true));
                }
            }
            k if COMBINATORS.contains(&k) => {
                // Branches are whole values unless the parent also has properties.
                if let Value::Array(branches) = child {
                    branches
                        .iter_mut()
                        .for_each(|c| close_objects(c, whole && !has_properties));
                }
            }
            _ => {}
        }
    }
}

/// Keywords of a definition that [`inline_partial_refs`] can merge into the object that refers
/// to it.
const MERGEABLE: [&str; 6] = [
    "type",
    "properties",
    "required",
    "description",
    "title",
    "additionalProperties",
];

/// Replaces `{"$ref": "#/$defs/S", "properties": {..}}` (schemars' newtype variant of an
/// internally tagged enum: the tag beside the wrapped struct) by one object with the members of
/// both. The definition itself is closed wherever it is used on its own, and a closed `S` would
/// refuse the tag; the merged object is closed as a whole instead. Definitions that are not
/// plain structs are left referenced (and [`close_objects`] closes the pair with
/// `unevaluatedProperties`).
fn inline_partial_refs(schema: &mut Value) {
    let Some(defs) = schema.get("$defs").cloned() else {
        return;
    };
    inline_refs_in(schema, &defs, 0);
}

fn inline_refs_in(schema: &mut Value, defs: &Value, depth: usize) {
    // Generated schemas are shallow; this only bounds hostile `JsonSchema` impls.
    if depth > 128 {
        return;
    }
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties")
                && let Some(Value::String(reference)) = map.get("$ref")
                && let Some(target) = reference
                    .strip_prefix("#/$defs/")
                    .and_then(|name| defs.get(name))
                    .and_then(Value::as_object)
                && let Some(merged) = merged_object(map, target)
            {
                *map = merged;
            }
            map.values_mut()
                .for_each(|child| inline_refs_in(child, defs, depth + 1));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|child| inline_refs_in(child, defs, depth + 1)),
        _ => {}
    }
}

/// `node` (a `$ref` to `target` plus properties) as one object, or None when the two cannot be
/// merged without changing meaning.
fn merged_object(
    node: &Map<String, Value>,
    target: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let plain = target.keys().all(|key| MERGEABLE.contains(&key.as_str()))
        && target.get("type").is_none_or(|t| t == "object")
        && target
            .get("additionalProperties")
            .is_none_or(|a| a == &Value::Bool(false));
    if !plain {
        return None;
    }
    let mut merged = node.clone();
    merged.remove("$ref");
    if merged.get("type").is_some_and(|t| t != "object") {
        return None;
    }
    merged.insert("type".into(), Value::from("object"));
    let mut properties = match target.get("properties") {
        Some(Value::Object(properties)) => properties.clone(),
        None => Map::new(),
        Some(_) => return None,
    };
    let Some(Value::Object(own)) = node.get("properties") else {
        return None;
    };
    for (name, property) in own {
        if properties.insert(name.clone(), property.clone()).is_some() {
            return None;
        }
    }
    merged.insert("properties".into(), Value::Object(properties));
    let mut required: Vec<Value> = Vec::new();
    for list in [target.get("required"), node.get("required")]
        .into_iter()
        .flatten()
    {
        let Value::Array(names) = list else {
            return None;
        };
        for name in names {
            if !required.contains(name) {
                required.push(name.clone());
            }
        }
    }
    if !required.is_empty() {
        merged.insert("required".into(), Value::Array(required));
    }
    for annotation in ["description", "title"] {
        if !merged.contains_key(annotation)
            && let Some(text) = target.get(annotation)
        {
            merged.insert(annotation.into(), text.clone());
        }
    }
    Some(merged)
}

fn describe_kind(schema: &Value) -> String {
    let combinator = COMBINATORS.iter().find(|key| schema.get(**key).is_some());
    if let (Some(Value::String(t)), Some(combinator)) = (schema.get("type"), combinator) {
        return format!(
            "a JSON {t} combined with `{combinator}` (an enum flattened into the arguments), which a provider cannot take at the top level; put the enum in a named field"
        );
    }
    match schema.get("type") {
        Some(Value::String(t)) => format!("a JSON {t}"),
        Some(other) => format!("of type {other}"),
        None if schema.get("oneOf").is_some() || schema.get("anyOf").is_some() => {
            "an enum (one of several shapes)".to_owned()
        }
        None => "not a fixed JSON type".to_owned(),
    }
}

pub(crate) fn check_object_root(
    tool: &str,
    type_name: &str,
    schema: &Value,
    location: &str,
) -> Result<(), DefinitionError> {
    let is_object = schema.get("type").and_then(Value::as_str) == Some("object")
        && !COMBINATORS.iter().any(|key| schema.get(*key).is_some());
    if is_object {
        Ok(())
    } else {
        Err(DefinitionError::ArgsNotObject {
            tool: tool.to_owned(),
            type_name: type_name.to_owned(),
            found: describe_kind(schema),
            source_location: location.to_owned(),
        })
    }
}

/// Every struct field the model fills in needs a description: the arguments
/// type's own fields, and the fields of every struct it refers to.
pub(crate) fn check_field_descriptions(
    tool: &str,
    type_name: &str,
    schema: &Value,
    location: &str,
) -> Result<(), DefinitionError> {
    let missing = |owner: &str, properties: &Map<String, Value>| {
        properties
            .iter()
            .find(|(_, field)| !has_description(field))
            .map(|(field, _)| DefinitionError::UndocumentedField {
                tool: tool.to_owned(),
                type_name: owner.to_owned(),
                field: field.clone(),
                source_location: location.to_owned(),
            })
    };
    if let Some(Value::Object(properties)) = schema.get("properties")
        && let Some(error) = missing(type_name, properties)
    {
        return Err(error);
    }
    if let Some(Value::Object(defs)) = schema.get("$defs") {
        for (def_name, def) in defs {
            let plain_struct = def.get("type").and_then(Value::as_str) == Some("object")
                && !COMBINATORS.iter().any(|key| def.get(*key).is_some());
            if let (true, Some(Value::Object(properties))) = (plain_struct, def.get("properties"))
                && let Some(error) = missing(def_name, properties)
            {
                return Err(error);
            }
        }
    }
    Ok(())
}

fn has_description(field: &Value) -> bool {
    match field {
        Value::Object(map) => map
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|text| !text.trim().is_empty()),
        // `true` schemas (e.g. `serde_json::Value` fields) cannot carry one.
        _ => false,
    }
}
