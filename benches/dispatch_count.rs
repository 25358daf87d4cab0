//! Instruction-count companion of `benches/execute.rs`, for machines whose
//! wall clock is too noisy to trust: run each side N and 2N times under
//! callgrind and subtract, which cancels start-up and schema compilation.
//!
//! ```sh
//! cargo bench --bench dispatch_count --no-run
//! B=$(ls -t target/release/deps/dispatch_count-* | grep -v '\.d$' | head -1)
//! for side in floor aptix; do for n in 20000 40000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null $B $side $n 2>&1 | grep 'Collected'
//! done; done
//! ```
//! Instructions per call = (count at 40000 − count at 20000) / 20000.
//! `$B size` prints the size of `execute`'s future (futures are copied as
//! they are awaited, so its size shows up in the count).

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::hint::black_box;

use aptix::{Catalog, Executor, ToolCall, ToolContext};
use hello_world::{HelloArgs, HelloWorldTool};

fn main() {
    // `cargo bench` passes `--bench`; run as a test (`cargo test --all-targets`) it gets no
    // argument and makes a few calls only.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let benching = args.iter().any(|arg| arg == "--bench");
    let mut words = args.iter().filter(|arg| !arg.starts_with("--"));
    let side = words.next().cloned().unwrap_or_else(|| "aptix".into());
    let n: usize = words
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benching { 100_000 } else { 10 });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("{error}"),
    };
    let executor = Executor::new(
        Catalog::builder()
            .tool::<HelloWorldTool>()
            .build()
            .unwrap_or_else(|error| panic!("{error}")),
    );
    let ctx = ToolContext::new()
        .with_conversation_id("conv-1")
        .with_session_id("sess-1");
    let raw = r#"{"name":"Ada Lovelace"}"#;
    let call = ToolCall::new("call_1", "agent_hello_world", raw);
    if side == "size" {
        println!(
            "execute future: {} bytes",
            std::mem::size_of_val(&executor.execute(&call, &ctx))
        );
        return;
    }
    let total = runtime.block_on(async {
        let mut total = 0usize;
        for _ in 0..n {
            total += if side == "floor" {
                let args: HelloArgs =
                    serde_json::from_str(black_box(raw)).unwrap_or_else(|e| panic!("{e}"));
                let greeting = hello_world::hello_world(args, &ctx)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                serde_json::to_string(&greeting)
                    .map(|s| s.len())
                    .unwrap_or(0)
            } else {
                // The envelope's JSON as an owned `String`, as the floor's
                // `to_string` makes one (and as the agent loop needs it).
                let execution = executor.execute(black_box(&call), &ctx).await;
                execution
                    .into_envelope()
                    .map(|e| e.into_json_string().len())
                    .unwrap_or(0)
            };
        }
        total
    });
    println!("{side} x{n}: {total} bytes");
}
