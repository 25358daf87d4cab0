//! The cost of one `Executor::execute` (raw argument string → serialized
//! envelope, validation included) against the floor measured in the same
//! run: `serde_json::from_str::<Args>` + the function + `serde_json::to_string`
//! of its result. Ratios go in BENCHMARKS.md.
//!
//! `cargo bench --bench execute`

#[path = "../examples/hello_world.rs"]
#[allow(dead_code)]
mod hello_world;

use std::hint::black_box;

use aptix::prelude::*;
use aptix::{Catalog, Executor, ToolCall};
use criterion::{Criterion, criterion_group, criterion_main};
use hello_world::{HelloArgs, HelloWorldTool};

/// Arguments with the constraints validation must check.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Order {
    /// The product's SKU.
    #[schemars(length(min = 3, max = 32), regex(pattern = r"^[A-Z0-9-]+$"))]
    pub sku: String,
    /// How many to order.
    #[schemars(range(min = 1, max = 100))]
    pub quantity: u32,
    /// Gift wrap the parcel.
    #[serde(default)]
    pub gift: bool,
}

/// The order's confirmation.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Confirmation {
    /// The order id.
    pub order_id: String,
    /// Total in cents.
    pub total_cents: u64,
}

/// Places an order.
#[agent_tool(name = "place_order", usage = "Benchmark tool.")]
async fn place_order(args: Order) -> Result<Confirmation, ToolError> {
    Ok(Confirmation {
        order_id: format!("ord-{}", args.sku),
        total_cents: u64::from(args.quantity) * if args.gift { 1299 } else { 999 },
    })
}

/// A batch whose items have an optional member: the model may send `null` for it (OpenAI
/// strict mode makes every optional member required and nullable).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Batch {
    /// The items.
    pub items: Vec<Item>,
}

/// One item of a batch.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Item {
    /// A count.
    #[serde(default)]
    pub a: u32,
}

/// Sums a batch.
#[agent_tool(name = "sum_batch", usage = "Benchmark tool.")]
async fn sum_batch(args: Batch) -> Result<u64, ToolError> {
    Ok(args.items.iter().map(|item| u64::from(item.a)).sum())
}

fn dispatch(c: &mut Criterion) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => panic!("{error}"),
    };
    let catalog = Catalog::builder()
        .tool::<HelloWorldTool>()
        .tool::<PlaceOrderTool>()
        .tool::<SumBatchTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    let executor = Executor::new(catalog);
    let ctx = ToolContext::new()
        .with_conversation_id("conv-1")
        .with_session_id("sess-1");

    let hello_raw = r#"{"name":"Ada Lovelace"}"#;
    let hello_call = ToolCall::new("call_1", "agent_hello_world", hello_raw);
    let mut group = c.benchmark_group("dispatch/agent_hello_world");
    group.bench_function("floor: serde parse + call + serialize", |b| {
        b.to_async(&runtime).iter(|| async {
            let args: HelloArgs = match serde_json::from_str(black_box(hello_raw)) {
                Ok(args) => args,
                Err(error) => panic!("{error}"),
            };
            let greeting = match hello_world::hello_world(args, &ctx).await {
                Ok(greeting) => greeting,
                Err(error) => panic!("{error}"),
            };
            black_box(serde_json::to_string(&greeting).unwrap_or_default())
        });
    });
    group.bench_function("aptix: Executor::execute + envelope", |b| {
        b.to_async(&runtime).iter(|| async {
            let execution = executor.execute(black_box(&hello_call), &ctx).await;
            black_box(execution.into_envelope().map(|e| e.into_json_string()))
        });
    });
    group.finish();

    let order_raw = r#"{"sku":"RUST-2024","quantity":3,"gift":true}"#;
    let order_call = ToolCall::new("call_2", "place_order", order_raw);
    let mut group = c.benchmark_group("dispatch/place_order (length, pattern, range)");
    group.bench_function("floor: serde parse + call + serialize", |b| {
        b.to_async(&runtime).iter(|| async {
            let args: Order = match serde_json::from_str(black_box(order_raw)) {
                Ok(args) => args,
                Err(error) => panic!("{error}"),
            };
            let confirmation = match place_order(args).await {
                Ok(confirmation) => confirmation,
                Err(error) => panic!("{error}"),
            };
            black_box(serde_json::to_string(&confirmation).unwrap_or_default())
        });
    });
    group.bench_function("aptix: Executor::execute + envelope", |b| {
        b.to_async(&runtime).iter(|| async {
            let execution = executor.execute(black_box(&order_call), &ctx).await;
            black_box(execution.into_envelope().map(|e| e.into_json_string()))
        });
    });
    group.finish();

    // `null` for an optional member takes the exact path (a `Value`, jsonschema, the nulls
    // stripped, jsonschema again); the same document with values is the baseline.
    let batch = |member: &str| format!(r#"{{"items":[{}]}}"#, vec![member; 1000].join(","));
    let valued_call = ToolCall::new("call_3", "sum_batch", batch(r#"{"a":1}"#));
    let nulls_call = ToolCall::new("call_4", "sum_batch", batch(r#"{"a":null}"#));
    let mut group = c.benchmark_group("validation/1000 items, optional member");
    for (name, call) in [("baseline: values", &valued_call), ("nulls", &nulls_call)] {
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                let execution = executor.execute(black_box(call), &ctx).await;
                black_box(execution.into_envelope().map(|e| e.into_json_string()))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
