//! Hundreds of tools: what tool search costs and what it saves, on a
//! generated catalog of 500 tools (25 services × 20 actions, each with two
//! described parameters), all in one run:
//!
//! * building the catalog (every definition checked), lowering it to the
//!   Anthropic dialect, and building the search index;
//! * bytes of tool definitions per request (Anthropic's `tools` array, as
//!   the adapter writes it): every tool, against the requests an agent
//!   with the local search makes (5 tools always offered + the search
//!   tool, then + the 5 one search found), and Anthropic's own search
//!   (every tool on the wire, deferred);
//! * search latency, p50 and p99 over the 50 queries, each run many times,
//!   against the baseline of serializing the 500 definitions once (what
//!   every request without search spends);
//! * selection accuracy: the 50 queries below, written for this catalog in
//!   the words a user would use (synonyms included), each with the one
//!   tool it asks for; top-1 and top-5 recall.
//!
//! `cargo bench --bench tool_search`. Run as a test (`cargo test
//! --all-targets`) each measurement runs once; the recall is checked
//! either way (a search that stops finding tools is a failure, not a
//! slower figure).

use std::time::{Duration, Instant};

use std::sync::Arc;

use aptix::model::anthropic::Anthropic;
use aptix::model::{ChatRequest, DeferredTools, NativeToolSearch, ToolChoice, ToolSpec};
use aptix::tool_search::ToolIndex;
use aptix::{
    Agent, Catalog, Conversation, Dialect, Input, ToolEntry, catalog::ToolEntryBuilder,
    tool_search::ToolSearch,
};
use aptix_testkit::{ScriptedModel, ScriptedTurn};
use futures_util::StreamExt;
use serde_json::{Value, json};

const SERVICES: [(&str, &str, &str); 25] = [
    ("github", "GitHub", "issue"),
    ("gitlab", "GitLab", "merge_request"),
    ("jira", "Jira", "ticket"),
    ("slack", "Slack", "message"),
    ("teams", "Microsoft Teams", "chat"),
    ("mail", "the mailbox", "email"),
    ("calendar", "the calendar", "event"),
    ("drive", "Google Drive", "file"),
    ("dropbox", "Dropbox", "folder"),
    ("crm", "the CRM", "contact"),
    ("billing", "billing", "invoice"),
    ("payments", "the payment processor", "payment"),
    ("shop", "the online shop", "order"),
    ("inventory", "the warehouse inventory", "product"),
    ("shipping", "the carrier", "shipment"),
    ("hr", "the HR system", "employee"),
    ("recruiting", "the applicant tracker", "candidate"),
    ("support", "the help desk", "case"),
    ("analytics", "analytics", "report"),
    ("ads", "the ad platform", "campaign"),
    ("cms", "the website CMS", "article"),
    ("wiki", "the team wiki", "page"),
    ("monitoring", "monitoring", "alert"),
    ("cloud", "the cloud provider", "server"),
    ("database", "the database", "table"),
];

/// Each action's verb (in the tool's name) and what it does to `{o}`.
const ACTIONS: [(&str, &str); 20] = [
    ("create", "Creates a new {o}."),
    ("get", "Fetches one {o} by its id, with all its details."),
    ("list", "Lists the {o}s, newest first, a page at a time."),
    ("update", "Changes fields of an existing {o}."),
    ("delete", "Permanently deletes a {o}; it cannot be undone."),
    ("search", "Finds {o}s whose text matches a query."),
    ("archive", "Archives a {o}: hidden from lists, but kept."),
    ("restore", "Brings back an archived or deleted {o}."),
    ("share", "Gives another person access to a {o}."),
    ("export", "Downloads {o}s as a CSV file."),
    ("import", "Uploads {o}s from a CSV file."),
    ("comment", "Adds a comment to a {o}."),
    ("assign", "Makes a person responsible for a {o}."),
    ("close", "Marks a {o} as done or resolved."),
    ("reopen", "Opens a closed {o} again."),
    ("tag", "Adds a label to a {o}."),
    ("move", "Moves a {o} to another project or folder."),
    ("copy", "Duplicates a {o}."),
    (
        "subscribe",
        "Sends you a notification whenever a {o} changes.",
    ),
    ("summarize", "Writes a short summary of a {o}."),
];

/// The fixed queries, each with the one tool it asks for.
const QUERIES: [(&str, &str); 50] = [
    ("open a new bug report on github", "github_create_issue"),
    ("mark the github issue as resolved", "github_close_issue"),
    ("give the jira ticket to alice", "jira_assign_ticket"),
    (
        "tell me when the invoice changes",
        "billing_subscribe_invoice",
    ),
    ("post a message in slack", "slack_create_message"),
    (
        "find slack messages that mention the outage",
        "slack_search_message",
    ),
    (
        "schedule a new calendar event for friday",
        "calendar_create_event",
    ),
    ("share the drive file with bob", "drive_share_file"),
    ("duplicate the dropbox folder", "dropbox_copy_folder"),
    ("download all crm contacts as csv", "crm_export_contact"),
    (
        "upload contacts into the crm from a spreadsheet csv",
        "crm_import_contact",
    ),
    (
        "refund is not here; cancel for good the payment record",
        "payments_delete_payment",
    ),
    ("list recent shop orders", "shop_list_order"),
    (
        "change the price field of an inventory product",
        "inventory_update_product",
    ),
    (
        "where is my shipment, show its details",
        "shipping_get_shipment",
    ),
    (
        "bring back the deleted employee record",
        "hr_restore_employee",
    ),
    ("put a label on the candidate", "recruiting_tag_candidate"),
    ("reopen the closed help desk case", "support_reopen_case"),
    (
        "write a short summary of the analytics report",
        "analytics_summarize_report",
    ),
    ("archive the old ad campaign", "ads_archive_campaign"),
    ("move the cms article to another folder", "cms_move_article"),
    ("add a comment to the wiki page", "wiki_comment_page"),
    (
        "who is responsible for this monitoring alert, assign it to me",
        "monitoring_assign_alert",
    ),
    ("permanently delete the cloud server", "cloud_delete_server"),
    ("export the database table to csv", "database_export_table"),
    (
        "merge request on gitlab: add a comment",
        "gitlab_comment_merge_request",
    ),
    (
        "close the gitlab merge request",
        "gitlab_close_merge_request",
    ),
    ("teams chat: give my colleague access", "teams_share_chat"),
    ("summarize this email for me", "mail_summarize_email"),
    (
        "search my mailbox for emails about the contract",
        "mail_search_email",
    ),
    (
        "get notified whenever the calendar event changes",
        "calendar_subscribe_event",
    ),
    ("copy the google drive file", "drive_copy_file"),
    ("create a folder in dropbox", "dropbox_create_folder"),
    (
        "update the phone number of a crm contact",
        "crm_update_contact",
    ),
    (
        "create an invoice for the customer",
        "billing_create_invoice",
    ),
    ("look up one payment by id", "payments_get_payment"),
    ("mark the shop order as done", "shop_close_order"),
    (
        "import products into the warehouse inventory from csv",
        "inventory_import_product",
    ),
    (
        "list all shipments from the carrier",
        "shipping_list_shipment",
    ),
    ("add a new employee to the hr system", "hr_create_employee"),
    (
        "find candidates in the applicant tracker",
        "recruiting_search_candidate",
    ),
    ("help desk: open a support case", "support_create_case"),
    (
        "restore the archived analytics report",
        "analytics_restore_report",
    ),
    ("duplicate the ads campaign", "ads_copy_campaign"),
    (
        "publish a new article on the website cms",
        "cms_create_article",
    ),
    ("tag the wiki page with a label", "wiki_tag_page"),
    ("resolve the monitoring alert", "monitoring_close_alert"),
    ("list our cloud servers", "cloud_list_server"),
    ("create a database table", "database_create_table"),
    (
        "who handles the support case? assign it",
        "support_assign_case",
    ),
];

fn ok<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

/// One generated tool.
fn entry(ns: &str, service: &str, object: &str, verb: &str, does: &str) -> ToolEntryBuilder {
    let human = object.replace('_', " ");
    let name = format!("{ns}_{verb}_{object}");
    let description = format!("{} ({service})", does.replace("{o}", &human));
    let parameters = json!({
        "type": "object",
        "properties": {
            "id": {
                "type": "string",
                "description": format!("The {human}'s id in {service}, when the action is on one {human}.")
            },
            "fields": {
                "type": "object",
                "description": format!("Fields of the {human} to set or match, by name."),
                "additionalProperties": { "type": "string" }
            }
        },
        "required": ["id"],
        "additionalProperties": false
    });
    ToolEntry::from_json_schema(
        name,
        format!("When the user wants to {verb} a {human} in {service}."),
        description,
        parameters,
        |_arguments: Value, _context| async { Ok(Value::Null) },
    )
    .namespace(ns)
}

fn builders() -> Vec<ToolEntryBuilder> {
    let mut out = Vec::with_capacity(500);
    for (ns, service, object) in SERVICES {
        for (verb, does) in ACTIONS {
            out.push(entry(ns, service, object, verb, does));
        }
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn median_of(runs: usize, mut one: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let began = Instant::now();
            one();
            began.elapsed()
        })
        .collect();
    times.sort();
    percentile(&times, 0.5)
}

/// Bytes of the `tools` array the Anthropic adapter writes for a request.
fn tool_bytes(adapter: &Anthropic, tools: Vec<ToolSpec>, deferred: Option<DeferredTools>) -> usize {
    let request = ChatRequest {
        messages: Vec::new(),
        tools: tools.into(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_format: None,
        deferred_tools: deferred,
    };
    adapter.request_body(&request)["tools"].to_string().len()
}

fn main() {
    let bench = std::env::args().any(|arg| arg == "--bench");
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let runs = if bench { 30 } else { 1 };
    let dialect = Dialect::Anthropic;

    // The catalog, the lowered definitions, the index.
    let build = median_of(runs, || {
        ok(
            Catalog::builder().entries(builders()).build(),
            "the catalog",
        );
    });
    let catalog = ok(
        Catalog::builder().entries(builders()).build(),
        "the catalog",
    );
    assert_eq!(catalog.len(), 500);
    let lower = median_of(runs, || {
        ok(catalog.lower(dialect), "lowering");
    });
    let index_time = median_of(runs, || {
        ToolIndex::new(&catalog);
    });
    let index = ToolIndex::new(&catalog);
    let specs: Vec<ToolSpec> = catalog
        .entries()
        .map(|entry| ok(ToolSpec::for_entry(entry, dialect), "a spec"))
        .collect();

    // Bytes per request.
    let adapter = Anthropic::new("claude-sonnet-4-5", "key");
    let every = tool_bytes(&adapter, specs.clone(), None);
    let always: Vec<&str> = vec![
        "github_create_issue",
        "slack_create_message",
        "mail_search_email",
        "calendar_create_event",
        "drive_get_file",
    ];
    let pick = |names: &[&str]| -> Vec<ToolSpec> {
        specs
            .iter()
            .filter(|spec| names.contains(&spec.name.as_str()))
            .cloned()
            .collect()
    };
    // The local search's requests, as an agent makes them: before a search,
    // and after one that found 5 tools.
    let model = Arc::new(
        ScriptedModel::new([
            ScriptedTurn::new().tool_call(
                "s1",
                "tool_search",
                &json!({ "query": QUERIES[0].0 }).to_string(),
            ),
            ScriptedTurn::new().text("Found."),
        ])
        .with_dialect(dialect),
    );
    let agent = ok(
        Agent::builder()
            .shared_model(model.clone())
            .catalog(catalog.clone())
            .tool_search(ToolSearch::local().always_offer(always.iter().copied()))
            .build(),
        "the agent",
    );
    let mut conversation = Conversation::new("bytes");
    let runtime = ok(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        "the runtime",
    );
    let _: Vec<_> = runtime.block_on(
        agent
            .run(&mut conversation, Input::User("Open a bug.".into()))
            .collect(),
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "the scripted run makes two requests");
    let local_before = tool_bytes(&adapter, requests[0].tools.to_vec(), None);
    let local_after = tool_bytes(&adapter, requests[1].tools.to_vec(), None);
    let deferred: Vec<ToolSpec> = specs
        .iter()
        .filter(|spec| !always.contains(&spec.name.as_str()))
        .cloned()
        .collect();
    let native_wire = tool_bytes(
        &adapter,
        pick(&always),
        Some(DeferredTools {
            search: NativeToolSearch::Bm25,
            tools: deferred.into(),
        }),
    );

    // Search latency, against serializing every definition once.
    let rounds = if bench { 200 } else { 1 };
    let mut latencies = Vec::with_capacity(rounds * QUERIES.len());
    for _ in 0..rounds {
        for (query, _) in QUERIES {
            let began = Instant::now();
            let hits = index.search(query, None, 5);
            latencies.push(began.elapsed());
            std::hint::black_box(hits);
        }
    }
    latencies.sort();
    let serialize = median_of(runs * 10, || {
        std::hint::black_box(tool_bytes(&adapter, specs.clone(), None));
    });

    // Accuracy.
    let (mut top1, mut top5) = (0, 0);
    let mut missed = Vec::new();
    for (query, wanted) in QUERIES {
        let hits: Vec<&str> = index
            .search(query, None, 5)
            .iter()
            .map(|hit| hit.name)
            .collect();
        if hits.first() == Some(&wanted) {
            top1 += 1;
        }
        if hits.contains(&wanted) {
            top5 += 1;
        } else {
            missed.push(format!("{query:?} → {hits:?} (wanted {wanted})"));
        }
    }
    let total = QUERIES.len();

    eprintln!("catalog of {} tools", catalog.len());
    eprintln!("build the catalog:   median {build:>9.1?}");
    eprintln!("lower (Anthropic):   median {lower:>9.1?}");
    eprintln!("build the index:     median {index_time:>9.1?}");
    eprintln!("tool bytes per request, every tool:            {every:>7}");
    eprintln!(
        "tool bytes per request, local search, before:  {local_before:>7} ({:.1}% of every tool)",
        100.0 * local_before as f64 / every as f64
    );
    eprintln!(
        "tool bytes per request, local search, +5 found: {local_after:>6} ({:.1}%)",
        100.0 * local_after as f64 / every as f64
    );
    eprintln!(
        "tool bytes per request, Anthropic's search, on the wire (deferred, outside the context): {native_wire}"
    );
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    eprintln!(
        "search latency over {} searches: p50 {p50:>8.1?}, p99 {p99:>8.1?}",
        latencies.len()
    );
    eprintln!(
        "baseline, serializing every definition once: median {serialize:>8.1?}; search p50 / baseline: {:.3}×",
        p50.as_secs_f64() / serialize.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    eprintln!(
        "recall on {total} queries: top-1 {top1}/{total} ({:.0}%), top-5 {top5}/{total} ({:.0}%)",
        100.0 * top1 as f64 / total as f64,
        100.0 * top5 as f64 / total as f64
    );
    for miss in &missed {
        eprintln!("  missed: {miss}");
    }
    assert!(
        top5 * 10 >= total * 8,
        "top-5 recall fell under 80%: {top5}/{total}"
    );
}
