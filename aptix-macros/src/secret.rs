//! Which field names look like they hold a secret.
//!
//! `aptix-core` (`agent::redact`) carries the same rule for the fields the
//! macro cannot see; a unit test there compiles this file and checks that
//! both answer alike, so change both together. Only `std` is used here for
//! that reason.

/// Words that name a secret wherever they appear in a field name.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "secret",
    "secrets",
    "apikey",
    "apikeys",
    "privatekey",
    "credential",
    "credentials",
    "authorization",
    "bearer",
    "otp",
    "cvv",
    "cvc",
];

/// Words before `key`/`keys` that make it a secret key (`api_key`,
/// `privateKey`); a bare `key` is usually a lookup key.
const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "private",
    "access",
    "signing",
    "encryption",
    "master",
    "session",
    "ssh",
];

/// Words after `auth` that make it the credential (`auth_header`).
const AUTH_CREDENTIALS: &[&str] = &["header", "key", "code", "string", "value"];

/// Words after `token` that make it a measure or a kind, not a credential
/// (`token_count`, `token_type`).
const TOKEN_MEASURES: &[&str] = &[
    "count", "counts", "limit", "limits", "budget", "usage", "len", "length", "type", "kind", "id",
    "ids", "index", "estimate", "cost", "size", "total",
];

/// Words before `token` that make it a cursor or a count, not a
/// credential (`page_token`, `max_token`).
const TOKEN_NOT_CREDENTIAL: &[&str] = &[
    "page",
    "pagination",
    "continuation",
    "sync",
    "cancellation",
    "next",
    "max",
    "min",
    "num",
    "stop",
    "end",
    "start",
];

/// Words before a plural `tokens` that make them credentials
/// (`access_tokens`); a bare `tokens` counts model tokens.
const TOKENS_CREDENTIAL: &[&str] = &[
    "access", "refresh", "auth", "api", "bearer", "session", "id", "csrf", "oauth",
];

/// Whether a field called `name` (snake_case, camelCase, kebab-case or
/// SCREAMING_CASE) looks like it holds a secret.
pub(crate) fn looks_secret(name: &str) -> bool {
    let words = words(name);
    let at = |index: Option<usize>| index.and_then(|i| words.get(i)).map(String::as_str);
    words.iter().enumerate().any(|(i, word)| {
        let before = at(i.checked_sub(1));
        let after = at(Some(i + 1));
        match word.as_str() {
            word if SECRET_WORDS.contains(&word) => true,
            "key" | "keys" => before.is_some_and(|b| KEY_QUALIFIERS.contains(&b)),
            "auth" => after.is_none_or(|a| AUTH_CREDENTIALS.contains(&a)),
            "token" => {
                !after.is_some_and(|a| TOKEN_MEASURES.contains(&a))
                    && !before.is_some_and(|b| TOKEN_NOT_CREDENTIAL.contains(&b))
            }
            "tokens" => before.is_some_and(|b| TOKENS_CREDENTIAL.contains(&b)),
            _ => false,
        }
    })
}

/// `x-apiKey_2` → `["x", "api", "key", "2"]`: words split at non-alphanumeric
/// characters, at lower-to-upper and letter-to-digit changes, and before the
/// last capital of an acronym (`APIKey` → `api`, `key`); lowercased.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if let (false, Some(&prev)) = (
            current.is_empty(),
            i.checked_sub(1).and_then(|p| chars.get(p)),
        ) {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (c.is_uppercase() && (prev.is_lowercase() || prev.is_numeric()))
                || (c.is_uppercase() && prev.is_uppercase() && next_lower)
                || (c.is_numeric() != prev.is_numeric());
            if boundary {
                words.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::looks_secret;

    #[test]
    fn secret_looking_names() {
        for name in [
            "password",
            "userPassword",
            "PASSWORD",
            "db_passwd",
            "passphrase",
            "secret",
            "client_secret",
            "clientSecret",
            "api_key",
            "apiKey",
            "APIKey",
            "x-api-key",
            "apikey",
            "private_key",
            "privateKey",
            "ssh_key",
            "credentials",
            "credential",
            "token",
            "access_token",
            "accessToken",
            "refresh_token",
            "id_token",
            "OAuth2Token",
            "refresh_tokens",
            "auth",
            "basic_auth",
            "auth_header",
            "authorization",
            "bearer",
            "otp",
            "card_cvv",
        ] {
            assert!(looks_secret(name), "{name} should look secret");
        }
    }

    #[test]
    fn ordinary_names() {
        for name in [
            "max_tokens",
            "maxTokens",
            "tokens",
            "input_tokens",
            "token_count",
            "tokenCount",
            "token_type",
            "token_limit",
            "page_token",
            "nextPageToken",
            "continuation_token",
            "tokenizer",
            "key",
            "sort_key",
            "primary_key",
            "keyboard",
            "author",
            "auth_method",
            "auth_url",
            "city",
            "user",
            "passage",
            "secretary_name_is_long",
        ] {
            assert!(!looks_secret(name), "{name} should not look secret");
        }
    }
}
