use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The city.
    pub city: String,
    /// The password.
    pub password: String,
}

/// Logs in.
#[agent_tool(
    name = "login",
    usage = "Call to log in.",
    redact = ["/password"],
    log_fields = ["/city", "city"]
)]
async fn login(args: Args) -> Result<String, ToolError> {
    Ok(args.city)
}

fn main() {}
