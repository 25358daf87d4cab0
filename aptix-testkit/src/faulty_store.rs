//! A [`Store`] wrapper that fails chosen operations on command, for testing
//! what a durable agent does when its database hiccups: a read that times
//! out, a statement that fails, or a commit whose acknowledgement is lost.
//!
//! ```ignore
//! let store = Arc::new(FaultyStore::new(MemoryStore::new()));
//! // The second `calls()` from now fails, once.
//! store.fail(StoreOp::Calls, Fault::after(1));
//! // The next `transition` is applied, but the caller is told it failed.
//! store.fail(StoreOp::Transition, Fault::once().after_applying());
//! // Every `save_conversation` fails until `heal()`.
//! store.fail(StoreOp::SaveConversation, Fault::always());
//! // The next batch fails whole: none of its writes is applied.
//! store.fail(StoreOp::Apply, Fault::once());
//! ```
//!
//! Rules are independent: each counts the operations of its own kind from
//! the moment it was added. The wrapper also counts every operation it
//! passes on ([`FaultyStore::take_counts`]), so a test can assert how many
//! commits a piece of work costs. An injected failure is a
//! [`StoreError::Backend`] whose source is [`InjectedFailure`], so a test
//! can tell it from a real one.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use aptix_core::Conversation;
use aptix_core::store::{
    Applied, Batch, CallRecord, CallState, ConversationStatus, Step, Store, StoreError,
    StoreFuture, StoredConversation, Write,
};

/// One kind of [`Store`] operation, named after its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreOp {
    /// [`Store::create_conversation`].
    CreateConversation,
    /// [`Store::load_conversation`].
    LoadConversation,
    /// [`Store::claim_conversation`].
    ClaimConversation,
    /// [`Store::save_conversation`].
    SaveConversation,
    /// [`Store::renew_lease`].
    RenewLease,
    /// [`Store::conversations_with_status`].
    ConversationsWithStatus,
    /// [`Store::insert_call`].
    InsertCall,
    /// [`Store::call`].
    Call,
    /// [`Store::calls`].
    Calls,
    /// [`Store::transition`].
    Transition,
    /// [`Store::set_deadline`].
    SetDeadline,
    /// [`Store::due_calls`].
    DueCalls,
    /// [`Store::suspended_without_pending`].
    SuspendedWithoutPending,
    /// [`Store::apply`]: a whole batch, failed (or passed) as one.
    Apply,
}

impl StoreOp {
    /// Every kind, in declaration order (for property-test strategies).
    pub const ALL: [StoreOp; 14] = [
        StoreOp::CreateConversation,
        StoreOp::LoadConversation,
        StoreOp::ClaimConversation,
        StoreOp::SaveConversation,
        StoreOp::RenewLease,
        StoreOp::ConversationsWithStatus,
        StoreOp::InsertCall,
        StoreOp::Call,
        StoreOp::Calls,
        StoreOp::Transition,
        StoreOp::SetDeadline,
        StoreOp::DueCalls,
        StoreOp::SuspendedWithoutPending,
        StoreOp::Apply,
    ];

    /// Whether the operation changes the store (so that
    /// [`Fault::after_applying`] makes a difference).
    pub const fn writes(self) -> bool {
        matches!(
            self,
            StoreOp::CreateConversation
                | StoreOp::ClaimConversation
                | StoreOp::SaveConversation
                | StoreOp::RenewLease
                | StoreOp::InsertCall
                | StoreOp::Transition
                | StoreOp::SetDeadline
                | StoreOp::Apply
        )
    }
}

/// When a rule fails operations of its kind: skip `after` of them, then
/// fail `times` in a row (or every one from then on), before or after the
/// operation took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    after: u32,
    times: Option<u32>,
    applied: bool,
}

impl Fault {
    /// The next operation fails.
    pub const fn once() -> Self {
        Fault {
            after: 0,
            times: Some(1),
            applied: false,
        }
    }

    /// The next `n` operations fail, then the store works again: a
    /// transient outage.
    pub const fn times(n: u32) -> Self {
        Fault {
            after: 0,
            times: Some(n),
            applied: false,
        }
    }

    /// Every operation fails until [`FaultyStore::heal`].
    pub const fn always() -> Self {
        Fault {
            after: 0,
            times: None,
            applied: false,
        }
    }

    /// `n` operations succeed, then the next one fails (once, unless
    /// changed with [`Fault::lasting`] or [`Fault::forever`]).
    pub const fn after(n: u32) -> Self {
        Fault {
            after: n,
            times: Some(1),
            applied: false,
        }
    }

    /// Fails `n` operations in a row once it starts failing.
    pub const fn lasting(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Fails every operation once it starts failing.
    pub const fn forever(mut self) -> Self {
        self.times = None;
        self
    }

    /// The failing operation is carried out first and only its answer is
    /// lost: a commit whose acknowledgement never arrives.
    pub const fn after_applying(mut self) -> Self {
        self.applied = true;
        self
    }
}

/// The error an injected failure carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectedFailure {
    /// The operation that failed.
    pub op: StoreOp,
    /// Whether the operation took effect before it failed.
    pub applied: bool,
}

impl std::fmt::Display for InjectedFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "injected store failure in {:?}", self.op)?;
        if self.applied {
            f.write_str(" (after it took effect)")?;
        }
        Ok(())
    }
}

impl std::error::Error for InjectedFailure {}

#[derive(Debug)]
struct Rule {
    op: StoreOp,
    skip: u32,
    left: Option<u32>,
    applied: bool,
}

/// What the wrapper decided for one operation.
#[derive(Clone, Copy)]
enum Verdict {
    Pass,
    Fail { applied: bool },
}

/// Wraps a store and fails the operations its rules choose.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    rules: Mutex<Vec<Rule>>,
    injected: AtomicU64,
    counts: Mutex<BTreeMap<StoreOp, u64>>,
}

/// How many operations of each kind a [`FaultyStore`] was asked for,
/// failed ones included.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpCounts(pub BTreeMap<StoreOp, u64>);

impl OpCounts {
    /// Operations of every kind.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Operations that change the store: each is one transaction, so one
    /// commit (one `fsync` for SQLite with `synchronous=FULL`).
    pub fn commits(&self) -> u64 {
        self.0
            .iter()
            .filter(|(op, _)| op.writes())
            .map(|(_, count)| count)
            .sum()
    }

    /// Operations of kind `op`.
    pub fn of(&self, op: StoreOp) -> u64 {
        self.0.get(&op).copied().unwrap_or(0)
    }
}

impl std::fmt::Display for OpCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} operations, {} commits", self.total(), self.commits())?;
        let mut separator = ": ";
        for (op, count) in &self.0 {
            write!(f, "{separator}{op:?} {count}")?;
            separator = ", ";
        }
        Ok(())
    }
}

impl<S: Store> FaultyStore<S> {
    /// A wrapper that fails nothing until told to.
    pub fn new(inner: S) -> Self {
        FaultyStore {
            inner,
            rules: Mutex::new(Vec::new()),
            injected: AtomicU64::new(0),
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Adds a rule: operations of kind `op` fail as `fault` says.
    pub fn fail(&self, op: StoreOp, fault: Fault) {
        self.lock_rules().push(Rule {
            op,
            skip: fault.after,
            left: fault.times,
            applied: fault.applied,
        });
    }

    /// Removes every rule: the store works again.
    pub fn heal(&self) {
        self.lock_rules().clear();
    }

    /// Whether a rule would still fail an operation.
    pub fn armed(&self) -> bool {
        !self.lock_rules().is_empty()
    }

    /// How many failures were injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// The operations asked for since the last call (or since the wrapper
    /// was made), and starts counting afresh.
    pub fn take_counts(&self) -> OpCounts {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        OpCounts(std::mem::take(&mut *counts))
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts the operation against every rule of its kind; the first rule
    /// due to fire decides.
    fn verdict(&self, op: StoreOp) -> Verdict {
        *self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(op)
            .or_default() += 1;
        self.fire(op)
    }

    /// What the rules of kind `op` decide for one more operation, without
    /// counting it as one (a write inside a batch: the batch is the
    /// commit).
    fn fire(&self, op: StoreOp) -> Verdict {
        let mut rules = self.lock_rules();
        let mut verdict = Verdict::Pass;
        for rule in rules.iter_mut().filter(|rule| rule.op == op) {
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            let fires = match &mut rule.left {
                None => true,
                Some(0) => false,
                Some(left) => {
                    *left -= 1;
                    true
                }
            };
            if fires && matches!(verdict, Verdict::Pass) {
                verdict = Verdict::Fail {
                    applied: rule.applied,
                };
            }
        }
        rules.retain(|rule| rule.left != Some(0));
        if matches!(verdict, Verdict::Fail { .. }) {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        verdict
    }

    /// Decides before the inner operation is even created: some stores
    /// (`MemoryStore`) do their work when the call is made, not when the
    /// future is polled, so a failure that must not take effect must not
    /// call them at all.
    fn run<'a, T: Send + 'a>(
        &'a self,
        op: StoreOp,
        call: impl FnOnce() -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        self.decided(op, self.verdict(op), call)
    }

    /// Carries out `verdict` on the operation `call` makes.
    fn decided<'a, T: Send + 'a>(
        &'a self,
        op: StoreOp,
        verdict: Verdict,
        call: impl FnOnce() -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        match verdict {
            Verdict::Pass => call(),
            Verdict::Fail { applied } => {
                let applying = applied.then(call);
                Box::pin(async move {
                    if let Some(applying) = applying {
                        // The answer is lost, whatever it was.
                        let _ = applying.await;
                    }
                    Err(StoreError::backend(InjectedFailure { op, applied }))
                })
            }
        }
    }
}

impl<S: Store> Store for FaultyStore<S> {
    fn create_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        now: i64,
    ) -> StoreFuture<'a, bool> {
        self.run(StoreOp::CreateConversation, || {
            self.inner.create_conversation(conversation, now)
        })
    }

    fn load_conversation<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        self.run(StoreOp::LoadConversation, || {
            self.inner.load_conversation(id)
        })
    }

    fn claim_conversation<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        now: i64,
        lease_until: i64,
    ) -> StoreFuture<'a, Option<StoredConversation>> {
        self.run(StoreOp::ClaimConversation, || {
            self.inner.claim_conversation(id, owner, now, lease_until)
        })
    }

    fn save_conversation<'a>(
        &'a self,
        conversation: &'a Conversation,
        owner: &'a str,
        status: ConversationStatus,
        lease_until: i64,
    ) -> StoreFuture<'a, ()> {
        self.run(StoreOp::SaveConversation, || {
            self.inner
                .save_conversation(conversation, owner, status, lease_until)
        })
    }

    fn renew_lease<'a>(
        &'a self,
        id: &'a str,
        owner: &'a str,
        lease_until: i64,
    ) -> StoreFuture<'a, bool> {
        self.run(StoreOp::RenewLease, || {
            self.inner.renew_lease(id, owner, lease_until)
        })
    }

    fn conversations_with_status<'a>(
        &'a self,
        status: ConversationStatus,
        limit: usize,
    ) -> StoreFuture<'a, Vec<String>> {
        self.run(StoreOp::ConversationsWithStatus, || {
            self.inner.conversations_with_status(status, limit)
        })
    }

    fn insert_call<'a>(&'a self, record: &'a CallRecord) -> StoreFuture<'a, bool> {
        self.run(StoreOp::InsertCall, || self.inner.insert_call(record))
    }

    fn call<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
    ) -> StoreFuture<'a, Option<CallRecord>> {
        self.run(StoreOp::Call, || {
            self.inner.call(conversation_id, tool_call_id, step)
        })
    }

    fn calls<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Vec<CallRecord>> {
        self.run(StoreOp::Calls, || self.inner.calls(conversation_id))
    }

    #[allow(clippy::too_many_arguments)]
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
        self.run(StoreOp::Transition, || {
            self.inner
                .transition(conversation_id, tool_call_id, step, from, to, outcome, now)
        })
    }

    fn set_deadline<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_id: &'a str,
        step: Step,
        deadline: Option<i64>,
    ) -> StoreFuture<'a, bool> {
        self.run(StoreOp::SetDeadline, || {
            self.inner
                .set_deadline(conversation_id, tool_call_id, step, deadline)
        })
    }

    fn due_calls<'a>(&'a self, now: i64, limit: usize) -> StoreFuture<'a, Vec<CallRecord>> {
        self.run(StoreOp::DueCalls, || self.inner.due_calls(now, limit))
    }

    fn suspended_without_pending<'a>(&'a self, limit: usize) -> StoreFuture<'a, Vec<String>> {
        self.run(StoreOp::SuspendedWithoutPending, || {
            self.inner.suspended_without_pending(limit)
        })
    }

    fn apply<'a>(&'a self, batch: &'a Batch<'a>) -> StoreFuture<'a, Applied> {
        // An empty batch commits nothing, so it is not counted as one.
        if batch.is_empty() {
            return Box::pin(std::future::ready(Ok(Applied::All { claimed: None })));
        }
        // The rules of each write's own kind apply to it inside a batch
        // too (a failed write fails the whole batch), or a fault aimed at
        // a save or an insert would miss every one that is batched.
        let mut verdict = self.verdict(StoreOp::Apply);
        for write in batch.writes() {
            let op = match write {
                Write::CreateConversation(_) | Write::EnsureConversation(_) => {
                    StoreOp::CreateConversation
                }
                Write::ClaimConversation { .. } => StoreOp::ClaimConversation,
                Write::SaveConversation { .. } => StoreOp::SaveConversation,
                Write::InsertCall(_) => StoreOp::InsertCall,
                Write::Transition { .. } => StoreOp::Transition,
                Write::SetDeadline { .. } => StoreOp::SetDeadline,
            };
            verdict = match (verdict, self.fire(op)) {
                (Verdict::Pass, other) | (other, Verdict::Pass) => other,
                // Not applied wins: one write failing before it took effect
                // takes the whole batch with it.
                (Verdict::Fail { applied: a }, Verdict::Fail { applied: b }) => {
                    Verdict::Fail { applied: a && b }
                }
            };
        }
        self.decided(StoreOp::Apply, verdict, || self.inner.apply(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aptix_core::store::MemoryStore;

    fn injected(result: &Result<bool, StoreError>) -> bool {
        matches!(result, Err(StoreError::Backend(source)) if source.is::<InjectedFailure>())
    }

    #[tokio::test]
    async fn rules_fail_the_chosen_operations_and_heal() {
        let store = FaultyStore::new(MemoryStore::new());
        let conversation = Conversation::new("c");
        store.fail(StoreOp::CreateConversation, Fault::after(1));
        assert!(matches!(
            store.create_conversation(&conversation, 1).await,
            Ok(true)
        ));
        assert!(injected(&store.create_conversation(&conversation, 1).await));
        assert!(matches!(
            store.create_conversation(&conversation, 1).await,
            Ok(false)
        ));
        assert!(!store.armed(), "a spent rule is dropped");

        store.fail(StoreOp::RenewLease, Fault::times(2));
        assert!(injected(&store.renew_lease("c", "me", 5).await));
        assert!(injected(&store.renew_lease("c", "me", 5).await));
        assert!(store.renew_lease("c", "me", 5).await.is_ok());

        store.fail(StoreOp::RenewLease, Fault::always());
        for _ in 0..3 {
            assert!(injected(&store.renew_lease("c", "me", 5).await));
        }
        store.heal();
        assert!(store.renew_lease("c", "me", 5).await.is_ok());
        assert_eq!(store.injected(), 6);
    }

    #[tokio::test]
    async fn a_failure_before_applying_changes_nothing_even_in_an_eager_store() {
        let store = FaultyStore::new(MemoryStore::new());
        store.fail(StoreOp::CreateConversation, Fault::once());
        let conversation = Conversation::new("c");
        assert!(injected(&store.create_conversation(&conversation, 1).await));
        assert!(matches!(
            store.inner().load_conversation("c").await,
            Ok(None)
        ));
    }

    #[tokio::test]
    async fn an_applied_failure_takes_effect_and_reports_an_error() {
        let store = FaultyStore::new(MemoryStore::new());
        store.fail(StoreOp::CreateConversation, Fault::once().after_applying());
        let conversation = Conversation::new("c");
        assert!(injected(&store.create_conversation(&conversation, 1).await));
        assert!(matches!(
            store.inner().load_conversation("c").await,
            Ok(Some(_))
        ));
    }

    #[tokio::test]
    async fn an_injected_batch_failure_writes_nothing_and_every_operation_is_counted() {
        use aptix_core::store::{Batch, Write};

        let store = FaultyStore::new(MemoryStore::new());
        let conversation = Conversation::new("c");
        let batch = Batch::new()
            .with(Write::EnsureConversation(&conversation))
            .with(Write::ClaimConversation {
                id: "c",
                owner: "me",
                now: 1,
                lease_until: 5,
                version: None,
            });
        store.fail(StoreOp::Apply, Fault::once());
        assert!(matches!(
            store.apply(&batch).await,
            Err(StoreError::Backend(source)) if source.is::<InjectedFailure>()
        ));
        assert!(matches!(
            store.inner().load_conversation("c").await,
            Ok(None)
        ));
        assert!(matches!(
            store.apply(&batch).await,
            Ok(Applied::All { claimed: Some(_) })
        ));
        assert!(store.apply(&Batch::new()).await.is_ok());
        assert!(matches!(store.load_conversation("c").await, Ok(Some(_))));
        let counts = store.take_counts();
        assert_eq!(counts.of(StoreOp::Apply), 2, "{counts}");
        assert_eq!(counts.commits(), 2, "an empty batch commits nothing");
        assert_eq!(counts.total(), 3, "{counts}");
        assert_eq!(store.take_counts().total(), 0, "taking starts afresh");
    }
}
