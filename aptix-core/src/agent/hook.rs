//! Hooks: code of the application that sees every call of a run before and
//! after it runs, and may steer it (rewrite, answer, deny, halt the run) or
//! repair a call the model got wrong.
//!
//! A hook is a port the loop calls ([`ToolHook`]), added with
//! [`AgentBuilder::hook`](super::AgentBuilder::hook); several compose in
//! the order they were added. The loop imports no hook and a hook needs
//! nothing of the loop but the values it is handed.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::context::ToolContext;
use crate::definition::ToolDefinition;

/// The future a hook answers with.
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A call as a hook sees it: its arguments already validated against the
/// tool's schema.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct HookCall<'a> {
    /// The call's id.
    pub id: &'a str,
    /// The tool.
    pub definition: &'a ToolDefinition,
    /// The validated arguments (after the rewrites of earlier hooks).
    pub arguments: &'a Value,
    /// The call's context: conversation, session, state.
    pub context: &'a ToolContext,
}

/// What to do with a call before it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeCall {
    /// Run it (or ask the next hook).
    Continue,
    /// Run it with these arguments instead; they are validated again, and
    /// the next hook sees them. Arguments that do not fit the schema are
    /// the hook's fault: the call gets an `internal` error.
    Rewrite(Value),
    /// Do not run it: this is its result, checked against the tool's output
    /// schema (a result that does not fit is an `internal` error).
    Answer(Value),
    /// Do not run it: the model gets a `denied` result with this message.
    Deny(String),
    /// Do not run it, and end the run: `DoneReason::Halted`. The call gets a
    /// `denied` result with the message, so the transcript stays whole.
    Halt(String),
}

/// What the model sees of a call's result.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterCall {
    /// The result as it is (or as the previous hook made it).
    Keep,
    /// This text instead, in the transcript and the model's requests. The
    /// result event and a durable run's stored record keep the real result.
    Replace(String),
    /// Keep the result, and end the run after this turn: `DoneReason::Halted`.
    Halt(String),
}

/// Why a call cannot run as the model made it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Invalid<'a> {
    /// No tool has the name the model gave.
    UnknownTool {
        /// The names the model may call.
        known: &'a [&'a str],
    },
    /// The arguments are not JSON, or do not fit the tool's schema.
    Arguments {
        /// The tool.
        definition: &'a ToolDefinition,
        /// What is wrong, as the model would be told.
        problem: &'a str,
    },
}

/// A call that cannot run as made.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct InvalidCall<'a> {
    /// The call's id.
    pub id: &'a str,
    /// The tool name the model gave.
    pub name: &'a str,
    /// The argument text the model gave.
    pub arguments: &'a str,
    /// What is wrong.
    pub invalid: Invalid<'a>,
}

/// How to repair a call that cannot run as made.
#[derive(Debug, Clone, PartialEq)]
pub enum Repair {
    /// Leave it: the model gets the error and may correct itself (or the
    /// next hook repairs it).
    Return,
    /// Call this tool instead (an unknown name the application recognizes,
    /// say a misspelling). A name the catalog does not hold either is
    /// returned as before.
    Rename(String),
    /// Use this argument text instead; it is validated again.
    Arguments(String),
}

/// Code that sees every call of a run. Every method has a default that
/// lets the call through, so a hook writes only what it needs.
pub trait ToolHook: Send + Sync + 'static {
    /// The hook's name, in logs and in `DoneReason::Halted { by }`.
    fn name(&self) -> &str;

    /// Before a call runs, with its validated arguments.
    fn before_call<'a>(&'a self, call: HookCall<'a>) -> HookFuture<'a, BeforeCall> {
        let _ = call;
        Box::pin(std::future::ready(BeforeCall::Continue))
    }

    /// After a call finished, with its envelope (`{"ok": ..}`); not for a
    /// call that suspends (its result comes later, from elsewhere).
    fn after_call<'a>(
        &'a self,
        call: HookCall<'a>,
        envelope: &'a Value,
    ) -> HookFuture<'a, AfterCall> {
        let _ = (call, envelope);
        Box::pin(std::future::ready(AfterCall::Keep))
    }

    /// A call with an unknown tool name or arguments that do not fit.
    fn on_invalid_call<'a>(&'a self, call: InvalidCall<'a>) -> HookFuture<'a, Repair> {
        let _ = call;
        Box::pin(std::future::ready(Repair::Return))
    }
}
