//! Stage 2: the contract rules. Every rule failure is a `syn::Error` on the
//! tokens the user must change; all failures of one declaration are combined
//! so they surface in a single compile.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, ItemStruct, LitStr, ReturnType, Type};

use crate::parse::{self, Attr, Key, Parsed, Target};
use crate::secret;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Executor {
    Server,
    Client,
    Human,
    Provider,
    Latent,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approval {
    Auto,
    RequiresApproval,
}

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
    pub(crate) form: Form,
}

/// `retention = "..."`, as `aptix::meta::Retention` holds it.
pub(crate) enum Retention {
    Budget,
    KeepLast(u32),
    Turns(u32),
    NeverEvict,
}

/// Reads `keep_last(N)`, `turns(N)` (N from 1 to 10 000) or `never_evict`:
/// the one reader of the spelling (the runtime's `Retention` writes it
/// back with `Display`).
fn parse_retention(text: &str) -> Option<Retention> {
    let text = text.trim();
    if text == "never_evict" {
        return Some(Retention::NeverEvict);
    }
    let count = |rest: &str| -> Option<u32> {
        let inner = rest.strip_prefix('(')?.strip_suffix(')')?.trim();
        inner
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=10_000).contains(n))
    };
    if let Some(rest) = text.strip_prefix("keep_last") {
        count(rest).map(Retention::KeepLast)
    } else if let Some(rest) = text.strip_prefix("turns") {
        count(rest).map(Retention::Turns)
    } else {
        None
    }
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
}

pub(crate) fn check(parsed: Parsed) -> Result<Tool, Failure> {
    let Parsed {
        attr,
        target,
        errors,
    } = parsed;
    let mut errors = Errors(errors);

    let name = check_name(&attr, &mut errors);
    let usage = match &attr.usage {
        None => {
            if attr.surely_missing("usage") {
                errors.0.push(attr.missing_key_error(
                    "missing `usage = \"...\"`: say when the model should call this tool, e.g. `usage = \"Call when the user asks to be greeted.\"`",
                ));
            }
            None
        }
        Some(Key { value, .. }) if value.value().trim().is_empty() => {
            errors.push(
                value.span(),
                "`usage` is empty: say when the model should call this tool",
            );
            None
        }
        Some(Key { value, .. }) => Some(value.value().trim().to_owned()),
    };
    let executor = match &attr.executor {
        // A struct with an `output` and no executor is a schema: latent
        // until an activity is bound to it.
        None if matches!(target, Some(Target::Struct(_))) && attr.output.is_some() => {
            Some(Executor::Latent)
        }
        None => Some(Executor::Server),
        Some(Key { value, .. }) => match value.to_string().as_str() {
            "server" => Some(Executor::Server),
            "client" => Some(Executor::Client),
            "human" => Some(Executor::Human),
            "provider" => Some(Executor::Provider),
            "latent" => Some(Executor::Latent),
            other => {
                errors.push(
                    value.span(),
                    format!(
                        "unknown executor `{other}`; use `server`, `client`, `human`, `provider` or `latent`"
                    ),
                );
                None
            }
        },
    };
    let approval = match &attr.approval {
        None => Some(Approval::Auto),
        Some(Key { value, .. }) => match value.to_string().as_str() {
            "auto" => Some(Approval::Auto),
            "requires_approval" => Some(Approval::RequiresApproval),
            other => {
                errors.push(
                    value.span(),
                    format!("unknown approval `{other}`; use `auto` or `requires_approval`"),
                );
                None
            }
        },
    };
    if let (Some(executor), Some(Approval::RequiresApproval), Some(key)) =
        (executor, approval, &attr.approval)
    {
        let why = match executor {
            Executor::Human => Some(
                "`approval = requires_approval` cannot be used with `executor = human`: a human tool already waits for a person, whose answer decides the call",
            ),
            Executor::Provider => Some(
                "`approval = requires_approval` cannot be used with `executor = provider`: the model provider runs the tool, so there is no call here to hold for approval",
            ),
            _ => None,
        };
        if let Some(why) = why {
            errors.push(key.value.span(), why);
        }
    }
    let redaction = check_redaction(&attr, &mut errors);
    let timeout =
        attr.timeout
            .as_ref()
            .and_then(|key| match parse_duration("timeout", &key.value.value()) {
                Ok(duration) => Some(duration),
                Err(why) => {
                    errors.push(key.value.span(), why);
                    None
                }
            });
    let suspend_timeout = attr.suspend_timeout.as_ref().and_then(|key| {
        if let (Some(executor), Some(approval)) = (executor, approval) {
            let suspends = matches!(executor, Executor::Client | Executor::Human)
                || approval == Approval::RequiresApproval;
            if !suspends {
                let why = match executor {
                    Executor::Provider => "`suspend_timeout` cannot be used with `executor = provider`: the model provider runs the tool, so no call waits here",
                    _ => "`suspend_timeout` has no effect here: a server or latent tool without `approval = requires_approval` never waits for anyone; remove it, or use `timeout` to limit how long the tool runs",
                };
                errors.push(key.value.span(), why);
                return None;
            }
        }
        match parse_duration("suspend_timeout", &key.value.value()) {
            Ok(duration) => Some(duration),
            Err(why) => {
                errors.push(key.value.span(), why);
                None
            }
        }
    });
    let idempotent = match (&attr.idempotent, executor) {
        (Some(key), Some(Executor::Human | Executor::Provider)) => {
            errors.push(
                key.value.span(),
                "`idempotent` only applies to tools whose code runs on this server (`executor = server` or `client`): it allows a call interrupted by a crash to run again with the same tool_call_id",
            );
            false
        }
        (Some(key), _) => key.value.value,
        (None, _) => false,
    };
    let progressive = match &attr.progressive {
        Some(key)
            if key.value.value
                && (!matches!(executor, Some(Executor::Server))
                    || matches!(target, Some(Target::Struct(_)))) =>
        {
            errors.push(
                key.value.span(),
                "`progressive` is for a tool whose code runs here (an async fn, `executor = server`): only running code reports progress and partial results",
            );
            false
        }
        Some(key) => key.value.value,
        None => false,
    };
    if let Some(key) = &attr.partial
        && !progressive
        && attr
            .progressive
            .as_ref()
            .is_none_or(|flag| !flag.value.value)
    {
        errors.push_spanned(
            &key.value,
            "`partial = T` declares the type of a progressive tool's partial results: add `progressive = true`",
        );
    }
    let retries = match &attr.retries {
        None => 1,
        Some(key) => match key.value.base10_parse::<u8>() {
            Ok(retries) if retries <= 10 && matches!(executor, Some(Executor::Server)) => retries,
            Ok(retries) if retries <= 10 => {
                errors.push(
                    key.value.span(),
                    "`retries` bounds how often a tool's code asks the model for another try (`ToolError::retry`); only a tool whose code runs here has any",
                );
                1
            }
            _ => {
                errors.push(
                    key.value.span(),
                    "`retries` is how often the model may try again in one run when the tool asks it to: a whole number from 0 to 10",
                );
                1
            }
        },
    };
    let retention = match &attr.retention {
        None => Retention::Budget,
        Some(key) => match parse_retention(&key.value.value()) {
            Some(_) if matches!(executor, Some(Executor::Provider)) => {
                errors.push(
                    key.value.span(),
                    "`retention` has no effect on `executor = provider`: the provider keeps its tools' results, not the transcript",
                );
                Retention::Budget
            }
            Some(retention) => retention,
            None => {
                errors.push(
                    key.value.span(),
                    format!(
                        "`{}` is no retention: write `keep_last(N)` (only the last N results stay whole in the model's requests), `turns(N)` (a result stays whole for N model turns) or `never_evict`, with N from 1 to 10000",
                        key.value.value()
                    ),
                );
                Retention::Budget
            }
        },
    };
    let title = attr.title.as_ref().and_then(|key| {
        let text = key.value.value().trim().to_owned();
        if text.is_empty() {
            errors.push(
                key.value.span(),
                "`title` is empty: give a short human-readable name, or remove it",
            );
            None
        } else {
            Some(text)
        }
    });
    let activity = attr.activity.as_ref().and_then(|key| {
        let text = key.value.value();
        // Empty declares the tool latent even where an activity of its name
        // is bound (the specification's explicit `_activity: ""`).
        let valid = text.len() <= 64
            && text
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
        if !valid {
            errors.push(
                key.value.span(),
                format!("the activity name `{text}` is invalid: an activity is named like a tool, {NAME_RULE}; or it is empty, to keep the tool latent"),
            );
            return None;
        }
        if let Some(kind) = executor
            && kind != Executor::Latent
        {
            errors.push(
                key.value.span(),
                "`activity` names the activity that computes a latent tool's result; only a latent tool (an arguments struct with `output = Type` and no executor, or `executor = latent`) has one",
            );
            return None;
        }
        Some(text)
    });
    let flag = |key: &Option<Key<syn::LitBool>>| key.as_ref().map(|key| key.value.value);
    let read_only = flag(&attr.read_only);
    let destructive = flag(&attr.destructive);
    let open_world = flag(&attr.open_world);
    if let (Some(true), Some(true), Some(key)) = (read_only, destructive, &attr.destructive) {
        errors.push(
            key.value.span(),
            "`destructive = true` contradicts `read_only = true`: a tool that changes nothing destroys nothing",
        );
    }
    if let (Some(key), Some(Executor::Provider)) = (
        attr.read_only
            .as_ref()
            .or(attr.destructive.as_ref())
            .or(attr.open_world.as_ref()),
        executor,
    ) {
        errors.push(
            key.value.span(),
            "`read_only`, `destructive` and `open_world` describe what a call does here; a provider tool never runs here",
        );
    }

    let mut stub = None;
    let description_unreadable = !attr.surely_missing("description");
    let mut description = attr.description.as_ref().map(|key| {
        let text = key.value.value().trim().to_owned();
        if text.is_empty() {
            errors.push(
                key.value.span(),
                "`description` is empty: say what the tool does",
            );
        }
        text
    });
    let form = match target {
        None => None,
        Some(Target::Other(ident)) => {
            stub = ident.map(|ident| Stub::StructImpl { ident });
            None
        }
        Some(Target::Fn(item)) => {
            let struct_ident = struct_ident_for(&item.sig.ident);
            // A method is inside an `impl` block, where the stub struct
            // would be a second error; the method itself stays valid.
            if item.sig.receiver().is_none() {
                stub = Some(Stub::FnStruct {
                    vis: item.vis.clone(),
                    ident: struct_ident.clone(),
                });
            }
            if description.is_none() {
                description = parse::doc_comment(&item.attrs).map(|(text, _)| text);
                if description.is_none() && !description_unreadable {
                    errors.push(item.sig.ident.span(), missing_description(&item.sig.ident));
                }
            }
            check_fn_output_rules(executor, &attr, &item, &mut errors);
            let form = check_fn(item, struct_ident, &mut errors);
            if let Some(Form::Fn {
                context_partial: Some(partial),
                ..
            }) = &form
                && !progressive
            {
                errors.push_spanned(
                    partial,
                    "`ToolContext<T>` is the context of a progressive tool, whose partial results are `T`: declare `progressive = true` (and `partial = T` unless `T` is the tool's output type), or take `&ToolContext`",
                );
            }
            form
        }
        Some(Target::Struct(item)) => {
            if item.generics.params.is_empty() {
                stub = Some(Stub::StructImpl {
                    ident: item.ident.clone(),
                });
            }
            if description.is_none() {
                description = parse::doc_comment(&item.attrs).map(|(text, _)| text);
                if description.is_none() && !description_unreadable {
                    errors.push(item.ident.span(), missing_description(&item.ident));
                }
            }
            check_struct_output_rules(executor, &attr, &item, &mut errors);
            check_secret_fields(&attr, &item, &mut errors);
            check_reserved_fields(&item, &mut errors);
            check_struct(item, &mut errors)
        }
    };

    let mut combined = errors.0.into_iter();
    if let Some(mut first) = combined.next() {
        combined.for_each(|error| first.combine(error));
        return Err(Failure { error: first, stub });
    }
    match (name, usage, description, executor, approval, form) {
        (
            Some(name),
            Some(usage),
            Some(description),
            Some(executor),
            Some(approval),
            Some(form),
        ) => Ok(Tool {
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
            form,
        }),
        // Every `None` above pushed an error; this is unreachable in practice,
        // but a macro must not panic, so report it rather than assume it.
        _ => Err(Failure {
            error: syn::Error::new(
                Span::call_site(),
                "#[agent_tool] could not read this declaration",
            ),
            stub,
        }),
    }
}

fn missing_description(ident: &Ident) -> String {
    format!(
        "tool `{ident}` has no description: add a doc comment saying what it does (`/// Creates a friendly greeting.`) or `description = \"...\"`"
    )
}

const NAME_RULE: &str = "1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`";

fn check_name(attr: &Attr, errors: &mut Errors) -> Option<LitStr> {
    let Some(Key { value, .. }) = &attr.name else {
        if attr.surely_missing("name") {
            errors.0.push(attr.missing_key_error(format!(
                "missing `name = \"...\"`: the name the model calls the tool by, {NAME_RULE}"
            )));
        }
        return None;
    };
    let text = value.value();
    let count = text.chars().count();
    let problem = if text.is_empty() {
        Some(format!("the tool name is empty; use {NAME_RULE}"))
    } else if count > 64 {
        Some(format!(
            "the tool name is {count} characters long; providers accept at most 64 ({NAME_RULE})"
        ))
    } else {
        text.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
            .map(|bad| {
                let shown = match bad {
                    ' ' => "a space".to_owned(),
                    c if c.is_control() => format!("the control character {:?}", c),
                    c => format!("`{c}`"),
                };
                format!("the tool name `{text}` contains {shown}; use {NAME_RULE}")
            })
    };
    match problem {
        Some(problem) => {
            errors.push(value.span(), problem);
            None
        }
        None => Some(value.clone()),
    }
}

fn check_fn_output_rules(
    executor: Option<Executor>,
    attr: &Attr,
    item: &ItemFn,
    errors: &mut Errors,
) {
    match (executor, &attr.output) {
        (Some(Executor::Server), Some(Key { key, value })) => errors.push_spanned(
            quote::quote!(#key #value),
            "`output` is only for client and human tools, whose result comes from outside; a server tool's output is the `T` of its `Result<T, E>`",
        ),
        (Some(kind @ (Executor::Client | Executor::Human)), None) => {
            missing_output(kind, attr, errors);
        }
        (Some(Executor::Provider), _) => errors.push(
            item.sig.fn_token.span(),
            "a provider tool runs at the model provider and has no server function; put #[agent_tool] on its arguments struct instead",
        ),
        (Some(Executor::Latent), _) => {
            let span = attr
                .executor
                .as_ref()
                .map_or(item.sig.fn_token.span(), |key| key.value.span());
            errors.push(
                span,
                "a latent tool has no code of its own, and a function is code: put #[agent_tool(..., output = Type)] on its arguments struct, and bind code to it later with `Activities::bind`",
            );
        }
        _ => {}
    }
}

fn check_struct_output_rules(
    executor: Option<Executor>,
    attr: &Attr,
    item: &ItemStruct,
    errors: &mut Errors,
) {
    match (executor, &attr.executor) {
        (Some(Executor::Server), Some(key)) => errors.push(
            key.value.span(),
            "a struct declares a tool with no code, so `executor = server` has nothing to run: leave `executor` out and declare `output = Type` for a latent tool (the model gives the result, or an activity bound with `Activities::bind` computes it), use `client`, `human` or `provider`, or put #[agent_tool] on an async fn",
        ),
        (Some(Executor::Server), None) if attr.surely_missing("output") => errors.push(
            item.ident.span(),
            "a struct declares a tool with no code: add `output = Type` to make it a latent tool (the model gives the result, or an activity bound with `Activities::bind` computes it), or `executor = client`, `human` or `provider`; for a server tool put #[agent_tool] on an async fn",
        ),
        _ => {}
    }
    if let (Some(kind @ (Executor::Client | Executor::Human | Executor::Latent)), None) =
        (executor, &attr.output)
    {
        missing_output(kind, attr, errors);
    }
}

/// A client or human tool without `output`: reported on `executor = ...`,
/// the choice that makes `output` necessary.
fn missing_output(kind: Executor, attr: &Attr, errors: &mut Errors) {
    if !attr.surely_missing("output") {
        return;
    }
    let message = match kind {
        Executor::Latent => "a latent tool needs `output = Type`: the type of the result the model gives in `_output`, or an activity returns (a type that derives `Serialize`, `Deserialize` and `JsonSchema`)".to_owned(),
        _ => {
            let (tool, who) = match kind {
                Executor::Human => ("human", "the person"),
                _ => ("client", "the client"),
            };
            format!(
                "a {tool} tool needs `output = Type`: the type of the result {who} sends back (a type that derives `Deserialize` and `JsonSchema`)"
            )
        }
    };
    match &attr.executor {
        Some(key) => errors.push(key.value.span(), message),
        None => errors.0.push(attr.missing_key_error(message)),
    }
}

const SIGNATURES: &str = "`async fn name(args: Args) -> Result<T, E>` or `async fn name(args: Args, ctx: &ToolContext) -> Result<T, E>`";

fn check_fn(item: Box<ItemFn>, struct_ident: Ident, errors: &mut Errors) -> Option<Form> {
    let before = errors.0.len();
    let sig = &item.sig;
    if let Some(token) = &sig.constness {
        errors.push(token.span(), "an agent tool function cannot be `const`");
    }
    if let syn::Safety::Unsafe(token) = &sig.safety {
        errors.push(
            token.span(),
            "an agent tool function cannot be `unsafe`: the model decides its arguments",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.push_spanned(abi, "an agent tool function cannot have an `extern` ABI");
    }
    if sig.asyncness.is_none() {
        errors.push(
            sig.fn_token.span(),
            format!("an agent tool function must be `async`: {SIGNATURES}"),
        );
    }
    if !sig.generics.params.is_empty() {
        errors.push_spanned(
            &sig.generics,
            "an agent tool function cannot be generic: its argument and result types define the schema the model sees",
        );
    } else if let Some(where_clause) = &sig.generics.where_clause {
        errors.push_spanned(
            where_clause,
            "an agent tool function cannot have a `where` clause: its argument and result types are fixed",
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.push_spanned(variadic, "an agent tool function cannot be variadic");
    }
    // A method is reported once, on `self`; its other parameters are then
    // judged as if it were the free function it should be.
    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => errors.push_spanned(
                receiver,
                format!(
                    "#[agent_tool] does not go on a method: move `{}` out of the `impl` block as a free function, {SIGNATURES}",
                    sig.ident
                ),
            ),
            FnArg::Typed(typed) => params.push(typed),
        }
    }
    let mut args = None;
    let mut with_context = false;
    let mut context_partial = None;
    match params.first().map(|typed| &*typed.ty) {
        None if sig.receiver().is_none() => errors.push(
            sig.paren_token.span.join(),
            format!(
                "an agent tool function takes its arguments as one struct: {SIGNATURES}; a tool without parameters takes an empty struct (`#[derive(Deserialize, JsonSchema)] struct NoArgs {{}}`)"
            ),
        ),
        None => {}
        Some(ty @ Type::Reference(_)) => errors.push_spanned(
            ty,
            "the arguments are taken by value (`args: MyArgs`, not `&MyArgs`): they are deserialized from the model's JSON for each call",
        ),
        Some(ty @ (Type::ImplTrait(_) | Type::Infer(_))) => errors.push_spanned(
            ty,
            "the arguments must be a named type that derives `Deserialize` and `JsonSchema`",
        ),
        Some(ty) => args = Some(Box::new(ty.clone())),
    }
    if let Some(second) = params.get(1) {
        if let Some(partial) = tool_context_ref(&second.ty) {
            with_context = true;
            context_partial = partial.map(Box::new);
        } else {
            errors.push_spanned(
                &second.ty,
                format!("the second parameter, when present, must be `&ToolContext`: {SIGNATURES}"),
            );
        }
    }
    if let (Some(first_extra), Some(last_extra)) = (params.get(2), params.last()) {
        let extra: TokenStream = quote::quote!(#first_extra #last_extra);
        errors.push_spanned(
            extra,
            format!(
                "an agent tool function takes at most two parameters, the arguments struct and `&ToolContext`: {SIGNATURES}; put further inputs in the arguments struct"
            ),
        );
    }
    let ret = match &sig.output {
        ReturnType::Default => {
            errors.push_spanned(
                name_to_close_paren(sig),
                format!(
                    "an agent tool function returns `Result<T, E>`; add a return type: {SIGNATURES}"
                ),
            );
            None
        }
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(_) => Some(ty.clone()),
            other => {
                errors.push_spanned(
                    other,
                    format!("an agent tool function returns `Result<T, E>`, where `T: Serialize + JsonSchema` and `E: Into<ToolError>`: {SIGNATURES}"),
                );
                None
            }
        },
    };
    if errors.0.len() != before {
        return None;
    }
    Some(Form::Fn {
        args: args?,
        ret: ret?,
        with_context,
        context_partial,
        struct_ident,
        item,
    })
}

/// `greet(args: Args)`: where a missing return type belongs.
fn name_to_close_paren(sig: &syn::Signature) -> TokenStream {
    let mut parens =
        proc_macro2::Group::new(proc_macro2::Delimiter::Parenthesis, TokenStream::new());
    parens.set_span(sig.paren_token.span.join());
    let mut tokens = sig.ident.to_token_stream();
    tokens.extend([proc_macro2::TokenTree::Group(parens)]);
    tokens
}

/// `&ToolContext` is `Some(None)`, `&ToolContext<T>` is `Some(Some(T))`,
/// anything else `None`.
fn tool_context_ref(ty: &Type) -> Option<Option<Type>> {
    let Type::Reference(reference) = ty else {
        return None;
    };
    if reference.mutability.is_some() {
        return None;
    }
    let Type::Path(path) = &*reference.elem else {
        return None;
    };
    let segment = path.path.segments.last()?;
    if segment.ident != "ToolContext" {
        return None;
    }
    match &segment.arguments {
        syn::PathArguments::None => Some(None),
        syn::PathArguments::AngleBracketed(generic) if generic.args.len() == 1 => {
            match generic.args.first()? {
                syn::GenericArgument::Type(partial) => Some(Some(partial.clone())),
                _ => None,
            }
        }
        _ => None,
    }
}

fn check_struct(item: Box<ItemStruct>, errors: &mut Errors) -> Option<Form> {
    let before = errors.0.len();
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        errors.push(
            item.generics.span(),
            "a tool's arguments struct cannot be generic: its fields define the schema the model sees",
        );
    }
    match &item.fields {
        syn::Fields::Named(_) => {}
        syn::Fields::Unnamed(fields) => errors.push(
            fields.span(),
            "a tuple struct is a JSON array (or its single field's value), but tool arguments are always a JSON object: use named fields",
        ),
        syn::Fields::Unit => errors.push(
            item.ident.span(),
            "a unit struct is JSON `null`, but tool arguments are always a JSON object: for a tool without parameters write `struct Name {}`",
        ),
    }
    (errors.0.len() == before).then_some(Form::Struct { item })
}

/// `hello_world` → `HelloWorldTool`.
pub(crate) fn struct_ident_for(function: &Ident) -> Ident {
    let raw = function.to_string();
    let raw = raw.strip_prefix("r#").unwrap_or(&raw);
    let mut pascal = String::with_capacity(raw.len() + 4);
    for part in raw.split('_').filter(|part| !part.is_empty()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            pascal.extend(first.to_uppercase());
            pascal.push_str(chars.as_str());
        }
    }
    format_ident!("{}Tool", pascal, span = function.span())
}

/// `"30s"`, `"500ms"`, `"2m"`, `"1h"`, `"1m30s"` → (seconds, nanoseconds).
pub(crate) fn parse_duration(key: &str, text: &str) -> Result<(u64, u32), String> {
    let usage = "write the time limit as a number and a unit: \"500ms\", \"30s\", \"2m\", \"1h\" or combined, \"1m30s\"";
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("`{key}` is empty; {usage}"));
    }
    let mut total_ms: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("`{key} = \"{text}\"` is not a duration; {usage}"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{key} = \"{text}\"` is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(format!("`{key} = \"{text}\"` has no valid unit; {usage}")),
        };
        rest = &rest[unit_len..];
        total_ms = number
            .checked_mul(factor)
            .and_then(|ms| ms.checked_add(total_ms))
            .ok_or_else(|| format!("`{key} = \"{text}\"` is too large"))?;
    }
    if total_ms == 0 {
        return Err(format!(
            "`{key} = \"{text}\"` is zero; a call needs time to run"
        ));
    }
    let secs =
        u64::try_from(total_ms / 1000).map_err(|_| format!("`{key} = \"{text}\"` is too large"))?;
    let nanos = u32::try_from((total_ms % 1000) * 1_000_000).unwrap_or(0);
    Ok((secs, nanos))
}

/// `redact` and `log_fields`: one of them at most, with valid pointers.
fn check_redaction(attr: &Attr, errors: &mut Errors) -> Redaction {
    for key in [&attr.redact, &attr.log_fields].into_iter().flatten() {
        for pointer in &key.value {
            if let Err(why) = check_pointer(&pointer.value()) {
                errors.push(pointer.span(), why);
            }
        }
    }
    match (&attr.redact, &attr.log_fields) {
        (Some(_), Some(log_fields)) => {
            errors.push(
                log_fields.key.span(),
                "`redact` and `log_fields` cannot be used together: `redact` lists the values to hide (everything else is shown), `log_fields` the values to show (everything else is hidden); keep one",
            );
            Redaction::Undeclared
        }
        (Some(redact), None) => Redaction::Deny(redact.value.clone()),
        (None, Some(log_fields)) => Redaction::Allow(log_fields.value.clone()),
        (None, None) => Redaction::Undeclared,
    }
}

/// A struct-form tool may not show a field whose name looks secret: its
/// value would be shown in events. Declaring neither `redact` nor
/// `log_fields` shows every field; `redact = [...]` shows those at or under
/// none of its pointers (one pointer does not vouch for the others);
/// `redact = []` says nothing is secret. (The function form's arguments
/// type is declared elsewhere, out of the macro's sight; the catalog checks
/// it, and nested and output fields of both forms, when it is built.)
fn check_secret_fields(attr: &Attr, item: &ItemStruct, errors: &mut Errors) {
    if attr.log_fields.is_some() || !attr.surely_missing("log_fields") {
        return;
    }
    let redacted: Option<Vec<String>> = match &attr.redact {
        Some(redact) if redact.value.is_empty() => return,
        Some(redact) => Some(redact.value.iter().map(LitStr::value).collect()),
        None if !attr.surely_missing("redact") => return,
        None => None,
    };
    let syn::Fields::Named(fields) = &item.fields else {
        return;
    };
    let rename_all = serde_value(&item.attrs, "rename_all");
    for field in &fields.named {
        let Some(ident) = &field.ident else { continue };
        if is_bool(&field.ty)
            || has_serde_flag(&field.attrs, &["flatten", "skip", "skip_deserializing"])
        {
            continue;
        }
        let rust_name = ident.to_string();
        let rust_name = rust_name
            .strip_prefix("r#")
            .unwrap_or(&rust_name)
            .to_owned();
        let json_name = serde_value(&field.attrs, "rename")
            .unwrap_or_else(|| rename(&rust_name, rename_all.as_deref()));
        if secret::looks_secret(&rust_name) || secret::looks_secret(&json_name) {
            let pointer = format!("/{}", json_name.replace('~', "~0").replace('/', "~1"));
            let message = match &redacted {
                // A top-level field is covered by its own pointer, or by
                // the whole value's (`""`).
                Some(pointers) if pointers.iter().any(|p| p.is_empty() || *p == pointer) => {
                    continue;
                }
                Some(pointers) => format!(
                    "field `{rust_name}` looks like a secret, and this tool's `redact = {pointers:?}` does not cover it, so its value would be shown in agent events: add \"{pointer}\" to `redact` to hide it, or list the only values that may be shown with `log_fields = [...]` instead"
                ),
                None => format!(
                    "field `{rust_name}` looks like a secret, and this tool declares neither `redact` nor `log_fields`, so its value would be shown in agent events: add `redact = [\"{pointer}\"]` to hide it, `log_fields = [...]` to list the only values that may be shown, or `redact = []` if nothing here is secret"
                ),
            };
            errors.push(ident.span(), message);
        }
    }
}

/// A parameter's JSON name may not start with `_`: the prefix belongs to
/// the meta fields of a call (`_tool`, `_activity`, `_reasoningForCall`,
/// `_output`), which are taken out of the arguments before validation.
/// (The function form's arguments type is out of the macro's sight; the
/// catalog checks it when it is built.)
fn check_reserved_fields(item: &ItemStruct, errors: &mut Errors) {
    let syn::Fields::Named(fields) = &item.fields else {
        return;
    };
    let rename_all = serde_value(&item.attrs, "rename_all");
    for field in &fields.named {
        let Some(ident) = &field.ident else { continue };
        if has_serde_flag(&field.attrs, &["flatten", "skip", "skip_deserializing"]) {
            continue;
        }
        let rust_name = ident.to_string();
        let rust_name = rust_name
            .strip_prefix("r#")
            .unwrap_or(&rust_name)
            .to_owned();
        let json_name = serde_value(&field.attrs, "rename")
            .unwrap_or_else(|| rename(&rust_name, rename_all.as_deref()));
        if json_name.starts_with('_') {
            let meta = ["_tool", "_activity", "_reasoningForCall", "_output"]
                .contains(&json_name.as_str());
            let what = if meta {
                format!("`{json_name}` is a meta field of every call")
            } else {
                "names starting with `_` are reserved for the meta fields `_tool`, `_activity`, `_reasoningForCall` and `_output`".to_owned()
            };
            // On the `#[serde(rename)]` that names it, when there is one.
            let renamed = field.attrs.iter().find(|attr| {
                attr.path().is_ident("serde")
                    && serde_value(std::slice::from_ref(attr), "rename").is_some()
            });
            let at = match renamed {
                Some(attr) => attr.to_token_stream(),
                None => ident.to_token_stream(),
            };
            errors.push_spanned(
                at,
                format!(
                    "parameter `{json_name}` cannot be declared: {what}; give it a name without the leading `_` (e.g. `#[serde(rename = \"{}\")]`)",
                    json_name.trim_start_matches('_')
                ),
            );
        }
    }
}

fn is_bool(ty: &Type) -> bool {
    matches!(ty, Type::Path(path) if path.qself.is_none() && path.path.is_ident("bool"))
}

/// `#[serde(key = "value")]` among `attrs`, e.g. `rename`.
fn serde_value(attrs: &[syn::Attribute], key: &str) -> Option<String> {
    let mut found = None;
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(key) {
                if let Ok(value) = meta.value().and_then(|value| value.parse::<LitStr>()) {
                    found = Some(value.value());
                }
            } else if meta.input.peek(syn::Token![=]) {
                let _ = meta.value().and_then(|value| value.parse::<syn::Expr>());
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|nested| {
                    if nested.input.peek(syn::Token![=]) {
                        let _ = nested.value().and_then(|value| value.parse::<syn::Expr>());
                    }
                    Ok(())
                });
            }
            Ok(())
        });
    }
    found
}

/// Whether `#[serde(flag)]` is among `attrs` for any of `flags`.
fn has_serde_flag(attrs: &[syn::Attribute], flags: &[&str]) -> bool {
    let mut found = false;
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if flags.iter().any(|flag| meta.path.is_ident(flag)) {
                found = true;
            }
            if meta.input.peek(syn::Token![=]) {
                let _ = meta.value().and_then(|value| value.parse::<syn::Expr>());
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|nested| {
                    if nested.input.peek(syn::Token![=]) {
                        let _ = nested.value().and_then(|value| value.parse::<syn::Expr>());
                    }
                    Ok(())
                });
            }
            Ok(())
        });
    }
    found
}

/// A snake_case field name as serde's `rename_all` spells it.
fn rename(name: &str, rule: Option<&str>) -> String {
    let parts: Vec<&str> = name.split('_').filter(|part| !part.is_empty()).collect();
    let capitalized = |part: &&str| {
        let mut chars = part.chars();
        chars.next().map_or_else(String::new, |first| {
            first.to_uppercase().chain(chars).collect()
        })
    };
    match rule {
        Some("lowercase") => name.to_lowercase(),
        Some("UPPERCASE") => name.to_uppercase(),
        Some("PascalCase") => parts.iter().map(capitalized).collect(),
        Some("camelCase") => parts
            .iter()
            .enumerate()
            .map(|(i, part)| {
                if i == 0 {
                    (*part).to_owned()
                } else {
                    capitalized(part)
                }
            })
            .collect(),
        Some("SCREAMING_SNAKE_CASE") => name.to_uppercase(),
        Some("kebab-case") => name.replace('_', "-"),
        Some("SCREAMING-KEBAB-CASE") => name.replace('_', "-").to_uppercase(),
        _ => name.to_owned(),
    }
}

/// A JSON pointer (RFC 6901) into the arguments or the result: `/a/0/b`,
/// with `~0` and `~1` as the only escapes.
fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.starts_with('/') {
        return Err(format!(
            "`{pointer}` is not a JSON pointer: it starts with `/`, as in `/password` or `/card/number`"
        ));
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(format!(
                "`{pointer}` is not a JSON pointer: `~` must be followed by `0` (for `~`) or `1` (for `/`)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Retention, parse_duration, parse_retention};

    #[test]
    fn retention_reads_its_three_spellings() {
        let read = |text: &str| match parse_retention(text) {
            Some(Retention::KeepLast(n)) => Some(format!("keep_last({n})")),
            Some(Retention::Turns(n)) => Some(format!("turns({n})")),
            Some(Retention::NeverEvict) => Some("never_evict".to_owned()),
            Some(Retention::Budget) | None => None,
        };
        for (text, read_as) in [
            ("keep_last(3)", "keep_last(3)"),
            ("turns(10)", "turns(10)"),
            (" turns( 1 ) ", "turns(1)"),
            ("never_evict", "never_evict"),
        ] {
            assert_eq!(read(text).as_deref(), Some(read_as), "{text}");
        }
        for wrong in [
            "keep_last(0)",
            "turns(10001)",
            "keep_last",
            "last(3)",
            "turns(-1)",
            "",
        ] {
            assert_eq!(read(wrong), None, "{wrong}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("timeout", "500ms"), Ok((0, 500_000_000)));
        assert_eq!(parse_duration("timeout", "30s"), Ok((30, 0)));
        assert_eq!(parse_duration("timeout", "1m30s"), Ok((90, 0)));
        assert_eq!(parse_duration("timeout", "2h"), Ok((7200, 0)));
        for bad in ["", "0s", "30", "30sec", "soon", "s30", "1m 30s"] {
            assert!(
                parse_duration("timeout", bad).is_err(),
                "{bad:?} was accepted"
            );
        }
    }
}
