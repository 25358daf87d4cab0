//! What the attribute says about the arguments' fields: which values are
//! hidden from events (`redact`, `log_fields`, as JSON pointers), and the
//! struct form's field names, read as serde names them in JSON.

use quote::ToTokens;
use syn::{Ident, ItemStruct, LitStr, Type};

use super::{Errors, Redaction};
use crate::parse::Attr;
use crate::secret;

/// `redact` and `log_fields`: one of them at most, with valid pointers.
pub(super) fn redaction(attr: &Attr, errors: &mut Errors) -> Redaction {
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

/// A struct-form tool may not show a field whose name looks secret: its
/// value would be shown in events. Declaring neither `redact` nor
/// `log_fields` shows every field; `redact = [...]` shows those at or under
/// none of its pointers (one pointer does not vouch for the others);
/// `redact = []` says nothing is secret. (The function form's arguments
/// type is declared elsewhere, out of the macro's sight; the catalog checks
/// it, and nested and output fields of both forms, when it is built.)
pub(super) fn secret_fields(attr: &Attr, item: &ItemStruct, errors: &mut Errors) {
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
        let (rust_name, json_name) = names(ident, &field.attrs, rename_all.as_deref());
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
pub(super) fn reserved_fields(item: &ItemStruct, errors: &mut Errors) {
    let syn::Fields::Named(fields) = &item.fields else {
        return;
    };
    let rename_all = serde_value(&item.attrs, "rename_all");
    for field in &fields.named {
        let Some(ident) = &field.ident else { continue };
        if has_serde_flag(&field.attrs, &["flatten", "skip", "skip_deserializing"]) {
            continue;
        }
        let (_, json_name) = names(ident, &field.attrs, rename_all.as_deref());
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

/// A field's name in Rust (without `r#`) and in JSON: the user knows the
/// first, the model and the events see the second.
fn names(ident: &Ident, attrs: &[syn::Attribute], rename_all: Option<&str>) -> (String, String) {
    let rust_name = ident.to_string();
    let rust_name = rust_name
        .strip_prefix("r#")
        .unwrap_or(&rust_name)
        .to_owned();
    let json_name = serde_value(attrs, "rename").unwrap_or_else(|| rename(&rust_name, rename_all));
    (rust_name, json_name)
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
            } else {
                skip_serde_value(&meta);
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
            skip_serde_value(&meta);
            Ok(())
        });
    }
    found
}

/// Consumes the value of a serde key (`= expr` or `(...)`), so that the
/// keys after it are still read.
fn skip_serde_value(meta: &syn::meta::ParseNestedMeta<'_>) {
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
