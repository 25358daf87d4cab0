//! Approval decided at run time: a policy of the application sees each
//! call (tool, validated arguments, context, conversation) and answers
//! run it, ask a person first, or deny it.
//!
//! The tool's declared `approval = requires_approval` is the floor: a
//! policy may ask for an approval a tool does not declare, never waive one
//! it does. The policy is a port the loop calls
//! ([`AgentBuilder::approval_policy`](super::AgentBuilder::approval_policy));
//! the loop imports no policy.

use serde_json::Value;

use super::hook::{HookCall, HookFuture};
use crate::transcript::Message;

/// What a policy decided for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Run it as the tool declares: without asking, unless the tool
    /// requires an approval (which no policy waives).
    Auto,
    /// Ask a person first: the call suspends for an approval
    /// (`AwaitReason::Approval`), as if the tool declared
    /// `approval = requires_approval`. Has no effect on human tools (a
    /// person answers them anyway) and provider tools.
    Ask,
    /// Do not run it: the model gets a `denied` result with this message.
    Deny(String),
}

/// A call as an approval policy sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ApprovalCall<'a> {
    /// The call: id, tool, validated arguments (after any hook's rewrite),
    /// context.
    pub call: HookCall<'a>,
    /// The conversation the call belongs to.
    pub conversation_id: &'a str,
    /// The conversation so far, up to and including the model's turn that
    /// made the call.
    pub transcript: &'a [Message],
}

/// Decides at run time whether a call runs, waits for a person, or is
/// refused.
///
/// A plain function or closure over `&ApprovalCall` is a policy too:
///
/// ```
/// use aptix_core::agent::{ApprovalCall, ApprovalDecision};
/// let policy = |call: &ApprovalCall<'_>| {
///     if call.call.arguments["cents"].as_u64().unwrap_or(0) > 10_000 {
///         ApprovalDecision::Ask
///     } else {
///         ApprovalDecision::Auto
///     }
/// };
/// # let _ = policy;
/// ```
pub trait ApprovalPolicy: Send + Sync + 'static {
    /// The policy's name, in logs.
    fn name(&self) -> &str {
        "approval_policy"
    }

    /// Decides for one call whose arguments fit its tool's schema (a call
    /// that does not fit never runs, so it is not asked about).
    fn decide<'a>(&'a self, call: ApprovalCall<'a>) -> HookFuture<'a, ApprovalDecision>;
}

impl<F> ApprovalPolicy for F
where
    F: Fn(&ApprovalCall<'_>) -> ApprovalDecision + Send + Sync + 'static,
{
    fn decide<'a>(&'a self, call: ApprovalCall<'a>) -> HookFuture<'a, ApprovalDecision> {
        Box::pin(std::future::ready(self(&call)))
    }
}

/// The hash an approval is bound to: SHA-256 (hex) of the payload the
/// approver was shown (for a server tool, its validated arguments; for a
/// client tool, what its preflight prepared), as JSON with sorted keys, so
/// that spacing and key order never change it.
pub(crate) fn arguments_hash(payload: &str) -> String {
    // serde_json's maps are sorted by key (no `preserve_order`): the text
    // of a parsed value is canonical.
    let canonical = match serde_json::from_str::<Value>(payload) {
        Ok(value) => value.to_string(),
        Err(_) => payload.to_owned(),
    };
    crate::digest::sha256_hex(canonical.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::arguments_hash;

    #[test]
    fn the_hash_ignores_spacing_and_key_order_and_sees_every_value() {
        let a = arguments_hash(r#"{"to":"ann","cents":5}"#);
        assert_eq!(a, arguments_hash(r#"{ "cents": 5, "to": "ann" }"#));
        assert_ne!(a, arguments_hash(r#"{"to":"ann","cents":6}"#));
        assert_eq!(a.len(), 64);
    }
}
