//! What a key's value means: `server` is `Executor::Server`, `"1m30s"` is
//! ninety seconds. Parsing has already checked that each value is the right
//! kind of token; this reads the word or the text inside it.
//!
//! They are called from `check`, not from `parse()`, so that an unreadable
//! value is reported in its turn among the rule errors, not ahead of them.

use syn::{Ident, LitStr};

/// `executor = ...`: where a call runs, or who answers it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Executor {
    Server,
    Client,
    Human,
    Provider,
    Latent,
}

/// `approval = ...`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approval {
    Auto,
    RequiresApproval,
}

/// `retention = "..."`, as `aptix::meta::Retention` holds it.
pub(crate) enum Retention {
    Budget,
    KeepLast(u32),
    Turns(u32),
    NeverEvict,
}

/// `executor = server | client | human | provider | latent`.
pub(crate) fn executor(value: &Ident) -> syn::Result<Executor> {
    match value.to_string().as_str() {
        "server" => Ok(Executor::Server),
        "client" => Ok(Executor::Client),
        "human" => Ok(Executor::Human),
        "provider" => Ok(Executor::Provider),
        "latent" => Ok(Executor::Latent),
        other => Err(syn::Error::new(
            value.span(),
            format!(
                "unknown executor `{other}`; use `server`, `client`, `human`, `provider` or `latent`"
            ),
        )),
    }
}

/// `approval = auto | requires_approval`.
pub(crate) fn approval(value: &Ident) -> syn::Result<Approval> {
    match value.to_string().as_str() {
        "auto" => Ok(Approval::Auto),
        "requires_approval" => Ok(Approval::RequiresApproval),
        other => Err(syn::Error::new(
            value.span(),
            format!("unknown approval `{other}`; use `auto` or `requires_approval`"),
        )),
    }
}

/// `timeout` or `suspend_timeout` (named by `key`) as (seconds,
/// nanoseconds), with the error on the value.
pub(crate) fn duration(key: &str, value: &LitStr) -> syn::Result<(u64, u32)> {
    parse_duration(key, &value.value()).map_err(|why| syn::Error::new(value.span(), why))
}

/// `"30s"`, `"500ms"`, `"2m"`, `"1h"`, `"1m30s"` → (seconds, nanoseconds).
fn parse_duration(key: &str, text: &str) -> Result<(u64, u32), String> {
    let usage = "write the time limit as a number and a unit: \"500ms\", \"30s\", \"2m\", \"1h\" or combined, \"1m30s\"";
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("`{key}` is empty; {usage}"));
    }
    let mut total_ms: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("`{key} = \"{text}\"` is not a duration; {usage}"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{key} = \"{text}\"` is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(format!("`{key} = \"{text}\"` has no valid unit; {usage}")),
        };
        rest = &rest[unit_len..];
        total_ms = number
            .checked_mul(factor)
            .and_then(|ms| ms.checked_add(total_ms))
            .ok_or_else(|| format!("`{key} = \"{text}\"` is too large"))?;
    }
    if total_ms == 0 {
        return Err(format!(
            "`{key} = \"{text}\"` is zero; a call needs time to run"
        ));
    }
    let secs =
        u64::try_from(total_ms / 1000).map_err(|_| format!("`{key} = \"{text}\"` is too large"))?;
    let nanos = u32::try_from((total_ms % 1000) * 1_000_000).unwrap_or(0);
    Ok((secs, nanos))
}

/// `retention = "..."`, with the error on the value.
pub(crate) fn retention(value: &LitStr) -> syn::Result<Retention> {
    parse_retention(&value.value()).ok_or_else(|| {
        syn::Error::new(
            value.span(),
            format!(
                "`{}` is no retention: write `keep_last(N)` (only the last N results stay whole in the model's requests), `turns(N)` (a result stays whole for N model turns) or `never_evict`, with N from 1 to 10000",
                value.value()
            ),
        )
    })
}

/// Reads `keep_last(N)`, `turns(N)` (N from 1 to 10 000) or `never_evict`:
/// the one reader of the spelling (the runtime's `Retention` writes it
/// back with `Display`).
fn parse_retention(text: &str) -> Option<Retention> {
    let text = text.trim();
    if text == "never_evict" {
        return Some(Retention::NeverEvict);
    }
    let count = |rest: &str| -> Option<u32> {
        let inner = rest.strip_prefix('(')?.strip_suffix(')')?.trim();
        inner
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=10_000).contains(n))
    };
    if let Some(rest) = text.strip_prefix("keep_last") {
        count(rest).map(Retention::KeepLast)
    } else if let Some(rest) = text.strip_prefix("turns") {
        count(rest).map(Retention::Turns)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{Retention, parse_duration, parse_retention};

    #[test]
    fn retention_reads_its_three_spellings() {
        let read = |text: &str| match parse_retention(text) {
            Some(Retention::KeepLast(n)) => Some(format!("keep_last({n})")),
            Some(Retention::Turns(n)) => Some(format!("turns({n})")),
            Some(Retention::NeverEvict) => Some("never_evict".to_owned()),
            Some(Retention::Budget) | None => None,
        };
        for (text, read_as) in [
            ("keep_last(3)", "keep_last(3)"),
            ("turns(10)", "turns(10)"),
            (" turns( 1 ) ", "turns(1)"),
            ("never_evict", "never_evict"),
        ] {
            assert_eq!(read(text).as_deref(), Some(read_as), "{text}");
        }
        for wrong in [
            "keep_last(0)",
            "turns(10001)",
            "keep_last",
            "last(3)",
            "turns(-1)",
            "",
        ] {
            assert_eq!(read(wrong), None, "{wrong}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("timeout", "500ms"), Ok((0, 500_000_000)));
        assert_eq!(parse_duration("timeout", "30s"), Ok((30, 0)));
        assert_eq!(parse_duration("timeout", "1m30s"), Ok((90, 0)));
        assert_eq!(parse_duration("timeout", "2h"), Ok((7200, 0)));
        for bad in ["", "0s", "30", "30sec", "soon", "s30", "1m 30s"] {
            assert!(
                parse_duration("timeout", bad).is_err(),
                "{bad:?} was accepted"
            );
        }
    }
}
