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

fn main() {
    assert_eq!(Sentiment::META.executor, aptix::ExecutorKind::Latent);
    assert_eq!(SendEmail::META.executor, aptix::ExecutorKind::Latent);
    let activities = aptix::Activities::new()
        .bind::<Sentiment, _, _>(|args, _ctx| async move {
            Ok(Verdict { label: if args.text.is_empty() { "neutral".into() } else { "positive".into() } })
        });
    let catalog = aptix::tools![Sentiment, SendEmail].activities(activities).build();
    assert!(catalog.is_ok());
}
