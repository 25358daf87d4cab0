use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

pub struct Greeter {
    greeting: String,
}

impl Greeter {
    /// Greets.
    #[agent_tool(name = "greet", usage = "Call to greet.")]
    async fn greet(&self, args: Args) -> Result<String, ToolError> {
        Ok(format!("{}, {}!", self.greeting, args.name))
    }
}

fn main() {}
