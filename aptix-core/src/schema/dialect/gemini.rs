//! Gemini's `Schema`, an OpenAPI 3.0 subset: no `$ref`, nullability as
//! `nullable`, string-only enums.

use serde_json::{Map, Value};

use super::DialectError;
use super::lowering::*;

/// Lowers one schema to Gemini's `Schema` (an OpenAPI 3.0 subset): no
/// `$ref`, nullability as `nullable`, string-only enums.
pub(super) fn gemini_schema(
    cx: &mut Lowering,
    schema: &Value,
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, DialectError> {
    let node = cx.schema_object(schema, path, depth)?;
    if node.contains_key("$ref") {
        return gemini_ref(cx, node, path, depth);
    }
    let branches_keyword = match (node.contains_key("anyOf"), node.contains_key("oneOf")) {
        (true, true) => return Err(cx.one_of_next_to_any_of(&pointer_push(path, "oneOf"))),
        (true, false) => Some("anyOf"),
        (false, true) => Some("oneOf"),
        (false, false) => None,
    };
    if let Some(keyword) = branches_keyword {
        let at = pointer_push(path, keyword);
        let branches = expect_array(cx, node.get(keyword).unwrap_or(&Value::Null), &at)?;
        if keyword == "oneOf" {
            cx.check_exclusive(branches, &at)?;
        }
        if branches.iter().any(is_null_branch) {
            return gemini_nullable_branches(cx, node, keyword, branches, path, depth);
        }
    }

    let types = match node.get("type") {
        Some(value) => Some(parse_types(cx, value, &pointer_push(path, "type"))?),
        None => None,
    };
    let null_typed = types.as_ref().is_some_and(|t| t.contains(&"null"));
    let mut non_null_types = types.iter().flatten().copied().filter(|t| *t != "null");
    let single_type = non_null_types.next();
    if non_null_types.next().is_some() {
        return Err(cx.error(
            &pointer_push(path, "type"),
            "Gemini has no type unions other than `[T, \"null\"]`",
        ));
    }
    if types.is_some() && single_type.is_none() {
        return Err(cx.error(
            &pointer_push(path, "type"),
            "Gemini cannot express a schema that accepts only `null`",
        ));
    }

    // `const` becomes a one-value `enum`; Gemini enums hold strings only, and
    // a `null` among the values means "nullable".
    let values = match (node.get("const"), node.get("enum")) {
        (Some(_), Some(_)) => {
            return Err(cx.error(
                &pointer_push(path, "const"),
                "Gemini cannot express `const` next to `enum`",
            ));
        }
        (Some(value), None) => Some(vec![(pointer_push(path, "const"), value)]),
        (None, Some(values)) => {
            let at = pointer_push(path, "enum");
            let values = expect_array(cx, values, &at)?;
            Some(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (pointer_push(&at, &i.to_string()), v))
                    .collect(),
            )
        }
        (None, None) => None,
    };
    let mut enum_strings = Vec::new();
    let mut enum_null = false;
    for (at, value) in values.iter().flatten() {
        match value {
            Value::Null => enum_null = true,
            Value::String(s) => enum_strings.push(Value::from(s.as_str())),
            _ => {
                return Err(cx.error(
                    at,
                    "Gemini enums hold strings only, and this value is not a string",
                ));
            }
        }
    }
    if values.is_some() && enum_strings.is_empty() {
        return Err(cx.error(
            path,
            "Gemini cannot express a schema that accepts only `null`",
        ));
    }
    let out_type = match (single_type, values.is_some()) {
        (Some(t), _) => Some(t),
        // Every allowed non-null value is a string.
        (None, true) => Some("string"),
        (None, false) if branches_keyword.is_some() => None,
        (None, false) => {
            return Err(cx.error(
                path,
                "the schema declares no `type`, so it accepts any value, which Gemini cannot express",
            ));
        }
    };
    if values.is_some() && out_type != Some("string") {
        return Err(cx.error(
            path,
            "Gemini enums hold strings only, and this schema's type is not `string`",
        ));
    }
    let nullable = (types.is_none() || null_typed)
        && (values.is_none() || enum_null)
        && (null_typed || enum_null);

    let mut out = Map::new();
    if let Some(t) = out_type {
        out.insert("type".into(), Value::from(t));
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    if values.is_some() {
        out.insert("enum".into(), Value::Array(enum_strings));
    }
    for (keyword, value) in node {
        let at = pointer_push(path, keyword);
        match keyword.as_str() {
            "type" | "enum" | "const" => {}
            "description" | "title" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            k if DROPPED_ANNOTATIONS.contains(&k) => {}
            "$schema" if path.is_empty() => {}
            // Every reference is inlined, so definitions have no use left.
            "$defs" => {}
            "properties" => {
                let Value::Object(properties) = value else {
                    return Err(cx.malformed(&at, "an object of schemas"));
                };
                let mut lowered = Map::new();
                for (name, schema) in properties {
                    let property = gemini_schema(cx, schema, &pointer_push(&at, name), depth + 1)?;
                    lowered.insert(name.clone(), Value::Object(property));
                }
                out.insert(keyword.clone(), Value::Object(lowered));
            }
            "required" => {
                let empty = Map::new();
                let properties = node
                    .get("properties")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                parse_required(cx, node, properties, path)?;
                out.insert(keyword.clone(), value.clone());
            }
            // Gemini has no `additionalProperties`; `false` is dropped, and the
            // executor still rejects extra properties against the canonical
            // schema. An open map cannot be expressed at all. The same holds
            // for `unevaluatedProperties: false` (an object beside `oneOf`).
            "additionalProperties" | "unevaluatedProperties" => {
                if value != &Value::Bool(false) {
                    return Err(cx.error(
                        &at,
                        format!("Gemini has no `{keyword}`, so an open object or map cannot be expressed"),
                    ));
                }
            }
            "items" => {
                if value.is_array() {
                    return Err(cx.tuple_items(&at));
                }
                let items = gemini_schema(cx, value, &at, depth + 1)?;
                out.insert(keyword.clone(), Value::Object(items));
            }
            "anyOf" | "oneOf" => {
                let branches = expect_array(cx, value, &at)?;
                let mut lowered = Vec::with_capacity(branches.len());
                for (i, branch) in branches.iter().enumerate() {
                    let branch =
                        gemini_schema(cx, branch, &pointer_push(&at, &i.to_string()), depth + 1)?;
                    lowered.push(Value::Object(branch));
                }
                out.insert("anyOf".into(), Value::Array(lowered));
            }
            "pattern" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            "minimum" | "maximum" => {
                out.insert(keyword.clone(), expect_number(cx, value, &at)?);
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" => {
                out.insert(keyword.clone(), expect_count(cx, value, &at)?);
            }
            // Gemini knows a handful of formats and is not documented to accept
            // others. Draft 2020-12 makes `format` an annotation unless a
            // validator opts into asserting it, so dropping the rest changes
            // no validation.
            "format" => {
                let format = expect_string(cx, value, &at)?;
                if GEMINI_FORMATS.contains(&format) {
                    out.insert(keyword.clone(), value.clone());
                }
            }
            "propertyOrdering" => {
                let names = expect_array(cx, value, &at)?;
                if !names.iter().all(Value::is_string) {
                    return Err(cx.malformed(&at, "an array of property names"));
                }
                out.insert(keyword.clone(), value.clone());
            }
            "uniqueItems" if value == &Value::Bool(false) => {}
            _ => return Err(cx.refuse(&at, keyword)),
        }
    }
    if out_type == Some("array") && !node.contains_key("items") {
        return Err(cx.error(
            path,
            "an array without `items` accepts any elements, which Gemini cannot express",
        ));
    }
    Ok(out)
}

/// Whether a branch is exactly `{"type": "null"}` (annotations aside).
pub(super) fn is_null_branch(branch: &Value) -> bool {
    let Some(node) = branch.as_object() else {
        return false;
    };
    let null_type = match node.get("type") {
        Some(Value::String(name)) => name == "null",
        Some(Value::Array(names)) => names.len() == 1 && names[0] == "null",
        _ => false,
    };
    null_type && node.keys().all(|k| k == "type" || is_annotation(k))
}

/// `anyOf` (or exclusive `oneOf`) with `{"type":"null"}` branches: Gemini has
/// no null type, so the null branches become `nullable: true` on the others.
/// With one other branch (`Option<T>` in schemars) that branch is the result.
pub(super) fn gemini_nullable_branches(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    keyword: &str,
    branches: &[Value],
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, DialectError> {
    let at = pointer_push(path, keyword);
    if let Some(sibling) = node.keys().find(|k| *k != keyword && !is_annotation(k)) {
        return Err(cx.error(
            &pointer_push(path, sibling),
            format!("Gemini cannot express `{sibling}` next to a nullable `{keyword}`"),
        ));
    }
    let mut lowered = Vec::new();
    for (i, branch) in branches.iter().enumerate() {
        if is_null_branch(branch) {
            continue;
        }
        let branch_path = pointer_push(&at, &i.to_string());
        let mut branch = gemini_schema(cx, branch, &branch_path, depth + 1)?;
        gemini_set_nullable(cx, &mut branch, &branch_path)?;
        lowered.push(branch);
    }
    let mut out = if lowered.len() == 1 {
        lowered.pop().unwrap_or_default()
    } else if lowered.is_empty() {
        return Err(cx.error(
            &at,
            "Gemini cannot express a schema that accepts only `null`",
        ));
    } else {
        let mut out = Map::new();
        out.insert(
            "anyOf".into(),
            Value::Array(lowered.into_iter().map(Value::Object).collect()),
        );
        out
    };
    // The annotations of the `anyOf` describe the property; they take
    // precedence over the branch's own.
    for annotation in KEPT_ANNOTATIONS {
        if let Some(value) = node.get(annotation) {
            let value = expect_string(cx, value, &pointer_push(path, annotation))?;
            out.insert(annotation.into(), value.into());
        }
    }
    Ok(out)
}

/// Adds `nullable: true` to a lowered schema, pushing it into the branches
/// of a bare `anyOf` (`anyOf[A∪null, B∪null]` is `anyOf[A, B] ∪ null`).
pub(super) fn gemini_set_nullable(
    cx: &Lowering,
    node: &mut Map<String, Value>,
    path: &str,
) -> Result<(), DialectError> {
    let typed = node.contains_key("type") || node.contains_key("enum");
    match node.get_mut("anyOf") {
        Some(Value::Array(branches)) if !typed => {
            for branch in branches {
                if let Value::Object(branch) = branch {
                    gemini_set_nullable(cx, branch, path)?;
                }
            }
            Ok(())
        }
        Some(_) => Err(cx.error(
            path,
            "Gemini cannot make a schema that combines `type` and `anyOf` nullable",
        )),
        None => {
            node.insert("nullable".into(), Value::Bool(true));
            Ok(())
        }
    }
}

/// Gemini resolves no `$ref`: the definition is inlined, with the
/// reference's annotations on top. A recursive reference cannot be inlined.
pub(super) fn gemini_ref(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, DialectError> {
    let at = pointer_push(path, "$ref");
    let Some(Value::String(reference)) = node.get("$ref") else {
        return Err(cx.malformed(&at, "a reference string"));
    };
    let (target, pointer) = resolve_ref(cx.root, reference).map_err(|r| cx.error(&at, r))?;
    let annotations = cx.ref_annotations(node, path)?;
    if cx.open.contains(&pointer) {
        return Err(cx.error(
            &at,
            format!(
                "`{reference}` is recursive (it refers back into `#{pointer}`): Gemini does not support `$ref`, and a recursive schema cannot be inlined"
            ),
        ));
    }
    let size = cx.size_of(&pointer, target);
    cx.copy(size, &at)?;
    cx.expand(&at)?;
    cx.open.push(pointer.clone());
    let lowered = gemini_schema(cx, target, &pointer, depth + 1);
    cx.open.pop();
    let mut lowered = lowered?;
    lowered.extend(annotations);
    Ok(lowered)
}

/// The parameters lowered to Gemini's `Schema`.
pub(super) fn lower(cx: &mut Lowering) -> Result<Value, DialectError> {
    let parameters = cx.root;
    gemini_schema(cx, parameters, "", 0).map(Value::Object)
}

/// A Gemini function declaration. `parameters` is left out for a tool
/// without properties: Gemini rejects an `OBJECT` schema whose `properties`
/// is empty.
pub(super) fn provider_tool(name: &str, description: &str, parameters: Value) -> Value {
    let has_properties = parameters
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| !properties.is_empty());
    let mut tool = serde_json::json!({ "name": name, "description": description });
    if has_properties && let Some(fields) = tool.as_object_mut() {
        fields.insert("parameters".into(), parameters);
    }
    tool
}
