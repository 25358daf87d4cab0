//! Declared secrets never leave: not in any event (its `Debug`, its JSON),
//! not in any log line, whatever the call does (fails validation, sends
//! broken JSON, suspends for an approval), in the deny-list form
//! (`redact`) and the allowlist form (`log_fields`).

use crate::common::Captured;
use aptix::prelude::*;
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, DurableAgent, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Arguments of `log_in`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Login {
    /// The user name.
    pub user: String,
    /// The password.
    #[schemars(length(min = 12))]
    pub password: String,
}

/// Logs in.
#[agent_tool(name = "log_in", usage = "Test tool.", redact = ["/password"])]
async fn log_in(args: Login) -> Result<String, ToolError> {
    Ok(format!("welcome {}", args.user))
}

/// Arguments of `store_token`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StoreToken {
    /// Where the token is for.
    pub service: String,
    /// The token.
    #[schemars(regex(pattern = r"^tok_[a-z0-9]+$"))]
    pub token: String,
}

/// Stores an API token.
#[agent_tool(
    name = "store_token",
    usage = "Test tool.",
    redact = ["/token"],
    approval = requires_approval
)]
async fn store_token(args: StoreToken) -> Result<String, ToolError> {
    Ok(format!("stored for {}", args.service))
}

/// Arguments of `ship`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Ship {
    /// The destination city.
    #[schemars(length(max = 20))]
    pub city: String,
    /// The street address.
    #[schemars(length(min = 30))]
    pub street: String,
    /// A note for the courier.
    pub note: Note,
}

/// A note.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Note {
    /// The text.
    pub text: String,
}

/// What `ship` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Shipment {
    /// The destination city.
    pub city: String,
    /// The label printed on the parcel.
    pub label: String,
}

/// Ships a parcel; only the city is shown in events and logs.
#[agent_tool(name = "ship", usage = "Test tool.", log_fields = ["/city"])]
async fn ship(args: Ship) -> Result<Shipment, ToolError> {
    Ok(Shipment {
        label: format!("{} / {} / {}", args.street, args.city, args.note.text),
        city: args.city,
    })
}

/// Asks a client to sign in; the client's answer carries a session secret.
#[agent_tool(
    name = "client_sign_in",
    usage = "Test tool.",
    executor = client,
    output = SignedIn,
    redact = ["/otp", "/session"]
)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClientSignIn {
    /// The account.
    pub account: String,
    /// A one-time code.
    pub otp: String,
}

/// What the client sends back.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SignedIn {
    /// The session secret.
    pub session: String,
}

/// Every tool this file declares with `#[agent_tool]`.
fn every_tool() -> Catalog {
    aptix::tools![LogInTool, StoreTokenTool, ShipTool, ClientSignIn]
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn agent(turns: Vec<ScriptedTurn>) -> Agent {
    Agent::builder()
        .model(ScriptedModel::new(turns))
        .catalog(every_tool())
        .max_iterations(4)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Everything an application might print or ship of an event: its `Debug`,
/// and the JSON it carries (arguments, envelopes, suspended payloads).
fn shown(event: &AgentEvent) -> Vec<(String, String)> {
    let mut shown = vec![("Debug".to_owned(), format!("{event:?}"))];
    match event {
        AgentEvent::ToolCallStart { id, arguments, .. } => {
            shown.push((format!("ToolCallStart {id}"), arguments.to_string()));
        }
        AgentEvent::ToolCallResult { id, envelope, .. } => {
            shown.push((format!("ToolCallResult {id}"), envelope.to_string()));
        }
        AgentEvent::Done {
            reason: DoneReason::Suspended(calls),
            ..
        } => {
            for call in calls {
                shown.push((
                    format!("Done::Suspended {}", call.tool_call_id),
                    call.awaiting.payload.to_string(),
                ));
                shown.push((
                    format!("Done::Suspended {} (Debug)", call.tool_call_id),
                    format!("{call:?}"),
                ));
            }
        }
        _ => {}
    }
    shown
}

/// Runs `turns` with a TRACE subscriber capturing every log line; returns
/// the events and the logs.
async fn run_logged(turns: Vec<ScriptedTurn>, conversation: &str) -> (Vec<AgentEvent>, String) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = crate::common::capture_logs(subscriber);
    let agent = agent(turns);
    let mut conversation = Conversation::new(conversation);
    let events: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("go".into()))
        .collect()
        .await;
    (events, captured.text())
}

fn assert_never_shown(events: &[AgentEvent], logs: &str, secrets: &[&str]) {
    let mut leaks = Vec::new();
    for event in events {
        for (place, text) in shown(event) {
            for secret in secrets {
                if text.contains(secret) {
                    leaks.push(format!("LEAK of {secret:?} in {place}: {text}"));
                }
            }
        }
    }
    for line in logs.lines() {
        for secret in secrets {
            if line.contains(secret) {
                leaks.push(format!("LEAK of {secret:?} in a log line: {line}"));
            }
        }
    }
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

fn results(events: &[AgentEvent]) -> Vec<(&str, &Value)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallResult { id, envelope, .. } => Some((id.as_str(), envelope)),
            _ => None,
        })
        .collect()
}

fn suspended(events: &[AgentEvent]) -> &[aptix::agent::SuspendedCall] {
    events
        .iter()
        .find_map(|event| match event {
            AgentEvent::Done {
                reason: DoneReason::Suspended(calls),
                ..
            } => Some(calls.as_slice()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the run did not suspend: {events:?}"))
}

/// One run whose calls carry secrets: one fails validation, one sends
/// broken JSON, one suspends.
#[tokio::test]
async fn no_declared_secret_appears_in_any_event_or_log_line() {
    let (events, logs) = run_logged(
        vec![
            ScriptedTurn::new()
                .tool_call("c1", "log_in", r#"{"user":"ada","password":"hunter2"}"#)
                .tool_call(
                    "c2",
                    "log_in",
                    r#"{"user":"ada","password":"correct horse battery staple"#,
                )
                .tool_call(
                    "c3",
                    "store_token",
                    r#"{"service":"billing","token":"TOK_LIVE_9f8e7d"}"#,
                )
                .tool_call(
                    "c4",
                    "store_token",
                    r#"{"service":"billing","token":"tok_abc123secret"}"#,
                ),
        ],
        "conv-redaction-1",
    )
    .await;
    let results = results(&events);
    assert_eq!(results.len(), 3, "{events:?}");
    // The events still say what went wrong, and where.
    assert_eq!(results[0].1["error"]["code"], json!("invalid_arguments"));
    assert!(
        results[0].1.to_string().contains("/password"),
        "{}",
        results[0].1
    );
    assert_eq!(results[1].1["error"]["code"], json!("invalid_json"));
    assert_eq!(results[2].1["error"]["code"], json!("invalid_arguments"));
    assert_eq!(suspended(&events)[0].tool_call_id, "c4");
    assert_never_shown(
        &events,
        &logs,
        &[
            "hunter2",
            "horse battery staple",
            "TOK_LIVE_9f8e7d",
            "tok_abc123secret",
        ],
    );
}

/// The approver (or the application's client) still gets the real payload
/// of a suspended call; only what is shown is redacted.
#[tokio::test]
async fn a_suspended_call_keeps_its_real_payload_for_whoever_acts_on_it() {
    let (events, _) = run_logged(
        vec![ScriptedTurn::new().tool_call(
            "c4",
            "store_token",
            r#"{"service":"billing","token":"tok_abc123secret"}"#,
        )],
        "conv-redaction-2",
    )
    .await;
    let call = &suspended(&events)[0];
    assert_eq!(
        call.awaiting.payload.to_value(),
        json!({ "service": "billing", "token": "[redacted]" })
    );
    assert_eq!(
        call.payload().to_value(),
        json!({ "service": "billing", "token": "tok_abc123secret" })
    );
    assert_eq!(
        call.unredacted_awaiting().payload.to_value(),
        json!({ "service": "billing", "token": "tok_abc123secret" })
    );
}

/// `log_fields`: only the listed values appear, in arguments, results,
/// error messages and suspended payloads; everything else is hidden.
#[tokio::test]
async fn an_allowlist_shows_only_the_listed_fields() {
    let (events, logs) = run_logged(
        vec![
            ScriptedTurn::new()
                .tool_call(
                    "s1",
                    "ship",
                    r#"{"city":"Paris","street":"12 Secret Garden Lane, flat 3, door code 4711","note":{"text":"leave at door 4711"}}"#,
                )
                .tool_call(
                    "s2",
                    "ship",
                    r#"{"city":"A city name far too long","street":"Hidden Alley","note":{"text":"ring twice"}}"#,
                )
                .tool_call(
                    "s3",
                    "ship",
                    r#"{"city":"Paris","street":"Hidden Alley","note":{"text":"ring twice"#,
                )
                .tool_call(
                    "s4",
                    "client_sign_in",
                    r#"{"account":"ada","otp":"otp-991177"}"#,
                ),
        ],
        "conv-redaction-3",
    )
    .await;
    let starts: Vec<&Value> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStart { arguments, .. } => Some(arguments),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts[0],
        &json!({ "city": "Paris", "street": "[redacted]", "note": "[redacted]" })
    );
    let results = results(&events);
    assert_eq!(
        results[0].1["result"],
        json!({ "city": "Paris", "label": "[redacted]" })
    );
    // The violation of a shown field is still shown; the other is not.
    let message = results[1].1["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("A city name far too long"), "{message}");
    assert!(message.contains("- at /street: [redacted]"), "{message}");
    assert_eq!(results[2].1["error"]["code"], json!("invalid_json"));
    assert_eq!(
        suspended(&events)[0].awaiting.payload.to_value(),
        json!({ "account": "ada", "otp": "[redacted]" })
    );
    assert_never_shown(
        &events,
        &logs,
        &[
            "Secret Garden",
            "4711",
            "Hidden Alley",
            "ring twice",
            "otp-991177",
        ],
    );
}

/// Durable runs: the event of the suspension is redacted, `pending()` gives
/// the approver the real payload, and the result that comes back from the
/// client is redacted in the events of the resumed run.
#[tokio::test]
async fn durable_runs_redact_suspensions_and_client_results() {
    use aptix::durable::Resolution;
    use aptix::store::MemoryStore;

    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = crate::common::capture_logs(subscriber);
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(vec![
                ScriptedTurn::new().tool_call(
                    "d1",
                    "client_sign_in",
                    r#"{"account":"ada","otp":"otp-554433"}"#,
                ),
                ScriptedTurn::new().text("Signed in."),
            ]))
            .catalog(every_tool())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        MemoryStore::new(),
    )
    .build();
    let mut all = Vec::new();
    let first: Vec<AgentEvent> = agent
        .send("conv-redaction-4", Input::User("sign me in".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    assert_eq!(
        suspended(&first)[0].awaiting.payload.to_value(),
        json!({ "account": "ada", "otp": "[redacted]" })
    );
    all.extend(first);
    let pending = agent
        .pending("conv-redaction-4")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        pending[0].payload,
        json!({ "account": "ada", "otp": "otp-554433" })
    );
    let mut background = agent.subscribe();
    agent
        .resolve(
            "conv-redaction-4",
            "d1",
            Resolution::Result(json!({ "session": "sess-7f7f7f" })),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), background.recv())
            .await
            .unwrap_or_else(|_| panic!("no Done after the resolution: {all:?}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let is_done = matches!(event.event, AgentEvent::Done { .. });
        all.push(event.event);
        if is_done {
            break;
        }
    }
    let results = results(&all);
    assert_eq!(results[0].1["result"], json!({ "session": "[redacted]" }));
    assert_never_shown(&all, &captured.text(), &["otp-554433", "sess-7f7f7f"]);
}

/// Arguments of `vault`: secrets nested where the macro cannot see them.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct VaultArgs {
    /// The most tokens to spend: a count, not a secret.
    pub max_tokens: u32,
    /// Where the listing continues: a cursor, not a secret.
    pub page_token: Option<String>,
    /// Whether a password is set: a flag holds no secret.
    pub password_set: bool,
    /// The account.
    pub account: Account,
    /// Keys to rotate.
    pub keys: Vec<KeyEntry>,
}

/// An account.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Account {
    /// Its name.
    pub name: String,
    /// Its API key.
    #[serde(rename = "apiKey")]
    pub api_key: String,
}

/// One key.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct KeyEntry {
    /// Its id.
    pub id: String,
    /// The secret itself.
    pub secret: String,
}

/// What `vault` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VaultOutput {
    /// A fresh token.
    pub access_token: String,
}

/// A tool implemented by hand, as another crate's expansion would be, and
/// not in [`every_tool`]: it declares no redaction although its fields look
/// secret. Only the catalog can see that.
pub struct Vault<const DECLARED: bool>;

impl<const DECLARED: bool> aptix::Tool for Vault<DECLARED> {
    const META: aptix::meta::ToolMeta = {
        let mut meta = aptix::meta::ToolMeta::new(
            "vault",
            "Test tool.",
            "Rotates keys.",
            aptix::meta::SourceLocation {
                file: "other_crate/src/lib.rs",
                line: 7,
                module_path: "other_crate",
            },
        );
        meta.redaction = if DECLARED {
            aptix::meta::Redaction::Deny(&[])
        } else {
            aptix::meta::Redaction::Undeclared
        };
        meta
    };
    type Args = VaultArgs;
    type Output = VaultOutput;
    fn code() -> aptix::tool::Code {
        aptix::tool::Code::function::<Self>()
    }
}

impl<const DECLARED: bool> aptix::tool::ToolFn for Vault<DECLARED> {
    type Returned = VaultOutput;
    async fn call(_args: VaultArgs, _ctx: &ToolContext) -> Result<VaultOutput, ToolError> {
        Ok(VaultOutput {
            access_token: String::new(),
        })
    }
}

/// The build-time half of the rule: argument and output fields whose names
/// look secret, nested ones included, in a tool that declares neither
/// `redact` nor `log_fields`.
#[test]
fn undeclared_secret_fields_are_found_in_nested_and_output_types() {
    use aptix::Tool;
    use aptix::secrets::undeclared_secrets;

    let definition = Vault::<false>::definition().unwrap_or_else(|e| panic!("{e}"));
    let found = undeclared_secrets(definition);
    let pointers: Vec<(&str, &str)> = found
        .iter()
        .map(|problem| (problem.side, problem.pointer.as_str()))
        .collect();
    assert_eq!(
        pointers,
        [
            ("argument", "/account/apiKey"),
            ("argument", "/keys"),
            ("output", "/access_token"),
        ]
    );
    let message = found[0].to_string();
    assert!(
        message.contains("tool `vault` (other_crate/src/lib.rs:7 (other_crate))")
            && message.contains("add `redact = [\"/account/apiKey\"]`")
            && message.contains("`redact = []` if nothing here is secret"),
        "{message}"
    );

    let declared = Vault::<true>::definition().unwrap_or_else(|e| panic!("{e}"));
    assert!(undeclared_secrets(declared).is_empty());
    // Every tool of this binary is declared or has nothing secret-looking.
    let catalog = every_tool();
    for definition in catalog.definitions() {
        assert!(
            undeclared_secrets(definition).is_empty(),
            "{:?}",
            undeclared_secrets(definition)
        );
    }
}

/// `Catalog::build` refuses such a tool. Needs the one call in
/// `CatalogBuilder::build` described in the notes of this change.
#[test]
fn the_catalog_refuses_a_tool_with_undeclared_secret_fields() {
    let error = match Catalog::builder().tool::<Vault<false>>().build() {
        Ok(catalog) => panic!("expected an error, got {catalog:?}"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("argument field `/account/apiKey` looks like a secret"),
        "{error}"
    );
    assert!(error.contains("output field `/access_token`"), "{error}");
    assert!(Catalog::builder().tool::<Vault<true>>().build().is_ok());
}

/// A partial result of a progressive tool: it reaches `ToolPartial` events.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Step {
    /// How far the login got.
    pub stage: String,
    /// The session it opened.
    pub session_token: String,
}

/// Signs in, reporting each step.
#[agent_tool(name = "sign_in", usage = "Call to sign in.", progressive = true, partial = Step)]
async fn sign_in(_args: NoArgs, ctx: &ToolContext<Step>) -> Result<bool, ToolError> {
    ctx.partial(&Step {
        stage: "opened".into(),
        session_token: "s3cr3t".into(),
    });
    Ok(true)
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The partial type is scanned like the output: its values reach events.
#[test]
fn a_secret_looking_field_of_the_partial_type_must_be_declared() {
    use aptix::Tool;
    let definition = SignInTool::definition().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        definition
            .partial_schema()
            .map(|schema| schema["properties"]["stage"]["type"].clone()),
        Some(serde_json::json!("string"))
    );
    let found = aptix::secrets::undeclared_secrets(definition);
    let pointers: Vec<(&str, &str)> = found
        .iter()
        .map(|problem| (problem.side, problem.pointer.as_str()))
        .collect();
    assert_eq!(pointers, [("partial", "/session_token")]);
    let error = match Catalog::builder().tool::<SignInTool>().build() {
        Ok(catalog) => panic!("expected an error, got {catalog:?}"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("partial field `/session_token` looks like a secret"),
        "{error}"
    );
}

/// A client result that breaks the declared output is refused with a
/// message naming the call; for a tool that declares secrets, that message
/// (it travels in the `Done` event) must not quote the refused value, and
/// neither may the log line about it.
#[tokio::test]
async fn a_refused_client_result_does_not_quote_a_secret() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = crate::common::capture_logs(subscriber);
    let agent = agent(vec![ScriptedTurn::new().tool_call(
        "s1",
        "client_sign_in",
        r#"{"account":"ada","otp":"OTP-771"}"#,
    )]);
    let mut conversation = Conversation::new("refused-client-result");
    let first: Vec<AgentEvent> = agent
        .run(&mut conversation, Input::User("sign in".into()))
        .collect()
        .await;
    suspended(&first);
    let ids = aptix::envelope::EnvelopeIds {
        tool_call_id: "s1".into(),
        conversation_id: Some("refused-client-result".into()),
        session_id: None,
    };
    let secret = "SESSION-SECRET-5150";
    let bad = aptix::Envelope::ok(
        ids,
        aptix::envelope::JsonText::from_serialize(&json!({ "session": [secret] }))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let second: Vec<AgentEvent> = agent
        .run(
            &mut conversation,
            Input::ToolResults(vec![("s1".into(), bad)]),
        )
        .collect()
        .await;
    let refused = second.iter().any(|event| {
        matches!(
            event,
            AgentEvent::Done {
                reason: DoneReason::InvalidToolResults(message),
                ..
            } if message.contains("s1") && message.contains("client_sign_in")
        )
    });
    assert!(refused, "expected the result to be refused: {second:?}");
    assert_never_shown(&second, &captured.text(), &[secret]);
}

/// What `open_session` returns: a token beside the session's id.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Session {
    /// The session's id.
    pub id: String,
    /// The session's credential.
    pub session_token: String,
}

/// What `open_session` reports as it goes.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Opening {
    /// The key it signs with.
    pub api_key: String,
}

/// Arguments of `open_session`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct OpenSession {
    /// The account.
    pub account: String,
    /// Its password.
    pub password: String,
}

/// Opens a session; its `redact` names the password only.
#[agent_tool(
    name = "open_session",
    usage = "Test tool.",
    redact = ["/password"],
    progressive = true,
    partial = Opening
)]
async fn open_session(
    _args: OpenSession,
    _ctx: &ToolContext<Opening>,
) -> Result<Session, ToolError> {
    Ok(Session {
        id: "s1".into(),
        session_token: "SESSION-TOKEN-NOT-HIDDEN".into(),
    })
}

/// A view whose `log_fields` show a parent of a secret.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Profile {
    /// Its name.
    pub name: String,
    /// Its password.
    pub password: String,
}

/// Arguments of `show_account`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShowAccount {
    /// The account, shown whole by `log_fields`.
    pub account: Profile,
}

/// Shows an account; `log_fields` lists the whole account.
#[agent_tool(name = "show_account", usage = "Test tool.", log_fields = ["/account"])]
async fn show_account(args: ShowAccount) -> Result<String, ToolError> {
    Ok(args.account.name)
}

/// Review 2026-11-26, N14: one `redact` pointer waived the check for every
/// other field, so a `session_token` output and an `api_key` partial were
/// shown. Each secret-looking field must be at or under a `redact`
/// pointer; a `log_fields` entry may not show one through its parent;
/// `redact = []` stays the explicit "nothing here is secret".
#[test]
fn a_redact_pointer_covers_only_the_fields_under_it() {
    use aptix::Tool;
    let definition = OpenSessionTool::definition().unwrap_or_else(|e| panic!("{e}"));
    let found: Vec<(&str, String)> = aptix::secrets::undeclared_secrets(definition)
        .into_iter()
        .map(|problem| (problem.side, problem.pointer))
        .collect();
    assert_eq!(
        found,
        [
            ("output", "/session_token".to_owned()),
            ("partial", "/api_key".to_owned())
        ]
    );
    let error = match Catalog::builder().tool::<OpenSessionTool>().build() {
        Ok(catalog) => panic!("expected an error, got {catalog:?}"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("output field `/session_token` looks like a secret")
            && error.contains("`redact = [\"/password\"]` does not cover it"),
        "{error}"
    );

    let definition = ShowAccountTool::definition().unwrap_or_else(|e| panic!("{e}"));
    let found: Vec<String> = aptix::secrets::undeclared_secrets(definition)
        .into_iter()
        .map(|problem| problem.to_string())
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("`/account/password`") && found[0].contains("through a parent"),
        "{found:?}"
    );
}

/// Arguments of `unlock`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Unlock {
    /// The vault.
    pub vault: String,
    /// Its password.
    pub password: String,
}

/// What `unlock` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Unlocked {
    /// The session it opened.
    pub session_token: String,
}

/// Unlocks a vault (served over MCP in the test below).
#[agent_tool(name = "unlock", usage = "Test tool.", redact = ["/password", "/session_token"])]
async fn unlock(args: Unlock) -> Result<Unlocked, ToolError> {
    Ok(Unlocked {
        session_token: format!("RESULT-TOKEN-SECRET-2-{}", args.vault),
    })
}

/// Asks the person for the vault's PIN (served over MCP: the server asks
/// with an elicitation form, which the client answers).
#[agent_tool(
    name = "enter_pin",
    usage = "Test tool.",
    executor = human,
    output = Pin,
    redact = ["/pin"]
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct EnterPin {
    /// What to ask.
    pub question: String,
}

/// The person's answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Pin {
    /// The PIN.
    pub pin: String,
}

/// Review 2026-11-26, N6: rmcp logs every message it sends and receives
/// (arguments, results, elicitation answers) at DEBUG and TRACE, as server
/// and as client. With the log set-up the README recommends, no declared
/// secret of an MCP call reaches a log line at any level.
#[tokio::test]
async fn mcp_calls_log_no_declared_secret_at_any_level() {
    const SECRETS: [&str; 3] = [
        "SRV-SIDE-PASSWORD-1",
        "RESULT-TOKEN-SECRET-2",
        "ELICITED-PIN-4242",
    ];
    /// Calls both tools through a mounted in-process Aptix server, with
    /// `filter` and a TRACE-level subscriber; what was logged.
    async fn logged_with(filter: tracing_subscriber::EnvFilter) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = crate::common::capture_logs(subscriber);
        let server = aptix::mcp::McpServer::new(
            aptix::tools![UnlockTool, EnterPin]
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let mounted = aptix::mcp::McpToolset::in_process(server, "vaults")
            .elicitation(|_request| async {
                aptix::live::ElicitationAnswer::Accept(json!({ "pin": "ELICITED-PIN-4242" }))
            })
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let executor = aptix::Executor::new(
            Catalog::builder()
                .entries(mounted.entries())
                .build()
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let context = ToolContext::new();
        for (name, arguments) in [
            (
                "unlock",
                r#"{"vault":"v1","password":"SRV-SIDE-PASSWORD-1"}"#,
            ),
            ("enter_pin", r#"{"question":"Your PIN?"}"#),
        ] {
            let call = aptix::executor::ToolCall::new("m1", name, arguments);
            let envelope = executor
                .execute(&call, &context)
                .await
                .into_envelope()
                .unwrap_or_else(|| panic!("{name}: no envelope"));
            assert!(envelope.is_ok(), "{name}: {}", envelope.to_json_string());
        }
        mounted.close().await;
        captured.text()
    }
    // Without a filter, rmcp's own lines carry them: the capture sees them.
    let unfiltered = logged_with(tracing_subscriber::EnvFilter::new("trace")).await;
    assert!(
        SECRETS.iter().all(|secret| unfiltered.contains(secret)),
        "the control run should see rmcp's payload lines"
    );
    // The set-up the README recommends, at its most verbose, even when
    // asked for the SDK's own lines.
    let recommended = logged_with(aptix::mcp::hide_sdk_payloads(
        tracing_subscriber::EnvFilter::new("trace,rmcp=trace"),
    ))
    .await;
    for secret in SECRETS {
        assert!(
            !recommended.contains(secret),
            "{secret} is in the log:\n{}",
            recommended
                .lines()
                .filter(|line| line.contains(secret))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// Arguments of `reset_password`, a latent tool: the model writes its
/// result (the new password) under `_output`.
#[agent_tool(
    name = "reset_password",
    usage = "Test tool.",
    output = NewPassword,
    redact = ["/password"]
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct ResetPassword {
    /// The account.
    pub account: String,
}

/// What `reset_password` returns.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NewPassword {
    /// The new password.
    #[schemars(length(min = 12))]
    pub password: String,
}

/// `reset_password`, gated.
#[agent_tool(
    name = "reset_password_gated",
    usage = "Test tool.",
    output = NewPassword,
    approval = requires_approval,
    redact = ["/password"]
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct ResetPasswordGated {
    /// The account.
    pub account: String,
}

/// Review 2026-11-26, N5: a latent tool's declared secret is in its
/// result, which the model writes into the call under `_output`; the
/// tool's pointers hid it in the result but not there, so it showed in
/// `ToolCallStart`, in `invalid_arguments` errors and in `Done {
/// Suspended }` payloads, natively and composed.
#[tokio::test]
async fn a_latent_tools_secret_under_output_is_hidden() {
    const SECRETS: [&str; 3] = ["Tr0ub4dor-LATENT-1", "SHORTPW9", "Gated-Reset-PW-77"];
    let native = vec![
        ScriptedTurn::new()
            .tool_call(
                "c1",
                "reset_password",
                r#"{"account":"ada","_output":{"password":"Tr0ub4dor-LATENT-1"}}"#,
            )
            .tool_call(
                "c2",
                "reset_password",
                r#"{"account":"bob","_output":{"password":"SHORTPW9"}}"#,
            )
            .tool_call(
                "c3",
                "reset_password_gated",
                r#"{"account":"eve","_output":{"password":"Gated-Reset-PW-77"}}"#,
            ),
        ScriptedTurn::new().text("never asked"),
    ];
    let composed = vec![
        ScriptedTurn::new().text(
            &json!({ "message": "", "calls": [
                { "_tool": "reset_password", "account": "ada", "_output": { "password": "Tr0ub4dor-LATENT-1" } },
                { "_tool": "reset_password", "account": "bob", "_output": { "password": "SHORTPW9" } },
                { "_tool": "reset_password_gated", "account": "eve", "_output": { "password": "Gated-Reset-PW-77" } }
            ] })
            .to_string(),
        ),
        ScriptedTurn::new().text(r#"{"message":"never asked"}"#),
    ];
    for (mode, turns) in [
        (aptix::agent::CallMode::Native, native),
        (aptix::agent::CallMode::Composed, composed),
    ] {
        let agent = Agent::builder()
            .model(ScriptedModel::new(turns))
            .catalog(
                aptix::tools![ResetPassword, ResetPasswordGated]
                    .build()
                    .unwrap_or_else(|e| panic!("{e}")),
            )
            .call_mode(mode)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let mut conversation = Conversation::new("conv-latent");
        let events: Vec<AgentEvent> = agent
            .run(&mut conversation, Input::User("reset them".into()))
            .collect()
            .await;
        assert!(
            matches!(
                events.last(),
                Some(AgentEvent::Done {
                    reason: DoneReason::Suspended(_),
                    ..
                })
            ),
            "{mode:?}: {events:?}"
        );
        let mut leaks = Vec::new();
        for event in &events {
            for (place, text) in shown(event) {
                for secret in SECRETS {
                    if text.contains(secret) {
                        leaks.push(format!("{mode:?} {place}: {text}"));
                    }
                }
            }
        }
        assert!(leaks.is_empty(), "{}", leaks.join("\n"));
        // The short password was refused, at its path.
        let refused = events.iter().any(|event| {
            matches!(
                event,
                AgentEvent::ToolCallResult { envelope, .. }
                    if envelope["error"]["code"] == json!("invalid_arguments")
                        && envelope.to_string().contains("/_output/password")
            )
        });
        assert!(refused, "{mode:?}: {events:?}");
    }
}

/// Changes a password, once a person approved it.
#[agent_tool(
    name = "change_password",
    usage = "Test tool.",
    approval = requires_approval,
    redact = ["/password"]
)]
async fn change_password(args: Login) -> Result<String, ToolError> {
    Ok(format!("changed for {}", args.user))
}

/// Review 2026-11-26, N15: a durable `resolve` that refuses a client's
/// result or an approver's arguments quoted the declared secret in its
/// error (validation messages quote the values they refuse).
#[tokio::test]
async fn a_refused_resolution_does_not_quote_a_secret() {
    use aptix::durable::Resolution;
    use aptix::store::MemoryStore;

    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(vec![
                ScriptedTurn::new()
                    .tool_call(
                        "k1",
                        "client_sign_in",
                        r#"{"account":"ada","otp":"otp-554433"}"#,
                    )
                    .tool_call(
                        "k2",
                        "change_password",
                        r#"{"user":"eve","password":"Long-Enough-PW-1"}"#,
                    ),
                ScriptedTurn::new().text("never asked"),
            ]))
            .catalog(
                aptix::tools![ClientSignIn, ChangePasswordTool]
                    .build()
                    .unwrap_or_else(|e| panic!("{e}")),
            )
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        MemoryStore::new(),
    )
    .build();
    let _: Vec<AgentEvent> = agent
        .send("conv-refusals", Input::User("sign in".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await;
    // A client result that breaks the output: `session` is a number.
    let refused = agent
        .resolve(
            "conv-refusals",
            "k1",
            Resolution::Result(json!({ "session": 4111, "extra": "CARD-TYPO-SECRET-4111" })),
        )
        .await;
    let text = match refused {
        Ok(resolved) => panic!("a bad result was accepted: {resolved:?}"),
        Err(error) => format!("{error} {error:?}"),
    };
    assert!(
        !text.contains("CARD-TYPO-SECRET-4111") && !text.contains("4111"),
        "{text}"
    );
    assert!(
        text.contains("/session") || text.contains("/extra"),
        "the refusal names the paths: {text}"
    );
    // An approver's arguments that break the schema.
    let refused = agent
        .resolve(
            "conv-refusals",
            "k2",
            Resolution::ApproveWithArgs(json!({ "user": "eve", "password": "SHORT-PW-9" })),
        )
        .await;
    let text = match refused {
        Ok(resolved) => panic!("bad arguments were accepted: {resolved:?}"),
        Err(error) => format!("{error} {error:?}"),
    };
    assert!(!text.contains("SHORT-PW-9"), "{text}");
    assert!(
        text.contains("/password"),
        "the refusal names the path: {text}"
    );
}
