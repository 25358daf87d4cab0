//! Per-step tool selection: before each model request, the application may
//! narrow the tools offered (and force a tool choice) from what the
//! transcript shows so far: a tool that may run once, tools unlocked by an
//! earlier answer, a final step that must answer without tools.
//!
//! A step offers a subset of the agent's catalog, and a tool choice. Its
//! calls are checked against both before any of them runs: a call of a tool
//! of the catalog that this step did not offer, or that its tool choice
//! forbids (`ToolChoice::None`: every tool; `ToolChoice::Tool(x)`: every
//! other tool), is answered with an `unknown_tool` error naming the tools it
//! may call now, and never runs, so the selection is a rule the model cannot
//! talk its way around, not a hint. A durable run stores the refusal and
//! the tools the turn could run with the turn, so a crash changes nothing
//! of it.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::model::{ToolChoice, ToolSpec};
use crate::transcript::Message;

/// What [`AgentBuilder::prepare_step`](super::AgentBuilder::prepare_step)
/// sees before a model request.
#[derive(Debug)]
pub struct Step<'a> {
    /// Which request of the run this is, from 0.
    pub iteration: usize,
    /// The transcript the request sends.
    pub messages: &'a [Message],
    /// The agent's whole catalog, to derive the step's tools from
    /// ([`Catalog::without`], [`Catalog::only`]).
    pub catalog: &'a Catalog,
}

impl Step<'_> {
    /// How many calls of the tool `name` the transcript holds.
    pub fn calls_of(&self, name: &str) -> usize {
        self.messages
            .iter()
            .map(|message| match message {
                Message::Assistant { tool_calls, .. } => {
                    tool_calls.iter().filter(|call| call.name == name).count()
                }
                _ => 0,
            })
            .sum()
    }
}

/// What one step offers the model. The default offers every tool, with the
/// agent's tool choice.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct PreparedStep {
    pub(crate) tools: Option<Catalog>,
    pub(crate) tool_choice: Option<ToolChoice>,
}

impl PreparedStep {
    /// Every tool of the agent, as without `prepare_step`.
    pub fn all() -> PreparedStep {
        PreparedStep::default()
    }

    /// Only the tools of `tools`, a catalog derived from the agent's
    /// ([`Step::catalog`]). A tool of `tools` that the agent's catalog
    /// does not hold is not offered (and logged): the agent checked and
    /// lowered its own tools when it was built.
    pub fn tools(mut self, tools: Catalog) -> PreparedStep {
        self.tools = Some(tools);
        self
    }

    /// The tool choice of this step's request, instead of the agent's.
    pub fn tool_choice(mut self, choice: ToolChoice) -> PreparedStep {
        self.tool_choice = Some(choice);
        self
    }
}

/// The application's step function.
pub(crate) type PrepareStep = Arc<dyn Fn(&Step<'_>) -> PreparedStep + Send + Sync>;

/// The tools an agent with tool search offers the next request, before
/// `prepare_step` narrows them.
pub(crate) struct Loaded {
    /// The tools sent, lowered.
    pub(crate) specs: Arc<[ToolSpec]>,
    /// Those of them that may run.
    pub(crate) catalog: Catalog,
    /// The tools sent for the provider's own search.
    pub(crate) deferred: Option<crate::model::DeferredTools>,
}

/// The tools one request offers: the specs sent, and the catalog of the
/// tools offered when it is narrower than the agent's.
pub(crate) struct Offered {
    pub(crate) specs: Arc<[ToolSpec]>,
    pub(crate) narrowed: Option<Catalog>,
    pub(crate) tool_choice: ToolChoice,
}

/// The tools the calls of a turn may run: those the step offered (`None`:
/// every tool of the agent), within its tool choice: none under
/// [`ToolChoice::None`], only the named one under [`ToolChoice::Tool`]. A
/// call of any other tool of the agent is refused before it runs.
pub(crate) fn runnable(
    narrowed: Option<&Catalog>,
    choice: &ToolChoice,
    catalog: &Catalog,
) -> Option<Catalog> {
    let offered = narrowed.unwrap_or(catalog);
    match choice {
        ToolChoice::Auto | ToolChoice::Required => narrowed.cloned(),
        ToolChoice::None => offered.only([]).ok(),
        ToolChoice::Tool(name) => offered
            .only([name.as_str()])
            .or_else(|_| offered.only([]))
            .ok(),
    }
}

/// The catalog of the tools a stored turn kept as its runnable ones (see
/// `Message::Assistant::runnable`); names the agent no longer holds are
/// left out. `None` when the turn kept none: every tool may run.
pub(crate) fn kept_runnable(kept: Option<&[String]>, catalog: &Catalog) -> Option<Catalog> {
    let kept = kept?;
    let known = kept
        .iter()
        .map(String::as_str)
        .filter(|name| catalog.entry(name).is_some());
    // Every name was checked against the catalog; were it to fail, no tool
    // may run, not every tool.
    match catalog.only(known) {
        Ok(runnable) => Some(runnable),
        Err(_) => catalog.only([]).ok(),
    }
}

/// The agent's lowered tools narrowed to `prepared`'s.
pub(crate) fn offered(
    all: &Arc<[ToolSpec]>,
    catalog: &Catalog,
    prepared: PreparedStep,
    default_choice: &ToolChoice,
) -> Offered {
    let tool_choice = prepared
        .tool_choice
        .unwrap_or_else(|| default_choice.clone());
    let Some(tools) = prepared.tools else {
        return Offered {
            specs: Arc::clone(all),
            narrowed: None,
            tool_choice,
        };
    };
    let mut names = Vec::with_capacity(tools.len());
    for name in tools.names() {
        if catalog.entry(name).is_some() {
            names.push(name);
        } else {
            tracing::warn!(
                tool = name,
                "prepare_step offered a tool the agent's catalog does not hold; it is not offered"
            );
        }
    }
    let narrowed = match catalog.only(names.iter().copied()) {
        Ok(narrowed) => narrowed,
        // Every name was checked against the catalog above.
        Err(_) => catalog.clone(),
    };
    let specs: Arc<[ToolSpec]> = all
        .iter()
        .filter(|spec| narrowed.entry(&spec.name).is_some())
        .cloned()
        .collect();
    Offered {
        specs,
        narrowed: Some(narrowed),
        tool_choice,
    }
}
