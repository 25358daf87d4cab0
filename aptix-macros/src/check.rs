//! Stage 2: the contract rules. Every rule failure is a `syn::Error` on the
//! tokens the user must change; all failures of one declaration are combined
//! so they surface in a single compile.

use proc_macro2::Span;
use quote::format_ident;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, ItemStruct, LitStr, ReturnType, Type};

use crate::parse::{self, Key, Parsed, Target};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Executor {
    Server,
    Client,
    Human,
    Provider,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    Auto,
    RequiresApproval,
}

/// A declaration that satisfies every rule the macro can check.
pub struct Tool {
    pub name: LitStr,
    pub usage: String,
    pub description: String,
    pub executor: Executor,
    pub approval: Approval,
    pub output: Option<Type>,
    pub timeout: Option<(u64, u32)>,
    pub form: Form,
}

pub enum Form {
    /// An async function: `args` and `ret` are its parameter and return types.
    Fn {
        item: Box<ItemFn>,
        struct_ident: Ident,
        args: Box<Type>,
        with_context: bool,
        ret: Box<Type>,
    },
    /// A struct of arguments, with no server code.
    Struct { item: Box<ItemStruct> },
}

/// What fallback needs: the combined errors and, when known, the name of the
/// type the user expects to exist.
pub struct Failure {
    pub error: syn::Error,
    pub stub: Option<Stub>,
}

pub enum Stub {
    /// Emit `vis struct Ident;` with a placeholder `Tool` impl.
    FnStruct { vis: syn::Visibility, ident: Ident },
    /// Emit a placeholder `Tool` impl for the user's struct.
    StructImpl { ident: Ident },
}

struct Errors(Vec<syn::Error>);

impl Errors {
    fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.0.push(syn::Error::new(span, message));
    }
}

pub fn check(parsed: Parsed) -> Result<Tool, Failure> {
    let Parsed {
        attr,
        target,
        errors,
    } = parsed;
    let mut errors = Errors(errors);

    let name = check_name(attr.name, &mut errors);
    let usage = match attr.usage {
        None => {
            errors.push(
                Span::call_site(),
                "missing `usage = \"...\"`: say when the model should call this tool, e.g. usage = \"Call when the user asks to be greeted.\"",
            );
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
        None => Some(Executor::Server),
        Some(Key { value, .. }) => {
            match value.to_string().as_str() {
                "server" => Some(Executor::Server),
                "client" => Some(Executor::Client),
                "human" => Some(Executor::Human),
                "provider" => Some(Executor::Provider),
                other => {
                    errors.push(
                    value.span(),
                    format!("unknown executor `{other}`; use `server`, `client`, `human` or `provider`"),
                );
                    None
                }
            }
        }
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
    let timeout = attr
        .timeout
        .as_ref()
        .and_then(|key| match parse_duration(&key.value.value()) {
            Ok(duration) => Some(duration),
            Err(why) => {
                errors.push(key.value.span(), why);
                None
            }
        });

    let mut stub = None;
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
        Some(Target::Fn(item)) => {
            let struct_ident = struct_ident_for(&item.sig.ident);
            stub = Some(Stub::FnStruct {
                vis: item.vis.clone(),
                ident: struct_ident.clone(),
            });
            if description.is_none() {
                description = parse::doc_comment(&item.attrs).map(|(text, _)| text);
                if description.is_none() {
                    errors.push(item.sig.ident.span(), missing_description(&item.sig.ident));
                }
            }
            check_fn_output_rules(executor, &attr.output, &item, &mut errors);
            check_fn(item, struct_ident, &mut errors)
        }
        Some(Target::Struct(item)) => {
            if item.generics.params.is_empty() {
                stub = Some(Stub::StructImpl {
                    ident: item.ident.clone(),
                });
            }
            if description.is_none() {
                description = parse::doc_comment(&item.attrs).map(|(text, _)| text);
                if description.is_none() {
                    errors.push(item.ident.span(), missing_description(&item.ident));
                }
            }
            check_struct_output_rules(executor, &attr.executor, &attr.output, &item, &mut errors);
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

fn check_name(name: Option<Key<LitStr>>, errors: &mut Errors) -> Option<LitStr> {
    let Some(Key { value, .. }) = name else {
        errors.push(
            Span::call_site(),
            format!("missing `name = \"...\"`: the name the model calls, {NAME_RULE}"),
        );
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
        None => Some(value),
    }
}

fn check_fn_output_rules(
    executor: Option<Executor>,
    output: &Option<Key<Type>>,
    item: &ItemFn,
    errors: &mut Errors,
) {
    match (executor, output) {
        (Some(Executor::Server), Some(key)) => errors.push(
            key.key.span(),
            "`output` is only for client and human tools, whose result comes from outside; a server tool's output is the `T` of its `Result<T, E>`",
        ),
        (Some(kind @ (Executor::Client | Executor::Human)), None) => errors.push(
            Span::call_site(),
            format!(
                "missing `output = Type`: a {} tool must declare the type the {} sends back as the result",
                if kind == Executor::Client { "client" } else { "human" },
                if kind == Executor::Client { "client" } else { "person" },
            ),
        ),
        (Some(Executor::Provider), _) => errors.push(
            item.sig.fn_token.span(),
            "a provider tool runs at the model provider and has no server function; put #[agent_tool] on its arguments struct instead",
        ),
        _ => {}
    }
}

fn check_struct_output_rules(
    executor: Option<Executor>,
    executor_key: &Option<Key<Ident>>,
    output: &Option<Key<Type>>,
    item: &ItemStruct,
    errors: &mut Errors,
) {
    match (executor, output) {
        (Some(Executor::Server), _) => {
            let span = executor_key
                .as_ref()
                .map_or(item.ident.span(), |key| key.value.span());
            errors.push(
                span,
                "a struct declares a tool with no server code, so it needs `executor = client`, `human` or `provider`; for a server tool put #[agent_tool] on an async fn",
            );
        }
        (Some(kind @ (Executor::Client | Executor::Human)), None) => errors.push(
            Span::call_site(),
            format!(
                "missing `output = Type`: a {} tool must declare the type the {} sends back as the result",
                if kind == Executor::Client { "client" } else { "human" },
                if kind == Executor::Client { "client" } else { "person" },
            ),
        ),
        _ => {}
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
        errors.push(
            abi.span(),
            "an agent tool function cannot have an `extern` ABI",
        );
    }
    if sig.asyncness.is_none() {
        errors.push(
            sig.fn_token.span(),
            format!("an agent tool function must be `async`: {SIGNATURES}"),
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(
            sig.generics.span(),
            "an agent tool function cannot be generic: its argument and result types define the schema the model sees",
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(variadic.span(), "an agent tool function cannot be variadic");
    }
    let mut args = None;
    let mut with_context = false;
    for (index, input) in sig.inputs.iter().enumerate() {
        match (index, input) {
            (_, FnArg::Receiver(receiver)) => errors.push(
                receiver.self_token.span(),
                format!("an agent tool is a free function, not a method; {SIGNATURES}"),
            ),
            (0, FnArg::Typed(typed)) => match &*typed.ty {
                Type::Reference(reference) => errors.push(
                    reference.span(),
                    "the arguments are taken by value (`args: MyArgs`): they are deserialized from the model's JSON",
                ),
                Type::ImplTrait(_) | Type::Infer(_) => errors.push(
                    typed.ty.span(),
                    "the arguments must be a named type that derives `Deserialize` and `JsonSchema`",
                ),
                ty => args = Some(Box::new(ty.clone())),
            },
            (1, FnArg::Typed(typed)) => {
                if is_tool_context_ref(&typed.ty) {
                    with_context = true;
                } else {
                    errors.push(
                        typed.ty.span(),
                        format!("the second parameter must be `&ToolContext`; {SIGNATURES}"),
                    );
                }
            }
            (_, FnArg::Typed(typed)) => errors.push(
                typed.span(),
                format!("too many parameters; {SIGNATURES}"),
            ),
        }
    }
    if sig.inputs.is_empty() {
        errors.push(
            sig.ident.span(),
            format!("an agent tool function takes its arguments as a struct; {SIGNATURES} (a tool without parameters takes an empty struct: `struct NoArgs {{}}`)"),
        );
    }
    let ret = match &sig.output {
        ReturnType::Default => {
            errors.push(
                sig.ident.span(),
                format!("an agent tool function returns `Result<T, E>`; {SIGNATURES}"),
            );
            None
        }
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(_) => Some(ty.clone()),
            other => {
                errors.push(
                    other.span(),
                    format!("an agent tool function returns `Result<T, E>`, where `T: Serialize + JsonSchema` and `E: Into<ToolError>`; {SIGNATURES}"),
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
        struct_ident,
        item,
    })
}

fn is_tool_context_ref(ty: &Type) -> bool {
    let Type::Reference(reference) = ty else {
        return false;
    };
    if reference.mutability.is_some() {
        return false;
    }
    match &*reference.elem {
        Type::Path(path) => {
            path.path.segments.last().is_some_and(|segment| {
                segment.ident == "ToolContext" && segment.arguments.is_empty()
            })
        }
        _ => false,
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
pub fn struct_ident_for(function: &Ident) -> Ident {
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
pub fn parse_duration(text: &str) -> Result<(u64, u32), String> {
    let usage = "write the time limit as a number and a unit: \"500ms\", \"30s\", \"2m\", \"1h\" or combined, \"1m30s\"";
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("`timeout` is empty; {usage}"));
    }
    let mut total_ms: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("`timeout = \"{text}\"` is not a duration; {usage}"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("`timeout = \"{text}\"` is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(format!("`timeout = \"{text}\"` has no valid unit; {usage}")),
        };
        rest = &rest[unit_len..];
        total_ms = number
            .checked_mul(factor)
            .and_then(|ms| ms.checked_add(total_ms))
            .ok_or_else(|| format!("`timeout = \"{text}\"` is too large"))?;
    }
    if total_ms == 0 {
        return Err(format!(
            "`timeout = \"{text}\"` is zero; a call needs time to run"
        ));
    }
    let secs = u64::try_from(total_ms / 1000)
        .map_err(|_| format!("`timeout = \"{text}\"` is too large"))?;
    let nanos = u32::try_from((total_ms % 1000) * 1_000_000).unwrap_or(0);
    Ok((secs, nanos))
}
