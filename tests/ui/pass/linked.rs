//! `Catalog::linked()` holds every tool declared in the binary, whatever its
//! form, and a user's crate that forbids `unsafe` code still compiles them.
#![forbid(unsafe_code)]

use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

/// Greets.
#[agent_tool(name = "greet", usage = "Call to greet.")]
async fn greet(args: Args) -> Result<String, ToolError> {
    Ok(args.name)
}

/// Whether the letter went.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    /// It did.
    pub sent: bool,
}

/// Sends a letter: a person does it and answers.
#[agent_tool(
    name = "send_letter",
    usage = "Call to send a letter.",
    executor = human,
    output = Sent,
)]
#[derive(Deserialize, JsonSchema)]
pub struct SendLetter {
    /// To whom.
    pub to: String,
}

mod nested {
    use aptix::prelude::*;

    /// Arguments.
    #[derive(Deserialize, JsonSchema)]
    pub struct Args {
        /// A number.
        pub n: i64,
    }

    /// Doubles.
    #[agent_tool(name = "double", usage = "Call to double a number.")]
    async fn double(args: Args) -> Result<i64, ToolError> {
        Ok(args.n * 2)
    }
}

fn main() {
    // One declared inside a function is linked too.
    /// Echoes.
    #[agent_tool(name = "echo", usage = "Call to echo.")]
    async fn echo(args: Args) -> Result<String, ToolError> {
        Ok(args.name)
    }

    let catalog = aptix::Catalog::linked()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let names: Vec<&str> = catalog.names().collect();
    assert_eq!(names, ["double", "echo", "greet", "send_letter"]);
    let _ = (greet, echo);
}
