use aptix::prelude::*;

/// Signs the user in on the client.
#[agent_tool(name = "sign_in", usage = "Call to sign in.", executor = client, output = Done)]
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignIn {
    /// The account.
    pub account: String,
    /// The password.
    pub password: String,
    /// The API key, as the client names it.
    pub api_key: String,
    /// The OAuth token.
    #[serde(rename = "bearer")]
    pub header: String,
    /// Whether a password is set: a flag holds no secret.
    pub password_set: bool,
    /// The most tokens to spend: a count, not a credential.
    pub max_tokens: u32,
    /// Where the listing continues: a cursor, not a credential.
    pub page_token: Option<String>,
}

/// What the client sends back.
#[derive(Deserialize, JsonSchema)]
pub struct Done {
    /// Whether it worked.
    pub ok: bool,
}

fn main() {}
