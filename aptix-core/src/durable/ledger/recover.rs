//! Recovery of a call a crash interrupted: its execution row still says
//! `executing`, so nobody knows whether its tool took effect. An idempotent
//! tool runs again, past the gate it had passed; any other call is closed
//! as cancelled and the model is told it may or may not have happened.

use super::messages::interrupted_message;
use super::settle::{Steering, ids_for};
use super::{Ledger, Made, mark_changed};
use crate::agent::{CallResult, ResultText};
use crate::context::ToolContext;
use crate::durable::lease::now_ms;
use crate::durable::resolve::Resolution;
use crate::envelope::Envelope;
use crate::error::ErrorCode;
use crate::executor::ToolCall;
use crate::meta::{AwaitReason, Gate};
use crate::store::{CallRecord, CallState, Step, StoreError};
use crate::transcript::{AssistantToolCall, Conversation};

impl Ledger {
    /// A server step that was executing when its process stopped.
    pub(super) async fn recover_interrupted(
        &self,
        conversation: &Conversation,
        context: &ToolContext,
        call: &AssistantToolCall,
        execution: &CallRecord,
        steering: &mut Steering,
    ) -> Result<CallResult, StoreError> {
        let store = &self.store;
        // The tool it was recorded as (a hook may have renamed the call).
        let tool = execution.tool.as_str();
        let made = Made {
            requested: execution.requested.as_deref(),
            reasoning: execution.reasoning.as_deref(),
        };
        let idempotent = self
            .agent
            .executor()
            .catalog()
            .get(tool)
            .is_some_and(|definition| definition.idempotent());
        if idempotent {
            tracing::warn!(tool, tool_call_id = %call.id, "re-running an idempotent call a crash interrupted, with the same tool_call_id");
            let tool_call = ToolCall::new(call.id.as_str(), tool, execution.arguments.clone());
            let approval = store
                .call(&conversation.id, &call.id, Step::Approval)
                .await?
                .filter(|approval| {
                    approval.tool == tool
                        && approval.requested == execution.requested
                        && approval.state == CallState::Resolved
                });
            let resolution = approval
                .and_then(|approval| approval.outcome)
                .as_deref()
                .map(Resolution::decode)
                .transpose()?;
            // A gated tool's execution row is written only once its gate
            // is passed: by the approval on record, or, without one, by an
            // earlier `ApproveAlways`.
            let gated = self
                .route_of(tool, Gate::Declared)
                .is_some_and(|route| route.awaits == Some(AwaitReason::Approval));
            let gate = match resolution {
                Some(Resolution::ApproveWithArgs(_)) => Gate::Approved { changed: true },
                Some(resolution) if resolution.approves_as_held() => {
                    Gate::Approved { changed: false }
                }
                _ if gated => Gate::Approved { changed: false },
                _ => Gate::Declared,
            };
            let execution = self
                .agent
                .executor()
                .execute_gated(&tool_call, context, gate)
                .await;
            let outcome = mark_changed(gate, &tool_call, execution.outcome);
            let finished = self
                .finish_execution(&tool_call, &conversation.id, outcome, None, made)
                .await;
            steering.ran = Some(tool_call);
            return finished;
        }
        tracing::warn!(tool = %call.name, tool_call_id = %call.id, "a crash interrupted a call that is not idempotent; it is not run again");
        store
            .transition(
                &conversation.id,
                &call.id,
                Step::Execution,
                CallState::Executing,
                CallState::Cancelled,
                None,
                now_ms(),
            )
            .await?;
        Ok(CallResult::Finished(ResultText::from_envelope(
            Envelope::error(
                ids_for(conversation, &call.id),
                ErrorCode::Cancelled,
                interrupted_message(&call.name),
            ),
        )))
    }
}
