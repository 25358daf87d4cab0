//! The `#[agent_tool]` attribute. Use it through the `aptix` crate, which
//! re-exports it; this crate has no runtime behaviour of its own. The guide
//! page `aptix::guide::declaring` explains every key with examples.
//!
//! `#[agent_tool(name = "...", usage = "...", ...)]` goes on an `async fn`
//! (a tool whose code runs on the server) or on an arguments struct (a tool
//! whose result comes from elsewhere). Keys, in any order:
//!
//! | key | value |
//! | --- | --- |
//! | `name` | required: 1 to 64 of `A-Z a-z 0-9 _ -`, unique in the crate |
//! | `usage` | required: when the model should call the tool |
//! | `description` | what it does (default: the doc comment) |
//! | `executor` | `server` (default), `client`, `human`, `provider` or `latent` (the default for a struct with `output`) |
//! | `approval` | `auto` (default) or `requires_approval` |
//! | `output` | the type a client or person sends back, or a latent tool's result |
//! | `timeout`, `suspend_timeout` | durations such as `"500ms"`, `"30s"`, `"1m30s"` |
//! | `idempotent` | `true`: a call may run again with the same id |
//! | `retries` | 0 to 10: calls after `ToolError::retry` in one run (default 1) |
//! | `progressive`, `partial` | progress and partial results (`partial = T`) |
//! | `retention` | `"keep_last(N)"`, `"turns(N)"` or `"never_evict"` |
//! | `title`, `activity` | a display name; the activity of a latent tool |
//! | `read_only`, `destructive`, `open_world` | MCP's annotation hints |
//! | `redact`, `log_fields` | JSON pointers hidden from (or alone shown in) events and logs |
//! | `state` | `[Db, Mailer]`: the types the tool reads from its context, checked when an agent is built |
//!
//! On a function the macro adds a unit struct named after it in PascalCase
//! with a `Tool` suffix (`hello_world` → `HelloWorldTool`) implementing
//! `aptix::Tool` and `aptix::tool::ToolFn`; the function stays callable as
//! written. On a struct, the struct itself implements `aptix::Tool`.
//!
//! The macro runs in three stages, each in its own module:
//! `parse` reads the attribute and the item into a typed model without
//! judging it, `check` applies every contract rule and collects all
//! violations as spanned `syn::Error`s, and `expand` generates the
//! `aptix::Tool` implementation and the registration. When a rule fails,
//! `fallback` emits the errors together with the user's item and a stub,
//! so the user sees the contract error and not a cascade of follow-ups.
//! Every rule has a trybuild case in `tests/ui/`.

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
    agent_tool2(attr.into(), item.into()).into()
}

/// The attribute on `proc_macro2` streams, so that unit tests can read what
/// it generates.
fn agent_tool2(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let parsed = parse::parse(attr, item.clone());
    match check::check(parsed) {
        Ok(tool) => expand::expand(&tool),
        Err(failure) => fallback::fallback(failure, item),
    }
}

#[cfg(test)]
mod tests {
    use proc_macro2::{TokenStream, TokenTree};
    use quote::ToTokens;
    use std::path::Path;

    /// How many `unsafe` identifiers `stream` holds, groups entered.
    fn unsafe_tokens(stream: TokenStream) -> usize {
        stream
            .into_iter()
            .map(|tree| match tree {
                TokenTree::Ident(ident) => usize::from(ident == "unsafe"),
                TokenTree::Group(group) => unsafe_tokens(group.stream()),
                TokenTree::Punct(_) | TokenTree::Literal(_) => 0,
            })
            .sum()
    }

    /// Expands every `#[agent_tool]` item of the Rust files in `dir`; returns
    /// how many it expanded.
    fn expand_all_in(dir: &Path) -> usize {
        let mut expanded = 0;
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .collect();
        files.sort();
        for path in files {
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            let Ok(file) = syn::parse_file(&source) else {
                continue; // a case about what does not parse
            };
            for mut item in file.items {
                let attrs = match &mut item {
                    syn::Item::Fn(item) => &mut item.attrs,
                    syn::Item::Struct(item) => &mut item.attrs,
                    _ => continue,
                };
                let Some(at) = attrs
                    .iter()
                    .position(|attr| attr.path().is_ident("agent_tool"))
                else {
                    continue;
                };
                let attr = attrs.remove(at);
                let args = match attr.meta {
                    syn::Meta::List(list) => list.tokens,
                    _ => TokenStream::new(),
                };
                let input = item.to_token_stream();
                let written = unsafe_tokens(input.clone());
                let output = super::agent_tool2(args, input);
                // The user's own item comes back unchanged (a refused
                // `unsafe fn` among them, for its error to show): only what
                // the attribute adds counts.
                assert!(
                    unsafe_tokens(output.clone()) <= written,
                    "{}: the expansion adds `unsafe`:\n{output}",
                    path.display()
                );
                expanded += 1;
            }
        }
        expanded
    }

    /// A user's crate may say `forbid(unsafe_code)`, and what the attribute
    /// generates there must pass it: no expansion adds `unsafe`, neither
    /// to an accepted form (every trybuild pass case) nor in the fallback
    /// that carries contract errors (every compile-fail case).
    #[test]
    fn no_expansion_adds_unsafe() {
        assert_eq!(
            unsafe_tokens(quote::quote!(
                fn f() {
                    unsafe { g() }
                }
            )),
            1
        );
        let ui = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ui");
        let accepted = expand_all_in(&ui.join("pass"));
        let refused = expand_all_in(&ui);
        assert!(
            accepted >= 20,
            "only {accepted} accepted forms were expanded"
        );
        assert!(refused >= 60, "only {refused} refused forms were expanded");
    }
}
