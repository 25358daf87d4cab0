//! The in-process store: the reference semantics of [`Store`], with nothing
//! surviving the process.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::{
    CallRecord, CallState, ConversationStatus, Step, Store, StoreError, StoreFuture,
    StoredConversation,
};
use crate::agent::Conversation;

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

#[derive(Debug)]
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
        // every change below is a single assignment after all checks.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn ready<'a, T: Send + 'a>(value: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
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
}

impl Store for MemoryStore {
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        _now: i64,
    ) -> StoreFuture<'a, bool> {
        let mut state = self.lock();
        if state.conversations.contains_key(&conversation.id) {
            return ready(Ok(false));
        }
        let changed = state.next_tick();
        state.conversations.insert(
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
        ready(Ok(true))
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
        let mut state = self.lock();
        let changed = state.next_tick();
        let Some(row) = state.conversations.get_mut(id) else {
            return ready(Ok(None));
        };
        let stored = &mut row.stored;
        let free = stored.status != ConversationStatus::Running
            || stored.lease_until < now
            || stored.owner.as_deref() == Some(owner);
        if !free {
            return ready(Ok(None));
        }
        stored.status = ConversationStatus::Running;
        stored.owner = Some(owner.to_owned());
        stored.lease_until = lease_until;
        stored.version += 1;
        row.changed = changed;
        ready(Ok(Some(row.stored.clone())))
    }

    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()> {
        let mut state = self.lock();
        let changed = state.next_tick();
        let lost = || StoreError::LostLease {
            conversation_id: conversation.id.clone(),
            owner: owner.to_owned(),
        };
        let Some(row) = state.conversations.get_mut(&conversation.id) else {
            return ready(Err(lost()));
        };
        let stored = &mut row.stored;
        if stored.status != ConversationStatus::Running || stored.owner.as_deref() != Some(owner) {
            return ready(Err(lost()));
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
        ready(Ok(()))
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
        let mut state = self.lock();
        if state
            .entry_mut(&record.conversation_id, &record.tool_call_id, record.step)
            .is_some()
        {
            return ready(Ok(false));
        }
        state
            .calls
            .entry(record.conversation_id.clone())
            .or_default()
            .push(record.clone());
        ready(Ok(true))
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
        let mut state = self.lock();
        let Some(record) = state.entry_mut(conversation_id, tool_call_id, step) else {
            return ready(Ok(false));
        };
        if record.state != from {
            return ready(Ok(false));
        }
        record.state = to;
        if let Some(outcome) = outcome {
            record.outcome = Some(outcome.to_owned());
        }
        record.updated_at = now;
        ready(Ok(true))
    }

    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool> {
        let mut state = self.lock();
        match state.entry_mut(conversation_id, tool_call_id, step) {
            Some(record) if record.state == CallState::Pending => {
                record.deadline = deadline;
                ready(Ok(true))
            }
            _ => ready(Ok(false)),
        }
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
}
