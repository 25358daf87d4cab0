//! Tool search: a request carries the tools always offered and a search;
//! what a search finds is offered for the rest of the conversation, read
//! back from the transcript (so a store restores it), and a call of a tool
//! not found yet never runs.

use crate::common::done;
use std::sync::Arc;

use aptix::agent::AgentError;
use aptix::agent::CallMode;
use aptix::durable::{DurableAgent, Resolution};
use aptix::model::{ChatRequest, NativeToolSearch};
use aptix::store::SqliteStore;
use aptix::tool_search::{SEARCH_TOOL, ToolIndex, revealed};
use aptix::{
    Agent, AgentEvent, Catalog, Conversation, Dialect, DoneReason, Input, ToolEntry,
    catalog::ToolEntryBuilder, meta::Approval, tool_search::ToolSearch,
};
use aptix_testkit::mock_anthropic::{AnthropicTurn, MockAnthropicServer};
use aptix_testkit::{ScriptedModel, ScriptedTurn, tool_results};
use futures_util::StreamExt;
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// How often each tool ran.
#[derive(Default, Clone)]
struct Runs(Arc<std::sync::Mutex<Vec<String>>>);

impl Runs {
    fn of(&self, name: &str) -> usize {
        self.0
            .lock()
            .map(|runs| runs.iter().filter(|run| *run == name).count())
            .unwrap_or(0)
    }
}

fn tool(
    runs: &Runs,
    namespace: &str,
    name: &str,
    description: &str,
    field: (&str, &str),
) -> ToolEntryBuilder {
    let runs = runs.clone();
    let tool_name = name.to_owned();
    ToolEntry::from_json_schema(
        name,
        "When the task asks for exactly this.",
        description,
        json!({
            "type": "object",
            "properties": { field.0: { "type": "string", "description": field.1 } },
            "required": [field.0],
            "additionalProperties": false
        }),
        move |arguments: Value, _context| {
            let runs = runs.clone();
            let name = tool_name.clone();
            async move {
                if let Ok(mut held) = runs.0.lock() {
                    held.push(name.clone());
                }
                Ok(json!({ "ran": name, "with": arguments }))
            }
        },
    )
    .namespace(namespace)
}

/// Twelve tools in four namespaces; `payments_refund` needs an approval.
fn catalog(runs: &Runs) -> Catalog {
    let tools = [
        (
            "github",
            "github_create_issue",
            "Opens a new issue in a GitHub repository.",
            ("title", "The issue's title."),
        ),
        (
            "github",
            "github_close_issue",
            "Closes an open GitHub issue.",
            ("issue", "The issue number."),
        ),
        (
            "github",
            "github_list_pull_requests",
            "Lists the open pull requests of a repository.",
            ("repository", "owner/name."),
        ),
        (
            "payments",
            "payments_refund",
            "Refunds a payment to the customer's card.",
            ("payment", "The payment id."),
        ),
        (
            "payments",
            "payments_charge",
            "Charges a customer's card.",
            ("customer", "The customer id."),
        ),
        (
            "payments",
            "payments_list_invoices",
            "Lists a customer's invoices.",
            ("customer", "The customer id."),
        ),
        (
            "calendar",
            "calendar_create_event",
            "Schedules a meeting in the calendar.",
            ("when", "Start time, RFC 3339."),
        ),
        (
            "calendar",
            "calendar_free_slots",
            "Finds free time in someone's calendar.",
            ("person", "Whose calendar."),
        ),
        (
            "calendar",
            "calendar_cancel_event",
            "Cancels a scheduled meeting.",
            ("event", "The event id."),
        ),
        (
            "weather",
            "weather_forecast",
            "The weather forecast for a city for the next days.",
            ("city", "The city."),
        ),
        (
            "weather",
            "weather_now",
            "The current temperature and conditions in a city.",
            ("city", "The city."),
        ),
        (
            "clock",
            "get_time",
            "The current date and time.",
            ("zone", "An IANA time zone."),
        ),
    ];
    let mut builder = Catalog::builder();
    for (namespace, name, description, field) in tools {
        let mut entry = tool(runs, namespace, name, description, field);
        if name == "payments_refund" {
            entry = entry.approval(Approval::RequiresApproval);
        }
        builder = builder.entry(entry);
    }
    aptix_testkit::assert_catalog_valid(builder)
}

fn call(id: &str, name: &str, arguments: Value) -> ScriptedTurn {
    ScriptedTurn::new().tool_call(id, name, &arguments.to_string())
}

fn tool_names(request: &ChatRequest) -> Vec<&str> {
    request
        .tools
        .iter()
        .map(|spec| spec.name.as_str())
        .collect()
}

async fn run(agent: &Agent, conversation: &mut Conversation, input: Input) -> Vec<AgentEvent> {
    agent.run(conversation, input).collect().await
}

/// An agent over the test catalog, searching it as `search` says.
fn agent(runs: &Runs, model: &Arc<ScriptedModel>, search: ToolSearch) -> Result<Agent, AgentError> {
    Agent::builder()
        .shared_model(model.clone())
        .catalog(catalog(runs))
        .tool_search(search)
        .build()
}

/// The search most tests use: `get_time` always offered, two tools a search.
fn small_search() -> ToolSearch {
    ToolSearch::local()
        .always_offer(["get_time"])
        .max_results(2)
}

#[tokio::test]
async fn a_search_reveals_tools_for_the_rest_of_the_conversation() -> TestResult {
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new([
        call(
            "s1",
            SEARCH_TOOL,
            json!({ "query": "create a github issue" }),
        ),
        call(
            "c1",
            "github_create_issue",
            json!({ "title": "Broken build" }),
        ),
        ScriptedTurn::new().text("Opened."),
        call(
            "s2",
            SEARCH_TOOL,
            json!({ "query": "weather forecast", "namespace": "weather" }),
        ),
        ScriptedTurn::new().text("Found it."),
    ]));
    let agent = agent(&runs, &model, small_search())?;
    let mut conversation = Conversation::new("search");
    let events = run(
        &agent,
        &mut conversation,
        Input::User("File the bug.".into()),
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    let events = run(
        &agent,
        &mut conversation,
        Input::User("And the weather?".into()),
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");

    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    // Before any search: the tool always offered, and the search.
    assert_eq!(tool_names(&requests[0]), ["get_time", SEARCH_TOOL]);
    // The search's two best, best first, appended; the same afterwards.
    let after_first = [
        "get_time",
        SEARCH_TOOL,
        "github_create_issue",
        "github_close_issue",
    ];
    assert_eq!(tool_names(&requests[1]), after_first);
    assert_eq!(tool_names(&requests[2]), after_first);
    assert_eq!(tool_names(&requests[3]), after_first);
    // A second search appends, within its namespace only.
    let after_second = tool_names(&requests[4]);
    assert!(after_second.starts_with(&after_first), "{after_second:?}");
    let mut added = after_second[after_first.len()..].to_vec();
    added.sort_unstable();
    assert_eq!(added, ["weather_forecast", "weather_now"]);
    // The revealed tool's definition is the one the agent lowered.
    assert_eq!(
        requests[1].tools[2].parameters["properties"]["title"]["type"],
        "string"
    );
    assert_eq!(runs.of("github_create_issue"), 1);

    // What the search answered, as the model read it.
    let results = tool_results(&conversation.messages);
    assert_eq!(
        results[0]["result"]["found"][0]["name"],
        "github_create_issue"
    );
    assert_eq!(
        results[0]["result"]["found"][0]["summary"],
        "Opens a new issue in a GitHub repository."
    );
    assert_eq!(revealed(&conversation.messages), &after_second[2..]);
    Ok(())
}

#[tokio::test]
async fn a_call_of_a_tool_not_found_yet_is_refused_and_never_runs() -> TestResult {
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new([
        call("c1", "payments_charge", json!({ "customer": "cus_1" })),
        ScriptedTurn::new().text("Sorry."),
    ]));
    let agent = agent(
        &runs,
        &model,
        ToolSearch::local().always_offer(["get_time"]),
    )?;
    let mut conversation = Conversation::new("guess");
    let events = run(
        &agent,
        &mut conversation,
        Input::User("Charge them.".into()),
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(
        runs.of("payments_charge"),
        0,
        "a tool not found yet never runs"
    );
    let results = tool_results(&conversation.messages);
    assert_eq!(results[0]["error"]["code"], "unknown_tool");
    let message = results[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`payments_charge` is not loaded yet"),
        "{message}"
    );
    assert!(message.contains("get_time, tool_search"), "{message}");
    Ok(())
}

#[tokio::test]
async fn the_same_searches_offer_the_same_tools_in_the_same_order() -> TestResult {
    let script = || {
        [
            call("s1", SEARCH_TOOL, json!({ "query": "calendar meeting" })),
            call(
                "s2",
                SEARCH_TOOL,
                json!({ "query": "schedule a meeting, cancel a meeting" }),
            ),
            ScriptedTurn::new().text("Done."),
        ]
    };
    let mut offered = Vec::new();
    for _ in 0..3 {
        let runs = Runs::default();
        let model = Arc::new(ScriptedModel::new(script()));
        let agent = agent(&runs, &model, ToolSearch::local().max_results(2))?;
        let mut conversation = Conversation::new("same");
        run(&agent, &mut conversation, Input::User("Meetings.".into())).await;
        let requests = model.requests();
        let names: Vec<Vec<String>> = requests
            .iter()
            .map(|request| {
                tool_names(request)
                    .iter()
                    .map(|n| (*n).to_owned())
                    .collect()
            })
            .collect();
        // Append-only: each request's tools begin with the previous one's.
        for pair in names.windows(2) {
            assert!(pair[1].starts_with(&pair[0]), "{pair:?}");
        }
        // A tool found twice is offered once.
        let last = names.last().cloned().unwrap_or_default();
        let mut unique = last.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), last.len(), "{last:?}");
        offered.push(names);
    }
    assert_eq!(offered[0], offered[1]);
    assert_eq!(offered[0], offered[2]);
    Ok(())
}

#[tokio::test]
async fn a_stored_conversation_keeps_what_its_searches_found() -> TestResult {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "aptix-tool-search-{}-{}.db",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_nanos())
            .unwrap_or(0)
    ));
    let runs = Runs::default();
    // The first process: a search, then a call that waits for approval.
    {
        let store = SqliteStore::open(&path).await?;
        let model = Arc::new(ScriptedModel::new([
            call("s1", SEARCH_TOOL, json!({ "query": "refund the payment" })),
            call("r1", "payments_refund", json!({ "payment": "pay_7" })),
        ]));
        let agent = DurableAgent::builder(agent(&runs, &model, small_search())?, store)
            .deadline_worker(None)
            .build();
        let events: Vec<AgentEvent> = agent
            .send("refund", Input::User("Refund pay_7.".into()))
            .await?
            .collect()
            .await;
        assert!(
            matches!(done(&events), DoneReason::Suspended(_)),
            "{events:?}"
        );
    }
    // A new process: a new agent and store over the same file.
    let store = SqliteStore::open(&path).await?;
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::new().text("Refunded.")]));
    let agent = DurableAgent::builder(agent(&runs, &model, small_search())?, store)
        .deadline_worker(None)
        .resume_on_resolve(false)
        .build();
    agent.resolve("refund", "r1", Resolution::Approve).await?;
    let events: Vec<AgentEvent> = agent.send("refund", Input::Continue).await?.collect().await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(runs.of("payments_refund"), 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let names = tool_names(&requests[0]);
    assert_eq!(
        &names[..3],
        ["get_time", SEARCH_TOOL, "payments_refund"],
        "{names:?}"
    );
    Ok(())
}

#[tokio::test]
async fn anthropic_searches_itself_and_its_finds_are_sent_back() -> TestResult {
    let runs = Runs::default();
    let server = MockAnthropicServer::start([
        AnthropicTurn::new()
            .text("Let me look for a tool.")
            .server_tool_use(
                "srvtoolu_1",
                "tool_search_tool_bm25",
                &["{\"query\":", "\"weather\"}"],
            )
            .tool_search_result("srvtoolu_1", &["weather_forecast"])
            .tool_use("toolu_1", "weather_forecast", &["{\"city\":\"Oslo\"}"])
            .tool_use("toolu_2", "weather_now", &["{\"city\":\"Oslo\"}"])
            .into_response(),
        AnthropicTurn::new().text("Rain all week.").into_response(),
    ])
    .await?;
    let agent = Agent::builder()
        .model(
            aptix::model::anthropic::Anthropic::new("claude-sonnet-4-5", "sk-ant-test")
                .with_base_url(server.base_url()),
        )
        .catalog(catalog(&runs))
        .tool_search(ToolSearch::new().always_offer(["get_time"]))
        .build()?;
    let mut conversation = Conversation::new("native");
    let events = run(
        &agent,
        &mut conversation,
        Input::User("Weather in Oslo?".into()),
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    // The tool the provider's search found ran in the same turn; one it
    // did not find did not.
    assert_eq!(runs.of("weather_forecast"), 1);
    assert_eq!(runs.of("weather_now"), 0);
    let results = tool_results(&conversation.messages);
    assert_eq!(results[1]["error"]["code"], "unknown_tool");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(
        first.header("anthropic-beta"),
        Some("advanced-tool-use-2025-11-20")
    );
    let tools = first.body["tools"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        tools[0],
        json!({ "type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25" })
    );
    assert_eq!(tools[1]["name"], "get_time");
    assert_eq!(tools[1].get("defer_loading"), None);
    assert_eq!(
        tools.len(),
        13,
        "the search, the tool always offered, and 11 deferred"
    );
    assert!(
        tools[2..]
            .iter()
            .all(|tool| tool["defer_loading"] == json!(true))
    );
    assert!(tools.iter().all(|tool| tool["name"] != SEARCH_TOOL));
    // The same tools in the next request: the provider loads what it found.
    assert_eq!(requests[1].body["tools"], first.body["tools"]);
    // The search and what it found go back with the turn, before the calls.
    let content = &requests[1].body["messages"][1]["content"];
    assert_eq!(content[0]["type"], "server_tool_use");
    assert_eq!(content[0]["input"], json!({ "query": "weather" }));
    assert_eq!(content[1]["type"], "tool_search_tool_result");
    assert_eq!(
        content[1]["content"]["tool_references"][0]["tool_name"],
        "weather_forecast"
    );
    assert_eq!(
        content[2],
        json!({ "type": "text", "text": "Let me look for a tool." })
    );
    assert_eq!(content[3]["type"], "tool_use");
    assert_eq!(revealed(&conversation.messages), ["weather_forecast"]);
    Ok(())
}

/// Red team 2026-11-27, T1: a tool the provider's search revealed in a
/// turn was added to what that turn may run, even when `prepare_step` had
/// chosen the step's tools: a tool the step left out ran.
#[tokio::test]
async fn the_providers_search_reveals_nothing_a_step_left_out() -> TestResult {
    let runs = Runs::default();
    let server = MockAnthropicServer::start([
        AnthropicTurn::new()
            .server_tool_use(
                "srvtoolu_1",
                "tool_search_tool_bm25",
                &["{\"query\":", "\"weather\"}"],
            )
            .tool_search_result("srvtoolu_1", &["weather_forecast"])
            .tool_use("toolu_1", "weather_forecast", &["{\"city\":\"Oslo\"}"])
            .into_response(),
        AnthropicTurn::new().text("I may not.").into_response(),
    ])
    .await?;
    let agent = Agent::builder()
        .model(
            aptix::model::anthropic::Anthropic::new("claude-sonnet-4-5", "sk-ant-test")
                .with_base_url(server.base_url()),
        )
        .catalog(catalog(&runs))
        .tool_search(ToolSearch::new().always_offer(["get_time"]))
        // Every step: only `get_time` may be called.
        .prepare_step(|step| {
            aptix::agent::PreparedStep::all().tools(
                step.catalog
                    .only(["get_time"])
                    .unwrap_or_else(|error| panic!("{error}")),
            )
        })
        .build()?;
    let mut conversation = Conversation::new("native-step");
    let events = run(&agent, &mut conversation, Input::User("Weather?".into())).await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");
    assert_eq!(
        runs.of("weather_forecast"),
        0,
        "a tool the step left out ran"
    );
    let results = tool_results(&conversation.messages);
    assert_eq!(results[0]["error"]["code"], "unknown_tool", "{results:?}");
    Ok(())
}

#[test]
fn tool_search_refuses_what_it_cannot_do() -> TestResult {
    let runs = Runs::default();
    let unknown = Agent::builder()
        .model(ScriptedModel::new([]))
        .catalog(catalog(&runs))
        .tool_search(ToolSearch::local().always_offer(["get_time", "no_such_tool"]))
        .build();
    let Err(AgentError::ToolSearch(message)) = unknown else {
        panic!("an unknown always-offered tool is refused: {unknown:?}")
    };
    assert!(message.contains("no_such_tool"), "{message}");

    let taken = Catalog::builder()
        .entry(tool(
            &runs,
            "x",
            SEARCH_TOOL,
            "A tool of the user's.",
            ("q", "A query."),
        ))
        .build()?;
    let clash = Agent::builder()
        .model(ScriptedModel::new([]))
        .catalog(taken)
        .tool_search(ToolSearch::local())
        .build();
    assert!(
        matches!(&clash, Err(AgentError::ToolSearch(message)) if message.contains("already holds a tool called `tool_search`")),
        "{clash:?}"
    );

    // Composed calls have no place for a provider's search: Aptix's own
    // search tool runs instead, even where the provider's was asked for.
    let composed = Agent::builder()
        .model(ScriptedModel::new([]))
        .catalog(catalog(&runs))
        .call_mode(CallMode::Composed)
        .tool_search(ToolSearch::new())
        .build()?;
    assert!(composed.executor().catalog().entry(SEARCH_TOOL).is_some());
    // Native search is the default only for a model that has it.
    let local = Agent::builder()
        .model(ScriptedModel::new([]))
        .catalog(catalog(&runs))
        .tool_search(ToolSearch::new().native(NativeToolSearch::Regex))
        .build()?;
    assert!(local.executor().catalog().entry(SEARCH_TOOL).is_some());
    // The search tool lowers to every dialect (its `namespace` is optional).
    for dialect in [
        Dialect::OpenAiStrict,
        Dialect::OpenAiCompatible,
        Dialect::Anthropic,
        Dialect::Gemini,
    ] {
        Agent::builder()
            .model(ScriptedModel::new([]).with_dialect(dialect))
            .catalog(catalog(&runs))
            .tool_search(ToolSearch::local())
            .build()?;
    }
    Ok(())
}

#[test]
fn the_index_ranks_by_name_description_and_parameters_and_breaks_ties_by_order() {
    let runs = Runs::default();
    let index = ToolIndex::new(&catalog(&runs));
    let names = |query: &str, namespace: Option<&str>| -> Vec<String> {
        index
            .search(query, namespace, 3)
            .iter()
            .map(|hit| hit.name.to_owned())
            .collect()
    };
    assert_eq!(names("refund", None)[0], "payments_refund");
    // Split names and stemming: `invoices` matches `invoice`.
    assert_eq!(names("invoice", None)[0], "payments_list_invoices");
    // Parameter descriptions are searched too.
    assert_eq!(names("RFC 3339", None), ["calendar_create_event"]);
    let mut weather = names("city", Some("weather"));
    weather.sort();
    assert_eq!(weather, ["weather_forecast", "weather_now"]);
    assert!(names("city", Some("github")).is_empty());
    assert!(names("zzzz", None).is_empty());
    assert_eq!(
        index.namespaces(),
        [
            ("calendar", 3),
            ("clock", 1),
            ("github", 3),
            ("payments", 3),
            ("weather", 2)
        ]
    );
    // A run of the same search gives the same answer.
    for _ in 0..20 {
        assert_eq!(names("issue", None), names("issue", None));
    }
}

mod billing {
    use aptix::prelude::*;

    #[derive(Debug, Deserialize, JsonSchema)]
    pub(crate) struct InvoiceArgs {
        /// The invoice to send.
        pub invoice: String,
    }

    /// Sends an invoice to its customer by email.
    #[agent_tool(
        name = "send_invoice",
        usage = "When an invoice must reach its customer."
    )]
    pub(crate) async fn send_invoice(args: InvoiceArgs) -> Result<String, ToolError> {
        Ok(format!("sent {}", args.invoice))
    }
}

#[test]
fn a_declared_tool_is_searched_under_its_module_path() -> TestResult {
    let catalog = Catalog::builder()
        .tool::<billing::SendInvoiceTool>()
        .build()?;
    let entry = catalog
        .entry("send_invoice")
        .ok_or("the tool is in the catalog")?;
    assert_eq!(entry.namespace().as_deref(), Some("tool_search::billing"));
    let index = ToolIndex::new(&catalog);
    assert_eq!(index.search("billing", None, 5)[0].name, "send_invoice");
    assert_eq!(
        index.search("email", Some("tool_search::billing"), 5)[0].name,
        "send_invoice"
    );
    Ok(())
}

/// The `_tool` of each branch a composed request offers.
fn branch_names(request: &ChatRequest) -> Vec<String> {
    let Some(format) = &request.response_format else {
        return Vec::new();
    };
    format.schema["properties"]["calls"]["items"]["anyOf"]
        .as_array()
        .map(|branches| {
            branches
                .iter()
                .filter_map(|branch| branch["properties"]["_tool"]["const"].as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A composed answer: `message` and the one call `call`.
fn composed(message: &str, calls: Value) -> ScriptedTurn {
    ScriptedTurn::new().text(&json!({ "message": message, "calls": calls }).to_string())
}

#[tokio::test]
async fn in_composed_mode_the_search_is_a_branch_and_what_it_finds_joins_the_schema() -> TestResult
{
    let runs = Runs::default();
    let model = Arc::new(ScriptedModel::new([
        // Not found yet: refused, never run.
        composed(
            "",
            json!([{"_tool": "github_create_issue", "_activity": "github_create_issue", "title": "Early"}]),
        ),
        composed(
            "Searching.",
            json!([{"_tool": SEARCH_TOOL, "_activity": SEARCH_TOOL, "query": "create a github issue"}]),
        ),
        composed(
            "",
            json!([{"_tool": "github_create_issue", "_activity": "github_create_issue", "title": "Broken build"}]),
        ),
        composed("Opened.", json!([])),
    ]));
    let agent = Agent::builder()
        .shared_model(model.clone())
        .catalog(catalog(&runs))
        .call_mode(CallMode::Composed)
        .tool_search(small_search())
        .max_iterations(6)
        .build()?;
    let mut conversation = Conversation::new("composed-search");
    let events = run(
        &agent,
        &mut conversation,
        Input::User("File the bug.".into()),
    )
    .await;
    assert!(matches!(done(&events), DoneReason::Completed), "{events:?}");

    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // Every request composes its tools; none is sent natively.
    assert!(requests.iter().all(|request| request.tools.is_empty()));
    // Before the search: the tool always offered, and the search itself.
    let mut first = branch_names(&requests[0]);
    first.sort_unstable();
    assert_eq!(first, ["get_time", SEARCH_TOOL]);
    assert_eq!(branch_names(&requests[1]), branch_names(&requests[0]));
    // The search's two best join the schema of every later request.
    for request in &requests[2..] {
        let mut names = branch_names(request);
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "get_time",
                "github_close_issue",
                "github_create_issue",
                SEARCH_TOOL
            ]
        );
    }
    // The early call was answered without running; the later one ran once.
    let results = tool_results(&conversation.messages);
    assert_eq!(results[0]["error"]["code"], "unknown_tool", "{results:?}");
    assert_eq!(runs.of("github_create_issue"), 1);
    assert_eq!(
        revealed(&conversation.messages),
        ["github_create_issue", "github_close_issue"]
    );
    Ok(())
}
