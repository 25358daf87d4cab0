//! Durable suspension: suspend + resolve round trips per second, latency
//! percentiles, and memory per suspended conversation, on `MemoryStore` (the
//! baseline, measured in the same run), `SqliteStore` and `PostgresStore`.
//!
//! One round trip: `send` of a user message whose model turn calls an
//! approval-gated tool (the run suspends; its stream is read to `Done`),
//! `resolve(Approve)`, and the background run that executes the tool and
//! asks the model again, up to its `Done` (the conversation is then stored
//! `Idle`). The end of the background run is observed through
//! `DurableAgent::subscribe` (one dispatcher task, one receiver), not by polling
//! `DurableAgent::conversation`, which would add store reads to the measurement and
//! round the latency up to the polling period.
//!
//! The model is a zero-latency stand-in that answers from the transcript (a
//! user message → a call of `charge` whose id is the message's text; a tool
//! result → "Charged."), so concurrent conversations can share one agent.
//!
//! Memory: a child process (this binary, re-run) suspends 10,000
//! conversations, one pending approval each, and reports its `VmRSS` growth;
//! for SQLite also the database file's size.
//!
//! `cargo bench --bench durable` (PostgreSQL when `APTIX_BENCH_PG_URL`, or
//! else `APTIX_TEST_PG_URL`, is set, e.g. `postgres://postgres@127.0.0.1:15432/aptix_test`). Run as a
//! test (`cargo test --all-targets`, no `--bench` argument) it does one
//! short iteration of every phase, without PostgreSQL.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aptix::model::{ChatModel, ChatRequest, FinishReason, ModelEvent, ModelStream, ToolCallDelta};
use aptix::prelude::*;
use aptix::store::{ConversationStatus, MemoryStore, PostgresStore, SqliteStore, Store};
use aptix::transcript::Message;
use aptix::{Agent, AgentEvent, Catalog, Dialect, DoneReason, DurableAgent, Input, Resolution};
use aptix_testkit::faulty_store::FaultyStore;
use futures_util::StreamExt;
use tokio::sync::{broadcast, oneshot};

/// Concurrent conversations in the concurrent phase.
const CONCURRENCY: usize = 16;

/// The size of the workload.
struct Plan {
    /// How long each throughput phase is measured, after its warm-up.
    measure: Duration,
    /// Discarded round trips at the start of each phase.
    warm_up: Duration,
    /// Suspended conversations in the memory measurement.
    suspended: usize,
    /// Suspended before the memory baseline is read (pools, runtime, caches).
    memory_warm_up: usize,
}

/// The full workload under `cargo bench` (which passes `--bench`); one
/// short iteration of every phase when `cargo test --all-targets` runs
/// this binary as a test, so that the test command only checks it works.
fn plan() -> &'static Plan {
    static PLAN: std::sync::OnceLock<Plan> = std::sync::OnceLock::new();
    PLAN.get_or_init(|| {
        if benchmarking() {
            Plan {
                measure: Duration::from_secs(5),
                warm_up: Duration::from_millis(700),
                suspended: 10_000,
                memory_warm_up: 64,
            }
        } else {
            Plan {
                measure: Duration::from_millis(100),
                warm_up: Duration::ZERO,
                suspended: 16,
                memory_warm_up: 2,
            }
        }
    })
}

fn benchmarking() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}
/// The child-process mode of this binary.
const MEMORY_FLAG: &str = "--durable-memory";

/// How many times `charge` ran, to check every approval led to one run.
static RAN: AtomicUsize = AtomicUsize::new(0);

/// Arguments of `charge`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Charge {
    /// The amount in cents.
    #[schemars(range(min = 1, max = 100000))]
    pub cents: u32,
}

/// Charges the card on file, once a person approves.
#[agent_tool(name = "charge", usage = "Benchmark tool.", approval = requires_approval)]
async fn charge(args: Charge) -> Result<String, ToolError> {
    RAN.fetch_add(1, Ordering::Relaxed);
    Ok(format!("charged {}", args.cents))
}

/// A model without latency that answers from the transcript: a user message
/// `id` → one call `charge {"cents":500}` with tool call id `id`; anything
/// else (a tool result) → the text "Charged.".
struct TranscriptModel;

impl ChatModel for TranscriptModel {
    fn dialect(&self) -> Dialect {
        Dialect::OpenAiStrict
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        let events = match request.messages.last() {
            Some(Message::User { content }) => vec![
                Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                    index: 0,
                    id: Some(content.clone()),
                    name: Some("charge".to_owned()),
                    arguments: String::new(),
                })),
                Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: r#"{"cents":500}"#.to_owned(),
                })),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None,
                }),
            ],
            _ => vec![
                Ok(ModelEvent::TextDelta("Charged.".to_owned())),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: None,
                }),
            ],
        };
        Box::pin(futures_util::stream::iter(events))
    }
}

/// A database of its own on the PostgreSQL server: the agent's deadline
/// worker sweeps every conversation of its store, and in a database shared
/// with the tests it resumed their leftover conversations (one had an
/// approved `charge` call, which then ran this bench's tool and broke the
/// runs = approvals check).
struct ScratchDatabase {
    admin: PostgresStore,
    name: String,
    url: String,
}

impl ScratchDatabase {
    async fn create(url: &str, tag: &str) -> ScratchDatabase {
        use sqlx::Executor as _;
        let admin = ok(PostgresStore::connect(url).await, "PostgresStore::connect");
        let name = format!("aptix_bench_{tag}");
        ok(
            admin
                .pool()
                .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .await,
            "CREATE DATABASE",
        );
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, format!("?{query}")),
            None => (url, String::new()),
        };
        let server = match base.rsplit_once('/') {
            Some((server, _)) => server,
            None => panic!("the PostgreSQL URL has no database part: {url}"),
        };
        let url = format!("{server}/{name}{query}");
        ScratchDatabase { admin, name, url }
    }

    async fn drop_it(self) {
        use sqlx::Executor as _;
        let dropped = self
            .admin
            .pool()
            .execute(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .await;
        if let Err(error) = dropped {
            eprintln!("could not drop the scratch database {}: {error}", self.name);
        }
    }
}

fn ok<T, E: Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

fn agent(store: Arc<dyn Store>) -> DurableAgent {
    let catalog = ok(
        Catalog::builder().tool::<ChargeTool>().build(),
        "the catalog",
    );
    let agent = ok(
        Agent::builder()
            .model(TranscriptModel)
            .catalog(catalog)
            .build(),
        "the agent",
    );
    DurableAgent::new(agent, store)
}

fn runtime() -> tokio::runtime::Runtime {
    ok(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        "the runtime",
    )
}

/// A name no earlier run used (PostgreSQL keeps its rows between runs).
fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", std::process::id(), nanos)
}

/// Sends the user message that makes the model call `charge` with id
/// `call`, reads the run to its end, and checks that it suspended on it.
async fn suspend(agent: &DurableAgent, conversation: &str, call: &str) {
    let stream = ok(
        agent.send(conversation, Input::User(call.to_owned())).await,
        "send",
    );
    let events: Vec<AgentEvent> = stream.collect().await;
    match events.last() {
        Some(AgentEvent::Done {
            reason: DoneReason::Suspended(calls),
            ..
        }) if calls.len() == 1 && calls[0].tool_call_id == call => {}
        other => panic!("{conversation}: expected one suspended call, got {other:?}"),
    }
}

/// Who waits for the `Done` of which conversation's background run.
#[derive(Default)]
struct Waiters {
    waiting: Mutex<HashMap<String, oneshot::Sender<Result<Instant, String>>>>,
    lagged: AtomicBool,
}

impl Waiters {
    fn register(&self, conversation: &str) -> oneshot::Receiver<Result<Instant, String>> {
        let (sender, receiver) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(conversation.to_owned(), sender);
        receiver
    }

    /// Hands every background `Done` to its waiter, stamped when received.
    fn dispatch(self: &Arc<Self>, agent: &DurableAgent) -> tokio::task::JoinHandle<()> {
        let mut events = agent.subscribe();
        let waiters = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        let AgentEvent::Done { reason, .. } = event.event else {
                            continue;
                        };
                        let at = Instant::now();
                        let waiter = waiters
                            .waiting
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .remove(&event.conversation_id);
                        if let Some(waiter) = waiter {
                            let _ = waiter.send(match reason {
                                DoneReason::Completed => Ok(at),
                                other => Err(format!("{other:?}")),
                            });
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        waiters.lagged.store(true, Ordering::Relaxed);
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        })
    }
}

/// The timings of one round trip.
#[derive(Clone, Copy)]
struct Sample {
    /// `send` until its stream's `Done` (suspended).
    suspend: Duration,
    /// `resolve` until it returned (the resolution is recorded).
    resolve: Duration,
    /// `send` until the background run's `Done`.
    total: Duration,
    /// Whether the round trip started after the warm-up.
    measured: bool,
    /// When it finished.
    finished: Instant,
}

async fn round_trip(
    agent: &DurableAgent,
    waiters: &Waiters,
    conversation: &str,
    call: &str,
    warm_until: Instant,
) -> Sample {
    let started = Instant::now();
    suspend(agent, conversation, call).await;
    let suspended = started.elapsed();
    let done = waiters.register(conversation);
    let resolving = Instant::now();
    let resolved = ok(
        agent.resolve(conversation, call, Resolution::Approve).await,
        "resolve",
    );
    let resolve = resolving.elapsed();
    assert_eq!(resolved.pending, 0, "{conversation}: still pending");
    let finished = match tokio::time::timeout(Duration::from_secs(60), done).await {
        Ok(Ok(Ok(at))) => at,
        Ok(Ok(Err(reason))) => panic!("{conversation}: the background run ended with {reason}"),
        _ => panic!(
            "{conversation}: no Done from the background run within 60 s (events lagged: {})",
            waiters.lagged.load(Ordering::Relaxed)
        ),
    };
    Sample {
        suspend: suspended,
        resolve,
        total: finished.duration_since(started),
        measured: started >= warm_until,
        finished,
    }
}

/// The figures of one phase.
struct Phase {
    store: &'static str,
    concurrency: usize,
    per_second: f64,
    samples: Vec<Sample>,
}

/// Runs round trips on `concurrency` conversations at a time for
/// the plan's warm-up and measured window; throughput counts the round trips that finished in
/// the measured window.
async fn phase(
    store: &'static str,
    agent: &DurableAgent,
    waiters: &Arc<Waiters>,
    tag: &str,
    concurrency: usize,
) -> Phase {
    let ran_before = RAN.load(Ordering::Relaxed);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let warm_until = started + plan().warm_up;
    let stop_at = warm_until + plan().measure;
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let agent = agent.clone();
        let waiters = Arc::clone(waiters);
        let next = Arc::clone(&next);
        let tag = format!("{tag}-c{concurrency}");
        workers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut last = None;
            while Instant::now() < stop_at {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let conversation = format!("{tag}-{n}");
                let call = format!("call-{n}");
                samples.push(round_trip(&agent, &waiters, &conversation, &call, warm_until).await);
                last = Some(conversation);
            }
            (samples, last)
        }));
    }
    let mut samples = Vec::new();
    let mut last = Vec::new();
    for worker in workers {
        let (mut of_worker, conversation) = ok(worker.await, "a worker");
        samples.append(&mut of_worker);
        last.extend(conversation);
    }
    let window_end = samples
        .iter()
        .map(|sample| sample.finished)
        .filter(|at| *at <= stop_at)
        .max()
        .unwrap_or(stop_at);
    let in_window = samples
        .iter()
        .filter(|sample| sample.finished >= warm_until && sample.finished <= stop_at)
        .count();
    let seconds = window_end.duration_since(warm_until).as_secs_f64();
    // Every approval ran the tool exactly once, and each worker's last
    // conversation is stored idle with the tool's result and the answer.
    assert_eq!(
        RAN.load(Ordering::Relaxed) - ran_before,
        samples.len(),
        "{store}: tool runs ≠ approvals"
    );
    for conversation in &last {
        check_finished(agent, conversation).await;
    }
    Phase {
        store,
        concurrency,
        per_second: in_window as f64 / seconds.max(f64::EPSILON),
        samples: samples
            .into_iter()
            .filter(|sample| sample.measured)
            .collect(),
    }
}

async fn check_finished(agent: &DurableAgent, conversation: &str) {
    let stored = ok(agent.conversation(conversation).await, "conversation")
        .unwrap_or_else(|| panic!("{conversation} is not stored"));
    assert_eq!(stored.status, ConversationStatus::Idle, "{conversation}");
    let messages = &stored.conversation.messages;
    let result = messages.iter().find_map(|message| match message {
        Message::Tool { content, .. } => Some(content.as_str()),
        _ => None,
    });
    assert!(
        result.is_some_and(|text| text.contains("charged 500")),
        "{conversation}: no tool result in {messages:?}"
    );
    assert!(
        matches!(messages.last(), Some(Message::Assistant { content, .. }) if content == "Charged."),
        "{conversation}: no final answer in {messages:?}"
    );
}

/// Prints the store operations of one round trip, by part.
async fn count_operations() {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    let agent = agent(Arc::clone(&store) as Arc<dyn Store>);
    let waiters = Arc::new(Waiters::default());
    let dispatcher = waiters.dispatch(&agent);
    suspend(&agent, "count", "call-count").await;
    let suspending = store.take_counts();
    let done = waiters.register("count");
    ok(
        agent
            .resolve("count", "call-count", Resolution::Approve)
            .await,
        "resolve",
    );
    let resolving = store.take_counts();
    if !matches!(
        tokio::time::timeout(Duration::from_secs(10), done).await,
        Ok(Ok(Ok(_)))
    ) {
        panic!("the counted round trip did not complete");
    }
    let resuming = store.take_counts();
    dispatcher.abort();
    let commits = suspending.commits() + resolving.commits() + resuming.commits();
    println!("Store operations of one round trip ({commits} commits):");
    println!("- send until suspended: {suspending}");
    println!("- resolve until acknowledged: {resolving}");
    println!("- background run: {resuming}");
}

/// The nearest-rank percentile `p` (0–100) of `values`, sorted.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(samples: &[Sample], field: impl Fn(&Sample) -> Duration) -> Vec<Duration> {
    let mut values: Vec<Duration> = samples.iter().map(field).collect();
    values.sort_unstable();
    values
}

fn show(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else {
        format!("{:.2} ms", micros / 1000.0)
    }
}

/// `baseline ÷ value` as `1/N` (how many times fewer than the baseline).
fn fraction(value: f64, baseline: Option<f64>) -> String {
    match baseline {
        Some(baseline) if value > 0.0 => {
            let times = baseline / value;
            if times < 10.0 {
                format!("1/{times:.1}")
            } else {
                format!("1/{times:.0}")
            }
        }
        _ => "–".to_owned(),
    }
}

fn ratio(value: f64, baseline: Option<f64>) -> String {
    match baseline {
        Some(baseline) if baseline > 0.0 => {
            let times = value / baseline;
            if times < 10.0 {
                format!("{times:.2}×")
            } else {
                format!("{times:.0}×")
            }
        }
        _ => "–".to_owned(),
    }
}

fn report(phases: &[Phase]) {
    println!();
    println!(
        "| store | conversations at once | round trips/s | vs memory | resolve p50 | resolve p99 | round trip p50 | round trip p99 | round trip p50 vs memory | suspend p50 | measured |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for phase in phases {
        let baseline = phases
            .iter()
            .find(|other| other.store == "MemoryStore" && other.concurrency == phase.concurrency);
        let resolve = sorted(&phase.samples, |sample| sample.resolve);
        let total = sorted(&phase.samples, |sample| sample.total);
        let suspend = sorted(&phase.samples, |sample| sample.suspend);
        let total_p50 = percentile(&total, 50.0);
        let is_baseline = phase.store == "MemoryStore";
        let baseline_p50 = baseline.map(|baseline| {
            percentile(&sorted(&baseline.samples, |sample| sample.total), 50.0).as_secs_f64()
        });
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
            phase.store,
            phase.concurrency,
            phase.per_second,
            if is_baseline {
                "baseline".to_owned()
            } else {
                fraction(
                    phase.per_second,
                    baseline.map(|baseline| baseline.per_second),
                )
            },
            show(percentile(&resolve, 50.0)),
            show(percentile(&resolve, 99.0)),
            show(total_p50),
            show(percentile(&total, 99.0)),
            if is_baseline {
                "baseline".to_owned()
            } else {
                ratio(total_p50.as_secs_f64(), baseline_p50)
            },
            show(percentile(&suspend, 50.0)),
            phase.samples.len(),
        );
    }
}

/// This process's resident set, in KiB.
fn rss_kib() -> u64 {
    let status = ok(
        std::fs::read_to_string("/proc/self/status"),
        "/proc/self/status",
    );
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/self/status"))
}

/// Suspends conversations `from..to` of `tag`, 16 at a time.
async fn suspend_many(agent: &DurableAgent, tag: &str, from: usize, to: usize) {
    let next = Arc::new(AtomicUsize::new(from));
    let mut workers = Vec::new();
    for _ in 0..CONCURRENCY {
        let agent = agent.clone();
        let next = Arc::clone(&next);
        let tag = tag.to_owned();
        workers.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= to {
                    return;
                }
                suspend(&agent, &format!("{tag}-{n}"), &format!("call-{n}")).await;
            }
        }));
    }
    for worker in workers {
        ok(worker.await, "a worker");
    }
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

/// The child process: suspends the plan's conversations on `store` and
/// prints `DURABLE-MEMORY <rss before KiB> <rss after KiB> <ms> <db bytes>`.
fn memory_child(store: &str, dir: &Path) {
    let runtime = runtime();
    runtime.block_on(async {
        let sqlite = match store {
            "sqlite" => Some(Arc::new(ok(
                SqliteStore::open(dir.join("memory.db")).await,
                "SqliteStore::open",
            ))),
            _ => None,
        };
        let shared: Arc<dyn Store> = match &sqlite {
            Some(sqlite) => Arc::clone(sqlite) as Arc<dyn Store>,
            None => Arc::new(MemoryStore::new()),
        };
        let agent = agent(shared);
        let (warm, suspended) = (plan().memory_warm_up, plan().suspended);
        suspend_many(&agent, "mem", 0, warm).await;
        let before = rss_kib();
        let started = Instant::now();
        suspend_many(&agent, "mem", warm, warm + suspended).await;
        let elapsed = started.elapsed();
        let after = rss_kib();
        for n in [warm, warm + suspended - 1] {
            let pending = ok(agent.pending(&format!("mem-{n}")).await, "pending");
            assert_eq!(pending.len(), 1, "mem-{n} is not suspended");
        }
        let mut bytes = 0;
        if let Some(sqlite) = sqlite {
            drop(agent);
            // The last connection to close checkpoints the WAL into the file.
            sqlite.close().await;
            bytes = ["memory.db", "memory.db-wal", "memory.db-shm"]
                .iter()
                .map(|name| file_size(&dir.join(name)))
                .sum();
        }
        println!(
            "DURABLE-MEMORY {before} {after} {} {bytes}",
            elapsed.as_millis()
        );
    });
}

/// Runs `memory_child` in a fresh process, so that nothing the throughput
/// phases allocated is in its resident set.
fn memory(store: &'static str, dir: &Path) -> Option<(u64, u64, u64, u64)> {
    let exe = ok(std::env::current_exe(), "current_exe");
    let mut child = std::process::Command::new(exe);
    child.arg(MEMORY_FLAG).arg(store).arg(dir);
    if benchmarking() {
        child.arg("--bench");
    }
    let output = ok(child.output(), "the memory child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("DURABLE-MEMORY "));
    let Some(line) = line else {
        eprintln!(
            "the {store} memory run failed: {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    };
    let figures: Vec<u64> = line
        .split_whitespace()
        .filter_map(|field| field.parse().ok())
        .collect();
    match figures[..] {
        [before, after, ms, bytes] => Some((before, after, ms, bytes)),
        _ => None,
    }
}

fn memory_report(dir: &Path) {
    let suspended = plan().suspended;
    println!();
    println!(
        "| store | {suspended} conversations suspended in | suspensions/s | RSS growth | RSS per conversation | vs memory | database file per conversation |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut baseline = None;
    for (name, store) in [("MemoryStore", "memory"), ("SqliteStore", "sqlite")] {
        let Some((before, after, ms, bytes)) = memory(store, dir) else {
            continue;
        };
        let growth = after.saturating_sub(before);
        let per = growth as f64 * 1024.0 / suspended as f64;
        if store == "memory" {
            baseline = Some(per);
        }
        let versus = if store == "memory" {
            "baseline".to_owned()
        } else {
            ratio(per, baseline)
        };
        let file = if bytes == 0 {
            "–".to_owned()
        } else {
            format!(
                "{:.0} B",
                bytes as f64 / (plan().memory_warm_up + suspended) as f64
            )
        };
        println!(
            "| {name} | {:.2} s | {:.0} | {:.1} MiB | {per:.0} B | {} | {file} |",
            ms as f64 / 1000.0,
            suspended as f64 / (ms.max(1) as f64 / 1000.0),
            growth as f64 / 1024.0,
            versus,
        );
    }
}

/// The directory of the SQLite files, removed when dropped (also when a
/// phase panics).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("aptix-bench-durable-{}", run_tag()));
        ok(std::fs::create_dir_all(&dir), "the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == MEMORY_FLAG) {
        let (Some(store), Some(dir)) = (args.get(at + 1), args.get(at + 2)) else {
            panic!("usage: {MEMORY_FLAG} <memory|sqlite> <dir>");
        };
        memory_child(store, Path::new(dir));
        return;
    }
    // `cargo bench -- <filter>`: nothing here to filter; `--list` lists none.
    if args.iter().any(|arg| arg == "--list") {
        return;
    }
    let scratch = Scratch::new();
    let dir = scratch.0.clone();
    let tag = run_tag();
    let runtime = runtime();
    let phases = runtime.block_on(async {
        let mut stores: Vec<(&'static str, Arc<dyn Store>)> = vec![
            ("MemoryStore", Arc::new(MemoryStore::new())),
            (
                "SqliteStore",
                Arc::new(ok(
                    SqliteStore::open(dir.join("throughput.db")).await,
                    "SqliteStore::open",
                )),
            ),
        ];
        let mut scratch_database = None;
        match std::env::var("APTIX_BENCH_PG_URL").or_else(|_| std::env::var("APTIX_TEST_PG_URL")) {
            Ok(url) if benchmarking() => {
                let database = ScratchDatabase::create(&url, &tag).await;
                stores.push((
                    "PostgresStore",
                    Arc::new(ok(
                        PostgresStore::connect(&database.url).await,
                        "PostgresStore::connect",
                    )),
                ));
                scratch_database = Some(database);
            }
            _ => eprintln!("no PostgreSQL URL (or not benchmarking): skipping PostgreSQL"),
        }
        let mut phases = Vec::new();
        for (name, store) in stores {
            let agent = agent(store);
            let waiters = Arc::new(Waiters::default());
            let dispatcher = waiters.dispatch(&agent);
            for concurrency in [1, CONCURRENCY] {
                eprintln!("{name}, {concurrency} at once…");
                phases.push(phase(name, &agent, &waiters, &tag, concurrency).await);
            }
            dispatcher.abort();
        }
        if let Some(database) = scratch_database {
            database.drop_it().await;
        }
        phases
    });
    drop(runtime);
    report(&phases);
    println!();
    // One thread: the background run spawned by `resolve` cannot start
    // before `resolve` returns (`MemoryStore` never yields), so the counts
    // split exactly.
    let counting = ok(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        "the runtime",
    );
    counting.block_on(count_operations());
    eprintln!(
        "memory: {} suspended conversations per store…",
        plan().suspended
    );
    memory_report(&dir);
    drop(scratch);
}
