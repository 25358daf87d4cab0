//! `aptix::mcp`: the catalog served over MCP, driven by rmcp's own client
//! in-process (over `tokio::io::duplex`) and over Streamable HTTP.

use crate::{get_location, hello_world};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use aptix::Catalog;
use aptix::Content;
use aptix::mcp::{McpLog, McpServer, Sampling};
use aptix::prelude::*;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ProgressNotificationParam, SamplingCapability,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};

static SAW_CANCEL: AtomicBool = AtomicBool::new(false);
static STARTED: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);
static DELETED: AtomicUsize = AtomicUsize::new(0);

/// Arguments of `wait_for_cancel`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitArgs {
    /// A label echoed back.
    pub label: String,
}

/// Waits until its call is cancelled and records that it saw the cancellation.
#[agent_tool(
    name = "wait_for_cancel",
    usage = "Test tool.",
    timeout = "20s",
    title = "Wait for cancellation",
    read_only = true
)]
async fn wait_for_cancel(args: WaitArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    STARTED.notify_one();
    ctx.cancellation().cancelled().await;
    SAW_CANCEL.store(true, Ordering::SeqCst);
    Ok(args.label)
}

/// Arguments of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteArgs {
    /// The path of the file to delete.
    pub path: String,
}

/// What `delete_file` did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    /// The path that was deleted.
    pub path: String,
}

/// Deletes a file (only counts here).
#[agent_tool(name = "delete_file", usage = "Test tool.", approval = requires_approval)]
async fn delete_file(args: DeleteArgs) -> Result<Deleted, ToolError> {
    DELETED.fetch_add(1, Ordering::SeqCst);
    Ok(Deleted { path: args.path })
}

/// Asks the person which city they mean.
#[agent_tool(
    name = "ask_city",
    usage = "Test tool.",
    executor = human,
    output = CityAnswer
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct AskCity {
    /// The question to put to the person.
    pub question: String,
}

/// The person's answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CityAnswer {
    /// The city.
    pub city: String,
    /// How sure the person is, from 1 to 5.
    #[schemars(range(min = 1, max = 5))]
    pub confidence: u8,
}

/// Asks the person for a place; its answer is nested, so no form fits it.
#[agent_tool(
    name = "ask_place",
    usage = "Test tool.",
    executor = human,
    output = PlaceAnswer
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct AskPlace {
    /// The question to put to the person.
    pub question: String,
}

/// A place, nested.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PlaceAnswer {
    /// Where.
    pub place: CityAnswer,
}

/// Adds two numbers; its result is not an object.
#[agent_tool(name = "add", usage = "Test tool.")]
async fn add(args: AddArgs) -> Result<i64, ToolError> {
    Ok(args.a + args.b)
}

/// Arguments of `add`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddArgs {
    /// The first number.
    pub a: i64,
    /// The second number.
    pub b: i64,
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .tool::<get_location::GetLocation>()
        .tool::<WaitForCancelTool>()
        .tool::<DeleteFileTool>()
        .tool::<AskCity>()
        .tool::<AskPlace>()
        .tool::<AddTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

/// What the test client's person does when asked.
#[derive(Clone)]
enum Person {
    Accept(Value),
    Decline,
}

/// An rmcp client whose person answers every elicitation the same way.
#[derive(Clone)]
struct TestClient {
    can_elicit: bool,
    can_sample: bool,
    person: Person,
    asked: Arc<Mutex<Vec<String>>>,
    progress: Arc<Mutex<Vec<f64>>>,
    /// `(level, data)` of every log message.
    logs: Arc<Mutex<Vec<(String, Value)>>>,
    /// Every sampling request, as JSON.
    sampled: Arc<Mutex<Vec<Value>>>,
}

impl TestClient {
    fn new(can_elicit: bool, person: Person) -> Self {
        TestClient {
            can_elicit,
            can_sample: false,
            person,
            asked: Arc::default(),
            progress: Arc::default(),
            logs: Arc::default(),
            sampled: Arc::default(),
        }
    }

    /// Declares `sampling`; the client's "LLM" answers `echo: <prompt>`.
    fn sampling(mut self) -> Self {
        self.can_sample = true;
        self
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = if self.can_elicit {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        if self.can_sample {
            capabilities.sampling = Some(SamplingCapability::default());
        }
        ClientConfig::new(capabilities, Implementation::new("aptix-test", "0.0.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = &request
        {
            let schema = serde_json::to_string(requested_schema).unwrap_or_default();
            self.asked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{message}\n{schema}"));
        }
        Ok(match &self.person {
            Person::Accept(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            Person::Decline => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    #[allow(deprecated)] // rmcp's sampling types (SEP-2577); the protocol still has them.
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        self.sampled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(serde_json::to_value(&params).unwrap_or(Value::Null));
        let prompt = params
            .messages
            .first()
            .and_then(|message| message.content.first())
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_default();
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(format!("echo: {prompt}")),
            "test-model".to_owned(),
        ))
    }

    #[allow(deprecated)] // rmcp's logging types (SEP-2577); the protocol still has them.
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|level| level.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((level, params.data));
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(params.progress);
    }
}

/// A server on one end of an in-memory pipe, the client on the other.
async fn connect(client: TestClient) -> RunningService<RoleClient, TestClient> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(McpServer::new(catalog()).serve_io(server_io));
    client
        .serve(client_io)
        .await
        .unwrap_or_else(|error| panic!("client could not connect: {error}"))
}

fn params(name: &'static str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name).with_arguments(arguments)
}

async fn call(
    client: &RunningService<RoleClient, TestClient>,
    name: &'static str,
    arguments: Value,
) -> CallToolResult {
    client
        .call_tool(params(name, arguments))
        .await
        .unwrap_or_else(|error| panic!("tools/call {name} failed: {error}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn lists_server_and_human_tools_in_mcp_shape() {
    let client = connect(TestClient::new(true, Person::Decline)).await;
    let tools = client
        .list_all_tools()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    // Sorted, and without the client tool `get_location`.
    assert_eq!(
        names,
        [
            "add",
            "agent_hello_world",
            "ask_city",
            "ask_place",
            "delete_file",
            "wait_for_cancel"
        ]
    );
    insta::assert_json_snapshot!("tools_list", tools);
}

#[tokio::test]
async fn calls_return_structured_results() {
    let client = connect(TestClient::new(true, Person::Decline)).await;
    let result = call(&client, "agent_hello_world", json!({"name": "Ada"})).await;
    assert_eq!(result.is_error, Some(false));
    let structured = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("no structuredContent"));
    assert_eq!(structured["message"], "Hello, Ada! Welcome.");
    let copy: Value = serde_json::from_str(&text(&result)).unwrap_or(Value::Null);
    assert_eq!(copy, structured);

    // A non-object result: text only, never wrapped.
    let result = call(&client, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content, None);
    assert_eq!(text(&result), "5");
}

/// rmcp's client sends a progress token with every request: a tool that
/// reports nothing gets no notifications (each would cost a written
/// message before and after the call).
#[tokio::test]
async fn a_tool_that_reports_nothing_sends_no_progress() {
    let client = TestClient::new(true, Person::Decline);
    let progress = client.progress.clone();
    let running = connect(client).await;
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.set_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::String("p-1".into()),
    ));
    let mut request = params("agent_hello_world", json!({"name": "Ada"}));
    request.meta = Some(meta);
    let result = running
        .call_tool(request)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(result.is_error, Some(false));
    // Anything sent would have arrived by now.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let seen = progress.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen, Vec::<f64>::new());
}

#[tokio::test]
async fn tool_errors_are_results_naming_the_field() {
    let client = connect(TestClient::new(true, Person::Decline)).await;
    let result = call(&client, "agent_hello_world", json!({"nam": "Ada"})).await;
    assert_eq!(result.is_error, Some(true));
    let message = text(&result);
    assert!(message.contains("name"), "{message}");
    let error = result.structured_content.unwrap_or(Value::Null);
    assert_eq!(error["code"], "invalid_arguments");

    // The tool's own error.
    let result = call(&client, "agent_hello_world", json!({"name": " "})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("`name` is empty"),
        "{}",
        text(&result)
    );
}

#[tokio::test]
async fn unknown_and_unlisted_tools_are_protocol_errors() {
    let client = connect(TestClient::new(true, Person::Decline)).await;
    for name in ["no_such_tool", "get_location"] {
        let error = client
            .call_tool(params(name, json!({"reason": "x"})))
            .await
            .err()
            .unwrap_or_else(|| panic!("{name} was called"));
        match error {
            ServiceError::McpError(error) => {
                assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
                assert!(error.message.contains(name), "{}", error.message);
            }
            other => panic!("expected a JSON-RPC error, got {other}"),
        }
    }
}

#[tokio::test]
async fn cancellation_reaches_the_tool() {
    let client = connect(TestClient::new(true, Person::Decline)).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(
        "wait_for_cancel",
        json!({"label": "x"}),
    )));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    tokio::time::timeout(Duration::from_secs(5), STARTED.notified())
        .await
        .unwrap_or_else(|_| panic!("the tool never started"));
    handle
        .cancel(Some("test".into()))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    for _ in 0..500 {
        if SAW_CANCEL.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the tool's token was never cancelled");
}

#[tokio::test]
async fn approval_is_asked_through_elicitation() {
    // Approved: the tool runs, once.
    let client = TestClient::new(true, Person::Accept(json!({"approve": true})));
    let asked = client.asked.clone();
    let running = connect(client).await;
    let before = DELETED.load(Ordering::SeqCst);
    let result = call(&running, "delete_file", json!({"path": "/tmp/a"})).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(DELETED.load(Ordering::SeqCst), before + 1);
    let question = asked.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
    assert!(question.contains("/tmp/a"), "{question}");
    assert!(question.contains("\"approve\""), "{question}");

    // Invalid arguments: refused before anyone is asked.
    let result = call(&running, "delete_file", json!({"file": "/tmp/a"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(asked.lock().unwrap_or_else(|e| e.into_inner()).len(), 1);

    // Accepted, but `approve: false`: denied.
    let running = connect(TestClient::new(
        true,
        Person::Accept(json!({"approve": false})),
    ))
    .await;
    let result = call(&running, "delete_file", json!({"path": "/tmp/b"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        result.structured_content.unwrap_or(Value::Null)["code"],
        "denied"
    );

    // Declined: denied, nothing deleted.
    let before = DELETED.load(Ordering::SeqCst);
    let running = connect(TestClient::new(true, Person::Decline)).await;
    let result = call(&running, "delete_file", json!({"path": "/tmp/c"})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("did not approve"),
        "{}",
        text(&result)
    );
    assert_eq!(DELETED.load(Ordering::SeqCst), before);

    // A client that cannot elicit: told so, nothing run.
    let running = connect(TestClient::new(
        false,
        Person::Accept(json!({"approve": true})),
    ))
    .await;
    let result = call(&running, "delete_file", json!({"path": "/tmp/d"})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("elicitation"), "{}", text(&result));
    assert_eq!(DELETED.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn human_tools_ask_with_a_form_from_the_output_schema() {
    let client = TestClient::new(
        true,
        Person::Accept(json!({"city": "Lyon", "confidence": 4})),
    );
    let asked = client.asked.clone();
    let running = connect(client).await;
    let result = call(&running, "ask_city", json!({"question": "Which Paris?"})).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(
        result.structured_content,
        Some(json!({"city": "Lyon", "confidence": 4}))
    );
    let question = asked.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
    assert!(question.contains("Which Paris?"), "{question}");
    assert!(question.contains("\"confidence\""), "{question}");

    // An answer outside the output schema is refused.
    let running = connect(TestClient::new(
        true,
        Person::Accept(json!({"city": "Lyon", "confidence": 9})),
    ))
    .await;
    let result = call(&running, "ask_city", json!({"question": "Which Paris?"})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("/confidence"), "{}", text(&result));

    // A nested output schema cannot be a form.
    let result = call(&running, "ask_place", json!({"question": "Where?"})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("`place`"), "{}", text(&result));

    // Declined.
    let running = connect(TestClient::new(true, Person::Decline)).await;
    let result = call(&running, "ask_city", json!({"question": "Which Paris?"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        result.structured_content.unwrap_or(Value::Null)["code"],
        "denied"
    );
}

#[tokio::test]
async fn streamable_http_serves_and_elicits() {
    let server = McpServer::new(catalog())
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let transport = {
        crate::common::install_tls();
        rmcp::transport::StreamableHttpClientTransport::from_uri(server.url())
    };
    let client = TestClient::new(true, Person::Accept(json!({"approve": true})))
        .serve(transport)
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let tools = client
        .list_all_tools()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(tools.len(), 6);
    let result = client
        .call_tool(params("agent_hello_world", json!({"name": "Ada"})))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(result.is_error, Some(false));
    let result = client
        .call_tool(params("delete_file", json!({"path": "/tmp/http"})))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    drop(client);
    server
        .shutdown()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

#[tokio::test]
async fn http_refuses_foreign_hosts_and_origins() {
    let server = McpServer::new(catalog())
        .allow_host("tools.example.com")
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let port = server.local_addr().port();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    });
    let http = crate::common::http_client();
    let post = |host: String, origin: Option<String>| {
        let mut request = http
            .post(server.url())
            .header("Host", host)
            .header("Accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        request.send()
    };
    let status = |response: Result<reqwest::Response, reqwest::Error>| {
        response
            .unwrap_or_else(|error| panic!("{error}"))
            .status()
            .as_u16()
    };
    // Rebound names, other ports, foreign origins: 403.
    assert_eq!(status(post("evil.example".into(), None).await), 403);
    assert_eq!(status(post("localhost:1".into(), None).await), 403);
    assert_eq!(
        status(
            post(
                format!("127.0.0.1:{port}"),
                Some("http://evil.example".into())
            )
            .await
        ),
        403
    );
    // Loopback with the bound port, a configured host, a loopback origin: served.
    assert_eq!(status(post(format!("127.0.0.1:{port}"), None).await), 200);
    assert_eq!(status(post(format!("localhost:{port}"), None).await), 200);
    assert_eq!(status(post("tools.example.com".into(), None).await), 200);
    assert_eq!(
        status(
            post(
                format!("localhost:{port}"),
                Some(format!("http://localhost:{port}"))
            )
            .await
        ),
        200
    );
    server
        .shutdown()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

#[tokio::test]
async fn protocol_2026_asks_with_input_required_results() {
    use rmcp::model::{CallToolResponse, ProtocolVersion};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(McpServer::new(catalog()).serve_io(server_io));
    let client = TestClient::new(true, Person::Decline)
        .serve_with_lifecycle(
            client_io,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let ask = |path: &str| params("delete_file", json!({"path": path}));
    let first = client
        .call_tool_once(ask("/tmp/mrtr"))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let CallToolResponse::InputRequired(input) = first else {
        panic!("expected input_required, got {first:?}")
    };
    let requests = input.input_requests.unwrap_or_default();
    assert!(requests.contains_key("approval"), "{requests:?}");
    let state = input.request_state.unwrap_or_default();
    let yes = std::collections::BTreeMap::from([(
        "approval".to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    )]);

    // The answer is bound to the arguments: other arguments are asked again.
    let other = client
        .call_tool_once(
            ask("/tmp/other")
                .with_input_responses(yes.clone())
                .with_request_state(state.clone()),
        )
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(matches!(other, CallToolResponse::InputRequired(_)));

    let before = DELETED.load(Ordering::SeqCst);
    let done = client
        .call_tool_once(
            ask("/tmp/mrtr")
                .with_input_responses(yes)
                .with_request_state(state),
        )
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let CallToolResponse::Complete(result) = done else {
        panic!("expected a result, got {done:?}")
    };
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert!(DELETED.load(Ordering::SeqCst) > before);
}

// --- Content blocks, logging, sampling, progress, text -----------------------

/// A 1x1 PNG, base64.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// Returns one image block.
#[agent_tool(name = "picture", usage = "Test tool.")]
async fn picture(_args: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::image(PIXEL, "image/png"))
}

/// Returns one block of every kind.
#[agent_tool(name = "gallery", usage = "Test tool.")]
async fn gallery(_args: NoArgs) -> Result<Vec<Content>, ToolError> {
    Ok(vec![
        Content::text("Everything:"),
        Content::image(PIXEL, "image/png"),
        Content::audio("UklGRg==", "audio/wav"),
        Content::resource("test://notes", "text/plain", "Some notes."),
        Content::resource_blob("test://bytes", "application/octet-stream", "AAEC"),
    ])
}

/// The size of a framed picture.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Frame {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// Returns a typed result with an image attached (`ToolReturn`).
#[agent_tool(name = "framed_picture", usage = "Test tool.")]
async fn framed_picture(_args: NoArgs) -> Result<ToolReturn<Frame>, ToolError> {
    Ok(ToolReturn::new(Frame {
        width: 1,
        height: 1,
    })
    .with(Content::image(PIXEL, "image/png")))
}

/// An object that looks like a content block but is plain data.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LooksLikeContent {
    /// Not a content kind, just a field.
    #[serde(rename = "type")]
    pub kind: String,
    /// Some text.
    pub text: String,
}

/// Returns an object shaped like a text block; it must stay JSON.
#[agent_tool(name = "look_alike", usage = "Test tool.")]
async fn look_alike(_args: NoArgs) -> Result<LooksLikeContent, ToolError> {
    Ok(LooksLikeContent {
        kind: "text".to_owned(),
        text: "plain data".to_owned(),
    })
}

/// Returns a string with quotes and a line break.
#[agent_tool(name = "quote", usage = "Test tool.")]
async fn quote(_args: NoArgs) -> Result<String, ToolError> {
    Ok("She said \"hi\".\nThen left.".to_owned())
}

/// Logs one message at each of three levels.
#[agent_tool(name = "chatty", usage = "Test tool.")]
async fn chatty(_args: NoArgs, ctx: &ToolContext) -> Result<bool, ToolError> {
    let Some(log) = ctx.state::<McpLog>() else {
        return Ok(false);
    };
    log.debug("debug detail").await;
    log.info("info step").await;
    log.warning("warning sign").await;
    Ok(true)
}

/// Arguments of `ask_llm`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskLlmArgs {
    /// What to ask the client's LLM.
    pub prompt: String,
}

/// Asks the client's LLM.
#[agent_tool(name = "ask_llm", usage = "Test tool.")]
async fn ask_llm(args: AskLlmArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    let Some(llm) = ctx.state::<Sampling>() else {
        return Err(ToolError::failed("no sampling"));
    };
    let answer = llm
        .create_text_message(args.prompt, 100)
        .await
        .map_err(|error| ToolError::failed(error.to_string()))?;
    Ok(format!("LLM said: {answer}"))
}

/// Arguments of `count`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CountArgs {
    /// The progress values to report, of 100.
    pub steps: Vec<f64>,
}

/// Reports each step as progress of 100.
#[agent_tool(name = "count", usage = "Test tool.")]
async fn count(args: CountArgs, ctx: &ToolContext) -> Result<usize, ToolError> {
    for step in &args.steps {
        ctx.progress(*step, Some(100.0), None);
    }
    Ok(args.steps.len())
}

/// Arguments of a tool that takes none.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

fn features_catalog() -> Catalog {
    Catalog::builder()
        .tool::<PictureTool>()
        .tool::<GalleryTool>()
        .tool::<FramedPictureTool>()
        .tool::<LookAlikeTool>()
        .tool::<QuoteTool>()
        .tool::<ChattyTool>()
        .tool::<AskLlmTool>()
        .tool::<CountTool>()
        .tool::<hello_world::HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"))
}

async fn connect_features(client: TestClient) -> RunningService<RoleClient, TestClient> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(McpServer::new(features_catalog()).serve_io(server_io));
    client
        .serve(client_io)
        .await
        .unwrap_or_else(|error| panic!("client could not connect: {error}"))
}

/// Waits (up to a second) until `seen` holds at least `count` items.
async fn wait_for<T: Clone>(seen: &Arc<Mutex<Vec<T>>>, count: usize) -> Vec<T> {
    for _ in 0..100 {
        if seen.lock().unwrap_or_else(|e| e.into_inner()).len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[tokio::test]
async fn content_results_are_sent_as_content_blocks() {
    let client = connect_features(TestClient::new(false, Person::Decline)).await;
    let result = call(&client, "picture", json!({})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content, None);
    assert_eq!(
        serde_json::to_value(&result.content).unwrap_or(Value::Null),
        json!([{"type": "image", "data": PIXEL, "mimeType": "image/png"}])
    );

    let result = call(&client, "gallery", json!({})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content, None);
    assert_eq!(
        serde_json::to_value(&result.content).unwrap_or(Value::Null),
        json!([
            {"type": "text", "text": "Everything:"},
            {"type": "image", "data": PIXEL, "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {
                "uri": "test://notes", "mimeType": "text/plain", "text": "Some notes."
            }},
            {"type": "resource", "resource": {
                "uri": "test://bytes", "mimeType": "application/octet-stream", "blob": "AAEC"
            }},
        ])
    );

    // Recognized by the tool's output type, not by the result's shape.
    let result = call(&client, "look_alike", json!({})).await;
    let plain = json!({"type": "text", "text": "plain data"});
    assert_eq!(result.structured_content, Some(plain.clone()));
    let copy: Value = serde_json::from_str(&text(&result)).unwrap_or(Value::Null);
    assert_eq!(copy, plain);
}

#[tokio::test]
async fn a_tool_return_is_structured_content_with_its_attachments_after_the_text() {
    let client = connect_features(TestClient::new(false, Person::Decline)).await;
    let listed = client
        .list_all_tools()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let framed = listed
        .iter()
        .find(|tool| tool.name == "framed_picture")
        .unwrap_or_else(|| panic!("framed_picture is not listed"));
    // The output schema is the value's: the attachments are not part of it.
    let output = serde_json::to_value(&framed.output_schema).unwrap_or(Value::Null);
    assert_eq!(output["properties"]["width"]["type"], "integer", "{output}");
    assert!(output["properties"].get("content").is_none(), "{output}");

    let result = call(&client, "framed_picture", json!({})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        result.structured_content,
        Some(json!({"width": 1, "height": 1}))
    );
    assert_eq!(
        serde_json::to_value(&result.content).unwrap_or(Value::Null),
        json!([
            {"type": "text", "text": r#"{"width":1,"height":1}"#},
            {"type": "image", "data": PIXEL, "mimeType": "image/png"},
        ])
    );
}

#[tokio::test]
async fn content_results_are_json_outside_mcp() {
    let executor = aptix::Executor::new(features_catalog());
    let call = aptix::ToolCall::new("c-1", "gallery", "{}");
    let execution = executor.execute(&call, &ToolContext::new()).await;
    let aptix::Outcome::Final(envelope) = execution.outcome else {
        panic!("expected a final envelope")
    };
    let result = envelope
        .result()
        .map(|result| result.to_value())
        .unwrap_or(Value::Null);
    assert_eq!(result[0], json!({"type": "text", "text": "Everything:"}));
    assert_eq!(result[1]["mimeType"], "image/png");
    assert_eq!(result[4]["resource"]["blob"], "AAEC");
}

#[tokio::test]
async fn string_results_are_unquoted_text() {
    let client = connect_features(TestClient::new(false, Person::Decline)).await;
    let result = call(&client, "quote", json!({})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), "She said \"hi\".\nThen left.");
    assert_eq!(result.structured_content, None);
}

#[allow(deprecated)] // rmcp's logging types (SEP-2577); the protocol still has them.
#[tokio::test]
async fn logging_respects_the_session_level() {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};

    let client = TestClient::new(false, Person::Decline);
    let logs = client.logs.clone();
    let running = connect_features(client).await;
    let capabilities = running
        .peer_info()
        .map(|info| info.capabilities.clone())
        .unwrap_or_default();
    assert!(capabilities.logging.is_some(), "{capabilities:?}");

    // Until the client sets a level: info and above.
    let result = call(&running, "chatty", json!({})).await;
    assert_eq!(result.structured_content, None);
    assert_eq!(text(&result), "true");
    let seen = wait_for(&logs, 2).await;
    assert_eq!(
        seen,
        [
            ("info".to_owned(), json!("info step")),
            ("warning".to_owned(), json!("warning sign")),
        ]
    );

    // `debug`: everything.
    logs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    running
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    call(&running, "chatty", json!({})).await;
    let seen = wait_for(&logs, 3).await;
    let levels: Vec<&str> = seen.iter().map(|(level, _)| level.as_str()).collect();
    assert_eq!(levels, ["debug", "info", "warning"]);

    // `warning`: only the warning.
    logs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    running
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    call(&running, "chatty", json!({})).await;
    // Waits the full second for a second message that must not come.
    let seen = wait_for(&logs, 2).await;
    assert_eq!(seen, [("warning".to_owned(), json!("warning sign"))]);

    // The level is the session's: a new session starts at info again.
    let client = TestClient::new(false, Person::Decline);
    let logs = client.logs.clone();
    let running = connect_features(client).await;
    call(&running, "chatty", json!({})).await;
    assert_eq!(wait_for(&logs, 2).await.len(), 2);
}

#[tokio::test]
async fn sampling_reaches_the_clients_llm_when_it_can_sample() {
    let client = TestClient::new(false, Person::Decline).sampling();
    let sampled = client.sampled.clone();
    let running = connect_features(client).await;
    let result = call(&running, "ask_llm", json!({"prompt": "Say hi"})).await;
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert_eq!(text(&result), "LLM said: echo: Say hi");
    let requests = sampled.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(
        requests,
        [json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
            "maxTokens": 100
        })]
    );

    // Without the capability the tool finds no `Sampling`.
    let running = connect_features(TestClient::new(false, Person::Decline)).await;
    let result = call(&running, "ask_llm", json!({"prompt": "Say hi"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), "no sampling");
}

#[tokio::test]
async fn listed_schemas_name_their_dialect() {
    let client = connect_features(TestClient::new(false, Person::Decline)).await;
    let tools = client
        .list_all_tools()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    for tool in &tools {
        assert_eq!(
            tool.input_schema.get("$schema"),
            Some(&json!("https://json-schema.org/draft/2020-12/schema")),
            "{}",
            tool.name
        );
    }
    let hello = tools
        .iter()
        .find(|tool| tool.name == "agent_hello_world")
        .and_then(|tool| tool.output_schema.clone())
        .unwrap_or_else(|| panic!("agent_hello_world has no outputSchema"));
    assert_eq!(
        hello.get("$schema"),
        Some(&json!("https://json-schema.org/draft/2020-12/schema"))
    );
    // Content results have no object schema, so no outputSchema.
    let picture = tools.iter().find(|tool| tool.name == "picture");
    assert!(picture.is_some_and(|tool| tool.output_schema.is_none()));
}

#[tokio::test]
async fn progress_only_ever_increases() {
    async fn progress_of(steps: Value, expected: usize) -> Vec<f64> {
        let client = TestClient::new(false, Person::Decline);
        let progress = client.progress.clone();
        let running = connect_features(client).await;
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_progress_token(rmcp::model::ProgressToken(
            rmcp::model::NumberOrString::String("p-2".into()),
        ));
        let mut request = params("count", json!({ "steps": steps }));
        request.meta = Some(meta);
        let result = running
            .call_tool(request)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(result.is_error, Some(false), "{}", text(&result));
        wait_for(&progress, expected).await;
        // Anything sent after the expected reports would show up by now.
        tokio::time::sleep(Duration::from_millis(50)).await;
        progress.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    // The tool reaches its total: the server adds nothing lower after it.
    assert_eq!(progress_of(json!([50.0, 100.0]), 2).await, [50.0, 100.0]);
    // A report that goes back is dropped; the end is the tool's total.
    assert_eq!(progress_of(json!([30.0, 20.0]), 2).await, [30.0, 100.0]);
    // A tool that starts at 0 is closed at its total.
    assert_eq!(progress_of(json!([0.0, 60.0]), 3).await, [0.0, 60.0, 100.0]);
    // Without a total, the close is 1 of 1 only when it moves forward.
    assert_eq!(progress_of(json!([0.5]), 2).await, [0.5, 100.0]);
}

/// A connection that sent the start of a request and nothing more.
async fn half_sent(port: u16) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    stream
        .write_all(format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes())
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    stream
}

/// Reads until the server closes `stream` or `within` passes; true when it
/// closed (or reset) the connection in time.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut sink = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut sink))
        .await
        .is_ok()
}

#[tokio::test]
async fn http_closes_a_half_sent_request_after_the_header_timeout() {
    let server = McpServer::new(catalog())
        .header_read_timeout(Duration::from_millis(300))
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let mut slow = half_sent(server.local_addr().port()).await;
    assert!(
        closed_within(&mut slow, Duration::from_secs(5)).await,
        "a request whose headers never end still held open after 5 s (header timeout 300 ms)"
    );
    server
        .shutdown()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

#[tokio::test]
async fn http_serves_at_most_max_connections_at_once() {
    use tokio::io::AsyncWriteExt;
    // The header timeout (which also bounds how long shutdown waits for
    // the half-sent connections) is well beyond the checks below.
    let server = McpServer::new(catalog())
        .max_connections(2)
        .header_read_timeout(Duration::from_secs(2))
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let port = server.local_addr().port();
    let first = half_sent(port).await;
    let _second = half_sent(port).await;
    // A complete request on a third connection (refused at once for its
    // host when it is served): no answer while the two others are open.
    let mut third = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    third
        .write_all(b"GET /mcp HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(
        !closed_within(&mut third, Duration::from_millis(500)).await,
        "a third connection was served beside two open ones (limit 2)"
    );
    drop(first);
    assert!(
        closed_within(&mut third, Duration::from_secs(5)).await,
        "the waiting connection was not served once another closed"
    );
    server
        .shutdown()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

/// POSTs an `initialize` to `server`; the status, the session id and the body.
async fn initialize_session(
    http: &reqwest::Client,
    server: &aptix::mcp::HttpServer,
) -> (u16, Option<String>, String) {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    });
    let response = http
        .post(server.url())
        .header("Accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = response.text().await.unwrap_or_default();
    (status, session, body)
}

/// Sends `notifications/initialized` in `session`.
async fn send_initialized(
    http: &reqwest::Client,
    server: &aptix::mcp::HttpServer,
    session: &str,
) -> u16 {
    http.post(server.url())
        .header("Accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"))
        .status()
        .as_u16()
}

#[tokio::test]
async fn http_refuses_sessions_beyond_max_sessions() {
    let server = McpServer::new(catalog())
        .max_sessions(3)
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let http = crate::common::http_client();
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let (status, session, body) = initialize_session(&http, &server).await;
        assert_eq!(status, 200, "{body}");
        let session = session.unwrap_or_else(|| panic!("no session id"));
        assert_eq!(send_initialized(&http, &server, &session).await, 202);
        sessions.push(session);
    }
    let (status, session, body) = initialize_session(&http, &server).await;
    assert_eq!(
        status, 503,
        "a fourth session beside three (limit 3): {body}"
    );
    assert!(session.is_none());
    assert!(body.contains("sessions"), "{body}");
    // Closing one makes room.
    let deleted = http
        .delete(server.url())
        .header("mcp-session-id", &sessions[0])
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let (status, _, body) = initialize_session(&http, &server).await;
    assert_eq!(status, 200, "{body}");
    server
        .shutdown()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

#[tokio::test]
async fn http_closes_sessions_that_never_finish_initialization() {
    let server = McpServer::new(catalog())
        .max_sessions(1)
        .uninitialized_session_timeout(Duration::from_millis(300))
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    let http = crate::common::http_client();
    let (status, _, body) = initialize_session(&http, &server).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = initialize_session(&http, &server).await;
    assert_eq!(status, 503);
    // The first never sent `notifications/initialized`: gone after its
    // short life, so a new one fits.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (status, session, body) = initialize_session(&http, &server).await;
    assert_eq!(
        status, 200,
        "the uninitialized session still holds its place: {body}"
    );
    let session = session.unwrap_or_else(|| panic!("no session id"));
    assert_eq!(send_initialized(&http, &server, &session).await, 202);
    // An initialized session stays.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (status, _, _) = initialize_session(&http, &server).await;
    assert_eq!(status, 503);
    server
        .shutdown()
        .await
        .unwrap_or_else(|error| panic!("{error}"));
}

/// The pool a tool of [`lookup`] reads from its context.
#[derive(Debug)]
pub struct Pool;

/// Looks something up in the pool its context holds.
#[agent_tool(name = "lookup", usage = "Test tool.", state = [Pool])]
async fn lookup(_args: NoArgs, ctx: &ToolContext) -> Result<bool, ToolError> {
    Ok(ctx.require_state::<Pool>().is_ok())
}

/// A server whose context lacks state a tool declares is refused before it
/// serves anyone (over a byte stream and over HTTP), naming the tool and
/// the type, as an agent's build is: never an `internal` error on the
/// first call.
#[tokio::test]
async fn a_server_whose_context_lacks_declared_state_does_not_start() {
    let catalog = || {
        Catalog::builder()
            .tool::<LookupTool>()
            .build()
            .unwrap_or_else(|error| panic!("{error}"))
    };
    let (server_io, _client_io) = tokio::io::duplex(1 << 10);
    let refused = McpServer::new(catalog()).serve_io(server_io).await;
    let message = match refused {
        Err(error) => error.to_string(),
        Ok(()) => panic!("a server without the declared state served"),
    };
    assert!(
        message.contains("`lookup`") && message.contains("Pool"),
        "{message}"
    );
    let refused = McpServer::new(catalog())
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await;
    assert!(
        matches!(refused, Err(aptix::mcp::McpError::MissingState(_))),
        "{:?}",
        refused.err()
    );
    // With the state, it serves.
    let http = McpServer::new(catalog())
        .context(ToolContext::new().with_state(Pool))
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    drop(http);
}
