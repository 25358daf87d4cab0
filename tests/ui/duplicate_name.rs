use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A name.
    pub name: String,
}

mod english {
    use super::*;

    /// Greets in English.
    #[agent_tool(name = "greet", usage = "Call to greet in English.")]
    pub async fn greet(args: Args) -> Result<String, ToolError> {
        Ok(format!("Hello, {}!", args.name))
    }
}

mod french {
    use super::*;

    /// Greets in French.
    #[agent_tool(name = "greet", usage = "Call to greet in French.")]
    pub async fn greet(args: Args) -> Result<String, ToolError> {
        Ok(format!("Bonjour, {} !", args.name))
    }
}

fn main() {}
