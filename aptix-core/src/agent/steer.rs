//! The hooks and the approval policy applied to one call: repair before
//! anything else, then the `before_call` chain, then the approval policy,
//! then, once it ran, the `after_call` chain.
//!
//! With no hook and no policy the loop never comes here, so such a run
//! pays nothing; otherwise the arguments are validated once more than the
//! executor validates them, because hooks and policies see validated
//! arguments.

use serde_json::Value;

use super::Agent;
use super::approval::{ApprovalCall, ApprovalDecision};
use super::hook::{AfterCall, BeforeCall, HookCall, Invalid, InvalidCall, Repair};
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::envelope::{Envelope, EnvelopeIds, JsonText};
use crate::error::ErrorCode;
use crate::meta::{Approval, Gate};
use crate::transcript::Message;

/// What the hooks decided before a call runs.
pub(crate) enum Before {
    /// Run `name` with `arguments`; `validated` when they fit (a call that
    /// still does not fit runs, and the executor says why to the model).
    Run {
        name: String,
        arguments: String,
        validated: Option<Value>,
    },
    /// Do not run it: this is its result.
    Done(Envelope),
    /// Do not run it, and end the run.
    Halted {
        by: String,
        message: String,
        envelope: Envelope,
    },
}

/// What the hooks decided once a call finished.
#[derive(Default)]
pub(crate) struct After {
    /// What the model sees instead of the envelope.
    pub(crate) model_text: Option<String>,
    /// A hook that ends the run after this turn, and why.
    pub(crate) halt: Option<(String, String)>,
}

impl Agent {
    pub(crate) fn has_hooks(&self) -> bool {
        !self.inner.hooks.is_empty()
    }

    pub(crate) fn has_approval_policy(&self) -> bool {
        self.inner.approval_policy.is_some()
    }

    /// Asks the approval policy about a call: `validated` are its
    /// arguments when the hooks validated them already. The gate it goes
    /// through: [`Gate::Declared`] (also with no policy, or for a call that
    /// does not fit its tool, which never runs anyway) or [`Gate::Asked`]
    /// (a person must approve it first, though the tool does not declare
    /// it); or, refused, its result.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn gate(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        validated: Option<&Value>,
        context: &ToolContext,
        transcript: &[Message],
        ids: &(dyn Fn() -> EnvelopeIds + Sync),
    ) -> Result<Gate, Envelope> {
        let Some(policy) = &self.inner.approval_policy else {
            return Ok(Gate::Declared);
        };
        let Some(definition) = self.inner.executor.catalog().get(name) else {
            return Ok(Gate::Declared);
        };
        let parsed;
        let arguments = match validated {
            Some(value) => value,
            None => match definition.validator().parse::<Value>(arguments) {
                Ok(value) => {
                    parsed = value;
                    &parsed
                }
                // It never runs: the executor tells the model why.
                Err(_) => return Ok(Gate::Declared),
            },
        };
        let call = ApprovalCall {
            call: HookCall {
                id,
                definition,
                arguments,
                context,
            },
            conversation_id: context.conversation_id().unwrap_or_default(),
            transcript,
        };
        match policy.decide(call).await {
            ApprovalDecision::Auto => Ok(Gate::Declared),
            ApprovalDecision::Ask if definition.approval() == Approval::RequiresApproval => {
                Ok(Gate::Declared)
            }
            ApprovalDecision::Ask => {
                tracing::info!(
                    policy = policy.name(),
                    tool = name,
                    tool_call_id = id,
                    "the approval policy asks for an approval"
                );
                Ok(Gate::Asked)
            }
            ApprovalDecision::Deny(message) => {
                tracing::info!(
                    policy = policy.name(),
                    tool = name,
                    tool_call_id = id,
                    "the approval policy denied the call"
                );
                Err(Envelope::error(ids(), ErrorCode::Denied, message))
            }
        }
    }

    /// Repairs the call if it needs it and a hook can, then asks every
    /// `before_call` in order. `offered` is what the step offered when
    /// `prepare_step` narrowed it: a call may only be renamed to one of
    /// those tools.
    pub(crate) async fn before_run(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        context: &ToolContext,
        offered: Option<&Catalog>,
        ids: &(dyn Fn() -> EnvelopeIds + Sync),
    ) -> Before {
        let catalog = self.inner.executor.catalog();
        let may_call = |tool: &str| {
            catalog.get(tool).is_some() && offered.is_none_or(|offered| offered.get(tool).is_some())
        };
        let mut name = name.to_owned();
        let mut arguments = arguments.to_owned();
        if catalog.get(&name).is_none() {
            let known: Vec<&str> = offered.unwrap_or(catalog).names().collect();
            for hook in &self.inner.hooks {
                let call = InvalidCall {
                    id,
                    name: &name,
                    arguments: &arguments,
                    invalid: Invalid::UnknownTool { known: &known },
                };
                match hook.on_invalid_call(call).await {
                    Repair::Rename(renamed) if may_call(&renamed) => {
                        tracing::info!(hook = hook.name(), from = %name, to = %renamed, "a hook renamed the call's tool");
                        name = renamed;
                        break;
                    }
                    Repair::Arguments(text) => arguments = text,
                    Repair::Rename(_) | Repair::Return => {}
                }
            }
        }
        let Some(definition) = catalog.get(&name) else {
            return Before::Run {
                name,
                arguments,
                validated: None,
            };
        };
        let mut validated = definition.validator().parse::<Value>(&arguments);
        if let Err(rejection) = &validated {
            let problem = rejection.message.clone();
            for hook in &self.inner.hooks {
                let call = InvalidCall {
                    id,
                    name: &name,
                    arguments: &arguments,
                    invalid: Invalid::Arguments {
                        definition,
                        problem: &problem,
                    },
                };
                if let Repair::Arguments(text) = hook.on_invalid_call(call).await {
                    tracing::info!(hook = hook.name(), "a hook replaced the call's arguments");
                    arguments = text;
                    validated = definition.validator().parse::<Value>(&arguments);
                    break;
                }
            }
        }
        let Ok(mut value) = validated else {
            return Before::Run {
                name,
                arguments,
                validated: None,
            };
        };
        for hook in &self.inner.hooks {
            let call = HookCall {
                id,
                definition,
                arguments: &value,
                context,
            };
            match hook.before_call(call).await {
                BeforeCall::Continue => {}
                BeforeCall::Rewrite(rewritten) => {
                    let text = rewritten.to_string();
                    match definition.validator().parse::<Value>(&text) {
                        Ok(checked) => {
                            arguments = text;
                            value = checked;
                        }
                        // The problem quotes values, which may be secret: not logged.
                        Err(_) => {
                            tracing::error!(
                                hook = hook.name(),
                                tool = definition.name(),
                                "a hook rewrote the arguments into ones that do not fit the schema"
                            );
                            return Before::Done(Envelope::error(
                                ids(),
                                ErrorCode::Internal,
                                crate::error::INTERNAL_MESSAGE,
                            ));
                        }
                    }
                }
                BeforeCall::Answer(result) => {
                    return Before::Done(answer(definition, hook.name(), result, ids()));
                }
                BeforeCall::Deny(message) => {
                    return Before::Done(Envelope::error(ids(), ErrorCode::Denied, message));
                }
                BeforeCall::Halt(message) => {
                    return Before::Halted {
                        by: hook.name().to_owned(),
                        envelope: Envelope::error(ids(), ErrorCode::Denied, message.clone()),
                        message,
                    };
                }
            }
        }
        Before::Run {
            name,
            arguments,
            validated: Some(value),
        }
    }

    /// Asks every `after_call` in order what the model sees of `envelope`.
    pub(crate) async fn after_run(
        &self,
        id: &str,
        definition: &ToolDefinition,
        arguments: &Value,
        context: &ToolContext,
        envelope: Value,
    ) -> After {
        let mut after = After::default();
        let mut shown = envelope;
        for hook in &self.inner.hooks {
            let call = HookCall {
                id,
                definition,
                arguments,
                context,
            };
            match hook.after_call(call, &shown).await {
                AfterCall::Keep => {}
                AfterCall::Replace(text) => {
                    shown = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
                    after.model_text = Some(text);
                }
                AfterCall::Halt(message) => {
                    after.halt = Some((hook.name().to_owned(), message));
                    break;
                }
            }
        }
        after
    }
}

/// The result a hook answered with, if it fits the tool's output.
fn answer(definition: &ToolDefinition, hook: &str, result: Value, ids: EnvelopeIds) -> Envelope {
    // The problem quotes values, which may be secret: not logged.
    if definition.check_output(&result).is_err() {
        tracing::error!(
            hook,
            tool = definition.name(),
            "a hook answered with a result that does not fit the tool's output"
        );
        return Envelope::error(ids, ErrorCode::Internal, crate::error::INTERNAL_MESSAGE);
    }
    match JsonText::from_serialize(&result) {
        Ok(text) => Envelope::ok(ids, text),
        Err(_) => Envelope::error(ids, ErrorCode::Internal, crate::error::INTERNAL_MESSAGE),
    }
}
