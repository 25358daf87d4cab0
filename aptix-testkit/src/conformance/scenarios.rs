//! The scenarios themselves and their runner.
//!
//! Each scenario starts a fresh [`MockSseServer`] serving the wire's
//! scripted turns, runs a real [`Agent`] (or [`DurableAgent`]) over the
//! adapter the test built, and checks two sides: the [`AgentEvent`]s the
//! run showed, and every request the adapter sent, read back through
//! [`ProviderWire::read_request`]. The checks are written once, in no
//! provider's terms, so every adapter is held to the same behaviour.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aptix_core::agent::AgentBuilder;
use aptix_core::meta::{Approval, ExecutorKind};
use aptix_core::model::ModelError;
use aptix_core::store::MemoryStore;
use aptix_core::{
    Agent, AgentEvent, Catalog, Conversation, DoneReason, DurableAgent, Input, Resolution,
    ToolEntry,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{
    ModelFactory, ProviderWire, Report, WireCall, WireHosted, WireMessage, WireReasoning,
    WireRequest, WireTurn,
};
use crate::mock_server::{MockSseServer, ScriptedResponse};

/// The system prompt of every scenario.
pub const SYSTEM: &str = "You are the conformance suite's agent.";
/// The user's words of every scenario.
pub const QUESTION: &str = "What is the weather in Paris?";
/// The opaque reasoning token scripted for providers that have one; the
/// suite looks for it, unchanged, in the request after the tool call.
pub const REASONING_TOKEN: &str = "Q29uZm9ybWFuY2VSZWFzb25pbmdUb2tlbjAwMQ==";
/// The marker inside the cut scenario's call arguments: the body is cut
/// where it first appears, so the stream stops inside the arguments.
pub const CUT_MARKER: &str = "CUTMARK";

/// How long one run of the agent may take before the scenario fails: the
/// mock answers at once, so only a hung adapter comes near it.
const RUN_TIME_LIMIT: Duration = Duration::from_secs(30);

/// One scenario of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// A turn of text only: the events show it, the run completes.
    PlainText,
    /// One call, its result, then the answer: the second request carries
    /// the call and its result paired by id.
    OneCall,
    /// Two calls in one turn: both results go back in the next request, in
    /// the calls' order.
    ParallelCalls,
    /// An approval-gated call suspends a durable run; approved, the resumed
    /// request carries its result.
    GatedCall,
    /// Reasoning before a call comes back with the turn in the next request
    /// (its opaque token, or its text where the provider has no token), and
    /// was shown as [`AgentEvent::ReasoningDelta`].
    ReasoningKept,
    /// A tool the provider runs itself (`executor = provider`): offered in
    /// the provider's hosted form, shown as a call and result of that tool,
    /// and sent back with the turn. Skipped for a provider that hosts none.
    ProviderTool,
    /// An error status with the provider's error body ends the run with
    /// [`ModelError::Http`] and the provider's message.
    ErrorBody,
    /// A stream that breaks inside a call's arguments ends the run with a
    /// model error and runs no tool.
    StreamCut,
    /// A turn longer than [`AgentBuilder::max_turn_bytes`] ends the run with
    /// [`DoneReason::LimitExceeded`].
    TurnOverLimit,
}

impl Scenario {
    /// Every scenario, in the order [`run`] runs them.
    pub const ALL: [Scenario; 9] = [
        Scenario::PlainText,
        Scenario::OneCall,
        Scenario::ParallelCalls,
        Scenario::GatedCall,
        Scenario::ReasoningKept,
        Scenario::ProviderTool,
        Scenario::ErrorBody,
        Scenario::StreamCut,
        Scenario::TurnOverLimit,
    ];

    /// The scenario's name, in failure messages and snapshot names.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::PlainText => "plain_text",
            Scenario::OneCall => "one_call",
            Scenario::ParallelCalls => "parallel_calls",
            Scenario::GatedCall => "gated_call",
            Scenario::ReasoningKept => "reasoning_kept",
            Scenario::ProviderTool => "provider_tool",
            Scenario::ErrorBody => "error_body",
            Scenario::StreamCut => "stream_cut",
            Scenario::TurnOverLimit => "turn_over_limit",
        }
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A scenario an adapter did not pass: which provider, which scenario, and
/// what differed from what the suite expects.
///
/// Its `Debug` is its message, lines and all, so that a test returning
/// `Result<(), Failure>` prints it readably.
#[derive(Clone, thiserror::Error)]
#[error("conformance of `{provider}`, scenario `{scenario}`: {message}")]
pub struct Failure {
    /// The wire's [`ProviderWire::name`].
    pub provider: &'static str,
    /// The scenario's [`Scenario::name`].
    pub scenario: &'static str,
    /// What differed.
    pub message: String,
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// What one scenario sent.
#[derive(Debug, Clone)]
pub struct ScenarioReport {
    /// Which scenario.
    pub scenario: Scenario,
    /// The raw bodies of the requests the adapter sent, in order.
    pub requests: Vec<String>,
    /// Why the scenario was skipped, when it was (the provider hosts no
    /// tool, for [`Scenario::ProviderTool`]).
    pub skipped: Option<String>,
}

/// Runs every scenario against the adapter `model` builds, in the order of
/// [`Scenario::ALL`], and stops at the first that fails.
///
/// # Errors
/// The first scenario that failed, with what differed.
pub async fn run(wire: &dyn ProviderWire, model: &ModelFactory) -> Result<Report, Failure> {
    let mut report = Report::default();
    for scenario in Scenario::ALL {
        let done = run_one(wire, model, scenario).await?;
        if let Some(note) = done.skipped {
            report.notes.push((scenario.name(), note));
        }
        report.requests.push((scenario.name(), done.requests));
    }
    Ok(report)
}

/// Runs one scenario, for a test that shows which scenarios pass.
///
/// # Errors
/// What differed from what the scenario expects.
pub async fn run_one(
    wire: &dyn ProviderWire,
    model: &ModelFactory,
    scenario: Scenario,
) -> Result<ScenarioReport, Failure> {
    let mut run = Run {
        wire,
        model,
        requests: Vec::new(),
    };
    let outcome = match scenario {
        Scenario::PlainText => run.plain_text().await,
        Scenario::OneCall => run.one_call().await,
        Scenario::ParallelCalls => run.parallel_calls().await,
        Scenario::GatedCall => run.gated_call().await,
        Scenario::ReasoningKept => run.reasoning_kept().await,
        Scenario::ProviderTool => run.provider_tool().await,
        Scenario::ErrorBody => run.error_body().await,
        Scenario::StreamCut => run.stream_cut().await,
        Scenario::TurnOverLimit => run.turn_over_limit().await,
    };
    match outcome {
        Ok(skipped) => Ok(ScenarioReport {
            scenario,
            requests: run.requests,
            skipped,
        }),
        Err(message) => Err(Failure {
            provider: wire.name(),
            scenario: scenario.name(),
            message: if run.requests.is_empty() {
                message
            } else {
                format!(
                    "{message}\nrequests sent:\n{}",
                    run.requests.join("\n---\n")
                )
            },
        }),
    }
}

/// Fails the scenario with a message unless `condition` holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err(format!($($message)+));
        }
    };
}

/// The catalog every scenario offers, and how often its tools ran.
struct Tools {
    catalog: Catalog,
    runs: Arc<AtomicUsize>,
}

impl Tools {
    /// `get_weather` and `get_time` (run at once), `send_email` (waits for
    /// an approval), and `hosted` as a provider tool when given.
    fn new(hosted: Option<&str>) -> Result<Tools, String> {
        let runs = Arc::new(AtomicUsize::new(0));
        let city = json!({
            "type": "object",
            "properties": { "city": { "type": "string", "description": "The city." } },
            "required": ["city"],
            "additionalProperties": false
        });
        let counter = runs.clone();
        let weather = ToolEntry::from_json_schema(
            "get_weather",
            "Call when the user asks about the weather.",
            "Looks up the current weather in a city.",
            city.clone(),
            move |args: Value, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({ "city": args["city"], "celsius": 21 })) }
            },
        );
        let counter = runs.clone();
        let time = ToolEntry::from_json_schema(
            "get_time",
            "Call when the user asks what time it is somewhere.",
            "Looks up the local time in a city.",
            city,
            move |args: Value, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({ "city": args["city"], "time": "12:00" })) }
            },
        );
        let counter = runs.clone();
        let email = ToolEntry::from_json_schema(
            "send_email",
            "Call when the user asks to send an email.",
            "Sends an email on the user's behalf, once a person approves.",
            json!({
                "type": "object",
                "properties": { "to": { "type": "string", "description": "The recipient's address." } },
                "required": ["to"],
                "additionalProperties": false
            }),
            move |args: Value, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({ "sent_to": args["to"] })) }
            },
        )
        .approval(Approval::RequiresApproval);
        let mut builder = Catalog::builder().entry(weather).entry(time).entry(email);
        if let Some(name) = hosted {
            builder = builder.entry(
                ToolEntry::declared_json_schema(
                    name,
                    "Call when the answer needs the provider's own tool.",
                    "A tool the model provider runs itself.",
                    json!({
                        "type": "object",
                        "properties": { "query": { "type": "string", "description": "What to look for." } },
                        "required": ["query"],
                        "additionalProperties": false
                    }),
                )
                .executor(ExecutorKind::Provider),
            );
        }
        let catalog = builder
            .build()
            .map_err(|error| format!("the suite's catalog does not build: {error}"))?;
        Ok(Tools { catalog, runs })
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

/// One scenario's run: the wire, the adapter's factory, and the raw
/// request bodies seen so far.
struct Run<'a> {
    wire: &'a dyn ProviderWire,
    model: &'a ModelFactory,
    requests: Vec<String>,
}

impl Run<'_> {
    async fn serve(&self, responses: Vec<ScriptedResponse>) -> Result<MockSseServer, String> {
        MockSseServer::start(responses)
            .await
            .map_err(|error| format!("the mock server did not start: {error}"))
    }

    fn agent(
        &self,
        server: &MockSseServer,
        tools: &Tools,
        configure: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> Result<Agent, String> {
        let builder = Agent::builder()
            .shared_model((self.model)(&server.url()))
            .catalog(tools.catalog.clone())
            .max_iterations(4);
        configure(builder)
            .build()
            .map_err(|error| format!("the agent does not build: {error}"))
    }

    /// Keeps every request the server saw and reads each back through the
    /// wire.
    fn requests(&mut self, server: &MockSseServer) -> Result<Vec<WireRequest>, String> {
        let recorded = server.requests();
        self.requests = recorded
            .iter()
            .map(|request| request.raw_body.clone())
            .collect();
        recorded
            .iter()
            .enumerate()
            .map(|(index, request)| {
                self.wire.read_request(&request.body).map_err(|problem| {
                    format!(
                        "request {} is not the provider's documented shape: {problem}",
                        index + 1
                    )
                })
            })
            .collect()
    }

    /// The requests, which must number `count`.
    fn expect_requests(
        &mut self,
        server: &MockSseServer,
        count: usize,
    ) -> Result<Vec<WireRequest>, String> {
        let requests = self.requests(server)?;
        ensure!(
            requests.len() == count,
            "expected {count} request(s) to the model, the adapter sent {}",
            requests.len()
        );
        Ok(requests)
    }

    /// The first request of a scenario: the system prompt (none for a
    /// durable conversation, which starts without one), the question, and
    /// the catalog's function tools.
    fn check_first(
        &self,
        request: &WireRequest,
        tools: &Tools,
        system: bool,
    ) -> Result<(), String> {
        let mut expected = vec![WireMessage::User(QUESTION.into())];
        if system {
            expected.insert(0, WireMessage::System(SYSTEM.into()));
        }
        ensure!(
            request.messages == expected,
            "the first request should send {expected:?}, it sent {:?}",
            request.messages
        );
        for name in tools.catalog.names() {
            if Some(name) == self.wire.hosted_tool() {
                continue;
            }
            ensure!(
                request.tools.iter().any(|tool| tool == name),
                "the first request does not offer the tool `{name}` (it offers {:?})",
                request.tools
            );
        }
        Ok(())
    }

    async fn plain_text(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let turn = WireTurn {
            text: vec!["The weather ".into(), "in Paris is ".into(), "mild.".into()],
            usage: (12, 5),
            ..WireTurn::default()
        };
        let server = self.serve(vec![self.wire.turn(&turn)]).await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        let requests = self.expect_requests(&server, 1)?;
        self.check_first(&requests[0], &tools, true)?;
        completed(&events)?;
        let shown = text(&events);
        ensure!(
            shown == "The weather in Paris is mild.",
            "the text events should spell the turn's text, they spell {shown:?}"
        );
        if let Some(AgentEvent::Done { usage, .. }) = events.last() {
            ensure!(
                (usage.input_tokens, usage.output_tokens) == (12, 5),
                "the run should count 12 tokens in and 5 out, it counted {} and {}",
                usage.input_tokens,
                usage.output_tokens
            );
        }
        Ok(None)
    }

    async fn one_call(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let call = weather_call("call_conformance_1", "Paris");
        let first = WireTurn {
            text: vec!["Let me check.".into()],
            calls: vec![call.clone()],
            usage: (20, 8),
            ..WireTurn::default()
        };
        let server = self
            .serve(vec![self.wire.turn(&first), self.wire.turn(&answer())])
            .await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        let requests = self.expect_requests(&server, 2)?;
        self.check_first(&requests[0], &tools, true)?;
        completed(&events)?;
        calls_shown(&events, &[&call])?;
        ensure!(
            tools.runs() == 1,
            "the tool should run once, it ran {} times",
            tools.runs()
        );
        let assistant = call_round(&requests[1], "Let me check.", &[&call])?;
        check_no_reasoning(assistant)?;
        Ok(None)
    }

    async fn parallel_calls(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let weather = weather_call("call_conformance_1", "Paris");
        let time = WireCall {
            id: "call_conformance_2".into(),
            name: "get_time".into(),
            arguments: vec!["{\"city\":".into(), "\"Paris\"}".into()],
        };
        let first = WireTurn {
            calls: vec![weather.clone(), time.clone()],
            usage: (20, 8),
            ..WireTurn::default()
        };
        let server = self
            .serve(vec![self.wire.turn(&first), self.wire.turn(&answer())])
            .await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        let requests = self.expect_requests(&server, 2)?;
        completed(&events)?;
        calls_shown(&events, &[&weather, &time])?;
        ensure!(
            tools.runs() == 2,
            "both tools should run, {} ran",
            tools.runs()
        );
        call_round(&requests[1], "", &[&weather, &time])?;
        Ok(None)
    }

    async fn gated_call(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let call = WireCall {
            id: "call_conformance_1".into(),
            name: "send_email".into(),
            arguments: vec!["{\"to\":".into(), "\"ada@example.com\"}".into()],
        };
        let first = WireTurn {
            calls: vec![call.clone()],
            usage: (20, 8),
            ..WireTurn::default()
        };
        let server = self
            .serve(vec![self.wire.turn(&first), self.wire.turn(&answer())])
            .await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let durable = DurableAgent::new(agent, MemoryStore::new());
        let conversation = "conformance-gated";
        let sent = durable
            .send(conversation, Input::User(QUESTION.into()))
            .await
            .map_err(|error| format!("the durable run did not start: {error}"))?;
        let suspended = within(sent.collect::<Vec<_>>()).await?;
        match done_reason(&suspended)? {
            DoneReason::Suspended(calls) => ensure!(
                calls.len() == 1 && calls[0].tool_call_id == call.id,
                "the run should suspend on `{}` alone, it suspended on {:?}",
                call.id,
                calls.iter().map(|c| &c.tool_call_id).collect::<Vec<_>>()
            ),
            other => {
                return Err(format!(
                    "the gated call should suspend the run, it ended {other:?}"
                ));
            }
        }
        ensure!(tools.runs() == 0, "the gated tool ran before its approval");
        let pending = durable
            .pending(conversation)
            .await
            .map_err(|error| format!("the store's pending calls: {error}"))?;
        ensure!(
            pending.len() == 1 && pending[0].tool_call_id == call.id,
            "one call should wait for approval, the store lists {}",
            pending.len()
        );
        durable
            .resolve(conversation, &call.id, Resolution::Approve)
            .await
            .map_err(|error| format!("the approval was refused: {error}"))?;
        let resumed = within(durable.watch(conversation).collect::<Vec<_>>()).await?;
        completed(&resumed)?;
        ensure!(
            tools.runs() == 1,
            "the approved tool should run once, it ran {} times",
            tools.runs()
        );
        let requests = self.expect_requests(&server, 2)?;
        self.check_first(&requests[0], &tools, false)?;
        call_round(&requests[1], "", &[&call])?;
        Ok(None)
    }

    async fn reasoning_kept(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let token = if self.wire.reasoning_has_token() {
            REASONING_TOKEN
        } else {
            ""
        };
        let reasoning = WireReasoning {
            text: vec!["The user wants ".into(), "the weather in Paris.".into()],
            token: token.into(),
        };
        let call = weather_call("call_conformance_1", "Paris");
        let first = WireTurn {
            reasoning: Some(reasoning.clone()),
            calls: vec![call.clone()],
            usage: (20, 8),
            ..WireTurn::default()
        };
        let server = self
            .serve(vec![self.wire.turn(&first), self.wire.turn(&answer())])
            .await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        let requests = self.expect_requests(&server, 2)?;
        completed(&events)?;
        let thought: String = events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ReasoningDelta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let written = reasoning.text.concat();
        ensure!(
            thought == written,
            "the reasoning events should spell {written:?}, they spell {thought:?}"
        );
        let assistant = call_round(&requests[1], "", &[&call])?;
        let WireMessage::Assistant {
            reasoning: sent, ..
        } = assistant
        else {
            return Err("no assistant message".into());
        };
        let expected = if token.is_empty() {
            written
        } else {
            token.to_owned()
        };
        ensure!(
            sent.iter().any(|piece| piece.contains(&expected)),
            "the request after the call should send the turn's reasoning back ({expected:?}), it sent {sent:?}"
        );
        Ok(None)
    }

    async fn provider_tool(&mut self) -> Result<Option<String>, String> {
        let Some(name) = self.wire.hosted_tool() else {
            return Ok(Some(format!(
                "skipped: `{}` hosts no tool of its own",
                self.wire.name()
            )));
        };
        let tools = Tools::new(Some(name))?;
        let hosted = WireHosted {
            id: "srvtoolu_conformance_1".into(),
            input: json!({ "query": "weather in Paris" }),
            output: self.wire.hosted_output(),
        };
        let call = weather_call("call_conformance_1", "Paris");
        let first = WireTurn {
            hosted: Some(hosted.clone()),
            text: vec!["I searched.".into()],
            calls: vec![call.clone()],
            usage: (20, 8),
            ..WireTurn::default()
        };
        let server = self
            .serve(vec![self.wire.turn(&first), self.wire.turn(&answer())])
            .await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        let requests = self.expect_requests(&server, 2)?;
        completed(&events)?;
        ensure!(
            requests[0].hosted_tools.iter().any(|tool| tool == name),
            "the first request should offer `{name}` as the provider's tool, it offers {:?}",
            requests[0].hosted_tools
        );
        ensure!(
            !requests[0].tools.iter().any(|tool| tool == name),
            "`{name}` is the provider's tool, yet the request offers it as a function too"
        );
        let provider_kind = |kind: &Option<aptix_core::agent::ToolKind>| {
            kind.is_some_and(|kind| kind.executor == ExecutorKind::Provider)
        };
        let started = events.iter().any(|event| {
            matches!(event, AgentEvent::ToolCallStart { name: shown, kind, .. }
                if shown == name && provider_kind(kind))
        });
        let finished = events.iter().any(|event| {
            matches!(event, AgentEvent::ToolCallResult { name: shown, kind, .. }
                if shown == name && provider_kind(kind))
        });
        ensure!(
            started && finished,
            "the hosted call should show as ToolCallStart and ToolCallResult of `{name}` with a provider executor (start: {started}, result: {finished})"
        );
        ensure!(
            tools.runs() == 1,
            "the function call should run once, it ran {} times",
            tools.runs()
        );
        let assistant = call_round(&requests[1], "I searched.", &[&call])?;
        let sent_back = matches!(assistant, WireMessage::Assistant { hosted: true, .. });
        ensure!(
            sent_back == self.wire.hosted_goes_back(),
            "the request after the turn should {} the hosted call and its result back with it",
            if self.wire.hosted_goes_back() {
                "send"
            } else {
                "not send"
            }
        );
        Ok(None)
    }

    async fn error_body(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let message = "conformance: this request is refused";
        let server = self.serve(vec![self.wire.error(400, message)]).await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        self.expect_requests(&server, 1)?;
        match done_reason(&events)? {
            DoneReason::ModelError(ModelError::Http { status: 400, body }) => ensure!(
                body.contains(message),
                "the error should carry the provider's message {message:?}, it carries {body:?}"
            ),
            other => {
                return Err(format!(
                    "an error status 400 should end the run with ModelError::Http {{ status: 400, .. }}, it ended {other:?}"
                ));
            }
        }
        Ok(None)
    }

    async fn stream_cut(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let call = WireCall {
            id: "call_conformance_1".into(),
            name: "get_weather".into(),
            arguments: vec![
                "{\"city\":".into(),
                format!("\"Paris {CUT_MARKER}"),
                " and more\"}".into(),
            ],
        };
        let turn = WireTurn {
            text: vec!["Let me check.".into()],
            calls: vec![call],
            ..WireTurn::default()
        };
        let whole = self.wire.turn(&turn);
        let body: Vec<u8> = whole.chunks.concat();
        let Some(offset) = body
            .windows(CUT_MARKER.len())
            .position(|window| window == CUT_MARKER.as_bytes())
        else {
            return Err(format!(
                "the wire's body of a call does not hold its arguments' text {CUT_MARKER:?}"
            ));
        };
        let cut = crate::mock_openai::truncate(whole, offset).closing_early();
        let server = self.serve(vec![cut]).await?;
        let agent = self.agent(&server, &tools, |builder| builder)?;
        let events = run_agent(&agent).await?;
        self.expect_requests(&server, 1)?;
        ensure!(
            matches!(done_reason(&events)?, DoneReason::ModelError(_)),
            "a stream cut inside a call should end the run with a model error, it ended {:?}",
            done_reason(&events)?
        );
        let started = events
            .iter()
            .any(|event| matches!(event, AgentEvent::ToolCallStart { .. }));
        ensure!(
            !started && tools.runs() == 0,
            "a call cut off mid-arguments must not run (started: {started}, runs: {})",
            tools.runs()
        );
        Ok(None)
    }

    async fn turn_over_limit(&mut self) -> Result<Option<String>, String> {
        let tools = Tools::new(None)?;
        let turn = WireTurn {
            text: (0..64)
                .map(|piece| format!("piece {piece:02} of a long answer that goes on. "))
                .collect(),
            ..WireTurn::default()
        };
        let server = self.serve(vec![self.wire.turn(&turn)]).await?;
        let agent = self.agent(&server, &tools, |builder| builder.max_turn_bytes(512))?;
        let events = run_agent(&agent).await?;
        self.expect_requests(&server, 1)?;
        ensure!(
            matches!(done_reason(&events)?, DoneReason::LimitExceeded(_)),
            "a turn past max_turn_bytes should end the run with LimitExceeded, it ended {:?}",
            done_reason(&events)?
        );
        let whole: usize = turn.text.iter().map(String::len).sum();
        let shown = text(&events).len();
        ensure!(
            shown < whole,
            "the run showed the whole turn ({shown} bytes) although it passed the limit"
        );
        Ok(None)
    }
}

/// `get_weather` for `city`, its arguments streamed in two pieces.
fn weather_call(id: &str, city: &str) -> WireCall {
    WireCall {
        id: id.into(),
        name: "get_weather".into(),
        arguments: vec!["{\"city\":".into(), format!("\"{city}\"}}")],
    }
}

/// The closing text turn after the tool results.
fn answer() -> WireTurn {
    WireTurn {
        text: vec!["It is 21 °C in Paris.".into()],
        usage: (40, 9),
        ..WireTurn::default()
    }
}

/// Fails when `future` takes longer than [`RUN_TIME_LIMIT`].
async fn within<T>(future: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(RUN_TIME_LIMIT, future)
        .await
        .map_err(|_| format!("the run did not end within {RUN_TIME_LIMIT:?}"))
}

/// Runs `agent` on a fresh conversation with the suite's question.
async fn run_agent(agent: &Agent) -> Result<Vec<AgentEvent>, String> {
    let mut conversation = Conversation::new("conformance").with_system(SYSTEM);
    within(async {
        agent
            .run(&mut conversation, Input::User(QUESTION.into()))
            .collect::<Vec<_>>()
            .await
    })
    .await
}

fn done_reason(events: &[AgentEvent]) -> Result<&DoneReason, String> {
    match events.last() {
        Some(AgentEvent::Done { reason, .. }) => Ok(reason),
        other => Err(format!("the run's last event is not Done: {other:?}")),
    }
}

fn completed(events: &[AgentEvent]) -> Result<(), String> {
    match done_reason(events)? {
        DoneReason::Completed => Ok(()),
        other => Err(format!("the run should complete, it ended {other:?}")),
    }
}

/// The answer text the run showed.
fn text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The call's arguments, whole.
fn arguments(call: &WireCall) -> Result<Value, String> {
    serde_json::from_str(&call.arguments.concat())
        .map_err(|error| format!("the suite's own arguments are not JSON: {error}"))
}

/// Each call showed as a ToolCallStart with its id, name and arguments,
/// and a ToolCallResult whose envelope is a success.
fn calls_shown(events: &[AgentEvent], calls: &[&WireCall]) -> Result<(), String> {
    let started: Vec<(&str, &str, &Value)> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolCallStart {
                id,
                name,
                arguments,
                ..
            } => Some((id.as_str(), name.as_str(), arguments)),
            _ => None,
        })
        .collect();
    for call in calls {
        let expected = arguments(call)?;
        ensure!(
            started
                .iter()
                .any(|(id, name, args)| *id == call.id && *name == call.name && **args == expected),
            "the run should show the call `{}` to `{}` with {expected}, it showed {started:?}",
            call.id,
            call.name
        );
        let ok = events.iter().any(|event| {
            matches!(event, AgentEvent::ToolCallResult { id, envelope, .. }
                if *id == call.id && envelope["ok"] == true)
        });
        ensure!(
            ok,
            "the run should show a successful result of `{}`",
            call.id
        );
    }
    Ok(())
}

/// The request after a turn with `calls`: after the question, the turn
/// (its `text`, its calls by id, name and arguments, in order), then one
/// result per call, in the calls' order, paired by id (or name, for a
/// provider that pairs by name), each a successful envelope.
fn call_round<'r>(
    request: &'r WireRequest,
    text: &str,
    calls: &[&WireCall],
) -> Result<&'r WireMessage, String> {
    let messages = &request.messages;
    let Some(question) = messages
        .iter()
        .position(|message| *message == WireMessage::User(QUESTION.into()))
    else {
        return Err(format!(
            "the request after the calls lost the question: {messages:?}"
        ));
    };
    let rest = &messages[question + 1..];
    let Some(
        assistant @ WireMessage::Assistant {
            text: sent_text,
            calls: sent,
            ..
        },
    ) = rest.first()
    else {
        return Err(format!(
            "the question should be followed by the model's turn, it is followed by {rest:?}"
        ));
    };
    ensure!(
        sent_text.trim() == text,
        "the turn should go back with its text {text:?}, it went back with {sent_text:?}"
    );
    ensure!(
        sent.len() == calls.len(),
        "the turn should go back with {} call(s), it went back with {sent:?}",
        calls.len()
    );
    for (call, (id, name, args)) in calls.iter().zip(sent) {
        let expected = arguments(call)?;
        ensure!(
            (id == &call.id || id.is_empty()) && name == &call.name && *args == expected,
            "the call `{}` should go back as {} {expected}, it went back as `{id}` {name} {args}",
            call.id,
            call.name
        );
    }
    let results = &rest[1..];
    ensure!(
        results.len() == calls.len(),
        "the turn should be followed by {} result(s) and nothing else, it is followed by {results:?}",
        calls.len()
    );
    for (call, result) in calls.iter().zip(results) {
        let WireMessage::ToolResult { id, content } = result else {
            return Err(format!(
                "the result of `{}` should follow the turn, {result:?} does",
                call.id
            ));
        };
        ensure!(
            id == &call.id || id == &call.name,
            "the result of `{}` should go back paired with it, it is paired with `{id}`",
            call.id
        );
        let envelope: Value = serde_json::from_str(content)
            .map_err(|error| format!("the result of `{}` is not an envelope: {error}", call.id))?;
        ensure!(
            envelope["ok"] == true,
            "the result of `{}` should be a success, it is {content}",
            call.id
        );
    }
    Ok(assistant)
}

fn check_no_reasoning(assistant: &WireMessage) -> Result<(), String> {
    if let WireMessage::Assistant { reasoning, .. } = assistant {
        ensure!(
            reasoning.is_empty(),
            "a turn without reasoning went back with some: {reasoning:?}"
        );
    }
    Ok(())
}

/// A JSON text indented two spaces a level, its members in the order they
/// were sent (parsing into a [`Value`] would sort them): request bodies as
/// snapshots a reviewer can read, with the order the provider sees.
pub fn pretty_json(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = raw.trim().chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let closing = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&closing) {
                    chars.next();
                    out.push(closing);
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_json_keeps_the_order_and_the_strings() {
        let raw = r#"{"z":1,"a":[],"m":{"k":"a,{b}:\"c\""},"l":[1,{}]}"#;
        let pretty = pretty_json(raw);
        assert_eq!(
            pretty,
            "{\n  \"z\": 1,\n  \"a\": [],\n  \"m\": {\n    \"k\": \"a,{b}:\\\"c\\\"\"\n  },\n  \"l\": [\n    1,\n    {}\n  ]\n}"
        );
        let reparsed: Result<Value, _> = serde_json::from_str(&pretty);
        assert_eq!(reparsed.ok(), serde_json::from_str(raw).ok());
    }

    #[test]
    fn every_scenario_has_its_own_name() {
        let mut names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Scenario::ALL.len());
    }
}
