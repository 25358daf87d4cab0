//! The `#[agent_tool]` attribute. Use it through the `aptix` crate, which
//! re-exports it; this crate has no runtime behaviour of its own.
//!
//! The macro runs in three stages, each in its own module:
//! [`parse`] reads the attribute and the item into a typed model without
//! judging it, [`check`] applies every contract rule and collects all
//! violations as spanned `syn::Error`s, and [`expand`] generates the
//! `aptix::Tool` implementation and the registration. When a rule fails,
//! [`fallback`] emits the errors together with the user's item and a stub,
//! so the user sees the contract error and not a cascade of follow-ups.

#![forbid(unsafe_code)]

mod check;
mod expand;
mod fallback;
mod parse;
mod secret;

use proc_macro::TokenStream;

/// Declares an agent tool. See the `aptix` crate documentation for the keys,
/// the accepted signatures and the rules checked at compile time.
#[proc_macro_attribute]
pub fn agent_tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    let item = proc_macro2::TokenStream::from(item);
    let parsed = parse::parse(attr, item.clone());
    match check::check(parsed) {
        Ok(tool) => expand::expand(&tool).into(),
        Err(failure) => fallback::fallback(failure, item).into(),
    }
}
