//! A tool's server code with its types erased: what a catalog entry holds
//! and the executor calls, whether the code came from `#[agent_tool]` (a
//! [`Code`]) or from a closure given at run time.

use std::future::Future;

use serde_json::Value;

use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::error::ToolError;
use crate::tool::{Code, payload_of, serialize_output, validated_value};

pub(crate) use crate::tool::{BoxFuture, Produced, RunFailure, RunOutput, RunResult};

/// The future of one run of a tool's server code: boxed, which is sound for
/// every tool shape, including a body that borrows its own locals across an
/// `.await`.
pub(crate) type RunFuture<'a> = BoxFuture<'a, RunOutput>;

/// A tool's server code, whatever made it.
pub(crate) trait ErasedTool: Send + Sync + 'static {
    /// Validates `raw` against `definition` and runs the server step: the
    /// function for a tool with one, validation alone otherwise (the
    /// payload is then the validated arguments).
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> RunFuture<'a>;

    /// Validates `raw` without running anything; the validated arguments
    /// are the payload shown to whoever approves the call. By default the
    /// arguments checked against the definition's JSON Schema, as JSON:
    /// what every tool made at run time shows.
    fn validate_only(&self, definition: &ToolDefinition, raw: &str) -> RunResult {
        payload_of(&validated_value(definition, raw)?)
    }

    /// Whether `run` runs code of the tool's own, rather than validation alone.
    fn runs_function(&self) -> bool;

    /// Whether the model gives the result in the call's `_output` member
    /// (a latent tool without an activity).
    fn asks_output(&self) -> bool {
        false
    }
}

impl ErasedTool for Code {
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> RunFuture<'a> {
        (self.run)(definition, raw, ctx)
    }

    fn validate_only(&self, definition: &ToolDefinition, raw: &str) -> RunResult {
        (self.validate)(definition, raw)
    }

    fn runs_function(&self) -> bool {
        self.runs_function
    }
}

/// The server code of a tool made at run time: an async closure over the
/// validated arguments as JSON.
pub(crate) struct ClosureTool<F>(pub(crate) F);

impl<F, Fut> ErasedTool for ClosureTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> RunFuture<'a> {
        // Everything, the closure's own call included, happens inside the
        // future, where the executor catches a panic.
        Box::pin(async move {
            let args = validated_value(definition, raw)?;
            let output = (self.0)(args, ctx.clone())
                .await
                .map_err(RunFailure::Tool)?;
            serialize_output(&output, ctx).map(Produced::from)
        })
    }

    fn runs_function(&self) -> bool {
        true
    }
}

/// A tool made at run time without code (a client, human or provider tool):
/// the validated arguments are the payload.
pub(crate) struct Declared;

impl ErasedTool for Declared {
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        _ctx: &'a ToolContext,
    ) -> RunFuture<'a> {
        Box::pin(std::future::ready(
            self.validate_only(definition, raw).map(Produced::from),
        ))
    }

    fn runs_function(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
