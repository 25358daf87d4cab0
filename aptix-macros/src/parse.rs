//! Stage 1: the attribute and the item as a typed model, errors collected.
//!
//! Parsing judges only syntax. Whether a name is well-formed or a key is
//! allowed with another is `check`'s business, so that every problem of one
//! declaration is reported in one compile.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Ident, Item, ItemFn, ItemStruct, LitStr, Token, Type};

/// One `key = value` of the attribute, with the key's span for errors.
pub struct Key<T> {
    pub key: Ident,
    pub value: T,
}

/// The attribute's keys as written. Each is `None` when absent.
#[derive(Default)]
pub struct Attr {
    pub name: Option<Key<LitStr>>,
    pub usage: Option<Key<LitStr>>,
    pub description: Option<Key<LitStr>>,
    pub executor: Option<Key<Ident>>,
    pub approval: Option<Key<Ident>>,
    pub output: Option<Key<Type>>,
    pub timeout: Option<Key<LitStr>>,
}

/// The item the attribute is on.
pub enum Target {
    Fn(Box<ItemFn>),
    Struct(Box<ItemStruct>),
}

/// Everything parsed, plus the errors found while parsing.
pub struct Parsed {
    pub attr: Attr,
    pub target: Option<Target>,
    pub errors: Vec<syn::Error>,
}

pub const KEYS: &str = "name, usage, description, executor, approval, output, timeout";

pub fn parse(attr: TokenStream, item: TokenStream) -> Parsed {
    let mut errors = Vec::new();
    let attr = match (|input: ParseStream| parse_attr(input, &mut errors)).parse2(attr) {
        Ok(attr) => attr,
        Err(error) => {
            errors.push(error);
            Attr::default()
        }
    };
    let target = match syn::parse2::<Item>(item) {
        Ok(Item::Fn(item)) => Some(Target::Fn(Box::new(item))),
        Ok(Item::Struct(item)) => Some(Target::Struct(Box::new(item))),
        Ok(other) => {
            errors.push(syn::Error::new_spanned(
                item_keyword(&other),
                "#[agent_tool] goes on an `async fn` (a tool with server code) or on a struct with named fields (the arguments of a client, human or provider tool)",
            ));
            None
        }
        Err(error) => {
            errors.push(error);
            None
        }
    };
    Parsed {
        attr,
        target,
        errors,
    }
}

/// The tokens that name what kind of item it is, for a precise span.
fn item_keyword(item: &Item) -> TokenStream {
    use quote::ToTokens;
    match item {
        Item::Enum(item) => item.enum_token.to_token_stream(),
        Item::Union(item) => item.union_token.to_token_stream(),
        Item::Impl(item) => item.impl_token.to_token_stream(),
        Item::Trait(item) => item.trait_token.to_token_stream(),
        Item::Type(item) => item.type_token.to_token_stream(),
        Item::Const(item) => item.const_token.to_token_stream(),
        Item::Static(item) => item.static_token.to_token_stream(),
        Item::Mod(item) => item.mod_token.to_token_stream(),
        other => other.to_token_stream(),
    }
}

fn parse_attr(input: ParseStream, errors: &mut Vec<syn::Error>) -> syn::Result<Attr> {
    let mut attr = Attr::default();
    while !input.is_empty() {
        let key: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let result = match key.to_string().as_str() {
            "name" => set(&mut attr.name, key, input.parse()),
            "usage" => set(&mut attr.usage, key, input.parse()),
            "description" => set(&mut attr.description, key, input.parse()),
            "timeout" => set(&mut attr.timeout, key, input.parse()),
            "executor" => set(&mut attr.executor, key, input.parse()),
            "approval" => set(&mut attr.approval, key, input.parse()),
            "output" => set(&mut attr.output, key, input.parse()),
            _ => {
                skip_value(input);
                Err(syn::Error::new(
                    key.span(),
                    format!("unknown key `{key}` in #[agent_tool]; the keys are: {KEYS}"),
                ))
            }
        };
        if let Err(error) = result {
            errors.push(error);
            skip_value(input);
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(attr)
}

fn set<T>(slot: &mut Option<Key<T>>, key: Ident, value: syn::Result<T>) -> syn::Result<()> {
    let value = value?;
    if slot.is_some() {
        return Err(syn::Error::new(
            key.span(),
            format!("duplicate key `{key}` in #[agent_tool]; give each key once"),
        ));
    }
    *slot = Some(Key { key, value });
    Ok(())
}

/// Skips to the next top-level comma, so one bad value does not hide the
/// errors of the keys after it.
fn skip_value(input: ParseStream) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tree, next)) = rest.token_tree() {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                return Ok(((), rest));
            }
            rest = next;
        }
        Ok(((), rest))
    });
}

/// The doc comment of an item, joined and trimmed; `None` if empty.
pub fn doc_comment(attrs: &[syn::Attribute]) -> Option<(String, Span)> {
    let mut lines = Vec::new();
    let mut span = None;
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &nv.value
            {
                span.get_or_insert(text.span());
                let value = text.value();
                lines.push(
                    value
                        .strip_prefix(' ')
                        .unwrap_or(&value)
                        .trim_end()
                        .to_owned(),
                );
            }
        }
    }
    let text = lines.join("\n").trim().to_owned();
    match (text.is_empty(), span) {
        (false, Some(span)) => Some((text, span)),
        _ => None,
    }
}
