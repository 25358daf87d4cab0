//! Who computes a schema-first tool's result: an activity bound by the
//! tool's name, or the model itself (latent execution).
//!
//! A tool declared as a schema (`#[agent_tool(..., output = T)]` on an
//! arguments struct, `executor = latent`) has no code of its own. The
//! application binds code to it by name, per environment, in an
//! [`Activities`] set given to the catalog builder; a test binds a double
//! instead, and the declaration never changes. A latent tool with no
//! activity is offered to the model with a required `_output` member: the
//! model works the result out in its own call, and the server checks it
//! (`Latent`). Either way the arguments are validated against the tool's
//! schema and the result against its output schema.
//!
//! Resolution, per tool, as the schema-first specification orders it: an
//! activity the tool names explicitly (`activity = "..."`, the
//! specification's `_activity`) beats one bound to the tool's own name
//! (the same-name convention); without either, the tool's own code (a
//! function tool, a run-time tool's closure) runs, and a latent tool runs
//! latent. A tool that names an activity needs it bound. An activity no
//! tool takes, or one for a tool whose final behaviour is not on this
//! server, is a catalog problem.

use std::any::TypeId;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::error::ToolError;
use crate::meta::SourceLocation;
use crate::schema::meta_fields::OUTPUT;
use crate::tool::{Code, Tool, ToolArgs, ToolOutput, payload_of, serialize_output};
use crate::validate::{Taken, take_members, violations_rejection, with_violations};

use super::erased::{ErasedTool, Produced, RunFailure, RunFuture, RunResult};

/// Code bound to tools by name: the activities of one environment.
///
/// ```ignore
/// let activities = Activities::new()
///     .bind::<SendEmail>(|args, _ctx| async move { mailer.send(args).await });
/// let catalog = aptix::tools![SendEmail, Sentiment].activities(activities).build()?;
/// ```
#[derive(Clone, Default)]
pub struct Activities {
    bound: BTreeMap<Cow<'static, str>, Bound>,
}

/// One activity: its code, and the tool type it was written for.
#[derive(Clone)]
pub(crate) struct Bound {
    pub(crate) code: Arc<dyn ErasedTool>,
    /// The declared tool whose types the code takes; `None` for an
    /// activity over JSON, which fits any tool of its name.
    pub(crate) tool: Option<(TypeId, &'static str)>,
    pub(crate) source: SourceLocation,
}

impl fmt::Debug for Activities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Activities")
            .field("names", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl Activities {
    /// No activities.
    pub fn new() -> Activities {
        Activities::default()
    }

    /// Binds `run` to the tool `T` (under the activity name `T` declares,
    /// if it names one): a call of `T` validates its arguments,
    /// parses them into `T`'s arguments type, runs `run`, and checks what it
    /// returns against `T`'s output schema. Arguments and output of another
    /// type do not compile. Binding the same name again replaces the
    /// activity, so an environment can start from a shared set and swap one.
    #[track_caller]
    pub fn bind<T, F, Fut>(self, run: F) -> Activities
    where
        T: Tool,
        T::Output: ToolOutput,
        F: Fn(T::Args, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T::Output, ToolError>> + Send + 'static,
    {
        let code = Arc::new(TypedActivity::<T, F> {
            run,
            tool: PhantomData,
        });
        // A tool that names its activity (`activity = "..."`) is bound under
        // that name.
        self.insert(
            Cow::Borrowed(
                T::META
                    .activity
                    .filter(|name| !name.is_empty())
                    .unwrap_or(T::NAME),
            ),
            Bound {
                code,
                tool: Some((TypeId::of::<T>(), std::any::type_name::<T>())),
                source: SourceLocation::caller(),
            },
        )
    }

    /// Binds `run` to the tool called `name`, over JSON: for a tool made at
    /// run time, or code that serves several tools. The arguments it gets
    /// were validated against the tool's schema; what it returns is
    /// checked against the tool's output schema.
    #[track_caller]
    pub fn bind_json<F, Fut>(self, name: impl Into<String>, run: F) -> Activities
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.insert(
            Cow::Owned(name.into()),
            Bound {
                code: Arc::new(JsonActivity(run)),
                tool: None,
                source: SourceLocation::caller(),
            },
        )
    }

    /// These activities and `other`'s; where both bind a name, `other`'s
    /// wins (a test's doubles over production's activities).
    pub fn merge(mut self, other: Activities) -> Activities {
        self.bound.extend(other.bound);
        self
    }

    /// This set without the activity of `name`: that tool runs as declared
    /// (latent, or its own code).
    pub fn unbind(mut self, name: &str) -> Activities {
        self.bound.remove(name);
        self
    }

    /// The names activities are bound to, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.bound.keys().map(|name| name.as_ref())
    }

    /// Whether no activity is bound.
    pub fn is_empty(&self) -> bool {
        self.bound.is_empty()
    }

    fn insert(mut self, name: Cow<'static, str>, bound: Bound) -> Activities {
        self.bound.insert(name, bound);
        self
    }

    pub(crate) fn bound(&self) -> impl Iterator<Item = (&str, &Bound)> + '_ {
        self.bound
            .iter()
            .map(|(name, bound)| (name.as_ref(), bound))
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Bound> {
        self.bound.get(name)
    }
}

/// An activity written for the tool `T`, over its Rust types.
struct TypedActivity<T, F> {
    run: F,
    tool: PhantomData<fn() -> T>,
}

impl<T, F, Fut> ErasedTool for TypedActivity<T, F>
where
    T: Tool,
    T::Output: ToolOutput,
    F: Fn(T::Args, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T::Output, ToolError>> + Send + 'static,
{
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> RunFuture<'a> {
        Box::pin(async move {
            let args = definition
                .validator()
                .parse::<<T::Args as ToolArgs>::Serde>(raw)
                .map_err(RunFailure::Rejected)?;
            let output = (self.run)(args.into(), ctx.clone())
                .await
                .map_err(RunFailure::Tool)?;
            let (value, attachments) = output.into_parts();
            let json = checked_result(definition, &value, ctx)?;
            Ok(Produced::new(json, attachments))
        })
    }

    fn validate_only(&self, definition: &ToolDefinition, raw: &str) -> RunResult {
        (Code::arguments::<T>().validate)(definition, raw)
    }

    fn runs_function(&self) -> bool {
        true
    }
}

/// An activity over JSON.
struct JsonActivity<F>(F);

impl<F, Fut> ErasedTool for JsonActivity<F>
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
        Box::pin(async move {
            let args = definition
                .validator()
                .parse::<Value>(raw)
                .map_err(RunFailure::Rejected)?;
            let output = (self.0)(args, ctx.clone())
                .await
                .map_err(RunFailure::Tool)?;
            checked_result(definition, &output, ctx).map(Produced::from)
        })
    }

    fn validate_only(&self, definition: &ToolDefinition, raw: &str) -> RunResult {
        let args = definition
            .validator()
            .parse::<Value>(raw)
            .map_err(RunFailure::Rejected)?;
        payload_of(&args)
    }

    fn runs_function(&self) -> bool {
        true
    }
}

/// An activity's result, checked against the tool's output schema. A
/// result that does not fit is the activity's fault, not the model's: an
/// internal error, which the model sees without the details.
fn checked_result<O: Serialize>(
    definition: &ToolDefinition,
    output: &O,
    ctx: &ToolContext,
) -> RunResult {
    let value = serde_json::to_value(output)
        .map_err(|error| RunFailure::Tool(ToolError::internal(error)))?;
    let violations = definition
        .output_violations(&value)
        .map_err(|error| RunFailure::Tool(ToolError::internal_message(error)))?;
    if let Some((path, problem)) = violations.first() {
        let at = if path.is_empty() { "/" } else { path };
        return Err(RunFailure::Tool(ToolError::internal_message(format!(
            "the activity of `{}` returned a result that does not match the tool's output schema: at {at}: {problem}",
            definition.name()
        ))));
    }
    serialize_output(&value, ctx)
}

/// A latent tool with no activity: the model gives the result in the
/// call's `_output` member. A call's arguments (everything but `_output`)
/// are validated against the tool's schema and `_output` against its
/// output schema; problems of both are listed in one rejection, which the
/// model gets back like any refusal of its arguments. `_output` is then
/// the result.
pub(crate) struct Latent {
    /// The typed check of the arguments of a declared tool.
    pub(crate) arguments: Option<Code>,
}

impl Latent {
    /// The checked call: the arguments as validated, and the output.
    fn checked(
        &self,
        definition: &ToolDefinition,
        raw: &str,
    ) -> Result<(Value, Value), RunFailure> {
        let Taken { rest, mut taken } =
            take_members(raw, &[OUTPUT]).map_err(RunFailure::Rejected)?;
        let output = taken.pop().flatten();
        let rest = Value::Object(rest);
        let output_problems = match &output {
            None => vec![(
                String::new(),
                format!(
                    "missing `{OUTPUT}`: no code computes this tool's result; work it out and give it in `{OUTPUT}`"
                ),
            )],
            Some(output) => definition
                .output_violations(output)
                .map_err(|error| RunFailure::Tool(ToolError::internal_message(error)))?
                .into_iter()
                .map(|(path, problem)| (format!("/{OUTPUT}{path}"), problem))
                .collect(),
        };
        let text = rest.to_string();
        let arguments = match self.arguments {
            Some(code) => (code.validate)(definition, &text).map(|_| ()),
            None => definition
                .validator()
                .parse::<serde::de::IgnoredAny>(&text)
                .map(|_| ())
                .map_err(RunFailure::Rejected),
        };
        match (arguments, output) {
            (Ok(()), Some(output)) if output_problems.is_empty() => Ok((rest, output)),
            (Ok(()), _) => Err(RunFailure::Rejected(violations_rejection(output_problems))),
            (Err(RunFailure::Rejected(rejection)), _) => Err(RunFailure::Rejected(
                with_violations(rejection, output_problems),
            )),
            (Err(other), _) => Err(other),
        }
    }
}

impl ErasedTool for Latent {
    fn run<'a>(
        &'a self,
        definition: &'a ToolDefinition,
        raw: &'a str,
        ctx: &'a ToolContext,
    ) -> RunFuture<'a> {
        let result = self
            .checked(definition, raw)
            .and_then(|(_, output)| serialize_output(&output, ctx))
            .map(Produced::from);
        Box::pin(std::future::ready(result))
    }

    /// What an approver sees: the arguments and the result the model gave.
    fn validate_only(&self, definition: &ToolDefinition, raw: &str) -> RunResult {
        let (mut arguments, output) = self.checked(definition, raw)?;
        if let Value::Object(members) = &mut arguments {
            members.insert(OUTPUT.to_owned(), output);
        }
        payload_of(&arguments)
    }

    fn runs_function(&self) -> bool {
        false
    }

    fn asks_output(&self) -> bool {
        true
    }
}
