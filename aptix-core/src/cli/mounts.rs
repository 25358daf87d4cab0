//! `--mcp-stdio`, `--mcp-http`, `--mcp-pin`: other MCP servers' tools
//! mounted beside the program's for one command, and `mcp-lock`.

use std::io::Write;
use std::process::ExitCode;

use super::CliError;
use crate::catalog::Catalog;
use crate::mcp::{McpLock, McpTools, McpToolset};

/// The servers to mount.
#[derive(Debug, Clone, Default, clap::Args)]
pub(super) struct Mounts {
    /// Mount the tools of an MCP server started with this command line
    /// (run by `sh -c`); repeatable.
    #[arg(long = "mcp-stdio", value_name = "CMD", global = true)]
    stdio: Vec<String>,
    /// Mount the tools of the MCP server at this Streamable HTTP URL
    /// (a bearer token from MCP_BEARER_TOKEN); repeatable.
    #[arg(long = "mcp-http", value_name = "URL", global = true)]
    http: Vec<String>,
    /// Offer only the mounted tools whose definitions this lock file
    /// (written by `mcp-lock`) holds.
    #[arg(long = "mcp-pin", value_name = "FILE", global = true)]
    pin: Option<std::path::PathBuf>,
}

impl Mounts {
    pub(super) fn is_empty(&self) -> bool {
        self.stdio.is_empty() && self.http.is_empty()
    }

    /// Connects every server; what a server refused to offer is noted on
    /// `stderr`.
    pub(super) async fn connect(&self, stderr: &mut impl Write) -> Result<Vec<McpTools>, CliError> {
        let lock = match &self.pin {
            Some(path) => Some(McpLock::read(path)?),
            None => None,
        };
        let mut toolsets = Vec::new();
        let mut labels: Vec<String> = Vec::new();
        for line in &self.stdio {
            let mut command = std::process::Command::new("sh");
            command.arg("-c").arg(format!("exec {line}"));
            // The program's name, never the line: its arguments may hold a
            // key, and the label is in every tool's usage text. Two servers
            // of one program are told apart by their order.
            let label = unique(program_of(line), &mut labels);
            toolsets.push(McpToolset::stdio(command).label(label));
        }
        for url in &self.http {
            // Scheme, host and port: two servers of one host are told
            // apart by their order.
            let label = unique(crate::mcp::client_url_label(url), &mut labels);
            let mut toolset = McpToolset::http(url.clone()).label(label);
            if let Some(token) = std::env::var("MCP_BEARER_TOKEN")
                .ok()
                .filter(|token| !token.is_empty())
            {
                toolset = toolset.bearer_token(token);
            }
            toolsets.push(toolset);
        }
        let mut mounted = Vec::new();
        for mut toolset in toolsets {
            if let Some(lock) = &lock {
                toolset = toolset.pin(lock.clone());
            }
            let tools = toolset.connect().await?;
            for refused in tools.refused() {
                writeln!(stderr, "note: {refused}")?;
            }
            mounted.push(tools);
        }
        Ok(mounted)
    }
}

/// `label`, or `label-2`, `label-3`, … when an earlier mount has it: a
/// lock file keeps each server's tools under its label.
fn unique(label: String, labels: &mut Vec<String>) -> String {
    let mut unique = label.clone();
    let mut nth = 1;
    while labels.contains(&unique) {
        nth += 1;
        unique = format!("{label}-{nth}");
    }
    labels.push(unique.clone());
    unique
}

/// The file name of the program a shell command line runs: its first word
/// that is not a variable assignment (`KEY=value cmd` sets `KEY` for `cmd`).
fn program_of(line: &str) -> String {
    let program = line
        .split_whitespace()
        .find(|word| {
            !word.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .unwrap_or("mcp-server");
    crate::mcp::client_program_label(std::ffi::OsStr::new(program))
}

/// The program's catalog with the mounted tools.
pub(super) fn catalog_with(catalog: &Catalog, mounted: &[McpTools]) -> Result<Catalog, CliError> {
    Ok(Catalog::builder()
        .entries(catalog.entries().cloned())
        .entries(mounted.iter().flat_map(McpTools::entries))
        .build()?)
}

/// `mcp-lock`: every mounted server's tools, as listed, in one file.
pub(super) fn write_lock(
    mounted: &[McpTools],
    out: &std::path::Path,
    stderr: &mut impl Write,
) -> Result<ExitCode, CliError> {
    let lock = mounted
        .iter()
        .fold(McpLock::default(), |lock, tools| lock.merge(tools.lock()));
    lock.write(out)?;
    let tools: usize = lock.servers.values().map(|tools| tools.len()).sum();
    writeln!(
        stderr,
        "wrote {tools} tools of {} MCP servers to {}; review it, commit it, and pass it with --mcp-pin",
        lock.servers.len(),
        out.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{program_of, unique};

    #[test]
    fn a_mounts_label_is_its_programs_name_without_arguments() {
        assert_eq!(program_of("python3 server.py --api-key=sk-1"), "python3");
        assert_eq!(
            program_of("GITHUB_TOKEN=ghp_1 /opt/bin/github-mcp stdio"),
            "github-mcp"
        );
        assert_eq!(program_of("  npx -y @modelcontextprotocol/server-x"), "npx");
        assert_eq!(program_of(""), "mcp-server");
    }

    #[test]
    fn two_mounts_of_one_program_or_host_get_their_own_labels() {
        let mut labels = Vec::new();
        assert_eq!(unique("python3".into(), &mut labels), "python3");
        assert_eq!(unique("python3".into(), &mut labels), "python3-2");
        assert_eq!(
            unique("http://127.0.0.1:8080".into(), &mut labels),
            "http://127.0.0.1:8080"
        );
        assert_eq!(unique("python3".into(), &mut labels), "python3-3");
    }
}
