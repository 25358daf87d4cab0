//! The catalog of valid tools: order, lookup, subsets, fingerprint.

#[path = "../examples/get_current_time.rs"]
mod get_current_time;
#[path = "../examples/get_location.rs"]
mod get_location;
#[path = "../examples/hello_world.rs"]
mod hello_world;
#[path = "../examples/send_email.rs"]
mod send_email;

use aptix::{Catalog, Dialect, ExecutorKind, Tool};
use get_current_time::GetCurrentTimeTool;
use get_location::GetLocation;
use hello_world::HelloWorldTool;
use send_email::SendEmailTool;
use serde_json::Value;
use sha2::{Digest, Sha256};

#[test]
fn linked_catalog_holds_every_tool_sorted_by_name() {
    let catalog = aptix_testkit::assert_catalog_valid_for(&[
        Dialect::OpenAiStrict,
        Dialect::Anthropic,
        Dialect::Mcp,
    ]);
    assert_eq!(
        catalog.names().collect::<Vec<_>>(),
        [
            "agent_hello_world",
            "get_current_time",
            "get_location",
            "send_email"
        ]
    );
}

#[test]
fn builder_takes_an_explicit_subset_in_any_order() {
    let a = Catalog::builder()
        .tool::<SendEmailTool>()
        .tool::<HelloWorldTool>()
        .build();
    let b = Catalog::builder()
        .tool::<HelloWorldTool>()
        .tool::<SendEmailTool>()
        .build();
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        a.names().collect::<Vec<_>>(),
        ["agent_hello_world", "send_email"]
    );
    assert_eq!(a.fingerprint(), b.fingerprint());
}

#[test]
fn adding_the_same_tool_twice_is_one_tool() {
    let catalog = Catalog::builder()
        .linked()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(catalog.len(), 4);
}

#[test]
fn lookup_by_name() {
    let catalog = Catalog::linked().unwrap_or_else(|e| panic!("{e}"));
    let definition = catalog
        .get("get_location")
        .unwrap_or_else(|| panic!("missing"));
    assert_eq!(definition.executor(), ExecutorKind::Client);
    assert_eq!(definition.args_type(), std::any::type_name::<GetLocation>());
    assert!(catalog.get("get-location").is_none());
}

#[test]
fn fingerprint_is_the_sha256_of_the_canonical_definitions() {
    let catalog = Catalog::linked().unwrap_or_else(|e| panic!("{e}"));
    let canonical: Vec<Value> = catalog.definitions().map(|d| d.canonical_json()).collect();
    let digest = Sha256::digest(Value::Array(canonical).to_string().as_bytes());
    let expected: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(catalog.fingerprint(), expected);
}

#[test]
fn fingerprint_changes_when_the_set_of_definitions_changes() {
    let one = Catalog::builder()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let two = Catalog::builder()
        .tool::<HelloWorldTool>()
        .tool::<GetCurrentTimeTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let again = Catalog::builder()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(one.fingerprint(), two.fingerprint());
    assert_eq!(one.fingerprint(), again.fingerprint());
}

#[test]
fn definitions_are_byte_identical_across_builds() {
    let definition = HelloWorldTool::definition().unwrap_or_else(|e| panic!("{e}"));
    let first = definition.function_tool().to_string();
    let rebuilt =
        aptix::ToolDefinition::build::<HelloWorldTool>().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first, rebuilt.function_tool().to_string());
    for dialect in Dialect::ALL {
        assert_eq!(
            definition.lower(dialect).map(|v| v.to_string()),
            rebuilt.lower(dialect).map(|v| v.to_string())
        );
    }
}

#[test]
fn usage_prompt_lists_when_to_call_each_tool() {
    let catalog = Catalog::linked().unwrap_or_else(|e| panic!("{e}"));
    let prompt = catalog.usage_prompt();
    assert!(prompt.starts_with("Tools and when to call them:\n- agent_hello_world: Call when the user asks to be greeted or welcomed.\n"));
    assert_eq!(prompt.lines().count(), 5);
}

#[test]
fn tool_constants_match_the_declaration() {
    assert_eq!(HelloWorldTool::NAME, "agent_hello_world");
    assert_eq!(
        HelloWorldTool::USAGE,
        "Call when the user asks to be greeted or welcomed."
    );
    assert_eq!(
        HelloWorldTool::DESCRIPTION,
        "Creates a friendly greeting using the user's name."
    );
    assert_eq!(HelloWorldTool::EXECUTOR, ExecutorKind::Server);
    assert_eq!(HelloWorldTool::APPROVAL, aptix::Approval::Auto);
    assert_eq!(HelloWorldTool::TIMEOUT, None);
    assert_eq!(
        GetCurrentTimeTool::TIMEOUT,
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(SendEmailTool::APPROVAL, aptix::Approval::RequiresApproval);
    assert!(HelloWorldTool::SOURCE.file.ends_with("hello_world.rs"));
}
