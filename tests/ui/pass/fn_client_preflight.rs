use aptix::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
pub struct OpenFile {
    /// The path to open.
    pub path: String,
}

/// What the client is asked to do.
#[derive(Serialize, JsonSchema)]
pub struct OpenFilePayload {
    /// The normalised path.
    pub path: String,
}

/// What the client sends back.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Opened {
    /// Whether the file was opened.
    pub opened: bool,
}

/// Opens a file in the user's editor.
#[agent_tool(
    name = "open_file",
    usage = "Call when the user asks to see a file.",
    executor = client,
    approval = requires_approval,
    output = Opened,
)]
async fn open_file(args: OpenFile) -> Result<OpenFilePayload, ToolError> {
    if args.path.contains("..") {
        return Err(ToolError::denied("paths may not leave the workspace"));
    }
    Ok(OpenFilePayload { path: args.path })
}

fn main() {
    assert_eq!(OpenFileTool::META.executor, aptix::meta::ExecutorKind::Client);
}
