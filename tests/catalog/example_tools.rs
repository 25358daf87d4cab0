//! Every example tool: the happy path, argument validation,
//! and the error path, each through the real executor.

use crate::{get_current_time, get_location, hello_world, live, schema_first, send_email};

use aptix::{ErrorCode, ToolContext, meta::AwaitReason};
use aptix_testkit::ToolHarness;
use serde_json::json;

use get_current_time::{CurrentTime, GetCurrentTimeTool};
use get_location::GetLocation;
use hello_world::{Greeting, HelloArgs, HelloWorldTool};
use send_email::{Outbox, SendEmailTool};

#[tokio::test]
async fn hello_world_greets_with_the_call_ids() {
    let harness = ToolHarness::for_tool::<HelloWorldTool>();
    let greeting: Greeting = harness.call(json!({ "name": "Ada" })).await.ok();
    assert_eq!(
        greeting,
        Greeting {
            message: "Hello, Ada! Welcome.".into(),
            conversation_id: Some("test-conversation".into()),
            session_id: Some("test-session".into()),
        }
    );
}

#[tokio::test]
async fn hello_world_envelope_carries_ids() {
    let harness = ToolHarness::for_tool::<HelloWorldTool>();
    let result = harness.call(json!({ "name": "Ada" })).await;
    let envelope = result.envelope().to_value();
    assert_eq!(envelope["ok"], json!(true));
    assert_eq!(envelope["tool_call_id"], json!("call_1"));
    assert_eq!(envelope["conversation_id"], json!("test-conversation"));
    assert_eq!(envelope["session_id"], json!("test-session"));
}

#[tokio::test]
async fn hello_world_rejects_a_missing_name_with_its_path() {
    let harness = ToolHarness::for_tool::<HelloWorldTool>();
    let result = harness.call(json!({})).await;
    let error = result.error();
    assert_eq!(error.code, ErrorCode::InvalidArguments);
    assert!(
        error.message.contains("\"name\" is a required property"),
        "{}",
        error.message
    );
    assert_eq!(
        error.details,
        Some(json!([{ "path": "", "message": "\"name\" is a required property" }]))
    );
}

#[tokio::test]
async fn hello_world_rejects_a_blank_name_from_its_own_check() {
    let harness = ToolHarness::for_tool::<HelloWorldTool>();
    let result = harness.call(json!({ "name": "   " })).await;
    assert_eq!(result.code(), ErrorCode::InvalidArguments);
    assert_eq!(
        result.error().message,
        "`name` is empty: pass the name of the person to greet."
    );
}

#[tokio::test]
async fn hello_world_stays_callable_as_a_plain_function() {
    let ctx = ToolContext::new().with_conversation_id("c");
    let greeting = hello_world::hello_world(
        HelloArgs {
            name: "Grace".into(),
        },
        &ctx,
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(greeting.message, "Hello, Grace! Welcome.");
    assert_eq!(greeting.conversation_id.as_deref(), Some("c"));
}

#[tokio::test]
async fn get_current_time_reports_utc_by_default() {
    let harness = ToolHarness::for_tool::<GetCurrentTimeTool>();
    let now: CurrentTime = harness.call(json!({})).await.ok();
    assert_eq!(now.utc_offset, "+00:00");
    assert!(now.rfc3339.ends_with('Z'), "{}", now.rfc3339);
    assert!(now.unix_ms > 1_700_000_000_000);
}

#[tokio::test]
async fn get_current_time_applies_a_negative_offset() {
    let harness = ToolHarness::for_tool::<GetCurrentTimeTool>();
    let now: CurrentTime = harness
        .call(json!({ "utc_offset_minutes": -330 }))
        .await
        .ok();
    assert_eq!(now.utc_offset, "-05:30");
    assert!(now.rfc3339.ends_with("-05:30"), "{}", now.rfc3339);
}

#[tokio::test]
async fn get_current_time_refuses_an_offset_out_of_range() {
    let harness = ToolHarness::for_tool::<GetCurrentTimeTool>();
    let result = harness.call(json!({ "utc_offset_minutes": 5000 })).await;
    assert_eq!(result.code(), ErrorCode::InvalidArguments);
    assert_eq!(
        result.error().details,
        Some(
            json!([{ "path": "/utc_offset_minutes", "message": "5000 is greater than the maximum of 840" }])
        )
    );
}

#[tokio::test]
async fn get_current_time_refuses_a_float_offset() {
    let harness = ToolHarness::for_tool::<GetCurrentTimeTool>();
    let result = harness.call(json!({ "utc_offset_minutes": 1.5 })).await;
    assert_eq!(result.code(), ErrorCode::InvalidArguments);
    assert!(
        result.error().message.contains("/utc_offset_minutes"),
        "{}",
        result.error().message
    );
}

#[tokio::test]
async fn get_location_suspends_for_the_client_with_the_validated_payload() {
    let harness = ToolHarness::for_tool::<GetLocation>();
    let result = harness.call(json!({ "reason": "local weather" })).await;
    assert!(result.execution.requires_client_execution());
    assert!(result.execution.is_server_tool());
    assert!(result.execution.was_executed());
    assert_eq!(result.awaiting().reason, AwaitReason::Client);
    assert_eq!(result.payload(), json!({ "reason": "local weather" }));
}

#[tokio::test]
async fn get_location_rejects_bad_arguments_without_suspending() {
    let harness = ToolHarness::for_tool::<GetLocation>();
    let result = harness
        .call(json!({ "reason": "", "precision": "street" }))
        .await;
    assert!(!result.execution.requires_client_execution());
    assert!(!result.execution.was_executed());
    let error = result.error();
    assert_eq!(error.code, ErrorCode::InvalidArguments);
    let paths: Vec<&str> = error
        .details
        .as_ref()
        .and_then(|d| d.as_array())
        .map(|all| all.iter().filter_map(|v| v["path"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(paths, vec!["/precision", "/reason"]);
}

#[tokio::test]
async fn send_email_waits_for_approval_without_sending() {
    let outbox = Outbox::default();
    let harness = ToolHarness::for_tool::<SendEmailTool>();
    let result = harness
        .call(json!({ "to": "ada@example.com", "subject": "Hi", "body": "Hello" }))
        .await;
    assert_eq!(result.awaiting().reason, AwaitReason::Approval);
    assert_eq!(result.awaiting().then, None);
    assert_eq!(result.payload()["to"], json!("ada@example.com"));
    assert!(outbox.sent.lock().map(|s| s.is_empty()).unwrap_or(false));
}

#[tokio::test]
async fn send_email_refuses_an_invalid_address_before_anyone_is_asked() {
    let harness = ToolHarness::for_tool::<SendEmailTool>();
    let result = harness
        .call(json!({ "to": "not an address", "subject": "", "body": "Hello" }))
        .await;
    let error = result.error();
    assert_eq!(error.code, ErrorCode::InvalidArguments);
    assert!(error.message.contains("at /to:"), "{}", error.message);
    assert!(error.message.contains("at /subject:"), "{}", error.message);
}

#[tokio::test]
async fn send_email_function_is_idempotent_per_call_id() {
    let ctx = ToolContext::new()
        .with_tool_call_id("call-7")
        .with_state(Outbox::default());
    for _ in 0..2 {
        let args = send_email::SendEmailArgs {
            to: "ada@example.com".into(),
            subject: "Hi".into(),
            body: "Hello".into(),
        };
        let sent = send_email::send_email(args, &ctx)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sent.message_id, "msg-call-7");
    }
    let outbox = ctx
        .state::<Outbox>()
        .unwrap_or_else(|| panic!("outbox missing"));
    assert_eq!(outbox.sent.lock().map(|s| s.len()).unwrap_or(0), 1);
}

#[tokio::test]
async fn send_email_without_an_outbox_is_an_internal_error_hidden_from_the_model() {
    let ctx = ToolContext::new();
    let args = send_email::SendEmailArgs {
        to: "ada@example.com".into(),
        subject: "Hi".into(),
        body: "Hello".into(),
    };
    let error = match send_email::send_email(args, &ctx).await {
        Ok(_) => panic!("expected an error"),
        Err(error) => error,
    };
    assert_eq!(error.code(), ErrorCode::Internal);
    assert!(error.message().contains("Outbox"));
    assert!(!error.model_message().contains("Outbox"));
}

#[test]
fn every_example_tool_is_valid() {
    let catalog = aptix_testkit::assert_catalog_valid(aptix::tools![
        get_current_time::GetCurrentTimeTool,
        get_location::GetLocation,
        hello_world::HelloWorldTool,
        send_email::SendEmailTool,
    ]);
    assert_eq!(
        catalog.names().collect::<Vec<_>>(),
        vec![
            "agent_hello_world",
            "get_current_time",
            "get_location",
            "send_email"
        ]
    );
}

#[tokio::test]
async fn the_example_picks_its_activities_by_environment() {
    for (environment, delivered) in [("dev", false), ("prod", true)] {
        let catalog = schema_first::catalog(environment).unwrap_or_else(|error| panic!("{error}"));
        assert!(catalog.entry("sentiment").expect("held").is_latent());
        assert_eq!(
            catalog.entry("word_count").expect("held").activity(),
            Some("word_count")
        );
        let harness = ToolHarness::new(catalog);
        let result = harness
            .call_named(
                "notify_by_email",
                r#"{"to":"ada@example.com","subject":"Hi"}"#,
            )
            .await;
        assert_eq!(
            result.ok::<schema_first::Delivery>().delivered,
            delivered,
            "{environment}"
        );
    }
}

/// `cargo run --example live`, rendered into a buffer: every kind of event
/// (the README says so): the streamed arguments, the operator's answer to
/// a tool's question, the progress bar and partial results, the policy's
/// three decisions, the held call approved by the operator, and a tool out
/// of retries.
#[tokio::test]
async fn the_live_example_renders_every_kind_of_event() {
    let mut out: Vec<u8> = Vec::new();
    let reason = live::demo(
        &mut out,
        std::sync::Arc::new(live::scripted(std::time::Duration::ZERO)),
        std::time::Duration::ZERO,
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    let shown = String::from_utf8_lossy(&out);
    assert!(matches!(reason, aptix::DoneReason::Completed), "{reason:?}");
    for expected in [
        "⋯ export_rows [server, auto] {\"rows\": 60}",
        "⋯ refund [server, auto] {\"order\":\"B-42\",\"cents\":45000}",
        "[##############################] 100% writing rows",
        "export_rows partial: {\"customer\":\"customer-0060\",\"number\":60}",
        "✓ refund (call_small): \"refunded 2500 cents on A-17\"  [policy: auto]",
        "✗ refund (call_huge): \"Refunds over 1000 euros go through finance.\"  [policy: deny:",
        "⏸ refund (call_large) waits for a person [policy: ask a person]",
        "operator: approve call_large",
        "✓ refund (call_large): \"refunded 45000 cents on B-42\"",
        "? export_rows asks: Include archived customers?  operator: no",
        "\"file\":\"export.csv\"",
        "↻ refund (call_typo) asked for another try, past its 0 retries",
        "▶ export_rows (call_export)",
        "I'll export the rows",
        "[done: Completed]",
    ] {
        assert!(
            shown.contains(expected),
            "missing {expected:?} in:\n{shown}"
        );
    }
    // Six partial results, every one shown, in order.
    let partials: Vec<usize> = shown
        .match_indices("export_rows partial:")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(partials.len(), 6, "{shown}");
    assert!(
        !shown.contains("an event this demo does not know"),
        "{shown}"
    );
}
