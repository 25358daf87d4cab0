//! The hooks applied to one call: repair before anything else, then the
//! `before_call` chain, then, once it ran, the `after_call` chain.
//!
//! With no hook the loop never comes here, so a run without hooks pays
//! nothing; with hooks the arguments are validated once more than the
//! executor validates them, because a hook sees validated arguments.

use serde_json::Value;

use super::Agent;
use super::hook::{AfterCall, BeforeCall, HookCall, Invalid, InvalidCall, Repair};
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::envelope::{Envelope, EnvelopeIds, JsonText};
use crate::error::ErrorCode;

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
pub(super) struct After {
    /// What the model sees instead of the envelope.
    pub(super) model_text: Option<String>,
    /// A hook that ends the run after this turn, and why.
    pub(super) halt: Option<(String, String)>,
}

impl Agent {
    pub(crate) fn has_hooks(&self) -> bool {
        !self.inner.hooks.is_empty()
    }

    /// Repairs the call if it needs it and a hook can, then asks every
    /// `before_call` in order.
    pub(crate) async fn before_run(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        context: &ToolContext,
        ids: &(dyn Fn() -> EnvelopeIds + Sync),
    ) -> Before {
        let catalog = self.inner.executor.catalog();
        let mut name = name.to_owned();
        let mut arguments = arguments.to_owned();
        if catalog.get(&name).is_none() {
            let known: Vec<&str> = catalog.names().collect();
            for hook in &self.inner.hooks {
                let call = InvalidCall {
                    id,
                    name: &name,
                    arguments: &arguments,
                    invalid: Invalid::UnknownTool { known: &known },
                };
                match hook.on_invalid_call(call).await {
                    Repair::Rename(renamed) if catalog.get(&renamed).is_some() => {
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
    pub(super) async fn after_run(
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
