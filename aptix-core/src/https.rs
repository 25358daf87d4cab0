//! The HTTP clients' TLS: rustls with ring's crypto.
//!
//! reqwest's default provider is aws-lc-rs, whose C build is the slowest
//! unit of a user's first build; ring serves the same TLS. reqwest is built
//! without a provider of its own, so one must be the process's default
//! before a client is built (by us, or by rmcp for a remote MCP server):
//! ring's, unless the program installed another first (its choice stands).

use std::sync::Once;

/// Makes ring the process's rustls provider, unless one is installed.
pub(crate) fn install_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means a provider is installed already, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A reqwest client builder whose TLS has a crypto provider.
#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    install_provider();
    reqwest::Client::builder()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds_once_a_provider_is_installed() {
        super::install_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        // A second call finds it installed and changes nothing.
        super::install_provider();
        assert!(reqwest::Client::builder().build().is_ok());
    }
}
