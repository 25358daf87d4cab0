//! `aptix::mcp` end to end with the official MCP Python SDK (PyPI `mcp`):
//! tests/mcp_python/e2e.py connects over stdio and over Streamable HTTP, in
//! both connection modes (the `initialize` handshake, and the 2026-07-28
//! `server/discover` era), and checks the listing against the insta
//! snapshots, every example tool's call, approvals through elicitation,
//! bad arguments, unknown tools and cancellation (see e2e.py's docstring).
//!
//! The server is this test binary: the example tools plus `sleep_ms`, a slow
//! tool that records in a file when it starts, finishes or sees its
//! cancellation, which e2e.py reads back.
//!
//! * HTTP: served in-process on `127.0.0.1:0`.
//! * stdio: e2e.py spawns this binary again, running only
//!   `child_serve_stdio`, selected by `APTIX_MCP_PY_ROLE`. libtest prints
//!   its own lines on standard output before any test runs, which would
//!   corrupt the protocol, so a `/bin/sh` wrapper moves the pipe to e2e.py
//!   to descriptor 3 and standard output to standard error; the child
//!   serves on standard input and descriptor 3 (`McpServer::serve_io`, the
//!   same transport `serve_stdio` builds on stdin/stdout).
//!
//! The Python interpreter (a venv with `mcp` installed) is
//! `APTIX_TEST_MCP_PYTHON`; `scripts/mcp-python.sh` makes one and prints its
//! path. Without it the tests pass with a notice, and fail when `CI=true`.

#![cfg(unix)]

use crate::{get_current_time, get_location, hello_world, send_email};

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aptix::Catalog;
use aptix::mcp::McpServer;
use aptix::prelude::*;

const PYTHON_ENV: &str = "APTIX_TEST_MCP_PYTHON";
const ROLE_ENV: &str = "APTIX_MCP_PY_ROLE";
const RECORD_ENV: &str = "APTIX_MCP_PY_RECORD";
const STDIO_ROLE: &str = "serve-stdio";
/// The longest e2e.py may run: a hang detector for a busy 2-core machine,
/// never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------
// The slow tool

/// Where `sleep_ms` records what happened to each call: one file per label
/// under `dir`, one word per line (`started`, then `finished` or
/// `cancelled`).
#[derive(Debug)]
struct Record {
    dir: PathBuf,
}

impl Record {
    fn note(&self, label: &str, event: &str) -> Result<(), ToolError> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(label))
            .map_err(ToolError::internal)?;
        file.write_all(format!("{event}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(ToolError::internal)
    }
}

/// Arguments of `sleep_ms`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SleepArgs {
    /// How long to sleep, in milliseconds.
    #[schemars(range(max = 60000))]
    pub ms: u64,
    /// Names the file that records this call.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,100}$"))]
    pub label: String,
}

/// Sleeps, unless its call is cancelled first; records which happened.
#[agent_tool(
    name = "sleep_ms",
    usage = "Test tool.",
    timeout = "90s",
    read_only = true
)]
async fn sleep_ms(args: SleepArgs, ctx: &ToolContext) -> Result<String, ToolError> {
    let record = ctx.require_state::<Record>()?;
    record.note(&args.label, "started")?;
    let slept = tokio::time::sleep(Duration::from_millis(args.ms));
    match ctx.cancellation().run_until_cancelled(slept).await {
        Some(()) => {
            record.note(&args.label, "finished")?;
            Ok(format!("slept {} ms", args.ms))
        }
        None => {
            record.note(&args.label, "cancelled")?;
            Err(ToolError::cancelled())
        }
    }
}

fn server(record_dir: &Path) -> McpServer {
    let catalog = Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .tool::<get_current_time::GetCurrentTimeTool>()
        .tool::<get_location::GetLocation>()
        .tool::<send_email::SendEmailTool>()
        .tool::<SleepMsTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let context = ToolContext::new()
        .with_state(send_email::Outbox::default())
        .with_state(Record {
            dir: record_dir.to_owned(),
        });
    McpServer::new(catalog).context(context)
}

/// Logs to standard error (kept out of the protocol), `RUST_LOG` or `warn`.
fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

// ---------------------------------------------------------------------------
// Running e2e.py

/// The venv's python, or `None` (after a notice) when it is not configured
/// outside CI.
fn python() -> Option<PathBuf> {
    match std::env::var_os(PYTHON_ENV) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "{PYTHON_ENV} is not set: CI must run the MCP end-to-end test with the Python client \
             (set it to the output of scripts/mcp-python.sh)"
        ),
        _ => {
            eprintln!(
                "note: {PYTHON_ENV} is not set, so the MCP Python end-to-end test does not run; \
                 set it with {PYTHON_ENV}=\"$(scripts/mcp-python.sh)\""
            );
            None
        }
    }
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "aptix-mcp-python-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs e2e.py with `transport` (its `--url URL` or `--stdio ... -- COMMAND`
/// arguments) and panics with its output unless it succeeds.
fn run_e2e(python: &Path, record_dir: &Path, transport: Vec<OsString>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(python);
    command
        .arg(root.join("tests/mcp_python/e2e.py"))
        .arg("--snapshots")
        .arg(root.join("tests/catalog/snapshots"))
        .arg("--record-dir")
        .arg(record_dir)
        .args(transport)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", python.display()));
    let stdout = child.stdout.take().map(read_all);
    let stderr = child.stderr.take().map(read_all);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("{e}")) {
            break Some(status);
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A server process e2e.py left behind could hold the pipes open: wait
    // for their ends a little, not for ever.
    let collect = |reader: Option<std::thread::JoinHandle<String>>| {
        let reader = reader?;
        let waited = Instant::now();
        while !reader.is_finished() && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if reader.is_finished() {
            reader.join().ok()
        } else {
            Some("(the stream is still open)".to_owned())
        }
    };
    let output = format!(
        "{}\n--- stderr ---\n{}",
        collect(stdout).unwrap_or_default(),
        collect(stderr).unwrap_or_default()
    );
    match status {
        Some(status) if status.success() => {
            println!("{output}");
            println!("e2e.py took {:.1} s", started.elapsed().as_secs_f64());
        }
        Some(status) => panic!("e2e.py failed ({status}); its output:\n{output}"),
        None => panic!(
            "e2e.py did not finish within {} s and was killed; its output:\n{output}",
            PATIENCE.as_secs()
        ),
    }
}

/// Reads `stream` to its end on a thread of its own.
fn read_all(mut stream: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    })
}

// ---------------------------------------------------------------------------
// The tests

#[test]
fn python_client_over_stdio() {
    if is_child() {
        return;
    }
    let Some(python) = python() else { return };
    let record = Scratch::new("stdio");
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let mut transport: Vec<OsString> = vec![
        "--server-env".into(),
        format!("{ROLE_ENV}={STDIO_ROLE}").into(),
        "--server-env".into(),
        {
            let mut pair = OsString::from(format!("{RECORD_ENV}="));
            pair.push(&record.0);
            pair
        },
    ];
    for name in ["RUST_LOG", "RUST_BACKTRACE"] {
        if let Ok(value) = std::env::var(name) {
            transport.extend(["--server-env".into(), format!("{name}={value}").into()]);
        }
    }
    // `exec` with descriptor 3 on the pipe to e2e.py, and libtest's own
    // standard output on standard error.
    transport.extend(
        [
            "--stdio",
            "--",
            "/bin/sh",
            "-c",
            r#"exec "$0" "$@" 3>&1 1>&2"#,
        ]
        .map(OsString::from),
    );
    transport.push(exe.into_os_string());
    transport.push(crate::common::test_name(module_path!(), "child_serve_stdio").into());
    transport.extend(["--exact", "--nocapture", "--test-threads=1"].map(OsString::from));
    run_e2e(&python, &record.0, transport);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_http() {
    if is_child() {
        return;
    }
    let Some(python) = python() else { return };
    init_tracing();
    let record = Scratch::new("http");
    let http = server(&record.0)
        .bind_http("127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|e| panic!("binding the MCP server: {e}"));
    let url = http.url();
    let record_dir = record.0.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        run_e2e(&python, &record_dir, vec!["--url".into(), url.into()]);
    })
    .await;
    let stopped = http.shutdown().await;
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
    stopped.unwrap_or_else(|e| panic!("stopping the MCP server: {e}"));
}

/// The stdio server that e2e.py spawns (see the module docs); does nothing
/// unless `APTIX_MCP_PY_ROLE` selects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_serve_stdio() {
    if std::env::var(ROLE_ENV).as_deref() != Ok(STDIO_ROLE) {
        return;
    }
    init_tracing();
    let record_dir = PathBuf::from(
        std::env::var_os(RECORD_ENV).unwrap_or_else(|| panic!("{RECORD_ENV} is not set")),
    );
    // The pipe to e2e.py, opened anew from descriptor 3 (see the
    // `/bin/sh` wrapper in `python_client_over_stdio`).
    let pipe = OpenOptions::new()
        .write(true)
        .open("/dev/fd/3")
        .unwrap_or_else(|e| panic!("opening descriptor 3: {e}"));
    let output = tokio::net::unix::pipe::Sender::from_file(pipe)
        .unwrap_or_else(|e| panic!("descriptor 3 is not a pipe: {e}"));
    server(&record_dir)
        .serve_io((tokio::io::stdin(), output))
        .await
        .unwrap_or_else(|e| panic!("the stdio server failed: {e}"));
}

fn is_child() -> bool {
    std::env::var_os(ROLE_ENV).is_some()
}
