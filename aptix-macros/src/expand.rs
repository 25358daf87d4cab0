//! Stage 3: code generation for a declaration that passed every check.
//!
//! Generated code implements traits of `aptix-core`; it contains no
//! behaviour of its own, and no `unsafe` code. Each tool is also linked into
//! `Catalog::linked()`, through a macro of `aptix-core` (`link_tool!`). It
//! lives in `const _: () = { ... };` so it adds no names to the user's
//! module, and it reaches the runtime only through `::aptix::__private`, so
//! users depend on `aptix` alone.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{GenericArgument, Ident, PathArguments, Type};

use crate::check::{Approval, Executor, Form, Redaction, Retention, Tool};

pub(crate) fn expand(tool: &Tool) -> TokenStream {
    let rt = runtime(Span::call_site());
    let name = &tool.name;
    let usage = &tool.usage;
    let description = &tool.description;
    let executor = match tool.executor {
        Executor::Server => quote!(#rt::ExecutorKind::Server),
        Executor::Client => quote!(#rt::ExecutorKind::Client),
        Executor::Human => quote!(#rt::ExecutorKind::Human),
        Executor::Provider => quote!(#rt::ExecutorKind::Provider),
        Executor::Latent => quote!(#rt::ExecutorKind::Latent),
    };
    let approval = match tool.approval {
        Approval::Auto => quote!(#rt::Approval::Auto),
        Approval::RequiresApproval => quote!(#rt::Approval::RequiresApproval),
    };
    let duration = |limit: Option<(u64, u32)>| match limit {
        Some((secs, nanos)) => quote!(#rt::Option::Some(#rt::Duration::new(#secs, #nanos))),
        None => quote!(#rt::Option::None),
    };
    let timeout = duration(tool.timeout);
    let suspend_timeout = duration(tool.suspend_timeout);
    let idempotent = tool.idempotent;
    let progressive = tool.progressive;
    let retries = tool.retries;
    let retention = match tool.retention {
        Retention::Budget => quote!(#rt::Retention::Budget),
        Retention::KeepLast(n) => quote!(#rt::Retention::KeepLast(#n)),
        Retention::Turns(n) => quote!(#rt::Retention::Turns(#n)),
        Retention::NeverEvict => quote!(#rt::Retention::NeverEvict),
    };
    let title = match &tool.title {
        Some(title) => quote!(#rt::Option::Some(#title)),
        None => quote!(#rt::Option::None),
    };
    let activity = match &tool.activity {
        Some(activity) => quote!(#rt::Option::Some(#activity)),
        None => quote!(#rt::Option::None),
    };
    // Absent keys keep the defaults, which are MCP's.
    let read_only = tool.read_only.map(|value| quote!(read_only: #value,));
    let destructive = tool.destructive.map(|value| quote!(destructive: #value,));
    let open_world = tool.open_world.map(|value| quote!(open_world: #value,));
    let redaction = match &tool.redaction {
        Redaction::Undeclared => quote!(#rt::Redaction::Undeclared),
        Redaction::Deny(pointers) => quote!(#rt::Redaction::Deny(&[#(#pointers),*])),
        Redaction::Allow(pointers) => quote!(#rt::Redaction::Allow(&[#(#pointers),*])),
    };
    // Each type spanned where it was written: a type that cannot be state
    // (not `Send`, `Sync` and `'static`) is reported there.
    let state = (!tool.state.is_empty()).then(|| {
        let types = tool.state.iter().map(|ty| {
            let rt = runtime(ty.span());
            quote_spanned!(ty.span()=> #rt::StateType::of::<#ty>())
        });
        quote!(state: &[#(#types),*],)
    });
    let unique = unique_name_guard(tool);
    // One constant per tool: everything else of the definition is built
    // from it by library code shared by every tool.
    let meta = quote! {
        const META: #rt::ToolMeta = #rt::ToolMeta {
            executor: #executor,
            approval: #approval,
            timeout: #timeout,
            suspend_timeout: #suspend_timeout,
            title: #title,
            activity: #activity,
            progressive: #progressive,
            retries: #retries,
            retention: #retention,
            annotations: #rt::Annotations {
                idempotent: #idempotent,
                #read_only
                #destructive
                #open_world
                ..#rt::Annotations::DEFAULT
            },
            redaction: #redaction,
            #state
            ..#rt::ToolMeta::new(
                #name,
                #usage,
                #description,
                #rt::SourceLocation {
                    file: ::core::file!(),
                    line: ::core::line!(),
                    module_path: ::core::module_path!(),
                },
            )
        };
    };
    // What a client or person sends back is parsed into the declared type.
    let resolution = tool.output.as_ref().map(|output| {
        let rt = runtime(output.span());
        quote_spanned! {output.span()=>
            const _: () = #rt::assert_resolution::<#output>();
        }
    });

    match &tool.form {
        Form::Fn {
            item,
            struct_ident,
            args,
            with_context,
            context_partial,
            ret,
        } => {
            let function = &item.sig.ident;
            let vis = &item.vis;
            // Each generated use of a user's type carries that type's span,
            // so a missing derive or a wrong return type is reported where it
            // was written, and once: rustc merges identical errors at one
            // span, not errors about one type at different spans.
            //
            // `body`: the call of the user's function and the conversion of
            // what it returns, spanned on `span`.
            // A progressive tool's context reports partial results of the
            // declared `partial` type, else of its output type; a context
            // of another type is a mismatch reported on the user's `T`.
            let partial = match (&tool.partial, result_parts(ret)) {
                (Some(partial), _) => partial.to_token_stream(),
                (None, Some((ok, _))) => ok.to_token_stream(),
                (None, None) => {
                    let rt = runtime(ret.span());
                    quote_spanned!(ret.span()=> <#ret as #rt::IntoToolResult>::Ok)
                }
            };
            let body = |span: Span| {
                let rt = runtime(span);
                let call = if let Some(user) = context_partial {
                    let typed = quote_spanned!(user.span()=> &#rt::ToolContext::for_partials::<#partial>(ctx));
                    quote_spanned!(span=> #function(args, #typed).await)
                } else if *with_context {
                    quote_spanned!(span=> #function(args, ctx).await)
                } else {
                    quote_spanned!(span=> { let _ = ctx; #function(args).await })
                };
                quote_spanned! {span=>
                    let returned: #ret = #call;
                    <#ret as #rt::IntoToolResult>::into_tool_result(returned)
                }
            };
            let (returned, call_fn) = match result_parts(ret) {
                // `Result<T, E>` written out: `T` is used as written, so a
                // `T` without `Serialize`/`JsonSchema` is reported on `T`;
                // `Result<T, E>: IntoToolResult` is needed only in the body,
                // spanned on `E`, so an `E` that does not convert into
                // `ToolError` is reported on `E`; and the signature is
                // spanned on the function's name, where "the future is not
                // `Send`" belongs. (The runtime paths carry the spans too,
                // or a path would span from the attribute to the user's
                // token and the error would be reported twice.)
                Some((ok, err)) => {
                    let sig = function.span();
                    let rt = runtime(sig);
                    let body = body(err.span());
                    let call_fn = quote_spanned! {sig=>
                        async fn call(args: #args, ctx: &#rt::ToolContext)
                            -> #rt::Result<Self::Returned, #rt::ToolError>
                        {
                            #body
                        }
                    };
                    (ok.to_token_stream(), call_fn)
                }
                // Any other return type (an alias such as `io::Result<T>`,
                // or no `Result` at all) goes through `IntoToolResult::Ok`,
                // and every use is spanned on the return type. The future is
                // boxed because an `async fn` or `impl Future` here would
                // report a bad return type a second time, from its
                // desugaring.
                None => {
                    let span = ret.span();
                    let rt = runtime(span);
                    let body = body(span);
                    let call_fn = quote_spanned! {span=>
                        #[allow(refining_impl_trait)]
                        fn call<'ctx>(args: #args, ctx: &'ctx #rt::ToolContext)
                            -> ::core::pin::Pin<::std::boxed::Box<
                                dyn #rt::Future<
                                    Output = #rt::Result<Self::Returned, #rt::ToolError>,
                                > + #rt::Send + 'ctx,
                            >>
                        {
                            ::std::boxed::Box::pin(async move { #body })
                        }
                    };
                    (
                        quote_spanned!(span=> <#ret as #rt::IntoToolResult>::Ok),
                        call_fn,
                    )
                }
            };
            // A declared partial type is described by its schema, spanned
            // on the user's type so a missing derive is reported there.
            let partial_schema = tool.partial.as_ref().map(|declared| {
                let span = declared.span();
                let rt = runtime(span);
                quote_spanned! {span=>
                    fn partial_schema() -> #rt::Option<#rt::Value> {
                        #rt::Option::Some(#rt::partial_schema::<#declared>())
                    }
                }
            });
            let ok_span = returned.span();
            let output = match &tool.output {
                Some(output) => quote_spanned!(output.span()=> type Output = #output;),
                None => quote_spanned!(ok_span=> type Output = #returned;),
            };
            let returned = quote_spanned!(ok_span=> type Returned = #returned;);
            let doc = format!(
                "The `{}` agent tool, declared by [`{}`] with `#[agent_tool]`.",
                name.value(),
                function
            );
            quote! {
                #item

                #[doc = #doc]
                #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
                #vis struct #struct_ident;

                #unique
                #rt::link_tool!(#struct_ident);

                const _: () = {
                    #[automatically_derived]
                    impl #rt::Tool for #struct_ident {
                        #meta
                        type Args = #args;
                        #output
                        fn code() -> #rt::Code {
                            #rt::Code::function::<Self>()
                        }
                        #partial_schema
                    }

                    #[automatically_derived]
                    impl #rt::ToolFn for #struct_ident {
                        #returned
                        #call_fn
                    }

                    #resolution
                };
            }
        }
        Form::Struct { item } => {
            let ident = &item.ident;
            // Spanned on the struct's name: a missing derive is reported there.
            let args = quote_spanned!(ident.span()=> type Args = #ident;);
            let output = match &tool.output {
                Some(output) => quote_spanned!(output.span()=> type Output = #output;),
                None => quote!(type Output = #rt::Value;),
            };
            // A generic struct is a tool only once its parameters are chosen,
            // so it is added to a catalog by name, never linked.
            let link = item
                .generics
                .params
                .is_empty()
                .then(|| quote!(#rt::link_tool!(#ident);));
            quote! {
                #item

                #unique
                #link

                const _: () = {
                    #[automatically_derived]
                    impl #rt::Tool for #ident {
                        #meta
                        #args
                        #output
                    }

                    #resolution
                };
            }
        }
    }
}

/// The path generated code reaches the runtime by, with the span of the
/// user's tokens it is used for.
fn runtime(span: Span) -> TokenStream {
    quote_spanned!(span=> ::aptix::__private)
}

/// `Result<T, E>` as written (any path ending in `Result` with two type
/// arguments): `T` and `E`. `None` for anything else, e.g. an alias.
fn result_parts(ty: &Type) -> Option<(&Type, &Type)> {
    let Type::Path(path) = ty else {
        return None;
    };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return None;
    };
    let mut types = arguments.args.iter().filter_map(|argument| match argument {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    });
    match (types.next(), types.next(), types.next()) {
        (Some(ok), Some(err), None) if arguments.args.len() == 2 => Some((ok, err)),
        _ => None,
    }
}

/// Two tools of one name in one crate must not compile. A macro sees one
/// declaration at a time, so the rule is handed to the compiler: each tool
/// exports a macro whose name encodes the tool name, and `#[macro_export]`
/// puts every such macro at the crate root, where a second one with the same
/// name is error E0428. The macro is spanned on the user's name literal, so
/// the error points at both declarations' `name = "..."`, and its name reads
/// as the problem: "the name `agent_tool_named_greet` is defined multiple
/// times". Names that must be unique across crates are checked by the
/// catalog.
fn unique_name_guard(tool: &Tool) -> TokenStream {
    let span = tool.name.span();
    let guard = Ident::new(&guard_name(&tool.name.value()), span);
    // A tool declared inside a function (as in a test) makes this a
    // non-local `#[macro_export]`, which is intended here.
    quote_spanned! {span=>
        #[doc(hidden)]
        #[allow(non_local_definitions)]
        #[macro_export]
        macro_rules! #guard { () => {}; }
    }
}

/// An identifier per tool name, distinct for distinct names. Names are
/// `[A-Za-z0-9_-]`; without `-` the name is used as it is, and a name with
/// `-` gets another prefix, `_` for each `-` and the `-` positions appended
/// (`get-weather` → `agent_tool_hyphenated_named_get_weather__hyphens_at_3`).
pub(crate) fn guard_name(name: &str) -> String {
    if !name.contains('-') {
        return format!("agent_tool_named_{name}");
    }
    let positions: Vec<String> = name
        .char_indices()
        .filter(|(_, c)| *c == '-')
        .map(|(i, _)| i.to_string())
        .collect();
    format!(
        "agent_tool_hyphenated_named_{}__hyphens_at_{}",
        name.replace('-', "_"),
        positions.join("_")
    )
}

#[cfg(test)]
mod tests {
    use super::guard_name;

    #[test]
    fn guard_names_are_distinct_for_distinct_names() {
        let names = [
            "a",
            "a_b",
            "a-b",
            "a__b",
            "a_-b",
            "a-_b",
            "a--b",
            "a_b_hyphens_at_1",
            "a-b_",
            "a_b-",
            "hyphenated_named_a",
        ];
        let guards: std::collections::HashSet<String> =
            names.iter().map(|name| guard_name(name)).collect();
        assert_eq!(guards.len(), names.len());
        assert_eq!(guard_name("get_weather"), "agent_tool_named_get_weather");
        for guard in &guards {
            assert!(syn::parse_str::<syn::Ident>(guard).is_ok(), "{guard}");
        }
    }
}
