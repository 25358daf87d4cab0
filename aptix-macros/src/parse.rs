//! Stage 1: the attribute and the item as a typed model, errors collected.
//!
//! Parsing judges only syntax, and [`value`] what a value means. Whether a
//! name is well-formed or a key is allowed with another is `check`'s
//! business, so that every problem of one declaration is reported in one
//! compile.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::{Ident, Item, ItemFn, ItemStruct, LitBool, LitStr, Token, Type};

mod value;

pub(crate) use value::{Approval, Executor, Retention, approval, duration, executor, retention};

/// One `key = value` of the attribute, with the key's span for errors.
pub(crate) struct Key<T> {
    pub(crate) key: Ident,
    pub(crate) value: T,
}

/// The attribute's keys as written. Each is `None` when absent.
#[derive(Default)]
pub(crate) struct Attr {
    pub(crate) name: Option<Key<LitStr>>,
    pub(crate) usage: Option<Key<LitStr>>,
    pub(crate) description: Option<Key<LitStr>>,
    pub(crate) executor: Option<Key<Ident>>,
    pub(crate) approval: Option<Key<Ident>>,
    pub(crate) output: Option<Key<Type>>,
    pub(crate) timeout: Option<Key<LitStr>>,
    pub(crate) redact: Option<Key<Vec<LitStr>>>,
    pub(crate) log_fields: Option<Key<Vec<LitStr>>>,
    pub(crate) suspend_timeout: Option<Key<LitStr>>,
    pub(crate) idempotent: Option<Key<LitBool>>,
    pub(crate) progressive: Option<Key<LitBool>>,
    pub(crate) retries: Option<Key<syn::LitInt>>,
    pub(crate) retention: Option<Key<LitStr>>,
    pub(crate) partial: Option<Key<Type>>,
    pub(crate) title: Option<Key<LitStr>>,
    pub(crate) activity: Option<Key<LitStr>>,
    pub(crate) read_only: Option<Key<LitBool>>,
    pub(crate) destructive: Option<Key<LitBool>>,
    pub(crate) open_world: Option<Key<LitBool>>,
    pub(crate) state: Option<Key<Vec<Type>>>,
    /// Keys that were written but whose value could not be read; already
    /// reported, so `check` must not also call them missing.
    pub(crate) unreadable: Vec<String>,
    /// False when the attribute had a syntax error that may have hidden
    /// keys; `check` then reports no key as missing.
    pub(crate) complete: bool,
    /// The attribute's tokens, to point at when a key is missing.
    pub(crate) tokens: TokenStream,
}

impl Attr {
    /// Whether a "missing `key`" error is certain: the key is absent, and
    /// not merely unreadable or lost to a syntax error.
    pub(crate) fn surely_missing(&self, key: &str) -> bool {
        self.complete && !self.unreadable.iter().any(|k| k == key)
    }

    /// Where to report a missing key: the attribute's arguments, or the
    /// whole attribute when it has none.
    pub(crate) fn missing_key_error(&self, message: impl std::fmt::Display) -> syn::Error {
        if self.tokens.is_empty() {
            syn::Error::new(Span::call_site(), message)
        } else {
            syn::Error::new_spanned(&self.tokens, message)
        }
    }
}

/// The item the attribute is on.
pub(crate) enum Target {
    Fn(Box<ItemFn>),
    Struct(Box<ItemStruct>),
    /// Any other item: rejected, but when it is a non-generic type (an enum,
    /// a union) its name is kept so the fallback can give it a stub impl.
    Other(Option<Ident>),
}

/// Everything parsed, plus the errors found while parsing.
pub(crate) struct Parsed {
    pub(crate) attr: Attr,
    pub(crate) target: Option<Target>,
    pub(crate) errors: Vec<syn::Error>,
}

pub(crate) const KEYS: &[&str] = &[
    "name",
    "usage",
    "description",
    "executor",
    "approval",
    "output",
    "timeout",
    "redact",
    "log_fields",
    "suspend_timeout",
    "idempotent",
    "progressive",
    "partial",
    "retries",
    "retention",
    "title",
    "activity",
    "read_only",
    "destructive",
    "open_world",
    "state",
];

pub(crate) fn parse(attr: TokenStream, item: TokenStream) -> Parsed {
    let mut errors = Vec::new();
    let mut parsed_attr = Attr {
        complete: true,
        tokens: attr.clone(),
        ..Attr::default()
    };
    let result =
        (|input: ParseStream| parse_attr(input, &mut parsed_attr, &mut errors)).parse2(attr);
    if let Err(error) = result {
        errors.push(error);
        parsed_attr.complete = false;
    }
    let target = match syn::parse2::<Item>(item) {
        Ok(Item::Fn(item)) => Some(Target::Fn(Box::new(item))),
        Ok(Item::Struct(item)) => Some(Target::Struct(Box::new(item))),
        Ok(other) => {
            let message = match &other {
                Item::Enum(_) => {
                    "#[agent_tool] does not go on an enum: a tool's arguments are always a JSON object, so declare a struct with named fields (a field may be an enum)"
                }
                _ => {
                    "#[agent_tool] goes on an `async fn` (a tool with server code) or on a struct with named fields (the arguments of a client, human or provider tool)"
                }
            };
            errors.push(syn::Error::new_spanned(item_keyword(&other), message));
            Some(Target::Other(stub_type_ident(&other)))
        }
        Err(error) => {
            errors.push(error);
            None
        }
    };
    Parsed {
        attr: parsed_attr,
        target,
        errors,
    }
}

/// The tokens that name what kind of item it is, for a precise span.
fn item_keyword(item: &Item) -> TokenStream {
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

/// A rejected item that is still a type the user may name as a tool.
fn stub_type_ident(item: &Item) -> Option<Ident> {
    let (ident, generics) = match item {
        Item::Enum(item) => (&item.ident, &item.generics),
        Item::Union(item) => (&item.ident, &item.generics),
        _ => return None,
    };
    (generics.params.is_empty() && generics.where_clause.is_none()).then(|| ident.clone())
}

fn parse_attr(
    input: ParseStream,
    attr: &mut Attr,
    errors: &mut Vec<syn::Error>,
) -> syn::Result<()> {
    while !input.is_empty() {
        if !input.peek(Ident) {
            // Not `key = ...`: report it, skip to the next key.
            let bad: TokenTree = input.parse()?;
            errors.push(syn::Error::new_spanned(
                &bad,
                format!(
                    "expected a key of #[agent_tool] (`key = value`); the keys are: {}",
                    KEYS.join(", ")
                ),
            ));
            attr.complete = false;
            skip_value(input);
            next_key(input)?;
            continue;
        }
        let key: Ident = input.parse()?;
        let name = key.to_string();
        if !input.peek(Token![=]) {
            let message = if KEYS.contains(&name.as_str()) {
                format!("`{key}` needs a value: `{key} = ...`")
            } else {
                unknown_key_message(&key)
            };
            errors.push(syn::Error::new(key.span(), message));
            attr.unreadable.push(name);
            skip_value(input);
            next_key(input)?;
            continue;
        }
        input.parse::<Token![=]>()?;
        let value = value_tokens(input);
        let result = match name.as_str() {
            "name" | "usage" | "description" | "timeout" | "suspend_timeout" | "title"
            | "activity" | "retention" => {
                parse_value(&key, &value, |input| string_value(input, &key)).and_then(|value| {
                    let slot = match name.as_str() {
                        "name" => &mut attr.name,
                        "usage" => &mut attr.usage,
                        "description" => &mut attr.description,
                        "timeout" => &mut attr.timeout,
                        "title" => &mut attr.title,
                        "activity" => &mut attr.activity,
                        "retention" => &mut attr.retention,
                        _ => &mut attr.suspend_timeout,
                    };
                    set(slot, key.clone(), value)
                })
            }
            "executor" => parse_value(&key, &value, |input| word_value(input, &key))
                .and_then(|value| set(&mut attr.executor, key.clone(), value)),
            "approval" => parse_value(&key, &value, |input| word_value(input, &key))
                .and_then(|value| set(&mut attr.approval, key.clone(), value)),
            "output" => parse_value(&key, &value, type_value)
                .and_then(|value| set(&mut attr.output, key.clone(), value)),
            "partial" => parse_value(&key, &value, type_value)
                .and_then(|value| set(&mut attr.partial, key.clone(), value)),
            "retries" => parse_value(&key, &value, |input| int_value(input, &key))
                .and_then(|value| set(&mut attr.retries, key.clone(), value)),
            "redact" => parse_value(&key, &value, |input| pointer_list(input, &key))
                .and_then(|value| set(&mut attr.redact, key.clone(), value)),
            "log_fields" => parse_value(&key, &value, |input| pointer_list(input, &key))
                .and_then(|value| set(&mut attr.log_fields, key.clone(), value)),
            "state" => parse_value(&key, &value, type_list)
                .and_then(|value| set(&mut attr.state, key.clone(), value)),
            "idempotent" | "progressive" | "read_only" | "destructive" | "open_world" => {
                parse_value(&key, &value, |input| bool_value(input, &key)).and_then(|value| {
                    let slot = match name.as_str() {
                        "idempotent" => &mut attr.idempotent,
                        "progressive" => &mut attr.progressive,
                        "read_only" => &mut attr.read_only,
                        "destructive" => &mut attr.destructive,
                        _ => &mut attr.open_world,
                    };
                    set(slot, key.clone(), value)
                })
            }
            _ => Err(syn::Error::new(key.span(), unknown_key_message(&key))),
        };
        if let Err(error) = result {
            errors.push(error);
            attr.unreadable.push(name);
            // `name = "a" usage = "b"`: a missing comma swallowed the next
            // key, which must not then be reported as missing.
            if value
                .clone()
                .into_iter()
                .any(|tree| matches!(&tree, TokenTree::Punct(p) if p.as_char() == '='))
            {
                attr.complete = false;
            }
        }
        next_key(input)?;
    }
    Ok(())
}

/// After a value: the end of the attribute or a comma.
fn next_key(input: ParseStream) -> syn::Result<()> {
    if !input.is_empty() {
        input.parse::<Token![,]>()?;
    }
    Ok(())
}

/// The tokens up to the next top-level comma, consumed.
fn value_tokens(input: ParseStream) -> TokenStream {
    let mut tokens = TokenStream::new();
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tree, next)) = rest.token_tree() {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            tokens.extend([tree]);
            rest = next;
        }
        Ok(((), rest))
    });
    tokens
}

/// Parses one key's value tokens completely, so a bad value is an error on
/// that value and never on the rest of the attribute.
fn parse_value<T>(
    key: &Ident,
    tokens: &TokenStream,
    parser: impl FnOnce(ParseStream) -> syn::Result<T>,
) -> syn::Result<T> {
    if tokens.is_empty() {
        return Err(syn::Error::new(
            key.span(),
            format!("`{key}` needs a value: `{key} = ...`"),
        ));
    }
    let whole = |input: ParseStream| {
        let value = parser(input)?;
        if !input.is_empty() {
            return Err(input.error(format!(
                "unexpected tokens after the value of `{key}`; separate keys with commas"
            )));
        }
        Ok(value)
    };
    whole.parse2(tokens.clone())
}

/// `redact = ["/password", "/card/number"]` or `log_fields = ["/city"]`:
/// a list of string literals.
fn pointer_list(input: ParseStream, key: &Ident) -> syn::Result<Vec<LitStr>> {
    let example = if key == "log_fields" {
        "`log_fields = [\"/city\", \"/order/id\"]`"
    } else {
        "`redact = [\"/password\", \"/card/number\"]`"
    };
    let message = format!("`{key}` takes a list of JSON pointers: {example}");
    if !input.peek(syn::token::Bracket) {
        return Err(syn::Error::new_spanned(rest(input), message));
    }
    let content;
    let brackets = syn::bracketed!(content in input);
    let pointers = syn::punctuated::Punctuated::<LitStr, Token![,]>::parse_terminated(&content)
        .map_err(|_| syn::Error::new(brackets.span.join(), &message))?;
    Ok(pointers.into_iter().collect())
}

/// `state = [Db, Mailer]`: a list of types, in brackets like the other
/// lists of the attribute.
fn type_list(input: ParseStream) -> syn::Result<Vec<Type>> {
    let message =
        "`state` takes a list of the types the tool reads from its context: `state = [Db, Mailer]`";
    if !input.peek(syn::token::Bracket) {
        return Err(syn::Error::new_spanned(rest(input), message));
    }
    let content;
    let brackets = syn::bracketed!(content in input);
    let types = syn::punctuated::Punctuated::<Type, Token![,]>::parse_terminated(&content)
        .map_err(|_| syn::Error::new(brackets.span.join(), message))?;
    Ok(types.into_iter().collect())
}

/// `idempotent = true`: a boolean literal.
fn bool_value(input: ParseStream, key: &Ident) -> syn::Result<LitBool> {
    if input.peek(LitBool) {
        return input.parse();
    }
    Err(syn::Error::new_spanned(
        rest(input),
        format!("`{key}` takes `true` or `false`: `{key} = true`"),
    ))
}

/// An integer literal, or an error on the whole value saying what to write.
fn int_value(input: ParseStream, key: &Ident) -> syn::Result<syn::LitInt> {
    if input.peek(syn::LitInt) {
        return input.parse();
    }
    Err(syn::Error::new_spanned(
        rest(input),
        format!("`{key}` takes a whole number: `{key} = 2`"),
    ))
}

/// A string literal, or an error on the whole value saying what to write.
fn string_value(input: ParseStream, key: &Ident) -> syn::Result<LitStr> {
    if input.peek(LitStr) {
        return input.parse();
    }
    let example = match key.to_string().as_str() {
        "name" => "name = \"get_weather\"",
        "usage" => "usage = \"Call when ...\"",
        "timeout" => "timeout = \"30s\"",
        "suspend_timeout" => "suspend_timeout = \"15m\"",
        "title" => "title = \"Get the weather\"",
        "activity" => "activity = \"send_mail\"",
        "retention" => "retention = \"keep_last(3)\"",
        _ => "description = \"...\"",
    };
    Err(syn::Error::new_spanned(
        rest(input),
        format!("`{key}` takes a string literal: `{example}`"),
    ))
}

/// `executor = client`: a bare word. A quoted word gets its own hint.
fn word_value(input: ParseStream, key: &Ident) -> syn::Result<Ident> {
    if input.peek(LitStr) {
        let text: LitStr = input.parse()?;
        return Err(syn::Error::new(
            text.span(),
            format!("write `{key} = {}` without quotes", text.value().trim()),
        ));
    }
    if input.peek(Ident) {
        return input.parse();
    }
    let choices = match key.to_string().as_str() {
        "executor" => "`server`, `client`, `human`, `provider` or `latent`",
        _ => "`auto` or `requires_approval`",
    };
    Err(syn::Error::new_spanned(
        rest(input),
        format!("`{key}` takes one of {choices}"),
    ))
}

/// `output = MyOutput`: a type.
fn type_value(input: ParseStream) -> syn::Result<Type> {
    let fork = input.fork();
    match fork.parse::<Type>() {
        Ok(_) => input.parse(),
        Err(_) => Err(syn::Error::new_spanned(
            rest(input),
            "`output` takes a type: `output = MyOutput`",
        )),
    }
}

/// Consumes and returns what is left of a value, to span an error on it.
fn rest(input: ParseStream) -> TokenStream {
    value_tokens(input)
}

fn unknown_key_message(key: &Ident) -> String {
    let name = key.to_string();
    let keys = KEYS.join(", ");
    let closest = KEYS
        .iter()
        .map(|known| (edit_distance(known, &name), known))
        .filter(|(distance, _)| *distance <= 2)
        .min();
    match closest {
        Some((_, known)) => format!(
            "unknown key `{key}` in #[agent_tool]: did you mean `{known}`? The keys are: {keys}"
        ),
        None => format!("unknown key `{key}` in #[agent_tool]; the keys are: {keys}"),
    }
}

/// Levenshtein distance, for "did you mean" on short key names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = i;
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

fn set<T>(slot: &mut Option<Key<T>>, key: Ident, value: T) -> syn::Result<()> {
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
    let _ = value_tokens(input);
}

/// The doc comment of an item, joined and trimmed; `None` if empty.
pub(crate) fn doc_comment(attrs: &[syn::Attribute]) -> Option<(String, Span)> {
    let mut lines = Vec::new();
    let mut span = None;
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let syn::Expr::Lit(syn::ExprLit {
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
    let text = lines.join("\n").trim().to_owned();
    match (text.is_empty(), span) {
        (false, Some(span)) => Some((text, span)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("timeout", "timeout"), 0);
        assert_eq!(edit_distance("timeout", "timout"), 1);
        assert_eq!(edit_distance("usage", "usgae"), 2);
        assert_eq!(edit_distance("name", "retries"), 6);
    }
}
