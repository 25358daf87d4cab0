//! Real OS processes racing on one store: the compare-and-swaps of
//! `claim_conversation` and `transition` must hold across processes, not
//! only across the tasks of one (which `tests/store/store.rs` covers).
//!
//! The parent tests re-execute this test binary `PROCESSES` times, running
//! only `race_child` with `APTIX_RACE_CHILD` set. Every child opens its own
//! store (its own connections) and, in `ROUNDS` time slots shared by all,
//! tries to resolve the round's pending entry with its own outcome and to
//! claim the round's conversation as its own owner, printing what it won.
//! The parent checks that every round has exactly one winner of each, and
//! that the store holds that winner's outcome and owner.
//!
//! PostgreSQL runs at `APTIX_TEST_PG_URL` (see `tests/common/stores.rs` for when its
//! absence fails the test).

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{Backend, TempDb, pg_url, test_name, unique};
use aptix::Conversation;
use aptix::store::{CallRecord, CallState, Step};

const PROCESSES: usize = 4;
const ROUNDS: usize = 50;
/// Each round starts at the same wall-clock instant in every child.
const SLOT: Duration = Duration::from_millis(25);
/// Time for the children to start and connect before round 0.
const LEAD: Duration = Duration::from_millis(2_500);
/// A child still running after this has hung: the test fails.
const CHILD_LIMIT: Duration = Duration::from_secs(120);

const CHILD_ENV: &str = "APTIX_RACE_CHILD";
const LINE_PREFIX: &str = "APTIX_RACE ";

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

fn conversation_id(prefix: &str, round: usize) -> String {
    format!("{prefix}-conv-{round}")
}

fn ledger_id(prefix: &str) -> String {
    format!("{prefix}-ledger")
}

fn call_id(round: usize) -> String {
    format!("call_{round}")
}

fn outcome_of(process: usize) -> String {
    format!("{{\"process\":{process}}}")
}

fn owner_of(process: usize) -> String {
    format!("process-{process}")
}

/// Each process resolves to a different final state, too.
fn target_of(process: usize) -> CallState {
    match process % 3 {
        0 => CallState::Resolved,
        1 => CallState::Expired,
        _ => CallState::Cancelled,
    }
}

/// The child: not a test of its own. Without `APTIX_RACE_CHILD` it does
/// nothing and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_child() {
    let Ok(backend) = std::env::var(CHILD_ENV) else {
        return;
    };
    let backend = Backend::parse(&backend);
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let target = var("APTIX_RACE_TARGET");
    let prefix = var("APTIX_RACE_PREFIX");
    let process: usize = var("APTIX_RACE_PROCESS").parse().expect("a process number");
    let start: u64 = var("APTIX_RACE_START_MS").parse().expect("a start time");

    let store = backend.open(&target).await;
    let ledger = ledger_id(&prefix);
    let outcome = outcome_of(process);
    let owner = owner_of(process);
    for round in 0..ROUNDS {
        let slot = start + u64::try_from(round).expect("round") * SLOT.as_millis() as u64;
        let wait = slot.saturating_sub(unix_millis());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let call = call_id(round);
        let conversation = conversation_id(&prefix, round);
        // Both at once, so each race has every process in it.
        let (moved, claimed) = futures_util::future::join(
            store.transition(
                &ledger,
                &call,
                Step::Approval,
                CallState::Pending,
                target_of(process),
                Some(&outcome),
                1_000,
            ),
            store.claim_conversation(&conversation, &owner, 1_000, 60_000),
        )
        .await;
        let moved = moved.expect("transition");
        let claimed = claimed.expect("claim").is_some();
        println!("{LINE_PREFIX}round={round} transition={moved} claim={claimed}");
    }
}

async fn race(backend: Backend, target: &str) {
    let prefix = unique(&format!("race-{}", backend.name()));

    // The rows every round races on.
    {
        let store = backend.open(target).await;
        let ledger = ledger_id(&prefix);
        for round in 0..ROUNDS {
            let conversation = Conversation::new(conversation_id(&prefix, round));
            assert!(
                store
                    .create_conversation(&conversation, 1)
                    .await
                    .expect("create")
            );
            let record = CallRecord {
                requested: None,
                reasoning: None,
                conversation_id: ledger.clone(),
                tool_call_id: call_id(round),
                step: Step::Approval,
                tool: "delete_file".to_owned(),
                arguments: "{}".to_owned(),
                payload: "{}".to_owned(),
                state: CallState::Pending,
                outcome: None,
                deadline: None,
                created_at: 1,
                updated_at: 1,
            };
            assert!(store.insert_call(&record).await.expect("insert"));
        }
    }

    let exe = std::env::current_exe().expect("the test binary");
    let start = unix_millis() + LEAD.as_millis() as u64;
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|process| {
            Command::new(&exe)
                .args([
                    test_name(module_path!(), "race_child").as_str(),
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, backend.name())
                .env("APTIX_RACE_TARGET", target)
                .env("APTIX_RACE_PREFIX", &prefix)
                .env("APTIX_RACE_PROCESS", process.to_string())
                .env("APTIX_RACE_START_MS", start.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a racing process")
        })
        .collect();

    // Wait for all, killing every child if one hangs.
    let deadline = Instant::now() + CHILD_LIMIT;
    let mut outputs = vec![String::new(); PROCESSES];
    for process in 0..PROCESSES {
        let status = loop {
            if let Some(status) = children[process].try_wait().expect("wait for a child") {
                break status;
            }
            if Instant::now() > deadline {
                for child in &mut children {
                    let _ = child.kill();
                }
                panic!("racing process {process} did not finish within {CHILD_LIMIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let child = &mut children[process];
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stdout.take() {
            pipe.read_to_string(&mut stdout).expect("read stdout");
        }
        if let Some(mut pipe) = child.stderr.take() {
            pipe.read_to_string(&mut stderr).expect("read stderr");
        }
        assert!(
            status.success(),
            "racing process {process} failed ({status}):\n{stdout}\n{stderr}"
        );
        outputs[process] = stdout;
    }

    // results[round][process] = (won the transition, won the claim)
    let mut results = vec![vec![None; PROCESSES]; ROUNDS];
    for (process, output) in outputs.iter().enumerate() {
        // The harness may print `test race_child ... ` before the first.
        for line in output.lines().filter_map(|line| {
            line.find(LINE_PREFIX)
                .map(|start| &line[start + LINE_PREFIX.len()..])
        }) {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or_else(|| panic!("`{name}` missing in `{line}`"))
            };
            let round: usize = field("round").parse().expect("a round");
            results[round][process] =
                Some((field("transition") == "true", field("claim") == "true"));
        }
    }

    {
        let store = backend.open(target).await;
        let ledger = ledger_id(&prefix);
        for (round, row) in results.iter().enumerate() {
            let row: Vec<(bool, bool)> = row
                .iter()
                .enumerate()
                .map(|(process, result)| {
                    result.unwrap_or_else(|| {
                        panic!(
                            "process {process} reported nothing for round {round}; its output:\n{}",
                            outputs[process]
                        )
                    })
                })
                .collect();
            let transition_winners: Vec<usize> = (0..PROCESSES).filter(|&p| row[p].0).collect();
            let claim_winners: Vec<usize> = (0..PROCESSES).filter(|&p| row[p].1).collect();
            assert_eq!(
                transition_winners.len(),
                1,
                "round {round}: exactly one process resolves the entry, got {transition_winners:?}"
            );
            assert_eq!(
                claim_winners.len(),
                1,
                "round {round}: exactly one process claims the conversation, got {claim_winners:?}"
            );
            let entry = store
                .call(&ledger, &call_id(round), Step::Approval)
                .await
                .expect("call")
                .expect("the raced entry");
            assert_eq!(
                entry.state,
                target_of(transition_winners[0]),
                "round {round}"
            );
            assert_eq!(
                entry.outcome.as_deref(),
                Some(outcome_of(transition_winners[0]).as_str()),
                "round {round}: the stored outcome is the winner's"
            );
            let conversation = store
                .load_conversation(&conversation_id(&prefix, round))
                .await
                .expect("load")
                .expect("the raced conversation");
            assert_eq!(
                conversation.owner.as_deref(),
                Some(owner_of(claim_winners[0]).as_str()),
                "round {round}: the stored owner is the winner"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_processes_race() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let file = TempDb::new("race");
    race(Backend::Sqlite, &file.target()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_processes_race() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let Some(url) = pg_url() else {
        return;
    };
    race(Backend::Postgres, &url).await;
}
