//! Test doubles for activities: bind a fake to a schema-first tool, run the
//! agent or the executor as in production, then look at the calls the fake
//! received. The tool's declaration is the production one; only the code
//! bound to its name differs.
//!
//! ```ignore
//! let fake = Fake::<SendEmail>::returning(|args| Ok(Sent { sent: true }));
//! let catalog = aptix::tools![SendEmail].activities(Activities::new().fake(&fake)).build()?;
//! // ... run ...
//! assert_eq!(fake.calls()[0].to, "ada@example.com");
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use aptix_core::{Activities, Tool, ToolError, ToolOutput};

/// How a fake answers a call of `T`.
type Answer<T> = dyn Fn(&<T as Tool>::Args) -> Result<<T as Tool>::Output, ToolError> + Send + Sync;

/// A fake activity for the tool `T`: answers with a function of the
/// arguments and records every call's arguments. Cheap to clone; clones
/// share the record.
pub struct Fake<T: Tool> {
    answer: Arc<Answer<T>>,
    calls: Arc<Mutex<Vec<T::Args>>>,
}

impl<T: Tool> Clone for Fake<T> {
    fn clone(&self) -> Self {
        Fake {
            answer: Arc::clone(&self.answer),
            calls: Arc::clone(&self.calls),
        }
    }
}

impl<T: Tool> std::fmt::Debug for Fake<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fake")
            .field("tool", &T::NAME)
            .field("calls", &self.count())
            .finish()
    }
}

impl<T: Tool> Fake<T>
where
    T::Output: ToolOutput,
{
    /// A fake that answers every call with `answer(&args)`.
    pub fn returning(
        answer: impl Fn(&T::Args) -> Result<T::Output, ToolError> + Send + Sync + 'static,
    ) -> Fake<T> {
        Fake {
            answer: Arc::new(answer),
            calls: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl<T: Tool> Fake<T> {
    /// How many calls reached the fake.
    pub fn count(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The arguments of every call so far, oldest first, taken out of the
    /// record.
    pub fn take_calls(&self) -> Vec<T::Args> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The arguments of every call so far, oldest first.
    pub fn calls(&self) -> Vec<T::Args>
    where
        T::Args: Clone,
    {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Binds [`Fake`]s in an [`Activities`] set: `Activities::new().fake(&fake)`.
pub trait FakeActivities {
    /// Binds `fake` to its tool, replacing any activity bound to that name.
    fn fake<T: Tool>(self, fake: &Fake<T>) -> Activities
    where
        T::Output: ToolOutput;
}

impl FakeActivities for Activities {
    fn fake<T: Tool>(self, fake: &Fake<T>) -> Activities
    where
        T::Output: ToolOutput,
    {
        let fake = fake.clone();
        self.bind::<T, _, _>(move |args, _ctx| {
            let answer = (fake.answer)(&args);
            fake.calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(args);
            std::future::ready(answer)
        })
    }
}
