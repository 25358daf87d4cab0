//! Rules the macro cannot see are enforced when the catalog is built: the
//! arguments of the function form must be an object with a description on
//! every field, and names must be unique across crates. Every problem is
//! reported at once, naming the tool, the type, the field and the source.

use aptix::prelude::*;
use aptix::{Catalog, catalog::CatalogProblem, schema::DefinitionError};

/// Takes a bare string: not an object.
#[agent_tool(name = "bare_string", usage = "Test tool.")]
async fn bare_string(args: String) -> Result<String, ToolError> {
    Ok(args)
}

/// Arguments with an undocumented field.
#[derive(Deserialize, JsonSchema)]
pub struct Sloppy {
    /// Documented.
    pub documented: String,
    #[allow(missing_docs)] // the point of the test
    pub undocumented: String,
}

/// Has an undocumented field.
#[agent_tool(name = "sloppy", usage = "Test tool.")]
async fn sloppy(args: Sloppy) -> Result<String, ToolError> {
    Ok(args.documented + &args.undocumented)
}

/// A nested struct whose field is undocumented.
#[derive(Deserialize, JsonSchema)]
pub struct Outer {
    /// The inner part.
    pub inner: Inner,
}

/// Inner part.
#[derive(Deserialize, JsonSchema)]
pub struct Inner {
    #[allow(missing_docs)] // the point of the test
    pub bare: u32,
}

/// Has an undocumented nested field.
#[agent_tool(name = "nested_sloppy", usage = "Test tool.")]
async fn nested_sloppy(args: Outer) -> Result<u32, ToolError> {
    Ok(args.inner.bare)
}

/// An enum: one of several shapes, not an object.
#[derive(Deserialize, JsonSchema)]
pub enum Choice {
    /// A.
    A {
        /// x.
        x: u32,
    },
    /// B.
    B {
        /// y.
        y: u32,
    },
}

/// Takes an enum.
#[agent_tool(name = "choice", usage = "Test tool.")]
async fn choice(_args: Choice) -> Result<(), ToolError> {
    Ok(())
}

/// Fine on its own.
#[agent_tool(name = "shared_name", usage = "Test tool.")]
async fn shared_name(_args: Empty) -> Result<(), ToolError> {
    Ok(())
}

/// No parameters.
#[derive(Deserialize, JsonSchema)]
pub struct Empty {}

/// A tool implemented by hand (as another crate's macro expansion would be),
/// reusing `shared_name`: only the catalog can see this clash.
pub struct Impostor;

impl aptix::Tool for Impostor {
    const META: aptix::meta::ToolMeta = aptix::meta::ToolMeta::new(
        "shared_name",
        "Test tool.",
        "Another tool with the same name.",
        aptix::meta::SourceLocation {
            file: "other_crate/src/lib.rs",
            line: 7,
            module_path: "other_crate",
        },
    );
    type Args = Empty;
    type Output = ();
    fn code() -> aptix::tool::Code {
        aptix::tool::Code::function::<Self>()
    }
}

impl aptix::tool::ToolFn for Impostor {
    type Returned = ();
    async fn call(_args: Empty, _ctx: &ToolContext) -> Result<(), ToolError> {
        Ok(())
    }
}

#[test]
fn a_catalog_reports_every_problem_at_once() {
    let tools = aptix::tools![
        BareStringTool,
        SloppyTool,
        NestedSloppyTool,
        ChoiceTool,
        SharedNameTool,
        Impostor,
    ];
    let error = match tools.build() {
        Ok(catalog) => panic!("expected errors, got {catalog:?}"),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(
        text.starts_with("the tool catalog is invalid (5 problems):"),
        "{text}"
    );
    let mut problems = error.problems.iter();
    let file = file!();

    match problems.next() {
        Some(CatalogProblem::Definition(DefinitionError::ArgsNotObject {
            tool,
            type_name,
            found,
            ..
        })) => {
            assert_eq!(
                (tool.as_str(), type_name.as_str(), found.as_str()),
                ("bare_string", "alloc::string::String", "a JSON string")
            );
        }
        other => panic!("{other:?}"),
    }
    match problems.next() {
        Some(CatalogProblem::Definition(DefinitionError::ArgsNotObject {
            tool, found, ..
        })) => {
            assert_eq!(
                (tool.as_str(), found.as_str()),
                ("choice", "an enum (one of several shapes)")
            );
        }
        other => panic!("{other:?}"),
    }
    match problems.next() {
        Some(CatalogProblem::Definition(DefinitionError::UndocumentedField {
            tool,
            type_name,
            field,
            source_location,
        })) => {
            assert_eq!(
                (tool.as_str(), type_name.as_str(), field.as_str()),
                ("nested_sloppy", "Inner", "bare")
            );
            assert!(source_location.starts_with(file), "{source_location}");
        }
        other => panic!("{other:?}"),
    }
    match problems.next() {
        Some(CatalogProblem::DuplicateName {
            name,
            first,
            second,
        }) => {
            assert_eq!(name, "shared_name");
            let files = [first.file, second.file];
            assert!(
                files.contains(&"other_crate/src/lib.rs") && files.contains(&file),
                "{files:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    match problems.next() {
        Some(CatalogProblem::Definition(DefinitionError::UndocumentedField {
            tool,
            type_name,
            field,
            ..
        })) => {
            assert_eq!((tool.as_str(), field.as_str()), ("sloppy", "undocumented"));
            assert_eq!(type_name, "catalog::catalog_errors::Sloppy");
        }
        other => panic!("{other:?}"),
    }
    assert!(problems.next().is_none());
    assert!(
        text.contains(
            "field `undocumented` of `catalog::catalog_errors::Sloppy` has no description; add a doc comment"
        ),
        "{text}"
    );
    assert!(
        text.contains("two tools are named `shared_name`: one declared at"),
        "{text}"
    );
}

#[test]
fn a_valid_subset_still_builds() {
    let catalog = Catalog::builder().tool::<SharedNameTool>().build();
    assert!(catalog.is_ok(), "{catalog:?}");
}

/// A tool written by hand, as another crate's code generator might: the
/// catalog checks what the macro would have refused at compile time.
macro_rules! hand_tool {
    ($ty:ident, $name:expr, $usage:expr, $description:expr) => {
        /// A hand-written tool.
        pub struct $ty;

        impl aptix::Tool for $ty {
            const META: aptix::meta::ToolMeta = aptix::meta::ToolMeta::new(
                $name,
                $usage,
                $description,
                aptix::meta::SourceLocation {
                    file: "hand/src/lib.rs",
                    line: 1,
                    module_path: "hand",
                },
            );
            type Args = Empty;
            type Output = ();
            fn code() -> aptix::tool::Code {
                aptix::tool::Code::function::<Self>()
            }
        }

        impl aptix::tool::ToolFn for $ty {
            type Returned = ();
            async fn call(_args: Empty, _ctx: &ToolContext) -> Result<(), ToolError> {
                Ok(())
            }
        }
    };
}

hand_tool!(Spaced, "send email", "Test tool.", "Sends an email.");
hand_tool!(
    TooLong,
    "a_name_of_sixty_five_characters_is_one_character_longer_than_64_x",
    "Test tool.",
    "Too long."
);
hand_tool!(Nameless, "", "Test tool.", "No name.");
hand_tool!(NoUsage, "no_usage", "", "Has no usage.");
hand_tool!(NoDescription, "no_description", "Test tool.", "  ");
hand_tool!(Fine, "fine-tool_2", "Test tool.", "Fine.");

#[test]
fn hand_written_tools_are_checked_like_declared_ones() {
    let error = match Catalog::builder()
        .tool::<Spaced>()
        .tool::<TooLong>()
        .tool::<Nameless>()
        .tool::<NoUsage>()
        .tool::<NoDescription>()
        .tool::<Fine>()
        .build()
    {
        Ok(catalog) => panic!("expected errors, got {catalog:?}"),
        Err(error) => error,
    };
    let text = error.to_string();
    assert!(
        text.starts_with("the tool catalog is invalid (5 problems):"),
        "{text}"
    );
    let problems: Vec<(String, &str)> = error
        .problems
        .iter()
        .map(|problem| match problem {
            CatalogProblem::InvalidName { name, location } => {
                assert_eq!(location.file, "hand/src/lib.rs");
                (name.to_string(), "name")
            }
            CatalogProblem::MissingText {
                tool,
                field,
                location,
            } => {
                assert_eq!(location.file, "hand/src/lib.rs");
                (tool.to_string(), *field)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        problems,
        [
            (String::new(), "name"),
            (
                "a_name_of_sixty_five_characters_is_one_character_longer_than_64_x".to_owned(),
                "name"
            ),
            ("no_description".to_owned(), "description"),
            ("no_usage".to_owned(), "usage"),
            ("send email".to_owned(), "name"),
        ]
    );
    assert!(
        text.contains("tool name `send email`, declared at hand/src/lib.rs:1 (hand), is invalid: a name is 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`"),
        "{text}"
    );
    assert!(
        text.contains("tool `no_usage`, declared at hand/src/lib.rs:1 (hand), has an empty usage"),
        "{text}"
    );
    assert!(Catalog::builder().tool::<Fine>().build().is_ok());
}

/// A run-time tool's closure: never run by these tests.
async fn never_run(
    _args: serde_json::Value,
    _ctx: ToolContext,
) -> Result<serde_json::Value, ToolError> {
    Ok(serde_json::Value::Null)
}

/// A closed object with one described field, as the macro makes them.
fn city_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": { "city": { "type": "string", "description": "The city." } },
        "required": ["city"],
        "additionalProperties": false,
    })
}

#[test]
fn tools_made_at_run_time_are_checked_like_declared_ones() {
    use aptix::ToolEntry;
    let entries = [
        ToolEntry::from_json_schema(
            "send email",
            "Test tool.",
            "Sends.",
            city_schema(),
            never_run,
        ),
        ToolEntry::from_json_schema("", "Test tool.", "No name.", city_schema(), never_run),
        ToolEntry::from_json_schema("no_usage", "", "Has no usage.", city_schema(), never_run),
        ToolEntry::from_json_schema(
            "no_description",
            "Test tool.",
            " ",
            city_schema(),
            never_run,
        ),
        ToolEntry::from_json_schema(
            "bare_array",
            "Test tool.",
            "Takes an array.",
            serde_json::json!({ "type": "array" }),
            never_run,
        ),
        ToolEntry::from_json_schema(
            "undocumented",
            "Test tool.",
            "A field without a description.",
            serde_json::json!({
                "type": "object",
                "properties": { "city": { "type": "string" } },
                "additionalProperties": false,
            }),
            never_run,
        ),
        ToolEntry::from_json_schema(
            "broken_schema",
            "Test tool.",
            "Not a schema jsonschema compiles.",
            serde_json::json!({
                "type": "object",
                "properties": { "city": { "type": 7, "description": "The city." } },
            }),
            never_run,
        ),
        ToolEntry::from_json_schema(
            "secretive",
            "Test tool.",
            "Takes a password and declares no redaction.",
            serde_json::json!({
                "type": "object",
                "properties": { "password": { "type": "string", "description": "The password." } },
                "additionalProperties": false,
            }),
            never_run,
        ),
        ToolEntry::declared_json_schema(
            "codeless",
            "Test tool.",
            "A server tool without code.",
            city_schema(),
        ),
        ToolEntry::from_json_schema(
            "fine_at_run_time",
            "Test tool.",
            "Fine.",
            city_schema(),
            never_run,
        ),
    ];
    let builder = entries
        .into_iter()
        .fold(Catalog::builder(), |builder, entry| builder.entry(entry));
    let error = match builder.build() {
        Ok(catalog) => panic!("expected errors, got {catalog:?}"),
        Err(error) => error,
    };
    let found: Vec<(String, &str)> = error
        .problems
        .iter()
        .map(|problem| match problem {
            CatalogProblem::InvalidName { name, location } => {
                assert!(location.file.ends_with("catalog_errors.rs"), "{location}");
                (name.clone(), "name")
            }
            CatalogProblem::MissingText { tool, field, .. } => (tool.clone(), *field),
            CatalogProblem::MissingCode { tool, .. } => (tool.clone(), "code"),
            CatalogProblem::UndeclaredSecret(secret) => (secret.tool.clone(), "secret"),
            CatalogProblem::Definition(DefinitionError::ArgsNotObject { tool, found, .. }) => {
                assert_eq!(found, "a JSON array");
                (tool.clone(), "not an object")
            }
            CatalogProblem::Definition(DefinitionError::UndocumentedField {
                tool, field, ..
            }) => {
                assert_eq!(field, "city");
                (tool.clone(), "undocumented")
            }
            CatalogProblem::Definition(DefinitionError::InvalidSchema { tool, .. }) => {
                (tool.clone(), "invalid schema")
            }
            other => panic!("{other:?}"),
        })
        .collect();
    let expected: Vec<(String, &str)> = [
        ("", "name"),
        ("bare_array", "not an object"),
        ("broken_schema", "invalid schema"),
        ("codeless", "code"),
        ("no_description", "description"),
        ("no_usage", "usage"),
        ("secretive", "secret"),
        ("send email", "name"),
        ("undocumented", "undocumented"),
    ]
    .into_iter()
    .map(|(name, what)| (name.to_owned(), what))
    .collect();
    assert_eq!(found, expected);
    assert!(
        error
            .to_string()
            .starts_with("the tool catalog is invalid (9 problems):"),
        "{error}"
    );
}

#[test]
fn a_tool_made_at_run_time_cannot_reuse_a_declared_name() {
    let made = aptix::ToolEntry::from_json_schema(
        "shared_name",
        "Test tool.",
        "Made at run time.",
        city_schema(),
        never_run,
    );
    let error = match Catalog::builder()
        .tool::<SharedNameTool>()
        .entry(made)
        .build()
    {
        Ok(catalog) => panic!("expected a duplicate, got {catalog:?}"),
        Err(error) => error,
    };
    match error.problems.as_slice() {
        [
            CatalogProblem::DuplicateName {
                name,
                first,
                second,
            },
        ] => {
            assert_eq!(name, "shared_name");
            // Both point at this file: the declaration and the call that made the other.
            assert!(first.file.ends_with("catalog_errors.rs"), "{first}");
            assert!(second.file.ends_with("catalog_errors.rs"), "{second}");
            assert_ne!(first.line, second.line);
        }
        other => panic!("{other:?}"),
    }
    // The same tool added twice is one tool; a made tool added twice is two.
    assert!(
        Catalog::builder()
            .tool::<SharedNameTool>()
            .tool::<SharedNameTool>()
            .build()
            .is_ok()
    );
    let twice = || {
        aptix::ToolEntry::from_json_schema("made", "Test tool.", "Made.", city_schema(), never_run)
    };
    assert!(
        Catalog::builder()
            .entry(twice())
            .entry(twice())
            .build()
            .is_err()
    );
}

/// What `untold` answers, with one field the model is not told about.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// Whether the claim holds.
    pub holds: bool,
    because: String,
}

/// Judges a claim (latent: the model gives the `Verdict`).
#[agent_tool(name = "untold", usage = "Test tool.", output = Verdict)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Untold {
    /// The claim to judge.
    pub claim: String,
}

/// A latent tool's output is offered as the `_output` member the model
/// fills: its fields need descriptions as the arguments' do, whether it is
/// declared or made at run time. A tool with code never shows its output.
#[test]
fn a_latent_tools_output_fields_need_descriptions() {
    let declared = match Catalog::builder().tool::<Untold>().build() {
        Ok(catalog) => panic!("expected an error, got {catalog:?}"),
        Err(error) => error,
    };
    match declared.problems.as_slice() {
        [
            CatalogProblem::Definition(DefinitionError::UndocumentedField {
                tool,
                type_name,
                field,
                ..
            }),
        ] => assert_eq!(
            (tool.as_str(), type_name.as_str(), field.as_str()),
            ("untold", "_output", "because")
        ),
        other => panic!("{other:?}"),
    }
    let output = serde_json::json!({
        "type": "object",
        "properties": {
            "holds": { "type": "boolean", "description": "Whether it holds." },
            "because": { "type": "string" }
        },
        "required": ["holds", "because"]
    });
    let made = Catalog::builder()
        .entry(aptix::ToolEntry::latent(
            "untold_json",
            "Test tool.",
            "Judges a claim.",
            city_schema(),
            output.clone(),
        ))
        .build();
    let Err(made) = made else {
        panic!("a run-time latent tool with an undocumented output field was accepted")
    };
    assert!(
        made.to_string()
            .contains("field `because` of `_output` has no description"),
        "{made}"
    );
    // With code of its own, the output is never offered: nothing to check.
    let with_code = Catalog::builder()
        .entry(
            aptix::ToolEntry::from_json_schema(
                "judge",
                "Test tool.",
                "Judges a claim.",
                city_schema(),
                never_run,
            )
            .output_schema(output),
        )
        .build();
    assert!(with_code.is_ok(), "{with_code:?}");
}
