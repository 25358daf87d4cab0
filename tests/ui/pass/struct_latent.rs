use aptix::prelude::*;

/// What a text's sentiment is.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// `positive`, `neutral` or `negative`.
    pub label: String,
}

/// Classifies a text: a schema only, latent until an activity is bound.
#[agent_tool(
    name = "sentiment",
    usage = "Call to classify how a text feels.",
    output = Verdict,
)]
#[derive(Deserialize, JsonSchema)]
pub struct Sentiment {
    /// The text to classify.
    pub text: String,
}

/// Sends an email; `executor = latent` said out loud, and held for approval.
#[agent_tool(
    name = "send_email",
    usage = "Call to send an email.",
    executor = latent,
    approval = requires_approval,
    suspend_timeout = "10m",
    idempotent = true,
    output = Verdict,
)]
#[derive(Deserialize, JsonSchema)]
pub struct SendEmail {
    /// The address.
    pub to: String,
    /// A field renamed away from the reserved prefix.
    #[serde(rename = "output_note")]
    pub _note: String,
}

/// Two tools that share one activity, named explicitly.
#[agent_tool(
    name = "page_ops",
    usage = "Call to page the on-call engineer.",
    output = Verdict,
    activity = "deliver",
)]
#[derive(Deserialize, JsonSchema)]
pub struct PageOps {
    /// What happened.
    pub text: String,
}

/// Always latent, whatever is bound to its name.
#[agent_tool(
    name = "guess",
    usage = "Call to guess.",
    executor = latent,
    output = Verdict,
    activity = "",
)]
#[derive(Deserialize, JsonSchema)]
pub struct Guess {
    /// What to guess about.
    pub text: String,
}

fn main() {
    assert_eq!(PageOps::META.activity, Some("deliver"));
    assert_eq!(Guess::META.activity, Some(""));
    assert_eq!(Sentiment::META.activity, None);
    assert_eq!(Sentiment::META.executor, aptix::meta::ExecutorKind::Latent);
    assert_eq!(SendEmail::META.executor, aptix::meta::ExecutorKind::Latent);
    let activities = aptix::activity::Activities::new()
        .bind::<Sentiment, _, _>(|args, _ctx| async move {
            Ok(Verdict { label: if args.text.is_empty() { "neutral".into() } else { "positive".into() } })
        });
    let catalog = aptix::tools![Sentiment, SendEmail].activities(activities).build();
    assert!(catalog.is_ok());
}
