//! Durable conversations across real OS processes, on one shared store
//! (a SQLite file, and PostgreSQL at `APTIX_TEST_PG_URL`).
//!
//! - Racing resolutions: each round suspends one call, then `RACERS`
//!   processes resolve it at the same moment, each differently; exactly one
//!   wins, the others are refused as `Stale` (same resolution) or
//!   `Conflict` (a different one), and the winner's process resumes the
//!   conversation with the winner's resolution in the transcript.
//! - SIGKILL: a process suspends on an approval while two slow server
//!   tools run, and is killed. A restarted process revives the
//!   conversation: the idempotent tool runs again with the same
//!   `tool_call_id`, the other gets an "interrupted" `cancelled` result and
//!   never runs a second time, the approved tool runs once.
//! - Leases: a live process whose tools outlive its lease keeps the
//!   conversation (its run renews the lease), and a resolution that arrives
//!   while a dead process's lease is still valid resumes the conversation
//!   once that lease runs out.
//!
//! The parent tests re-execute this test binary, running only one of the
//! `child_*` functions (with `--exact`), selected by `APTIX_DP_ROLE`.
//! Without it the `child_*` functions do nothing and pass. Tools record
//! every start and finish in a side-channel file (appended and fsync'd, so
//! it survives SIGKILL), which tells what ran where, and how often.
//! Every test runs on a multi-thread runtime: a parent blocks its own
//! thread while it waits on a child (its pipe, its exit), and the runtime's
//! workers meanwhile run the store's tasks.
//!
//! PostgreSQL tests skip with a notice when `APTIX_TEST_PG_URL` is unset,
//! and fail when `CI=true`.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead as _, BufReader, Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{Backend, TempDb, pg_url, test_name, uuid};
use crate::tools::Confirm;
use aptix::durable::{DurableAgent, Revival};
use aptix::prelude::*;
use aptix::store::{CallState, ConversationStatus, Step, Store};
use aptix::transcript::Message;
use aptix::{
    Agent, AgentEvent, Catalog, Conversation, DoneReason, Input, Resolution, durable::ResolveError,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// Processes racing to resolve the same call, per round.
const RACERS: usize = 4;
const POSTGRES_ROUNDS: usize = 25;
const SQLITE_ROUNDS: usize = 10;
/// The longest wait for anything a child process does; generous, for a
/// busy 2-core machine. Never a timing assertion: only a hang detector.
const PATIENCE: Duration = Duration::from_secs(30);
/// The lease of the killed and the restarted process: the restart can take
/// over soon after the kill.
const SHORT_LEASE: Duration = Duration::from_millis(500);
/// How long the slow tools sleep in the process that is killed.
const SLOW_BEFORE_KILL_MS: u64 = 30_000;
/// How long they sleep after the restart.
const SLOW_AFTER_RESTART_MS: u64 = 50;

const ROLE_ENV: &str = "APTIX_DP_ROLE";
const SIDE_ENV: &str = "APTIX_DP_SIDE";
const SLOW_ENV: &str = "APTIX_DP_SLOW_MS";
const RELEASE_ENV: &str = "APTIX_DP_RELEASE";
const LEASE_ENV: &str = "APTIX_DP_LEASE_MS";
const WATCH_ENV: &str = "APTIX_DP_WATCH_MS";
/// What children print for the parent, after this prefix.
const LINE: &str = "APTIX_DP ";

// ---------------------------------------------------------------------------
// Tools

/// Arguments of `pay`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Pay {
    /// The amount in cents.
    #[schemars(range(min = 1, max = 100000))]
    pub cents: u32,
}

/// Pays, once a person approves.
#[agent_tool(name = "pay", usage = "Test tool.", approval = requires_approval)]
async fn pay(args: Pay, ctx: &ToolContext) -> Result<String, ToolError> {
    side_channel("pay", ctx.tool_call_id(), "start");
    side_channel("pay", ctx.tool_call_id(), "done");
    Ok(format!("paid {}", args.cents))
}

/// Arguments of the slow tools.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Batch {
    /// Which batch.
    pub batch: String,
}

/// Imports a batch, slowly; safe to repeat with the same call id.
#[agent_tool(name = "slow_import", usage = "Test tool.", idempotent = true)]
async fn slow_import(args: Batch, ctx: &ToolContext) -> Result<String, ToolError> {
    side_channel("slow_import", ctx.tool_call_id(), "start");
    work().await;
    side_channel("slow_import", ctx.tool_call_id(), "done");
    Ok(format!("imported {}", args.batch))
}

/// Charges for a batch, slowly; not safe to repeat.
#[agent_tool(name = "slow_charge", usage = "Test tool.")]
async fn slow_charge(args: Batch, ctx: &ToolContext) -> Result<String, ToolError> {
    side_channel("slow_charge", ctx.tool_call_id(), "start");
    work().await;
    side_channel("slow_charge", ctx.tool_call_id(), "done");
    Ok(format!("charged {}", args.batch))
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<PayTool>()
        .tool::<SlowImportTool>()
        .tool::<SlowChargeTool>()
        .tool::<Confirm>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The slow tools' work: sleeps for `APTIX_DP_SLOW_MS`, or, when
/// `APTIX_DP_RELEASE` names a file, until that file exists (at most 30 s).
async fn work() {
    let started = Instant::now();
    let release = std::env::var_os(RELEASE_ENV).map(PathBuf::from);
    while started.elapsed() < slow() {
        if release.as_ref().is_some_and(|file| file.exists()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn millis_env(name: &str) -> Option<Duration> {
    std::env::var(name)
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
}

fn slow() -> Duration {
    Duration::from_millis(
        std::env::var(SLOW_ENV)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(SLOW_BEFORE_KILL_MS),
    )
}

/// Appends `<tool> <tool_call_id> <event> <pid>` to the side-channel file
/// and fsyncs it, so the line survives a SIGKILL right after.
fn side_channel(tool: &str, tool_call_id: &str, event: &str) {
    let Some(path) = std::env::var_os(SIDE_ENV) else {
        return;
    };
    let line = format!("{tool} {tool_call_id} {event} {}\n", std::process::id());
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("side channel {path:?}: {e}"));
    file.write_all(line.as_bytes())
        .unwrap_or_else(|e| panic!("side channel {path:?}: {e}"));
    file.sync_all()
        .unwrap_or_else(|e| panic!("side channel {path:?}: {e}"));
}

/// One line of the side channel.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SideEvent {
    tool: String,
    tool_call_id: String,
    event: String,
    pid: u32,
}

fn side_events(path: &Path) -> Vec<SideEvent> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            Some(SideEvent {
                tool: fields.next()?.to_owned(),
                tool_call_id: fields.next()?.to_owned(),
                event: fields.next()?.to_owned(),
                pid: fields.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// The pids of the processes that logged `event` for `tool_call_id`, in
/// order.
fn side_pids(events: &[SideEvent], tool_call_id: &str, event: &str) -> Vec<u32> {
    events
        .iter()
        .filter(|e| e.tool_call_id == tool_call_id && e.event == event)
        .map(|e| e.pid)
        .collect()
}

// ---------------------------------------------------------------------------
// Stores, agents, helpers

/// Where a parent test's store is: a fresh SQLite file (deleted with its
/// WAL files on drop), or the PostgreSQL at `APTIX_TEST_PG_URL`.
struct Target {
    backend: Backend,
    location: String,
    _file: Option<TempDb>,
}

impl Target {
    fn sqlite(label: &str) -> Target {
        let file = TempDb::new(&format!("dp-{label}"));
        Target {
            backend: Backend::Sqlite,
            location: file.target(),
            _file: Some(file),
        }
    }

    fn postgres() -> Option<Target> {
        Some(Target {
            backend: Backend::Postgres,
            location: pg_url()?,
            _file: None,
        })
    }
}

/// A side-channel file in the temp folder, deleted on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(label: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!("aptix-dp-{label}-{}.log", uuid())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn agent(
    store: Arc<dyn Store>,
    turns: Vec<ScriptedTurn>,
    owner: &str,
    lease: Duration,
) -> DurableAgent {
    DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(turns))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .instance_id(owner)
    .lease(lease)
    // The processes of one test share the store with other tests'; a
    // worker would sweep (and resume) their conversations too. Only
    // the deadline test runs one.
    .deadline_worker(None)
    .build()
}

async fn send(agent: &DurableAgent, conversation: &str, text: &str) -> Vec<AgentEvent> {
    agent
        .send(conversation, Input::User(text.into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .collect()
        .await
}

/// Waits until the background run leaves the conversation idle.
async fn wait_idle(agent: &DurableAgent, conversation: &str) -> Conversation {
    let started = Instant::now();
    loop {
        let stored = agent
            .conversation(conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("conversation {conversation} vanished"));
        if stored.status == ConversationStatus::Idle {
            return stored.conversation;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "conversation never became idle: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The results in the transcript for `tool_call_id`, parsed.
fn results_of(conversation: &Conversation, tool_call_id: &str) -> Vec<Value> {
    conversation
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool {
                tool_call_id: id,
                content,
                ..
            } if id == tool_call_id => {
                Some(serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}")))
            }
            _ => None,
        })
        .collect()
}

fn tool_message_count(conversation: &Conversation) -> usize {
    conversation
        .messages
        .iter()
        .filter(|message| matches!(message, Message::Tool { .. }))
        .count()
}

fn last_text(conversation: &Conversation) -> Option<&str> {
    conversation
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Assistant { content, .. } if !content.is_empty() => Some(content.as_str()),
            _ => None,
        })
}

// ---------------------------------------------------------------------------
// Child processes, from the parent's side

/// A child process running one `child_*` test of this binary. Its stdout
/// lines that carry [`LINE`] arrive on `lines`; all its output is kept for
/// failure messages. Killed (if still running) and reaped on drop.
struct Proc {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    log: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(label: String, test: &str, role: &str, env: &[(&str, String)]) -> Proc {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        let mut command = Command::new(exe);
        command
            .args([
                test_name(module_path!(), test).as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE_ENV, role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {label}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let (sender, lines) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    append(&log, &format!("[stdout] {line}\n"));
                    if let Some(at) = line.find(LINE) {
                        let _ = sender.send(line[at + LINE.len()..].to_owned());
                    }
                }
            });
        }
        if let Some(mut stderr) = child.stderr.take() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                append(&log, &format!("[stderr] {text}\n"));
            });
        }
        let stdin = child.stdin.take();
        Proc {
            label,
            child,
            stdin,
            lines,
            log,
        }
    }

    fn log(&self) -> String {
        // Give the reader threads a moment to collect a dying child's last
        // words.
        std::thread::sleep(Duration::from_millis(200));
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The next line the child printed for the parent.
    fn next_line(&self) -> String {
        self.lines.recv_timeout(PATIENCE).unwrap_or_else(|e| {
            panic!(
                "{}: no line from the child ({e}); its output:\n{}",
                self.label,
                self.log()
            )
        })
    }

    /// Tells a child waiting on its stdin to go.
    fn go(&mut self) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("{}: stdin already closed", self.label));
        stdin
            .write_all(b"go\n")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("{}: {e}", self.label));
    }

    fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|e| panic!("{}: {e}", self.label))
    }

    /// Waits for the child to exit and asserts it succeeded.
    fn wait_success(&mut self) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.try_exit() {
                break status;
            }
            assert!(
                started.elapsed() < PATIENCE * 2,
                "{} hangs; its output:\n{}",
                self.label,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            status.success(),
            "{} failed ({status}); its output:\n{}",
            self.label,
            self.log()
        );
    }

    /// SIGKILL on Unix: no destructor, no flush, nothing runs.
    fn kill(&mut self) -> ExitStatus {
        self.child
            .kill()
            .unwrap_or_else(|e| panic!("{}: {e}", self.label));
        self.child
            .wait()
            .unwrap_or_else(|e| panic!("{}: {e}", self.label))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Closing stdin ends a child still waiting for "go".
        drop(self.stdin.take());
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn append(log: &Mutex<String>, text: &str) {
    log.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push_str(text);
}

/// The environment of a child process, read back on the child's side.
fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn is_role(role: &str) -> bool {
    std::env::var(ROLE_ENV).as_deref() == Ok(role)
}

fn is_child() -> bool {
    std::env::var_os(ROLE_ENV).is_some()
}

// ---------------------------------------------------------------------------
// 1. Racing resolutions across processes

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A human call, resolved with `Result`s.
    Human,
    /// An approval-gated server call, approved or denied.
    Approval,
}

impl Kind {
    fn of_round(round: usize) -> Kind {
        if round.is_multiple_of(2) {
            Kind::Human
        } else {
            Kind::Approval
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Human => "human",
            Kind::Approval => "approval",
        }
    }
}

/// What racer `index` resolves the call with: two racers send each value,
/// except for the approval with changed arguments, which only one sends.
fn racer_resolution(kind: Kind, index: usize) -> Resolution {
    match kind {
        Kind::Human => Resolution::Result(json!({"agreed": index.is_multiple_of(2)})),
        Kind::Approval => match index % 4 {
            0 | 2 => Resolution::Approve,
            1 => Resolution::Deny {
                message: "Not today.".into(),
            },
            _ => Resolution::ApproveWithArgs(json!({"cents": 7})),
        },
    }
}

fn racer_answer(index: usize) -> String {
    format!("Answered by racer {index}.")
}

/// The child: resolves the call when told to go, prints the outcome, and,
/// when it won, stays until the conversation it resumed is idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_racer() {
    if !is_role("racer") {
        return;
    }
    let backend = Backend::parse(&var("APTIX_DP_BACKEND"));
    let conversation = var("APTIX_DP_CONVERSATION");
    let call = var("APTIX_DP_CALL");
    let index: usize = var("APTIX_DP_INDEX")
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let kind = match var("APTIX_DP_KIND").as_str() {
        "human" => Kind::Human,
        _ => Kind::Approval,
    };
    let agent = {
        let store = backend.open(&var("APTIX_DP_TARGET")).await;
        agent(
            store,
            vec![ScriptedTurn::new().text(&racer_answer(index))],
            &format!("racer-{index}-{}", std::process::id()),
            aptix::durable::DEFAULT_LEASE,
        )
    };
    let resolution = racer_resolution(kind, index);
    println!("{LINE}ready");
    let mut go = String::new();
    let _ = std::io::stdin().read_line(&mut go);
    if go.trim() != "go" {
        // The parent gave up.
        return;
    }
    let at = unix_micros();
    let outcome = agent.resolve(&conversation, &call, resolution).await;
    // When it started, then what it got.
    println!("{LINE}at {at}");
    match &outcome {
        Ok(resolved) => println!("{LINE}ok pending={}", resolved.pending),
        Err(ResolveError::Stale { .. }) => println!("{LINE}stale"),
        Err(ResolveError::Conflict { .. }) => println!("{LINE}conflict"),
        Err(other) => println!("{LINE}other {other}"),
    }
    if outcome.is_ok() {
        // The background run that resumes the conversation lives in this
        // process: stay until it is done.
        wait_idle(&agent, &conversation).await;
        println!("{LINE}idle");
    }
}

async fn race_resolutions(target: &Target, rounds: usize) {
    let store = target.backend.open(&target.location).await;
    let side = TempFile::new("race-side");
    let started = Instant::now();
    let mut wins = [0usize; RACERS];
    let mut spreads = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (winner, spread) = race_round(target, &store, &side.0, round).await;
        wins[winner] += 1;
        spreads.push(spread);
    }
    spreads.sort_unstable();
    eprintln!(
        "{}: {rounds} rounds of {RACERS} racing processes in {:?}; wins per racer {wins:?}; \
         spread of the racers' start (median, max): {:?}, {:?}",
        target.backend.name(),
        started.elapsed(),
        spreads[spreads.len() / 2],
        spreads[spreads.len() - 1],
    );
}

async fn race_round(
    target: &Target,
    store: &Arc<dyn Store>,
    side: &Path,
    round: usize,
) -> (usize, Duration) {
    let backend = target.backend;
    let kind = Kind::of_round(round);
    let id = format!("dp-race-{}-{round}-{}", backend.name(), uuid());
    let call = format!("c{round}-{}", uuid());
    let turn = match kind {
        Kind::Human => {
            ScriptedTurn::new().tool_call(&call, "confirm", r#"{"question":"Proceed?"}"#)
        }
        Kind::Approval => ScriptedTurn::new().tool_call(&call, "pay", r#"{"cents":5}"#),
    };
    // Suspend the call, in this process.
    {
        let suspender = agent(
            store.clone(),
            vec![turn],
            &format!("suspender-{}", std::process::id()),
            aptix::durable::DEFAULT_LEASE,
        );
        let events = send(&suspender, &id, "go").await;
        match events.last() {
            Some(AgentEvent::Done {
                reason: DoneReason::Suspended(calls),
                ..
            }) => assert_eq!(calls.len(), 1, "round {round}: {events:?}"),
            other => panic!("round {round}: expected a suspension, got {other:?}"),
        }
    }

    // Every racer connects, then waits on its stdin; all go at once.
    let mut racers: Vec<Proc> = (0..RACERS)
        .map(|index| {
            Proc::spawn(
                format!("{} round {round} racer {index}", backend.name()),
                "child_racer",
                "racer",
                &[
                    ("APTIX_DP_BACKEND", backend.name().to_owned()),
                    ("APTIX_DP_TARGET", target.location.clone()),
                    ("APTIX_DP_CONVERSATION", id.clone()),
                    ("APTIX_DP_CALL", call.clone()),
                    ("APTIX_DP_INDEX", index.to_string()),
                    ("APTIX_DP_KIND", kind.name().to_owned()),
                    (SIDE_ENV, side.to_string_lossy().into_owned()),
                ],
            )
        })
        .collect();
    for racer in &racers {
        let line = racer.next_line();
        assert_eq!(line, "ready", "{}", racer.label);
    }
    for racer in &mut racers {
        racer.go();
    }
    let mut starts = Vec::with_capacity(RACERS);
    let mut outcomes = Vec::with_capacity(RACERS);
    for racer in &racers {
        let at = racer.next_line();
        let at: u64 = at
            .strip_prefix("at ")
            .and_then(|micros| micros.parse().ok())
            .unwrap_or_else(|| panic!("{}: `{at}`", racer.label));
        starts.push(at);
        outcomes.push(racer.next_line());
    }
    let spread = Duration::from_micros(
        starts.iter().max().copied().unwrap_or(0) - starts.iter().min().copied().unwrap_or(0),
    );
    for racer in &mut racers {
        racer.wait_success();
    }

    let winners: Vec<usize> = (0..RACERS)
        .filter(|&index| outcomes[index].starts_with("ok"))
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "{} round {round} ({kind:?}): exactly one resolution wins, got {outcomes:?}",
        backend.name()
    );
    let winner = winners[0];
    assert_eq!(
        outcomes[winner], "ok pending=0",
        "round {round}: nothing else was pending"
    );
    let winning = racer_resolution(kind, winner);
    for (index, outcome) in outcomes.iter().enumerate() {
        if index == winner {
            continue;
        }
        let expected = if racer_resolution(kind, index) == winning {
            "stale"
        } else {
            "conflict"
        };
        assert_eq!(
            outcome,
            expected,
            "{} round {round} ({kind:?}): racer {index} sent {:?} after racer {winner}'s {winning:?}; all: {outcomes:?}",
            backend.name(),
            racer_resolution(kind, index)
        );
    }

    // The winner's process resumed the conversation with its resolution.
    {
        let stored = store
            .load_conversation(&id)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("round {round}: the conversation vanished"));
        assert_eq!(stored.status, ConversationStatus::Idle, "round {round}");
        let conversation = &stored.conversation;
        assert_eq!(
            last_text(conversation),
            Some(racer_answer(winner).as_str()),
            "round {round}: the winner's process ran the next turn"
        );
        assert_eq!(tool_message_count(conversation), 1, "round {round}");
        let results = results_of(conversation, &call);
        assert_eq!(results.len(), 1, "round {round}: {results:?}");
        let result = &results[0];
        match &winning {
            Resolution::Result(value) => {
                assert_eq!(result["ok"], json!(true), "round {round}: {result}");
                assert_eq!(&result["result"], value, "round {round}");
            }
            Resolution::Approve
            | Resolution::ApproveExactly { .. }
            | Resolution::ApproveAlways { .. } => {
                assert_eq!(result["result"], json!("paid 5"), "round {round}: {result}")
            }
            Resolution::ApproveWithArgs(_) => {
                assert_eq!(result["result"], json!("paid 7"), "round {round}: {result}")
            }
            Resolution::Deny { message } => {
                assert_eq!(result["ok"], json!(false), "round {round}: {result}");
                assert_eq!(result["error"]["code"], json!("denied"), "round {round}");
                assert_eq!(&result["error"]["message"], message, "round {round}");
            }
            other => panic!("round {round}: no racer sends {other:?}"),
        }
        let step = match kind {
            Kind::Human => Step::Human,
            Kind::Approval => Step::Approval,
        };
        let wait = store
            .call(&id, &call, step)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("round {round}: the wait vanished"));
        assert_eq!(wait.state, CallState::Resolved, "round {round}");
        let recorded: Resolution = serde_json::from_str(wait.outcome.as_deref().unwrap_or(""))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(recorded, winning, "round {round}: the stored resolution");
    }
    // An approved payment ran exactly once, in the winner's process; a
    // denied one never ran.
    let approved = matches!(
        winning,
        Resolution::Approve | Resolution::ApproveWithArgs(_)
    );
    let runs = side_pids(&side_events(side), &call, "start");
    assert_eq!(
        runs.len(),
        usize::from(approved),
        "round {round}: `pay` runs across processes for {winning:?}: {runs:?}"
    );
    (winner, spread)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_resolutions_across_processes_sqlite() {
    if is_child() {
        return;
    }
    race_resolutions(&Target::sqlite("race"), SQLITE_ROUNDS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_resolutions_across_processes_postgres() {
    if is_child() {
        return;
    }
    let Some(target) = Target::postgres() else {
        return;
    };
    race_resolutions(&target, POSTGRES_ROUNDS).await;
}

// ---------------------------------------------------------------------------
// 2. SIGKILL while suspended and while server tools execute

/// The ids of one kill scenario, passed to both children.
struct KillIds {
    conversation: String,
    pay: String,
    import: String,
    charge: String,
}

impl KillIds {
    fn new(backend: Backend) -> KillIds {
        KillIds {
            conversation: format!("dp-kill-{}-{}", backend.name(), uuid()),
            pay: format!("pay-{}", uuid()),
            import: format!("import-{}", uuid()),
            charge: format!("charge-{}", uuid()),
        }
    }

    fn from_env() -> KillIds {
        KillIds {
            conversation: var("APTIX_DP_CONVERSATION"),
            pay: var("APTIX_DP_PAY"),
            import: var("APTIX_DP_IMPORT"),
            charge: var("APTIX_DP_CHARGE"),
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("APTIX_DP_CONVERSATION", self.conversation.clone()),
            ("APTIX_DP_PAY", self.pay.clone()),
            ("APTIX_DP_IMPORT", self.import.clone()),
            ("APTIX_DP_CHARGE", self.charge.clone()),
        ]
    }
}

const FIRST_ANSWER: &str = "Finished by the first process.";

/// The child that is killed: one model turn calls the approval-gated `pay`
/// (it suspends) and both slow tools (they run, for 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_first() {
    if !is_role("first") {
        return;
    }
    let backend = Backend::parse(&var("APTIX_DP_BACKEND"));
    let ids = KillIds::from_env();
    let store = backend.open(&var("APTIX_DP_TARGET")).await;
    let agent = agent(
        store,
        vec![
            ScriptedTurn::new()
                .tool_call(&ids.pay, "pay", r#"{"cents":25}"#)
                .tool_call(&ids.import, "slow_import", r#"{"batch":"b1"}"#)
                .tool_call(&ids.charge, "slow_charge", r#"{"batch":"b2"}"#),
            // Never reached when the process is killed.
            ScriptedTurn::new().text(FIRST_ANSWER),
        ],
        &format!("first-{}", std::process::id()),
        millis_env(LEASE_ENV).unwrap_or(SHORT_LEASE),
    );
    let events = send(&agent, &ids.conversation, "pay, import and charge").await;
    // Only reached when the parent failed to kill this process.
    println!("{LINE}finished {:?}", events.last());
}

/// The restarted process: revives the conversation once the killed
/// process's lease has run out, approves the payment, and stays until the
/// conversation is idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_restart() {
    if !is_role("restart") {
        return;
    }
    let backend = Backend::parse(&var("APTIX_DP_BACKEND"));
    let ids = KillIds::from_env();
    let store = backend.open(&var("APTIX_DP_TARGET")).await;
    // Only the turn that remains: the final answer.
    let agent = agent(
        store,
        vec![ScriptedTurn::new().text("Recovered after the kill.")],
        &format!("restart-{}", std::process::id()),
        SHORT_LEASE,
    );
    let started = Instant::now();
    let mut busy = 0;
    let revival = loop {
        match agent.ensure_started(&ids.conversation).await {
            Ok(Revival::Busy) => {
                busy += 1;
                assert!(
                    started.elapsed() < PATIENCE,
                    "the killed process's lease never ran out"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(revival) => break revival,
            Err(e) => panic!("{e}"),
        }
    };
    println!("{LINE}revival {revival:?} after {busy} busy");
    let resolved = agent
        .resolve(&ids.conversation, &ids.pay, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{LINE}resolved pending={}", resolved.pending);
    wait_idle(&agent, &ids.conversation).await;
    println!("{LINE}idle");
}

/// Waits until both slow tools run in `first` and its approval waits.
async fn wait_until_working(store: &Arc<dyn Store>, ids: &KillIds, side: &Path, first: &mut Proc) {
    let waiting = Instant::now();
    loop {
        let events = side_events(side);
        let approval = store
            .call(&ids.conversation, &ids.pay, Step::Approval)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if side_pids(&events, &ids.import, "start").len() == 1
            && side_pids(&events, &ids.charge, "start").len() == 1
            && approval.is_some_and(|record| record.state == CallState::Pending)
        {
            return;
        }
        if let Some(status) = first.try_exit() {
            panic!(
                "the first process exited ({status}) too early; its output:\n{}",
                first.log()
            );
        }
        assert!(
            waiting.elapsed() < PATIENCE,
            "the slow tools never started; side channel: {events:?}; output:\n{}",
            first.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

async fn ledger_states(
    store: &Arc<dyn Store>,
    conversation: &str,
) -> HashMap<(String, Step), CallState> {
    store
        .calls(conversation)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|record| ((record.tool_call_id, record.step), record.state))
        .collect()
}

async fn kill_and_restart(target: &Target) {
    let backend = target.backend;
    let started = Instant::now();
    let store = backend.open(&target.location).await;
    let side = TempFile::new("kill-side");
    let ids = KillIds::new(backend);
    let mut env = ids.env();
    env.push(("APTIX_DP_BACKEND", backend.name().to_owned()));
    env.push(("APTIX_DP_TARGET", target.location.clone()));
    env.push((SIDE_ENV, side.0.to_string_lossy().into_owned()));

    let mut first_env = env.clone();
    first_env.push((SLOW_ENV, SLOW_BEFORE_KILL_MS.to_string()));
    let mut first = Proc::spawn(
        format!("{} first process", backend.name()),
        "child_first",
        "first",
        &first_env,
    );
    let first_pid = first.child.id();

    wait_until_working(&store, &ids, &side.0, &mut first).await;
    let status = first.kill();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9), "SIGKILL: {status}");
    }
    #[cfg(not(unix))]
    let _ = status;

    // What the crash left: a running conversation held by the dead
    // process, the approval pending, both executions recorded as started.
    {
        let stored = store
            .load_conversation(&ids.conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the conversation vanished"));
        assert_eq!(stored.status, ConversationStatus::Running);
        assert_eq!(
            stored.owner.as_deref(),
            Some(format!("first-{first_pid}").as_str())
        );
        assert_eq!(tool_message_count(&stored.conversation), 0);
        let states: HashMap<(String, Step), CallState> = store
            .calls(&ids.conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|record| ((record.tool_call_id, record.step), record.state))
            .collect();
        let expected: HashMap<(String, Step), CallState> = [
            ((ids.pay.clone(), Step::Approval), CallState::Pending),
            ((ids.import.clone(), Step::Execution), CallState::Executing),
            ((ids.charge.clone(), Step::Execution), CallState::Executing),
        ]
        .into_iter()
        .collect();
        assert_eq!(states, expected, "the ledger at the kill");
    }
    let killed_at = Instant::now();

    let mut restart_env = env.clone();
    restart_env.push((SLOW_ENV, SLOW_AFTER_RESTART_MS.to_string()));
    let mut restart = Proc::spawn(
        format!("{} restarted process", backend.name()),
        "child_restart",
        "restart",
        &restart_env,
    );
    let restart_pid = restart.child.id();
    let revival = restart.next_line();
    assert!(
        revival.starts_with("revival Waiting { pending: 1 }"),
        "{revival}"
    );
    assert_eq!(restart.next_line(), "resolved pending=0");
    assert_eq!(restart.next_line(), "idle");
    restart.wait_success();

    // Nothing lost, nothing run twice unless declared idempotent.
    let events = side_events(&side.0);
    assert_eq!(
        side_pids(&events, &ids.import, "start"),
        vec![first_pid, restart_pid],
        "the idempotent tool: started before the kill, and again (same id) after; {events:?}"
    );
    assert_eq!(
        side_pids(&events, &ids.import, "done"),
        vec![restart_pid],
        "{events:?}"
    );
    assert_eq!(
        side_pids(&events, &ids.charge, "start"),
        vec![first_pid],
        "the non-idempotent tool ran again after the crash: {events:?}"
    );
    assert_eq!(side_pids(&events, &ids.charge, "done"), Vec::<u32>::new());
    assert_eq!(
        side_pids(&events, &ids.pay, "start"),
        vec![restart_pid],
        "the approved tool: once, after the approval; {events:?}"
    );
    assert_eq!(side_pids(&events, &ids.pay, "done"), vec![restart_pid]);

    {
        let stored = store
            .load_conversation(&ids.conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the conversation vanished"));
        assert_eq!(stored.status, ConversationStatus::Idle);
        assert_eq!(stored.owner, None);
        let conversation = &stored.conversation;
        assert_eq!(last_text(conversation), Some("Recovered after the kill."));
        let turns = conversation
            .messages
            .iter()
            .filter(|message| {
                matches!(message, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty())
            })
            .count();
        assert_eq!(turns, 1, "{:?}", conversation.messages);
        assert_eq!(tool_message_count(conversation), 3, "{conversation:?}");
        let result = |id: &str| {
            let results = results_of(conversation, id);
            assert_eq!(results.len(), 1, "results for {id}: {results:?}");
            results.into_iter().next().unwrap_or_default()
        };
        let paid = result(&ids.pay);
        assert_eq!(paid["ok"], json!(true), "{paid}");
        assert_eq!(paid["result"], json!("paid 25"));
        let imported = result(&ids.import);
        assert_eq!(imported["ok"], json!(true), "{imported}");
        assert_eq!(imported["result"], json!("imported b1"));
        let charged = result(&ids.charge);
        assert_eq!(charged["ok"], json!(false), "{charged}");
        assert_eq!(charged["error"]["code"], json!("cancelled"), "{charged}");
        assert!(
            charged["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("interrupted")),
            "{charged}"
        );
        let states: HashMap<(String, Step), CallState> = store
            .calls(&ids.conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|record| ((record.tool_call_id, record.step), record.state))
            .collect();
        let expected: HashMap<(String, Step), CallState> = [
            ((ids.pay.clone(), Step::Approval), CallState::Resolved),
            ((ids.pay.clone(), Step::Execution), CallState::Done),
            ((ids.import.clone(), Step::Execution), CallState::Done),
            ((ids.charge.clone(), Step::Execution), CallState::Cancelled),
        ]
        .into_iter()
        .collect();
        assert_eq!(states, expected, "the ledger after the recovery");
    }
    eprintln!(
        "{}: killed and recovered in {:?} ({:?} from the kill)",
        backend.name(),
        started.elapsed(),
        killed_at.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_suspended_and_executing_sqlite() {
    if is_child() {
        return;
    }
    kill_and_restart(&Target::sqlite("kill")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_suspended_and_executing_postgres() {
    if is_child() {
        return;
    }
    let Some(target) = Target::postgres() else {
        return;
    };
    kill_and_restart(&target).await;
}

// ---------------------------------------------------------------------------
// 3. A live process whose tools outlive its lease

/// A process holds its conversation for as long as it lives: here the
/// first process runs two tools longer than its lease, and its heartbeat
/// renews the lease while they run. Another process must see it as busy
/// and must not run, re-run or cancel any of its calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_process_keeps_its_conversation_while_tools_outlive_its_lease() {
    if is_child() {
        return;
    }
    let target = Target::sqlite("live");
    let backend = target.backend;
    let store = backend.open(&target.location).await;
    let side = TempFile::new("live-side");
    let release = TempFile::new("live-release");
    let ids = KillIds::new(backend);
    let mut env = ids.env();
    env.push(("APTIX_DP_BACKEND", backend.name().to_owned()));
    env.push(("APTIX_DP_TARGET", target.location.clone()));
    env.push((SIDE_ENV, side.0.to_string_lossy().into_owned()));
    env.push((SLOW_ENV, SLOW_BEFORE_KILL_MS.to_string()));
    env.push((RELEASE_ENV, release.0.to_string_lossy().into_owned()));
    let mut first = Proc::spawn(
        "live first process".to_owned(),
        "child_first",
        "first",
        &env,
    );
    let first_pid = first.child.id();
    wait_until_working(&store, &ids, &side.0, &mut first).await;
    // The first process is alive and busy; its lease runs out meanwhile.
    std::thread::sleep(SHORT_LEASE * 3);
    assert!(first.try_exit().is_none(), "{}", first.log());

    // Another process revives the conversation and approves the payment
    // (legitimate from anywhere, at any time), then watches for a while.
    let mut other_env = env.clone();
    other_env.retain(|(name, _)| *name != SLOW_ENV && *name != RELEASE_ENV);
    other_env.push((SLOW_ENV, SLOW_AFTER_RESTART_MS.to_string()));
    let mut other = Proc::spawn(
        "live other process".to_owned(),
        "child_other",
        "other",
        &other_env,
    );
    let other_pid = other.child.id();
    let revival = other.next_line();
    assert_eq!(other.next_line(), "resolved pending=0");
    let watched = other.next_line();
    other.wait_success();
    let ledger = ledger_states(&store, &ids.conversation).await;
    let charge = ledger.get(&(ids.charge.clone(), Step::Execution)).copied();
    let imports = side_pids(&side_events(&side.0), &ids.import, "start");

    // Let the first process finish its tools and its run.
    std::fs::write(&release.0, b"go").unwrap_or_else(|e| panic!("{e}"));
    let finished = first.next_line();
    first.wait_success();
    let events = side_events(&side.0);
    assert!(
        revival == "revival Busy"
            && imports == vec![first_pid]
            && charge == Some(CallState::Executing),
        "another process took over the conversation while the first ({first_pid}) was alive \
         and running its tools:\n\
         - ensure_started in the other process ({other_pid}): {revival} (expected Busy)\n\
         - `slow_import` started by {imports:?} (expected only the first process)\n\
         - the other process, after resolving: {watched}\n\
         - `slow_charge`, still running in the first process: {charge:?} in the ledger \
         (expected Executing); the model was told it was interrupted by a process that stopped\n\
         - the first process's run ended with: {finished}\n\
         - side channel: {events:?}"
    );
    // Once fixed: the first process finishes the turn itself.
    let stored = store
        .load_conversation(&ids.conversation)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the conversation vanished"));
    assert_eq!(stored.status, ConversationStatus::Idle);
    assert_eq!(last_text(&stored.conversation), Some(FIRST_ANSWER));
    assert_eq!(side_pids(&events, &ids.charge, "start"), vec![first_pid]);
    assert_eq!(side_pids(&events, &ids.pay, "start"), vec![first_pid]);
}

/// The other process of the test above: revives once, approves, and
/// watches the conversation for up to 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_other() {
    if !is_role("other") {
        return;
    }
    let backend = Backend::parse(&var("APTIX_DP_BACKEND"));
    let ids = KillIds::from_env();
    let store = backend.open(&var("APTIX_DP_TARGET")).await;
    let agent = agent(
        store,
        vec![ScriptedTurn::new().text("Taken over.")],
        &format!("other-{}", std::process::id()),
        SHORT_LEASE,
    );
    let revival = agent
        .ensure_started(&ids.conversation)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{LINE}revival {revival:?}");
    let resolved = agent
        .resolve(&ids.conversation, &ids.pay, Resolution::Approve)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{LINE}resolved pending={}", resolved.pending);
    let watching = Instant::now();
    let status = loop {
        let stored = agent
            .conversation(&ids.conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the conversation vanished"));
        if stored.status == ConversationStatus::Idle
            || watching.elapsed() > millis_env(WATCH_ENV).unwrap_or(Duration::from_secs(2))
        {
            break stored;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "{LINE}status {:?}, owner {:?}, last answer {:?}",
        status.status,
        status.owner,
        last_text(&status.conversation)
    );
}

// ---------------------------------------------------------------------------
// 4. A resolution while a dead process's lease is still valid

/// The first process is killed mid-turn, and its lease (3 s) is still
/// valid when a restarted process resolves the approval: `resolve` answers
/// `pending: 0`, whose documented meaning is "the next model turn is
/// starting in the background". The resumption waits for the dead owner's
/// lease to run out and then happens, without any process calling
/// `ensure_started`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolution_during_a_dead_process_lease_resumes_after_it() {
    if is_child() {
        return;
    }
    let target = Target::sqlite("dead-lease");
    let backend = target.backend;
    let store = backend.open(&target.location).await;
    let side = TempFile::new("dead-lease-side");
    let ids = KillIds::new(backend);
    let mut env = ids.env();
    env.push(("APTIX_DP_BACKEND", backend.name().to_owned()));
    env.push(("APTIX_DP_TARGET", target.location.clone()));
    env.push((SIDE_ENV, side.0.to_string_lossy().into_owned()));
    let mut first_env = env.clone();
    first_env.push((SLOW_ENV, SLOW_BEFORE_KILL_MS.to_string()));
    first_env.push((LEASE_ENV, "3000".to_owned()));
    let mut first = Proc::spawn(
        "dead-lease first process".to_owned(),
        "child_first",
        "first",
        &first_env,
    );
    wait_until_working(&store, &ids, &side.0, &mut first).await;
    first.kill();

    // Restarted at once: the dead process's lease has ~3 s left. The other
    // process resolves, then watches for 3 s past the lease.
    let mut other_env = env.clone();
    other_env.push((SLOW_ENV, SLOW_AFTER_RESTART_MS.to_string()));
    other_env.push((WATCH_ENV, "6000".to_owned()));
    let mut other = Proc::spawn(
        "dead-lease other process".to_owned(),
        "child_other",
        "other",
        &other_env,
    );
    let revival = other.next_line();
    let resolved = other.next_line();
    let watched = other.next_line();
    other.wait_success();
    let ledger = ledger_states(&store, &ids.conversation).await;
    assert!(
        watched.starts_with("status Idle"),
        "the approval was accepted during the dead process's lease and the conversation \
         never resumed, though the lease ran out 3 s before the end:\n\
         - ensure_started: {revival}\n\
         - resolve: {resolved} (\"the next model turn is starting in the background\")\n\
         - 6 s later: {watched}\n\
         - ledger: {ledger:?}"
    );
}

// ---------------------------------------------------------------------------
// 5. A deadline fires in a restarted process that runs no sweeper

/// A process suspends on an approval with a 1.5 s deadline and exits. A
/// restarted process only builds its agent (no `sweep_deadlines`, no
/// `revive_all`, no `ensure_started`): the agent's own deadline worker
/// expires the approval and resumes the conversation, and the model is
/// told nobody approved in time. SQLite only: a worker sweeps every
/// conversation of its store, and the PostgreSQL of the tests is shared
/// with the other tests of this binary, which run at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_fires_in_a_restarted_process_without_a_sweeper() {
    if is_child() {
        return;
    }
    let target = Target::sqlite("deadline");
    let conversation = format!("deadline-{}", uuid());
    let env = vec![
        ("APTIX_DP_BACKEND", target.backend.name().to_owned()),
        ("APTIX_DP_TARGET", target.location.clone()),
        ("APTIX_DP_CONVERSATION", conversation.clone()),
    ];
    let mut first = Proc::spawn(
        "deadline first process".to_owned(),
        "child_deadline_first",
        "deadline_first",
        &env,
    );
    assert_eq!(first.next_line(), "suspended");
    first.wait_success();
    let mut restarted = Proc::spawn(
        "deadline restarted process".to_owned(),
        "child_deadline_restart",
        "deadline_restart",
        &env,
    );
    let outcome = restarted.next_line();
    restarted.wait_success();
    assert_eq!(
        outcome,
        "idle timeout \"Nobody approved in time.\"",
        "{}",
        restarted.log()
    );
}

/// Suspends on `pay` with a 1.5 s deadline, then exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_deadline_first() {
    if !is_role("deadline_first") {
        return;
    }
    let backend = Backend::parse(&var("APTIX_DP_BACKEND"));
    let conversation = var("APTIX_DP_CONVERSATION");
    let store = backend.open(&var("APTIX_DP_TARGET")).await;
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(vec![ScriptedTurn::new().tool_call(
                "p1",
                "pay",
                r#"{"cents":5}"#,
            )]))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store,
    )
    .suspend_timeout(Duration::from_millis(1_500))
    .deadline_worker(None)
    .build();
    let events = send(&agent, &conversation, "pay").await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::Done {
                reason: DoneReason::Suspended(_),
                ..
            })
        ),
        "{events:?}"
    );
    println!("{LINE}suspended");
}

/// Builds an agent with the default deadline worker and only watches the
/// store until the conversation is idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_deadline_restart() {
    if !is_role("deadline_restart") {
        return;
    }
    let backend = Backend::parse(&var("APTIX_DP_BACKEND"));
    let conversation = var("APTIX_DP_CONVERSATION");
    let store = backend.open(&var("APTIX_DP_TARGET")).await;
    let agent = DurableAgent::builder(
        Agent::builder()
            .model(ScriptedModel::new(vec![
                ScriptedTurn::new().text("Nobody approved in time."),
            ]))
            .catalog(catalog())
            .build()
            .unwrap_or_else(|e| panic!("{e}")),
        store.clone(),
    )
    .build();
    let started = Instant::now();
    let stored = loop {
        let stored = store
            .load_conversation(&conversation)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("the conversation vanished"));
        if stored.status == ConversationStatus::Idle {
            break stored;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the deadline never fired: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let result = results_of(&stored.conversation, "p1");
    println!(
        "{LINE}idle {} {:?}",
        result
            .first()
            .and_then(|r| r["error"]["code"].as_str())
            .unwrap_or("none"),
        last_text(&stored.conversation).unwrap_or_default()
    );
    drop(agent);
}
