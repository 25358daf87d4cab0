//! Tool call ids the loop can rely on: unique in their conversation.

use std::collections::HashSet;

use crate::model::assembly::AssembledCall;
use crate::transcript::Message;

/// Gives every call of a new turn an id no earlier call of the
/// conversation has, nor an earlier call of the same turn, nor a call the
/// provider ran in it (`hosted`: the ids they were shown under). Models (and
/// OpenAI-compatible servers) sometimes reuse ids; two calls with one id
/// cannot each be answered, and a result would be taken for the wrong
/// call. Returns each renaming, `(model's id, id used)`.
///
/// A renamed id is the model's id with `-2`, `-3`, … appended, or a fresh
/// `call_<uuid>` when that would be longer than 40 bytes or the model's id
/// holds characters outside `[A-Za-z0-9_-]`: every provider accepts either.
pub(crate) fn make_ids_unique(
    calls: &mut [AssembledCall],
    earlier: &[Message],
    hosted: &[String],
) -> Vec<(String, String)> {
    let mut used: HashSet<String> = earlier
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|call| call.id.clone())
        .chain(hosted.iter().cloned())
        .collect();
    let mut renamed = Vec::new();
    for call in calls {
        if used.insert(call.id.clone()) {
            continue;
        }
        let plain = call
            .id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
        let suffixed = (2usize..)
            .map(|n| format!("{}-{n}", call.id))
            .take_while(|id| plain && id.len() <= 40)
            .find(|id| !used.contains(id));
        let id = suffixed.unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
        used.insert(id.clone());
        renamed.push((std::mem::replace(&mut call.id, id.clone()), id));
    }
    renamed
}
