//! What the macro emits when the declaration breaks a rule: the errors, the
//! user's item unchanged, and a stub `Tool` impl for the type the user will
//! refer to. Without the stub, every `.tool::<HelloWorldTool>()` in the crate
//! would add a "cannot find type" error and bury the one that matters
//! (the approach of `thiserror-impl/src/fallback.rs`).
//!
//! There is no stub where one would be a new error: for a method (it sits in
//! an `impl` block, where a struct cannot be declared) and for a generic
//! struct (a stub impl would have to invent its parameters).

use proc_macro2::TokenStream;
use quote::quote;

use crate::check::{Failure, Stub};

pub(crate) fn fallback(failure: Failure, item: TokenStream) -> TokenStream {
    let errors = failure.error.into_compile_error();
    let rt = quote!(::aptix::__private);
    let stub_impl = |ident: &syn::Ident| {
        quote! {
            const _: () = {
                impl #rt::Tool for #ident {
                    const META: #rt::ToolMeta = #rt::ToolMeta::new(
                        "",
                        "",
                        "",
                        #rt::SourceLocation {
                            file: ::core::file!(),
                            line: ::core::line!(),
                            module_path: ::core::module_path!(),
                        },
                    );
                    type Args = #rt::StubArgs;
                    type Output = ();
                }
            };
        }
    };
    let stub = match &failure.stub {
        Some(Stub::FnStruct { vis, ident }) => {
            let imp = stub_impl(ident);
            quote! {
                #vis struct #ident;
                #imp
            }
        }
        Some(Stub::StructImpl { ident }) => stub_impl(ident),
        None => TokenStream::new(),
    };
    quote! {
        #errors
        #item
        #stub
    }
}
