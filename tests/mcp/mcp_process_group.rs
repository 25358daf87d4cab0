//! A stdio MCP server started through a launcher (`npx`, `uvx`) is the
//! launcher's child: closing or dropping the toolset ends both, the whole
//! process group, even when the launcher itself exits on its closed stdin.
#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use aptix::mcp::McpToolset;

/// The plain-Python stdio server, starting a child of its own that writes
/// "SERVER_PID CHILD_PID" to `pidfile`.
fn launcher(pidfile: &Path) -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/mcp_python/plain_stdio_server.py"
        ))
        .arg("--spawn-child")
        .arg(pidfile);
    command
}

/// The two pids the server wrote, once it has.
async fn pids(pidfile: &Path) -> [u32; 2] {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(pidfile) {
            let pids: Vec<u32> = text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if let [server, child] = pids[..] {
                return [server, child];
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server wrote no pids to {}", pidfile.display());
}

/// Whether `pid` still runs (a zombie, dead and not yet reaped, does not).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Waits up to 5 s for every pid of `pids` to stop running.
async fn all_gone(pids: [u32; 2]) -> Vec<u32> {
    for _ in 0..500 {
        if !pids.iter().any(|&pid| running(pid)) {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pids.into_iter().filter(|&pid| running(pid)).collect()
}

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("aptix-{name}-{}.pids", std::process::id()))
}

#[tokio::test]
async fn closing_the_toolset_ends_the_server_and_what_it_started() {
    let pidfile = scratch("close");
    let _ = std::fs::remove_file(&pidfile);
    let tools = McpToolset::stdio(launcher(&pidfile))
        .connect()
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let pids = pids(&pidfile).await;
    assert!(pids.iter().all(|&pid| running(pid)), "both run: {pids:?}");
    tools.close().await;
    let left = all_gone(pids).await;
    let _ = std::fs::remove_file(&pidfile);
    assert!(
        left.is_empty(),
        "still running after close: {left:?} of {pids:?}"
    );
}

#[tokio::test]
async fn dropping_the_toolset_ends_the_server_and_what_it_started() {
    let pidfile = scratch("drop");
    let _ = std::fs::remove_file(&pidfile);
    let tools = McpToolset::stdio(launcher(&pidfile))
        .connect()
        .await
        .unwrap_or_else(|error| panic!("connect: {error}"));
    let pids = pids(&pidfile).await;
    assert!(pids.iter().all(|&pid| running(pid)), "both run: {pids:?}");
    drop(tools);
    let left = all_gone(pids).await;
    let _ = std::fs::remove_file(&pidfile);
    assert!(
        left.is_empty(),
        "still running after drop: {left:?} of {pids:?}"
    );
}
