use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct ReadFile {
    /// The path to read.
    pub path: String,
}

/// Reads a file.
#[agent_tool(name = "read_file", usage = "Call to read a file.")]
async fn read_file(args: ReadFile) -> Result<String, std::io::Error> {
    std::fs::read_to_string(args.path)
}

fn main() {
    assert_eq!(ReadFileTool::NAME, "read_file");
}
