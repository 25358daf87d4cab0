//! Every example tool's definition in every dialect, snapshotted. A change
//! here is a change of what models and clients see: review it as an API
//! change (`cargo insta review`).

use crate::{get_current_time, get_location, hello_world, schema_first, send_email};

use aptix_testkit::assert_schema_snapshot;

#[test]
fn agent_hello_world() {
    assert_schema_snapshot!(hello_world::HelloWorldTool);
}

#[test]
fn get_current_time() {
    assert_schema_snapshot!(get_current_time::GetCurrentTimeTool);
}

#[test]
fn get_location() {
    assert_schema_snapshot!(get_location::GetLocation);
}

#[test]
fn send_email() {
    assert_schema_snapshot!(send_email::SendEmailTool);
}

/// A latent tool: every dialect shows the `_output` member it asks for.
#[test]
fn sentiment_latent() {
    assert_schema_snapshot!(schema_first::Sentiment);
}

/// The composed `calls` schema of the schema-first example's catalog in
/// every dialect: what a composed request asks the model for, or the error
/// of a dialect that has no structured-output response format.
#[test]
fn composed_calls() {
    use aptix::Dialect;
    use aptix::model::ToolChoice;
    let catalog = schema_first::catalog("dev").unwrap_or_else(|error| panic!("{error}"));
    for dialect in Dialect::ALL.iter().chain([&Dialect::OpenAiCompatible]) {
        let value = aptix::agent::composed_schema_in(*dialect, &catalog, &ToolChoice::Auto, true)
            .unwrap_or_else(|error| serde_json::json!({ "error": error.to_string() }));
        insta::assert_json_snapshot!(format!("composed_calls@{dialect}"), value);
    }
}

/// A tool with code of its own, composed, as the bytes sent: `_activity`
/// is its own name (not `""`, which is for latent tools), and the meta
/// fields come first (`aptix::schema::meta_fields::InCallOrder`).
#[test]
fn composed_function_tool() {
    use aptix::Dialect;
    use aptix::model::ToolChoice;
    use aptix::schema::meta_fields::InCallOrder;
    let catalog = aptix::Catalog::builder()
        .tool::<hello_world::HelloWorldTool>()
        .build()
        .unwrap_or_else(|error| panic!("{error}"));
    for dialect in [Dialect::OpenAiCompatible, Dialect::OpenAiStrict] {
        let value = aptix::agent::composed_schema_in(dialect, &catalog, &ToolChoice::Auto, true)
            .unwrap_or_else(|error| panic!("{error}"));
        let sent = serde_json::to_string_pretty(&InCallOrder(&value))
            .unwrap_or_else(|error| panic!("{error}"));
        insta::assert_snapshot!(format!("composed_function_tool@{dialect}"), sent);
    }
}
