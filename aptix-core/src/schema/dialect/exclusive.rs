//! Whether two branches of a `oneOf` can both match a value: the proof that
//! lets a dialect without `oneOf` read it as `anyOf`.

use std::collections::{BTreeSet, HashMap, HashSet};

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
///
/// Each call takes one of `steps`; with none left the answer is "not proven", so that
/// schemas whose required members refer back to themselves cannot make the proof
/// exponential in its depth.
pub(super) fn disjoint(
    root: &Value,
    a: &Value,
    b: &Value,
    depth: usize,
    steps: &mut usize,
) -> bool {
    if depth > 8 || *steps == 0 {
        return false;
    }
    *steps -= 1;
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
            ) && disjoint(root, sa, sb, depth + 1, steps)
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

/// True only if no JSON value can be valid against two of `branches`, proven in one pass over
/// them for the shapes of serde's enums, which can have hundreds of variants: every branch
/// limited to `const`/`enum` scalars no other branch has (unit variants); objects that all
/// require one member whose values differ (internally and adjacently tagged); closed objects
/// each requiring a member no other declares (externally tagged). `false` means "not proven
/// here": [`disjoint`] may still prove it pair by pair.
pub(super) fn all_disjoint_at_once(root: &Value, branches: &[Value]) -> bool {
    let nodes: Option<Vec<&Map<String, Value>>> = branches
        .iter()
        .map(|branch| follow_refs(root, branch).as_object())
        .collect();
    let Some(nodes) = nodes else {
        return false;
    };
    if distinct_values(nodes.iter().copied()) {
        return true;
    }
    let objects_only = nodes
        .iter()
        .all(|node| declared_types(node).is_some_and(|types| types.iter().all(|t| *t == "object")));
    if !objects_only {
        return false;
    }
    own_required_members(&nodes) || distinct_tags(root, &nodes)
}

/// Each schema admits only its `const`/`enum` scalars, and no two share one.
fn distinct_values<'v>(nodes: impl Iterator<Item = &'v Map<String, Value>>) -> bool {
    let mut seen: HashSet<(u8, String)> = HashSet::new();
    for node in nodes {
        let Some(values) = finite_values(node) else {
            return false;
        };
        let mut own: HashSet<(u8, String)> = HashSet::new();
        for value in values {
            let key = match value {
                Value::Null => (0, String::new()),
                Value::Bool(b) => (1, b.to_string()),
                // Numbers compare by value (`1` equals `1.0`); one that is not a finite
                // `f64` is left to the pairwise proof.
                Value::Number(n) => match n.as_f64() {
                    Some(f) if f.is_finite() => (2, (f + 0.0).to_bits().to_string()),
                    _ => return false,
                },
                Value::String(text) => (3, text.clone()),
                Value::Array(_) | Value::Object(_) => return false,
            };
            own.insert(key);
        }
        if !own.into_iter().all(|key| seen.insert(key)) {
            return false;
        }
    }
    true
}

/// Closed objects, each requiring a member that no other declares.
fn own_required_members(nodes: &[&Map<String, Value>]) -> bool {
    let mut declared: HashMap<&str, usize> = HashMap::new();
    for node in nodes {
        if node.get("additionalProperties") != Some(&Value::Bool(false))
            || node.contains_key("patternProperties")
        {
            return false;
        }
        for name in node
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|properties| properties.keys())
        {
            *declared.entry(name.as_str()).or_default() += 1;
        }
    }
    nodes.iter().all(|node| {
        let own = node.get("properties").and_then(Value::as_object);
        required_names(node).iter().any(|name| {
            let mine = usize::from(own.is_some_and(|p| p.contains_key(*name)));
            declared.get(name).copied().unwrap_or(0) == mine
        })
    })
}

/// Objects that all require one member (one of the first few the first branch requires)
/// whose schemas admit distinct `const`/`enum` scalars.
fn distinct_tags(root: &Value, nodes: &[&Map<String, Value>]) -> bool {
    let Some(first) = nodes.first() else {
        return true;
    };
    required_names(first).iter().take(4).any(|tag| {
        let tags: Option<Vec<&Map<String, Value>>> = nodes
            .iter()
            .map(|node| {
                if !required_names(node).contains(tag) {
                    return None;
                }
                let schema = node.get("properties")?.get(*tag)?;
                follow_refs(root, schema).as_object()
            })
            .collect();
        tags.is_some_and(|tags| distinct_values(tags.into_iter()))
    })
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
