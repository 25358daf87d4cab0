use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The path to read.
    pub path: String,
}

/// Reads a file.
#[agent_tool(name = "read_file", usage = "Call to read a file.", read_only = true, destructive = true)]
async fn read_file(args: Args) -> Result<String, ToolError> {
    Ok(args.path)
}

fn main() {}
