use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The password.
    pub password: String,
}

/// Logs in.
#[agent_tool(name = "login", usage = "Call to log in.", redact = ["password", "/a~2b"])]
async fn login(args: Args) -> Result<String, ToolError> {
    Ok(args.password)
}

fn main() {}
