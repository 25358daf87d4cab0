//! OpenAI strict mode (Structured Outputs): every object closed with all its
//! properties required, only the keywords and formats strict mode supports.

use serde_json::{Map, Value};

use super::DialectError;
use super::lowering::*;

/// Lowers one schema to OpenAI Structured Outputs strict mode: every object
/// closed with all its properties required, only the supported keywords.
pub(super) fn openai_schema(
    cx: &mut Lowering,
    schema: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let node = cx.schema_object(schema, path, depth)?;
    if node.contains_key("$ref") {
        return openai_ref(cx, node, path, depth);
    }
    // Alone, `unevaluatedProperties` is refused below like any unsupported keyword.
    if node.contains_key("unevaluatedProperties")
        && (node.contains_key("oneOf") || node.contains_key("anyOf"))
    {
        let distributed = openai_distribute(cx, node, path)?;
        return openai_schema(cx, &distributed, path, depth + 1);
    }
    // Strict mode constrains generation by the schema; a schema that names no
    // type leaves the value open, which strict mode cannot express.
    if !["type", "anyOf", "oneOf", "enum", "const"]
        .iter()
        .any(|k| node.contains_key(*k))
    {
        return Err(cx.error(
            path,
            "the schema declares no `type` (nor `enum`, `const` or `anyOf`), so it accepts any value, which OpenAI strict mode cannot express",
        ));
    }
    let types = match node.get("type") {
        Some(value) => parse_types(cx, value, &pointer_push(path, "type"))?,
        None => Vec::new(),
    };
    let mut out = Map::new();
    for (keyword, value) in node {
        let at = pointer_push(path, keyword);
        match keyword.as_str() {
            "type" | "enum" | "const" => {
                if keyword == "enum" {
                    expect_array(cx, value, &at)?;
                }
                out.insert(keyword.clone(), value.clone());
            }
            "description" | "title" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            k if DROPPED_ANNOTATIONS.contains(&k) => {}
            "$schema" if path.is_empty() => {}
            "$defs" if path.is_empty() => {
                let Value::Object(defs) = value else {
                    return Err(cx.malformed(&at, "an object of schemas"));
                };
                let mut lowered = Map::new();
                for (name, def) in defs {
                    let def_path = pointer_push(&at, name);
                    cx.open.push(def_path.clone());
                    let def = openai_schema(cx, def, &def_path, depth + 1);
                    cx.open.pop();
                    lowered.insert(name.clone(), def?);
                }
                out.insert(keyword.clone(), Value::Object(lowered));
            }
            // Handled with the object as a whole, below.
            "properties" | "required" | "additionalProperties" => {}
            "items" => {
                if value.is_array() {
                    return Err(cx.tuple_items(&at));
                }
                out.insert(keyword.clone(), openai_schema(cx, value, &at, depth + 1)?);
            }
            "anyOf" => {
                let lowered = openai_branches(cx, value, &at, depth)?;
                out.insert(keyword.clone(), lowered);
            }
            "oneOf" => {
                if node.contains_key("anyOf") {
                    return Err(cx.one_of_next_to_any_of(&at));
                }
                let branches = expect_array(cx, value, &at)?;
                cx.check_exclusive(branches, &at)?;
                let lowered = openai_branches(cx, value, &at, depth)?;
                out.insert("anyOf".into(), lowered);
            }
            "pattern" => {
                out.insert(keyword.clone(), expect_string(cx, value, &at)?.into());
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                out.insert(keyword.clone(), expect_number(cx, value, &at)?);
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" => {
                out.insert(keyword.clone(), expect_count(cx, value, &at)?);
            }
            "format" => {
                let format = expect_string(cx, value, &at)?;
                if OPENAI_FORMATS.contains(&format) {
                    out.insert(keyword.clone(), value.clone());
                } else if !NUMERIC_FORMATS.contains(&format) {
                    return Err(cx.error(
                        &at,
                        format!(
                            "OpenAI strict mode does not support format `{format}` (only {})",
                            OPENAI_FORMATS.join(", ")
                        ),
                    ));
                }
            }
            "uniqueItems" if value == &Value::Bool(false) => {}
            _ => return Err(cx.refuse(&at, keyword)),
        }
    }
    if types.contains(&"array") && !node.contains_key("items") {
        return Err(cx.error(
            path,
            "an array without `items` accepts any elements, which OpenAI strict mode cannot express",
        ));
    }
    let object_like = types.contains(&"object")
        || ["properties", "required", "additionalProperties"]
            .iter()
            .any(|k| node.contains_key(*k));
    if object_like {
        openai_object(cx, node, path, depth, &mut out)?;
    }
    Ok(Value::Object(out))
}

/// Keywords of a branch (or of the object around it) that [`openai_distribute`] can merge.
pub(super) const DISTRIBUTABLE: [&str; 5] =
    ["type", "properties", "required", "description", "title"];

/// Strict mode has no `unevaluatedProperties`. The canonical schema uses it for an object beside
/// `oneOf`/`anyOf` (a flattened enum), closed as a whole; the same meaning is one closed object
/// per branch, with the outer members added to each: `{"oneOf": [{outer + branch, closed}, ..]}`.
/// Anything that does not merge that simply is refused.
pub(super) fn openai_distribute(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
) -> Result<Value, DialectError> {
    let at = pointer_push(path, "unevaluatedProperties");
    // The outer members are written out once per branch.
    let outer = ["properties", "required"]
        .iter()
        .filter_map(|keyword| node.get(*keyword))
        .map(json_size)
        .sum::<usize>();
    let branches = ["oneOf", "anyOf"]
        .iter()
        .filter_map(|keyword| node.get(*keyword).and_then(Value::as_array))
        .map(Vec::len)
        .sum::<usize>();
    cx.copy(outer.saturating_mul(branches), &at)?;
    let cannot = |reason: &str| {
        cx.error(
            &at,
            format!(
                "OpenAI strict mode has no `unevaluatedProperties`, and this object cannot be rewritten as closed objects: {reason}"
            ),
        )
    };
    if node.get("unevaluatedProperties") != Some(&Value::Bool(false)) {
        return Err(cannot("only `false` can be rewritten"));
    }
    let combinators: Vec<&str> = ["oneOf", "anyOf"]
        .into_iter()
        .filter(|k| node.contains_key(*k))
        .collect();
    let [combinator] = combinators.as_slice() else {
        return Err(cannot(
            "it needs exactly one `oneOf` or `anyOf` beside its properties",
        ));
    };
    let mergeable = |part: &Map<String, Value>, extra: &[&str]| {
        part.iter().all(|(key, value)| {
            (DISTRIBUTABLE.contains(&key.as_str())
                || DROPPED_ANNOTATIONS.contains(&key.as_str())
                || extra.contains(&key.as_str()))
                && (key != "type" || value == "object")
        })
    };
    if !mergeable(node, &["unevaluatedProperties", combinator]) {
        return Err(cannot(
            "it has keywords other than properties and one combinator",
        ));
    }
    let Some(Value::Array(branches)) = node.get(*combinator) else {
        return Err(cx.malformed(&pointer_push(path, combinator), "an array of schemas"));
    };

    let mut merged_branches = Vec::with_capacity(branches.len());
    for branch in branches {
        let Some(branch) = branch.as_object().filter(|b| mergeable(b, &[])) else {
            return Err(cannot("a branch is not a plain object"));
        };
        let mut merged = Map::new();
        merged.insert("type".into(), Value::from("object"));
        let mut properties = Map::new();
        let mut required: Vec<Value> = Vec::new();
        for part in [node, branch] {
            if let Some(Value::Object(own)) = part.get("properties") {
                for (name, schema) in own {
                    if properties.insert(name.clone(), schema.clone()).is_some() {
                        return Err(cannot(&format!(
                            "the member `{name}` is declared both outside and in a branch"
                        )));
                    }
                }
            }
            if let Some(Value::Array(names)) = part.get("required") {
                for name in names {
                    if !required.contains(name) {
                        required.push(name.clone());
                    }
                }
            }
        }
        for annotation in ["description", "title"] {
            if let Some(text) = branch.get(annotation) {
                merged.insert(annotation.into(), text.clone());
            }
        }
        merged.insert("properties".into(), Value::Object(properties));
        merged.insert("required".into(), Value::Array(required));
        merged.insert("additionalProperties".into(), Value::Bool(false));
        merged_branches.push(Value::Object(merged));
    }
    let mut out = Map::new();
    for annotation in ["description", "title"] {
        if let Some(text) = node.get(annotation) {
            out.insert(annotation.into(), text.clone());
        }
    }
    out.insert((*combinator).into(), Value::Array(merged_branches));
    Ok(Value::Object(out))
}

pub(super) fn openai_branches(
    cx: &mut Lowering,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let branches = expect_array(cx, value, path)?;
    let mut lowered = Vec::with_capacity(branches.len());
    for (i, branch) in branches.iter().enumerate() {
        lowered.push(openai_schema(
            cx,
            branch,
            &pointer_push(path, &i.to_string()),
            depth + 1,
        )?);
    }
    Ok(Value::Array(lowered))
}

/// Strict mode requires `additionalProperties: false` and every property in
/// `required`. A property the canonical schema leaves optional is therefore
/// made nullable, so the model can still say "no value".
pub(super) fn openai_object(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), DialectError> {
    let empty = Map::new();
    let properties = match node.get("properties") {
        None => &empty,
        Some(Value::Object(properties)) => properties,
        Some(_) => {
            return Err(cx.malformed(&pointer_push(path, "properties"), "an object of schemas"));
        }
    };
    match node.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(cx.error(
                &pointer_push(path, "additionalProperties"),
                "OpenAI strict mode requires `additionalProperties: false`; an open object or map cannot be strict",
            ));
        }
        // An object that declares nothing about its properties is what
        // schemars emits for a struct without fields (a tool without
        // arguments): no name in it means anything, so closing it loses
        // nothing. Open maps say so explicitly (`additionalProperties: true`
        // or a schema) and are refused above.
        None if !node.contains_key("properties") => {}
        None => {
            return Err(cx.error(
                path,
                "the object does not set `additionalProperties: false`, so it accepts extra properties; OpenAI strict mode requires closed objects, and closing it would change its meaning",
            ));
        }
    }
    let required = parse_required(cx, node, properties, path)?;
    let properties_path = pointer_push(path, "properties");
    let mut lowered = Map::new();
    for (name, schema) in properties {
        let at = pointer_push(&properties_path, name);
        let property = if required.contains(name.as_str()) {
            openai_schema(cx, schema, &at, depth + 1)?
        } else {
            match schema.as_object().filter(|node| node.contains_key("$ref")) {
                // `{"anyOf":[{"$ref":..},{"type":"null"}]}` keeps the reference
                // instead of inlining it to carry the annotations.
                Some(reference) => openai_optional_ref(cx, reference, &at, depth + 1)?,
                None => openai_nullable(openai_schema(cx, schema, &at, depth + 1)?),
            }
        };
        lowered.insert(name.clone(), property);
    }
    let mut names: Vec<&String> = properties.keys().collect();
    names.sort();
    out.insert(
        "required".into(),
        Value::Array(names.into_iter().map(|n| Value::from(n.as_str())).collect()),
    );
    out.insert("properties".into(), Value::Object(lowered));
    out.insert("additionalProperties".into(), Value::Bool(false));
    Ok(())
}

/// The parts of a `$ref` node that OpenAI strict mode can carry: the
/// reference, its target and pointer, and its annotations.
pub(super) struct OpenAiRef<'v> {
    reference: String,
    target: &'v Value,
    pointer: String,
    annotations: Map<String, Value>,
}

pub(super) fn openai_ref_parts<'v>(
    cx: &Lowering<'v>,
    node: &Map<String, Value>,
    path: &str,
) -> Result<OpenAiRef<'v>, DialectError> {
    let at = pointer_push(path, "$ref");
    let reference = match node.get("$ref") {
        Some(Value::String(reference)) => reference.clone(),
        _ => return Err(cx.malformed(&at, "a reference string")),
    };
    let (target, pointer) = resolve_ref(cx.root, &reference).map_err(|r| cx.error(&at, r))?;
    // The output keeps `$defs` in place but may restructure everything else
    // (nullable wrappers, `oneOf` to `anyOf`), so only the root and whole
    // definitions stay addressable.
    let segments: Vec<&str> = pointer.split('/').collect();
    if !(pointer.is_empty() || (segments.len() == 3 && segments[1] == "$defs")) {
        return Err(cx.error(
            &at,
            format!(
                "`{reference}` points inside the schema; the OpenAI strict lowering keeps only `#` and `#/$defs/<name>` addressable"
            ),
        ));
    }
    let annotations = cx.ref_annotations(node, path)?;
    Ok(OpenAiRef {
        reference,
        target,
        pointer,
        annotations,
    })
}

/// A required `$ref`. Strict mode rejects keywords beside `$ref` ("$ref
/// cannot have keywords {'description'}"), so a reference that carries a
/// description or title is replaced by the lowered definition with those
/// annotations on top, as OpenAI's own SDK does. A reference back into a
/// schema being lowered cannot be inlined; it loses its annotations instead,
/// which changes nothing that is validated.
pub(super) fn openai_ref(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    let parts = openai_ref_parts(cx, node, path)?;
    let bare = || {
        let mut bare = Map::new();
        bare.insert("$ref".into(), Value::from(parts.reference.as_str()));
        Value::Object(bare)
    };
    if parts.annotations.is_empty() || cx.open.contains(&parts.pointer) {
        return Ok(bare());
    }
    // Past the bound on copies (see `Lowering::try_copy`), the annotations are dropped as for
    // a recursive reference: a large definition inlined for every description it is given
    // would make the tool spec many times its schema.
    let size = cx.size_of(&parts.pointer, parts.target);
    if !cx.try_copy(size) {
        tracing::debug!(
            path,
            reference = parts.reference.as_str(),
            "OpenAI strict lowering: the bound on copies is reached; the description beside this `$ref` is dropped instead of inlining its definition"
        );
        return Ok(bare());
    }
    cx.expand(&pointer_push(path, "$ref"))?;
    cx.open.push(parts.pointer.clone());
    let lowered = openai_schema(cx, parts.target, &parts.pointer, depth + 1);
    cx.open.pop();
    let Value::Object(mut inlined) = lowered? else {
        return Ok(bare());
    };
    if inlined.contains_key("$ref") {
        // The definition is itself a bare reference: carry the annotations
        // one step further.
        inlined.extend(parts.annotations);
        return openai_ref(cx, &inlined, &parts.pointer, depth + 1);
    }
    inlined.extend(parts.annotations);
    Ok(Value::Object(inlined))
}

/// An optional `$ref` property: `{"anyOf":[{"$ref":..},{"type":"null"}]}`
/// with the annotations on the `anyOf`, where strict mode accepts them.
pub(super) fn openai_optional_ref(
    cx: &mut Lowering,
    node: &Map<String, Value>,
    path: &str,
    depth: usize,
) -> Result<Value, DialectError> {
    if depth > MAX_DEPTH {
        return Err(cx.error(
            path,
            format!("schema is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    let parts = openai_ref_parts(cx, node, path)?;
    let mut reference = Map::new();
    reference.insert("$ref".into(), Value::from(parts.reference));
    let mut out = parts.annotations;
    out.insert(
        "anyOf".into(),
        Value::Array(vec![Value::Object(reference), null_schema()]),
    );
    Ok(Value::Object(out))
}

pub(super) fn null_schema() -> Value {
    let mut null = Map::new();
    null.insert("type".into(), Value::from("null"));
    Value::Object(null)
}

/// Makes a lowered schema also accept `null`, in the form strict mode
/// documents: `"type": [T, "null"]` (with `null` added to an `enum`, which
/// would otherwise still reject it), a `null` branch on an `anyOf`, or an
/// `anyOf` wrapper for anything else (`$ref`, `const`, ...).
pub(super) fn openai_nullable(schema: Value) -> Value {
    let Value::Object(mut node) = schema else {
        return schema;
    };
    if accepts_null(&node) {
        return Value::Object(node);
    }
    let plain_type = node.contains_key("type")
        && !["$ref", "anyOf", "const"]
            .iter()
            .any(|k| node.contains_key(*k));
    if plain_type {
        match node.get_mut("type") {
            Some(Value::Array(names)) => names.push(Value::from("null")),
            Some(name) => *name = Value::Array(vec![name.take(), Value::from("null")]),
            None => {}
        }
        if let Some(Value::Array(values)) = node.get_mut("enum") {
            values.push(Value::Null);
        }
        return Value::Object(node);
    }
    let only_any_of = node
        .keys()
        .all(|k| k == "anyOf" || KEPT_ANNOTATIONS.contains(&k.as_str()));
    if only_any_of && let Some(Value::Array(branches)) = node.get_mut("anyOf") {
        branches.push(null_schema());
        return Value::Object(node);
    }
    let mut wrapper = Map::new();
    for annotation in KEPT_ANNOTATIONS {
        if let Some(value) = node.remove(annotation) {
            wrapper.insert(annotation.into(), value);
        }
    }
    wrapper.insert(
        "anyOf".into(),
        Value::Array(vec![Value::Object(node), null_schema()]),
    );
    Value::Object(wrapper)
}

/// Whether a lowered schema certainly accepts `null` (false when unsure,
/// which only costs a redundant `null` branch).
pub(super) fn accepts_null(node: &Map<String, Value>) -> bool {
    if node.contains_key("$ref") {
        return false;
    }
    let mut constrained = false;
    if let Some(types) = node.get("type") {
        constrained = true;
        let null = match types {
            Value::String(name) => name == "null",
            Value::Array(names) => names.iter().any(|n| n == "null"),
            _ => false,
        };
        if !null {
            return false;
        }
    }
    if let Some(values) = node.get("enum") {
        constrained = true;
        if !values
            .as_array()
            .is_some_and(|v| v.iter().any(Value::is_null))
        {
            return false;
        }
    }
    if let Some(value) = node.get("const") {
        constrained = true;
        if !value.is_null() {
            return false;
        }
    }
    if let Some(branches) = node.get("anyOf") {
        constrained = true;
        let any = branches.as_array().is_some_and(|branches| {
            branches
                .iter()
                .any(|b| b.as_object().is_some_and(accepts_null))
        });
        if !any {
            return false;
        }
    }
    constrained
}

/// The parameters lowered to strict mode. Strict mode wants a plain object
/// at the root ("root objects must not be anyOf").
pub(super) fn lower(cx: &mut Lowering, root: &Map<String, Value>) -> Result<Value, DialectError> {
    for keyword in ["anyOf", "oneOf"] {
        if root.contains_key(keyword) {
            return Err(cx.error(
                &pointer_push("", keyword),
                format!(
                    "OpenAI strict mode does not accept `{keyword}` at the root of `parameters`"
                ),
            ));
        }
    }
    let parameters = cx.root;
    openai_schema(cx, parameters, "", 0)
}

/// The flat function tool of OpenAI's documentation (Responses API).
pub(super) fn provider_tool(
    name: &str,
    description: &str,
    parameters: Value,
    strict: bool,
) -> Value {
    let mut tool = serde_json::json!({
        "type": "function",
        "name": name,
        "description": description,
        "parameters": parameters,
    });
    if strict && let Some(fields) = tool.as_object_mut() {
        fields.insert("strict".into(), Value::Bool(true));
    }
    tool
}
