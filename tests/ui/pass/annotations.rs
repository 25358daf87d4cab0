use aptix::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The path to read.
    pub path: String,
}

/// Reads a file.
#[agent_tool(
    name = "read_file",
    usage = "Call to read a file.",
    title = "Read a file",
    read_only = true,
    open_world = false
)]
async fn read_file(args: Args) -> Result<String, ToolError> {
    Ok(args.path)
}

/// Deletes a file.
#[agent_tool(
    name = "delete_file",
    usage = "Call to delete a file.",
    idempotent = true
)]
async fn delete_file(args: Args) -> Result<String, ToolError> {
    Ok(args.path)
}

fn main() {
    let read = ReadFileTool::definition()
        .ok()
        .map(|d| (d.title(), d.annotations()));
    assert_eq!(
        read,
        Some((
            Some("Read a file"),
            aptix::meta::Annotations {
                read_only: true,
                destructive: true,
                idempotent: false,
                open_world: false
            }
        ))
    );
    // Absent keys take the MCP defaults.
    let delete = DeleteFileTool::definition()
        .ok()
        .map(|d| (d.title(), d.annotations()));
    assert_eq!(
        delete,
        Some((
            None,
            aptix::meta::Annotations {
                read_only: false,
                destructive: true,
                idempotent: true,
                open_world: true
            }
        ))
    );
}
