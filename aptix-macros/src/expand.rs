//! Stage 3: code generation for a declaration that passed every check.
//!
//! Generated code implements traits of `aptix-core` and fills its link-time
//! tool list; it contains no behaviour of its own. It lives in `const _: ()
//! = { ... };` so it adds no names to the user's module, and it reaches the
//! runtime only through `::aptix::__private`, so users depend on `aptix`
//! alone.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::check::{Approval, Executor, Form, Tool};

pub fn expand(tool: &Tool) -> TokenStream {
    let rt = quote!(::aptix::__private);
    let name = &tool.name;
    let usage = &tool.usage;
    let description = &tool.description;
    let executor = match tool.executor {
        Executor::Server => quote!(#rt::ExecutorKind::Server),
        Executor::Client => quote!(#rt::ExecutorKind::Client),
        Executor::Human => quote!(#rt::ExecutorKind::Human),
        Executor::Provider => quote!(#rt::ExecutorKind::Provider),
    };
    let approval = match tool.approval {
        Approval::Auto => quote!(#rt::Approval::Auto),
        Approval::RequiresApproval => quote!(#rt::Approval::RequiresApproval),
    };
    let timeout = match tool.timeout {
        Some((secs, nanos)) => quote!(#rt::Option::Some(#rt::Duration::new(#secs, #nanos))),
        None => quote!(#rt::Option::None),
    };
    let unique = unique_name_guard(tool);
    let common = quote! {
        const NAME: &'static str = #name;
        const USAGE: &'static str = #usage;
        const DESCRIPTION: &'static str = #description;
        const EXECUTOR: #rt::ExecutorKind = #executor;
        const APPROVAL: #rt::Approval = #approval;
        const TIMEOUT: #rt::Option<#rt::Duration> = #timeout;
        const SOURCE: #rt::SourceLocation = #rt::SourceLocation {
            file: ::core::file!(),
            line: ::core::line!(),
            module_path: ::core::module_path!(),
        };
        fn definition() -> #rt::Result<&'static #rt::ToolDefinition, &'static #rt::DefinitionError> {
            static DEFINITION: #rt::OnceLock<#rt::Result<#rt::ToolDefinition, #rt::DefinitionError>> =
                #rt::OnceLock::new();
            DEFINITION.get_or_init(#rt::ToolDefinition::build::<Self>).as_ref()
        }
    };

    match &tool.form {
        Form::Fn {
            item,
            struct_ident,
            args,
            with_context,
            ret,
        } => {
            let function = &item.sig.ident;
            let vis = &item.vis;
            // Spanned on the user's types, so a missing derive or a wrong
            // return type is reported where it was written.
            let args_ty = quote_spanned!(args.span()=> #args);
            let returned = quote_spanned!(ret.span()=> <#ret as #rt::IntoToolResult>::Ok);
            let output = match &tool.output {
                Some(output) => quote_spanned!(output.span()=> #output),
                None => returned.clone(),
            };
            let call = if *with_context {
                quote!(#function(args, ctx).await)
            } else {
                quote!({ let _ = ctx; #function(args).await })
            };
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

                const _: () = {
                    #[automatically_derived]
                    impl #rt::Tool for #struct_ident {
                        #common
                        type Args = #args_ty;
                        type Output = #output;
                        fn dyn_tool() -> &'static dyn #rt::DynTool {
                            &#rt::FnTool::<Self>::NEW
                        }
                    }

                    #[automatically_derived]
                    impl #rt::ToolFn for #struct_ident {
                        type Returned = #returned;
                        fn call(
                            args: #args_ty,
                            ctx: &#rt::ToolContext,
                        ) -> impl #rt::Future<Output = #rt::Result<Self::Returned, #rt::ToolError>> + #rt::Send {
                            async move { #rt::IntoToolResult::into_tool_result(#call) }
                        }
                    }

                    #[#rt::linkme::distributed_slice(#rt::TOOLS)]
                    #[linkme(crate = #rt::linkme)]
                    static REGISTRATION: &'static dyn #rt::DynTool = &#rt::FnTool::<#struct_ident>::NEW;
                };
            }
        }
        Form::Struct { item } => {
            let ident = &item.ident;
            let output = match &tool.output {
                Some(output) => quote_spanned!(output.span()=> #output),
                None => quote!(#rt::Value),
            };
            quote! {
                #item

                #unique

                const _: () = {
                    #[automatically_derived]
                    impl #rt::Tool for #ident {
                        #common
                        type Args = Self;
                        type Output = #output;
                        fn dyn_tool() -> &'static dyn #rt::DynTool {
                            &#rt::SchemaOnlyTool::<Self>::NEW
                        }
                    }

                    #[#rt::linkme::distributed_slice(#rt::TOOLS)]
                    #[linkme(crate = #rt::linkme)]
                    static REGISTRATION: &'static dyn #rt::DynTool = &#rt::SchemaOnlyTool::<#ident>::NEW;
                };
            }
        }
    }
}

/// Two tools of one name in one crate must not compile. A macro sees one
/// declaration at a time, so the rule is handed to the compiler: each tool
/// exports a macro whose name encodes the tool name, and `#[macro_export]`
/// puts every such macro at the crate root, where a second one with the same
/// name is error E0428. The identifier carries the span of the user's name
/// literal, so the error points at the second declaration's `name = "..."`.
/// Names that must be unique across crates are checked by the catalog.
fn unique_name_guard(tool: &Tool) -> TokenStream {
    let mut encoded = String::new();
    for c in tool.name.value().chars() {
        match c {
            // `_` doubles and `-` becomes `_d`, so distinct names stay distinct.
            '_' => encoded.push_str("__"),
            '-' => encoded.push_str("_d"),
            c => encoded.push(c),
        }
    }
    let guard: Ident = format_ident!(
        "__aptix_tool_name_must_be_unique__{}",
        encoded,
        span = tool.name.span()
    );
    let _ = Span::call_site();
    quote! {
        #[doc(hidden)]
        #[macro_export]
        macro_rules! #guard { () => {}; }
    }
}
