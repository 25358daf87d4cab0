//! The two forms a tool takes: an async function, whose code runs here, or
//! a struct of arguments, whose result comes from elsewhere. Each form has
//! its own signature rules and its own way of getting an output type.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, ItemStruct, ReturnType, Type};

use super::{Errors, Executor, Form, Stub};
use crate::parse::{self, Attr, Key, Target};

const SIGNATURES: &str = "`async fn name(args: Args) -> Result<T, E>` or `async fn name(args: Args, ctx: &ToolContext) -> Result<T, E>`";

/// The type the user's code names, so that a failed declaration does not
/// also break every use of the tool. None where a stub would be a new error:
/// a method sits in an `impl` block, and a generic struct's impl would have
/// to invent its parameters.
pub(super) fn stub(target: Option<&Target>) -> Option<Stub> {
    match target? {
        Target::Fn(item) if item.sig.receiver().is_none() => Some(Stub::FnStruct {
            vis: item.vis.clone(),
            ident: struct_ident_for(&item.sig.ident),
        }),
        Target::Struct(item) if item.generics.params.is_empty() => Some(Stub::StructImpl {
            ident: item.ident.clone(),
        }),
        Target::Other(ident) => ident.clone().map(|ident| Stub::StructImpl { ident }),
        Target::Fn(_) | Target::Struct(_) => None,
    }
}

/// `description = "..."` when given, else the item's doc comment: the model
/// reads one of them to know what the tool does.
pub(super) fn doc_description(
    description: Option<String>,
    attr: &Attr,
    target: Option<&Target>,
    errors: &mut Errors,
) -> Option<String> {
    if description.is_some() {
        return description;
    }
    let (attrs, ident) = match target? {
        Target::Fn(item) => (&item.attrs, &item.sig.ident),
        Target::Struct(item) => (&item.attrs, &item.ident),
        Target::Other(_) => return None,
    };
    let doc = parse::doc_comment(attrs).map(|(text, _)| text);
    if doc.is_none() && attr.surely_missing("description") {
        errors.push(ident.span(), missing_description(ident));
    }
    doc
}

fn missing_description(ident: &Ident) -> String {
    format!(
        "tool `{ident}` has no description: add a doc comment saying what it does (`/// Creates a friendly greeting.`) or `description = \"...\"`"
    )
}

/// A function's output is the `T` of its `Result<T, E>`, so `output` is
/// for the executors whose result comes from outside; and a provider or
/// latent tool has no code here for a function to be.
pub(super) fn fn_output(
    attr: &Attr,
    executor: Option<Executor>,
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

/// A struct has no code to run, so its result comes from outside and needs
/// `output = Type`.
pub(super) fn struct_output(
    attr: &Attr,
    executor: Option<Executor>,
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
        None => errors.push_error(attr.missing_key_error(message)),
    }
}

/// The signature the runtime can call: an async, non-generic free function
/// of one arguments struct, optionally `&ToolContext`, returning a `Result`.
pub(super) fn function(item: Box<ItemFn>, errors: &mut Errors) -> Option<Form> {
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
        struct_ident: struct_ident_for(&item.sig.ident),
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
/// anything else `None`. Recognized by name: the macro cannot resolve paths.
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

/// `state = [...]` names what the function reads from its context, so it
/// takes one.
pub(super) fn state_needs_context(attr: &Attr, form: Option<&Form>, errors: &mut Errors) {
    if let (
        Some(key),
        Some(Form::Fn {
            with_context: false,
            ..
        }),
    ) = (&attr.state, form)
    {
        errors.push(
            key.key.span(),
            "`state` names what the tool reads from its context, and this function takes none: add `ctx: &ToolContext` as its second parameter, or leave `state` out",
        );
    }
}

/// `ToolContext<T>` reports partial results of type `T`, which only a
/// progressive tool has.
pub(super) fn context_needs_progressive(
    form: Option<&Form>,
    progressive: bool,
    errors: &mut Errors,
) {
    if let Some(Form::Fn {
        context_partial: Some(partial),
        ..
    }) = form
        && !progressive
    {
        errors.push_spanned(
            partial,
            "`ToolContext<T>` is the context of a progressive tool, whose partial results are `T`: declare `progressive = true` (and `partial = T` unless `T` is the tool's output type), or take `&ToolContext`",
        );
    }
}

/// The arguments are always a JSON object with a fixed schema: a
/// non-generic struct with named fields.
pub(super) fn arguments_struct(item: Box<ItemStruct>, errors: &mut Errors) -> Option<Form> {
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
fn struct_ident_for(function: &Ident) -> Ident {
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
