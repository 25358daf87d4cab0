use aptix::prelude::*;

/// What the client sends back.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Selection {
    /// The selected text.
    pub text: String,
}

/// Reads the text the user selected in the editor.
#[agent_tool(
    name = "read-selection",
    usage = "Call when the user refers to the selected text.",
    executor = client,
    output = Selection,
)]
#[derive(Deserialize, JsonSchema)]
pub struct ReadSelection {
    /// Whether to include the surrounding line.
    pub with_line: bool,
}

fn main() {
    assert_eq!(ReadSelection::NAME, "read-selection");
    assert_eq!(ReadSelection::META.executor, aptix::meta::ExecutorKind::Client);
}
