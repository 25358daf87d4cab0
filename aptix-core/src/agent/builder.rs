//! Building an [`Agent`]: its model, its tools, and the limits of a run.

use std::sync::Arc;
use std::time::Duration;

use super::approval::ApprovalPolicy;
use super::composed::{self, CallMode};
use super::hook::ToolHook;
use super::retention::Retainer;
use super::step::{PrepareStep, PreparedStep, Step};
use super::{Agent, DEFAULT_MAX_CALLS_PER_TURN, DEFAULT_MODEL_CALL_TIMEOUT, Inner};
use crate::catalog::Catalog;
use crate::context::{MissingState, ToolContext};
use crate::executor::Executor;
use crate::meta::ServerStep;
use crate::model::assembly::TurnLimits;
use crate::model::{ChatModel, ToolChoice, ToolSpec};
use crate::schema::{Dialect, DialectError};

/// Why an agent could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No model was given.
    #[error("the agent has no model: call `.model(...)`")]
    NoModel,
    /// No catalog was given.
    #[error("the agent has no tool catalog: call `.catalog(...)`")]
    NoCatalog,
    /// A tool cannot be expressed in the model's dialect.
    #[error(transparent)]
    Dialect(#[from] DialectError),
    /// A tool runs at the model provider, and this model does not host it.
    #[error(
        "the tool `{tool}` runs at the model provider, which this model does not host (see `ChatModel::hosts_tool`); leave it out of the agent's catalog"
    )]
    ProviderTool {
        /// The tool's name.
        tool: String,
    },
    /// Tool search cannot be set up as asked (the message says why).
    #[error("tool search: {0}")]
    ToolSearch(String),
    /// Tools declare state (`state = [Db]`) that the agent's context does
    /// not hold: every missing pair, tool and type, in the catalog's order.
    #[error("{}", missing_state_message(.0))]
    MissingState(Vec<MissingState>),
}

/// One line per missing pair, so that one start-up names them all.
fn missing_state_message(missing: &[MissingState]) -> String {
    let lines: Vec<String> = missing.iter().map(ToString::to_string).collect();
    format!(
        "the agent's context lacks state its tools declare (add it with `AgentBuilder::context(ToolContext::new().with_state(..))`): {}",
        lines.join("; ")
    )
}

/// Builds an [`Agent`].
#[must_use]
pub struct AgentBuilder {
    model: Option<Arc<dyn ChatModel>>,
    name: Option<Arc<str>>,
    catalog: Option<Catalog>,
    context: ToolContext,
    settings: Settings,
    executor: Option<Box<dyn FnOnce(Executor) -> Executor>>,
    prepare_step: Option<PrepareStep>,
    hooks: Vec<Arc<dyn ToolHook>>,
    approval_policy: Option<Arc<dyn ApprovalPolicy>>,
    #[cfg(feature = "tool-search")]
    tool_search: Option<crate::tool_search::ToolSearch>,
}

/// How each run behaves; set on the builder, fixed once built.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) max_iterations: usize,
    pub(super) tool_concurrency: usize,
    pub(super) tool_choice: ToolChoice,
    pub(super) parallel_tool_calls: bool,
    pub(super) max_tokens: Option<u32>,
    pub(super) temperature: Option<f32>,
    pub(super) limits: TurnLimits,
    pub(super) max_calls_per_turn: usize,
    pub(super) model_call_timeout: Option<Duration>,
    pub(super) tool_timeout: Option<Duration>,
    pub(super) call_mode: CallMode,
    pub(super) composed_retries: u8,
    pub(super) ask_reasoning: bool,
    pub(super) context_budget: Option<usize>,
}

impl AgentBuilder {
    pub(super) fn new() -> Self {
        AgentBuilder {
            model: None,
            name: None,
            catalog: None,
            context: ToolContext::new(),
            settings: Settings {
                max_iterations: 10,
                tool_concurrency: 4,
                tool_choice: ToolChoice::Auto,
                parallel_tool_calls: true,
                max_tokens: None,
                temperature: None,
                limits: TurnLimits::default(),
                max_calls_per_turn: DEFAULT_MAX_CALLS_PER_TURN,
                model_call_timeout: Some(DEFAULT_MODEL_CALL_TIMEOUT),
                tool_timeout: Some(crate::executor::DEFAULT_TIMEOUT),
                call_mode: CallMode::Native,
                composed_retries: composed::DEFAULT_RETRIES,
                ask_reasoning: false,
                context_budget: None,
            },
            executor: None,
            prepare_step: None,
            hooks: Vec::new(),
            approval_policy: None,
            #[cfg(feature = "tool-search")]
            tool_search: None,
        }
    }

    /// The model to drive.
    pub fn model(mut self, model: impl ChatModel + 'static) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// The model to drive, shared.
    pub fn shared_model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// The agent's name, for its tools to read
    /// ([`ToolContext::agent_name`]): a tool shared by several agents can
    /// tell which one calls it.
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The tools the model may call.
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The base context of every tool call: typed state such as pools and
    /// clients. Ids and cancellation are set per run. It must hold every
    /// state type the catalog's tools declare (`state = [Db]`), or
    /// [`AgentBuilder::build`] fails with [`AgentError::MissingState`].
    pub fn context(mut self, context: ToolContext) -> Self {
        self.context = context;
        self
    }

    /// The most model calls in one run (default 10).
    pub fn max_iterations(mut self, iterations: usize) -> Self {
        self.settings.max_iterations = iterations.max(1);
        self
    }

    /// How many tool calls of one turn run at once (default 4).
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.settings.tool_concurrency = concurrency.max(1);
        self
    }

    /// Which tools the model may call (default `Auto`).
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.settings.tool_choice = choice;
        self
    }

    /// Whether the model may call several tools in one turn (default true).
    pub fn parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.settings.parallel_tool_calls = parallel;
        self
    }

    /// The most tokens per model call.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.settings.max_tokens = Some(max_tokens);
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.settings.temperature = Some(temperature);
        self
    }

    /// The most bytes one model turn may stream that are kept: its text, its
    /// thinking blocks and every call's id, name and arguments (default
    /// 8 MiB). Past it the
    /// model call is ended and the run ends with
    /// [`DoneReason::LimitExceeded`](super::DoneReason::LimitExceeded), so a model stuck in a loop, or a
    /// hostile endpoint, cannot grow memory without bound.
    pub fn max_turn_bytes(mut self, bytes: usize) -> Self {
        self.settings.limits.turn_bytes = bytes;
        self
    }

    /// The most bytes of arguments one tool call may have (default 1 MiB).
    /// Past it the model call is ended, as for
    /// [`AgentBuilder::max_turn_bytes`].
    pub fn max_call_argument_bytes(mut self, bytes: usize) -> Self {
        self.settings.limits.argument_bytes = bytes;
        self
    }

    /// The most tool calls of one turn that run (default 64). The calls past
    /// it are answered with an error result without running, which tells
    /// the model to make them again in a later turn.
    pub fn max_calls_per_turn(mut self, calls: usize) -> Self {
        self.settings.max_calls_per_turn = calls.max(1);
        self
    }

    /// The longest one model call may take, first byte to last (default
    /// 10 minutes; `None`: no limit). Past it the run ends with
    /// [`ModelError::Timeout`](crate::model::ModelError::Timeout). The adapters' HTTP timeouts only bound the
    /// gap between two events; this bounds the whole turn.
    pub fn model_call_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.settings.model_call_timeout = timeout.into();
        self
    }

    /// The time limit of a call whose tool declares no `timeout` (default
    /// [`crate::executor::DEFAULT_TIMEOUT`]; `None`: no limit). Each call
    /// runs in a task of its own and the limit is kept from outside that
    /// task, so it holds even for a tool that blocks its thread.
    pub fn tool_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.settings.tool_timeout = timeout.into();
        self
    }

    /// How tools are offered to the model (default [`CallMode::Native`]):
    /// natively, or composed into one structured-output schema for models
    /// without tool calling (see [`CallMode`]). `Auto` asks the model
    /// ([`ChatModel::calls_tools_natively`]).
    pub fn call_mode(mut self, mode: CallMode) -> Self {
        self.settings.call_mode = mode;
        self
    }

    /// How often in one model turn a composed answer that could not be read
    /// (cut off at the token limit, not the object asked for) is sent back
    /// to the model with what was wrong, before the run ends with
    /// [`DoneReason::ModelError`](super::DoneReason::ModelError) (default 2).
    /// Such an answer is never shown as the model's answer.
    pub fn composed_retries(mut self, retries: u8) -> Self {
        self.settings.composed_retries = retries;
        self
    }

    /// Whether the model is asked why it makes each call (default no): every
    /// tool gains an optional `_reasoningForCall` string, in both call
    /// modes. It is taken out of the arguments before they are validated,
    /// kept in the transcript, and shown in
    /// [`AgentEvent::ToolCallStart`](super::AgentEvent::ToolCallStart) and on
    /// a suspended call (an approver sees why the model wants it).
    pub fn ask_reasoning(mut self, ask: bool) -> Self {
        self.settings.ask_reasoning = ask;
        self
    }

    /// Keeps each model request's messages near `tokens` (estimated at 4
    /// bytes a token): once over it, the oldest tool results are replaced
    /// in the request by a short stub that says what was removed and how
    /// to get it again. The stored transcript keeps every result. Results
    /// of the model's latest turn and of tools declared
    /// `retention = "never_evict"` are never stubbed; the other rules
    /// (`keep_last(N)`, `turns(N)`) apply with or without a budget.
    pub fn context_budget(mut self, tokens: usize) -> Self {
        self.settings.context_budget = Some(tokens);
        self
    }

    /// Chooses the tools of each model request (and, if it likes, the tool
    /// choice) from the transcript so far: `prepare(&step)` runs before
    /// every request. A call of a tool the step did not offer is answered
    /// with an `unknown_tool` error and never runs. See [`Step`] and
    /// [`PreparedStep`].
    ///
    /// ```ignore
    /// .prepare_step(|step| match step.calls_of("search") {
    ///     0 => PreparedStep::all(),
    ///     _ => PreparedStep::all().tools(step.catalog.without("search")),
    /// })
    /// ```
    pub fn prepare_step(
        mut self,
        prepare: impl Fn(&Step<'_>) -> PreparedStep + Send + Sync + 'static,
    ) -> Self {
        self.prepare_step = Some(Arc::new(prepare));
        self
    }

    /// Offers a large catalog through a search
    /// ([`ToolSearch`](crate::tool_search::ToolSearch)): each request
    /// carries the tools always offered and a way to search the rest, and
    /// a tool a search finds is offered for the rest of the conversation.
    /// The provider's own search where the model has one (Anthropic),
    /// Aptix's BM25 search tool otherwise. Needs native tool calls
    /// ([`CallMode::Native`]).
    #[cfg(feature = "tool-search")]
    pub fn tool_search(mut self, search: crate::tool_search::ToolSearch) -> Self {
        self.tool_search = Some(search);
        self
    }

    /// Adds a hook that sees every call before and after it runs, and
    /// calls the model got wrong ([`ToolHook`]). Hooks compose in the order
    /// they are added: the first that denies, answers or halts decides;
    /// rewrites pass on to the next.
    pub fn hook(mut self, hook: impl ToolHook) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Decides at run time which calls wait for a person's approval, and
    /// which are refused ([`ApprovalPolicy`]; a closure over
    /// `&ApprovalCall` is one). It sees each call after the hooks, with
    /// validated arguments. A tool declared `approval = requires_approval`
    /// always waits: a policy adds approvals, never removes one. A later
    /// call replaces the policy.
    pub fn approval_policy(mut self, policy: impl ApprovalPolicy) -> Self {
        self.approval_policy = Some(Arc::new(policy));
        self
    }

    /// Adjusts the executor (e.g. its default time limit).
    pub fn configure_executor(
        mut self,
        configure: impl FnOnce(Executor) -> Executor + 'static,
    ) -> Self {
        self.executor = Some(Box::new(configure));
        self
    }

    /// Checks that the context holds every state type the tools declare
    /// ([`AgentError::MissingState`] names every one missing), lowers
    /// every tool to the model's dialect once, and builds the agent.
    pub fn build(mut self) -> Result<Agent, AgentError> {
        let model = self.model.ok_or(AgentError::NoModel)?;
        let catalog = self.catalog.ok_or(AgentError::NoCatalog)?;
        let missing = catalog.missing_state(&self.context);
        if !missing.is_empty() {
            return Err(AgentError::MissingState(missing));
        }
        if let Some(name) = self.name {
            self.context = self.context.with_agent_name(name);
        }
        if let Some(refused) = catalog.definitions().find(|definition| {
            definition.route().step == ServerStep::PassThrough
                && !model.hosts_tool(definition.name())
        }) {
            return Err(AgentError::ProviderTool {
                tool: refused.name().to_owned(),
            });
        }
        if self.settings.call_mode == CallMode::Auto {
            self.settings.call_mode = if model.calls_tools_natively() {
                CallMode::Native
            } else {
                CallMode::Composed
            };
        }
        let reasoning = self.settings.ask_reasoning;
        #[cfg(feature = "tool-search")]
        let (catalog, search, lowered) = match self.tool_search.take() {
            None => (catalog, None, None),
            Some(mut search) => {
                // Composed calls have no place for a provider's search:
                // Aptix's search tool is a branch of the schema instead.
                if self.settings.call_mode == CallMode::Composed {
                    search.native = None;
                }
                let (search, catalog, lowered) =
                    super::search::Searching::new(search, catalog, model.as_ref(), |catalog| {
                        Ok(lower_for_model(catalog, model.dialect(), reasoning)?)
                    })?;
                (catalog, Some(search), Some(lowered))
            }
        };
        #[cfg(not(feature = "tool-search"))]
        let lowered: Option<Vec<ToolSpec>> = None;
        let (tools, composed) = match self.settings.call_mode {
            CallMode::Composed => (
                Vec::new(),
                Some(composed::response_format(
                    &catalog,
                    &self.settings.tool_choice,
                    reasoning,
                    model.dialect(),
                )?),
            ),
            _ => match lowered {
                Some(lowered) => (lowered, None),
                None => (lower_for_model(&catalog, model.dialect(), reasoning)?, None),
            },
        };
        let retainer = Retainer::new(&catalog, self.settings.context_budget);
        let mut executor = Executor::new(catalog).with_default_timeout(self.settings.tool_timeout);
        if let Some(configure) = self.executor {
            executor = configure(executor);
        }
        let agent = Agent {
            inner: Arc::new(Inner {
                model,
                executor,
                tools: tools.into(),
                context: self.context,
                settings: self.settings,
                prepare_step: self.prepare_step,
                hooks: self.hooks,
                approval_policy: self.approval_policy,
                retainer,
                composed,
                #[cfg(feature = "tool-search")]
                search,
            }),
        };
        Ok(agent)
    }
}

/// Every tool of `catalog` as offered to a model that takes `dialect`.
fn lower_for_model(
    catalog: &Catalog,
    dialect: Dialect,
    reasoning: bool,
) -> Result<Vec<ToolSpec>, DialectError> {
    catalog
        .entries()
        .map(|entry| ToolSpec::offered(entry, dialect, reasoning))
        .collect()
}
