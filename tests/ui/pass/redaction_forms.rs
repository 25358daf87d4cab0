use aptix::prelude::*;

/// Signs the user in on the client; `redact = []` says nothing here is secret
/// (the "password" is the name of a password field in a form to fill).
#[agent_tool(
    name = "fill_form",
    usage = "Call to fill a form.",
    executor = client,
    output = Filled,
    redact = []
)]
#[derive(Deserialize, JsonSchema)]
pub struct FillForm {
    /// The label of the password field.
    pub password_label: String,
}

/// Signs in; only the account is shown in events and logs.
#[agent_tool(
    name = "sign_in",
    usage = "Call to sign in.",
    executor = client,
    output = Filled,
    log_fields = ["/account"]
)]
#[derive(Deserialize, JsonSchema)]
pub struct SignIn {
    /// The account.
    pub account: String,
    /// The password.
    pub password: String,
}

/// Counts, cursors and flags are not secrets: no declaration needed.
#[agent_tool(name = "summarize", usage = "Call to summarize.", executor = client, output = Filled)]
#[derive(Deserialize, JsonSchema)]
pub struct Summarize {
    /// The most tokens to spend.
    pub max_tokens: u32,
    /// Where the listing continues.
    pub page_token: Option<String>,
    /// Whether a password is set.
    pub password_set: bool,
}

/// What the client sends back.
#[derive(Deserialize, JsonSchema)]
pub struct Filled {
    /// Whether it worked.
    pub ok: bool,
}

#[derive(Deserialize, JsonSchema)]
pub struct Login {
    /// The user.
    pub user: String,
    /// The password.
    pub password: String,
}

/// Logs in.
#[agent_tool(name = "login", usage = "Call to log in.", redact = ["/password"])]
async fn login(args: Login) -> Result<String, ToolError> {
    Ok(args.user)
}

fn main() {
    use aptix::meta::Redaction;
    assert_eq!(<FillForm as Tool>::META.redaction, Redaction::Deny(&[]));
    assert_eq!(
        <SignIn as Tool>::META.redaction,
        Redaction::Allow(&["/account"])
    );
    assert_eq!(<Summarize as Tool>::META.redaction, Redaction::Undeclared);
    assert_eq!(LoginTool::META.redaction, Redaction::Deny(&["/password"]));
}
