//! One model call as a stream of model events, for an adapter whose
//! decoder turns each server-sent event into any number of them: the
//! response opened, its events read through the decoder, the stream ended
//! after `Finish` (what a server sends after it is not part of the turn) or
//! at the first error, and a body that ends before `Finish` reported as
//! [`ModelError::Incomplete`]. The Anthropic and Gemini adapters share it.

use std::collections::VecDeque;
use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use tracing::Instrument;

use super::http::SseEvent;
use super::{ModelError, ModelEvent};

/// A response's events, as [`super::http::post_sse`] reads them.
pub(crate) type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ModelError>> + Send>>;

/// A provider's reading of its events.
pub(crate) trait EventDecoder: Send {
    /// Reads `event`, appending the model events it makes to `out`.
    fn decode(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<(), ModelError>;
}

type Item = Result<ModelEvent, ModelError>;

/// Where one call stands. The decoder is boxed: what it remembers would
/// make every phase as large.
enum Phase<C, D> {
    Connect(C, Box<D>),
    Reading {
        events: SseStream,
        decoder: Box<D>,
        pending: VecDeque<ModelEvent>,
    },
    Done,
}

/// The model events of the call `connect` opens, read by `decoder`, each
/// step inside `span`.
pub(crate) fn model_events<'a, C, D>(
    connect: C,
    decoder: D,
    span: tracing::Span,
) -> impl Stream<Item = Item> + Send + 'a
where
    C: Future<Output = Result<SseStream, ModelError>> + Send + 'a,
    D: EventDecoder + 'a,
{
    let start = Phase::Connect(connect, Box::new(decoder));
    futures_util::stream::unfold(start, move |phase| next(phase).instrument(span.clone()))
}

async fn next<C, D>(mut phase: Phase<C, D>) -> Option<(Item, Phase<C, D>)>
where
    C: Future<Output = Result<SseStream, ModelError>>,
    D: EventDecoder,
{
    loop {
        phase = match phase {
            Phase::Done => return None,
            Phase::Connect(connect, decoder) => match connect.await {
                Ok(events) => Phase::Reading {
                    events,
                    decoder,
                    pending: VecDeque::new(),
                },
                Err(error) => return fail(error),
            },
            Phase::Reading {
                mut events,
                mut decoder,
                mut pending,
            } => {
                if let Some(event) = pending.pop_front() {
                    let rest = if matches!(event, ModelEvent::Finish { .. }) {
                        tracing::debug!("model call finished");
                        Phase::Done
                    } else {
                        Phase::Reading {
                            events,
                            decoder,
                            pending,
                        }
                    };
                    return Some((Ok(event), rest));
                }
                match events.next().await {
                    None => return fail(ModelError::Incomplete),
                    Some(Err(error)) => return fail(error),
                    Some(Ok(event)) => {
                        if let Err(error) = decoder.decode(&event, &mut pending) {
                            return fail(error);
                        }
                    }
                }
                Phase::Reading {
                    events,
                    decoder,
                    pending,
                }
            }
        };
    }
}

fn fail<C, D>(error: ModelError) -> Option<(Item, Phase<C, D>)> {
    tracing::debug!(%error, "model call failed");
    Some((Err(error), Phase::Done))
}
