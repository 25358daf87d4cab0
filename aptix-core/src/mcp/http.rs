//! Streamable HTTP: rmcp's `StreamableHttpService` at `/mcp`, on axum.
//!
//! DNS-rebinding protection is rmcp's own Host/Origin check (403 on a
//! mismatch), configured here to be strict by default: only loopback names
//! *with the bound port* as `Host`, and, when a browser sends `Origin`,
//! only loopback origins with that port. A web page on another origin (or
//! reached through a rebound DNS name) therefore cannot drive the server.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{McpError, McpServer};

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// A running Streamable HTTP server. Dropping the handle leaves the server
/// running; call [`HttpServer::shutdown`] to stop it.
#[derive(Debug)]
pub struct HttpServer {
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), std::io::Error>>,
}

impl HttpServer {
    /// The address actually bound (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The endpoint's URL, `http://{local_addr}/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{PATH}", self.local_addr)
    }

    /// Stops accepting requests, closes every session, and waits for the
    /// server to finish.
    pub async fn shutdown(self) -> Result<(), McpError> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until the server stops (it only does on shutdown or failure).
    pub async fn wait(self) -> Result<(), McpError> {
        match self.task.await {
            Ok(result) => result.map_err(McpError::Io),
            Err(error) => Err(McpError::Task(error.to_string())),
        }
    }
}

/// The `Host` values accepted: loopback names with the bound port, then
/// the configured ones.
fn allowed_hosts(server: &McpServer, port: u16) -> Vec<String> {
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    hosts.extend(server.allowed_hosts.iter().cloned());
    hosts
}

/// The `Origin` values accepted: loopback origins with the bound port, then
/// the configured ones.
fn allowed_origins(server: &McpServer, port: u16) -> Vec<String> {
    let mut origins = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    origins.extend(server.allowed_origins.iter().cloned());
    origins
}

pub(crate) async fn bind(server: McpServer, addr: SocketAddr) -> Result<HttpServer, McpError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local_addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(&server, local_addr.port()))
        .with_allowed_origins(allowed_origins(&server, local_addr.port()))
        .enforce_origin_validation()
        // Closes open SSE streams on shutdown; graceful shutdown would wait
        // for them forever otherwise.
        .with_cancellation_token(shutdown.child_token());
    let handler = server.handler();
    let service = StreamableHttpService::new(
        move || Ok(handler.new_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().route_service(PATH, service);
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    tracing::info!(url = %format!("http://{local_addr}{PATH}"), "MCP server listening");
    Ok(HttpServer {
        local_addr,
        shutdown,
        task,
    })
}
