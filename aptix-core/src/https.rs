//! The HTTP clients' TLS: rustls with ring's crypto.
//!
//! reqwest's default provider is aws-lc-rs, whose C build is the slowest
//! unit of a user's first build; ring serves the same TLS. reqwest is built
//! without a provider of its own, so one must be the process's default
//! before a client is built: ring's, unless the program installed another
//! first (its choice stands).

/// A reqwest client builder whose TLS has a crypto provider.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    // An error means a provider is installed already, which is all we need.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds_and_a_program_s_own_provider_stands() {
        assert!(super::client_builder().build().is_ok());
        // Installed by the first call; a second finds it and changes nothing.
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        assert!(super::client_builder().build().is_ok());
    }
}
