//! Choosing a provider without code: `APTIX_PROVIDER` names the adapter,
//! and that provider's usual variables configure it, so one binary (the
//! quickstart, the CLI's `chat`, a program of one's own) talks to any of
//! them by its environment.
//!
//! | `APTIX_PROVIDER` | adapter | variables | feature |
//! | --- | --- | --- | --- |
//! | `openai-chat` | Chat Completions ([`OpenAiChat`](super::openai::OpenAiChat)) | `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`, `OPENAI_STRUCTURED_OUTPUT` | `openai` |
//! | `openai-responses` | the Responses API | `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL` | `openai` |
//! | `anthropic` | Messages ([`Anthropic`](super::anthropic::Anthropic)) | `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` (required), `ANTHROPIC_MODEL` | `anthropic` |
//! | `gemini` | Gemini's native API | `GEMINI_BASE_URL`, `GEMINI_API_KEY`, `GEMINI_MODEL` | `gemini` |
//!
//! Without `APTIX_PROVIDER`, `OPENAI_BASE_URL` alone picks Chat Completions,
//! as before there was a choice; with neither, there is no model to build
//! (`Ok(None)`) and the caller uses its own offline one. The other
//! providers' keys are never guessed from: a machine with
//! `ANTHROPIC_API_KEY` set for another program does not change which model
//! this one talks to.
//!
//! Chat Completions sends strict tool schemas only to api.openai.com
//! (other servers, llama.cpp, vLLM, Ollama, often refuse them).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::{ChatModel, ModelError};

/// The variable that names the provider.
pub const PROVIDER_VAR: &str = "APTIX_PROVIDER";

/// A model provider an adapter speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI-compatible Chat Completions (`openai-chat`): OpenAI, vLLM,
    /// llama.cpp, Ollama, DeepSeek.
    OpenAiChat,
    /// OpenAI's Responses API (`openai-responses`).
    OpenAiResponses,
    /// Anthropic's Messages API (`anthropic`).
    Anthropic,
    /// Google's Gemini API (`gemini`).
    Gemini,
}

/// A provider name [`Provider::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is no provider; use openai-chat, openai-responses, anthropic or gemini")]
pub struct UnknownProvider(pub String);

impl Provider {
    /// Every provider, in the order of the table above.
    pub const ALL: [Provider; 4] = [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    /// The name `APTIX_PROVIDER` takes (`openai-chat`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "openai-chat",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The cargo feature of `aptix` its adapter needs.
    pub fn feature(self) -> &'static str {
        match self {
            Provider::OpenAiChat | Provider::OpenAiResponses => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The variables of its base URL, API key and model, in that order.
    pub fn variables(self) -> [&'static str; 3] {
        match self {
            Provider::OpenAiChat | Provider::OpenAiResponses => {
                ["OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"]
            }
            Provider::Anthropic => ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"],
            Provider::Gemini => ["GEMINI_BASE_URL", "GEMINI_API_KEY", "GEMINI_MODEL"],
        }
    }

    /// Its adapter, configured by its variables read through `lookup`.
    ///
    /// # Errors
    /// [`ModelError::Config`] when a variable is malformed or a required
    /// one is missing, or when this build lacks the provider's feature.
    pub fn build(
        self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn ChatModel>, ModelError> {
        self.build_described(lookup).map(|chosen| chosen.model)
    }

    // A build without any adapter uses neither: every arm refuses.
    #[cfg_attr(
        not(any(feature = "openai", feature = "anthropic", feature = "gemini")),
        allow(unused_variables)
    )]
    fn build_described(
        self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Chosen, ModelError> {
        let chosen = |model: Arc<dyn ChatModel>, described: String| Chosen {
            provider: self,
            model,
            described,
        };
        match self {
            #[cfg(feature = "openai")]
            Provider::OpenAiChat => {
                let model = super::openai::OpenAiChat::from_vars(lookup)?;
                // api.openai.com takes strict schemas; other servers often
                // refuse them and get the canonical schema.
                let strict = model.base_url().contains("api.openai.com");
                let model = model.with_strict(strict);
                let described = format!("{} at {}", model.model(), model.base_url());
                Ok(chosen(Arc::new(model), described))
            }
            #[cfg(feature = "openai")]
            Provider::OpenAiResponses => {
                let model = super::responses::OpenAiResponses::from_vars(lookup)?;
                let described = format!("{} at {}", model.model(), model.base_url());
                Ok(chosen(Arc::new(model), described))
            }
            #[cfg(feature = "anthropic")]
            Provider::Anthropic => {
                let model = super::anthropic::Anthropic::from_vars(lookup)?;
                let base_url = lookup("ANTHROPIC_BASE_URL")
                    .map(|url| url.trim().trim_end_matches('/').to_owned())
                    .filter(|url| !url.is_empty())
                    .unwrap_or_else(|| super::anthropic::DEFAULT_BASE_URL.to_owned());
                let described = format!("{} at {base_url}", model.model());
                Ok(chosen(Arc::new(model), described))
            }
            #[cfg(feature = "gemini")]
            Provider::Gemini => {
                let model = super::gemini::Gemini::from_vars(lookup)?;
                let described = format!("{} at {}", model.model(), described_base(self, lookup));
                Ok(chosen(Arc::new(model), described))
            }
            #[allow(unreachable_patterns)]
            _ => Err(ModelError::Config(format!(
                "{PROVIDER_VAR}={self} needs aptix's `{}` feature, which this build leaves out",
                self.feature()
            ))),
        }
    }
}

/// The base URL the provider's variable names, or its adapter's default.
#[cfg(feature = "gemini")]
fn described_base(provider: Provider, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let [base_url, _, _] = provider.variables();
    lookup(base_url)
        .map(|value| value.trim().trim_end_matches('/').to_owned())
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| super::gemini::DEFAULT_BASE_URL.to_owned())
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = UnknownProvider;

    /// `openai-chat`, `openai-responses`, `anthropic` or `gemini`, in any
    /// case, spaces around ignored.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let wanted = name.trim().to_ascii_lowercase();
        Provider::ALL
            .into_iter()
            .find(|provider| provider.as_str() == wanted)
            .ok_or_else(|| UnknownProvider(name.trim().to_owned()))
    }
}

/// The model the environment chose, with what to call it.
#[derive(Clone)]
pub struct Chosen {
    /// Which provider.
    pub provider: Provider,
    /// Its adapter.
    pub model: Arc<dyn ChatModel>,
    /// `model at base URL`, for a "model:" line (no key in it).
    pub described: String,
}

impl fmt::Debug for Chosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chosen")
            .field("provider", &self.provider)
            .field("described", &self.described)
            .finish_non_exhaustive()
    }
}

/// The provider the variables name: `APTIX_PROVIDER`, else Chat
/// Completions when `OPENAI_BASE_URL` is set, else none. Empty values
/// count as unset.
///
/// # Errors
/// [`ModelError::Config`] when `APTIX_PROVIDER` names no provider.
pub fn provider_from_vars(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<Provider>, ModelError> {
    let var = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
    if let Some(name) = var(PROVIDER_VAR) {
        return name.parse().map(Some).map_err(|error: UnknownProvider| {
            ModelError::Config(format!("{PROVIDER_VAR}: {error}"))
        });
    }
    Ok(var("OPENAI_BASE_URL").map(|_| Provider::OpenAiChat))
}

/// The model the process environment chooses (see the module's table), or
/// `None` when it names none.
///
/// # Errors
/// As [`from_vars`].
pub fn from_env() -> Result<Option<Arc<dyn ChatModel>>, ModelError> {
    from_vars(|name| std::env::var(name).ok())
}

/// As [`from_env`], reading the variables through `lookup` (a
/// configuration file, a test's map) instead of the process environment.
///
/// # Errors
/// [`ModelError::Config`] when `APTIX_PROVIDER` names no provider, the
/// chosen provider's variables are malformed or a required one is missing,
/// or this build lacks its feature.
pub fn from_vars(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn ChatModel>>, ModelError> {
    Ok(chosen_from_vars(lookup)?.map(|chosen| chosen.model))
}

/// As [`from_env`], with the provider and a description of the model for a
/// "model:" line.
///
/// # Errors
/// As [`from_vars`].
pub fn chosen_from_env() -> Result<Option<Chosen>, ModelError> {
    chosen_from_vars(|name| std::env::var(name).ok())
}

/// As [`from_vars`], with the provider and a description of the model.
///
/// # Errors
/// As [`from_vars`].
pub fn chosen_from_vars(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<Chosen>, ModelError> {
    match provider_from_vars(&lookup)? {
        Some(provider) => provider.build_described(&lookup).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn names_parse_both_ways() {
        for provider in Provider::ALL {
            assert_eq!(provider.as_str().parse::<Provider>(), Ok(provider));
            assert_eq!(provider.to_string(), provider.as_str());
        }
        assert_eq!(" Anthropic ".parse::<Provider>(), Ok(Provider::Anthropic));
        let unknown = "openai".parse::<Provider>();
        assert_eq!(unknown, Err(UnknownProvider("openai".into())));
        assert!(
            unknown
                .err()
                .is_some_and(|error| error.to_string().contains("openai-chat"))
        );
    }

    #[test]
    fn nothing_set_chooses_nothing() -> Result<(), ModelError> {
        assert_eq!(provider_from_vars(vars(&[]))?, None);
        assert!(from_vars(vars(&[]))?.is_none());
        // Other providers' keys alone choose nothing either.
        assert!(from_vars(vars(&[("ANTHROPIC_API_KEY", "k"), ("GEMINI_API_KEY", "k")]))?.is_none());
        assert!(from_vars(vars(&[("APTIX_PROVIDER", " "), ("OPENAI_BASE_URL", "")]))?.is_none());
        Ok(())
    }

    #[test]
    fn an_unknown_provider_is_a_config_error_naming_the_choices() {
        let error = from_vars(vars(&[("APTIX_PROVIDER", "cohere")])).err();
        assert!(
            matches!(&error, Some(ModelError::Config(message))
                if message.contains("cohere") && message.contains("openai-responses")),
            "{error:?}"
        );
    }

    #[cfg(feature = "openai")]
    #[test]
    fn openai_base_url_alone_is_chat_completions_as_before() -> Result<(), ModelError> {
        let lookup = vars(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")]);
        assert_eq!(provider_from_vars(&lookup)?, Some(Provider::OpenAiChat));
        let chosen = chosen_from_vars(&lookup)?;
        let chosen = chosen.as_ref().map(|c| (c.provider, c.described.as_str()));
        assert_eq!(
            chosen,
            Some((
                Provider::OpenAiChat,
                "gpt-4o-mini at http://127.0.0.1:8080/v1"
            ))
        );
        // The chat adapter's own checks still apply.
        let bad = from_vars(vars(&[("OPENAI_BASE_URL", "ftp://host")])).err();
        assert!(matches!(bad, Some(ModelError::Config(_))), "{bad:?}");
        Ok(())
    }

    #[cfg(feature = "openai")]
    #[test]
    fn aptix_provider_openai_chat_reads_the_openai_variables() -> Result<(), ModelError> {
        let chosen = chosen_from_vars(vars(&[
            ("APTIX_PROVIDER", "openai-chat"),
            ("OPENAI_MODEL", "qwen3"),
            ("ANTHROPIC_BASE_URL", "http://elsewhere"),
        ]))?;
        let described = chosen.map(|chosen| chosen.described);
        assert_eq!(
            described.as_deref(),
            Some("qwen3 at https://api.openai.com/v1")
        );
        Ok(())
    }

    #[cfg(feature = "anthropic")]
    #[test]
    fn aptix_provider_anthropic_reads_the_anthropic_variables() -> Result<(), ModelError> {
        let lookup = vars(&[
            ("APTIX_PROVIDER", "anthropic"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9999"),
            ("ANTHROPIC_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
        ]);
        let chosen = chosen_from_vars(&lookup)?;
        let chosen = chosen.as_ref().map(|c| (c.provider, c.described.as_str()));
        assert_eq!(
            chosen,
            Some((
                Provider::Anthropic,
                "claude-sonnet-4-5 at http://127.0.0.1:9999"
            ))
        );
        assert!(
            !chosen_from_vars(&lookup)?
                .is_some_and(|chosen| format!("{chosen:?}").contains("sk-test")),
            "the key is never shown"
        );
        let missing = from_vars(vars(&[("APTIX_PROVIDER", "anthropic")])).err();
        assert!(
            matches!(&missing, Some(ModelError::Config(message)) if message.contains("ANTHROPIC_API_KEY")),
            "{missing:?}"
        );
        Ok(())
    }

    #[test]
    fn a_named_provider_is_built_or_refused_never_skipped() {
        // Before its adapter is wired in, a refusal naming it; after, an
        // adapter or a refusal of its missing key: never the offline model.
        for provider in Provider::ALL {
            let chosen = from_vars(vars(&[("APTIX_PROVIDER", provider.as_str())]));
            match chosen {
                Ok(model) => assert!(model.is_some(), "{provider}"),
                Err(ModelError::Config(message)) => assert!(
                    message.contains(provider.as_str()) || message.contains("_API_KEY"),
                    "{provider}: {message}"
                ),
                Err(other) => panic!("{provider}: {other}"),
            }
        }
    }
}
