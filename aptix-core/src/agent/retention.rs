//! Context that stays affordable: old tool results replaced by a short stub
//! in the *request* (the stored transcript keeps every result), by each
//! tool's [`Retention`] and the agent's context budget.
//!
//! Every decision is a function of the transcript and the catalog alone,
//! so the same transcript always gives the same request (after a restart
//! too). A result a tool's own rule stubbed stays stubbed as the
//! conversation grows, and the budget evicts the oldest results in steps
//! of a quarter of the budget: between two steps the request's prefix does
//! not change, so a provider's prompt cache keeps matching it.

use crate::catalog::Catalog;
use crate::content::{Content, ResourceContents};
use crate::meta::Retention;
use crate::transcript::Message;

/// How the requests of an agent keep the context short.
#[derive(Debug, Clone)]
pub(super) struct Retainer {
    /// Some tool of the catalog declares a retention of its own.
    rules: bool,
    /// The most (estimated) tokens a request's messages should take.
    budget: Option<usize>,
}

impl Retainer {
    pub(super) fn new(catalog: &Catalog, budget: Option<usize>) -> Self {
        Retainer {
            rules: catalog
                .definitions()
                .any(|definition| definition.retention() != Retention::Budget),
            budget,
        }
    }

    /// Whether requests may differ from the transcript at all; without a
    /// rule or a budget the transcript is sent as it is.
    pub(super) fn is_active(&self) -> bool {
        self.rules || self.budget.is_some()
    }

    /// The messages a request carries for `messages`.
    pub(super) fn request_messages(&self, messages: &[Message], catalog: &Catalog) -> Vec<Message> {
        let mut out = messages.to_vec();
        if !self.is_active() {
            return out;
        }
        let results = results(messages);
        let turns = messages
            .iter()
            .filter(|message| matches!(message, Message::Assistant { .. }))
            .count();
        let retention = |name: &str| {
            catalog
                .get(name)
                .map_or(Retention::Budget, |definition| definition.retention())
        };
        // Why each result is stubbed, if it is.
        let mut stubbed: Vec<Option<String>> = vec![None; results.len()];
        // The tools' own rules.
        if self.rules {
            for (place, result) in results.iter().enumerate() {
                let latest = result.turn == turns;
                let rule = retention(&result.name);
                let old = match rule {
                    Retention::KeepLast(n) => {
                        let newer = results[place + 1..]
                            .iter()
                            .filter(|other| other.name == result.name)
                            .count();
                        newer >= n as usize
                    }
                    Retention::Turns(n) => turns - result.turn >= n as usize,
                    Retention::Budget | Retention::NeverEvict => false,
                };
                if old && !latest {
                    stubbed[place] = Some(format!("retention {rule}"));
                }
            }
        }
        // The budget: the oldest results first, in steps.
        if let Some(budget) = self.budget {
            let size = |place: usize| -> usize {
                match &stubbed[place] {
                    Some(reason) => {
                        approx_tokens(&stub(&messages[results[place].index], reason, catalog))
                    }
                    None => approx_tokens(&messages[results[place].index]),
                }
            };
            let mut total: usize = messages.iter().map(approx_tokens).sum();
            for (place, result) in results.iter().enumerate() {
                if stubbed[place].is_some() {
                    total = total - approx_tokens(&messages[result.index]) + size(place);
                }
            }
            if total > budget {
                // Results the budget may stub: not of the model's latest turn
                // (it asked for them now), not `never_evict`.
                let candidates: Vec<usize> = results
                    .iter()
                    .enumerate()
                    .filter(|(_, result)| {
                        result.turn < turns && retention(&result.name) != Retention::NeverEvict
                    })
                    .map(|(place, _)| place)
                    .collect();
                // Stub the fewest oldest candidates that bring the request
                // under the budget ...
                let mut needed = 0;
                let mut saved_total = total;
                for &place in &candidates {
                    if saved_total <= budget {
                        break;
                    }
                    let whole = size(place);
                    let small = approx_tokens(&stub(
                        &messages[results[place].index],
                        "context budget",
                        catalog,
                    ));
                    saved_total -= whole.saturating_sub(small).min(saved_total);
                    needed += 1;
                }
                // ... rounded up to the next step: a step ends where the
                // candidates' original sizes add up to another quarter of
                // the budget. Those sizes never change (results are only
                // appended), so neither do the steps.
                let step = (budget / 4).max(1);
                let original = |place: usize| approx_tokens(&messages[results[place].index]);
                let reached: usize = candidates[..needed].iter().map(|&p| original(p)).sum();
                let target = reached.div_ceil(step) * step;
                let mut cumulative = 0;
                let mut evict = 0;
                for &place in &candidates {
                    if evict >= needed && cumulative >= target {
                        break;
                    }
                    cumulative += original(place);
                    evict += 1;
                }
                for &place in &candidates[..evict] {
                    if stubbed[place].is_none() {
                        stubbed[place] = Some("context budget".to_owned());
                    }
                }
                if saved_total > budget && needed == candidates.len() {
                    tracing::warn!(
                        budget,
                        estimate = saved_total,
                        "the request is over the context budget with every evictable result stubbed"
                    );
                }
            }
        }
        let mut evicted = 0;
        for (place, reason) in stubbed.iter().enumerate() {
            if let Some(reason) = reason {
                let index = results[place].index;
                out[index] = stub(&messages[index], reason, catalog);
                evicted += 1;
            }
        }
        if evicted > 0 {
            tracing::debug!(evicted, "old tool results stubbed in the request");
        }
        out
    }
}

/// A tool result of the transcript.
struct ToolResult {
    /// Its place in the messages.
    index: usize,
    /// Its tool.
    name: String,
    /// The model turn that made the call: 1 for the first assistant message.
    turn: usize,
}

fn results(messages: &[Message]) -> Vec<ToolResult> {
    let mut turn = 0;
    let mut results = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::Assistant { .. } => turn += 1,
            Message::Tool { name, .. } => results.push(ToolResult {
                index,
                name: name.clone(),
                turn,
            }),
            _ => {}
        }
    }
    results
}

/// The stub that takes a result's place: what was there, why it went, and
/// how to get it again, or why not to.
fn stub(message: &Message, reason: &str, catalog: &Catalog) -> Message {
    let Message::Tool {
        tool_call_id,
        name,
        is_error,
        ..
    } = message
    else {
        return message.clone();
    };
    // Short: a stub stays in every later request.
    let again = match catalog.get(name) {
        Some(definition)
            if definition.annotations().read_only || definition.annotations().idempotent =>
        {
            format!("Call `{name}` again with the same arguments to see it.")
        }
        _ => format!("It was done; calling `{name}` again would do it again."),
    };
    let text = format!("This `{name}` result was removed to save context ({reason}). {again}");
    let content = serde_json::json!({
        "ok": !is_error,
        "evicted": text,
    })
    .to_string();
    Message::Tool {
        tool_call_id: tool_call_id.clone(),
        name: name.clone(),
        content,
        is_error: *is_error,
        // Evicted with the result: the stub says how to get both again.
        attachments: Vec::new(),
    }
}

/// A rough token count: 4 bytes a token, and a few for the message's frame.
/// Providers count differently; a budget is a bound to stay near, not an
/// exact limit, and an estimate that is a pure function of the text keeps
/// eviction deterministic.
fn approx_tokens(message: &Message) -> usize {
    let bytes = match message {
        Message::System { content } | Message::User { content } => content.len(),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            content.len()
                + tool_calls
                    .iter()
                    .map(|call| call.id.len() + call.name.len() + call.arguments.len())
                    .sum::<usize>()
        }
        Message::Tool {
            tool_call_id,
            content,
            attachments,
            ..
        } => {
            let attached: usize = attachments.iter().map(attachment_tokens).sum();
            return (tool_call_id.len() + content.len()).div_ceil(4) + 4 + attached;
        }
    };
    bytes.div_ceil(4) + 4
}

/// What an attachment costs: providers bill an image by its pixels, about
/// 1,600 tokens for one of a megapixel (Anthropic caps images near that
/// size), so an image counts as that whatever its bytes; text and
/// documents count by their length like any text (base64 at 4 bytes
/// per 3).
fn attachment_tokens(content: &Content) -> usize {
    const IMAGE_TOKENS: usize = 1_600;
    match content {
        Content::Image { .. } => IMAGE_TOKENS,
        Content::Text { text } => text.len().div_ceil(4),
        Content::Audio { data, .. } => data.len().div_ceil(4),
        Content::Resource {
            resource: ResourceContents::Text { text, .. },
        } => text.len().div_ceil(4),
        Content::Resource {
            resource: ResourceContents::Blob { mime_type, .. },
        } if mime_type.starts_with("image/") => IMAGE_TOKENS,
        Content::Resource {
            resource: ResourceContents::Blob { blob, .. },
        } => blob.len().div_ceil(4),
    }
}
