//! Whether two branches of a `oneOf` can both match a value: the proof that
//! lets a dialect without `oneOf` read it as `anyOf`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::lowering::{is_bare_ref, resolve_ref};

/// True only if no JSON value can be valid against both `a` and `b`.
///
/// Sound but incomplete: each schema is over-approximated by the few
/// keywords examined (ignoring a keyword only widens the set of values
/// considered), so `true` is a proof and `false` means "not proven". It
/// covers what serde's enum representations produce: distinct types,
/// distinct `const`/`enum` values, a shared required tag property with
/// disjoint values (internally and adjacently tagged), and a required key
/// that the other closed object forbids (externally tagged).
pub(super) fn disjoint(root: &Value, a: &Value, b: &Value, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    let a = follow_refs(root, a);
    let b = follow_refs(root, b);
    let (a, b) = match (a, b) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return true,
        (Value::Object(a), Value::Object(b)) => (a, b),
        _ => return false,
    };
    let a_types = declared_types(a);
    let b_types = declared_types(b);
    if let (Some(ta), Some(tb)) = (&a_types, &b_types)
        && !ta.iter().any(|x| tb.iter().any(|y| types_overlap(x, y)))
    {
        return true;
    }
    let a_values = finite_values(a);
    let b_values = finite_values(b);
    match (&a_values, &b_values) {
        (Some(va), Some(vb)) => {
            if va.iter().all(|x| vb.iter().all(|y| !json_equal(x, y))) {
                return true;
            }
        }
        (Some(values), None) => {
            if let Some(types) = &b_types
                && values.iter().all(|v| !types.iter().any(|t| has_type(v, t)))
            {
                return true;
            }
        }
        (None, Some(values)) => {
            if let Some(types) = &a_types
                && values.iter().all(|v| !types.iter().any(|t| has_type(v, t)))
            {
                return true;
            }
        }
        (None, None) => {}
    }
    // Object rules need every common value to be an object, which holds as
    // soon as either side admits only objects.
    let objects_only = |types: &Option<Vec<&str>>| {
        types
            .as_ref()
            .is_some_and(|types| types.iter().all(|t| *t == "object"))
    };
    if objects_only(&a_types) || objects_only(&b_types) {
        let a_required = required_names(a);
        let b_required = required_names(b);
        let a_properties = a.get("properties").and_then(Value::as_object);
        let b_properties = b.get("properties").and_then(Value::as_object);
        for name in a_required.intersection(&b_required) {
            if let (Some(sa), Some(sb)) = (
                a_properties.and_then(|p| p.get(*name)),
                b_properties.and_then(|p| p.get(*name)),
            ) && disjoint(root, sa, sb, depth + 1)
            {
                return true;
            }
        }
        if requires_forbidden(&a_required, b) || requires_forbidden(&b_required, a) {
            return true;
        }
    }
    false
}

/// Follows bare `$ref`s (a few hops at most) so that branches written as
/// references can be examined.
pub(super) fn follow_refs<'r>(root: &'r Value, mut schema: &'r Value) -> &'r Value {
    for _ in 0..16 {
        let Some(node) = schema.as_object().filter(|node| is_bare_ref(node)) else {
            return schema;
        };
        match node
            .get("$ref")
            .and_then(Value::as_str)
            .map(|r| resolve_ref(root, r))
        {
            Some(Ok((target, _))) => schema = target,
            _ => return schema,
        }
    }
    schema
}

pub(super) fn declared_types(node: &Map<String, Value>) -> Option<Vec<&str>> {
    match node.get("type")? {
        Value::String(name) => Some(vec![name.as_str()]),
        Value::Array(names) if !names.is_empty() => names.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

pub(super) fn types_overlap(a: &str, b: &str) -> bool {
    a == b || matches!((a, b), ("integer", "number") | ("number", "integer"))
}

/// The values a schema is limited to by `const` or `enum`, if it is.
pub(super) fn finite_values(node: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(value) = node.get("const") {
        return Some(vec![value]);
    }
    match node.get("enum")? {
        Value::Array(values) => Some(values.iter().collect()),
        _ => None,
    }
}

/// Whether `value` is an instance of JSON Schema type `name` (unknown names
/// match, to stay conservative).
pub(super) fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

/// JSON Schema equality: numbers compare by value (`1` equals `1.0`).
/// Errs towards "equal", which only ever weakens a disjointness proof.
pub(super) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

pub(super) fn required_names(node: &Map<String, Value>) -> BTreeSet<&str> {
    match node.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => BTreeSet::new(),
    }
}

/// Whether `closed` rejects every object that has one of `required`: it
/// allows no additional properties and declares none of them.
pub(super) fn requires_forbidden(required: &BTreeSet<&str>, closed: &Map<String, Value>) -> bool {
    if closed.get("additionalProperties") != Some(&Value::Bool(false))
        || closed.contains_key("patternProperties")
    {
        return false;
    }
    let declared = closed.get("properties").and_then(Value::as_object);
    required
        .iter()
        .any(|name| !declared.is_some_and(|p| p.contains_key(*name)))
}
