use aptix::prelude::*;

/// Signs the user in on the client. Its `redact` names the password only:
/// one pointer does not vouch for the other secret-looking fields.
#[agent_tool(
    name = "sign_in",
    usage = "Call to sign in.",
    executor = client,
    output = Done,
    redact = ["/password"]
)]
#[derive(Deserialize, JsonSchema)]
pub struct SignIn {
    /// The account.
    pub account: String,
    /// The password: redacted.
    pub password: String,
    /// The API key: not redacted.
    pub api_key: String,
}

/// What the client sends back.
#[derive(Deserialize, JsonSchema)]
pub struct Done {
    /// Whether it worked.
    pub ok: bool,
}

fn main() {}
