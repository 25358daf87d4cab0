//! Rules on the attribute's keys: each key's value, and the keys that make
//! no sense together or with the tool's executor. Reported on the key's
//! value, which is what the user must change.

use quote::ToTokens;
use syn::{LitBool, LitStr, Type};

use super::{Approval, Errors, Executor, Retention};
use crate::parse::{self, Attr, Key};

/// Shared by the tool name and the activity name, which providers and the
/// runtime accept under the same rule.
const NAME_RULE: &str = "1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`";

pub(super) fn name(attr: &Attr, errors: &mut Errors) -> Option<LitStr> {
    let Some(Key { value, .. }) = &attr.name else {
        if attr.surely_missing("name") {
            errors.push_error(attr.missing_key_error(format!(
                "missing `name = \"...\"`: the name the model calls the tool by, {NAME_RULE}"
            )));
        }
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
        None => Some(value.clone()),
    }
}

/// The model chooses tools by `usage`, so a tool without one is never
/// called on purpose.
pub(super) fn usage(attr: &Attr, errors: &mut Errors) -> Option<String> {
    match &attr.usage {
        None => {
            if attr.surely_missing("usage") {
                errors.push_error(attr.missing_key_error(
                    "missing `usage = \"...\"`: say when the model should call this tool, e.g. `usage = \"Call when the user asks to be greeted.\"`",
                ));
            }
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
    }
}

pub(super) fn executor(attr: &Attr, is_struct: bool, errors: &mut Errors) -> Option<Executor> {
    match &attr.executor {
        // A struct with an `output` and no executor is a schema: latent
        // until an activity is bound to it.
        None if is_struct && attr.output.is_some() => Some(Executor::Latent),
        None => Some(Executor::Server),
        Some(key) => errors.keep(parse::executor(&key.value)),
    }
}

pub(super) fn approval(attr: &Attr, errors: &mut Errors) -> Option<Approval> {
    match &attr.approval {
        None => Some(Approval::Auto),
        Some(key) => errors.keep(parse::approval(&key.value)),
    }
}

/// Approval holds a call that runs here; a human or provider tool has none.
pub(super) fn approval_fits_executor(
    attr: &Attr,
    executor: Option<Executor>,
    approval: Option<Approval>,
    errors: &mut Errors,
) {
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
}

pub(super) fn timeout(attr: &Attr, errors: &mut Errors) -> Option<(u64, u32)> {
    let key = attr.timeout.as_ref()?;
    errors.keep(parse::duration("timeout", &key.value))
}

/// Only a call that waits for someone (a client, a person, an approval)
/// can be suspended, so the limit is refused where nothing ever waits.
pub(super) fn suspend_timeout(
    attr: &Attr,
    executor: Option<Executor>,
    approval: Option<Approval>,
    errors: &mut Errors,
) -> Option<(u64, u32)> {
    let key = attr.suspend_timeout.as_ref()?;
    if let (Some(executor), Some(approval)) = (executor, approval) {
        let suspends = matches!(executor, Executor::Client | Executor::Human)
            || approval == Approval::RequiresApproval;
        if !suspends {
            let why = match executor {
                Executor::Provider => {
                    "`suspend_timeout` cannot be used with `executor = provider`: the model provider runs the tool, so no call waits here"
                }
                _ => {
                    "`suspend_timeout` has no effect here: a server or latent tool without `approval = requires_approval` never waits for anyone; remove it, or use `timeout` to limit how long the tool runs"
                }
            };
            errors.push(key.value.span(), why);
            return None;
        }
    }
    errors.keep(parse::duration("suspend_timeout", &key.value))
}

/// Running a call again after a crash needs its code here.
pub(super) fn idempotent(attr: &Attr, executor: Option<Executor>, errors: &mut Errors) -> bool {
    match (&attr.idempotent, executor) {
        (Some(key), Some(Executor::Human | Executor::Provider)) => {
            errors.push(
                key.value.span(),
                "`idempotent` only applies to tools whose code runs on this server (`executor = server` or `client`): it allows a call interrupted by a crash to run again with the same tool_call_id",
            );
            false
        }
        (Some(key), _) => key.value.value,
        (None, _) => false,
    }
}

/// Progress is reported by running code, so only a server function has any.
pub(super) fn progressive(
    attr: &Attr,
    executor: Option<Executor>,
    is_struct: bool,
    errors: &mut Errors,
) -> bool {
    match &attr.progressive {
        Some(key)
            if key.value.value && (!matches!(executor, Some(Executor::Server)) || is_struct) =>
        {
            errors.push(
                key.value.span(),
                "`progressive` is for a tool whose code runs here (an async fn, `executor = server`): only running code reports progress and partial results",
            );
            false
        }
        Some(key) => key.value.value,
        None => false,
    }
}

/// Partial results exist only when the tool is progressive. Not repeated
/// when `progressive = true` was written and refused: that error says it.
pub(super) fn partial_needs_progressive(attr: &Attr, progressive: bool, errors: &mut Errors) {
    if let Some(key) = &attr.partial
        && !progressive
        && attr
            .progressive
            .as_ref()
            .is_none_or(|flag| !flag.value.value)
    {
        errors.push_spanned(
            &key.value,
            "`partial = T` declares the type of a progressive tool's partial results: add `progressive = true`",
        );
    }
}

/// A retry is asked for by the tool's code, so only code running here has
/// retries to bound.
pub(super) fn retries(attr: &Attr, executor: Option<Executor>, errors: &mut Errors) -> u8 {
    let Some(key) = &attr.retries else {
        return 1;
    };
    match key.value.base10_parse::<u8>() {
        Ok(retries) if retries <= 10 && matches!(executor, Some(Executor::Server)) => retries,
        Ok(retries) if retries <= 10 => {
            errors.push(
                key.value.span(),
                "`retries` bounds how often a tool's code asks the model for another try (`ToolError::retry`); only a tool whose code runs here has any",
            );
            1
        }
        _ => {
            errors.push(
                key.value.span(),
                "`retries` is how often the model may try again in one run when the tool asks it to: a whole number from 0 to 10",
            );
            1
        }
    }
}

/// Retention governs the transcript kept here, which a provider tool's
/// results are not part of.
pub(super) fn retention(attr: &Attr, executor: Option<Executor>, errors: &mut Errors) -> Retention {
    let Some(key) = &attr.retention else {
        return Retention::Budget;
    };
    match parse::retention(&key.value) {
        Ok(_) if matches!(executor, Some(Executor::Provider)) => {
            errors.push(
                key.value.span(),
                "`retention` has no effect on `executor = provider`: the provider keeps its tools' results, not the transcript",
            );
            Retention::Budget
        }
        Ok(retention) => retention,
        Err(error) => {
            errors.push_error(error);
            Retention::Budget
        }
    }
}

pub(super) fn title(attr: &Attr, errors: &mut Errors) -> Option<String> {
    let key = attr.title.as_ref()?;
    let text = key.value.value().trim().to_owned();
    if text.is_empty() {
        errors.push(
            key.value.span(),
            "`title` is empty: give a short human-readable name, or remove it",
        );
        return None;
    }
    Some(text)
}

/// An activity computes a latent tool's result; any other tool computes
/// its own, or has it given from outside.
pub(super) fn activity(
    attr: &Attr,
    executor: Option<Executor>,
    errors: &mut Errors,
) -> Option<String> {
    let key = attr.activity.as_ref()?;
    let text = key.value.value();
    // Empty declares the tool latent even where an activity of its name
    // is bound (the specification's explicit `_activity: ""`).
    let valid = text.len() <= 64
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if !valid {
        errors.push(
            key.value.span(),
            format!("the activity name `{text}` is invalid: an activity is named like a tool, {NAME_RULE}; or it is empty, to keep the tool latent"),
        );
        return None;
    }
    if let Some(kind) = executor
        && kind != Executor::Latent
    {
        errors.push(
            key.value.span(),
            "`activity` names the activity that computes a latent tool's result; only a latent tool (an arguments struct with `output = Type` and no executor, or `executor = latent`) has one",
        );
        return None;
    }
    Some(text)
}

/// `read_only`, `destructive` and `open_world`: hints about what a call
/// does here, so they must agree with each other and with a tool that runs
/// here at all.
pub(super) fn annotations(
    attr: &Attr,
    executor: Option<Executor>,
    errors: &mut Errors,
) -> (Option<bool>, Option<bool>, Option<bool>) {
    let flag = |key: &Option<Key<LitBool>>| key.as_ref().map(|key| key.value.value);
    let read_only = flag(&attr.read_only);
    let destructive = flag(&attr.destructive);
    let open_world = flag(&attr.open_world);
    if let (Some(true), Some(true), Some(key)) = (read_only, destructive, &attr.destructive) {
        errors.push(
            key.value.span(),
            "`destructive = true` contradicts `read_only = true`: a tool that changes nothing destroys nothing",
        );
    }
    if let (Some(key), Some(Executor::Provider)) = (
        attr.read_only
            .as_ref()
            .or(attr.destructive.as_ref())
            .or(attr.open_world.as_ref()),
        executor,
    ) {
        errors.push(
            key.value.span(),
            "`read_only`, `destructive` and `open_world` describe what a call does here; a provider tool never runs here",
        );
    }
    (read_only, destructive, open_world)
}

/// `description = "..."`, which takes the place of the doc comment. An
/// empty one is refused but still counts as given, so the missing doc
/// comment is not reported as well.
pub(super) fn description(attr: &Attr, errors: &mut Errors) -> Option<String> {
    attr.description.as_ref().map(|key| {
        let text = key.value.value().trim().to_owned();
        if text.is_empty() {
            errors.push(
                key.value.span(),
                "`description` is empty: say what the tool does",
            );
        }
        text
    })
}

/// `state = [Db, Mailer]`: the types the tool's code reads from its
/// context, each once. Only code reads a context: a function's, or the
/// activity of a latent tool; a struct of another executor runs none here.
pub(super) fn state(
    attr: &Attr,
    executor: Option<Executor>,
    is_struct: bool,
    errors: &mut Errors,
) -> Vec<Type> {
    let Some(key) = attr.state.as_ref() else {
        return Vec::new();
    };
    if key.value.is_empty() {
        errors.push(
            key.key.span(),
            "`state = []` declares nothing: list the types the tool reads from its context (`state = [Db]`), or leave `state` out",
        );
        return Vec::new();
    }
    if is_struct
        && let Some(kind) = executor
        && kind != Executor::Latent
    {
        errors.push(
            key.key.span(),
            "`state` names what the tool's code reads from its context, and this tool runs no code here: only a function, or a latent tool's activity, takes a context",
        );
        return Vec::new();
    }
    let mut seen: Vec<String> = Vec::new();
    let mut declared = Vec::new();
    for ty in &key.value {
        let written = ty.to_token_stream().to_string();
        if seen.contains(&written) {
            errors.push_spanned(
                ty,
                format!("`{written}` is listed twice in `state`; list each type once"),
            );
            continue;
        }
        seen.push(written);
        declared.push(ty.clone());
    }
    declared
}
