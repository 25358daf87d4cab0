//! Property: whatever string a model sends as arguments, the executor
//! returns one well-formed outcome and never panics.

use crate::{get_location, hello_world, send_email};

use aptix::{Executor, Outcome, ToolCall, ToolContext};
use proptest::prelude::*;
use serde_json::Value;

fn executor() -> Executor {
    let tools = aptix::tools![
        get_location::GetLocation,
        hello_world::HelloWorldTool,
        send_email::SendEmailTool,
    ];
    Executor::new(tools.build().unwrap_or_else(|error| panic!("{error}")))
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![Just("name"), Just("reason"), Just("to"), Just("precision")]
            .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("name".to_owned()),
                    Just("reason".to_owned()),
                    Just("precision".to_owned()),
                    Just("to".to_owned()),
                    Just("subject".to_owned()),
                    Just("body".to_owned()),
                    ".{0,6}"
                ],
                inner,
                0..6
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn check(executor: &Executor, runtime: &tokio::runtime::Runtime, tool: &str, raw: &str) {
    let call = ToolCall::new("prop-call", tool, raw);
    let execution = runtime.block_on(executor.execute(&call, &ToolContext::new()));
    assert_eq!(&*execution.tool_call_id, "prop-call");
    match &execution.outcome {
        Outcome::Final(envelope) => {
            let value: Value = serde_json::from_str(&envelope.to_json_string())
                .unwrap_or_else(|error| panic!("envelope is not JSON: {error}"));
            assert!(value["ok"].is_boolean());
            assert_eq!(value["tool_call_id"], "prop-call");
        }
        Outcome::Awaiting(awaiting) => {
            assert!(serde_json::from_str::<Value>(awaiting.payload.as_str()).is_ok());
        }
        Outcome::PassThrough => {}
    }
}

const TOOLS: [&str; 4] = [
    "agent_hello_world",
    "get_location",
    "send_email",
    "no_such_tool",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(raw in ".{0,64}", tool in 0usize..4) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        check(&executor(), &runtime, TOOLS[tool], &raw);
    }

    #[test]
    fn arbitrary_json_never_panics(value in arbitrary_json(), tool in 0usize..4, cut in 0usize..200) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let executor = executor();
        let raw = value.to_string();
        check(&executor, &runtime, TOOLS[tool], &raw);
        // The same text cut short, as a truncated stream would leave it.
        let cut: String = raw.chars().take(cut).collect();
        check(&executor, &runtime, TOOLS[tool], &cut);
    }
}
