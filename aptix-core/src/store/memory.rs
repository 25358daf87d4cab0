//! The in-process store: the reference semantics of [`Store`], with nothing
//! surviving the process.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::{
    Applied, Batch, CallRecord, CallState, ConversationStatus, Step, Store, StoreError,
    StoreFuture, StoredConversation, Write,
};
use crate::transcript::Conversation;

/// Conversations and ledger in memory. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    conversations: HashMap<String, Row>,
    calls: HashMap<String, Vec<CallRecord>>,
    /// A logical clock for "oldest change first".
    tick: u64,
}

#[derive(Debug, Clone)]
struct Row {
    stored: StoredConversation,
    changed: u64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-made change:
        // every change below is a single assignment after all checks, and
        // a batch's writes cannot panic between the first and the undo.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn ready<'a, T: Send + 'a>(value: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

/// What a batch's write replaced, to put back when a later write of the
/// batch is refused.
enum Undo {
    Conversation(String, Option<Row>),
    Call {
        conversation_id: String,
        tool_call_id: String,
        step: Step,
        before: Option<CallRecord>,
    },
}

impl State {
    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn entry_mut(
        &mut self,
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
    ) -> Option<&mut CallRecord> {
        self.calls
            .get_mut(conversation_id)?
            .iter_mut()
            .find(|record| record.tool_call_id == tool_call_id && record.step == step)
    }

    fn create(&mut self, conversation: &Conversation) -> bool {
        if self.conversations.contains_key(&conversation.id) {
            return false;
        }
        let changed = self.next_tick();
        self.conversations.insert(
            conversation.id.clone(),
            Row {
                stored: StoredConversation {
                    conversation: conversation.clone(),
                    status: ConversationStatus::Idle,
                    owner: None,
                    lease_until: 0,
                    version: 1,
                },
                changed,
            },
        );
        true
    }

    fn claim(
        &mut self,
        id: &str,
        owner: &str,
        now: i64,
        lease_until: i64,
        version: Option<i64>,
    ) -> Option<StoredConversation> {
        let changed = self.next_tick();
        let row = self.conversations.get_mut(id)?;
        let stored = &mut row.stored;
        let free = stored.status != ConversationStatus::Running
            || stored.lease_until < now
            || stored.owner.as_deref() == Some(owner);
        if !free || version.is_some_and(|version| version != stored.version) {
            return None;
        }
        stored.status = ConversationStatus::Running;
        stored.owner = Some(owner.to_owned());
        stored.lease_until = lease_until;
        stored.version += 1;
        row.changed = changed;
        Some(row.stored.clone())
    }

    fn save(
        &mut self,
        conversation: &Conversation,
        owner: &str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> bool {
        let changed = self.next_tick();
        let Some(row) = self.conversations.get_mut(&conversation.id) else {
            return false;
        };
        let stored = &mut row.stored;
        if stored.status != ConversationStatus::Running || stored.owner.as_deref() != Some(owner) {
            return false;
        }
        stored.conversation = conversation.clone();
        stored.status = status;
        if status == ConversationStatus::Running {
            stored.lease_until = lease_until;
        } else {
            stored.owner = None;
            stored.lease_until = 0;
        }
        stored.version += 1;
        row.changed = changed;
        true
    }

    fn insert_call(&mut self, record: &CallRecord) -> bool {
        if self
            .entry_mut(&record.conversation_id, &record.tool_call_id, record.step)
            .is_some()
        {
            return false;
        }
        self.calls
            .entry(record.conversation_id.clone())
            .or_default()
            .push(record.clone());
        true
    }

    // One atomic change needs the whole key, both states and the change.
    #[allow(clippy::too_many_arguments)]
    fn transition(
        &mut self,
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&str>,
        now: i64,
    ) -> bool {
        let Some(record) = self.entry_mut(conversation_id, tool_call_id, step) else {
            return false;
        };
        if record.state != from {
            return false;
        }
        record.state = to;
        if let Some(outcome) = outcome {
            record.outcome = Some(outcome.to_owned());
        }
        record.updated_at = now;
        true
    }

    fn set_deadline(
        &mut self,
        conversation_id: &str,
        tool_call_id: &str,
        step: Step,
        deadline: Option<i64>,
    ) -> bool {
        match self.entry_mut(conversation_id, tool_call_id, step) {
            Some(record) if record.state == CallState::Pending => {
                record.deadline = deadline;
                true
            }
            _ => false,
        }
    }

    /// What `write` may change, as it is now.
    fn undo_for(&mut self, write: &Write<'_>) -> Undo {
        let row = |state: &Self, id: &str| {
            Undo::Conversation(id.to_owned(), state.conversations.get(id).cloned())
        };
        let call =
            |state: &mut Self, conversation_id: &str, tool_call_id: &str, step: Step| Undo::Call {
                conversation_id: conversation_id.to_owned(),
                tool_call_id: tool_call_id.to_owned(),
                step,
                before: state
                    .entry_mut(conversation_id, tool_call_id, step)
                    .map(|record| record.clone()),
            };
        match write {
            Write::CreateConversation(conversation) | Write::EnsureConversation(conversation) => {
                row(self, &conversation.id)
            }
            Write::ClaimConversation { id, .. } => row(self, id),
            Write::SaveConversation { conversation, .. } => row(self, &conversation.id),
            Write::InsertCall(record) => call(
                self,
                &record.conversation_id,
                &record.tool_call_id,
                record.step,
            ),
            Write::Transition {
                conversation_id,
                tool_call_id,
                step,
                ..
            }
            | Write::SetDeadline {
                conversation_id,
                tool_call_id,
                step,
                ..
            } => call(self, conversation_id, tool_call_id, *step),
        }
    }

    fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Conversation(id, Some(row)) => {
                self.conversations.insert(id, row);
            }
            Undo::Conversation(id, None) => {
                self.conversations.remove(&id);
            }
            Undo::Call {
                conversation_id,
                tool_call_id,
                step,
                before,
            } => {
                let Some(records) = self.calls.get_mut(&conversation_id) else {
                    return;
                };
                let at = records
                    .iter()
                    .position(|record| record.tool_call_id == tool_call_id && record.step == step);
                match (at, before) {
                    (Some(at), Some(before)) => records[at] = before,
                    (Some(at), None) => {
                        records.remove(at);
                    }
                    (None, Some(before)) => records.push(before),
                    (None, None) => {}
                }
                if records.is_empty() {
                    self.calls.remove(&conversation_id);
                }
            }
        }
    }

    /// Applies the writes in order; on the first refused one, puts back
    /// what the earlier ones changed, newest first.
    fn apply(&mut self, batch: &Batch<'_>) -> Applied {
        let mut undo = Vec::with_capacity(batch.len());
        let mut claimed = None;
        for (index, write) in batch.writes().iter().enumerate() {
            undo.push(self.undo_for(write));
            let done = match *write {
                Write::CreateConversation(conversation) => self.create(conversation),
                Write::EnsureConversation(conversation) => {
                    self.create(conversation);
                    true
                }
                Write::ClaimConversation {
                    id,
                    owner,
                    now,
                    lease_until,
                    version,
                } => {
                    claimed = self.claim(id, owner, now, lease_until, version);
                    claimed.is_some()
                }
                Write::SaveConversation {
                    conversation,
                    owner,
                    status,
                    lease_until,
                } => self.save(conversation, owner, status, lease_until),
                Write::InsertCall(record) => self.insert_call(record),
                Write::Transition {
                    conversation_id,
                    tool_call_id,
                    step,
                    from,
                    to,
                    outcome,
                    now,
                } => self.transition(conversation_id, tool_call_id, step, from, to, outcome, now),
                Write::SetDeadline {
                    conversation_id,
                    tool_call_id,
                    step,
                    deadline,
                } => self.set_deadline(conversation_id, tool_call_id, step, deadline),
            };
            if !done {
                for undo in undo.into_iter().rev() {
                    self.undo(undo);
                }
                return Applied::Refused { index };
            }
        }
        Applied::All { claimed }
    }
}

impl Store for MemoryStore {
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        _now: i64,
    ) -> StoreFuture<'a, bool> {
        ready(Ok(self.lock().create(conversation)))
    }

    fn load_conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        let state = self.lock();
        ready(Ok(state
            .conversations
            .get(id)
            .map(|row| row.stored.clone())))
    }

    fn claim_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        now: i64,
        lease_until: i64,
    ) -> StoreFuture<'a, Option<StoredConversation>> {
        ready(Ok(self.lock().claim(id, owner, now, lease_until, None)))
    }

    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()> {
        if self.lock().save(conversation, owner, status, lease_until) {
            ready(Ok(()))
        } else {
            ready(Err(StoreError::LostLease {
                conversation_id: conversation.id.clone(),
                owner: owner.to_owned(),
            }))
        }
    }

    fn renew_lease<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        lease_until: i64,
    ) -> StoreFuture<'a, bool> {
        let mut state = self.lock();
        match state.conversations.get_mut(id) {
            Some(row)
                if row.stored.status == ConversationStatus::Running
                    && row.stored.owner.as_deref() == Some(owner) =>
            {
                row.stored.lease_until = lease_until;
                ready(Ok(true))
            }
            _ => ready(Ok(false)),
        }
    }

    fn conversations_with_status<'a>(
        &'a self,
        status: ConversationStatus,
        limit: usize,
    ) -> StoreFuture<'a, Vec<String>> {
        let state = self.lock();
        let mut rows: Vec<(&u64, &String)> = state
            .conversations
            .iter()
            .filter(|(_, row)| row.stored.status == status)
            .map(|(id, row)| (&row.changed, id))
            .collect();
        rows.sort();
        ready(Ok(rows
            .into_iter()
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect()))
    }

    fn suspended_without_pending<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<String>> {
        let state = self.lock();
        let mut rows: Vec<(&u64, &String)> = state
            .conversations
            .iter()
            .filter(|(id, row)| {
                row.stored.status == ConversationStatus::Suspended
                    && state.calls.get(*id).is_none_or(|calls| {
                        calls
                            .iter()
                            .all(|record| record.state != CallState::Pending)
                    })
            })
            .map(|(id, row)| (&row.changed, id))
            .collect();
        rows.sort();
        ready(Ok(rows
            .into_iter()
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect()))
    }

    fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool> {
        ready(Ok(self.lock().insert_call(record)))
    }

    fn call<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
    ) -> StoreFuture<'a, Option<CallRecord>> {
        let mut state = self.lock();
        ready(Ok(state
            .entry_mut(conversation_id, tool_call_id, step)
            .map(|record| record.clone())))
    }

    fn calls<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<CallRecord>> {
        let state = self.lock();
        let mut records = state
            .calls
            .get(conversation_id)
            .cloned()
            .unwrap_or_default();
        records.sort_by(|a, b| {
            (a.created_at, &a.tool_call_id, a.step).cmp(&(b.created_at, &b.tool_call_id, b.step))
        });
        ready(Ok(records))
    }

    fn transition<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        from: CallState,
        to: CallState,
        outcome: Option<&'a str>,
        now: i64,
    ) -> StoreFuture<'a, bool> {
        ready(Ok(self.lock().transition(
            conversation_id,
            tool_call_id,
            step,
            from,
            to,
            outcome,
            now,
        )))
    }

    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool> {
        ready(Ok(self.lock().set_deadline(
            conversation_id,
            tool_call_id,
            step,
            deadline,
        )))
    }

    fn due_calls<'a>(&'a self, now: i64, limit: usize) -> StoreFuture<'a, Vec<CallRecord>> {
        let state = self.lock();
        let mut due: Vec<&CallRecord> = state
            .calls
            .values()
            .flatten()
            .filter(|record| {
                record.state == CallState::Pending
                    && record.deadline.is_some_and(|deadline| deadline <= now)
            })
            .collect();
        due.sort_by_key(|record| (record.deadline, record.created_at));
        ready(Ok(due.into_iter().take(limit).cloned().collect()))
    }

    fn apply<'a>(&'a self, batch: &'a Batch<'a>) -> StoreFuture<'a, Applied> {
        ready(Ok(self.lock().apply(batch)))
    }
}
