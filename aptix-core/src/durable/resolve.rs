//! Resolving a suspended call: the public entry point a web handler, a
//! webhook or a job calls with nothing but the two ids.
//!
//! A resolution is checked (kind, state, deadline, arguments or result
//! against the tool's schemas) and recorded by one compare-and-swap in the
//! store, then acknowledged. Resumption happens afterwards, in the
//! background, and only when the conversation has nothing else pending.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use super::DurableAgent;
use super::lease::now_ms;
use crate::agent::{arguments_hash, redact};
use crate::store::{
    Applied, Batch, CallRecord, CallState, ConversationStatus, Step, StoreError, Write,
};

/// How a suspended call is resolved. More kinds may come: match with a
/// wildcard arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Resolution {
    /// Approve the call with the arguments the model gave.
    Approve,
    /// Approve the call with changed arguments; they are validated against
    /// the tool's schema exactly like the model's.
    ApproveWithArgs(Value),
    /// Approve the call as the approver saw it: bound to
    /// [`PendingCall::arguments_hash`](super::PendingCall::arguments_hash). Refused with
    /// [`ResolveError::Conflict`] when the call waiting under this id holds
    /// anything else (the model reused the id, or a revived turn made
    /// another call), so an approval is never spent on arguments nobody
    /// saw. Build it with [`Resolution::approve_exactly`].
    ApproveExactly {
        /// The hash of what the approver was shown.
        arguments_hash: String,
    },
    /// Approve the call (bound to its arguments like
    /// [`Resolution::ApproveExactly`]), and remember it: later calls of the
    /// same tool in this conversation run without asking. Kept in the
    /// ledger with the call, so a restart keeps it. Build it with
    /// [`Resolution::approve_always`].
    ApproveAlways {
        /// The hash of what the approver was shown.
        arguments_hash: String,
    },
    /// Refuse the call (or, for a client or a person, decline to run or
    /// answer it). The model receives a `denied` error with this message.
    Deny {
        /// Why, in words the model can act on.
        message: String,
    },
    /// The result of a client or human call; validated against the tool's
    /// declared `output` schema, because client data is never trusted.
    Result(Value),
}

impl Resolution {
    /// An approval bound to what the approver was shown:
    /// `arguments_hash` is [`PendingCall::arguments_hash`](super::PendingCall::arguments_hash) or
    /// [`SuspendedCall::arguments_hash`](crate::agent::SuspendedCall::arguments_hash).
    pub fn approve_exactly(arguments_hash: impl Into<String>) -> Resolution {
        Resolution::ApproveExactly {
            arguments_hash: arguments_hash.into(),
        }
    }

    /// Like [`Resolution::approve_exactly`], and it also approves every
    /// later call of the tool in the conversation.
    pub fn approve_always(arguments_hash: impl Into<String>) -> Resolution {
        Resolution::ApproveAlways {
            arguments_hash: arguments_hash.into(),
        }
    }

    /// Whether it approves the call with the arguments it holds.
    pub(crate) fn approves_as_held(&self) -> bool {
        matches!(
            self,
            Resolution::Approve
                | Resolution::ApproveExactly { .. }
                | Resolution::ApproveAlways { .. }
        )
    }

    /// Whether this kind of resolution answers `step`.
    fn fits(&self, step: Step) -> bool {
        match self {
            Resolution::Approve
            | Resolution::ApproveWithArgs(_)
            | Resolution::ApproveExactly { .. }
            | Resolution::ApproveAlways { .. } => step == Step::Approval,
            Resolution::Result(_) => matches!(step, Step::Client | Step::Human),
            Resolution::Deny { .. } => step != Step::Execution,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Resolution::Approve => "an approval",
            Resolution::ApproveWithArgs(_) => "an approval with arguments",
            Resolution::ApproveExactly { .. } => "an approval of the arguments shown",
            Resolution::ApproveAlways { .. } => "an approval for every call of the tool",
            Resolution::Deny { .. } => "a denial",
            Resolution::Result(_) => "a result",
        }
    }

    pub(crate) fn decode(text: &str) -> Result<Resolution, StoreError> {
        serde_json::from_str(text)
            .map_err(|error| StoreError::Corrupt(format!("unreadable resolution: {error}")))
    }
}

/// How long after a `Stale` retry its conversation is checked for a
/// resume nobody started: longer than the first resolver takes to start
/// one.
const STALE_RESUME_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The acknowledgement of an accepted resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// How many waits of the conversation are still pending. At 0 the next
    /// model turn is starting in the background.
    pub pending: usize,
}

/// Why a resolution was refused. Nothing changed in the store.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// No call with that id waits (or waited) in that conversation.
    #[error("no call `{tool_call_id}` is suspended in conversation `{conversation_id}`")]
    Unknown {
        /// The conversation.
        conversation_id: String,
        /// The call.
        tool_call_id: String,
    },
    /// Already resolved with this same resolution: a retry, safe to ignore.
    #[error("call `{tool_call_id}` was already resolved with the same resolution")]
    Stale {
        /// The call.
        tool_call_id: String,
    },
    /// Already resolved differently (or abandoned); the first one stands.
    /// Also: an approval bound to other arguments than the waiting call
    /// holds ([`Resolution::ApproveExactly`], [`Resolution::ApproveAlways`]).
    #[error("call `{tool_call_id}` was already resolved differently: {existing}")]
    Conflict {
        /// The call.
        tool_call_id: String,
        /// What it was resolved with, for display.
        existing: String,
    },
    /// Its deadline passed; the model was told it timed out.
    #[error("call `{tool_call_id}` expired before it was resolved")]
    Expired {
        /// The call.
        tool_call_id: String,
    },
    /// An approval sent to a client or human call, or a result sent to a
    /// call that waits for an approval.
    #[error("call `{tool_call_id}` waits for {expected}, not {got}")]
    WrongKind {
        /// The call.
        tool_call_id: String,
        /// What the call waits for.
        expected: &'static str,
        /// What was sent.
        got: &'static str,
    },
    /// `ApproveWithArgs` arguments that do not fit the tool's schema.
    #[error("the new arguments for call `{tool_call_id}` are invalid: {message}")]
    InvalidArguments {
        /// The call.
        tool_call_id: String,
        /// Every problem, with its JSON path.
        message: String,
    },
    /// A client or human result that does not fit the tool's output schema.
    #[error("the result for call `{tool_call_id}` is invalid: {message}")]
    InvalidResult {
        /// The call.
        tool_call_id: String,
        /// Every problem, with its JSON path.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn waits_for(step: Step) -> &'static str {
    match step {
        Step::Approval => "an approval (Approve, ApproveWithArgs or Deny)",
        Step::Client => "a client's result (Result or Deny)",
        Step::Human => "a person's answer (Result or Deny)",
        Step::Execution => "nothing",
    }
}

impl DurableAgent {
    /// Resolves the suspended call `tool_call_id` of `conversation_id`.
    ///
    /// Returns as soon as the resolution is recorded, before the turn it
    /// resumes runs; when it was the last pending wait, the next model turn
    /// starts in the background: follow it with [`DurableAgent::watch`]
    /// (its events also go to [`DurableAgent::subscribe`]). Safe to call from any process
    /// sharing the store: of two different resolutions racing, exactly one
    /// wins and the other gets [`ResolveError::Conflict`]; a repeated one
    /// gets [`ResolveError::Stale`].
    pub async fn resolve(
        &self,
        conversation_id: &str,
        tool_call_id: &str,
        resolution: Resolution,
    ) -> Result<Resolved, ResolveError> {
        let span = tracing::info_span!("resolve", conversation_id, tool_call_id);
        self.resolve_inner(conversation_id, tool_call_id, resolution)
            .instrument(span)
            .await
    }

    async fn resolve_inner(
        &self,
        conversation_id: &str,
        tool_call_id: &str,
        resolution: Resolution,
    ) -> Result<Resolved, ResolveError> {
        self.ensure_deadline_worker();
        let inner = &*self.inner;
        let store = &*inner.store;
        let all = store.calls(conversation_id).await?;
        let records: Vec<&CallRecord> = all
            .iter()
            .filter(|record| record.tool_call_id == tool_call_id && record.step != Step::Execution)
            .collect();
        let unknown = || ResolveError::Unknown {
            conversation_id: conversation_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        };
        if records.is_empty() {
            return Err(unknown());
        }
        // The wait this resolution is for: the pending one if it fits, else
        // an earlier one of the same kind (a retry of a resolution).
        let target = records
            .iter()
            .copied()
            .find(|record| record.state == CallState::Pending && resolution.fits(record.step))
            .or_else(|| {
                records
                    .iter()
                    .copied()
                    .rev()
                    .find(|record| resolution.fits(record.step))
            });
        let Some(target) = target else {
            let open = records
                .iter()
                .copied()
                .find(|record| record.state == CallState::Pending)
                .or(records.last().copied());
            return Err(match open {
                Some(record) => ResolveError::WrongKind {
                    tool_call_id: tool_call_id.to_owned(),
                    expected: waits_for(record.step),
                    got: resolution.kind(),
                },
                None => unknown(),
            });
        };
        let now = now_ms();
        if target.state == CallState::Pending && target.deadline.is_some_and(|at| at <= now) {
            // Expired before its resolution arrived.
            if inner.ledger.expire_if_due(target, now).await? && inner.resume_on_resolve {
                self.resume_in_background(conversation_id);
            }
            return Err(ResolveError::Expired {
                tool_call_id: tool_call_id.to_owned(),
            });
        }
        if target.state != CallState::Pending {
            return Err(self.refused_late(conversation_id, settled_refusal(target, &resolution)));
        }
        let resolution = self.checked(target, resolution)?;
        let encoded = serde_json::to_string(&resolution).map_err(|error| {
            StoreError::Corrupt(format!("resolution cannot be encoded: {error}"))
        })?;
        let record = Write::Transition {
            conversation_id,
            tool_call_id,
            step: target.step,
            from: CallState::Pending,
            to: CallState::Resolved,
            outcome: Some(&encoded),
            now,
        };
        // The last wait of a conversation nobody runs: the resolution and
        // the claim of the run it resumes are one commit.
        let others_pending = all
            .iter()
            .filter(|record| {
                record.state == CallState::Pending
                    && !(record.tool_call_id == target.tool_call_id && record.step == target.step)
            })
            .count();
        if others_pending == 0
            && inner.resume_on_resolve
            && let Some(run) = inner.runs.begin(conversation_id)
        {
            let batch = Batch::new()
                .with(record.clone())
                .with(inner.lease.claim_write(conversation_id));
            match store.apply(&batch).await? {
                Applied::All {
                    claimed: Some(claimed),
                } => {
                    tracing::info!(step = %target.step, kind = resolution.kind(), "call resolved; resuming");
                    self.run_claimed_in_background(claimed.conversation, run);
                    return Ok(Resolved { pending: 0 });
                }
                // Held by a run (this process's that is ending, or another
                // process's): the resolution alone, and the resume below
                // waits for that run.
                Applied::All { claimed: None } | Applied::Refused { index: 1.. } => {}
                // Another resolver (or the deadline) got there first.
                Applied::Refused { index: 0 } => {
                    return Err(self
                        .lost_to(conversation_id, target, &resolution, unknown)
                        .await);
                }
            }
        }
        let won = store.apply(&Batch::new().with(record)).await?.is_all();
        if !won {
            // Another resolver (or the deadline) got there first.
            return Err(self
                .lost_to(conversation_id, target, &resolution, unknown)
                .await);
        }
        // Watchers from now on wait for the run this resolution leads to.
        inner.feeds.expect_run(conversation_id);
        tracing::info!(step = %target.step, kind = resolution.kind(), "call resolved");
        // The resolution is recorded: from here on nothing may fail the
        // call, or a retry would be `Stale` and nobody would resume.
        let pending = match inner.ledger.pending_count(conversation_id).await {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(%error, "could not count the waits left after the resolution; counting from the earlier read, and resuming if nothing is left");
                all.iter()
                    .filter(|record| {
                        record.state == CallState::Pending
                            && !(record.tool_call_id == target.tool_call_id
                                && record.step == target.step)
                    })
                    .count()
            }
        };
        if pending == 0 && inner.resume_on_resolve {
            self.resume_in_background(conversation_id);
        }
        Ok(Resolved { pending })
    }

    /// The refusal of a resolution whose compare-and-swap another resolver
    /// (or the deadline) won: read what the wait became.
    async fn lost_to(
        &self,
        conversation_id: &str,
        target: &CallRecord,
        resolution: &Resolution,
        unknown: impl FnOnce() -> ResolveError,
    ) -> ResolveError {
        let current = match self
            .inner
            .store
            .call(conversation_id, &target.tool_call_id, target.step)
            .await
        {
            Ok(Some(current)) => current,
            Ok(None) => return unknown(),
            Err(error) => return error.into(),
        };
        self.refused_late(conversation_id, settled_refusal(&current, resolution))
    }

    /// A refusal of a resolution that came after its call was settled. A
    /// retry (`Stale`) may come because the first attempt's answer was
    /// lost, maybe with the resume it should have started: the
    /// conversation is resumed if it still needs it once the first
    /// resolver had its chance (the same resolution may also come from a
    /// racer, whose winner resumes at once).
    fn refused_late(&self, conversation_id: &str, refusal: ResolveError) -> ResolveError {
        if matches!(refusal, ResolveError::Stale { .. }) && self.inner.resume_on_resolve {
            let agent = self.clone();
            let conversation_id = conversation_id.to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(STALE_RESUME_GRACE).await;
                match agent.inner.store.load_conversation(&conversation_id).await {
                    Ok(Some(stored)) if stored.status == ConversationStatus::Suspended => {
                        agent.resume_in_background(&conversation_id);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%conversation_id, %error, "could not check whether a resolved conversation was resumed; a sweep will");
                    }
                }
            });
        }
        refusal
    }

    /// Validates what a resolution carries against the tool's schemas, and
    /// puts it in the form that is stored.
    fn checked(
        &self,
        target: &CallRecord,
        resolution: Resolution,
    ) -> Result<Resolution, ResolveError> {
        let definition = self.inner.agent.executor().catalog().get(&target.tool);
        match resolution {
            Resolution::ApproveWithArgs(arguments) => {
                let text = arguments.to_string();
                let invalid = |message: String| ResolveError::InvalidArguments {
                    tool_call_id: target.tool_call_id.clone(),
                    message,
                };
                let definition = definition.ok_or_else(|| {
                    invalid(format!("the tool `{}` is not in the catalog", target.tool))
                })?;
                let validated: Value =
                    definition.validator().parse(&text).map_err(|rejection| {
                        invalid(shown_rejection(rejection, definition.redaction()))
                    })?;
                Ok(Resolution::ApproveWithArgs(validated))
            }
            Resolution::ApproveExactly {
                arguments_hash: ref hash,
            }
            | Resolution::ApproveAlways {
                arguments_hash: ref hash,
            } => {
                if *hash != arguments_hash(&target.payload) {
                    tracing::warn!(tool = %target.tool, "an approval for other arguments than the waiting call holds was refused");
                    return Err(ResolveError::Conflict {
                        tool_call_id: target.tool_call_id.clone(),
                        existing: "a call with other arguments than the approval was given for"
                            .to_owned(),
                    });
                }
                Ok(resolution)
            }
            Resolution::Result(value) => {
                let definition = definition.ok_or_else(|| ResolveError::InvalidResult {
                    tool_call_id: target.tool_call_id.clone(),
                    message: format!("the tool `{}` is not in the catalog", target.tool),
                })?;
                let violations = definition.output_violations(&value).map_err(|message| {
                    ResolveError::InvalidResult {
                        tool_call_id: target.tool_call_id.clone(),
                        message,
                    }
                })?;
                if !violations.is_empty() {
                    return Err(ResolveError::InvalidResult {
                        tool_call_id: target.tool_call_id.clone(),
                        message: shown_violations(violations, definition.redaction()),
                    });
                }
                Ok(Resolution::Result(value))
            }
            other => Ok(other),
        }
    }
}

/// A validator's refusal of an approver's arguments, as a refusal may show
/// it: the refusal travels to whoever resolved and into logs, and
/// violations quote the values they refuse, so a value the tool hides is
/// replaced as in events (see [`redact::redacted_envelope`]).
fn shown_rejection(
    rejection: crate::validate::Rejection,
    redaction: crate::meta::Redaction,
) -> String {
    if !redaction.hides_anything() {
        return rejection.message;
    }
    let envelope = serde_json::json!({
        "ok": false,
        "error": {
            "code": rejection.code.as_str(),
            "message": rejection.message,
            "details": rejection.details,
        }
    });
    let shown = redact::redacted_envelope(envelope, redaction);
    shown["error"]["message"]
        .as_str()
        .map_or_else(|| redact::REDACTED.to_owned(), str::to_owned)
}

/// Where (and, for what the tool does not hide, how) a result breaks the
/// tool's output, as a refusal may show it.
fn shown_violations(
    violations: Vec<(String, String)>,
    redaction: crate::meta::Redaction,
) -> String {
    violations
        .into_iter()
        .map(|(path, problem)| {
            let shown = if redact::shows_path(&path, redaction) {
                problem
            } else {
                redact::REDACTED.to_owned()
            };
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("{path}: {shown}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The refusal for a resolution that arrives after its wait ended.
fn settled_refusal(record: &CallRecord, resolution: &Resolution) -> ResolveError {
    let tool_call_id = record.tool_call_id.clone();
    match record.state {
        CallState::Expired => ResolveError::Expired { tool_call_id },
        CallState::Resolved => {
            let existing = record
                .outcome
                .as_deref()
                .and_then(|text| Resolution::decode(text).ok());
            match existing {
                Some(existing) if same_resolution(&existing, resolution) => {
                    ResolveError::Stale { tool_call_id }
                }
                Some(existing) => ResolveError::Conflict {
                    tool_call_id,
                    existing: existing.kind().to_owned(),
                },
                None => ResolveError::Conflict {
                    tool_call_id,
                    existing: "an unreadable resolution".to_owned(),
                },
            }
        }
        _ => ResolveError::Conflict {
            tool_call_id,
            existing: format!("the call is {}", record.state),
        },
    }
}

/// Equal resolutions: a retry. Arguments compare as JSON values (key order
/// never matters).
fn same_resolution(a: &Resolution, b: &Resolution) -> bool {
    a == b
}
