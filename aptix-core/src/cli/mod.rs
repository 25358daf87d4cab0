//! The developer CLI: any binary with tools gets `tools`, `schema`, `call`,
//! `chat` (and `mcp` with the `mcp` feature) in one line.
//!
//! ```no_run
//! # fn catalog() -> aptix_core::Catalog { unimplemented!() }
//! fn main() -> std::process::ExitCode {
//!     aptix_core::cli::Cli::new(catalog())
//!         .context(aptix_core::ToolContext::new()) // the state your tools read
//!         .main()
//! }
//! ```
//!
//! Why a library and not a binary of its own: tools are compiled into the
//! user's binary, named in the user's catalog, and read the user's state
//! from a [`ToolContext`], so only the user's binary can list, describe and
//! run them. [`Cli`] gives that binary the commands.
//!
//! Everything goes through [`Cli::run`], which takes the arguments, standard
//! input and both outputs as parameters: tests drive every command with byte
//! buffers, and [`Cli::main`] / [`Cli::run_process`] only wire the process's
//! own streams to it.
//!
//! Exit statuses: `0` success; `1` a failed envelope (`ok: false`), a
//! refused approval, a schema that cannot be lowered, a model error in
//! `chat`, an I/O error; `2` a usage error or an unknown tool name. A call
//! that ends waiting for a client or a person exits `0`: the server's part
//! (validation, the preflight) succeeded, and its payload is printed as JSON
//! for whoever must act.

mod call;
mod chat;
#[cfg(feature = "mcp-client")]
mod mounts;
mod schema;
mod tools;

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;
use serde_json::Value;

use crate::agent::AgentError;
use crate::catalog::Catalog;
use crate::context::ToolContext;
use crate::envelope::{Envelope, EnvelopeError, EnvelopeIds};
use crate::model::{ChatModel, ModelError};
use crate::schema::{Dialect, DialectError};

/// The developer CLI over one catalog: build it, then call [`Cli::main`]
/// (or [`Cli::run`] with your own streams).
#[derive(Clone)]
pub struct Cli {
    catalog: Catalog,
    context: ToolContext,
    model: Option<Arc<dyn ChatModel>>,
    system: Option<String>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cli")
            .field("catalog", &self.catalog)
            .field("model", &self.model.as_ref().map(|_| "<dyn ChatModel>"))
            .field("system", &self.system)
            .finish_non_exhaustive()
    }
}

/// The command line: one subcommand.
#[derive(Debug, Parser)]
#[command(
    about = "Inspect, run and chat with this program's agent tools.",
    long_about = None,
    disable_version_flag = true,
)]
struct Args {
    #[command(subcommand)]
    command: Command,
    #[cfg(feature = "mcp-client")]
    #[command(flatten)]
    mounts: mounts::Mounts,
}

/// The subcommands, public so that a program with a clap CLI of its own can
/// embed them (`#[command(flatten)]` or as a nested subcommand) and hand the
/// parsed value to [`Cli::execute`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum Command {
    /// List the tools: name, executor, approval, description.
    Tools,
    /// Print a tool's definition as JSON, canonical or as a provider expects it.
    Schema {
        /// The tool's name.
        name: String,
        /// The dialect to lower the definition to.
        #[arg(long, value_enum, default_value_t = SchemaDialect::Canonical)]
        dialect: SchemaDialect,
    },
    /// Run one call through the executor and print its envelope.
    Call {
        /// The tool's name.
        name: String,
        /// The arguments as JSON (default `{}`); `-` reads them from standard input.
        arguments: Option<String>,
        /// Approve an approval-gated call without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// The tool call id (tools may use it as an idempotency key).
        #[arg(long, default_value = "cli_call_1")]
        id: String,
    },
    /// Chat with an agent that can call the tools; approvals are asked inline.
    ///
    /// Uses the provider APTIX_PROVIDER names (openai-chat,
    /// openai-responses, anthropic, gemini) with its variables
    /// (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GEMINI_BASE_URL, their _API_KEY
    /// and _MODEL), or Chat Completions when only OPENAI_BASE_URL is set, and
    /// the program's offline model otherwise. `/quit` or end of input leaves.
    Chat {
        /// Use the program's offline model even when a provider is configured.
        #[arg(long)]
        offline: bool,
    },
    /// Write the reviewed definitions of the mounted MCP servers' tools
    /// (`--mcp-stdio`, `--mcp-http`) to a lock file, for `--mcp-pin`.
    #[cfg(feature = "mcp-client")]
    #[command(name = "mcp-lock")]
    McpLock {
        /// The lock file to write.
        #[arg(long, default_value = "mcp.lock.json")]
        out: std::path::PathBuf,
    },
    /// Serve the tools over the Model Context Protocol (stdio by default).
    #[cfg(feature = "mcp")]
    Mcp {
        /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8080) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
    },
}

/// The `--dialect` of `schema`: the provider dialects, plus the canonical
/// definition that every dialect is lowered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[non_exhaustive]
pub enum SchemaDialect {
    /// The canonical definition: name, description, usage, executor,
    /// approval, parameters and output schema.
    Canonical,
    /// OpenAI function tools, strict mode.
    #[value(alias = "openai_strict")]
    Openai,
    /// Anthropic Messages API tools.
    Anthropic,
    /// Gemini function declarations.
    Gemini,
    /// MCP `tools/list` entries.
    Mcp,
}

impl SchemaDialect {
    /// The provider dialect, or `None` for the canonical definition.
    pub fn dialect(self) -> Option<Dialect> {
        match self {
            SchemaDialect::Canonical => None,
            SchemaDialect::Openai => Some(Dialect::OpenAiStrict),
            SchemaDialect::Anthropic => Some(Dialect::Anthropic),
            SchemaDialect::Gemini => Some(Dialect::Gemini),
            SchemaDialect::Mcp => Some(Dialect::Mcp),
        }
    }
}

/// Why a command could not do its job. Failed tool calls are not errors:
/// their envelope is the output, with exit status 1.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The command line is wrong; clap's message says how.
    #[error("{0}")]
    Usage(#[from] clap::Error),
    /// No tool has this name.
    #[error(
        "there is no tool named `{name}`; available tools: {}",
        list(available)
    )]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// Every tool name in the catalog, sorted.
        available: Vec<String>,
    },
    /// The definition cannot be expressed in the dialect asked for.
    #[error(transparent)]
    Dialect(#[from] DialectError),
    /// Reading the input or writing the output failed.
    #[error("input/output failed: {0}")]
    Io(#[from] std::io::Error),
    /// The chat model could not be configured (e.g. a malformed `OPENAI_BASE_URL`,
    /// an unknown `APTIX_PROVIDER`).
    #[error("the chat model: {0}")]
    Model(#[from] ModelError),
    /// The chat agent could not be built (e.g. a tool the model's dialect cannot express).
    #[error("the chat agent: {0}")]
    Agent(#[from] AgentError),
    /// The MCP server could not start or stopped with an error.
    #[cfg(feature = "mcp")]
    #[error("the MCP server: {0}")]
    Mcp(#[from] crate::mcp::McpError),
    /// A mounted MCP server could not be reached or listed.
    #[cfg(feature = "mcp-client")]
    #[error("{0}")]
    McpClient(#[from] crate::mcp::McpClientError),
    /// The mounted tools and the program's do not make one catalog (a
    /// name both have, say).
    #[error("{0}")]
    Catalog(#[from] crate::catalog::CatalogError),
    /// No async runtime could be started for [`Cli::main`].
    #[error("could not start the async runtime: {0}")]
    Runtime(std::io::Error),
}

impl CliError {
    /// The process exit status for this error: 2 for usage errors and unknown
    /// tools (the command line must change), 1 otherwise.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code())
    }

    /// [`CliError::exit_code`] as a number, for tests and wrappers.
    pub fn code(&self) -> u8 {
        match self {
            CliError::Usage(error) => u8::try_from(error.exit_code()).unwrap_or(2),
            CliError::UnknownTool { .. } => 2,
            _ => 1,
        }
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

impl Cli {
    /// A CLI over `catalog`, with an empty base context and no offline model.
    pub fn new(catalog: Catalog) -> Self {
        Cli {
            catalog,
            context: ToolContext::new(),
            model: None,
            system: None,
        }
    }

    /// The base context of every call (`call`, `chat`): put the state your
    /// tools read with `ctx.state::<T>()` here, as your application does.
    pub fn context(mut self, context: ToolContext) -> Self {
        self.context = context;
        self
    }

    /// The model `chat` uses when the environment names no provider
    /// (neither `APTIX_PROVIDER` nor `OPENAI_BASE_URL` is set; or with
    /// `--offline`), e.g. an `aptix_testkit::ScriptedModel`. Without one,
    /// `chat` falls back to a built-in offline model that echoes, and calls
    /// a tool when a line reads `TOOL_NAME {json arguments}`.
    pub fn model(self, model: impl ChatModel + 'static) -> Self {
        self.shared_model(Arc::new(model))
    }

    /// [`Cli::model`] for a model already shared.
    pub fn shared_model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// The system prompt of `chat` (default: a short assistant prompt with
    /// the catalog's usage prompt).
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// The catalog the commands work on.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Parses `args` (the program name first, as in `std::env::args_os`) and
    /// runs the command, reading `stdin` and writing `stdout` / `stderr`.
    ///
    /// Results (tables, JSON) go to `stdout`; prompts and notes for the
    /// person at the terminal go to `stderr`, so `stdout` stays pipeable
    /// (`call ... | jq`). `--help` is written to `stdout` and is a success.
    /// Errors are returned, not printed: [`Cli::run_process`] prints them.
    pub async fn run<I, T>(
        &self,
        args: I,
        stdin: &mut impl BufRead,
        stdout: &mut impl Write,
        stderr: &mut impl Write,
    ) -> Result<ExitCode, CliError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args = match Args::try_parse_from(args) {
            Ok(args) => args,
            Err(error) if matches!(error.kind(), ErrorKind::DisplayHelp) => {
                write!(stdout, "{}", error.render())?;
                stdout.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            Err(error) => return Err(CliError::Usage(error)),
        };
        #[cfg(feature = "mcp-client")]
        if !args.mounts.is_empty() {
            let mounted = args.mounts.connect(stderr).await?;
            if let Command::McpLock { out } = &args.command {
                return mounts::write_lock(&mounted, out, stderr);
            }
            let cli = Cli {
                catalog: mounts::catalog_with(&self.catalog, &mounted)?,
                ..self.clone()
            };
            return cli.execute(args.command, stdin, stdout, stderr).await;
        }
        self.execute(args.command, stdin, stdout, stderr).await
    }

    /// Runs an already parsed command (see [`Command`]).
    pub async fn execute(
        &self,
        command: Command,
        stdin: &mut impl BufRead,
        stdout: &mut impl Write,
        stderr: &mut impl Write,
    ) -> Result<ExitCode, CliError> {
        let code = match command {
            Command::Tools => tools::run(&self.catalog, stdout)?,
            Command::Schema { name, dialect } => {
                schema::run(&self.catalog, &name, dialect, stdout)?
            }
            Command::Call {
                name,
                arguments,
                yes,
                id,
            } => {
                let request = call::Request {
                    name: &name,
                    arguments: arguments.as_deref(),
                    yes,
                    id: &id,
                };
                call::run(self, request, stdin, stdout, stderr).await?
            }
            Command::Chat { offline } => chat::run(self, offline, stdin, stdout, stderr).await?,
            #[cfg(feature = "mcp-client")]
            Command::McpLock { .. } => {
                writeln!(
                    stderr,
                    "mcp-lock: no MCP server is mounted; give --mcp-stdio 'CMD' or --mcp-http URL"
                )?;
                ExitCode::from(2)
            }
            #[cfg(feature = "mcp")]
            Command::Mcp { http } => {
                // The same base context as `call` and `chat`: the tools'
                // state. The stdio transport owns the process's own
                // stdin/stdout (the protocol), not the given streams; notes
                // go to `stderr`, which MCP clients show as the server's log.
                let server =
                    crate::mcp::McpServer::new(self.catalog.clone()).context(self.context.clone());
                let tools = self.catalog.len();
                match http {
                    Some(addr) => {
                        let running = server.bind_http(addr).await?;
                        writeln!(
                            stderr,
                            "serving {tools} tools over MCP at {}",
                            running.url()
                        )?;
                        stderr.flush()?;
                        running.wait().await?;
                    }
                    None => {
                        writeln!(stderr, "serving {tools} tools over MCP on stdio")?;
                        stderr.flush()?;
                        server.serve_stdio().await?;
                    }
                }
                ExitCode::SUCCESS
            }
        };
        stdout.flush()?;
        Ok(code)
    }

    /// [`Cli::run`] on this process: `std::env::args_os()`, standard input
    /// and output. Errors are printed on standard error and become the exit
    /// status. For a `main` that already runs in a Tokio runtime
    /// (`#[tokio::main]`); otherwise use [`Cli::main`].
    pub async fn run_process(&self) -> ExitCode {
        // Unlocked handles (each call locks briefly): `mcp` serves stdio
        // through Tokio, whose reads and writes take the same std locks, so
        // holding them for the whole run would deadlock it. This reader
        // buffers only what a command itself reads, never what `mcp` serves.
        let mut stdin = std::io::BufReader::new(std::io::stdin());
        let mut stdout = std::io::stdout();
        let mut stderr = std::io::stderr();
        let result = self
            .run(std::env::args_os(), &mut stdin, &mut stdout, &mut stderr)
            .await;
        report(result)
    }

    /// The whole `main` of a CLI binary: starts a single-threaded Tokio
    /// runtime and runs [`Cli::run_process`] on it.
    ///
    /// Must not be called from inside a Tokio runtime (Tokio refuses to
    /// block a runtime's thread on another); there, await
    /// [`Cli::run_process`] instead.
    pub fn main(self) -> ExitCode {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        match runtime {
            Ok(runtime) => runtime.block_on(self.run_process()),
            Err(error) => report(Err(CliError::Runtime(error))),
        }
    }
}

/// `Cli::new(catalog).main()`: the CLI for a binary whose tools need no
/// state. Blocking; see [`Cli::main`].
pub fn main(catalog: Catalog) -> ExitCode {
    Cli::new(catalog).main()
}

/// The exit status of a run, printing its error on standard error.
fn report(result: Result<ExitCode, CliError>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(CliError::Usage(error)) => {
            // clap's own printing: coloured when standard error is a terminal.
            let _ = error.print();
            ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
        }
        // `aptix tools | head`: the reader left, nothing is wrong.
        Err(CliError::Io(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            error.exit_code()
        }
    }
}

/// The error of a name that is not in the catalog.
fn unknown_tool(catalog: &Catalog, name: &str) -> CliError {
    CliError::UnknownTool {
        name: name.to_owned(),
        available: catalog.names().map(str::to_owned).collect(),
    }
}

/// Writes `value` as pretty JSON and a newline.
fn write_pretty(out: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// An envelope as pretty JSON with its members in envelope order (`ok`
/// first): a `serde_json::Value` would sort them, and the envelope's own
/// serialization writes the result as one compact raw string.
#[derive(Serialize)]
struct PrettyEnvelope<'a> {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a EnvelopeError>,
    tool_call_id: &'a str,
    conversation_id: Option<&'a str>,
    session_id: Option<&'a str>,
}

impl<'a> PrettyEnvelope<'a> {
    fn new(envelope: &'a Envelope) -> Self {
        PrettyEnvelope {
            ok: envelope.is_ok(),
            result: envelope.result().map(|result| result.to_value()),
            error: envelope.error_body(),
            tool_call_id: envelope.tool_call_id(),
            conversation_id: envelope.conversation_id(),
            session_id: envelope.session_id(),
        }
    }
}

/// The ids of an envelope the CLI makes itself (a refusal, a typed answer).
fn envelope_ids(tool_call_id: &str, context: &ToolContext) -> EnvelopeIds {
    EnvelopeIds {
        tool_call_id: tool_call_id.into(),
        conversation_id: context.conversation_id().map(Into::into),
        session_id: context.session_id().map(Into::into),
    }
}

/// One line of input without its line ending; `None` at end of input.
fn read_line(stdin: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    if stdin.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let trimmed = line.trim_end_matches(['\n', '\r']).len();
    line.truncate(trimmed);
    Ok(Some(line))
}

/// Asks a yes/no question; only `y` or `yes` (any case) is a yes, and end
/// of input is a no: nothing runs unless someone said so.
fn confirm(
    stdin: &mut impl BufRead,
    prompt_to: &mut impl Write,
    question: &str,
) -> std::io::Result<bool> {
    write!(prompt_to, "{question}")?;
    prompt_to.flush()?;
    let Some(answer) = read_line(stdin)? else {
        writeln!(prompt_to, "\n(no answer: refused)")?;
        return Ok(false);
    };
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
