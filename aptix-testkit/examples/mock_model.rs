//! A mock model provider serving the quickstart's conversation, so
//! `cargo run --example quickstart` runs against any provider's adapter
//! without a key or a network:
//!
//! ```text
//! cargo run -p aptix-testkit --example mock_model -- openai-chat
//! APTIX_PROVIDER=openai-chat
//! OPENAI_BASE_URL=http://127.0.0.1:PORT/v1
//! OPENAI_API_KEY=mock-key
//! ```
//!
//! Set the variables it prints in another shell and run the quickstart;
//! every run gets the same two turns (two calls in parallel, then an
//! answer) in that provider's wire format, until the mock is stopped
//! (Ctrl-C). It listens on a free port of 127.0.0.1, printed in the URL.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use aptix_core::model::provider::Provider;
use aptix_testkit::conformance::mock_model;

#[tokio::main]
async fn main() -> ExitCode {
    let name = std::env::args().nth(1).unwrap_or_default();
    let provider = match name.parse::<Provider>() {
        Ok(provider) => provider,
        Err(error) => {
            eprintln!("{error}\nusage: mock_model PROVIDER");
            return ExitCode::from(2);
        }
    };
    let Some(wire) = mock_model::wire(provider.as_str()) else {
        eprintln!("the testkit has no mock of {provider} yet");
        return ExitCode::from(2);
    };
    let server = match mock_model::serve(wire).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("the mock could not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    for (name, value) in mock_model::variables(provider, &server.url()) {
        println!("{name}={value}");
    }
    eprintln!("serving the quickstart's conversation as {provider}; Ctrl-C stops");
    // Serves until the process is stopped.
    std::future::pending::<()>().await;
    drop(server);
    ExitCode::SUCCESS
}
