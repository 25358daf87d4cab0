//! Declared secrets never leave: not in any event (its `Debug`, its JSON),
//! not in any log line, whatever the call does (fails validation, sends
//! broken JSON, suspends for an approval), in the deny-list form
//! (`redact`) and the allowlist form (`log_fields`).

use aptix::prelude::*;
use aptix::{Agent, AgentEvent, Catalog, Conversation, DoneReason, DurableAgent, Input};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Arguments of `login`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Login {
    /// The user name.
    pub user: String,
    /// The password.
    #[schemars(length(min = 12))]
    pub password: String,
}

/// Logs in.
#[agent_tool(name = "login", usage = "Test tool.", redact = ["/password"])]
async fn login(args: Login) -> Result<String, ToolError> {
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

#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut buffer) = self.0.lock() {
            buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        self.0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

/// Every tool this file declares with `#[agent_tool]`.
fn every_tool() -> Catalog {
    aptix::tools![LoginTool, StoreTokenTool, ShipTool, ClientSignIn]
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
    let _guard = tracing::subscriber::set_default(subscriber);
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
#[test]
fn no_declared_secret_appears_in_any_event_or_log_line() {
    aptix_testkit::block_on(no_declared_secret_appears_in_any_event_or_log_line_body())
}

async fn no_declared_secret_appears_in_any_event_or_log_line_body() {
    let (events, logs) = run_logged(
        vec![
            ScriptedTurn::new()
                .tool_call("c1", "login", r#"{"user":"ada","password":"hunter2"}"#)
                .tool_call(
                    "c2",
                    "login",
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
#[test]
fn a_suspended_call_keeps_its_real_payload_for_whoever_acts_on_it() {
    aptix_testkit::block_on(a_suspended_call_keeps_its_real_payload_for_whoever_acts_on_it_body())
}

async fn a_suspended_call_keeps_its_real_payload_for_whoever_acts_on_it_body() {
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
#[test]
fn an_allowlist_shows_only_the_listed_fields() {
    aptix_testkit::block_on(an_allowlist_shows_only_the_listed_fields_body())
}

async fn an_allowlist_shows_only_the_listed_fields_body() {
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
#[test]
fn durable_runs_redact_suspensions_and_client_results() {
    aptix_testkit::block_on(durable_runs_redact_suspensions_and_client_results_body())
}

async fn durable_runs_redact_suspensions_and_client_results_body() {
    use aptix::durable::Resolution;
    use aptix::store::MemoryStore;

    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
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
    const META: aptix::ToolMeta = {
        let mut meta = aptix::ToolMeta::new(
            "vault",
            "Test tool.",
            "Rotates keys.",
            aptix::SourceLocation {
                file: "other_crate/src/lib.rs",
                line: 7,
                module_path: "other_crate",
            },
        );
        meta.redaction = if DECLARED {
            aptix::Redaction::Deny(&[])
        } else {
            aptix::Redaction::Undeclared
        };
        meta
    };
    type Args = VaultArgs;
    type Output = VaultOutput;
    fn code() -> aptix::tool::Code {
        aptix::tool::Code::function::<Self>()
    }
}

impl<const DECLARED: bool> aptix::ToolFn for Vault<DECLARED> {
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
#[test]
fn a_refused_client_result_does_not_quote_a_secret() {
    aptix_testkit::block_on(a_refused_client_result_does_not_quote_a_secret_body())
}

async fn a_refused_client_result_does_not_quote_a_secret_body() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
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
    let ids = aptix::EnvelopeIds {
        tool_call_id: "s1".into(),
        conversation_id: Some("refused-client-result".into()),
        session_id: None,
    };
    let secret = "SESSION-SECRET-5150";
    let bad = aptix::Envelope::ok(
        ids,
        aptix::JsonText::from_serialize(&json!({ "session": [secret] }))
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
