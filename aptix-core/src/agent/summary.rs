//! What a run did, in one value on its `Done` event: the calls by tool with
//! their latency, the model turns, and a hash of what the model was asked
//! with (the specification's `promptHash`), so that an application can bill,
//! chart and group runs without listening to every event.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::json;

use crate::model::ToolChoice;
use crate::schema::Dialect;
use crate::transcript::Message;

/// A summary of one run, on [`AgentEvent::Done`](super::AgentEvent::Done).
///
/// A durable run that resumes a conversation several times in one call sums
/// its passes.
#[derive(Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RunSummary {
    /// Model requests made (one per turn of the loop).
    pub iterations: usize,
    /// Calls by tool name, in name order.
    pub tools: BTreeMap<String, ToolCallStats>,
    /// The fingerprint of the tools the last request offered (the agent's
    /// catalog, or the subset `prepare_step` chose); `None` when no request
    /// was made.
    pub tools_fingerprint: Option<String>,
    /// What framed the last request, hashed on demand by
    /// [`RunSummary::request_hash`]: hashing costs microseconds a run that
    /// never reads it should not pay.
    framing: Option<Arc<Framing>>,
    request_hash: OnceLock<String>,
    /// How long the run took, from its start to `Done`.
    pub elapsed: Duration,
}

/// Shows the hash, not what was hashed: the system prompt is long, and
/// may be private.
impl std::fmt::Debug for RunSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSummary")
            .field("iterations", &self.iterations)
            .field("tools", &self.tools)
            .field("tools_fingerprint", &self.tools_fingerprint)
            .field("request_hash", &self.request_hash())
            .field("elapsed", &self.elapsed)
            .finish()
    }
}

/// The calls of one tool in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallStats {
    /// Calls made.
    pub calls: usize,
    /// Calls that finished with an error envelope.
    pub failed: usize,
    /// Calls that suspended (an approval, a client, a person).
    pub suspended: usize,
    /// The time spent in them, summed (calls may overlap).
    pub total: Duration,
    /// The longest call.
    pub longest: Duration,
}

impl RunSummary {
    /// A hash of what shapes the model's answer besides the conversation:
    /// the system prompt, the tools offered (their fingerprint), the tool
    /// choice, the call mode, whether reasons are asked for, the dialect and
    /// the model's name ([`ChatModel::model_name`](crate::model::ChatModel::model_name)),
    /// as the second specification's `promptHash`. Two runs with the same
    /// hash framed their question the same way. `None` when no request was
    /// made.
    pub fn request_hash(&self) -> Option<&str> {
        let framing = self.framing.as_deref()?;
        Some(self.request_hash.get_or_init(|| framing.hash()))
    }

    pub(crate) fn framed(&mut self, framing: Framing) {
        self.tools_fingerprint = Some(framing.tools_fingerprint.clone());
        self.framing = Some(Arc::new(framing));
        self.request_hash = OnceLock::new();
    }

    /// The total calls of every tool.
    pub fn tool_calls(&self) -> usize {
        self.tools.values().map(|stats| stats.calls).sum()
    }

    /// The summary with its elapsed time set, for a run started at `started`.
    pub(crate) fn finished(&self, started: std::time::Instant) -> RunSummary {
        RunSummary {
            elapsed: started.elapsed(),
            ..self.clone()
        }
    }

    pub(crate) fn record_call(&mut self, name: &str, took: Duration, outcome: CallOutcome) {
        let stats = match self.tools.get_mut(name) {
            Some(stats) => stats,
            None => self.tools.entry(name.to_owned()).or_default(),
        };
        stats.calls += 1;
        match outcome {
            CallOutcome::Ok => {}
            CallOutcome::Failed => stats.failed += 1,
            CallOutcome::Suspended => stats.suspended += 1,
        }
        stats.total += took;
        stats.longest = stats.longest.max(took);
    }

    /// Adds a later pass of the same run: counts add up, the last request
    /// names the hashes.
    pub(crate) fn absorb(&mut self, later: RunSummary) {
        self.iterations += later.iterations;
        for (name, stats) in later.tools {
            let mine = self.tools.entry(name).or_default();
            mine.calls += stats.calls;
            mine.failed += stats.failed;
            mine.suspended += stats.suspended;
            mine.total += stats.total;
            mine.longest = mine.longest.max(stats.longest);
        }
        if later.tools_fingerprint.is_some() {
            self.tools_fingerprint = later.tools_fingerprint;
        }
        if later.framing.is_some() {
            self.framing = later.framing;
            self.request_hash = later.request_hash;
        }
    }
}

/// How a call ended, as the summary counts it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallOutcome {
    Ok,
    Failed,
    Suspended,
}

/// What frames a request besides the conversation's turns, kept so that
/// [`RunSummary::request_hash`] can hash it when asked.
#[derive(Debug, PartialEq)]
pub(crate) struct Framing {
    pub(crate) model: Option<String>,
    pub(crate) dialect: Dialect,
    pub(crate) system: Vec<String>,
    pub(crate) tools_fingerprint: String,
    pub(crate) tool_choice: ToolChoice,
    pub(crate) composed: bool,
    pub(crate) ask_reasoning: bool,
}

impl Framing {
    /// The system prompt of a transcript: its system messages, in order.
    pub(crate) fn system_of(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .filter_map(|message| match message {
                Message::System { content } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }

    /// The tools are named by their fingerprint, which hashes every
    /// definition already: a small document, not every schema again.
    fn hash(&self) -> String {
        let tool_choice = match &self.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"tool": name}),
        };
        let framing = json!({
            "model": self.model,
            "dialect": self.dialect.to_string(),
            "system": self.system,
            "tools": self.tools_fingerprint,
            "tool_choice": tool_choice,
            "composed": self.composed,
            "ask_reasoning": self.ask_reasoning,
        });
        crate::digest::sha256_hex(framing.to_string().as_bytes())
    }
}
