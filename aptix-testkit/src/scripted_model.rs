//! A `ChatModel` that replays a script: deterministic agent tests without
//! a network, and the quickstart's offline model.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aptix_core::Dialect;
use aptix_core::model::{
    ChatModel, ChatRequest, FinishReason, ModelError, ModelEvent, ModelStream, ToolCallDelta, Usage,
};
use futures_util::StreamExt;

/// One scripted model turn: the events it streams.
#[derive(Debug, Clone, Default)]
pub struct ScriptedTurn {
    events: Vec<Result<ModelEvent, ModelError>>,
    calls: usize,
    finished: bool,
    incomplete: bool,
    delay: Duration,
    usage: Option<Usage>,
    reply: Option<Reply>,
}

/// A turn written when the model reaches it, from the request it gets.
#[derive(Clone)]
struct Reply(Arc<dyn Fn(&ChatRequest) -> ScriptedTurn + Send + Sync>);

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply(..)")
    }
}

impl ScriptedTurn {
    /// An empty turn.
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn written from the request that reaches it: the script can
    /// answer with what the tools returned (a scripted assistant that says
    /// the time its tool fetched), or check what the agent sent.
    ///
    /// ```
    /// use aptix_core::transcript::Message;
    /// use aptix_testkit::ScriptedTurn;
    ///
    /// let turn = ScriptedTurn::replying(|request| {
    ///     let results = request
    ///         .messages
    ///         .iter()
    ///         .filter(|message| matches!(message, Message::Tool { .. }))
    ///         .count();
    ///     ScriptedTurn::new().text(&format!("I read {results} tool results."))
    /// });
    /// # let _ = turn;
    /// ```
    pub fn replying(reply: impl Fn(&ChatRequest) -> ScriptedTurn + Send + Sync + 'static) -> Self {
        ScriptedTurn {
            reply: Some(Reply(Arc::new(reply))),
            ..Self::default()
        }
    }

    /// Streams `text`, word by word.
    pub fn text(mut self, text: &str) -> Self {
        for piece in text.split_inclusive(' ') {
            self.events
                .push(Ok(ModelEvent::TextDelta(piece.to_owned())));
        }
        self
    }

    /// A tool call whose arguments stream in pieces of a few characters,
    /// as real models send them.
    pub fn tool_call(self, id: &str, name: &str, arguments: &str) -> Self {
        let chars: Vec<char> = arguments.chars().collect();
        let pieces: Vec<String> = chars
            .chunks(5)
            .map(|piece| piece.iter().collect())
            .collect();
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        self.tool_call_chunks(id, name, &pieces)
    }

    /// A tool call whose arguments stream in exactly `pieces`.
    pub fn tool_call_chunks(mut self, id: &str, name: &str, pieces: &[&str]) -> Self {
        let index = self.calls;
        self.calls += 1;
        self.events
            .push(Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                index,
                id: Some(id.to_owned()),
                name: Some(name.to_owned()),
                arguments: String::new(),
            })));
        for piece in pieces {
            self.events
                .push(Ok(ModelEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments: (*piece).to_owned(),
                })));
        }
        self
    }

    /// One raw tool-call delta, exactly as given: for the shapes providers
    /// really send (a name in pieces, an id that comes late, ids reused).
    /// Counts as a call of the turn when it names an index not seen yet.
    pub fn tool_call_delta(mut self, delta: ToolCallDelta) -> Self {
        if delta.index >= self.calls {
            self.calls = delta.index + 1;
        }
        self.events.push(Ok(ModelEvent::ToolCallDelta(delta)));
        self
    }

    /// One model event, exactly as given: reasoning
    /// ([`ModelEvent::ThinkingDelta`]), a tool the provider ran
    /// ([`ModelEvent::Hosted`], [`ModelEvent::ServerBlock`]), or any shape an
    /// adapter may send. A tool-call delta belongs in
    /// [`ScriptedTurn::tool_call_delta`], which counts the turn's calls.
    pub fn event(mut self, event: ModelEvent) -> Self {
        self.events.push(Ok(event));
        self
    }

    /// Ends the turn with `reason` (by default: `ToolCalls` when the turn
    /// has calls, `Stop` otherwise).
    pub fn finish(mut self, reason: FinishReason) -> Self {
        self.events.push(Ok(ModelEvent::Finish {
            reason,
            usage: self.usage,
        }));
        self.finished = true;
        self
    }

    /// Reports `usage` with the finish, cache counts and all.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Reports this usage with the finish.
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage::new(input_tokens, output_tokens));
        self
    }

    /// Fails with `error` at this point of the stream.
    pub fn error(mut self, error: ModelError) -> Self {
        self.events.push(Err(error));
        self.finished = true;
        self
    }

    /// Ends the stream without a finish, as a dropped connection would.
    pub fn incomplete(mut self) -> Self {
        self.incomplete = true;
        self
    }

    /// Waits this long before each event.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    fn into_events(mut self) -> (Vec<Result<ModelEvent, ModelError>>, Duration) {
        if !self.finished && !self.incomplete {
            let reason = if self.calls > 0 {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            };
            self.events.push(Ok(ModelEvent::Finish {
                reason,
                usage: self.usage,
            }));
        }
        (self.events, self.delay)
    }
}

/// Replays [`ScriptedTurn`]s, one per model call, and records the requests.
pub struct ScriptedModel {
    dialect: Dialect,
    repeat: bool,
    turns: Mutex<VecDeque<ScriptedTurn>>,
    requests: Mutex<Vec<ChatRequest>>,
    hosted: Vec<String>,
}

impl ScriptedModel {
    /// A model that answers with `turns` in order.
    pub fn new(turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        ScriptedModel {
            dialect: Dialect::OpenAiStrict,
            repeat: false,
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            hosted: Vec::new(),
        }
    }

    /// Claims to host these provider-executed tools, so that an agent over
    /// a catalog holding them can be built (see [`ChatModel::hosts_tool`]).
    pub fn hosting<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.hosted.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Starts the script over when it runs out, forever (for benchmarks and
    /// soak tests). Requests are not recorded in this mode.
    pub fn repeating(mut self) -> Self {
        self.repeat = true;
        self
    }

    /// Asks for tool definitions in `dialect` (default OpenAI strict).
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .map(|requests| requests.clone())
            .unwrap_or_default()
    }

    /// How many scripted turns are left.
    pub fn remaining(&self) -> usize {
        self.turns.lock().map(|turns| turns.len()).unwrap_or(0)
    }
}

impl ChatModel for ScriptedModel {
    fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn hosts_tool(&self, name: &str) -> bool {
        self.hosted.iter().any(|hosted| hosted == name)
    }

    fn stream<'a>(&'a self, request: &'a ChatRequest) -> ModelStream<'a> {
        if !self.repeat
            && let Ok(mut requests) = self.requests.lock()
        {
            requests.push(request.clone());
        }
        let turn = self.turns.lock().ok().and_then(|mut turns| {
            let turn = turns.pop_front()?;
            if self.repeat {
                turns.push_back(turn.clone());
            }
            Some(turn)
        });
        let Some(turn) = turn else {
            let error = ModelError::Protocol("the scripted model has no more turns".into());
            return Box::pin(futures_util::stream::iter([Err(error)]));
        };
        let turn = match &turn.reply {
            Some(Reply(reply)) => reply(request),
            None => turn,
        };
        let (events, delay) = turn.into_events();
        Box::pin(
            futures_util::stream::iter(events).then(move |event| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                event
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn text_of(model: &ScriptedModel) -> Result<String, ModelError> {
        let request = ChatRequest {
            messages: Vec::new(),
            tools: std::sync::Arc::from(Vec::new()),
            tool_choice: Default::default(),
            parallel_tool_calls: true,
            max_tokens: None,
            temperature: None,
            response_format: None,
            deferred_tools: None,
        };
        let mut text = String::new();
        let mut events = model.stream(&request);
        while let Some(event) = events.next().await {
            if let ModelEvent::TextDelta(delta) = event? {
                text.push_str(&delta);
            }
        }
        Ok(text)
    }

    #[tokio::test]
    async fn a_repeating_script_starts_over_and_a_plain_one_runs_out() {
        let turns = [ScriptedTurn::new().text("a"), ScriptedTurn::new().text("b")];
        let repeating = ScriptedModel::new(turns.clone()).repeating();
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(text_of(&repeating).await.unwrap_or_else(|e| panic!("{e}")));
        }
        assert_eq!(seen, ["a", "b", "a", "b", "a"]);
        assert!(
            repeating.requests().is_empty(),
            "a repeating model records nothing"
        );

        let plain = ScriptedModel::new(turns);
        assert_eq!(text_of(&plain).await.ok().as_deref(), Some("a"));
        assert_eq!(text_of(&plain).await.ok().as_deref(), Some("b"));
        assert!(text_of(&plain).await.is_err());
        assert_eq!(plain.requests().len(), 3);
    }

    #[tokio::test]
    async fn a_replying_turn_is_written_from_the_request_that_reaches_it() {
        let model = ScriptedModel::new([
            ScriptedTurn::new().text("first"),
            ScriptedTurn::replying(|request| {
                ScriptedTurn::new().text(&format!("{} messages", request.messages.len()))
            }),
        ]);
        assert_eq!(text_of(&model).await.ok().as_deref(), Some("first"));
        assert_eq!(text_of(&model).await.ok().as_deref(), Some("0 messages"));
        assert_eq!(model.requests().len(), 2);
    }
}
