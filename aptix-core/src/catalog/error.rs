//! What keeps a catalog from being built: each [`CatalogProblem`], worded
//! for the person who declared the tool, and the [`CatalogError`] that
//! reports them all at once.

use std::fmt;

use crate::meta::SourceLocation;
use crate::schema::DefinitionError;

/// One problem found while building a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogProblem {
    /// A tool's definition is unusable.
    #[error(transparent)]
    Definition(#[from] DefinitionError),
    /// Two different tools share a name; a model could not tell them apart.
    #[error(
        "two tools are named `{name}`: one declared at {first}, the other at {second}; tool names must be unique"
    )]
    DuplicateName {
        /// The shared name.
        name: String,
        /// The first declaration.
        first: SourceLocation,
        /// The second declaration.
        second: SourceLocation,
    },
    /// A tool's name is not 1 to 64 of `A-Z a-z 0-9 _ -`, what every
    /// provider accepts. `#[agent_tool]` checks this at compile time; a tool
    /// written by hand is checked here.
    #[error(
        "tool name `{name}`, declared at {location}, is invalid: a name is 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`"
    )]
    InvalidName {
        /// The name.
        name: String,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A tool's description or usage is empty: the model would not know
    /// what the tool does or when to call it.
    #[error("tool `{tool}`, declared at {location}, has an empty {field}")]
    MissingText {
        /// The tool's name.
        tool: String,
        /// `description` or `usage`.
        field: &'static str,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A server tool has no code to run: a tool written by hand with a
    /// `ToolFn` must return `Code::function::<Self>()` from `Tool::code`.
    #[error(
        "tool `{tool}`, declared at {location}, runs on the server but has no code: implement `ToolFn` and return `Code::function::<Self>()` from `Tool::code`, or declare it for a client, a person or the provider"
    )]
    MissingCode {
        /// The tool's name.
        tool: String,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A tool was asked for by name ([`Catalog::only`](super::Catalog::only))
    /// and the catalog has none of that name.
    #[error("the catalog has no tool named `{name}`; it has: {}", known.join(", "))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The names the catalog has, sorted.
        known: Vec<String>,
    },
    /// An activity is bound to a name no tool of the catalog has.
    #[error("an activity is bound to `{name}` (at {source_location}), but the catalog has no tool of that name; it has: {}", known.join(", "))]
    UnknownActivity {
        /// The name the activity is bound to.
        name: String,
        /// Where it was bound.
        source_location: SourceLocation,
        /// The names the catalog has, sorted.
        known: Vec<String>,
    },
    /// An activity is bound to a tool whose final behaviour does not
    /// happen on this server (a client, human or provider tool).
    #[error(
        "an activity is bound to `{name}` (at {source_location}), a {executor} tool: an activity runs on this server, so it can only be bound to a latent or server tool"
    )]
    ActivityNotOnServer {
        /// The tool's name.
        name: String,
        /// Where the activity was bound.
        source_location: SourceLocation,
        /// The tool's executor (`client`, `human` or `provider`).
        executor: &'static str,
    },
    /// An activity written for one tool type is bound to a tool of the same
    /// name made another way, whose arguments it might not read.
    #[error(
        "the activity bound to `{name}` (at {source_location}) takes the types of `{activity_type}`, but the catalog's `{name}` was declared at {tool_source}: bind it with `bind_json`, or bind the type the catalog holds"
    )]
    ActivityForAnotherTool {
        /// The tool's name.
        name: String,
        /// Where the activity was bound.
        source_location: SourceLocation,
        /// The tool type the activity was written for.
        activity_type: &'static str,
        /// Where the catalog's tool of that name was declared.
        tool_source: SourceLocation,
    },
    /// A tool names the activity that computes its result, and none of
    /// that name is bound.
    #[error(
        "tool `{tool}`, declared at {location}, names the activity `{activity}`, and no activity of that name is bound: bind one with `Activities::bind_json(\"{activity}\", ...)` (or `bind::<T>`), or leave `activity` out to run the tool latent"
    )]
    MissingActivity {
        /// The tool's name.
        tool: String,
        /// The activity it names.
        activity: String,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// An activity is bound to a tool's own name, and the tool names
    /// another activity, which wins: the one bound by name would never run.
    #[error(
        "an activity is bound to `{name}` (at {source_location}), but the tool `{name}` {}, which wins",
        shadowed_because(named)
    )]
    ActivityShadowed {
        /// The tool's name.
        name: String,
        /// Where the shadowed activity was bound.
        source_location: SourceLocation,
        /// The activity the tool names.
        named: String,
    },
    /// A tool that is not latent names an activity: only a latent tool's
    /// result comes from one.
    #[error(
        "tool `{tool}`, declared at {location}, names an activity but is a {executor} tool: only a latent tool's result comes from an activity"
    )]
    ActivityOnNonLatentTool {
        /// The tool's name.
        tool: String,
        /// Its executor.
        executor: &'static str,
        /// Where the tool was declared.
        location: SourceLocation,
    },
    /// A field looks secret and the tool declares neither `redact` nor
    /// `log_fields`, so its value would be shown in agent events.
    #[error(transparent)]
    UndeclaredSecret(#[from] crate::secrets::UndeclaredSecret),
}

/// Every problem that kept a catalog from being built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    /// The problems, in tool-name order.
    pub problems: Vec<CatalogProblem>,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the tool catalog is invalid ({} problem",
            self.problems.len()
        )?;
        if self.problems.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str("):")?;
        for problem in &self.problems {
            write!(f, "\n- {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CatalogError {}

/// Why an activity bound to a tool's own name never runs.
fn shadowed_because(named: &str) -> String {
    if named.is_empty() {
        "is declared latent (`activity = \"\"`): the model gives its result".to_owned()
    } else {
        format!("names the activity `{named}`; bind `{named}` instead")
    }
}
