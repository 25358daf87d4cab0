use aptix::prelude::*;

/// Whether it went out.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    /// True once sent.
    pub sent: bool,
}

/// Sends a message, through an activity named with a dot and a space.
#[agent_tool(
    name = "send",
    usage = "Call to send a message.",
    output = Sent,
    activity = "mail.send now"
)]
#[derive(Deserialize, JsonSchema)]
pub struct Send {
    /// The message.
    pub text: String,
}

fn main() {}
