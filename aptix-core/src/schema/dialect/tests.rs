use super::*;
use schemars::JsonSchema;
use serde_json::{Map, Value, json};

const NAME: &str = "tool";
const DESCRIPTION: &str = "Does things.";

/// The canonical schema of `T`, made the way Aptix makes it: schemars
/// draft 2020-12 without meta schema, `additionalProperties: false` on
/// every object with `properties`, no root `title`.
fn canonical<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.meta_schema = None)
        .with_transform(schemars::transform::RecursiveTransform(
            |schema: &mut schemars::Schema| {
                if schema.get("properties").is_some()
                    && schema.get("additionalProperties").is_none()
                {
                    schema.insert("additionalProperties".into(), false.into());
                }
            },
        ));
    let mut root = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(root) = root.as_object_mut() {
        root.remove("title");
        root.remove("$schema");
    }
    root
}

fn ok(dialect: Dialect, parameters: &Value) -> Value {
    match provider_tool(dialect, NAME, DESCRIPTION, parameters) {
        Ok(tool) => tool,
        Err(error) => panic!("unexpected error: {error}"),
    }
}

fn err(dialect: Dialect, parameters: &Value) -> DialectError {
    match provider_tool(dialect, NAME, DESCRIPTION, parameters) {
        Ok(tool) => panic!("expected an error, got {tool}"),
        Err(error) => error,
    }
}

fn error(dialect: Dialect, path: &str, reason: &str) -> DialectError {
    DialectError {
        tool: NAME.into(),
        dialect,
        path: path.into(),
        reason: reason.into(),
    }
}

/// The parameters (or input schema) of a lowered tool.
fn schema_of(dialect: Dialect, parameters: &Value) -> Value {
    let tool = ok(dialect, parameters);
    let key = match dialect {
        Dialect::OpenAiStrict | Dialect::OpenAiCompatible | Dialect::Gemini => "parameters",
        Dialect::Anthropic => "input_schema",
        Dialect::Mcp => "inputSchema",
    };
    tool[key].clone()
}

/// A root object with one required property `x`.
fn with_property(schema: Value) -> Value {
    json!({
        "type": "object",
        "properties": {"x": schema},
        "required": ["x"],
        "additionalProperties": false
    })
}

fn refusal(dialect: Dialect, path: &str, keyword: &str) -> DialectError {
    error(
        dialect,
        path,
        &format!(
            "{} does not support `{keyword}`, and dropping it would change which arguments are valid",
            dialect.provider()
        ),
    )
}

/// Weather lookup arguments.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Weather {
    /// City name.
    city: String,
    /// Days ahead.
    days: u8,
    units: Option<String>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct NoArgs {}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Point {
    x: f64,
    y: i32,
}

fn seven() -> u32 {
    7
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Shape {
    /// Where.
    at: Point,
    corner: Option<Point>,
    #[serde(default = "seven")]
    n: u32,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum Color {
    Red,
    Green,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Opts {
    name: Option<String>,
    count: Option<u32>,
    color: Option<Color>,
    point: Option<Point>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Node {
    name: String,
    children: Vec<Node>,
    next: Option<Box<Node>>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Tree {
    label: String,
    kids: Vec<Tree>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Forest {
    trees: Vec<Tree>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum Cmd {
    Stop,
    Move { dx: i32 },
    Say(String),
}

#[derive(JsonSchema)]
#[serde(tag = "kind")]
#[allow(dead_code)]
enum Figure {
    Circle { r: f64 },
    Square { side: f64 },
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Paint {
    color: Color,
    alt: Option<Color>,
    cmd: Cmd,
    figure: Figure,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum Level {
    /// Low.
    Low,
    /// High.
    High,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Pick {
    level: Option<Level>,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct Collections {
    map: std::collections::HashMap<String, u8>,
    set: std::collections::BTreeSet<String>,
    pair: (i32, String),
    any: serde_json::Value,
}

// ---- Dialect names -------------------------------------------------

#[test]
fn dialect_names_round_trip() {
    assert_eq!(
        Dialect::ALL,
        [
            Dialect::OpenAiStrict,
            Dialect::Anthropic,
            Dialect::Gemini,
            Dialect::Mcp
        ]
    );
    let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.as_str()).collect();
    assert_eq!(names, ["openai_strict", "anthropic", "gemini", "mcp"]);
    for dialect in Dialect::ALL {
        assert_eq!(dialect.as_str().parse::<Dialect>(), Ok(dialect));
        assert_eq!(dialect.to_string(), dialect.as_str());
    }
    assert_eq!("openai".parse::<Dialect>(), Ok(Dialect::OpenAiStrict));
    assert_eq!(
        "OpenAI".parse::<Dialect>(),
        Err(ParseDialectError {
            input: "OpenAI".into()
        })
    );
    assert_eq!(
        ParseDialectError { input: "x".into() }.to_string(),
        "unknown dialect `x`; expected one of openai_strict, openai, openai_compatible, anthropic, gemini, mcp"
    );
}

#[test]
fn error_message_names_tool_dialect_and_path() {
    let e = error(Dialect::Gemini, "/properties/when/pattern", "because");
    assert_eq!(
        e.to_string(),
        "tool `tool` cannot be expressed in the gemini dialect at `/properties/when/pattern`: because"
    );
}

// ---- A simple struct in every dialect -------------------------------

fn weather_canonical() -> Value {
    json!({
        "description": "Weather lookup arguments.",
        "type": "object",
        "properties": {
            "city": {"description": "City name.", "type": "string"},
            "days": {
                "description": "Days ahead.",
                "type": "integer",
                "format": "uint8",
                "minimum": 0,
                "maximum": 255
            },
            "units": {"type": ["string", "null"]}
        },
        "required": ["city", "days"],
        "additionalProperties": false
    })
}

#[test]
fn samples_have_the_canonical_shape() {
    assert_eq!(canonical::<Weather>(), weather_canonical());
}

#[test]
fn simple_struct_openai_strict() {
    assert_eq!(
        ok(Dialect::OpenAiStrict, &weather_canonical()),
        json!({
            "type": "function",
            "name": "tool",
            "description": "Does things.",
            "strict": true,
            "parameters": {
                "description": "Weather lookup arguments.",
                "type": "object",
                "properties": {
                    "city": {"description": "City name.", "type": "string"},
                    "days": {
                        "description": "Days ahead.",
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 255
                    },
                    "units": {"type": ["string", "null"]}
                },
                "required": ["city", "days", "units"],
                "additionalProperties": false
            }
        })
    );
}

#[test]
fn simple_struct_anthropic_passes_through() {
    assert_eq!(
        ok(Dialect::Anthropic, &weather_canonical()),
        json!({
            "name": "tool",
            "description": "Does things.",
            "input_schema": weather_canonical()
        })
    );
}

#[test]
fn simple_struct_mcp_passes_through() {
    assert_eq!(
        ok(Dialect::Mcp, &weather_canonical()),
        json!({
            "name": "tool",
            "description": "Does things.",
            "inputSchema": weather_canonical()
        })
    );
}

#[test]
fn simple_struct_gemini() {
    assert_eq!(
        ok(Dialect::Gemini, &weather_canonical()),
        json!({
            "name": "tool",
            "description": "Does things.",
            "parameters": {
                "description": "Weather lookup arguments.",
                "type": "object",
                "properties": {
                    "city": {"description": "City name.", "type": "string"},
                    "days": {
                        "description": "Days ahead.",
                        "type": "integer",
                        "minimum": 0,
                        "maximum": 255
                    },
                    "units": {"type": "string", "nullable": true}
                },
                "required": ["city", "days"]
            }
        })
    );
}

#[test]
fn tool_without_arguments() {
    let parameters = canonical::<NoArgs>();
    assert_eq!(parameters, json!({"type": "object"}));
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": false
        })
    );
    // Gemini rejects an OBJECT with empty `properties`: no parameters at all.
    assert_eq!(
        ok(Dialect::Gemini, &parameters),
        json!({"name": "tool", "description": "Does things."})
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

// ---- Option fields --------------------------------------------------

#[test]
fn option_fields() {
    let parameters = canonical::<Opts>();
    let point = json!({
        "type": "object",
        "properties": {
            "x": {"type": "number", "format": "double"},
            "y": {"type": "integer", "format": "int32"}
        },
        "required": ["x", "y"],
        "additionalProperties": false
    });
    assert_eq!(
        parameters,
        json!({
            "$defs": {
                "Color": {"type": "string", "enum": ["Red", "Green"]},
                "Point": point
            },
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"]},
                "count": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                "point": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
            },
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {
                "Color": {"type": "string", "enum": ["Red", "Green"]},
                "Point": {
                    "type": "object",
                    "properties": {"x": {"type": "number"}, "y": {"type": "integer"}},
                    "required": ["x", "y"],
                    "additionalProperties": false
                }
            },
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"]},
                "count": {"type": ["integer", "null"], "minimum": 0},
                "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                "point": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
            },
            "required": ["color", "count", "name", "point"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "nullable": true},
                "count": {"type": "integer", "nullable": true, "minimum": 0},
                "color": {"type": "string", "enum": ["Red", "Green"], "nullable": true},
                "point": {
                    "type": "object",
                    "nullable": true,
                    "properties": {
                        "x": {"type": "number", "format": "double"},
                        "y": {"type": "integer", "format": "int32"}
                    },
                    "required": ["x", "y"]
                }
            }
        })
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn optional_enum_gains_null_in_type_and_enum() {
    let parameters = json!({
        "type": "object",
        "properties": {"mode": {"type": "string", "enum": ["fast", "slow"]}},
        "additionalProperties": false
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "type": "object",
            "properties": {
                "mode": {"type": ["string", "null"], "enum": ["fast", "slow", null]}
            },
            "required": ["mode"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {"mode": {"type": "string", "enum": ["fast", "slow"]}}
        })
    );
}

#[test]
fn optional_const_and_any_of_become_nullable_with_any_of() {
    let parameters = json!({
        "type": "object",
        "properties": {
            "kind": {"description": "K.", "type": "string", "const": "x"},
            "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        },
        "additionalProperties": false
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "type": "object",
            "properties": {
                "kind": {
                    "description": "K.",
                    "anyOf": [{"type": "string", "const": "x"}, {"type": "null"}]
                },
                "value": {
                    "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]
                }
            },
            "required": ["kind", "value"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {
                "kind": {"description": "K.", "type": "string", "enum": ["x"]},
                "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            }
        })
    );
}

#[test]
fn gemini_nullable_any_of_with_several_branches() {
    let parameters = with_property(json!({
        "description": "V.",
        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]
    }));
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {
                "x": {
                    "description": "V.",
                    "anyOf": [
                        {"type": "string", "nullable": true},
                        {"type": "integer", "nullable": true}
                    ]
                }
            },
            "required": ["x"]
        })
    );
}

// ---- Nested structs via $ref, defaults ------------------------------

#[test]
fn nested_struct_via_ref_with_defaults() {
    let parameters = canonical::<Shape>();
    let point = json!({
        "type": "object",
        "properties": {
            "x": {"type": "number", "format": "double"},
            "y": {"type": "integer", "format": "int32"}
        },
        "required": ["x", "y"],
        "additionalProperties": false
    });
    assert_eq!(
        parameters,
        json!({
            "$defs": {"Point": point},
            "type": "object",
            "properties": {
                "at": {"$ref": "#/$defs/Point", "description": "Where."},
                "corner": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
                "n": {"type": "integer", "format": "uint32", "minimum": 0, "default": 7},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []}
            },
            "required": ["at"],
            "additionalProperties": false
        })
    );
    let strict_point = json!({
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
        "additionalProperties": false
    });
    // OpenAI rejects keywords beside `$ref`, so the described reference is
    // inlined; the optional one keeps its `$ref` inside the nullable `anyOf`.
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {"Point": strict_point},
            "type": "object",
            "properties": {
                "at": {
                    "description": "Where.",
                    "type": "object",
                    "properties": {"x": {"type": "number"}, "y": {"type": "integer"}},
                    "required": ["x", "y"],
                    "additionalProperties": false
                },
                "corner": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
                "n": {"type": ["integer", "null"], "minimum": 0},
                "tags": {"type": ["array", "null"], "items": {"type": "string"}}
            },
            "required": ["at", "corner", "n", "tags"],
            "additionalProperties": false
        })
    );
    let gemini_point = json!({
        "x": {"type": "number", "format": "double"},
        "y": {"type": "integer", "format": "int32"}
    });
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {
                "at": {
                    "description": "Where.",
                    "type": "object",
                    "properties": gemini_point,
                    "required": ["x", "y"]
                },
                "corner": {
                    "type": "object",
                    "nullable": true,
                    "properties": gemini_point,
                    "required": ["x", "y"]
                },
                "n": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["at"]
        })
    );
    // Defaults are meaning for Anthropic and MCP clients: kept.
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn openai_inlines_through_an_alias_definition() {
    let parameters = json!({
        "$defs": {
            "Id": {"$ref": "#/$defs/Uuid"},
            "Uuid": {"type": "string", "format": "uuid"}
        },
        "type": "object",
        "properties": {"id": {"$ref": "#/$defs/Id", "description": "The id."}},
        "required": ["id"],
        "additionalProperties": false
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {
                "Id": {"$ref": "#/$defs/Uuid"},
                "Uuid": {"type": "string", "format": "uuid"}
            },
            "type": "object",
            "properties": {
                "id": {"type": "string", "format": "uuid", "description": "The id."}
            },
            "required": ["id"],
            "additionalProperties": false
        })
    );
}

// ---- Recursion ------------------------------------------------------

#[test]
fn recursion_through_root() {
    let parameters = canonical::<Node>();
    assert_eq!(
        parameters,
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#"}},
                "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
            },
            "required": ["name", "children"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#"}},
                "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
            },
            "required": ["children", "name", "next"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        err(Dialect::Gemini, &parameters),
        error(
            Dialect::Gemini,
            "/properties/children/items/$ref",
            "`#` is recursive (it refers back into `#`): Gemini does not support `$ref`, and a recursive schema cannot be inlined"
        )
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn recursion_through_a_definition() {
    let parameters = canonical::<Forest>();
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {
                "Tree": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
                    },
                    "required": ["kids", "label"],
                    "additionalProperties": false
                }
            },
            "type": "object",
            "properties": {
                "trees": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
            },
            "required": ["trees"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        err(Dialect::Gemini, &parameters),
        error(
            Dialect::Gemini,
            "/$defs/Tree/properties/kids/items/$ref",
            "`#/$defs/Tree` is recursive (it refers back into `#/$defs/Tree`): Gemini does not support `$ref`, and a recursive schema cannot be inlined"
        )
    );
}

#[test]
fn openai_drops_annotations_of_a_reference_back_into_an_open_schema() {
    let parameters = json!({
        "type": "object",
        "properties": {"parent": {"$ref": "#", "description": "Parent."}},
        "required": ["parent"],
        "additionalProperties": false
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "type": "object",
            "properties": {"parent": {"$ref": "#"}},
            "required": ["parent"],
            "additionalProperties": false
        })
    );
}

// ---- Enums ----------------------------------------------------------

#[test]
fn enums_unit_externally_and_internally_tagged() {
    let parameters = canonical::<Paint>();
    let canonical_defs = json!({
        "Cmd": {"oneOf": [
            {"type": "string", "enum": ["Stop"]},
            {
                "type": "object",
                "properties": {"Move": {
                    "type": "object",
                    "properties": {"dx": {"type": "integer", "format": "int32"}},
                    "required": ["dx"],
                    "additionalProperties": false
                }},
                "required": ["Move"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {"Say": {"type": "string"}},
                "required": ["Say"],
                "additionalProperties": false
            }
        ]},
        "Color": {"type": "string", "enum": ["Red", "Green"]},
        "Figure": {"oneOf": [
            {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "const": "Circle"},
                    "r": {"type": "number", "format": "double"}
                },
                "required": ["kind", "r"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "const": "Square"},
                    "side": {"type": "number", "format": "double"}
                },
                "required": ["kind", "side"],
                "additionalProperties": false
            }
        ]}
    });
    assert_eq!(
        parameters,
        json!({
            "$defs": canonical_defs,
            "type": "object",
            "properties": {
                "color": {"$ref": "#/$defs/Color"},
                "alt": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                "cmd": {"$ref": "#/$defs/Cmd"},
                "figure": {"$ref": "#/$defs/Figure"}
            },
            "required": ["color", "cmd", "figure"],
            "additionalProperties": false
        })
    );
    // Both `oneOf`s are provably exclusive (distinct types, a key the other
    // closed object forbids, distinct `const` tags): they become `anyOf`.
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {
                "Cmd": {"anyOf": [
                    {"type": "string", "enum": ["Stop"]},
                    {
                        "type": "object",
                        "properties": {"Move": {
                            "type": "object",
                            "properties": {"dx": {"type": "integer"}},
                            "required": ["dx"],
                            "additionalProperties": false
                        }},
                        "required": ["Move"],
                        "additionalProperties": false
                    },
                    {
                        "type": "object",
                        "properties": {"Say": {"type": "string"}},
                        "required": ["Say"],
                        "additionalProperties": false
                    }
                ]},
                "Color": {"type": "string", "enum": ["Red", "Green"]},
                "Figure": {"anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "const": "Circle"},
                            "r": {"type": "number"}
                        },
                        "required": ["kind", "r"],
                        "additionalProperties": false
                    },
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "const": "Square"},
                            "side": {"type": "number"}
                        },
                        "required": ["kind", "side"],
                        "additionalProperties": false
                    }
                ]}
            },
            "type": "object",
            "properties": {
                "color": {"$ref": "#/$defs/Color"},
                "alt": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
                "cmd": {"$ref": "#/$defs/Cmd"},
                "figure": {"$ref": "#/$defs/Figure"}
            },
            "required": ["alt", "cmd", "color", "figure"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {
                "color": {"type": "string", "enum": ["Red", "Green"]},
                "alt": {"type": "string", "enum": ["Red", "Green"], "nullable": true},
                "cmd": {"anyOf": [
                    {"type": "string", "enum": ["Stop"]},
                    {
                        "type": "object",
                        "properties": {"Move": {
                            "type": "object",
                            "properties": {"dx": {"type": "integer", "format": "int32"}},
                            "required": ["dx"]
                        }},
                        "required": ["Move"]
                    },
                    {
                        "type": "object",
                        "properties": {"Say": {"type": "string"}},
                        "required": ["Say"]
                    }
                ]},
                "figure": {"anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "enum": ["Circle"]},
                            "r": {"type": "number", "format": "double"}
                        },
                        "required": ["kind", "r"]
                    },
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "enum": ["Square"]},
                            "side": {"type": "number", "format": "double"}
                        },
                        "required": ["kind", "side"]
                    }
                ]}
            },
            "required": ["color", "cmd", "figure"]
        })
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn documented_unit_variants_one_of_const() {
    let parameters = canonical::<Pick>();
    let level = json!({"oneOf": [
        {"description": "Low.", "type": "string", "const": "Low"},
        {"description": "High.", "type": "string", "const": "High"}
    ]});
    assert_eq!(
        parameters,
        json!({
            "$defs": {"Level": level},
            "type": "object",
            "properties": {
                "level": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}]}
            },
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {"Level": {"anyOf": [
                {"description": "Low.", "type": "string", "const": "Low"},
                {"description": "High.", "type": "string", "const": "High"}
            ]}},
            "type": "object",
            "properties": {
                "level": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}]}
            },
            "required": ["level"],
            "additionalProperties": false
        })
    );
    // `nullable` is pushed into each branch of the inlined `anyOf`.
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {"level": {"anyOf": [
                {"description": "Low.", "type": "string", "enum": ["Low"], "nullable": true},
                {"description": "High.", "type": "string", "enum": ["High"], "nullable": true}
            ]}}
        })
    );
}

#[test]
fn overlapping_one_of_is_refused() {
    let parameters = with_property(json!({
        "oneOf": [{"type": "string"}, {"type": "string", "minLength": 3}]
    }));
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        assert_eq!(
            err(dialect, &parameters),
            error(
                dialect,
                "/properties/x/oneOf",
                &format!(
                    "{} does not support `oneOf`, and branches 0 and 1 are not provably mutually exclusive, so it cannot be rewritten as `anyOf`",
                    dialect.provider()
                )
            )
        );
    }
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
}

#[test]
fn one_of_exclusive_by_enum_values_and_value_types() {
    let parameters = with_property(json!({"oneOf": [
        {"enum": ["a", "b"]},
        {"enum": ["c", 1]},
        {"type": "boolean"},
        {"const": 1.5}
    ]}));
    // `1.5` matches neither a string enum nor `boolean`; `1` and `1.5`
    // differ; OpenAI keeps untyped `enum`/`const`.
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["x"],
        json!({"anyOf": [
            {"enum": ["a", "b"]},
            {"enum": ["c", 1]},
            {"type": "boolean"},
            {"const": 1.5}
        ]})
    );
    let equal_numbers = with_property(json!({"oneOf": [{"const": 1}, {"const": 1.0}]}));
    assert_eq!(
        err(Dialect::OpenAiStrict, &equal_numbers).path,
        "/properties/x/oneOf"
    );
}

// ---- Refused keywords -----------------------------------------------

#[test]
fn openai_refuses_unsupported_keywords() {
    let cases = [
        (
            "allOf",
            json!({"type": "string", "allOf": [{"minLength": 1}]}),
        ),
        ("not", json!({"type": "string", "not": {"const": "a"}})),
        ("if", json!({"type": "string", "if": {"minLength": 1}})),
        ("then", json!({"type": "string", "then": {"minLength": 1}})),
        ("else", json!({"type": "string", "else": {"minLength": 1}})),
        (
            "dependentRequired",
            json!({"type": "object", "additionalProperties": false, "dependentRequired": {}}),
        ),
        (
            "dependentSchemas",
            json!({"type": "object", "additionalProperties": false, "dependentSchemas": {}}),
        ),
        (
            "patternProperties",
            json!({"type": "object", "additionalProperties": false, "patternProperties": {"^a": {"type": "string"}}}),
        ),
        (
            "unevaluatedProperties",
            json!({"type": "object", "unevaluatedProperties": false}),
        ),
        (
            "propertyNames",
            json!({"type": "object", "additionalProperties": false, "propertyNames": {"pattern": "^a"}}),
        ),
        (
            "contains",
            json!({"type": "array", "items": {"type": "string"}, "contains": {"const": "a"}}),
        ),
        (
            "prefixItems",
            json!({"type": "array", "prefixItems": [{"type": "string"}]}),
        ),
        (
            "uniqueItems",
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
        ),
        (
            "minProperties",
            json!({"type": "object", "additionalProperties": false, "minProperties": 1}),
        ),
        ("nullable", json!({"type": "string", "nullable": true})),
        ("x-custom", json!({"type": "string", "x-custom": 1})),
        ("$id", json!({"$id": "urn:x", "type": "string"})),
        ("$defs", json!({"$defs": {}, "type": "string"})),
    ];
    for (keyword, schema) in cases {
        assert_eq!(
            err(Dialect::OpenAiStrict, &with_property(schema)),
            refusal(
                Dialect::OpenAiStrict,
                &format!("/properties/x/{keyword}"),
                keyword
            ),
            "{keyword}"
        );
    }
}

#[test]
fn gemini_refuses_unsupported_keywords() {
    let cases = [
        (
            "exclusiveMinimum",
            json!({"type": "integer", "exclusiveMinimum": 0}),
        ),
        (
            "exclusiveMaximum",
            json!({"type": "integer", "exclusiveMaximum": 9}),
        ),
        ("multipleOf", json!({"type": "integer", "multipleOf": 2})),
        (
            "uniqueItems",
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
        ),
        (
            "allOf",
            json!({"type": "string", "allOf": [{"minLength": 1}]}),
        ),
        ("not", json!({"type": "string", "not": {"const": "a"}})),
        ("if", json!({"type": "string", "if": {"minLength": 1}})),
        (
            "patternProperties",
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
        ),
        (
            "prefixItems",
            json!({"type": "array", "prefixItems": [{"type": "string"}]}),
        ),
        (
            "dependentRequired",
            json!({"type": "object", "dependentRequired": {}}),
        ),
        ("x-custom", json!({"type": "string", "x-custom": 1})),
        ("$id", json!({"$id": "urn:x", "type": "string"})),
    ];
    for (keyword, schema) in cases {
        assert_eq!(
            err(Dialect::Gemini, &with_property(schema)),
            refusal(
                Dialect::Gemini,
                &format!("/properties/x/{keyword}"),
                keyword
            ),
            "{keyword}"
        );
    }
}

#[test]
fn open_objects_and_maps_are_refused() {
    let parameters = canonical::<Collections>();
    assert_eq!(
        err(Dialect::OpenAiStrict, &parameters),
        error(
            Dialect::OpenAiStrict,
            "/properties/any",
            "the schema `true` accepts any value, which OpenAI strict mode cannot express"
        )
    );
    let map = with_property(json!({"type": "object", "additionalProperties": {"type": "string"}}));
    assert_eq!(
        err(Dialect::OpenAiStrict, &map),
        error(
            Dialect::OpenAiStrict,
            "/properties/x/additionalProperties",
            "OpenAI strict mode requires `additionalProperties: false`; an open object or map cannot be strict"
        )
    );
    assert_eq!(
        err(Dialect::Gemini, &map),
        error(
            Dialect::Gemini,
            "/properties/x/additionalProperties",
            "Gemini has no `additionalProperties`, so an open object or map cannot be expressed"
        )
    );
    let open = with_property(json!({"type": "object", "additionalProperties": true}));
    assert_eq!(
        err(Dialect::OpenAiStrict, &open).path,
        "/properties/x/additionalProperties"
    );
    assert_eq!(
        err(Dialect::Gemini, &open).path,
        "/properties/x/additionalProperties"
    );
    // Properties without `additionalProperties: false`: open, so not strict.
    let unclosed = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"]
    });
    assert_eq!(
        err(Dialect::OpenAiStrict, &unclosed),
        error(
            Dialect::OpenAiStrict,
            "",
            "the object does not set `additionalProperties: false`, so it accepts extra properties; OpenAI strict mode requires closed objects, and closing it would change its meaning"
        )
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &unclosed),
        json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"]
        })
    );
    // Sets carry `uniqueItems`, tuples `prefixItems`: both refused.
    let set = with_property(canonical::<Collections>()["properties"]["set"].clone());
    assert_eq!(
        err(Dialect::OpenAiStrict, &set),
        refusal(
            Dialect::OpenAiStrict,
            "/properties/x/uniqueItems",
            "uniqueItems"
        )
    );
    let pair = with_property(canonical::<Collections>()["properties"]["pair"].clone());
    assert_eq!(
        err(Dialect::Gemini, &pair),
        refusal(Dialect::Gemini, "/properties/x/prefixItems", "prefixItems")
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn unconstrained_schemas_are_refused() {
    let untyped = with_property(json!({"description": "anything"}));
    assert_eq!(
        err(Dialect::OpenAiStrict, &untyped),
        error(
            Dialect::OpenAiStrict,
            "/properties/x",
            "the schema declares no `type` (nor `enum`, `const` or `anyOf`), so it accepts any value, which OpenAI strict mode cannot express"
        )
    );
    assert_eq!(
        err(Dialect::Gemini, &untyped),
        error(
            Dialect::Gemini,
            "/properties/x",
            "the schema declares no `type`, so it accepts any value, which Gemini cannot express"
        )
    );
    let nothing = with_property(json!(false));
    assert_eq!(
        err(Dialect::Gemini, &nothing),
        error(
            Dialect::Gemini,
            "/properties/x",
            "the schema `false` accepts no value, which Gemini cannot express"
        )
    );
    let array = with_property(json!({"type": "array"}));
    assert_eq!(
        err(Dialect::OpenAiStrict, &array),
        error(
            Dialect::OpenAiStrict,
            "/properties/x",
            "an array without `items` accepts any elements, which OpenAI strict mode cannot express"
        )
    );
    assert_eq!(
        err(Dialect::Gemini, &array),
        error(
            Dialect::Gemini,
            "/properties/x",
            "an array without `items` accepts any elements, which Gemini cannot express"
        )
    );
    assert_eq!(schema_of(Dialect::Mcp, &untyped), untyped);
}

#[test]
fn ref_with_a_constraining_sibling_is_refused() {
    // What schemars emits for a newtype variant of an internally tagged enum.
    let parameters = json!({
        "$defs": {"P": {
            "type": "object",
            "properties": {"x": {"type": "number"}},
            "required": ["x"],
            "additionalProperties": false
        }},
        "type": "object",
        "properties": {"p": {
            "$ref": "#/$defs/P",
            "type": "object",
            "required": ["x"]
        }},
        "required": ["p"],
        "additionalProperties": false
    });
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        assert_eq!(
            err(dialect, &parameters),
            error(
                dialect,
                "/properties/p/required",
                &format!(
                    "`required` next to `$ref` constrains the referenced schema; {} accepts no keywords beside `$ref`, and merging it into the referenced schema could change its meaning",
                    dialect.provider()
                )
            )
        );
    }
}

#[test]
fn required_names_must_be_declared() {
    let parameters = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": false
    });
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        assert_eq!(
            err(dialect, &parameters),
            error(
                dialect,
                "/required/1",
                &format!(
                    "`b` is required but not declared in `properties`, which {} cannot express",
                    dialect.provider()
                )
            )
        );
    }
}

#[test]
fn gemini_type_unions_null_only_and_non_string_enums() {
    let union = with_property(json!({"type": ["string", "integer"]}));
    assert_eq!(
        err(Dialect::Gemini, &union),
        error(
            Dialect::Gemini,
            "/properties/x/type",
            "Gemini has no type unions other than `[T, \"null\"]`"
        )
    );
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &union)["properties"]["x"],
        json!({"type": ["string", "integer"]})
    );
    let null = with_property(json!({"type": "null"}));
    assert_eq!(
        err(Dialect::Gemini, &null),
        error(
            Dialect::Gemini,
            "/properties/x/type",
            "Gemini cannot express a schema that accepts only `null`"
        )
    );
    let numbers = with_property(json!({"type": "integer", "enum": [1, 2]}));
    assert_eq!(
        err(Dialect::Gemini, &numbers),
        error(
            Dialect::Gemini,
            "/properties/x/enum/0",
            "Gemini enums hold strings only, and this value is not a string"
        )
    );
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &numbers)["properties"]["x"],
        json!({"type": "integer", "enum": [1, 2]})
    );
    // An enum without `null` excludes it even if the type allows it.
    let closed_enum = with_property(json!({"type": ["string", "null"], "enum": ["a"]}));
    assert_eq!(
        schema_of(Dialect::Gemini, &closed_enum)["properties"]["x"],
        json!({"type": "string", "enum": ["a"]})
    );
    let null_enum = with_property(json!({"type": ["string", "null"], "enum": ["a", null]}));
    assert_eq!(
        schema_of(Dialect::Gemini, &null_enum)["properties"]["x"],
        json!({"type": "string", "enum": ["a"], "nullable": true})
    );
}

// ---- Formats and annotations ----------------------------------------

#[test]
fn formats() {
    let parameters = json!({
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "big": {"type": "integer", "format": "int64"},
            "small": {"type": "integer", "format": "uint32", "minimum": 0},
            "ratio": {"type": "number", "format": "float"}
        },
        "required": ["when", "big", "small", "ratio"],
        "additionalProperties": false
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "big": {"type": "integer"},
                "small": {"type": "integer", "minimum": 0},
                "ratio": {"type": "number"}
            },
            "required": ["big", "ratio", "small", "when"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "big": {"type": "integer", "format": "int64"},
                "small": {"type": "integer", "minimum": 0},
                "ratio": {"type": "number", "format": "float"}
            },
            "required": ["when", "big", "small", "ratio"]
        })
    );
    let email = with_property(json!({"type": "string", "format": "email"}));
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &email)["properties"]["x"],
        json!({"type": "string", "format": "email"})
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &email)["properties"]["x"],
        json!({"type": "string"})
    );
    let uri = with_property(json!({"type": "string", "format": "uri"}));
    assert_eq!(
        err(Dialect::OpenAiStrict, &uri),
        error(
            Dialect::OpenAiStrict,
            "/properties/x/format",
            "OpenAI strict mode does not support format `uri` (only date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid)"
        )
    );
}

#[test]
fn supported_constraints_are_kept() {
    let parameters = with_property(json!({
        "title": "T",
        "type": "string",
        "minLength": 1,
        "maxLength": 5,
        "pattern": "^a"
    }));
    let expected = json!({
        "title": "T",
        "type": "string",
        "minLength": 1,
        "maxLength": 5,
        "pattern": "^a"
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["x"],
        expected
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters)["properties"]["x"],
        expected
    );
    let numbers = with_property(json!({
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "multipleOf": 0.5
    }));
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &numbers)["properties"]["x"],
        json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1, "multipleOf": 0.5})
    );
    let items = with_property(json!({
        "type": "array",
        "items": {"type": "integer"},
        "minItems": 1,
        "maxItems": 3,
        "uniqueItems": false
    }));
    let expected = json!({
        "type": "array",
        "items": {"type": "integer"},
        "minItems": 1,
        "maxItems": 3
    });
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &items)["properties"]["x"],
        expected
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &items)["properties"]["x"],
        expected
    );
}

#[test]
fn annotations_are_dropped_from_lowered_dialects_only() {
    let parameters = with_property(json!({
        "type": "string",
        "default": "a",
        "examples": ["a"],
        "deprecated": true,
        "readOnly": true,
        "writeOnly": false,
        "$comment": "internal"
    }));
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["x"],
        json!({"type": "string"})
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters)["properties"]["x"],
        json!({"type": "string"})
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn unknown_keywords_are_kept_by_anthropic_and_mcp() {
    let parameters = with_property(json!({"type": "string", "x-custom": {"a": 1}}));
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

// ---- References -----------------------------------------------------

#[test]
fn dangling_and_non_local_references() {
    let dangling = with_property(json!({"$ref": "#/$defs/Missing"}));
    let remote = with_property(json!({"$ref": "https://example.com/s.json"}));
    let anchor = with_property(json!({"$ref": "#thing"}));
    for dialect in Dialect::ALL {
        assert_eq!(
            err(dialect, &dangling),
            error(
                dialect,
                "/properties/x/$ref",
                "`#/$defs/Missing` does not resolve to anything in the parameters"
            )
        );
        assert_eq!(
            err(dialect, &remote),
            error(
                dialect,
                "/properties/x/$ref",
                "`https://example.com/s.json` is not a local reference; only `#...` references into the tool's own parameters can be resolved"
            )
        );
        assert_eq!(
            err(dialect, &anchor),
            error(
                dialect,
                "/properties/x/$ref",
                "`#thing` names an anchor, and only JSON-pointer references are supported"
            )
        );
    }
    let not_a_string = with_property(json!({"$ref": 1}));
    assert_eq!(
        err(Dialect::Mcp, &not_a_string),
        error(
            Dialect::Mcp,
            "/properties/x/$ref",
            "malformed schema: expected a reference string"
        )
    );
}

#[test]
fn reference_cycles_without_a_schema_are_errors() {
    let parameters = json!({
        "$defs": {
            "A": {"$ref": "#/$defs/B"},
            "B": {"$ref": "#/$defs/A"}
        },
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/A"}},
        "required": ["p"],
        "additionalProperties": false
    });
    for dialect in Dialect::ALL {
        assert_eq!(
            err(dialect, &parameters),
            error(
                dialect,
                "/$defs/A/$ref",
                "`#/$defs/B` leads into a cycle of references that never reaches a schema"
            )
        );
    }
}

#[test]
fn escaped_and_percent_encoded_references() {
    let parameters = json!({
        "$defs": {
            "Pair<A, B>": {"type": "string"},
            "a/b": {"type": "integer"}
        },
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/Pair%3CA,%20B%3E"},
            "q": {"$ref": "#/$defs/a~1b"}
        },
        "required": ["p", "q"],
        "additionalProperties": false
    });
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {"p": {"type": "string"}, "q": {"type": "integer"}},
            "required": ["p", "q"]
        })
    );
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters),
        json!({
            "$defs": {
                "Pair<A, B>": {"type": "string"},
                "a/b": {"type": "integer"}
            },
            "type": "object",
            "properties": {
                "p": {"$ref": "#/$defs/Pair%3CA,%20B%3E"},
                "q": {"$ref": "#/$defs/a~1b"}
            },
            "required": ["p", "q"],
            "additionalProperties": false
        })
    );
}

#[test]
fn openai_keeps_only_root_and_definition_references() {
    let parameters = json!({
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"$ref": "#/properties/a"}
        },
        "required": ["a", "b"],
        "additionalProperties": false
    });
    assert_eq!(
        err(Dialect::OpenAiStrict, &parameters),
        error(
            Dialect::OpenAiStrict,
            "/properties/b/$ref",
            "`#/properties/a` points inside the schema; the OpenAI strict lowering keeps only `#` and `#/$defs/<name>` addressable"
        )
    );
    assert_eq!(
        schema_of(Dialect::Gemini, &parameters),
        json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a", "b"]
        })
    );
    assert_eq!(schema_of(Dialect::Anthropic, &parameters), parameters);
}

#[test]
fn exponential_inlining_is_bounded() {
    let mut defs = Map::new();
    for i in 0..20 {
        let next = format!("#/$defs/D{}", i + 1);
        defs.insert(
            format!("D{i}"),
            json!({
                "type": "object",
                "properties": {"a": {"$ref": next}, "b": {"$ref": next}},
                "required": ["a", "b"],
                "additionalProperties": false
            }),
        );
    }
    defs.insert("D20".into(), json!({"type": "string"}));
    let parameters = json!({
        "$defs": defs,
        "type": "object",
        "properties": {"d": {"$ref": "#/$defs/D0"}},
        "required": ["d"],
        "additionalProperties": false
    });
    assert_eq!(
        err(Dialect::Gemini, &parameters),
        error(
            Dialect::Gemini,
            "/$defs/D18/properties/b/$ref",
            "inlining `$ref`s would expand more than 1024 references"
        )
    );
    // OpenAI keeps the references: nothing to expand.
    assert_eq!(
        schema_of(Dialect::OpenAiStrict, &parameters)["properties"]["d"],
        json!({"$ref": "#/$defs/D0"})
    );
}

// ---- Malformed and non-object input ---------------------------------

#[test]
fn non_object_parameters_are_refused_by_every_dialect() {
    for dialect in Dialect::ALL {
        for parameters in [
            json!(true),
            json!(false),
            json!(null),
            json!("x"),
            json!([1]),
        ] {
            assert_eq!(
                err(dialect, &parameters),
                error(
                    dialect,
                    "",
                    "tool parameters must be a JSON Schema object with `\"type\": \"object\"`"
                )
            );
        }
        assert_eq!(
            err(dialect, &json!({"type": "string"})),
            error(
                dialect,
                "/type",
                "tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object"
            )
        );
        assert_eq!(
            err(dialect, &json!({})),
            error(
                dialect,
                "",
                "tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object"
            )
        );
    }
}

#[test]
fn anthropic_refuses_top_level_composition() {
    let parameters = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]
    });
    assert_eq!(
        err(Dialect::Anthropic, &parameters),
        error(
            Dialect::Anthropic,
            "/anyOf",
            "Anthropic does not accept `anyOf` at the top level of `input_schema`"
        )
    );
    assert_eq!(schema_of(Dialect::Mcp, &parameters), parameters);
}

#[test]
fn malformed_keywords_are_errors_not_panics() {
    let cases = [
        (json!({"type": 1}), "/properties/x/type"),
        (json!({"type": "text"}), "/properties/x/type"),
        (json!({"type": []}), "/properties/x/type"),
        (
            json!({"type": "string", "description": 1}),
            "/properties/x/description",
        ),
        (
            json!({"type": "string", "minLength": -1}),
            "/properties/x/minLength",
        ),
        (
            json!({"type": "number", "maximum": "9"}),
            "/properties/x/maximum",
        ),
        (json!({"enum": []}), "/properties/x/enum"),
        (json!({"anyOf": {}}), "/properties/x/anyOf"),
        (json!(7), "/properties/x"),
    ];
    for (schema, path) in cases {
        let parameters = with_property(schema);
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            assert_eq!(
                err(dialect, &parameters).path,
                path,
                "{dialect} {parameters}"
            );
        }
    }
    let bad_properties = json!({"type": "object", "properties": [], "additionalProperties": false});
    assert_eq!(
        err(Dialect::OpenAiStrict, &bad_properties).path,
        "/properties"
    );
    assert_eq!(err(Dialect::Gemini, &bad_properties).path, "/properties");
    let bad_required = json!({"type": "object", "required": "a", "additionalProperties": false});
    assert_eq!(err(Dialect::OpenAiStrict, &bad_required).path, "/required");
}

#[test]
fn structural_refusals() {
    let tuple = with_property(json!({"type": "array", "items": [{"type": "string"}]}));
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        assert_eq!(
            err(dialect, &tuple),
            error(
                dialect,
                "/properties/x/items",
                &format!(
                    "{} does not support `items` as an array (tuple validation)",
                    dialect.provider()
                )
            )
        );
    }
    let both = with_property(json!({
        "anyOf": [{"type": "string"}],
        "oneOf": [{"type": "integer"}]
    }));
    for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
        assert_eq!(
            err(dialect, &both),
            error(
                dialect,
                "/properties/x/oneOf",
                &format!(
                    "{} cannot express `oneOf` next to `anyOf`: both would have to become the one `anyOf`",
                    dialect.provider()
                )
            )
        );
    }
    let const_and_enum = with_property(json!({"type": "string", "const": "a", "enum": ["a"]}));
    assert_eq!(
        err(Dialect::Gemini, &const_and_enum),
        error(
            Dialect::Gemini,
            "/properties/x/const",
            "Gemini cannot express `const` next to `enum`"
        )
    );
    let root_any_of = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": false,
        "anyOf": [{"required": ["a"]}]
    });
    assert_eq!(
        err(Dialect::OpenAiStrict, &root_any_of),
        error(
            Dialect::OpenAiStrict,
            "/anyOf",
            "OpenAI strict mode does not accept `anyOf` at the root of `parameters`"
        )
    );
}

/// Arbitrary keyword/value pairs, in properties and at the root: every
/// dialect answers with a definition or an error, never a panic.
#[test]
fn arbitrary_input_never_panics() {
    let keywords = [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "$ref",
        "$defs",
        "format",
        "pattern",
        "minimum",
        "minLength",
        "description",
        "title",
        "default",
        "uniqueItems",
        "prefixItems",
        "propertyOrdering",
        "nullable",
        "x-other",
    ];
    let values = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(1.5),
        json!("s"),
        json!("#"),
        json!("#/$defs"),
        json!("#/%FF"),
        json!("#/%"),
        json!([]),
        json!([null]),
        json!([{"type": "null"}]),
        json!(["string", "null"]),
        json!({}),
        json!({"type": "string"}),
        json!({"$ref": "#"}),
    ];
    let mut answers = 0;
    for keyword in keywords {
        for value in &values {
            let mut node = Map::new();
            node.insert(keyword.into(), value.clone());
            let mut typed = node.clone();
            typed.insert("type".into(), json!("object"));
            for parameters in [
                with_property(Value::Object(node)),
                with_property(Value::Object(typed.clone())),
                // The keyword at the root, next to `"type": "object"`.
                Value::Object(typed),
            ] {
                for dialect in Dialect::ALL {
                    match provider_tool(dialect, NAME, DESCRIPTION, &parameters) {
                        Ok(tool) => assert_eq!(tool["name"], json!(NAME)),
                        Err(e) => {
                            assert_eq!((e.tool.as_str(), e.dialect), (NAME, dialect));
                        }
                    }
                    answers += 1;
                }
            }
        }
    }
    assert_eq!(answers, keywords.len() * values.len() * 3 * 4);
}

#[test]
fn deep_nesting_is_an_error() {
    let mut schema = json!({"type": "string"});
    for _ in 0..200 {
        schema = json!({"type": "array", "items": schema});
    }
    let parameters = json!({
        "type": "object",
        "properties": {"deep": schema},
        "required": ["deep"],
        "additionalProperties": false
    });
    let path = format!("/properties/deep{}", "/items".repeat(128));
    for dialect in Dialect::ALL {
        assert_eq!(
            err(dialect, &parameters),
            error(dialect, &path, "schema is nested more than 128 levels deep")
        );
    }
}

#[test]
fn lowering_is_pure_and_deterministic() {
    for parameters in [
        canonical::<Weather>(),
        canonical::<Shape>(),
        canonical::<Paint>(),
    ] {
        let before = parameters.clone();
        for dialect in Dialect::ALL {
            let first = provider_tool(dialect, NAME, DESCRIPTION, &parameters);
            let second = provider_tool(dialect, NAME, DESCRIPTION, &parameters);
            assert_eq!(first, second);
            assert_eq!(
                first.map(|tool| tool.to_string()),
                second.map(|tool| tool.to_string())
            );
        }
        assert_eq!(parameters, before);
    }
}

// ---- The schema API -------------------------------------------------------

#[test]
fn lower_gives_the_schema_that_provider_tool_wraps() {
    let parameters = weather_canonical();
    for dialect in Dialect::ALL {
        assert_eq!(
            lower(dialect, &parameters).ok(),
            Some(schema_of(dialect, &parameters)),
            "{dialect}"
        );
    }
    assert_eq!(
        lower(Dialect::OpenAiCompatible, &parameters).ok(),
        Some(parameters.clone())
    );
    let compatible = ok(Dialect::OpenAiCompatible, &parameters);
    assert_eq!(compatible["parameters"], parameters);
    assert_eq!(compatible.get("strict"), None);
}

#[test]
fn errors_of_lower_name_the_tool_once_told() {
    let parameters = json!({"type": "string"});
    let Err(unnamed) = lower(Dialect::Mcp, &parameters) else {
        panic!("a string root is refused");
    };
    assert_eq!(unnamed.tool, "");
    assert_eq!(
        unnamed.to_string(),
        "the schema cannot be expressed in the mcp dialect at `/type`: tool parameters must have `\"type\": \"object\"`: arguments are always a JSON object"
    );
    assert_eq!(unnamed.for_tool(NAME), err(Dialect::Mcp, &parameters));
}

// ---- Bounds on hostile schemas ----------------------------------------

/// `count` branches of `oneOf` in `shape` (`unit`, `internal` or `external`, serde's enum
/// representations), as the parameter `e`.
fn many_variants(shape: &str, count: usize) -> Value {
    let branches: Vec<Value> = (0..count)
        .map(|i| match shape {
            "unit" => json!({"type": "string", "const": format!("v{i}"), "description": "A variant."}),
            "internal" => json!({
                "type": "object",
                "properties": {"kind": {"type": "string", "const": format!("v{i}")}, "x": {"type": "integer"}},
                "required": ["kind", "x"],
                "additionalProperties": false,
            }),
            _ => json!({
                "type": "object",
                "properties": {format!("V{i}"): {"type": "integer"}},
                "required": [format!("V{i}")],
                "additionalProperties": false,
            }),
        })
        .collect();
    json!({
        "type": "object",
        "properties": {"e": {"oneOf": branches}},
        "required": ["e"],
        "additionalProperties": false,
    })
}

/// The enums serde writes are proven exclusive in one pass, however many variants: pair by
/// pair, 1000 variants would take 500,000 steps, far past the proof's bound.
#[test]
fn enums_of_many_variants_are_proven_exclusive_in_one_pass() {
    for shape in ["unit", "internal", "external"] {
        let parameters = many_variants(shape, 1000);
        for dialect in [Dialect::OpenAiStrict, Dialect::Gemini] {
            let lowered = lower(dialect, &parameters).unwrap_or_else(|e| panic!("{shape}: {e}"));
            assert_eq!(
                lowered["properties"]["e"]["anyOf"].as_array().map(Vec::len),
                Some(1000),
                "{shape} {dialect}"
            );
        }
    }
    // Two variants that share a value are not exclusive, whichever way it is looked at.
    let mut parameters = many_variants("internal", 3);
    parameters["properties"]["e"]["oneOf"][2]["properties"]["kind"]["const"] = json!("v0");
    assert!(lower(Dialect::OpenAiStrict, &parameters).is_err());
    let mut parameters = many_variants("unit", 3);
    parameters["properties"]["e"]["oneOf"][2]["const"] = json!("v0");
    assert!(lower(Dialect::Gemini, &parameters).is_err());
}

/// A proof that does not end within its steps is refused, saying so.
#[test]
fn proofs_of_exclusive_branches_stop_at_their_bound() {
    let names: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    let properties: Map<String, Value> = names
        .iter()
        .map(|name| (name.clone(), json!({"$ref": "#/$defs/Node"})))
        .collect();
    let parameters = json!({
        "type": "object",
        "properties": {"x": {"oneOf": [{"$ref": "#/$defs/Node"}, {"$ref": "#/$defs/Node"}]}},
        "required": ["x"],
        "additionalProperties": false,
        "$defs": {"Node": {"type": "object", "properties": properties, "required": names, "additionalProperties": false}},
    });
    assert_eq!(
        err(Dialect::OpenAiStrict, &parameters),
        error(
            Dialect::OpenAiStrict,
            "/properties/x/oneOf",
            "OpenAI strict mode does not support `oneOf`, and branches 0 and 1 are not provably mutually exclusive within 20000 steps, so it cannot be rewritten as `anyOf`"
        )
    );
}

/// `refs` required properties, each a `$ref` with a description to a definition of
/// `fields` strings.
fn described_refs(refs: usize, fields: usize) -> Value {
    let big: Map<String, Value> = (0..fields)
        .map(|i| (format!("f{i}"), json!({"type": "string"})))
        .collect();
    let properties: Map<String, Value> = (0..refs)
        .map(|i| {
            (
                format!("r{i}"),
                json!({"$ref": "#/$defs/Big", "description": "x"}),
            )
        })
        .collect();
    let required: Vec<String> = properties.keys().cloned().collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
        "$defs": {"Big": {"type": "object", "properties": big, "required": [], "additionalProperties": false}},
    })
}

/// Inlining stops at the bound on copies: OpenAI strict keeps the reference and drops its
/// description (which validates nothing), Gemini, which has no `$ref`, is refused.
#[test]
fn inlining_stops_at_the_bound_on_copies() {
    let parameters = described_refs(200, 100);
    let canonical = parameters.to_string().len();
    let lowered = lower(Dialect::OpenAiStrict, &parameters).expect("lowers");
    let properties = lowered["properties"].as_object().expect("properties");
    let inlined = properties
        .values()
        .filter(|p| p.get("description").is_some())
        .count();
    let bare = properties
        .values()
        .filter(|p| *p == &json!({"$ref": "#/$defs/Big"}))
        .count();
    assert!(inlined > 0 && bare > 0, "{inlined} inlined, {bare} bare");
    assert_eq!(inlined + bare, 200);
    let size = lowered.to_string().len();
    assert!(
        size < 2 * lowering::MIN_COPY_BYTES + 2 * canonical,
        "{size}"
    );
    // The first ones, in order, keep their descriptions.
    assert!(
        properties
            .values()
            .take(inlined)
            .all(|p| p["description"] == "x")
    );
    let error = err(Dialect::Gemini, &parameters);
    // Gemini copies as much, and stops at the first reference OpenAI kept bare.
    let first_bare = properties.keys().nth(inlined).expect("a bare reference");
    assert_eq!(error.path, format!("/properties/{first_bare}/$ref"));
    assert!(
        error
            .reason
            .contains(&format!("at most {} bytes", lowering::MIN_COPY_BYTES)),
        "{error}"
    );
    // Within the bound, nothing changes.
    let small = described_refs(3, 3);
    assert_eq!(
        lower(Dialect::OpenAiStrict, &small).expect("lowers")["properties"]["r2"]["description"],
        "x"
    );
    assert!(lower(Dialect::Gemini, &small).is_ok());
}
