//! Rules the macro cannot see are enforced when the catalog is built: the
//! arguments of the function form must be an object with a description on
//! every field, and names must be unique across crates. Every problem is
//! reported at once, naming the tool, the type, the field and the source.

use aptix::prelude::*;
use aptix::{Catalog, CatalogProblem, DefinitionError};

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
    const NAME: &'static str = "shared_name";
    const USAGE: &'static str = "Test tool.";
    const DESCRIPTION: &'static str = "Another tool with the same name.";
    const EXECUTOR: aptix::ExecutorKind = aptix::ExecutorKind::Server;
    const APPROVAL: aptix::Approval = aptix::Approval::Auto;
    const TIMEOUT: Option<std::time::Duration> = None;
    const SOURCE: aptix::SourceLocation = aptix::SourceLocation {
        file: "other_crate/src/lib.rs",
        line: 7,
        module_path: "other_crate",
    };
    type Args = Empty;
    type Output = ();
    fn definition() -> Result<&'static aptix::ToolDefinition, &'static DefinitionError> {
        static DEFINITION: std::sync::OnceLock<Result<aptix::ToolDefinition, DefinitionError>> =
            std::sync::OnceLock::new();
        DEFINITION
            .get_or_init(aptix::ToolDefinition::build::<Self>)
            .as_ref()
    }
    fn dyn_tool() -> &'static dyn aptix::DynTool {
        &aptix::executor::FnTool::<Self>::NEW
    }
}

impl aptix::ToolFn for Impostor {
    type Returned = ();
    async fn call(_args: Empty, _ctx: &ToolContext) -> Result<(), ToolError> {
        Ok(())
    }
}

#[test]
fn linked_catalog_reports_every_problem_at_once() {
    let error = match Catalog::builder().linked().tool::<Impostor>().build() {
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
            assert_eq!(*name, "shared_name");
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
            assert_eq!(type_name, "catalog_errors::Sloppy");
        }
        other => panic!("{other:?}"),
    }
    assert!(problems.next().is_none());
    assert!(
        text.contains(
            "field `undocumented` of `catalog_errors::Sloppy` has no description; add a doc comment"
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

#[test]
fn an_empty_link_list_explains_the_linker_trap() {
    assert_eq!(
        CatalogProblem::NoLinkedTools.to_string(),
        "no tools are linked into this binary: declare tools with #[agent_tool], and name crates that declare them (`aptix::link_tools!(my_tools);`) so the linker keeps them"
    );
}

/// A tool written by hand, as another crate's code generator might: the
/// catalog checks what the macro would have refused at compile time.
macro_rules! hand_tool {
    ($ty:ident, $name:expr, $usage:expr, $description:expr) => {
        /// A hand-written tool.
        pub struct $ty;

        impl aptix::Tool for $ty {
            const NAME: &'static str = $name;
            const USAGE: &'static str = $usage;
            const DESCRIPTION: &'static str = $description;
            const EXECUTOR: aptix::ExecutorKind = aptix::ExecutorKind::Server;
            const APPROVAL: aptix::Approval = aptix::Approval::Auto;
            const TIMEOUT: Option<std::time::Duration> = None;
            const SOURCE: aptix::SourceLocation = aptix::SourceLocation {
                file: "hand/src/lib.rs",
                line: 1,
                module_path: "hand",
            };
            type Args = Empty;
            type Output = ();
            fn definition() -> Result<&'static aptix::ToolDefinition, &'static DefinitionError> {
                static DEFINITION: std::sync::OnceLock<
                    Result<aptix::ToolDefinition, DefinitionError>,
                > = std::sync::OnceLock::new();
                DEFINITION
                    .get_or_init(aptix::ToolDefinition::build::<Self>)
                    .as_ref()
            }
            fn dyn_tool() -> &'static dyn aptix::DynTool {
                &aptix::executor::FnTool::<Self>::NEW
            }
        }

        impl aptix::ToolFn for $ty {
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
