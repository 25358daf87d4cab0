//! A property test: random interleavings of model turns (with
//! colliding call ids), resolutions, new input, store failures, crashes and
//! restarts drive a durable agent over `MemoryStore` and `SqliteStore`, and
//! the invariants are checked after every step:
//!
//! - approval: no approval-gated tool ran (or went to its client) without
//!   an approval given for that tool and those arguments;
//! - once: no call ran twice unless its tool is idempotent;
//! - answered: once the conversation is idle, every call in the transcript
//!   has exactly one result, and nothing is answered twice;
//! - truthful: a call that ran is never reported to the model as not run;
//! - reachable: every pending call is in `pending()` and can be resolved,
//!   and a conversation with nothing pending and unanswered calls is
//!   resumed (by the resolution that said so, or by `ensure_started`);
//! - secrets: no declared secret appears in any event (`Debug` and JSON) or
//!   any log line (TRACE);
//! - refused: a call the live run refused never runs, before or after a
//!   crash: `unoffered_op` (which `prepare_step` never offers), `hidden_op`
//!   (which no tool search revealed: the agent searches, and the model
//!   never does) and every call past the turn's third (`max_calls_per_turn`).
//!
//! `PROPTEST_CASES` sets the number of cases per store (default 64);
//! `APTIX_PROPS_SKIP=secrets,truthful,...` turns invariants off, to look
//! past one violation for the next (`approval`, `once`, `answered`,
//! `truthful`, `reachable`, `orphans`: a pending wait of an answered call,
//! `secrets`); `APTIX_PROPS_SETTLE_MS` (default 3000) is how long a
//! conversation may take to come to rest.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::common::Backend;
use aptix::durable::{ConversationEvent, DurableAgent, DurableError, Revival};
use aptix::model::{ChatModel, ChatRequest, FinishReason, ModelEvent, ModelStream, ToolCallDelta};
use aptix::prelude::*;
use aptix::store::{CallRecord, CallState, ConversationStatus, MemoryStore, SqliteStore, Step};
use aptix::store::{Store, StoredConversation};
use aptix::transcript::Message;
use aptix::{
    Agent, AgentEvent, Catalog, Dialect, DoneReason, Input, Resolution, durable::ResolveError,
};
use aptix_testkit::faulty_store::{Fault, FaultyStore, StoreOp};
use futures_util::StreamExt;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// A declared secret that fits its schema (it reaches the tool).
const SECRET: &str = "tok_q7zsecretvalue";
/// A declared secret that breaks its pattern (validation errors quote it).
const BAD_SECRET: &str = "TOK_LIVE_Q7ZSECRET";

// ---------------------------------------------------------------- tools

/// What really ran: (tool, tool_call_id, arguments) per conversation.
#[derive(Debug, Clone)]
struct Run {
    tool: &'static str,
    id: String,
    args: Value,
}

static RUNS: LazyLock<Mutex<HashMap<String, Vec<Run>>>> = LazyLock::new(Default::default);
/// Conversations whose next server run must hang (the process then dies).
static HOLD: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);
/// Conversations in which a run is hanging.
static HELD: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn ran(tool: &'static str, ctx: &ToolContext, args: Value) {
    let conversation = ctx.conversation_id().unwrap_or_default().to_owned();
    lock(&RUNS)
        .entry(conversation.clone())
        .or_default()
        .push(Run {
            tool,
            id: ctx.tool_call_id().to_owned(),
            args,
        });
    if lock(&HOLD).remove(&conversation) {
        lock(&HELD).insert(conversation);
        std::future::pending::<()>().await;
    }
}

/// Arguments of every numbered tool: `n` identifies the model's call.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Nonce {
    /// The call's number.
    pub n: u32,
}

/// Arguments of `store_token`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TokenArgs {
    /// The token.
    #[schemars(regex(pattern = r"^tok_[a-z0-9]+$"))]
    pub secret: String,
    /// The call's number.
    pub n: u32,
}

/// A client's or a person's answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Reply {
    /// Anything.
    pub n: u32,
}

/// Gated server tool.
#[agent_tool(name = "gated_op", usage = "Test tool.", approval = requires_approval)]
async fn gated_op(args: Nonce, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran("gated_op", ctx, json!({"n": args.n})).await;
    Ok(args.n)
}

/// Server tool that runs at once.
#[agent_tool(name = "auto_op", usage = "Test tool.")]
async fn auto_op(args: Nonce, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran("auto_op", ctx, json!({"n": args.n})).await;
    Ok(args.n)
}

/// Server tool that may run twice.
#[agent_tool(name = "idem_op", usage = "Test tool.", idempotent = true)]
async fn idem_op(args: Nonce, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran("idem_op", ctx, json!({"n": args.n})).await;
    Ok(args.n)
}

/// Gated server tool whose argument is a declared secret.
#[agent_tool(
    name = "store_token",
    usage = "Test tool.",
    approval = requires_approval,
    redact = ["/secret"]
)]
async fn store_token(args: TokenArgs, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran(
        "store_token",
        ctx,
        json!({"secret": args.secret, "n": args.n}),
    )
    .await;
    Ok(args.n)
}

/// Client tool.
#[agent_tool(name = "client_op", usage = "Test tool.", executor = client, output = Reply)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct ClientOp {
    /// The call's number.
    pub n: u32,
}

/// Gated client tool.
#[agent_tool(
    name = "gated_client_op",
    usage = "Test tool.",
    executor = client,
    approval = requires_approval,
    output = Reply
)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct GatedClientOp {
    /// The call's number.
    pub n: u32,
}

/// Server tool that `prepare_step` never offers.
#[agent_tool(name = "unoffered_op", usage = "Test tool.")]
async fn unoffered_op(args: Nonce, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran("unoffered_op", ctx, json!({"n": args.n})).await;
    Ok(args.n)
}

/// Server tool that tool search only offers once a search found it (none
/// ever does).
#[agent_tool(name = "hidden_op", usage = "Test tool.")]
async fn hidden_op(args: Nonce, ctx: &ToolContext) -> Result<u32, ToolError> {
    ran("hidden_op", ctx, json!({"n": args.n})).await;
    Ok(args.n)
}

/// The most calls that run per turn (`max_calls_per_turn`); turns make up
/// to one more.
const CALLS_PER_TURN: usize = 3;

/// Human tool.
#[agent_tool(name = "ask_human", usage = "Test tool.", executor = human, output = Reply)]
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct AskHuman {
    /// The call's number.
    pub n: u32,
}

/// The tools a model turn can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gated,
    Auto,
    Idem,
    Token,
    Client,
    GatedClient,
    Human,
    Unoffered,
    Hidden,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::Gated,
        Kind::Auto,
        Kind::Idem,
        Kind::Token,
        Kind::Client,
        Kind::GatedClient,
        Kind::Human,
        Kind::Unoffered,
        Kind::Hidden,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Gated => "gated_op",
            Kind::Auto => "auto_op",
            Kind::Idem => "idem_op",
            Kind::Token => "store_token",
            Kind::Client => "client_op",
            Kind::GatedClient => "gated_client_op",
            Kind::Human => "ask_human",
            Kind::Unoffered => "unoffered_op",
            Kind::Hidden => "hidden_op",
        }
    }
}

fn gated(tool: &str) -> bool {
    matches!(tool, "gated_op" | "store_token" | "gated_client_op")
}

fn idempotent(tool: &str) -> bool {
    tool == "idem_op"
}

fn catalog() -> Catalog {
    Catalog::builder()
        .tool::<GatedOpTool>()
        .tool::<AutoOpTool>()
        .tool::<IdemOpTool>()
        .tool::<StoreTokenTool>()
        .tool::<ClientOp>()
        .tool::<GatedClientOp>()
        .tool::<AskHuman>()
        .tool::<UnofferedOpTool>()
        .tool::<HiddenOpTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Every tool but `hidden_op`, which only a search would reveal.
fn always_offered() -> Vec<&'static str> {
    Kind::ALL
        .iter()
        .map(|kind| kind.name())
        .filter(|name| *name != "hidden_op")
        .collect()
}

// ---------------------------------------------------------------- model

/// One call of a scripted turn, as built by the harness.
#[derive(Debug, Clone)]
struct ScriptedCall {
    id: String,
    name: &'static str,
    arguments: String,
}

/// The model: answers with the queued turns in order, then with text. It
/// outlives the processes, like a real provider.
#[derive(Default)]
struct QueueModel {
    turns: Mutex<VecDeque<Vec<ScriptedCall>>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for QueueModel {
    fn dialect(&self) -> Dialect {
        Dialect::OpenAiStrict
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        lock(&self.requests).push(request.clone());
        let turn = lock(&self.turns).pop_front();
        let mut events = Vec::new();
        match turn {
            Some(calls) => {
                for (index, call) in calls.into_iter().enumerate() {
                    events.push(Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                        index,
                        id: Some(call.id),
                        name: Some(call.name.to_owned()),
                        arguments: String::new(),
                    })));
                    events.push(Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                        index,
                        id: None,
                        name: None,
                        arguments: call.arguments,
                    })));
                }
                events.push(Ok(ModelEvent::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None,
                }));
            }
            None => {
                events.push(Ok(ModelEvent::TextDelta("done".into())));
                events.push(Ok(ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: None,
                }));
            }
        }
        Box::pin(futures_util::stream::iter(events))
    }
}

// ---------------------------------------------------------------- operations

/// A call the model makes: which tool, which id from a pool of three (so
/// ids collide within and across turns), and for `store_token` whether the
/// secret breaks its pattern.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CallSpec {
    kind: Kind,
    id: u8,
    bad_secret: bool,
}

impl std::fmt::Debug for CallSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "call(Kind::{:?}, {}, {})",
            self.kind, self.id, self.bad_secret
        )
    }
}

/// How a resolution answers the pending call it picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `Approve` for an approval, `Result` for a client or a person.
    Fitting,
    Approve,
    ApproveWithArgs,
    Deny,
    Result,
    /// `Approve` sent to an id from the pool, whatever waits.
    Stray(u8),
}

/// A store failure to arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FaultSpec {
    op: StoreOp,
    after: u32,
    /// `None`: until the end of the case.
    times: Option<u32>,
    applied: bool,
}

impl FaultSpec {
    fn fault(self) -> Fault {
        let fault = Fault::after(self.after);
        let fault = match self.times {
            Some(times) => fault.lasting(times),
            None => fault.forever(),
        };
        if self.applied {
            fault.after_applying()
        } else {
            fault
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// Queue the model's next turn.
    Turn(Vec<CallSpec>),
    /// New user input; with `inline`, the calls it suspends on are resolved
    /// while its stream is still being read (before its end).
    Send { inline: bool },
    /// Resolve the `pick`-th pending call (modulo their number).
    Resolve { pick: usize, how: How },
    /// Arm a store failure.
    Fail(FaultSpec),
    /// The process stops (its runtime and every task with it) and a new
    /// one starts over the same store and calls `revive_all`.
    Restart { resume_on_resolve: bool },
    /// New input, and the process dies while a server tool of the turn is
    /// running; then a restart as above.
    Crash,
    /// Let client waits pass their deadline (`wait`), then sweep.
    Sweep { wait: bool },
    /// `ensure_started`.
    EnsureStarted,
}

fn call_spec() -> impl Strategy<Value = CallSpec> {
    (
        proptest::sample::select(Kind::ALL.to_vec()),
        0u8..3,
        proptest::bool::weighted(0.3),
    )
        .prop_map(|(kind, id, bad_secret)| CallSpec {
            kind,
            id,
            bad_secret: bad_secret && kind == Kind::Token,
        })
}

fn how() -> impl Strategy<Value = How> {
    prop_oneof![
        4 => Just(How::Fitting),
        1 => Just(How::Approve),
        1 => Just(How::ApproveWithArgs),
        1 => Just(How::Deny),
        1 => Just(How::Result),
        1 => (0u8..4).prop_map(How::Stray),
    ]
}

fn fault_spec() -> impl Strategy<Value = FaultSpec> {
    (
        proptest::sample::select(StoreOp::ALL.to_vec()),
        0u32..4,
        prop_oneof![4 => (1u32..3).prop_map(Some), 1 => Just(None)],
        any::<bool>(),
    )
        .prop_map(|(op, after, times, applied)| FaultSpec {
            op,
            after,
            times,
            applied: applied && op.writes(),
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => proptest::collection::vec(call_spec(), 1..=CALLS_PER_TURN + 1).prop_map(Op::Turn),
        5 => any::<bool>().prop_map(|inline| Op::Send { inline }),
        6 => (0usize..4, how()).prop_map(|(pick, how)| Op::Resolve { pick, how }),
        2 => fault_spec().prop_map(Op::Fail),
        1 => any::<bool>().prop_map(|resume_on_resolve| Op::Restart { resume_on_resolve }),
        2 => Just(Op::Crash),
        1 => proptest::bool::weighted(0.3).prop_map(|wait| Op::Sweep { wait }),
        1 => Just(Op::EnsureStarted),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 5..=30)
}

// ---------------------------------------------------------------- logs

/// Log lines (TRACE, every target) that carried a secret.
static LEAKED_LOGS: LazyLock<Mutex<Vec<String>>> = LazyLock::new(Default::default);

struct LeakScanner;

impl std::io::Write for LeakScanner {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(bytes);
        if text.contains(SECRET) || text.contains(BAD_SECRET) {
            lock(&LEAKED_LOGS).push(text.into_owned());
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(|| LeakScanner)
            .finish();
        // Another subscriber first would only mean fewer lines scanned.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

// ---------------------------------------------------------------- harness

/// Which invariants are checked (all, unless `APTIX_PROPS_SKIP` names some).
fn checked(invariant: &str) -> bool {
    static SKIP: LazyLock<Vec<String>> = LazyLock::new(|| {
        std::env::var("APTIX_PROPS_SKIP")
            .unwrap_or_default()
            .split(',')
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect()
    });
    !SKIP.iter().any(|name| name == invariant)
}

/// How long the harness waits for background work before it calls the
/// conversation stuck.
fn settle_timeout() -> Duration {
    let ms = std::env::var("APTIX_PROPS_SETTLE_MS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(3000);
    Duration::from_millis(ms)
}

/// How long a process holds a conversation between saves; short, so a
/// restarted process takes over quickly from the dead one.
const LEASE: Duration = Duration::from_millis(300);
/// How long a client call waits with no client attached.
const CLIENT_GRACE: Duration = Duration::from_millis(400);

/// One process: a runtime (its death drops every task), an agent, and
/// the store as this process sees it (with its armed failures).
struct Process {
    runtime: tokio::runtime::Runtime,
    agent: DurableAgent,
    store: Arc<FaultyStore<Arc<dyn Store>>>,
    events: broadcast::Receiver<ConversationEvent>,
}

static CASE: AtomicU64 = AtomicU64::new(0);

struct Harness {
    backend: Backend,
    conversation: String,
    model: Arc<QueueModel>,
    memory: Arc<MemoryStore>,
    sqlite: PathBuf,
    process: Option<Process>,
    resume_on_resolve: bool,
    next_nonce: u32,
    /// (tool, arguments) approved by a person.
    approvals: Vec<(String, Value)>,
    /// Number an `ApproveWithArgs` gave a call → the model's number.
    renumbered: HashMap<u32, u32>,
    /// The numbers of the calls made past their turn's limit.
    over_the_limit: HashSet<u32>,
    /// Store failures injected by earlier processes.
    injected_before: u64,
    /// A resolution (or revival, or sweep) said the conversation would
    /// resume by itself.
    promised: Option<String>,
    /// A store failure or a crash may have left the conversation needing
    /// `ensure_started`.
    excused: bool,
    /// Store failures injected when the current step started.
    mark: u64,
    /// What happened, for the failure message.
    trail: Vec<String>,
}

type Check = Result<(), String>;

fn fail<T>(message: String) -> Result<T, String> {
    Err(message)
}

impl Harness {
    fn new(backend: Backend) -> Result<Self, String> {
        capture_logs();
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let tag = format!(
            "{}-{}-{case}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let mut harness = Harness {
            backend,
            conversation: format!("prop-{backend:?}-{tag}"),
            model: Arc::default(),
            memory: Arc::new(MemoryStore::new()),
            sqlite: std::env::temp_dir().join(format!("aptix-props-{tag}.db")),
            process: None,
            resume_on_resolve: true,
            next_nonce: 1,
            approvals: Vec::new(),
            renumbered: HashMap::new(),
            over_the_limit: HashSet::new(),
            injected_before: 0,
            promised: None,
            excused: false,
            mark: 0,
            trail: Vec::new(),
        };
        harness.start()?;
        Ok(harness)
    }

    fn start(&mut self) -> Check {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let inner: Arc<dyn Store> = match self.backend {
            Backend::Memory => self.memory.clone(),
            Backend::Sqlite => Arc::new(
                runtime
                    .block_on(SqliteStore::open(&self.sqlite))
                    .map_err(|e| format!("cannot open SQLite: {e}"))?,
            ),
            Backend::Postgres => {
                return fail("the property runs on MemoryStore and SqliteStore".into());
            }
        };
        let store = Arc::new(FaultyStore::new(inner));
        let agent = DurableAgent::builder(
            Agent::builder()
                .shared_model(self.model.clone())
                .catalog(catalog())
                .prepare_step(|step| {
                    aptix::agent::PreparedStep::all().tools(step.catalog.without("unoffered_op"))
                })
                .tool_search(aptix::tool_search::ToolSearch::local().always_offer(always_offered()))
                .max_calls_per_turn(CALLS_PER_TURN)
                .build()
                .map_err(|e| e.to_string())?,
            store.clone(),
        )
        .lease(LEASE)
        .client_grace(CLIENT_GRACE)
        .resume_on_resolve(self.resume_on_resolve)
        .build();
        let events = agent.subscribe();
        self.process = Some(Process {
            runtime,
            agent,
            store,
            events,
        });
        Ok(())
    }

    fn process(&self) -> Result<&Process, String> {
        self.process
            .as_ref()
            .ok_or_else(|| "no process is running".to_owned())
    }

    /// The store as it is, without the armed failures.
    fn inner_store(&self) -> Result<Arc<dyn Store>, String> {
        Ok(self.process()?.store.inner().clone())
    }

    fn injected(&self) -> u64 {
        self.injected_before + self.process.as_ref().map_or(0, |p| p.store.injected())
    }

    fn block_on<F: Future>(&self, future: F) -> Result<F::Output, String> {
        Ok(self.process()?.runtime.block_on(future))
    }

    /// Kills the process: the runtime goes, and every task of it.
    fn kill(&mut self) {
        if let Some(process) = self.process.take() {
            self.injected_before += process.store.injected();
            let Process {
                runtime,
                agent,
                store,
                events,
            } = process;
            drop(events);
            runtime.block_on(async move {
                drop(agent);
                drop(store);
            });
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
    }

    fn nonce(&mut self) -> u32 {
        let n = self.next_nonce;
        self.next_nonce += 1;
        n
    }

    fn arguments(&mut self, kind: Kind, bad_secret: bool) -> Value {
        let n = self.nonce();
        match kind {
            Kind::Token => json!({"secret": if bad_secret { BAD_SECRET } else { SECRET }, "n": n}),
            _ => json!({"n": n}),
        }
    }

    // ------------------------------------------------------------ steps

    fn step(&mut self, op: &Op) -> Check {
        self.trail.push(format!("{op:?}"));
        self.mark = self.injected();
        match op {
            Op::Turn(calls) => {
                let turn = calls
                    .iter()
                    .enumerate()
                    .map(|(position, spec)| {
                        let arguments = self.arguments(spec.kind, spec.bad_secret);
                        if position >= CALLS_PER_TURN
                            && let Some(n) = arguments.get("n").and_then(Value::as_u64)
                        {
                            self.over_the_limit.insert(n as u32);
                        }
                        ScriptedCall {
                            id: format!("call_{}", spec.id),
                            name: spec.kind.name(),
                            arguments: arguments.to_string(),
                        }
                    })
                    .collect();
                lock(&self.model.turns).push_back(turn);
                return Ok(());
            }
            Op::Fail(spec) => {
                self.process()?.store.fail(spec.op, spec.fault());
                return Ok(());
            }
            Op::Send { inline } => self.send(*inline)?,
            Op::Resolve { pick, how } => self.resolve_pick(*pick, *how)?,
            Op::Restart { resume_on_resolve } => {
                self.resume_on_resolve = *resume_on_resolve;
                self.restart()?;
            }
            Op::Crash => self.crash()?,
            Op::Sweep { wait } => {
                if *wait {
                    // The clock has to pass the deadlines: time passing is
                    // what is tested, not a way to wait for other work.
                    std::thread::sleep(CLIENT_GRACE + Duration::from_millis(50));
                }
                let swept = self.block_on(self.process()?.agent.sweep_deadlines())?;
                match swept {
                    Ok(expired) if expired > 0 && self.resume_on_resolve => {
                        self.promised = Some(format!("sweep_deadlines expired {expired}"));
                    }
                    Ok(_) => {}
                    Err(error) => self.note(format!("sweep_deadlines -> {error}")),
                }
            }
            Op::EnsureStarted => self.ensure_started()?,
        }
        self.settle()?;
        self.check_always()
    }

    fn note(&mut self, line: String) {
        self.trail.push(format!("    {line}"));
    }

    fn send(&mut self, inline: bool) -> Check {
        let started = Instant::now();
        let stream = loop {
            let sent = self.block_on(
                self.process()?
                    .agent
                    .send(&self.conversation, Input::User("go on".into())),
            )?;
            match sent {
                Err(DurableError::Busy(_)) if started.elapsed() < settle_timeout() => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(DurableError::Busy(_)) if !self.excused => {
                    return fail(format!(
                        "send stayed Busy for {:?} with no run going",
                        settle_timeout()
                    ));
                }
                Err(error) => {
                    self.note(format!("send -> {error}"));
                    return Ok(());
                }
                Ok(stream) => break stream,
            }
        };
        let mut stream = stream;
        let mut events = Vec::new();
        while let Some(event) = self.block_on(stream.next())? {
            let suspended = matches!(
                &event,
                AgentEvent::Done {
                    reason: DoneReason::Suspended(_),
                    ..
                }
            );
            events.push(event);
            if suspended && inline {
                // Resolve before the stream has been read to its end, as an
                // event loop that approves what it is shown does.
                let pending = self.pending()?;
                for call in pending {
                    self.resolve(&call.0, call.1, call.2, How::Fitting)?;
                }
                // The consumer is busy a moment (forwarding the event)
                // before it reads the end of the stream: the scenario, not
                // a wait for a result.
                self.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await })?;
            }
        }
        drop(stream);
        let done = events.iter().rev().find_map(|event| match event {
            AgentEvent::Done { reason, .. } => Some(reason_name(reason)),
            _ => None,
        });
        self.note(format!("send -> {} events, {done:?}", events.len()));
        self.check_events(&events, "the send stream")
    }

    /// The pending waits: (id, tool, step, arguments), in call order.
    fn pending(&mut self) -> Result<Vec<(String, Step, Value)>, String> {
        let records = self
            .block_on(self.inner_store()?.calls(&self.conversation))?
            .map_err(|e| e.to_string())?;
        Ok(records
            .into_iter()
            .filter(|record| record.state == CallState::Pending)
            .map(|record| {
                let arguments = serde_json::from_str(&record.arguments).unwrap_or(Value::Null);
                (record.tool_call_id, record.step, arguments)
            })
            .collect())
    }

    fn resolve_pick(&mut self, pick: usize, how: How) -> Check {
        if let How::Stray(id) = how {
            return self.resolve(&format!("call_{id}"), Step::Approval, Value::Null, how);
        }
        let pending = self.pending()?;
        if pending.is_empty() {
            return self.resolve("call_0", Step::Approval, Value::Null, How::Approve);
        }
        let (id, step, arguments) = pending[pick % pending.len()].clone();
        self.resolve(&id, step, arguments, how)
    }

    fn resolve(&mut self, id: &str, step: Step, arguments: Value, how: How) -> Check {
        let records = self
            .block_on(self.inner_store()?.calls(&self.conversation))?
            .map_err(|e| e.to_string())?;
        let target = records
            .iter()
            .find(|record| {
                record.tool_call_id == id
                    && record.step == step
                    && (record.state == CallState::Pending || !matches!(how, How::Stray(_)))
            })
            .or_else(|| {
                records
                    .iter()
                    .find(|record| record.tool_call_id == id && record.state == CallState::Pending)
            });
        let tool = target.map(|record| record.tool.clone()).unwrap_or_default();
        // Approving an id blindly approves what waits under it.
        let arguments = match (how, target) {
            (How::Stray(_), Some(record)) => {
                serde_json::from_str(&record.arguments).unwrap_or(Value::Null)
            }
            _ => arguments,
        };
        let number = arguments.get("n").and_then(Value::as_u64).unwrap_or(0) as u32;
        let resolution = match (how, step) {
            (How::Fitting, Step::Approval) | (How::Approve | How::Stray(_), _) => {
                self.approvals.push((tool.clone(), arguments.clone()));
                Resolution::Approve
            }
            (How::ApproveWithArgs, _) => {
                let mut changed = arguments.clone();
                let n = self.nonce();
                changed["n"] = json!(n);
                self.renumbered.insert(n, number);
                self.approvals.push((tool.clone(), changed.clone()));
                Resolution::ApproveWithArgs(changed)
            }
            (How::Deny, _) => Resolution::Deny {
                message: "no".into(),
            },
            (How::Fitting | How::Result, _) => Resolution::Result(json!({"n": number})),
        };
        let label = format!("{resolution:?}");
        let resolved = self.block_on(self.process()?.agent.resolve(
            &self.conversation,
            id,
            resolution,
        ))?;
        match resolved {
            Ok(resolved) => {
                self.note(format!(
                    "resolve {id} ({tool}, {step}) {label} -> {resolved:?}"
                ));
                if resolved.pending == 0 && self.resume_on_resolve {
                    self.promised = Some(format!(
                        "resolve({id}, {label}) answered pending: 0 (the next turn starts)"
                    ));
                }
            }
            Err(error) => {
                self.note(format!("resolve {id} ({tool}, {step}) {label} -> {error}"));
                match error {
                    ResolveError::Store(_) => self.excused = true,
                    // "Safe to retry": a retry after a lost answer must
                    // still get the conversation going.
                    ResolveError::Stale { .. } if self.resume_on_resolve => {
                        self.promised = Some(format!("resolve({id}, {label}) answered Stale"));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn ensure_started(&mut self) -> Check {
        let revived = self.block_on(self.process()?.agent.ensure_started(&self.conversation))?;
        self.note(format!("ensure_started -> {revived:?}"));
        if matches!(revived, Ok(Revival::Resumed | Revival::Busy)) {
            self.promised = Some(format!("ensure_started answered {revived:?}"));
        }
        Ok(())
    }

    fn restart(&mut self) -> Check {
        self.kill();
        self.start()?;
        let revived = self.block_on(self.process()?.agent.revive_all())?;
        self.note(format!("revive_all -> {revived:?}"));
        if matches!(revived, Ok(n) if n > 0) {
            self.promised = Some(format!("revive_all answered {revived:?}"));
        }
        // A run the dead process held resumes once its lease runs out.
        if self
            .stored()?
            .is_some_and(|s| s.status == ConversationStatus::Running)
        {
            self.promised = Some("revive_all after a restart".into());
        }
        Ok(())
    }

    fn crash(&mut self) -> Check {
        lock(&HOLD).insert(self.conversation.clone());
        lock(&HELD).remove(&self.conversation);
        let conversation = self.conversation.clone();
        let agent = self.process()?.agent.clone();
        let task = self.process()?.runtime.spawn(async move {
            if let Ok(mut stream) = agent.send(&conversation, Input::User("go on".into())).await {
                while stream.next().await.is_some() {}
            }
        });
        let started = Instant::now();
        while !lock(&HELD).contains(&self.conversation)
            && !task.is_finished()
            && started.elapsed() < settle_timeout()
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        let held = lock(&HELD).remove(&self.conversation);
        lock(&HOLD).remove(&self.conversation);
        self.note(format!("crash (a server tool was running: {held})"));
        self.excused = true;
        self.restart()
    }

    fn stored(&self) -> Result<Option<StoredConversation>, String> {
        self.block_on(self.inner_store()?.load_conversation(&self.conversation))?
            .map_err(|e| e.to_string())
    }

    fn records(&self) -> Result<Vec<CallRecord>, String> {
        self.block_on(self.inner_store()?.calls(&self.conversation))?
            .map_err(|e| e.to_string())
    }

    /// Waits until no run of the conversation is going: idle, or suspended
    /// with something pending, or suspended with nothing pending when
    /// nobody said it would resume. A promise that is not kept is a
    /// violation unless a store failure or a crash came in between.
    fn settle(&mut self) -> Check {
        let started = Instant::now();
        loop {
            let Some(stored) = self.stored()? else {
                self.promised = None;
                return Ok(());
            };
            let pending = self
                .records()?
                .iter()
                .filter(|record| record.state == CallState::Pending)
                .count();
            let quiet = match stored.status {
                ConversationStatus::Idle => true,
                ConversationStatus::Suspended => pending > 0 || self.promised.is_none(),
                // Held by a dead process with waits pending: as good as
                // suspended (any process claims it once the lease is out,
                // and resolving the waits resumes it). Without
                // `resume_on_resolve` it waits for `ensure_started`.
                ConversationStatus::Running => {
                    stored.lease_until < now_ms()
                        && (pending > 0 || (!self.resume_on_resolve && self.promised.is_none()))
                }
            };
            if self.injected() > self.mark {
                self.excused = true;
            }
            if quiet {
                if stored.status == ConversationStatus::Idle || pending > 0 {
                    self.promised = None;
                    self.excused = false;
                }
                self.drain_events()?;
                return Ok(());
            }
            // A live run renews its lease every third of it: one that ran
            // out long ago has nobody behind it.
            let abandoned = stored.status == ConversationStatus::Running
                && stored.lease_until + 2 * LEASE.as_millis() as i64 <= now_ms();
            if abandoned || started.elapsed() > settle_timeout() {
                self.drain_events()?;
                let what = format!(
                    "status {:?}, {pending} pending, lease until {} (now {}), promise: {:?}",
                    stored.status,
                    stored.lease_until,
                    now_ms(),
                    self.promised
                );
                // A promise made in a step that hit no store failure must be
                // kept; a run a failure stopped earlier needs `ensure_started`.
                let excused = match &self.promised {
                    Some(_) => self.injected() > self.mark,
                    None => self.excused,
                };
                if excused {
                    self.note(format!(
                        "unsettled after a store failure or a crash: {what}"
                    ));
                    self.promised = None;
                    return Ok(());
                }
                if !checked("reachable") {
                    self.promised = None;
                    return Ok(());
                }
                return fail(format!(
                    "[reachable] the conversation never resumed by itself: {what}"
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn drain_events(&mut self) -> Check {
        let mut events = Vec::new();
        if let Some(process) = self.process.as_mut() {
            loop {
                match process.events.try_recv() {
                    Ok(event) => events.push(event.event),
                    Err(broadcast::error::TryRecvError::Lagged(_)) => continue,
                    Err(_) => break,
                }
            }
        }
        self.check_events(&events, "a background run")
    }

    // ------------------------------------------------------------ invariants

    fn check_events(&self, events: &[AgentEvent], source: &str) -> Check {
        if !checked("secrets") {
            return Ok(());
        }
        for event in events {
            let mut shown = format!("{event:?}");
            match event {
                AgentEvent::ToolCallStart { arguments, .. } => {
                    shown.push_str(&arguments.to_string())
                }
                AgentEvent::ToolCallResult { envelope, .. } => {
                    shown.push_str(&envelope.to_string())
                }
                _ => {}
            }
            for secret in [SECRET, BAD_SECRET] {
                if shown.contains(secret) {
                    return fail(format!(
                        "[secrets] the secret {secret:?} is in an event of {source}: {shown}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checked after every step.
    fn check_always(&mut self) -> Check {
        if checked("secrets") {
            let leaked = lock(&LEAKED_LOGS).first().cloned();
            if let Some(line) = leaked {
                return fail(format!("[secrets] a log line carries a secret: {line}"));
            }
        }
        let runs = lock(&RUNS)
            .get(&self.conversation)
            .cloned()
            .unwrap_or_default();
        let records = self.records()?;
        if checked("approval") {
            for run in &runs {
                if gated(run.tool) && !self.approved(run.tool, &run.args) {
                    return fail(format!(
                        "[approval] {} ran (id {}) with {} although nobody approved that tool with those arguments; approvals: {:?}",
                        run.tool, run.id, run.args, self.approvals
                    ));
                }
            }
            for record in &records {
                let arguments: Value =
                    serde_json::from_str(&record.arguments).unwrap_or(Value::Null);
                let past_gate = matches!(record.step, Step::Execution | Step::Client);
                if past_gate && gated(&record.tool) && !self.approved(&record.tool, &arguments) {
                    return fail(format!(
                        "[approval] {} (id {}) went past its approval ({} {}) with {} although nobody approved that tool with those arguments; approvals: {:?}",
                        record.tool,
                        record.tool_call_id,
                        record.step,
                        record.state,
                        arguments,
                        self.approvals
                    ));
                }
            }
        }
        if checked("refused") {
            for run in &runs {
                let n = run.args.get("n").and_then(Value::as_u64).unwrap_or(0) as u32;
                let refused = match run.tool {
                    "unoffered_op" => Some("prepare_step never offers it"),
                    "hidden_op" => Some("no search revealed it"),
                    _ if self.over_the_limit.contains(&n) => {
                        Some("it came past the turn's limit of calls")
                    }
                    _ => None,
                };
                if let Some(why) = refused {
                    return fail(format!(
                        "[refused] {} ran (id {}, n={n}) although {why}",
                        run.tool, run.id
                    ));
                }
            }
        }
        if checked("once") {
            let mut seen: HashMap<(&str, u64), usize> = HashMap::new();
            for run in &runs {
                let n = run.args.get("n").and_then(Value::as_u64).unwrap_or(0);
                let count = seen.entry((run.tool, n)).or_default();
                *count += 1;
                if *count > 1 && !idempotent(run.tool) {
                    return fail(format!(
                        "[once] {} ran {} times for the model's call n={n} (ids: {:?}) and is not idempotent",
                        run.tool,
                        count,
                        runs.iter()
                            .filter(|r| r.tool == run.tool
                                && r.args.get("n").and_then(Value::as_u64) == Some(n))
                            .map(|r| r.id.as_str())
                            .collect::<Vec<_>>()
                    ));
                }
            }
        }
        if checked("reachable")
            && let Some(stored) = self.stored()?
            && stored.status != ConversationStatus::Running
        {
            self.check_pending_reachable(&stored, &records)?;
        }
        Ok(())
    }

    fn approved(&self, tool: &str, arguments: &Value) -> bool {
        self.approvals
            .iter()
            .any(|(approved, args)| approved == tool && args == arguments)
    }

    /// Every pending wait is a call of the last turn still waiting for its
    /// result, and every such call has its wait.
    fn check_pending_reachable(
        &self,
        stored: &StoredConversation,
        records: &[CallRecord],
    ) -> Check {
        let mut pending: Vec<(String, String)> = records
            .iter()
            .filter(|record| record.state == CallState::Pending)
            .map(|record| (record.tool_call_id.clone(), record.tool.clone()))
            .collect();
        pending.sort();
        let unanswered = unanswered_calls(&stored.conversation.messages);
        let mut open = unanswered.clone();
        for wait in &pending {
            match open.iter().position(|call| call == wait) {
                Some(at) => {
                    open.remove(at);
                }
                None if !checked("orphans") => {}
                None => {
                    return fail(format!(
                        "[reachable/orphans] {wait:?} is pending, but it is not a call of the last turn still waiting for its result ({unanswered:?}); ledger: {}; transcript: {}",
                        show_records(records),
                        show(&stored.conversation.messages)
                    ));
                }
            }
        }
        if stored.status == ConversationStatus::Suspended && !pending.is_empty() {
            // A call with no row of its own is settled (run, or suspended)
            // on resume; one whose id holds another tool's rows would be
            // settled by them.
            for (id, tool) in &unanswered {
                let of_id = records.iter().filter(|record| &record.tool_call_id == id);
                let own = of_id.clone().any(|record| &record.tool == tool);
                let foreign = of_id.clone().any(|record| &record.tool != tool);
                if foreign && !own {
                    return fail(format!(
                        "[reachable] the call {id} ({tool}) waits for its result, but its id holds only another tool's rows (pending() shows {pending:?}): its own wait is unreachable and the other's resolution would settle it"
                    ));
                }
            }
        }
        if stored.status == ConversationStatus::Idle && !pending.is_empty() {
            return fail(format!(
                "[reachable] the conversation is idle but {pending:?} are still pending"
            ));
        }
        Ok(())
    }

    /// At the end: heal the store, resolve everything that waits, revive
    /// what needs it, and check the transcript.
    fn finish(&mut self) -> Check {
        self.trail
            .push("-- finish: heal, resolve everything, check the transcript".into());
        if let Some(process) = &self.process {
            process.store.heal();
        }
        self.mark = self.injected();
        for _round in 0..40 {
            self.settle()?;
            let Some(stored) = self.stored()? else {
                return Ok(());
            };
            let pending = self.pending()?;
            match stored.status {
                ConversationStatus::Idle if pending.is_empty() => {
                    self.check_always()?;
                    return self.check_transcript(&stored);
                }
                _ if !pending.is_empty() => {
                    self.check_always()?;
                    for (id, step, arguments) in pending {
                        self.resolve(&id, step, arguments, How::Fitting)?;
                    }
                }
                _ => {
                    let revived =
                        self.block_on(self.process()?.agent.ensure_started(&self.conversation))?;
                    self.note(format!("ensure_started -> {revived:?}"));
                    match revived {
                        Ok(Revival::Resumed | Revival::Busy) => {
                            self.promised = Some(format!("ensure_started answered {revived:?}"));
                        }
                        Ok(Revival::Idle) if stored.status == ConversationStatus::Idle => {
                            // Idle with waits pending: checked above.
                        }
                        // Between the read above and this call the deadline
                        // worker resumed the conversation and its next turn
                        // suspended on a new wait: read again. A conversation
                        // that keeps answering this without a wait to resolve
                        // fails below, after 40 rounds.
                        Ok(Revival::Waiting { .. }) => continue,
                        other => {
                            if checked("reachable") {
                                return fail(format!(
                                    "[reachable] {:?} with nothing pending, and ensure_started answered {other:?}",
                                    stored.status
                                ));
                            }
                            return Ok(());
                        }
                    }
                    self.excused = false;
                }
            }
        }
        fail("[reachable] the conversation did not come to rest in 40 rounds".into())
    }

    /// Once idle: every call has exactly one result, and a call that ran is
    /// not reported as not run.
    fn check_transcript(&self, stored: &StoredConversation) -> Check {
        let messages = &stored.conversation.messages;
        if checked("answered") {
            for (index, message) in messages.iter().enumerate() {
                let Message::Assistant { tool_calls, .. } = message else {
                    continue;
                };
                let mut calls: Vec<&str> = tool_calls.iter().map(|call| call.id.as_str()).collect();
                let mut results: Vec<&str> = messages[index + 1..]
                    .iter()
                    .take_while(|message| matches!(message, Message::Tool { .. }))
                    .filter_map(|message| match message {
                        Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
                        _ => None,
                    })
                    .collect();
                calls.sort_unstable();
                results.sort_unstable();
                if calls != results {
                    return fail(format!(
                        "[answered] turn at message {index} has calls {calls:?} but results {results:?}; transcript: {}",
                        show(messages)
                    ));
                }
            }
        }
        if checked("truthful") {
            let runs = lock(&RUNS)
                .get(&self.conversation)
                .cloned()
                .unwrap_or_default();
            let ran: HashSet<(String, u32)> = runs
                .iter()
                .map(|run| {
                    let n = run.args.get("n").and_then(Value::as_u64).unwrap_or(0) as u32;
                    let n = self.renumbered.get(&n).copied().unwrap_or(n);
                    (run.tool.to_owned(), n)
                })
                .collect();
            let mut calls: HashMap<&str, (&str, u32)> = HashMap::new();
            for message in messages {
                match message {
                    Message::Assistant { tool_calls, .. } => {
                        calls.clear();
                        for call in tool_calls {
                            let n = serde_json::from_str::<Value>(&call.arguments)
                                .ok()
                                .and_then(|args| args.get("n").and_then(Value::as_u64))
                                .unwrap_or(0) as u32;
                            calls.insert(call.id.as_str(), (call.name.as_str(), n));
                        }
                    }
                    Message::Tool {
                        tool_call_id,
                        content,
                        is_error: true,
                        ..
                    } => {
                        let Some((name, n)) = calls.get(tool_call_id.as_str()) else {
                            continue;
                        };
                        if ran.contains(&((*name).to_owned(), *n))
                            && !content.contains("taken effect")
                        {
                            return fail(format!(
                                "[truthful] {name} (id {tool_call_id}, n={n}) ran, but the model was told: {content}"
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.kill();
        lock(&RUNS).remove(&self.conversation);
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.sqlite.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn reason_name(reason: &DoneReason) -> String {
    match reason {
        DoneReason::Suspended(calls) => format!(
            "Suspended({:?})",
            calls
                .iter()
                .map(|call| format!("{}:{}", call.tool_call_id, call.name))
                .collect::<Vec<_>>()
        ),
        DoneReason::StoreFailed(error) => format!("StoreFailed({error})"),
        DoneReason::ModelError(error) => format!("ModelError({error})"),
        other => format!("{other:?}"),
    }
}

/// The calls of the last assistant turn with no result after it.
fn unanswered_calls(messages: &[Message]) -> Vec<(String, String)> {
    let Some(position) = messages
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &messages[position] else {
        return Vec::new();
    };
    let mut answered: Vec<&str> = messages[position + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut open = Vec::new();
    for call in tool_calls {
        if let Some(at) = answered.iter().position(|id| *id == call.id) {
            answered.remove(at);
        } else {
            open.push((call.id.clone(), call.name.clone()));
        }
    }
    open
}

fn show_records(records: &[CallRecord]) -> String {
    records
        .iter()
        .map(|record| {
            format!(
                "{}:{} {} {} {}",
                record.tool_call_id, record.tool, record.step, record.state, record.arguments
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn show(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|message| match message {
            Message::System { .. } => "system".to_owned(),
            Message::User { content } => format!("user {content:?}"),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => format!(
                "assistant {content:?} {:?}",
                tool_calls
                    .iter()
                    .map(|call| format!("{}:{}", call.id, call.name))
                    .collect::<Vec<_>>()
            ),
            Message::Tool {
                tool_call_id,
                name,
                content,
                ..
            } => format!("tool {tool_call_id}:{name} {content}"),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Runs one sequence; the error names the violated invariant, the step
/// and what happened before it.
fn run_case(backend: Backend, ops: &[Op]) -> Check {
    let mut harness = Harness::new(backend)?;
    let outcome = (|| {
        for op in ops {
            harness.step(op)?;
        }
        harness.finish()
    })();
    if std::env::var_os("APTIX_PROPS_TRACE").is_some() {
        eprintln!("on {backend:?}:\n    {}", harness.trail.join("\n    "));
    }
    outcome.map_err(|violation| {
        format!(
            "{violation}\n  on {backend:?}, after:\n    {}",
            harness.trail.join("\n    ")
        )
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(64)
}

fn property(backend: Backend) {
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 512,
        max_shrink_time: 240_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&ops(), |ops| {
        run_case(backend, &ops).map_err(TestCaseError::fail)
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}

#[test]
fn durable_agent_keeps_its_invariants_on_memory_store() {
    property(Backend::Memory);
}

#[test]
fn durable_agent_keeps_its_invariants_on_sqlite_store() {
    property(Backend::Sqlite);
}

// ---------------------------------------------------------------- minimal cases

fn call(kind: Kind, id: u8, bad_secret: bool) -> CallSpec {
    CallSpec {
        kind,
        id,
        bad_secret,
    }
}

fn minimal(ops: Vec<Op>) {
    for backend in [Backend::Memory, Backend::Sqlite] {
        if let Err(violation) = run_case(backend, &ops) {
            panic!("{violation}");
        }
    }
}

#[test]
fn a_quiet_sequence_passes() {
    minimal(vec![
        Op::Turn(vec![
            call(Kind::Auto, 0, false),
            call(Kind::Gated, 1, false),
        ]),
        Op::Send { inline: false },
        Op::Resolve {
            pick: 0,
            how: How::Fitting,
        },
        Op::Send { inline: false },
    ]);
}

fn resolve_first() -> Op {
    Op::Resolve {
        pick: 0,
        how: How::Fitting,
    }
}

/// A gated client call and a gated server call with one id; the
/// approver approves what `pending()` shows.
#[test]
fn colliding_ids_never_run_what_was_not_approved() {
    minimal(vec![
        Op::Turn(vec![
            call(Kind::GatedClient, 0, false),
            call(Kind::Gated, 0, false),
        ]),
        Op::Send { inline: false },
        resolve_first(),
        resolve_first(),
        resolve_first(),
    ]);
    minimal(vec![
        Op::Turn(vec![
            call(Kind::Gated, 0, false),
            call(Kind::GatedClient, 0, false),
        ]),
        Op::Send { inline: false },
        resolve_first(),
        resolve_first(),
    ]);
    minimal(vec![
        Op::Turn(vec![call(Kind::Auto, 0, false), call(Kind::Auto, 0, false)]),
        Op::Send { inline: false },
        Op::Turn(vec![call(Kind::Gated, 0, false)]),
        Op::Send { inline: false },
        resolve_first(),
    ]);
}

/// A resolution recorded by a process that does not resume,
/// then new input.
#[test]
fn a_call_settled_after_new_input_is_not_reported_as_interrupted() {
    minimal(vec![
        Op::Restart {
            resume_on_resolve: false,
        },
        Op::Turn(vec![call(Kind::Gated, 0, false)]),
        Op::Send { inline: false },
        resolve_first(),
        Op::Send { inline: false },
    ]);
}

/// Resolved while the suspending run's stream is being read.
#[test]
fn a_resolution_during_the_suspending_stream_resumes_the_conversation() {
    minimal(vec![
        Op::Turn(vec![call(Kind::Gated, 0, false)]),
        Op::Send { inline: true },
    ]);
}

/// The read after the compare-and-swap fails; the retry is
/// `Stale`, and the conversation must still resume.
#[test]
fn a_store_error_after_the_resolution_is_recorded_does_not_strand_it() {
    minimal(vec![
        Op::Turn(vec![call(Kind::Gated, 0, false)]),
        Op::Send { inline: false },
        Op::Fail(FaultSpec {
            op: StoreOp::Calls,
            after: 1,
            times: Some(1),
            applied: false,
        }),
        resolve_first(),
        Op::Resolve {
            pick: 0,
            how: How::Stray(0),
        },
    ]);
}

/// Closing the execution record fails after the tool ran.
#[test]
fn a_store_error_after_a_tool_ran_is_not_reported_as_not_run() {
    minimal(vec![
        Op::Turn(vec![call(Kind::Auto, 0, false)]),
        Op::Fail(FaultSpec {
            op: StoreOp::Transition,
            after: 0,
            times: Some(1),
            applied: false,
        }),
        Op::Send { inline: false },
    ]);
}

/// A secret that fails validation, and one that suspends.
#[test]
fn secrets_reach_no_event_and_no_log() {
    minimal(vec![
        Op::Turn(vec![call(Kind::Token, 0, true)]),
        Op::Send { inline: false },
    ]);
    minimal(vec![
        Op::Turn(vec![call(Kind::Token, 0, false)]),
        Op::Send { inline: false },
        resolve_first(),
    ]);
}

/// Found by the property: the save after the model's turn fails, the run
/// ends `StoreFailed` and the conversation is saved idle with a call that
/// never ran and has no result.
#[test]
fn a_failed_save_after_the_model_turn_leaves_no_unanswered_call() {
    minimal(vec![
        Op::Turn(vec![call(Kind::Auto, 0, false)]),
        Op::Fail(FaultSpec {
            op: StoreOp::SaveConversation,
            after: 1,
            times: Some(1),
            applied: false,
        }),
        Op::Send { inline: false },
    ]);
}

/// Found by the property: a wait recorded whose acknowledgement was lost
/// stays pending for a call the model was told failed.
#[test]
fn a_lost_insert_acknowledgement_leaves_no_orphan_wait() {
    minimal(vec![
        Op::Turn(vec![call(Kind::Token, 0, false)]),
        Op::Fail(FaultSpec {
            op: StoreOp::InsertCall,
            after: 0,
            times: Some(1),
            applied: false,
        }),
        Op::Turn(vec![call(Kind::Gated, 0, false)]),
        Op::Send { inline: false },
    ]);
    minimal(vec![
        Op::Turn(vec![call(Kind::Human, 0, false)]),
        Op::Fail(FaultSpec {
            op: StoreOp::InsertCall,
            after: 0,
            times: Some(1),
            applied: true,
        }),
        Op::Send { inline: false },
    ]);
}

/// Found by the property: with `resume_on_resolve(false)`, a conversation
/// revived by `ensure_started` suspends again; once those calls are
/// resolved, `ensure_started` answers `Busy` and nothing resumes it.
#[test]
fn ensure_started_resumes_a_conversation_it_revived_before() {
    minimal(vec![
        Op::Restart {
            resume_on_resolve: false,
        },
        Op::Turn(vec![call(Kind::Gated, 0, false)]),
        Op::Turn(vec![call(Kind::Gated, 1, false)]),
        Op::Send { inline: false },
        resolve_first(),
        Op::EnsureStarted,
        resolve_first(),
        Op::EnsureStarted,
    ]);
}
