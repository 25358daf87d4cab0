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

/// What the newcomer review found unguarded: switching a destructive tool
/// from `requires_approval` to `auto` must change a snapshot. The two
/// tools below differ only in their name and approval; their contracts
/// differ in exactly those, while every dialect a model is sent is the
/// same but for the name.
#[test]
fn the_contract_snapshot_shows_what_a_model_never_sees() {
    use aptix::prelude::*;
    use serde_json::Value;

    /// Arguments of `delete_file`.
    #[derive(Deserialize, JsonSchema)]
    struct DeleteArgs {
        /// The path of the file to delete.
        path: String,
    }
    /// Deletes a file.
    #[agent_tool(
        name = "delete_file",
        usage = "Call when the user asks to delete a file.",
        approval = requires_approval
    )]
    async fn delete_file(args: DeleteArgs) -> Result<String, ToolError> {
        Ok(args.path)
    }
    /// Deletes a file.
    #[agent_tool(
        name = "delete_file_auto",
        usage = "Call when the user asks to delete a file."
    )]
    async fn delete_file_auto(args: DeleteArgs) -> Result<String, ToolError> {
        Ok(args.path)
    }

    let gated = aptix_testkit::contract_snapshot::<DeleteFileTool>();
    let auto = aptix_testkit::contract_snapshot::<DeleteFileAutoTool>();
    assert_eq!(gated["approval"], "requires_approval");
    assert_eq!(auto["approval"], "auto");
    let differing: Vec<&String> = match (&gated, &auto) {
        (Value::Object(gated), Value::Object(auto)) => gated
            .keys()
            .filter(|key| gated.get(*key) != auto.get(*key))
            .collect(),
        _ => panic!("contracts are objects: {gated} {auto}"),
    };
    assert_eq!(differing, ["approval", "name"]);
    // What a model is sent carries the usage, and is the same for both.
    let sent = |mut tools: Vec<(aptix::Dialect, Value)>| -> Vec<String> {
        tools
            .iter_mut()
            .map(|(_, tool)| {
                assert!(
                    tool.to_string()
                        .contains("Usage: Call when the user asks to delete a file."),
                    "{tool}"
                );
                tool.to_string().replace("delete_file_auto", "delete_file")
            })
            .collect()
    };
    assert_eq!(
        sent(aptix_testkit::dialect_snapshots::<DeleteFileTool>()),
        sent(aptix_testkit::dialect_snapshots::<DeleteFileAutoTool>())
    );
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
