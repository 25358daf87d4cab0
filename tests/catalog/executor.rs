//! The executor against every outcome and every error code: whatever a tool
//! or a model does, one envelope comes back and nothing escapes.

use std::time::Duration;

use aptix::prelude::*;
use aptix::{Catalog, ErrorCode, Executor, Outcome, ToolCall, ToolContext, meta::AwaitReason};
use aptix_testkit::ToolHarness;
use serde_json::json;

/// Arguments with a bound, an enum and a nested object.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Job {
    /// How many milliseconds to work.
    #[schemars(range(max = 10_000))]
    pub millis: u64,
    /// What to do at the end.
    pub then: Then,
    /// Optional labels.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// What a job does at the end.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    /// Succeed with the labels.
    Succeed,
    /// Report a failure the model can act on.
    Fail,
    /// Report a denial.
    Deny,
    /// Fail with an internal error.
    Crash,
    /// Panic.
    Panic,
    /// Return a result that cannot be serialized.
    Unserializable,
}

/// A result that may refuse to serialize.
#[derive(Debug, JsonSchema)]
pub struct JobResult {
    /// The labels seen.
    pub labels: Vec<String>,
    /// Whether serialization must fail (never written, so not in the
    /// schema: the harness checks results against it).
    #[schemars(skip)]
    pub poison: bool,
}

impl Serialize for JobResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.poison {
            return Err(serde::ser::Error::custom("poisoned result"));
        }
        let mut state = serde::Serializer::serialize_struct(serializer, "JobResult", 1)?;
        serde::ser::SerializeStruct::serialize_field(&mut state, "labels", &self.labels)?;
        serde::ser::SerializeStruct::end(state)
    }
}

/// Works for a while, then does what it is told.
#[agent_tool(name = "job", usage = "Test tool.", timeout = "200ms")]
async fn job(args: Job, ctx: &ToolContext) -> Result<JobResult, ToolError> {
    let slept = tokio::time::sleep(Duration::from_millis(args.millis));
    if ctx
        .cancellation()
        .run_until_cancelled(slept)
        .await
        .is_none()
    {
        return Err(ToolError::cancelled());
    }
    match args.then {
        Then::Succeed => Ok(JobResult {
            labels: args.labels,
            poison: false,
        }),
        Then::Fail => Err(ToolError::failed("The job failed: try fewer labels.")),
        Then::Deny => Err(ToolError::denied("Policy forbids this job.")),
        Then::Crash => Err(std::io::Error::other("disk /var/secret is full").into()),
        Then::Panic => panic!("secret panic detail"),
        Then::Unserializable => Ok(JobResult {
            labels: args.labels,
            poison: true,
        }),
    }
}

/// Ignores cancellation and sleeps far beyond its time limit.
#[agent_tool(name = "stubborn", usage = "Test tool.", timeout = "50ms")]
async fn stubborn(_args: Empty) -> Result<(), ToolError> {
    tokio::time::sleep(Duration::from_secs(30)).await;
    Ok(())
}

/// No parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Empty {}

/// Answered by a person.
#[agent_tool(name = "ask_human", usage = "Test tool.", executor = human, output = Answer)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskHuman {
    /// The question.
    pub question: String,
}

/// A person's answer.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Answer {
    /// The answer text.
    pub text: String,
}

/// Run by the provider.
#[agent_tool(name = "web_search", usage = "Test tool.", executor = provider)]
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WebSearch {
    /// The query.
    pub query: String,
}

/// Opens a file on the client after approval; the server shapes the path.
#[agent_tool(
    name = "open_file",
    usage = "Test tool.",
    executor = client,
    approval = requires_approval,
    output = Opened
)]
async fn open_file(args: OpenFile) -> Result<OpenFilePayload, ToolError> {
    if args.path.contains("..") {
        return Err(ToolError::denied("Paths may not leave the workspace."));
    }
    Ok(OpenFilePayload {
        path: format!("/workspace/{}", args.path.trim_start_matches('/')),
    })
}

/// Arguments of `open_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct OpenFile {
    /// A path relative to the workspace.
    pub path: String,
}

/// What the client is asked to open.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OpenFilePayload {
    /// The absolute path.
    pub path: String,
}

/// What the client reports.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Opened {
    /// Bytes read.
    pub bytes: u64,
}

fn harness() -> ToolHarness {
    ToolHarness::new(
        Catalog::builder()
            .tool::<JobTool>()
            .tool::<StubbornTool>()
            .tool::<AskHuman>()
            .tool::<WebSearch>()
            .tool::<OpenFileTool>()
            .build()
            .unwrap_or_else(|error| panic!("{error}")),
    )
}

async fn job_call(arguments: &str) -> aptix_testkit::CallResult {
    harness().call_named("job", arguments).await
}

#[tokio::test]
async fn success_wraps_the_result() {
    let result = job_call(r#"{"millis":0,"then":"succeed","labels":["a"]}"#).await;
    assert_eq!(
        result.envelope().to_value()["result"],
        json!({ "labels": ["a"] })
    );
}

#[tokio::test]
async fn invalid_json() {
    let result = job_call(r#"{"millis": 0, "then": "succeed""#).await;
    assert_eq!(result.code(), ErrorCode::InvalidJson);
    assert!(
        result
            .error()
            .message
            .contains("EOF while parsing an object at character 31 of 31"),
        "{}",
        result.error().message
    );
}

/// Seed 002 §7: a refusal of malformed arguments quotes none of their
/// text (for any tool, not only one that declares secrets): the model
/// sent it, and events and logs must not carry it.
#[tokio::test]
async fn invalid_json_quotes_none_of_the_raw_arguments() {
    for raw in [
        r#"{"millis": 0, "then": "zqsecretzq"#,
        r#"{"millis": 0, "labels": ["zqsecretzq"] "then": "succeed"}"#,
        r#"{"zqsecretzq": 1,,}"#,
        r#"{"millis": zqsecretzq}"#,
        "{\"millis\": 0, \"then\": \"zq\u{1}secretzq\"}",
        r#"{"millis": 0} zqsecretzq"#,
    ] {
        let result = job_call(raw).await;
        assert_eq!(result.code(), ErrorCode::InvalidJson, "{raw}");
        let envelope = result.envelope().to_value().to_string();
        assert!(!envelope.contains("zq"), "{raw} -> {envelope}");
        assert!(
            result.error().message.contains(" at character "),
            "the place is still named: {}",
            result.error().message
        );
    }
}

#[tokio::test]
async fn not_object() {
    for (raw, found) in [
        ("[1,2]", "an array"),
        ("\"hi\"", "a string"),
        ("42", "a number"),
        ("null", "null"),
    ] {
        let result = job_call(raw).await;
        assert_eq!(result.code(), ErrorCode::NotObject, "{raw}");
        assert!(
            result.error().message.ends_with(&format!("not {found}.")),
            "{}",
            result.error().message
        );
    }
}

#[tokio::test]
async fn invalid_arguments_lists_every_violation_with_its_path() {
    let result =
        job_call(r#"{"millis": 99999, "then": "explode", "labels": [1], "extra": true}"#).await;
    assert_eq!(result.code(), ErrorCode::InvalidArguments);
    let details = result.error().details.clone().unwrap_or_default();
    let mut paths: Vec<String> = details
        .as_array()
        .map(|all| {
            all.iter()
                .map(|v| v["path"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    assert_eq!(paths, vec!["", "/labels/0", "/millis", "/then"]);
    let message = &result.error().message;
    assert!(message.contains("'extra' was unexpected"), "{message}");
    assert!(
        message.contains("99999 is greater than the maximum of 10000"),
        "{message}"
    );
}

#[tokio::test]
async fn empty_arguments_count_as_an_empty_object() {
    let result = harness().call_named("stubborn", "").await;
    // It parses as `{}` and runs (then times out, which is the next test's point).
    assert_eq!(result.code(), ErrorCode::Timeout);
}

#[tokio::test]
async fn unknown_tool_lists_the_available_names() {
    let result = harness().call_named("jobb", "{}").await;
    assert_eq!(result.code(), ErrorCode::UnknownTool);
    assert_eq!(
        result.error().message,
        "There is no tool named `jobb`. Did you mean `job`? Available tools: ask_human, job, open_file, stubborn, web_search."
    );
    assert!(!result.execution.is_server_tool());
    // Far from every name: no suggestion.
    let result = harness().call_named("get_weather", "{}").await;
    assert!(
        !result.error().message.contains("Did you mean"),
        "{}",
        result.error().message
    );
}

#[tokio::test]
async fn a_huge_unknown_name_gets_a_small_envelope() {
    let name = "x".repeat(1_000_000);
    let result = harness().call_named(&name, "{}").await;
    assert_eq!(result.code(), ErrorCode::UnknownTool);
    let envelope = result
        .execution
        .envelope()
        .map(|envelope| envelope.to_json_string())
        .unwrap_or_default();
    assert!(
        envelope.len() < 2048,
        "envelope of {} bytes",
        envelope.len()
    );
    let message = &result.error().message;
    assert!(
        message.starts_with(&format!("There is no tool named `{}…`.", "x".repeat(64))),
        "{message}"
    );
    assert!(!message.contains("Did you mean"), "{message}");
    // A long name that is still one typo away keeps its suggestion, and a
    // name a few characters past the longest tool is still compared.
    let result = harness().call_named("open_filee", "{}").await;
    assert!(
        result.error().message.contains("Did you mean `open_file`?"),
        "{}",
        result.error().message
    );
    let result = harness().call_named("ask_humanxxx", "{}").await;
    assert!(
        result.error().message.contains("Did you mean `ask_human`?"),
        "{}",
        result.error().message
    );
}

#[tokio::test]
async fn failed_shows_the_tools_message() {
    let result = job_call(r#"{"millis":0,"then":"fail"}"#).await;
    assert_eq!(result.code(), ErrorCode::Failed);
    assert_eq!(result.error().message, "The job failed: try fewer labels.");
}

#[tokio::test]
async fn denied_shows_the_tools_message() {
    let result = job_call(r#"{"millis":0,"then":"deny"}"#).await;
    assert_eq!(result.code(), ErrorCode::Denied);
    assert_eq!(result.error().message, "Policy forbids this job.");
}

#[tokio::test]
async fn internal_errors_hide_their_details() {
    let result = job_call(r#"{"millis":0,"then":"crash"}"#).await;
    assert_eq!(result.code(), ErrorCode::Internal);
    assert!(!result.error().message.contains("secret"));
    assert_eq!(result.error().message, aptix::error::INTERNAL_MESSAGE);
}

#[tokio::test]
async fn a_panic_becomes_an_internal_error() {
    let result = job_call(r#"{"millis":0,"then":"panic"}"#).await;
    assert_eq!(result.code(), ErrorCode::Internal);
    assert!(!result.error().message.contains("secret"));
}

#[tokio::test]
async fn an_unserializable_result_becomes_an_internal_error() {
    let result = job_call(r#"{"millis":0,"then":"unserializable"}"#).await;
    assert_eq!(result.code(), ErrorCode::Internal);
}

#[tokio::test]
async fn the_tools_own_timeout_is_enforced_even_if_it_ignores_cancellation() {
    let started = std::time::Instant::now();
    let result = harness().call_named("stubborn", "{}").await;
    assert_eq!(result.code(), ErrorCode::Timeout);
    assert_eq!(
        result.error().message,
        "The tool `stubborn` did not finish within 50ms and was stopped."
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Sleeps; declares no time limit of its own.
#[agent_tool(name = "nap", usage = "Test tool.")]
async fn nap(args: Nap) -> Result<(), ToolError> {
    tokio::time::sleep(Duration::from_millis(args.millis)).await;
    Ok(())
}

/// Arguments of `nap`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Nap {
    /// How long to sleep.
    pub millis: u64,
}

#[tokio::test]
async fn the_executor_default_timeout_applies_to_tools_without_their_own() {
    let catalog = Catalog::builder()
        .tool::<NapTool>()
        .tool::<JobTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let executor = Executor::new(catalog).with_default_timeout(Some(Duration::from_millis(20)));
    let ctx = ToolContext::new();
    let code =
        |execution: aptix::executor::Execution| execution.envelope().and_then(|e| e.error_code());
    let nap = ToolCall::new("c1", "nap", r#"{"millis":1000}"#);
    assert_eq!(
        code(executor.execute(&nap, &ctx).await),
        Some(ErrorCode::Timeout)
    );
    // `job` declares 200ms, which wins over the 20ms default.
    let job = ToolCall::new("c2", "job", r#"{"millis":60,"then":"succeed"}"#);
    assert_eq!(code(executor.execute(&job, &ctx).await), None);
    // With no default at all, nothing limits `nap`.
    let unlimited = executor.clone().with_default_timeout(None);
    let nap = ToolCall::new("c3", "nap", r#"{"millis":60}"#);
    assert_eq!(code(unlimited.execute(&nap, &ctx).await), None);
}

#[tokio::test]
async fn cancellation_stops_a_running_tool() {
    let token = aptix::context::CancellationToken::new();
    let harness = harness().with_context(ToolContext::new().with_cancellation(token.clone()));
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        token.cancel();
    };
    let (result, ()) = futures_util::future::join(
        harness.call_named("job", r#"{"millis":150,"then":"succeed"}"#),
        cancel,
    )
    .await;
    assert_eq!(result.code(), ErrorCode::Cancelled);
}

#[tokio::test]
async fn a_cancelled_context_runs_nothing() {
    let token = aptix::context::CancellationToken::new();
    token.cancel();
    let harness = harness().with_context(ToolContext::new().with_cancellation(token));
    let result = harness
        .call_named("job", r#"{"millis":0,"then":"panic"}"#)
        .await;
    assert_eq!(result.code(), ErrorCode::Cancelled);
}

#[tokio::test]
async fn a_human_tool_suspends_with_its_validated_arguments() {
    let result = harness()
        .call_named("ask_human", r#"{"question":"Ship it?"}"#)
        .await;
    assert_eq!(result.awaiting().reason, AwaitReason::Human);
    assert_eq!(result.payload(), json!({ "question": "Ship it?" }));
    assert!(!result.execution.requires_client_execution());
}

#[tokio::test]
async fn a_provider_tool_passes_through() {
    let result = harness()
        .call_named("web_search", r#"{"query":"rust"}"#)
        .await;
    assert!(matches!(result.execution.outcome, Outcome::PassThrough));
    assert!(!result.execution.is_server_tool());
    assert!(!result.execution.was_executed());
}

#[tokio::test]
async fn a_gated_client_tool_runs_its_preflight_then_awaits_approval_then_the_client() {
    let result = harness()
        .call_named("open_file", r#"{"path":"/notes.txt"}"#)
        .await;
    let awaiting = result.awaiting();
    assert_eq!(awaiting.reason, AwaitReason::Approval);
    assert_eq!(awaiting.then, Some(AwaitReason::Client));
    assert_eq!(result.payload(), json!({ "path": "/workspace/notes.txt" }));
    assert!(result.execution.requires_client_execution());
}

#[tokio::test]
async fn a_preflight_can_refuse_before_anything_suspends() {
    let result = harness()
        .call_named("open_file", r#"{"path":"../etc/passwd"}"#)
        .await;
    assert_eq!(result.code(), ErrorCode::Denied);
    assert!(!result.execution.requires_client_execution());
}

#[tokio::test]
async fn the_tool_sees_the_call_id() {
    /// Echoes its call id.
    #[agent_tool(name = "whoami", usage = "Test tool.")]
    async fn whoami(_args: Empty, ctx: &ToolContext) -> Result<String, ToolError> {
        Ok(ctx.tool_call_id().to_owned())
    }
    let harness = ToolHarness::for_tool::<WhoamiTool>();
    assert_eq!(harness.call(json!({})).await.ok::<String>(), "call_1");
}

#[tokio::test]
async fn null_for_an_optional_field_means_absent_as_in_openai_strict_mode() {
    let result = job_call(r#"{"millis":0,"then":"succeed","labels":null}"#).await;
    assert_eq!(
        result.envelope().to_value()["result"],
        json!({ "labels": [] })
    );
    // A required field is still required.
    let result = job_call(r#"{"millis":null,"then":"succeed"}"#).await;
    assert_eq!(result.code(), ErrorCode::InvalidArguments);
}

/// Log output captured in memory.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything logged in this test binary at WARN and above. Global, not
/// scoped: a scoped subscriber can miss events whose callsites other test
/// threads registered first.
fn captured_warnings() -> Captured {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            if let Err(error) = tracing::subscriber::set_global_default(subscriber) {
                panic!("{error}");
            }
            captured
        })
        .clone()
}

#[tokio::test]
async fn failure_events_name_the_call_at_warn_level() {
    let captured = captured_warnings();
    let executor = harness().executor().clone();
    let ctx = ToolContext::new()
        .with_conversation_id("conv-41")
        .with_session_id("sess-42");
    for (id, then) in [("call-panic", "panic"), ("call-crash", "crash")] {
        let arguments = format!(r#"{{"millis":0,"then":"{then}"}}"#);
        let execution = executor
            .execute(&ToolCall::new(id, "job", arguments), &ctx)
            .await;
        assert_eq!(
            execution.envelope().and_then(|e| e.error_code()),
            Some(ErrorCode::Internal)
        );
    }
    let execution = executor
        .execute(&ToolCall::new("call-nap", "stubborn", "{}"), &ctx)
        .await;
    assert_eq!(
        execution.envelope().and_then(|e| e.error_code()),
        Some(ErrorCode::Timeout)
    );
    let output = String::from_utf8_lossy(
        &captured
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned();
    let lines: Vec<&str> = output.lines().collect();
    for (message, tool, id) in [
        ("tool panicked", "job", "call-panic"),
        ("tool failed with an internal error", "job", "call-crash"),
        ("tool timed out", "stubborn", "call-nap"),
    ] {
        let line = lines
            .iter()
            .find(|line| line.contains(message) && line.contains(id))
            .unwrap_or_else(|| panic!("no `{message}` for {id} in:\n{output}"));
        for (field, value) in [
            ("tool", tool),
            ("tool_call_id", id),
            ("conversation_id", "conv-41"),
            ("session_id", "sess-42"),
        ] {
            assert!(
                line.contains(&format!("{field}={value}"))
                    || line.contains(&format!("{field}=\"{value}\"")),
                "`{field}` missing from: {line}"
            );
        }
    }
}

/// What a tool's `Serialize` writes and what its `JsonSchema` advertises
/// can drift apart (a hand-written `Serialize`, a `rename` on one side):
/// the model is then promised one shape and sent another. The testkit's
/// harness checks every final result of a tool with code against its
/// output schema, so the drift fails a test.
pub mod drifting_output {
    use aptix::prelude::*;

    /// Arguments of `drifting`.
    #[derive(Deserialize, JsonSchema)]
    pub struct NoArgs {}

    /// What `drifting` promises: an `id` that is a string.
    #[derive(JsonSchema)]
    pub struct Receipt {
        /// The receipt's id.
        pub id: String,
    }

    // Written by hand, and wrong: the schema says `id`, this writes `number`.
    impl serde::Serialize for Receipt {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct;
            let mut receipt = serializer.serialize_struct("Receipt", 1)?;
            receipt.serialize_field("number", &self.id)?;
            receipt.end()
        }
    }

    /// Issues a receipt.
    #[agent_tool(name = "drifting", usage = "Call to get a receipt.")]
    pub async fn drifting(_args: NoArgs) -> Result<Receipt, ToolError> {
        Ok(Receipt { id: "r-1".into() })
    }

    /// Issues a receipt, as promised.
    #[agent_tool(name = "faithful", usage = "Call to get a receipt.")]
    pub async fn faithful(_args: NoArgs) -> Result<super::Faithful, ToolError> {
        Ok(super::Faithful { id: "r-1".into() })
    }
}

/// What `faithful` returns, derived on both sides.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Faithful {
    /// The receipt's id.
    pub id: String,
}

#[tokio::test]
#[should_panic(expected = "`drifting` returned a result its output schema does not allow")]
async fn the_harness_refuses_a_result_that_breaks_the_advertised_output_schema() {
    ToolHarness::for_tool::<drifting_output::DriftingTool>()
        .call(json!({}))
        .await;
}

#[tokio::test]
async fn the_harness_accepts_a_result_that_fits_its_output_schema() {
    let result = ToolHarness::for_tool::<drifting_output::FaithfulTool>()
        .call(json!({}))
        .await;
    assert_eq!(
        result.envelope().to_value()["result"],
        json!({ "id": "r-1" })
    );
}
