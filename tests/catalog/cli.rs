//! The developer CLI (`aptix::cli`), every subcommand through `Cli::run`
//! with byte buffers for standard input, output and error.
//!
//! `chat` always runs with `--offline` here: the test script may export
//! `OPENAI_BASE_URL` for the real-model tests, and these must not use it.

use crate::{get_current_time, get_location, hello_world, send_email};

use std::process::ExitCode;
use std::sync::Arc;

use aptix::cli::{Cli, CliError};
use aptix::{Catalog, Dialect, ToolContext};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

use send_email::Outbox;

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .tool::<get_current_time::GetCurrentTimeTool>()
        .tool::<get_location::GetLocation>()
        .tool::<send_email::SendEmailTool>()
        .build()
        .unwrap_or_else(|error| panic!("the example catalog is valid: {error}"))
}

/// A CLI over the example tools, and the context whose outbox `send_email`
/// writes to (the context's state is shared by its clones).
fn cli() -> (Cli, ToolContext) {
    let context = ToolContext::new().with_state(Outbox::default());
    (Cli::new(catalog()).context(context.clone()), context)
}

fn sent(context: &ToolContext) -> usize {
    context
        .state::<Outbox>()
        .map(|outbox| outbox.sent.lock().map(|sent| sent.len()).unwrap_or(0))
        .unwrap_or(0)
}

/// What one run produced.
struct Run {
    result: Result<ExitCode, CliError>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn code(&self) -> ExitCode {
        match &self.result {
            Ok(code) => *code,
            Err(error) => panic!(
                "expected an exit status, got the error `{error}`\nstdout:\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            ),
        }
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("stdout is not JSON ({error}):\n{}", self.stdout))
    }
}

async fn invoke(cli: &Cli, args: &[&str], stdin: &str) -> Run {
    let mut input = stdin.as_bytes();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let args = std::iter::once("aptix-cli").chain(args.iter().copied());
    let result = cli.run(args, &mut input, &mut stdout, &mut stderr).await;
    Run {
        result,
        stdout: String::from_utf8(stdout).unwrap_or_else(|error| panic!("utf-8: {error}")),
        stderr: String::from_utf8(stderr).unwrap_or_else(|error| panic!("utf-8: {error}")),
    }
}

// --- tools ------------------------------------------------------------------

#[tokio::test]
async fn tools_prints_an_aligned_table_in_name_order() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["tools"], "").await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "a header and four tools:\n{}", run.stdout);
    assert!(lines[0].starts_with("NAME "), "{}", lines[0]);
    let names: Vec<&str> = lines[1..]
        .iter()
        .map(|line| line.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "agent_hello_world",
            "get_current_time",
            "get_location",
            "send_email"
        ]
    );
    // Every column starts at the same place on every line.
    for header in ["EXECUTOR", "APPROVAL", "DESCRIPTION"] {
        let column = lines[0].find(header).unwrap_or_else(|| panic!("{header}"));
        for line in &lines[1..] {
            let before = &line[..column];
            assert!(
                before.ends_with("  ") && !line[column..].starts_with(' '),
                "`{header}` is not aligned in:\n{}",
                run.stdout
            );
        }
    }
    let row = |name: &str| {
        lines
            .iter()
            .find(|line| line.starts_with(name))
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert_eq!(row("send_email")[1..3], ["server", "requires_approval"]);
    assert_eq!(row("get_location")[1..3], ["client", "auto"]);
    assert!(
        lines
            .iter()
            .any(|line| line.ends_with("Creates a friendly greeting using the user's name.")),
        "{}",
        run.stdout
    );
}

// --- schema -----------------------------------------------------------------

#[tokio::test]
async fn schema_prints_what_the_catalog_lowers_for_every_dialect() {
    let (cli, _) = cli();
    let catalog = catalog();
    for (flag, dialect) in [
        ("openai", Dialect::OpenAiStrict),
        ("openai_strict", Dialect::OpenAiStrict),
        ("anthropic", Dialect::Anthropic),
        ("gemini", Dialect::Gemini),
        ("mcp", Dialect::Mcp),
    ] {
        let lowered = catalog
            .lower(dialect)
            .unwrap_or_else(|error| panic!("the examples lower to {dialect}: {error}"));
        for (name, expected) in catalog.names().zip(lowered) {
            let run = invoke(&cli, &["schema", name, "--dialect", flag], "").await;
            assert_eq!(run.code(), ExitCode::SUCCESS, "{name} {flag}");
            assert_eq!(run.json(), expected, "{name} in {flag}");
            assert!(run.stdout.contains("\n  "), "pretty-printed");
        }
    }
}

#[tokio::test]
async fn schema_defaults_to_the_canonical_definition() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["schema", "send_email"], "").await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    let expected = catalog()
        .get("send_email")
        .map(|definition| definition.canonical_json());
    assert_eq!(Some(run.json()), expected);
    assert_eq!(run.json()["approval"], "requires_approval");
}

#[tokio::test]
async fn schema_of_an_unknown_tool_lists_the_available_ones_with_status_2() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["schema", "agent_hello_wrld"], "").await;
    let Err(error) = &run.result else {
        panic!("expected an error, got {:?}", run.result)
    };
    assert!(
        matches!(error, CliError::UnknownTool { name, available }
            if name == "agent_hello_wrld" && available.len() == 4),
        "{error:?}"
    );
    assert_eq!(error.code(), 2);
    assert_eq!(error.exit_code(), ExitCode::from(2));
    let message = error.to_string();
    assert!(message.contains("agent_hello_wrld"), "{message}");
    assert!(
        message.contains("agent_hello_world, get_current_time, get_location, send_email"),
        "{message}"
    );
    assert!(run.stdout.is_empty());
}

#[tokio::test]
async fn schema_refuses_an_unknown_dialect() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["schema", "send_email", "--dialect", "cobol"], "").await;
    let Err(CliError::Usage(error)) = &run.result else {
        panic!("expected a usage error, got {:?}", run.result)
    };
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("cobol"), "{error}");
}

// --- call -------------------------------------------------------------------

#[tokio::test]
async fn call_prints_the_envelope_and_succeeds() {
    let (cli, _) = cli();
    let run = invoke(
        &cli,
        &["call", "agent_hello_world", r#"{"name":"Ada"}"#],
        "",
    )
    .await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    assert!(
        run.stdout
            .starts_with("{\n  \"ok\": true,\n  \"result\": {"),
        "envelope order, pretty:\n{}",
        run.stdout
    );
    let envelope = run.json();
    assert_eq!(envelope["result"]["message"], "Hello, Ada! Welcome.");
    assert_eq!(envelope["tool_call_id"], "cli_call_1");
}

#[tokio::test]
async fn call_arguments_default_to_an_empty_object() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["call", "get_current_time", "--id", "t1"], "").await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    let envelope = run.json();
    assert_eq!(envelope["result"]["utc_offset"], "+00:00");
    assert_eq!(envelope["tool_call_id"], "t1");
}

#[tokio::test]
async fn call_reads_the_arguments_from_stdin_with_a_dash() {
    let (cli, _) = cli();
    let run = invoke(
        &cli,
        &["call", "agent_hello_world", "-"],
        "{\"name\": \"Grace\"}\n",
    )
    .await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    assert_eq!(run.json()["result"]["message"], "Hello, Grace! Welcome.");
}

#[tokio::test]
async fn call_with_invalid_arguments_prints_the_failed_envelope_with_status_1() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["call", "agent_hello_world", r#"{"nam":"Ada"}"#], "").await;
    assert_eq!(run.code(), ExitCode::FAILURE);
    let envelope = run.json();
    assert_eq!(envelope["ok"], false);
    assert_eq!(envelope["error"]["code"], "invalid_arguments");

    let malformed = invoke(&cli, &["call", "agent_hello_world", r#"{"name": "Ada"#], "").await;
    assert_eq!(malformed.code(), ExitCode::FAILURE);
    assert_eq!(malformed.json()["error"]["code"], "invalid_json");
}

#[tokio::test]
async fn call_of_an_unknown_tool_is_a_usage_error() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["call", "send_mail"], "").await;
    assert!(
        matches!(&run.result, Err(CliError::UnknownTool { name, .. }) if name == "send_mail"),
        "{:?}",
        run.result
    );
    assert!(run.stdout.is_empty());
}

#[tokio::test]
async fn an_approved_call_runs_after_yes() {
    let (cli, context) = cli();
    let arguments = r#"{"to":"ada@example.com","subject":"Hi","body":"Hello"}"#;
    let run = invoke(&cli, &["call", "send_email", arguments], "y\n").await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stderr);
    assert!(run.stderr.contains("Approve? [y/N]"), "{}", run.stderr);
    assert!(
        run.stderr.contains("ada@example.com"),
        "shows the arguments"
    );
    assert_eq!(run.json()["result"]["message_id"], "msg-cli_call_1");
    assert_eq!(sent(&context), 1);
}

#[tokio::test]
async fn a_refused_or_unanswered_approval_is_a_denied_envelope() {
    let arguments = r#"{"to":"ada@example.com","subject":"Hi","body":"Hello"}"#;
    for answer in ["n\n", "\n", "maybe\n", ""] {
        let (cli, context) = cli();
        let run = invoke(&cli, &["call", "send_email", arguments], answer).await;
        assert_eq!(run.code(), ExitCode::FAILURE, "answer {answer:?}");
        let envelope = run.json();
        assert_eq!(envelope["ok"], false);
        assert_eq!(envelope["error"]["code"], "denied");
        assert_eq!(sent(&context), 0, "nothing sent after {answer:?}");
    }
}

#[tokio::test]
async fn yes_approves_without_asking() {
    let (cli, context) = cli();
    let arguments = r#"{"to":"ada@example.com","subject":"Hi","body":"Hello"}"#;
    let run = invoke(&cli, &["call", "send_email", arguments, "--yes"], "").await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    assert!(!run.stderr.contains("Approve?"), "{}", run.stderr);
    assert_eq!(run.json()["ok"], true);
    assert_eq!(sent(&context), 1);
}

#[tokio::test]
async fn approval_is_not_asked_for_invalid_arguments() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["call", "send_email", r#"{"to":"nobody"}"#], "y\n").await;
    assert_eq!(run.code(), ExitCode::FAILURE);
    assert!(!run.stderr.contains("Approve?"), "{}", run.stderr);
    assert_eq!(run.json()["error"]["code"], "invalid_arguments");
}

#[tokio::test]
async fn a_client_tool_prints_its_payload_and_who_must_act() {
    let (cli, _) = cli();
    let run = invoke(
        &cli,
        &["call", "get_location", r#"{"reason":"local weather"}"#],
        "",
    )
    .await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    assert_eq!(
        run.json(),
        json!({
            "awaiting": "client",
            "then": null,
            "tool": "get_location",
            "tool_call_id": "cli_call_1",
            "payload": {"reason": "local weather"},
        })
    );
    assert!(run.stderr.contains("a client"), "{}", run.stderr);
}

// --- the command line -------------------------------------------------------

#[tokio::test]
async fn help_is_printed_on_stdout_and_succeeds() {
    let (cli, _) = cli();
    let run = invoke(&cli, &["--help"], "").await;
    assert_eq!(run.code(), ExitCode::SUCCESS);
    for command in ["tools", "schema", "call", "chat"] {
        assert!(run.stdout.contains(command), "{command}:\n{}", run.stdout);
    }
}

#[tokio::test]
async fn an_unknown_command_is_a_usage_error() {
    let (cli, _) = cli();
    for args in [&["frobnicate"][..], &[][..]] {
        let run = invoke(&cli, args, "").await;
        let Err(error) = &run.result else {
            panic!("expected an error for {args:?}, got {:?}", run.result)
        };
        assert_eq!(error.code(), 2, "{args:?}: {error}");
    }
}

// --- chat -------------------------------------------------------------------

fn chat_cli(turns: Vec<ScriptedTurn>) -> (Cli, ToolContext, Arc<ScriptedModel>) {
    let (cli, context) = cli();
    let model = Arc::new(ScriptedModel::new(turns));
    (cli.shared_model(model.clone()), context, model)
}

/// The tool results the model received in its last request.
fn tool_results(model: &ScriptedModel) -> Vec<Value> {
    model
        .requests()
        .last()
        .map(|request| aptix_testkit::tool_results(&request.messages))
        .unwrap_or_default()
}

#[tokio::test]
async fn chat_streams_text_and_shows_tool_calls_and_results() {
    let (cli, _, model) = chat_cli(vec![
        ScriptedTurn::new().text("Let me greet you. ").tool_call(
            "call_greet",
            "agent_hello_world",
            r#"{"name":"Ada"}"#,
        ),
        ScriptedTurn::new().text("Done, Ada."),
    ]);
    let run = invoke(&cli, &["chat", "--offline"], "Greet me, I'm Ada\n/quit\n").await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stdout);
    let out = &run.stdout;
    assert!(out.contains("you> "), "{out}");
    assert!(out.contains("assistant> Let me greet you."), "{out}");
    assert!(
        out.contains(r#"→ agent_hello_world({"name":"Ada"})  [call_greet]"#),
        "{out}"
    );
    assert!(out.contains("Hello, Ada! Welcome."), "{out}");
    assert!(out.contains("assistant> Done, Ada."), "{out}");
    assert_eq!(model.remaining(), 0);
    let results = tool_results(&model);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["result"]["conversation_id"], "cli-chat");
}

#[tokio::test]
async fn chat_asks_for_an_approval_inline_and_continues_the_run() {
    let email = r#"{"to":"ada@example.com","subject":"Report","body":"It is ready."}"#;
    let (cli, context, model) = chat_cli(vec![
        ScriptedTurn::new().tool_call("call_email", "send_email", email),
        ScriptedTurn::new().text("Sent."),
    ]);
    // End of input after the approval ends the chat.
    let run = invoke(&cli, &["chat", "--offline"], "Email Ada\ny\n").await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stdout);
    let out = &run.stdout;
    assert!(out.contains("send_email"), "{out}");
    assert!(out.contains("needs your approval"), "{out}");
    assert!(out.contains("Approve? [y/N]"), "{out}");
    assert!(out.contains("msg-call_email"), "the result is shown: {out}");
    assert!(out.contains("assistant> Sent."), "{out}");
    assert_eq!(sent(&context), 1);
    let results = tool_results(&model);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ok"], true);
    assert_eq!(results[0]["result"]["message_id"], "msg-call_email");
}

#[tokio::test]
async fn chat_tells_the_model_when_an_approval_is_refused() {
    let email = r#"{"to":"ada@example.com","subject":"Report","body":"It is ready."}"#;
    let (cli, context, model) = chat_cli(vec![
        ScriptedTurn::new().tool_call("call_email", "send_email", email),
        ScriptedTurn::new().text("Understood, not sent."),
    ]);
    let run = invoke(&cli, &["chat", "--offline"], "Email Ada\nn\n/quit\n").await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stdout);
    assert!(run.stdout.contains("not sent"), "{}", run.stdout);
    assert_eq!(sent(&context), 0);
    let results = tool_results(&model);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["error"]["code"], "denied");
}

#[tokio::test]
async fn chat_exits_with_status_1_after_a_model_error() {
    // A script with no turns: the model fails at once.
    let (cli, _, _) = chat_cli(vec![]);
    let run = invoke(&cli, &["chat", "--offline"], "Hello\n").await;
    assert_eq!(run.code(), ExitCode::FAILURE);
    assert!(run.stdout.contains("[model error:"), "{}", run.stdout);
}

#[tokio::test]
async fn the_built_in_offline_model_calls_tools_typed_as_lines() {
    // No model given: the CLI's own offline model.
    let (cli, _) = cli();
    let stdin = concat!(
        "agent_hello_world {\"name\":\"Ada\"}\n",
        // A client tool: the answer is typed, checked against the output
        // schema (the first one is incomplete), then becomes the result.
        "get_location {\"reason\":\"weather\"}\n",
        "{\"latitude\": 48.85}\n",
        "{\"latitude\": 48.85, \"longitude\": 2.35, \"accuracy_m\": 10}\n",
        "just chatting\n",
    );
    let run = invoke(&cli, &["chat", "--offline"], stdin).await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stdout);
    let out = &run.stdout;
    assert!(out.contains("Hello, Ada! Welcome."), "{out}");
    assert!(out.contains("waits for a client's result"), "{out}");
    assert!(out.contains("does not fit the tool's output"), "{out}");
    assert!(out.contains(r#""longitude":2.35"#), "{out}");
    assert!(out.contains("You said: just chatting"), "{out}");
    assert!(run.stderr.contains("built-in offline"), "{}", run.stderr);
}

/// A tool OpenAI strict mode cannot express: an open map of labels.
mod labels {
    use std::collections::BTreeMap;

    use aptix::prelude::*;

    /// Arguments of `tag_things`.
    #[derive(Deserialize, JsonSchema)]
    pub(crate) struct TagArgs {
        /// Free-form labels, any keys.
        pub labels: BTreeMap<String, String>,
    }

    /// Tags a thing with labels.
    #[agent_tool(name = "tag_things", usage = "Call to label a thing.")]
    pub(crate) async fn tag_things(args: TagArgs) -> Result<usize, ToolError> {
        Ok(args.labels.len())
    }
}

#[tokio::test]
async fn schema_that_a_dialect_cannot_express_is_an_error_with_status_1() {
    let catalog = Catalog::builder()
        .tool::<labels::TagThingsTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let cli = Cli::new(catalog);
    let run = invoke(&cli, &["schema", "tag_things", "--dialect", "openai"], "").await;
    let Err(error) = &run.result else {
        panic!("expected an error, got {:?}", run.result)
    };
    assert!(matches!(error, CliError::Dialect(_)), "{error:?}");
    assert_eq!(error.code(), 1);
    assert!(error.to_string().contains("tag_things"), "{error}");
    // The same tool is fine where maps are.
    let anthropic = invoke(
        &cli,
        &["schema", "tag_things", "--dialect", "anthropic"],
        "",
    )
    .await;
    assert_eq!(anthropic.code(), ExitCode::SUCCESS);
}

#[tokio::test]
async fn mcp_is_a_subcommand_with_an_address_option() {
    let (cli, _) = cli();
    let help = invoke(&cli, &["mcp", "--help"], "").await;
    assert_eq!(help.code(), ExitCode::SUCCESS);
    assert!(help.stdout.contains("--http"), "{}", help.stdout);
    let bad = invoke(&cli, &["mcp", "--http", "not-an-address"], "").await;
    assert!(
        matches!(&bad.result, Err(error @ CliError::Usage(_)) if error.code() == 2),
        "{:?}",
        bad.result
    );
}

/// What `vault_put` was given, by the test that calls it.
static VAULT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Arguments of `vault_put`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct VaultPut {
    /// The secret to keep.
    pub secret: String,
}

/// Keeps a secret.
#[aptix::agent_tool(
    name = "vault_put",
    usage = "Test tool.",
    approval = requires_approval,
    redact = ["/secret"]
)]
async fn vault_put(args: VaultPut) -> Result<&'static str, aptix::ToolError> {
    if let Ok(mut kept) = VAULT.lock() {
        kept.push(args.secret);
    }
    Ok("kept")
}

/// The approval prompt may hide a declared secret, but the approved call
/// runs with the real arguments, not with `"[redacted]"`.
#[tokio::test]
async fn chat_runs_an_approved_call_with_its_real_arguments() {
    let catalog = Catalog::builder()
        .tool::<VaultPutTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_vault", "vault_put", r#"{"secret":"s3cr3t-42"}"#),
        ScriptedTurn::new().text("Kept."),
    ]));
    let cli = Cli::new(catalog).shared_model(model.clone());
    let run = invoke(&cli, &["chat", "--offline"], "Keep it\ny\n").await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stdout);
    assert!(!run.stdout.contains("s3cr3t-42"), "{}", run.stdout);
    let kept = VAULT.lock().map(|kept| kept.clone()).unwrap_or_default();
    assert_eq!(kept, ["s3cr3t-42"]);
    assert_eq!(tool_results(&model)[0]["ok"], true);
}

mod ask_name {
    use aptix::live::{ElicitationAnswer, ElicitationRequest};
    use aptix::prelude::*;
    use serde_json::json;

    /// Arguments of `ask_name`.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub(crate) struct AskName {}

    /// Asks the person for their name while it runs.
    #[agent_tool(name = "ask_name", usage = "Call to learn the person's name.")]
    pub(crate) async fn ask_name(_args: AskName, ctx: &ToolContext) -> Result<String, ToolError> {
        let asked = ElicitationRequest::form(
            "ask_name",
            "What is your name?",
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        );
        Ok(match ctx.elicit(asked).await {
            ElicitationAnswer::Accept(answer) => format!("name: {}", answer["name"]),
            ElicitationAnswer::Decline => "declined".to_owned(),
            ElicitationAnswer::Cancel => "cancelled".to_owned(),
        })
    }
}

#[tokio::test]
async fn chat_asks_a_running_calls_question_at_the_prompt() {
    let catalog = aptix::tools![ask_name::AskNameTool]
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let model = Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::new().tool_call("call_ask", "ask_name", "{}"),
        ScriptedTurn::new().text("Nice to meet you."),
    ]));
    let cli = Cli::new(catalog).shared_model(model.clone());
    // A line that is not an object is asked again.
    let run = invoke(
        &cli,
        &["chat", "--offline"],
        "Who am I?\n[1]\n{\"name\":\"Ada\"}\n/quit\n",
    )
    .await;
    assert_eq!(run.code(), ExitCode::SUCCESS, "{}", run.stdout);
    let out = &run.stdout;
    assert!(out.contains("? ask_name asks: What is your name?"), "{out}");
    assert!(out.contains("not a JSON object"), "{out}");
    assert!(out.contains("assistant> Nice to meet you."), "{out}");
    let results = tool_results(&model);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["result"], json!("name: \"Ada\""));
}
