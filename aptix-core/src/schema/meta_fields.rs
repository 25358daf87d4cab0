//! The schema-first model's meta fields: members of a call that are not
//! parameters of the tool but say something about the call itself.
//!
//! The schema-first specification names them with a leading underscore
//! (`_tool`, `_activity`, `_reasoningForCall`, `_output`) and reserves that
//! prefix: any member without one is a parameter. Aptix keeps the rule, so
//! a parameter can never be mistaken for a meta field: a definition whose
//! arguments have a top-level member starting with `_` is refused
//! (`check_parameter_names`), at compile time for a struct the macro sees.
//!
//! A definition's `parameters` never contain meta fields: what an
//! application reads stays the same whether a tool runs latent or through
//! an activity. They are added to what is *offered* to a model
//! ([`with_output`]) and taken out of a call before its arguments are
//! validated.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::{DefinitionError, close_objects};

/// The tool a composed call is for (a `const` of the tool's name).
pub const TOOL: &str = "_tool";
/// How a composed call is executed: the name of the activity that computes
/// its result (a tool's own code counts as the activity of its name), or
/// `""` when the model gives the result itself (latent); see
/// [`ToolEntry::call_activity`](crate::catalog::ToolEntry::call_activity).
pub const ACTIVITY: &str = "_activity";
/// Why the model made the call; optional, asked for with `ask_reasoning`.
pub const REASONING: &str = "_reasoningForCall";
/// The result of a latent tool, given by the model in its own call.
pub const OUTPUT: &str = "_output";

/// The description of `_output` in an offered schema: the model must know
/// that it answers this part itself.
const OUTPUT_DESCRIPTION: &str = "The result of this call. No code computes it: work it out yourself and give it here, in exactly this shape.";

/// Where a member goes when a schema or a call is written: the meta fields
/// first, in the order the seed composes them, then the parameters, then
/// `_output`, which is the call's result.
fn rank(key: &str) -> u8 {
    match key {
        TOOL => 0,
        ACTIVITY => 1,
        REASONING => 2,
        OUTPUT => 4,
        _ => 3,
    }
}

/// A JSON value written with the meta fields in call order: in every
/// object, `_tool`, `_activity` and `_reasoningForCall` come first, the
/// other members next (in the value's own order, which is sorted), and
/// `_output` last; every `required` list of names is ordered the same way,
/// so that it reads in the order of the `properties` beside it.
///
/// `serde_json` keeps object members sorted, which would put `_activity`
/// before `_tool` and `_output` before the parameters; and a constrained
/// decoder (llama.cpp's grammar, OpenAI's strict structured outputs) makes
/// the model write members in the order the schema lists them. So the
/// schema must be *sent* in call order: a model then names the tool and
/// says why before it fills the parameters, and works out a latent result
/// last. Aptix's HTTP adapters write the schemas of every request (its
/// tools and response format; not the conversation, which is data) through
/// this; use it to send [`crate::agent::composed_schema`] through a client
/// of your own.
///
/// ```
/// use aptix_core::schema::meta_fields::InCallOrder;
/// let schema = serde_json::json!({
///     "properties": {"text": {}, "_output": {}, "_activity": {}, "_tool": {}},
///     "required": ["_activity", "_output", "_tool", "text"]
/// });
/// let sent = serde_json::to_string(&InCallOrder(&schema))?;
/// assert_eq!(
///     sent,
///     r#"{"properties":{"_tool":{},"_activity":{},"text":{},"_output":{}},"required":["_tool","_activity","text","_output"]}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct InCallOrder<'a>(pub &'a Value);

impl Serialize for InCallOrder<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(members) => {
                let mut ordered: Vec<(&String, &Value)> = members.iter().collect();
                // Stable: members of one rank keep the value's order.
                ordered.sort_by_key(|(key, _)| rank(key));
                let mut map = serializer.serialize_map(Some(ordered.len()))?;
                for (key, value) in ordered {
                    match value {
                        Value::Array(names)
                            if key == "required" && names.iter().all(Value::is_string) =>
                        {
                            // The members' own order: by rank, then by name
                            // as the sorted `properties` beside it are.
                            let mut names: Vec<&str> =
                                names.iter().filter_map(Value::as_str).collect();
                            names.sort_by_key(|name| (rank(name), *name));
                            map.serialize_entry(key, &names)?;
                        }
                        _ => map.serialize_entry(key, &InCallOrder(value))?,
                    }
                }
                map.end()
            }
            Value::Array(items) => serializer.collect_seq(items.iter().map(InCallOrder)),
            other => other.serialize(serializer),
        }
    }
}

/// Refuses a top-level parameter whose name starts with `_`: the prefix is
/// reserved for the meta fields.
pub(crate) fn check_parameter_names(
    tool: &str,
    type_name: &str,
    parameters: &Value,
    location: &str,
) -> Result<(), DefinitionError> {
    let Some(Value::Object(properties)) = parameters.get("properties") else {
        return Ok(());
    };
    match properties.keys().find(|name| name.starts_with('_')) {
        Some(field) => Err(DefinitionError::ReservedField {
            tool: tool.to_owned(),
            type_name: type_name.to_owned(),
            field: field.clone(),
            source_location: location.to_owned(),
        }),
        None => Ok(()),
    }
}

/// `parameters` with a required `_output` member described by `output`: the
/// schema a latent tool is offered with, so that the model gives the result
/// in its call. Every object of the output is closed, as the result is
/// checked ([`crate::definition::ToolDefinition::check_output`]).
///
/// The output's `$defs` move to the root, where its `$ref`s point; a
/// definition whose name the parameters already use for another schema is
/// renamed (`Output_<name>`), and the output's references with it.
pub fn with_output(parameters: &Value, output: &Value) -> Value {
    let mut offered = parameters.clone();
    let mut output = output.clone();
    close_objects(&mut output, true);
    let Value::Object(root) = &mut offered else {
        return offered;
    };
    if let Value::Object(members) = &mut output {
        if let Some(Value::Object(defs)) = members.remove("$defs") {
            merge_defs(root, defs, &mut output);
        }
        if let Value::Object(members) = &mut output {
            let description = match members.get("description").and_then(Value::as_str) {
                Some(own) => format!("{OUTPUT_DESCRIPTION} {own}"),
                None => OUTPUT_DESCRIPTION.to_owned(),
            };
            members.insert("description".to_owned(), Value::from(description));
        }
    }
    let properties = root
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(properties) = properties {
        properties.insert(OUTPUT.to_owned(), output);
    }
    let required = root
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required
        && !required.iter().any(|name| name == OUTPUT)
    {
        required.push(Value::from(OUTPUT));
    }
    offered
}

/// The description of `_reasoningForCall` wherever it is offered.
pub const REASONING_DESCRIPTION: &str =
    "Optional: why you make this call, in one sentence, for the person who reviews it.";

/// `parameters` with an optional `_reasoningForCall` string member.
pub fn with_reasoning(parameters: &Value) -> Value {
    let mut offered = parameters.clone();
    if let Value::Object(root) = &mut offered
        && let Value::Object(properties) = root
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()))
    {
        properties.insert(
            REASONING.to_owned(),
            serde_json::json!({"type": "string", "description": REASONING_DESCRIPTION}),
        );
    }
    offered
}

/// The description of `_reasoningForCall` in a composed call, where it is
/// required once asked for.
const COMPOSED_REASONING_DESCRIPTION: &str =
    "Why you make this call, in one sentence, for the person who reviews it.";

/// One branch of a composed `calls` array: `offered` (a tool's offered
/// parameters, `_output` included for a latent tool) with the meta fields
/// `_tool` (a `const` of the tool's name), `_activity` (a `const`: see
/// [`ToolEntry::call_activity`](crate::catalog::ToolEntry::call_activity)) and, when asked, `_reasoningForCall`. `required` lists
/// them first, in that order, then the parameters, then `_output`: the
/// order [`InCallOrder`] writes the members in.
///
/// Once asked for, `_reasoningForCall` is required here: grammar
/// converters (llama.cpp's) make the model write every required member
/// before any optional one, so an optional reason would come after the
/// parameters and the result, and explain nothing.
///
/// The branch's `$defs` move to `root`'s, renamed where another branch
/// uses a name for another schema.
pub fn composed_call(
    root: &mut Map<String, Value>,
    tool: &str,
    description: &str,
    activity: &str,
    offered: &Value,
    reasoning: bool,
) -> Value {
    let mut branch = offered.clone();
    let defs = match &mut branch {
        Value::Object(members) => members.remove("$defs"),
        _ => None,
    };
    if let Some(Value::Object(defs)) = defs {
        merge_defs(root, defs, &mut branch);
    }
    if let Value::Object(members) = &mut branch {
        members.insert("description".to_owned(), Value::from(description));
        if let Value::Object(properties) = members
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()))
        {
            properties.insert(
                TOOL.to_owned(),
                serde_json::json!({"type": "string", "const": tool}),
            );
            properties.insert(
                ACTIVITY.to_owned(),
                serde_json::json!({"type": "string", "const": activity}),
            );
            if reasoning {
                properties.insert(
                    REASONING.to_owned(),
                    serde_json::json!({"type": "string", "description": COMPOSED_REASONING_DESCRIPTION}),
                );
            }
        }
        if let Value::Array(required) = members
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            let meta: &[&str] = if reasoning {
                &[TOOL, ACTIVITY, REASONING]
            } else {
                &[TOOL, ACTIVITY]
            };
            required.retain(|name| !meta.iter().any(|meta| name == meta));
            required.splice(0..0, meta.iter().map(|name| Value::from(*name)));
            // `_output` last, after every parameter.
            if let Some(at) = required.iter().position(|name| name == OUTPUT) {
                let output = required.remove(at);
                required.push(output);
            }
        }
        if !members.contains_key("unevaluatedProperties") {
            members.insert("additionalProperties".to_owned(), Value::Bool(false));
        }
    }
    branch
}

/// Moves the output's `defs` into the root's `$defs`, renaming those whose
/// name the root uses for a different schema, and rewrites the references
/// in `output` and in the moved definitions.
fn merge_defs(root: &mut Map<String, Value>, mut defs: Map<String, Value>, output: &mut Value) {
    let held = match root.get("$defs") {
        Some(Value::Object(held)) => held.clone(),
        _ => Map::new(),
    };
    // A rename changes the references in other definitions, which may make
    // one that was equal to the root's differ: repeat until nothing changes.
    loop {
        let clashes: Vec<String> = defs
            .iter()
            .filter(|(name, def)| held.get(*name).is_some_and(|same| same != *def))
            .map(|(name, _)| name.clone())
            .collect();
        if clashes.is_empty() {
            break;
        }
        for old in clashes {
            let mut new = format!("Output_{old}");
            while held.contains_key(&new) || defs.contains_key(&new) {
                new.insert_str(0, "Output_");
            }
            if let Some(def) = defs.remove(&old) {
                defs.insert(new.clone(), def);
            }
            let (from, to) = (format!("#/$defs/{old}"), format!("#/$defs/{new}"));
            rewrite_refs(output, &from, &to);
            defs.values_mut()
                .for_each(|def| rewrite_refs(def, &from, &to));
        }
    }
    let target = root
        .entry("$defs")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(target) = target {
        for (name, def) in defs {
            target.entry(name).or_insert(def);
        }
    }
}

fn rewrite_refs(schema: &mut Value, from: &str, to: &str) {
    match schema {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "$ref" && child.as_str() == Some(from) {
                    *child = Value::from(to);
                } else {
                    rewrite_refs(child, from, to);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite_refs(item, from, to)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn output_is_a_required_closed_member() {
        let parameters = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to read."}},
            "required": ["text"],
            "additionalProperties": false
        });
        let output = json!({
            "type": "object",
            "properties": {"score": {"type": "number"}},
            "required": ["score"]
        });
        let offered = with_output(&parameters, &output);
        assert_eq!(offered["required"], json!(["text", "_output"]));
        assert_eq!(
            offered["properties"]["_output"]["additionalProperties"],
            json!(false)
        );
        assert_eq!(
            offered["properties"]["_output"]["description"],
            json!(OUTPUT_DESCRIPTION)
        );
        // The parameters themselves are untouched.
        assert_eq!(parameters["required"], json!(["text"]));
    }

    #[test]
    fn output_definitions_move_to_the_root_and_clashes_are_renamed() {
        let parameters = json!({
            "type": "object",
            "properties": {"mood": {"$ref": "#/$defs/Mood", "description": "How it felt."}},
            "required": ["mood"],
            "$defs": {
                "Mood": {"type": "string", "enum": ["calm", "angry"]},
                "Shared": {"type": "integer"}
            }
        });
        let output = json!({
            "type": "object",
            "properties": {
                "mood": {"$ref": "#/$defs/Mood"},
                "count": {"$ref": "#/$defs/Shared"},
                "list": {"type": "array", "items": {"$ref": "#/$defs/Item"}}
            },
            "$defs": {
                "Mood": {"type": "string", "enum": ["good", "bad"]},
                "Shared": {"type": "integer"},
                "Item": {"type": "object", "properties": {"mood": {"$ref": "#/$defs/Mood"}}}
            }
        });
        let offered = with_output(&parameters, &output);
        let defs = &offered["$defs"];
        assert_eq!(
            defs["Mood"],
            json!({"type": "string", "enum": ["calm", "angry"]})
        );
        assert_eq!(
            defs["Output_Mood"],
            json!({"type": "string", "enum": ["good", "bad"]})
        );
        assert_eq!(defs["Shared"], json!({"type": "integer"}));
        let out = &offered["properties"]["_output"];
        assert_eq!(out["properties"]["mood"]["$ref"], "#/$defs/Output_Mood");
        assert_eq!(out["properties"]["count"]["$ref"], "#/$defs/Shared");
        assert_eq!(
            defs["Item"]["properties"]["mood"]["$ref"],
            "#/$defs/Output_Mood"
        );
        assert!(out.get("$defs").is_none());
        // The composed schema is a valid schema that reads as intended.
        let validator = jsonschema::draft202012::new(&offered).expect("compiles");
        assert!(validator.is_valid(&json!({
            "mood": "calm",
            "_output": {"mood": "good", "count": 1, "list": [{"mood": "bad"}]}
        })));
        assert!(!validator.is_valid(&json!({
            "mood": "calm",
            "_output": {"mood": "calm"}
        })));
    }

    #[test]
    fn a_composed_branch_requires_the_meta_fields_first_and_the_output_last() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "b": {"type": "string", "description": "B."},
                "a": {"type": "string", "description": "A."}
            },
            "required": ["b", "a"],
            "additionalProperties": false
        });
        let offered = with_output(&parameters, &json!({"type": "integer"}));
        let branch = composed_call(&mut Map::new(), "t", "T.", "", &offered, true);
        assert_eq!(
            branch["required"],
            json!([
                "_tool",
                "_activity",
                "_reasoningForCall",
                "b",
                "a",
                "_output"
            ])
        );
        // Written as sent: meta fields first, parameters as listed in
        // `properties`, `_output` last, and `required` to match.
        let sent = serde_json::to_string(&InCallOrder(&branch)).unwrap_or_default();
        let properties = sent.find(r#""properties":{"_tool":"#).unwrap_or(usize::MAX);
        let order: Vec<usize> = [
            r#""_activity":{"#,
            r#""_reasoningForCall":{"#,
            r#""a":{"#,
            r#""b":{"#,
            r#""_output":{"#,
        ]
        .iter()
        .map(|member| sent.find(member).unwrap_or(usize::MAX))
        .collect();
        assert!(properties < order[0], "{sent}");
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{sent}");
        assert!(
            sent.contains(
                r#""required":["_tool","_activity","_reasoningForCall","a","b","_output"]"#
            ),
            "{sent}"
        );
    }

    #[test]
    fn underscored_parameters_are_refused() {
        let parameters = json!({
            "type": "object",
            "properties": {"_tool": {"type": "string", "description": "x"}}
        });
        let error = check_parameter_names("t", "Args", &parameters, "here").expect_err("reserved");
        assert!(error.to_string().contains("`_tool`"), "{error}");
    }
}
