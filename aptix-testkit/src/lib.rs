//! Test helpers for crates that declare Aptix tools. The guide page
//! `aptix::guide::testing` shows each of them in a test; write async tests
//! with `#[tokio::test]`.
//!
//! - [`ToolHarness`]: call one tool (or a catalog) with JSON and inspect the
//!   envelope, through the real executor: the same validation, time limits
//!   and error mapping as production.
//! - [`assert_catalog_valid`], [`assert_catalog_valid_for`]: the one-line CI
//!   test every tool crate adds: every tool it names has a valid definition
//!   and a unique name (and fits the providers' dialects).
//! - [`assert_schema_snapshot!`]: insta snapshots of a tool's definition in
//!   every provider dialect, so a schema change shows up as a reviewable
//!   diff. Accept new snapshots with `cargo insta review` (or
//!   `INSTA_UPDATE=always`).
//! - [`ScriptedModel`], [`ScriptedTurn`]: a model that answers with scripted
//!   turns (text, tool calls streamed whole or in pieces, errors), to test an
//!   agent without a network.
//! - [`mock_openai::MockOpenAiServer`], [`mock_responses::MockResponsesServer`],
//!   [`mock_anthropic::MockAnthropicServer`], [`mock_gemini::MockGeminiServer`]:
//!   real HTTP servers on 127.0.0.1 streaming each provider's exact SSE bytes,
//!   to test the model adapters against the wire format.
//! - [`conformance`]: one suite every model adapter passes (text, calls,
//!   parallel calls, a suspended call resumed, reasoning kept, a provider
//!   tool, errors, cut streams, limits), run against those servers.
//! - [`Fake`]: a test double for a schema-first tool's activity that records
//!   its calls (`Activities::new().fake(&fake)`).
//! - [`call_envelope`], [`tool_results`], [`tool_results_by_id`]: a call's
//!   envelope among a run's events, and the envelopes of a transcript's tool
//!   results, as JSON.
//! - [`faulty_store::FaultyStore`]: a store that fails on purpose;
//!   [`store_suite`]: the conformance suite every `Store` passes.
//! - [`hostile_mcp::HostileMcpServer`]: an MCP server that misbehaves on
//!   purpose (schema bombs, endless pages, floods, huge results, silence),
//!   to test what mounting a server you do not control costs.
//!
//! These helpers panic with a descriptive message on failure, as test
//! assertions do.

#![forbid(unsafe_code)]

pub mod conformance;
pub mod fake_activity;
pub mod faulty_store;
pub mod hostile_mcp;
pub mod mock_anthropic;
pub mod mock_gemini;
pub mod mock_openai;
pub mod mock_responses;
pub mod mock_server;
pub mod scripted_model;
pub mod store_suite;

pub use fake_activity::{Fake, FakeActivities};
pub use scripted_model::{ScriptedModel, ScriptedTurn};

use aptix_core::{
    Awaiting, Catalog, CatalogBuilder, Dialect, Envelope, EnvelopeError, ErrorCode, Execution,
    Executor, Outcome, Tool, ToolCall, ToolContext,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

#[doc(hidden)]
pub use insta as __insta;

/// Calls tools through a real [`Executor`] in tests.
///
/// Every final result of a tool with code is checked against the output
/// schema the tool advertises: a result that breaks it panics, naming the
/// tool and each violation (objects are closed, so an unknown member is
/// one).
pub struct ToolHarness {
    executor: Executor,
    context: ToolContext,
    next_id: std::sync::atomic::AtomicU64,
}

impl ToolHarness {
    /// A harness over a catalog holding only `T`.
    ///
    /// # Panics
    /// If `T`'s definition is invalid (the panic message says why).
    pub fn for_tool<T: Tool>() -> Self {
        match Catalog::builder().tool::<T>().build() {
            Ok(catalog) => Self::new(catalog),
            Err(error) => panic!("{error}"),
        }
    }

    /// A harness over `catalog`.
    pub fn new(catalog: Catalog) -> Self {
        ToolHarness {
            executor: Executor::new(catalog),
            context: ToolContext::new()
                .with_conversation_id("test-conversation")
                .with_session_id("test-session"),
            next_id: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// Uses `context` (ids, state, cancellation) for every call.
    ///
    /// # Panics
    /// If `context` lacks state a tool of the harness declares
    /// (`state = [Db]`): the check an agent makes when it is built. A
    /// harness left without a context checks nothing, so that a test can
    /// see how a tool fails when its state is missing.
    pub fn with_context(mut self, context: ToolContext) -> Self {
        let missing = self.executor.catalog().missing_state(&context);
        if !missing.is_empty() {
            let lines: Vec<String> = missing.iter().map(ToString::to_string).collect();
            panic!("{}", lines.join("\n"));
        }
        self.context = context;
        self
    }

    /// Replaces the executor, e.g. to set a default time limit.
    pub fn with_executor(mut self, configure: impl FnOnce(Executor) -> Executor) -> Self {
        self.executor = configure(self.executor);
        self
    }

    /// The executor, for assertions on its catalog.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Calls the only tool of the harness (or the first, by name) with `arguments`.
    pub async fn call(&self, arguments: Value) -> CallResult {
        self.call_raw(&arguments.to_string()).await
    }

    /// Calls the only tool (or the first, by name) with a raw argument string,
    /// exactly as a model might write it.
    pub async fn call_raw(&self, arguments: &str) -> CallResult {
        let name = self
            .executor
            .catalog()
            .names()
            .next()
            .unwrap_or_default()
            .to_owned();
        self.call_named(&name, arguments).await
    }

    /// Calls the tool named `name` with a raw argument string.
    pub async fn call_named(&self, name: &str, arguments: &str) -> CallResult {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = ToolCall::new(format!("call_{id}"), name, arguments);
        let execution = self.executor.execute(&call, &self.context).await;
        self.check_result(&execution);
        CallResult { execution }
    }

    /// Checks a final result of a tool with code against the output schema
    /// it advertises. A `Serialize` and a `JsonSchema` can drift apart (a
    /// hand-written impl, a `rename` on one side); the model is then
    /// promised one shape and sent another, which a test should catch.
    /// Client and human results are checked at run time already; a
    /// preflight's payload is not a result.
    fn check_result(&self, execution: &Execution) {
        let Outcome::Final(envelope) = &execution.outcome else {
            return;
        };
        let (Some(result), Some(definition)) = (
            envelope.result(),
            self.executor.catalog().get(&execution.name),
        ) else {
            return;
        };
        if !definition.route().is_final_on_server() {
            return;
        }
        let value = match serde_json::from_str::<Value>(result.as_str()) {
            Ok(value) => value,
            Err(error) => panic!(
                "`{}` returned a result that is not JSON: {error}",
                execution.name
            ),
        };
        if let Err(problems) = definition.check_output(&value) {
            panic!(
                "`{}` returned a result its output schema does not allow: {problems}\n\
                 result: {value}\n\
                 Its `Serialize` and its `JsonSchema` disagree; the model is shown the schema.",
                execution.name
            );
        }
    }
}

/// What one harness call produced, with asserting accessors.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The full execution record.
    pub execution: Execution,
}

impl CallResult {
    /// The envelope of a finished call.
    ///
    /// # Panics
    /// If the call suspended or passed through instead.
    pub fn envelope(&self) -> &Envelope {
        match &self.execution.outcome {
            Outcome::Final(envelope) => envelope,
            other => panic!("expected a finished call, got {other:?}"),
        }
    }

    /// The result of a successful call, parsed into `T`.
    ///
    /// # Panics
    /// If the call failed (the envelope is in the message) or the result is not a `T`.
    pub fn ok<T: DeserializeOwned>(&self) -> T {
        let envelope = self.envelope();
        match envelope.result_as::<T>() {
            Some(Ok(value)) => value,
            Some(Err(error)) => panic!(
                "the result does not parse as {}: {error}\nenvelope: {envelope}",
                std::any::type_name::<T>()
            ),
            None => panic!("expected success, got {envelope}"),
        }
    }

    /// The error of a failed call.
    ///
    /// # Panics
    /// If the call succeeded.
    pub fn error(&self) -> &EnvelopeError {
        let envelope = self.envelope();
        match envelope.error_body() {
            Some(error) => error,
            None => panic!("expected an error, got {envelope}"),
        }
    }

    /// The error code of a failed call.
    ///
    /// # Panics
    /// If the call succeeded.
    pub fn code(&self) -> ErrorCode {
        self.error().code
    }

    /// The suspension of a call that waits for approval, a client or a person.
    ///
    /// # Panics
    /// If the call finished or passed through.
    pub fn awaiting(&self) -> &Awaiting {
        match &self.execution.outcome {
            Outcome::Awaiting(awaiting) => awaiting,
            other => panic!("expected a suspended call, got {other:?}"),
        }
    }

    /// The payload of a suspended call as JSON.
    ///
    /// # Panics
    /// As [`CallResult::awaiting`].
    pub fn payload(&self) -> Value {
        serde_json::from_str(self.awaiting().payload.as_str()).unwrap_or(Value::Null)
    }
}

/// The envelope of every tool result in `messages`, in order, as JSON (a
/// result that is no JSON, such as a hook's rewritten text, is left out).
pub fn tool_results(messages: &[aptix_core::transcript::Message]) -> Vec<Value> {
    tool_results_by_id(messages)
        .into_iter()
        .map(|(_, envelope)| envelope)
        .filter(|envelope| !envelope.is_null())
        .collect()
}

/// The envelope (redacted, as events show it) of the call `id` among a
/// run's `events`, from its `ToolCallResult`.
///
/// # Panics
/// When no such event is among `events`, naming the events.
pub fn call_envelope(events: &[aptix_core::agent::AgentEvent], id: &str) -> Value {
    events
        .iter()
        .find_map(|event| match event {
            aptix_core::agent::AgentEvent::ToolCallResult {
                id: done, envelope, ..
            } if done == id => Some(envelope.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for the call `{id}` in {events:#?}"))
}

/// Every tool result in `messages`, in order, with its call id: the
/// envelope as JSON, `null` for a result that is no JSON.
pub fn tool_results_by_id(messages: &[aptix_core::transcript::Message]) -> Vec<(String, Value)> {
    messages
        .iter()
        .filter_map(|message| match message {
            aptix_core::transcript::Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((
                tool_call_id.clone(),
                serde_json::from_str(content).unwrap_or(Value::Null),
            )),
            _ => None,
        })
        .collect()
}

/// Asserts that every tool of `tools` has a valid definition and a unique
/// name. Add it to every crate that declares tools:
///
/// ```ignore
/// #[test]
/// fn tool_catalog_is_valid() {
///     aptix_testkit::assert_catalog_valid(aptix::tools![GetWeatherTool, BookFlightTool]);
/// }
/// ```
///
/// # Panics
/// With every problem found, each naming the tool and its source location.
pub fn assert_catalog_valid(tools: CatalogBuilder) -> Catalog {
    match tools.build() {
        Ok(catalog) => catalog,
        Err(error) => panic!("{error}"),
    }
}

/// Like [`assert_catalog_valid`], and also that every tool can be lowered
/// into each of `dialects` (the providers this application talks to).
///
/// # Panics
/// With every problem found.
pub fn assert_catalog_valid_for(tools: CatalogBuilder, dialects: &[Dialect]) -> Catalog {
    let catalog = assert_catalog_valid(tools);
    let problems: Vec<String> = dialects
        .iter()
        .flat_map(|dialect| {
            catalog
                .definitions()
                .filter_map(move |definition| definition.lower(*dialect).err())
        })
        .map(|error| error.to_string())
        .collect();
    assert!(
        problems.is_empty(),
        "some tools cannot be sent to a provider:\n- {}",
        problems.join("\n- ")
    );
    catalog
}

/// One tool's [`ToolEntry::contract`](aptix_core::ToolEntry::contract):
/// everything a reviewer must see change (name, description, usage,
/// executor, approval, parameters, output, annotations, redaction, time
/// limits). Used by [`assert_schema_snapshot!`].
///
/// # Panics
/// If `T`'s definition is invalid (the panic message says why).
pub fn contract_snapshot<T: Tool>() -> Value {
    let catalog = one_tool_catalog::<T>();
    catalog
        .entries()
        .next()
        .map(aptix_core::ToolEntry::contract)
        .unwrap_or(Value::Null)
}

/// Every dialect of one tool as a model is sent it, as snapshot-ready
/// JSON: the lowered tool, its description followed by its usage as an
/// agent's request carries it (a latent tool with the `_output` member it
/// asks for), `{"error": "..."}` for a dialect that refuses it, and for
/// MCP `{"not_listed": "..."}` when an MCP server does not list the tool
/// (client and provider tools). Used by [`assert_schema_snapshot!`].
///
/// # Panics
/// If `T`'s definition is invalid (the panic message says why).
pub fn dialect_snapshots<T: Tool>() -> Vec<(Dialect, Value)> {
    let catalog = one_tool_catalog::<T>();
    let route = catalog
        .definitions()
        .next()
        .map(aptix_core::ToolDefinition::route);
    let listed_by_mcp = route.is_some_and(|route| {
        route.step != aptix_core::meta::ServerStep::PassThrough && !route.reaches_client()
    });
    Dialect::ALL
        .iter()
        .map(|dialect| {
            let value = match catalog.lower(*dialect) {
                _ if *dialect == Dialect::Mcp && !listed_by_mcp => serde_json::json!({
                    "not_listed": "an MCP server lists only tools it can run to their end (server and human tools)"
                }),
                Ok(mut tools) if tools.len() == 1 => tools.remove(0),
                Ok(tools) => panic!("one tool lowered to {} tools", tools.len()),
                Err(error) => serde_json::json!({ "error": error.to_string() }),
            };
            (*dialect, value)
        })
        .collect()
}

fn one_tool_catalog<T: Tool>() -> Catalog {
    match Catalog::builder().tool::<T>().build() {
        Ok(catalog) => catalog,
        Err(error) => panic!("{error}"),
    }
}

/// Snapshots a tool with insta, in the calling file's `snapshots/`
/// folder: `<tool>@contract` ([`contract_snapshot`]: name, description,
/// usage, executor, approval, parameters, output, annotations, redaction,
/// time limits) and one per dialect, `<tool>@<dialect>`
/// ([`dialect_snapshots`]: what a model of that provider is sent). Review
/// every change as an API change: switching a tool from
/// `requires_approval` to `auto` changes its contract.
///
/// ```ignore
/// aptix_testkit::assert_schema_snapshot!(HelloWorldTool);
/// ```
#[macro_export]
macro_rules! assert_schema_snapshot {
    ($tool:ty) => {{
        let contract = $crate::contract_snapshot::<$tool>();
        $crate::__insta::assert_json_snapshot!(
            format!("{}@contract", <$tool as $crate::__Tool>::NAME),
            contract
        );
        for (dialect, sent) in $crate::dialect_snapshots::<$tool>() {
            $crate::__insta::assert_json_snapshot!(
                format!("{}@{}", <$tool as $crate::__Tool>::NAME, dialect),
                sent
            );
        }
    }};
}

#[doc(hidden)]
pub use aptix_core::Tool as __Tool;
