//! The catalog of valid tools: order, lookup, subsets, fingerprint.

use crate::{get_current_time, get_location, hello_world, send_email};

use aptix::{Catalog, Dialect, Tool, meta::ExecutorKind};
use get_current_time::GetCurrentTimeTool;
use get_location::GetLocation;
use hello_world::HelloWorldTool;
use send_email::SendEmailTool;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Every example tool, named out of order.
fn every_tool() -> aptix::CatalogBuilder {
    aptix::tools![
        SendEmailTool,
        GetLocation,
        HelloWorldTool,
        GetCurrentTimeTool
    ]
}

fn example_catalog() -> Catalog {
    every_tool().build().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_catalog_holds_every_tool_sorted_by_name() {
    let catalog = aptix_testkit::assert_catalog_valid_for(
        every_tool(),
        &[Dialect::OpenAiStrict, Dialect::Anthropic, Dialect::Mcp],
    );
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
    let catalog = every_tool()
        .tool::<HelloWorldTool>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(catalog.len(), 4);
}

#[test]
fn lookup_by_name() {
    let catalog = example_catalog();
    let definition = catalog
        .get("get_location")
        .unwrap_or_else(|| panic!("missing"));
    assert_eq!(definition.executor(), ExecutorKind::Client);
    assert_eq!(definition.args_type(), std::any::type_name::<GetLocation>());
    assert!(catalog.get("get-location").is_none());
}

#[test]
fn fingerprint_is_a_sha256_stable_across_builds() {
    let catalog = example_catalog();
    let again = example_catalog();
    let fingerprint = catalog.fingerprint();
    assert_eq!(fingerprint.len(), 64);
    assert!(
        fingerprint
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)),
        "{fingerprint}"
    );
    assert_eq!(fingerprint, again.fingerprint());
    // What its documentation says it hashes: every tool's contract, in
    // name order, which covers more than the canonical definitions (title,
    // annotations, redaction, time limits).
    let hex = |documents: Vec<Value>| -> String {
        let digest = Sha256::digest(Value::Array(documents).to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    };
    let contracts: Vec<Value> = catalog.entries().map(|entry| entry.contract()).collect();
    assert_eq!(fingerprint, hex(contracts));
    let canonical: Vec<Value> = catalog.definitions().map(|d| d.canonical_json()).collect();
    assert_ne!(fingerprint, hex(canonical));
}

/// No parameters.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// One tool, `probe`, written by hand, with the fields of its `ToolMeta`
/// given; every other field is the same in every probe.
macro_rules! probe {
    ($ty:ident $(, $($field:ident).+ = $value:expr)*) => {
        /// A hand-written probe tool.
        pub struct $ty;

        impl aptix::Tool for $ty {
            const META: aptix::meta::ToolMeta = {
                #[allow(unused_mut)]
                let mut meta = aptix::meta::ToolMeta::new(
                    "probe",
                    "Test tool.",
                    "Probes the fingerprint.",
                    aptix::meta::SourceLocation {
                        file: "probe.rs",
                        line: 1,
                        module_path: "probe",
                    },
                );
                $(meta.$($field).+ = $value;)*
                meta
            };
            type Args = NoArgs;
            type Output = ();
            fn code() -> aptix::tool::Code {
                aptix::tool::Code::function::<Self>()
            }
        }

        impl aptix::tool::ToolFn for $ty {
            type Returned = ();
            async fn call(
                _args: NoArgs,
                _ctx: &aptix::ToolContext,
            ) -> Result<(), aptix::ToolError> {
                Ok(())
            }
        }
    };
}

probe!(Plain);
probe!(Titled, title = Some("Probe"));
probe!(ReadOnly, annotations.read_only = true);
probe!(Gentle, annotations.destructive = false);
probe!(ClosedWorld, annotations.open_world = false);
probe!(Idempotent, annotations.idempotent = true);
probe!(
    Redacting,
    redaction = aptix::meta::Redaction::Deny(&["/secret"])
);
probe!(Timed, timeout = Some(std::time::Duration::from_secs(5)));
probe!(
    Suspending,
    suspend_timeout = Some(std::time::Duration::from_secs(60))
);

fn fingerprint_of<T: aptix::Tool>() -> String {
    Catalog::builder()
        .tool::<T>()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
        .fingerprint()
        .to_owned()
}

#[test]
fn fingerprint_changes_with_every_field_a_client_sees() {
    let plain = fingerprint_of::<Plain>();
    assert_eq!(plain, fingerprint_of::<Plain>());
    let changed = [
        ("title", fingerprint_of::<Titled>()),
        ("read_only", fingerprint_of::<ReadOnly>()),
        ("destructive", fingerprint_of::<Gentle>()),
        ("open_world", fingerprint_of::<ClosedWorld>()),
        ("idempotent", fingerprint_of::<Idempotent>()),
        ("redaction", fingerprint_of::<Redacting>()),
        ("timeout", fingerprint_of::<Timed>()),
        ("suspend_timeout", fingerprint_of::<Suspending>()),
    ];
    for (field, fingerprint) in &changed {
        assert_ne!(
            *fingerprint, plain,
            "changing {field} left the fingerprint as it was"
        );
    }
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
    let catalog = example_catalog();
    let prompt = catalog.usage_prompt();
    assert!(prompt.starts_with("Tools and when to call them:\n- agent_hello_world: Call when the user asks to be greeted or welcomed.\n"));
    assert_eq!(prompt.lines().count(), 5);
}

#[test]
fn tool_constants_match_the_declaration() {
    assert_eq!(HelloWorldTool::NAME, "agent_hello_world");
    assert_eq!(
        HelloWorldTool::META.usage,
        "Call when the user asks to be greeted or welcomed."
    );
    assert_eq!(
        HelloWorldTool::META.description,
        "Creates a friendly greeting using the user's name."
    );
    assert_eq!(HelloWorldTool::META.executor, ExecutorKind::Server);
    assert_eq!(HelloWorldTool::META.approval, aptix::meta::Approval::Auto);
    assert_eq!(HelloWorldTool::META.timeout, None);
    assert_eq!(
        GetCurrentTimeTool::META.timeout,
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(
        SendEmailTool::META.approval,
        aptix::meta::Approval::RequiresApproval
    );
    assert!(HelloWorldTool::META.source.file.ends_with("hello_world.rs"));
}

/// A tool made at run time from `agent_hello_world`'s own schema, whose
/// closure answers as the declared function does.
fn hello_at_run_time() -> aptix::catalog::ToolEntryBuilder {
    let declared = HelloWorldTool::definition().unwrap_or_else(|e| panic!("{e}"));
    aptix::ToolEntry::from_json_schema(
        "hello_at_run_time",
        declared.usage(),
        declared.description(),
        declared.parameters().clone(),
        |args: Value, ctx: aptix::ToolContext| async move {
            let name = args["name"].as_str().unwrap_or_default().trim().to_owned();
            if name.is_empty() {
                return Err(aptix::ToolError::invalid_arguments(
                    "`name` is empty: pass the name of the person to greet.",
                ));
            }
            Ok(serde_json::json!({
                "message": format!("Hello, {name}! Welcome."),
                "conversation_id": ctx.conversation_id(),
                "session_id": ctx.session_id(),
            }))
        },
    )
}

#[tokio::test]
async fn a_tool_made_at_run_time_is_listed_lowered_validated_and_executed_like_a_declared_one() {
    let catalog = Catalog::builder()
        .tool::<HelloWorldTool>()
        .entry(hello_at_run_time().title("Hello"))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        catalog.names().collect::<Vec<_>>(),
        ["agent_hello_world", "hello_at_run_time"]
    );
    let (Some(declared), Some(made)) = (
        catalog.get("agent_hello_world"),
        catalog.get("hello_at_run_time"),
    ) else {
        panic!("both tools are listed: {catalog:?}");
    };
    assert_eq!(made.title(), Some("Hello"));
    assert_eq!(made.executor(), ExecutorKind::Server);
    assert_eq!(made.route(), declared.route());
    assert!(
        made.source().file.ends_with("catalog.rs"),
        "{:?}",
        made.source()
    );
    assert!(
        catalog
            .usage_prompt()
            .contains(&format!("\n- hello_at_run_time: {}", declared.usage()))
    );
    let same_name = |value: Value| {
        value
            .to_string()
            .replace("hello_at_run_time", "agent_hello_world")
    };
    for dialect in Dialect::ALL {
        assert_eq!(
            made.lower(dialect).map(same_name),
            declared.lower(dialect).map(|value| value.to_string()),
            "{dialect:?}"
        );
    }

    let executor = aptix::Executor::new(catalog);
    let ctx = aptix::ToolContext::new().with_conversation_id("c-1");
    for arguments in [
        r#"{"name": "Ada"}"#,
        r#"{"name": "  "}"#,
        r#"{"name": 7}"#,
        r#"{"name": "Ada", "extra": true}"#,
        r#"{"name": "#,
        "[]",
    ] {
        let run = |name: &str| {
            let call = aptix::ToolCall::new("call-1", name, arguments);
            let executor = executor.clone();
            let ctx = ctx.clone();
            async move {
                executor
                    .execute(&call, &ctx)
                    .await
                    .into_envelope()
                    .map(|envelope| envelope.to_json_string())
                    .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            }
        };
        let declared = run("agent_hello_world").await;
        assert!(declared.is_some(), "{arguments}");
        assert_eq!(run("hello_at_run_time").await, declared, "{arguments}");
    }
}

/// A catalog is derived rather than rebuilt: a run-time tool added for one
/// conversation and taken out again, a subset for one step. Derived
/// catalogs share their entries, keep the name order, and each has the
/// fingerprint of the tools it holds.
#[tokio::test]
async fn a_catalog_derives_with_without_and_only() {
    let catalog = example_catalog();
    let with = catalog
        .with(hello_at_run_time())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        with.names().collect::<Vec<_>>(),
        [
            "agent_hello_world",
            "get_current_time",
            "get_location",
            "hello_at_run_time",
            "send_email"
        ]
    );
    assert_eq!(catalog.len(), 4, "the catalog derived from is unchanged");
    assert_ne!(with.fingerprint(), catalog.fingerprint());

    // The added tool runs; taking it out again gives back the first catalog.
    let call = aptix::ToolCall::new("call-1", "hello_at_run_time", r#"{"name":"Ada"}"#);
    let ctx = aptix::ToolContext::new();
    let ran = aptix::Executor::new(with.clone())
        .execute(&call, &ctx)
        .await
        .into_envelope()
        .map(|envelope| envelope.to_json_string())
        .unwrap_or_default();
    assert!(ran.contains("Hello, Ada!"), "{ran}");
    let back = with.without("hello_at_run_time");
    assert_eq!(
        back.names().collect::<Vec<_>>(),
        catalog.names().collect::<Vec<_>>()
    );
    assert_eq!(back.fingerprint(), catalog.fingerprint());
    assert_eq!(
        catalog.without("no_such_tool").fingerprint(),
        catalog.fingerprint()
    );

    // A subset, in any order and with repeats, has the fingerprint of a
    // catalog built from those tools alone.
    let only = catalog
        .only(["send_email", "agent_hello_world", "send_email"])
        .unwrap_or_else(|e| panic!("{e}"));
    let built = aptix::tools![HelloWorldTool, SendEmailTool]
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        only.names().collect::<Vec<_>>(),
        ["agent_hello_world", "send_email"]
    );
    assert_eq!(only.fingerprint(), built.fingerprint());
    assert!(catalog.only([]).is_ok_and(|empty| empty.is_empty()));
}

/// Deriving checks what building checks: a second tool of a name already
/// held, or a broken run-time tool, is refused with every problem; a name
/// `only` does not know is refused with the names it does.
#[test]
fn deriving_a_catalog_refuses_what_building_refuses() {
    let catalog = example_catalog();
    let declared = HelloWorldTool::definition().unwrap_or_else(|e| panic!("{e}"));
    let twin = aptix::ToolEntry::from_json_schema(
        "agent_hello_world",
        declared.usage(),
        declared.description(),
        declared.parameters().clone(),
        |_: Value, _: aptix::ToolContext| async { Ok(Value::Null) },
    );
    let refused = catalog.with(twin).expect_err("a second agent_hello_world");
    assert!(
        matches!(
            refused.problems.as_slice(),
            [aptix::catalog::CatalogProblem::DuplicateName { name, .. }] if name == "agent_hello_world"
        ),
        "{refused}"
    );
    let broken = aptix::ToolEntry::from_json_schema(
        "bad name",
        "",
        "Says hello.",
        declared.parameters().clone(),
        |_: Value, _: aptix::ToolContext| async { Ok(Value::Null) },
    );
    let refused = catalog.with(broken).expect_err("a broken tool");
    assert_eq!(refused.problems.len(), 2, "{refused}");
    // The same tool added again is the same tool, as in a builder.
    let again = catalog
        .with(catalog.entry("send_email").cloned().expect("listed"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.fingerprint(), catalog.fingerprint());

    let unknown = catalog
        .only(["send_email", "send_mail", "get_wether"])
        .expect_err("two names the catalog lacks");
    assert_eq!(unknown.problems.len(), 2, "{unknown}");
    let message = unknown.to_string();
    assert!(
        message.contains("no tool named `get_wether`")
            && message.contains("no tool named `send_mail`")
            && message
                .contains("it has: agent_hello_world, get_current_time, get_location, send_email"),
        "{message}"
    );
}
