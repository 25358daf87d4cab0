//! Stage 2: the contract rules. Every rule failure is a `syn::Error` on the
//! tokens the user must change; all failures of one declaration are combined
//! so they surface in a single compile.
//!
//! `check` is the list of rules, in the order their errors are reported;
//! each rule lives with its concern: the attribute's keys in [`keys`], the
//! two forms a tool takes in [`form`], and what is said about the arguments'
//! fields in [`fields`] (as serde_derive's `internals/check.rs`).

mod fields;
mod form;
mod keys;

use proc_macro2::Span;
use syn::{Ident, ItemFn, ItemStruct, LitStr, Type};

pub(crate) use crate::parse::{Approval, Executor, Retention};
use crate::parse::{Parsed, Target};

/// A declaration that satisfies every rule the macro can check.
pub(crate) struct Tool {
    pub(crate) name: LitStr,
    pub(crate) usage: String,
    pub(crate) description: String,
    pub(crate) executor: Executor,
    pub(crate) approval: Approval,
    pub(crate) output: Option<Type>,
    pub(crate) timeout: Option<(u64, u32)>,
    pub(crate) redaction: Redaction,
    pub(crate) suspend_timeout: Option<(u64, u32)>,
    pub(crate) idempotent: bool,
    pub(crate) progressive: bool,
    pub(crate) retries: u8,
    pub(crate) retention: Retention,
    pub(crate) partial: Option<Type>,
    pub(crate) title: Option<String>,
    pub(crate) activity: Option<String>,
    pub(crate) read_only: Option<bool>,
    pub(crate) destructive: Option<bool>,
    pub(crate) open_world: Option<bool>,
    /// `state = [...]`: the types its code reads from its context.
    pub(crate) state: Vec<Type>,
    pub(crate) form: Form,
}

/// `redact = [...]`, `log_fields = [...]`, or neither.
pub(crate) enum Redaction {
    Undeclared,
    Deny(Vec<LitStr>),
    Allow(Vec<LitStr>),
}

pub(crate) enum Form {
    /// An async function: `args` and `ret` are its parameter and return types.
    Fn {
        item: Box<ItemFn>,
        struct_ident: Ident,
        args: Box<Type>,
        with_context: bool,
        /// `T` of `ctx: &ToolContext<T>`: the partial results it reports.
        context_partial: Option<Box<Type>>,
        ret: Box<Type>,
    },
    /// A struct of arguments, with no server code.
    Struct { item: Box<ItemStruct> },
}

/// What fallback needs: the combined errors and, when known, the name of the
/// type the user expects to exist.
pub(crate) struct Failure {
    pub(crate) error: syn::Error,
    pub(crate) stub: Option<Stub>,
}

pub(crate) enum Stub {
    /// Emit `vis struct Ident;` with a placeholder `Tool` impl.
    FnStruct { vis: syn::Visibility, ident: Ident },
    /// Emit a placeholder `Tool` impl for the user's struct (or enum).
    StructImpl { ident: Ident },
}

/// The errors of one declaration, in the order the user will read them.
struct Errors(Vec<syn::Error>);

impl Errors {
    /// An error on one token.
    fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.0.push(syn::Error::new(span, message));
    }

    /// An error on all of `tokens` (a whole type or parameter, not just its
    /// first token).
    fn push_spanned(&mut self, tokens: impl quote::ToTokens, message: impl std::fmt::Display) {
        self.0.push(syn::Error::new_spanned(tokens, message));
    }

    /// An error made elsewhere (by parse, or on a missing key), kept in turn.
    fn push_error(&mut self, error: syn::Error) {
        self.0.push(error);
    }

    /// The value that was read, or `None` with its error kept in turn.
    fn keep<T>(&mut self, read: syn::Result<T>) -> Option<T> {
        read.map_err(|error| self.push_error(error)).ok()
    }

    /// The tool when nothing failed; otherwise every error as one, so that
    /// all of them surface in a single compile.
    fn finish(&mut self, tool: Option<Tool>, stub: Option<Stub>) -> Result<Tool, Failure> {
        let mut combined = self.0.drain(..);
        if let Some(mut first) = combined.next() {
            combined.for_each(|error| first.combine(error));
            return Err(Failure { error: first, stub });
        }
        // No error and no tool cannot happen (every rule that leaves a part
        // unread says why), but a macro must not panic, so report it rather
        // than assume it.
        tool.ok_or_else(|| Failure {
            error: syn::Error::new(
                Span::call_site(),
                "#[agent_tool] could not read this declaration",
            ),
            stub,
        })
    }
}

/// Every rule, in the order its errors are reported.
pub(crate) fn check(parsed: Parsed) -> Result<Tool, Failure> {
    let Parsed {
        attr,
        target,
        errors,
    } = parsed;
    let errors = &mut Errors(errors);
    let is_struct = matches!(target, Some(Target::Struct(_)));

    let name = keys::name(&attr, errors);
    let usage = keys::usage(&attr, errors);
    let executor = keys::executor(&attr, is_struct, errors);
    let approval = keys::approval(&attr, errors);
    keys::approval_fits_executor(&attr, executor, approval, errors);
    let redaction = fields::redaction(&attr, errors);
    let timeout = keys::timeout(&attr, errors);
    let suspend_timeout = keys::suspend_timeout(&attr, executor, approval, errors);
    let idempotent = keys::idempotent(&attr, executor, errors);
    let progressive = keys::progressive(&attr, executor, is_struct, errors);
    keys::partial_needs_progressive(&attr, progressive, errors);
    let retries = keys::retries(&attr, executor, errors);
    let retention = keys::retention(&attr, executor, errors);
    let title = keys::title(&attr, errors);
    let activity = keys::activity(&attr, executor, errors);
    let (read_only, destructive, open_world) = keys::annotations(&attr, executor, errors);
    let state = keys::state(&attr, executor, is_struct, errors);
    let description = keys::description(&attr, errors);

    let stub = form::stub(target.as_ref());
    let description = form::doc_description(description, &attr, target.as_ref(), errors);
    let form = match target {
        Some(Target::Fn(item)) => {
            form::fn_output(&attr, executor, &item, errors);
            let form = form::function(item, errors);
            form::context_needs_progressive(form.as_ref(), progressive, errors);
            form::state_needs_context(&attr, form.as_ref(), errors);
            form
        }
        Some(Target::Struct(item)) => {
            form::struct_output(&attr, executor, &item, errors);
            fields::secret_fields(&attr, &item, errors);
            fields::reserved_fields(&item, errors);
            form::arguments_struct(item, errors)
        }
        Some(Target::Other(_)) | None => None,
    };

    let tool = match (name, usage, description, executor, approval, form) {
        (
            Some(name),
            Some(usage),
            Some(description),
            Some(executor),
            Some(approval),
            Some(form),
        ) => Some(Tool {
            name,
            usage,
            description,
            executor,
            approval,
            output: attr.output.map(|key| key.value),
            timeout,
            redaction,
            suspend_timeout,
            idempotent,
            progressive,
            retries,
            retention,
            partial: attr.partial.map(|key| key.value),
            title,
            activity,
            read_only,
            destructive,
            open_world,
            state,
            form,
        }),
        _ => None,
    };
    errors.finish(tool, stub)
}
