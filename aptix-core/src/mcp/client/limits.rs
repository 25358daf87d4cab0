//! What one mounted server may cost this process: every bound of
//! [`McpLimits`] in one place, with its default.
//!
//! A remote MCP server is an outside peer like a model's stream: it may be
//! broken, or written to hurt. Each bound here answers one thing such a
//! server can do (never answer, page forever, send a schema whose
//! references fan out, flood notifications, answer with megabytes, ask the
//! person or the model without end), with an error that names the limit
//! and the knob, never a silent cut.

use std::time::Duration;

/// The bounds on what one mounted MCP server may make this process spend
/// ([`McpToolset::limits`](super::McpToolset::limits)). Every default
/// leaves room for the largest well-behaved servers; raise one for a server
/// you trust that needs more.
///
/// ```
/// use std::time::Duration;
/// use aptix_core::mcp::McpLimits;
///
/// let limits = McpLimits::default()
///     .max_tools(5_000)
///     .connect_timeout(Duration::from_secs(120));
/// assert_ne!(limits, McpLimits::default());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLimits {
    pub(super) connect_timeout: Duration,
    pub(super) list_timeout: Duration,
    pub(super) max_pages: usize,
    pub(super) max_tools: usize,
    pub(super) max_listing_bytes: usize,
    pub(super) max_definition_bytes: usize,
    pub(super) max_schema_nodes: usize,
    pub(super) max_schema_depth: usize,
    pub(super) max_result_bytes: usize,
    pub(super) relist_interval: Duration,
    pub(super) sampling_requests_per_call: u32,
    pub(super) sampling_tokens_per_call: u64,
    pub(super) sampling_requests_per_minute: u32,
    pub(super) max_sampling_prompt_bytes: usize,
    pub(super) elicitations_per_call: u32,
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits {
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            max_pages: 100,
            max_tools: 1_000,
            max_listing_bytes: 16 << 20,
            max_definition_bytes: 128 << 10,
            max_schema_nodes: 10_000,
            max_schema_depth: 64,
            max_result_bytes: 2 << 20,
            relist_interval: Duration::from_secs(1),
            sampling_requests_per_call: 8,
            sampling_tokens_per_call: 32_768,
            sampling_requests_per_minute: 60,
            max_sampling_prompt_bytes: 256 << 10,
            elicitations_per_call: 8,
        }
    }
}

impl McpLimits {
    /// How long starting the server and completing `initialize` may take
    /// (default 30 s): past it, [`McpClientError::Initialize`](super::McpClientError::Initialize),
    /// and the server process is stopped. Also bounds each restart of a
    /// server that died.
    pub fn connect_timeout(mut self, limit: Duration) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// How long listing every page of `tools/list` may take (default 30 s):
    /// past it, [`McpClientError::List`](super::McpClientError::List).
    pub fn list_timeout(mut self, limit: Duration) -> Self {
        self.list_timeout = limit;
        self
    }

    /// The most pages one listing follows (default 100); a listing with
    /// more is refused, as is one whose cursor repeats.
    pub fn max_pages(mut self, pages: usize) -> Self {
        self.max_pages = pages;
        self
    }

    /// The most tools a server may list (default 1,000).
    pub fn max_tools(mut self, tools: usize) -> Self {
        self.max_tools = tools;
        self
    }

    /// The most bytes all the tools of one listing may hold, as JSON
    /// (default 16 MiB).
    pub fn max_listing_bytes(mut self, bytes: usize) -> Self {
        self.max_listing_bytes = bytes;
        self
    }

    /// The most bytes one tool's definition may hold, as JSON: name,
    /// description, schemas, annotations (default 128 KiB). A larger tool
    /// is left out and reported ([`RefusedTool::Invalid`](super::RefusedTool::Invalid)):
    /// its description would be sent with every model request.
    pub fn max_definition_bytes(mut self, bytes: usize) -> Self {
        self.max_definition_bytes = bytes;
        self
    }

    /// The most JSON values one tool's schemas may hold (default 10,000);
    /// a tool with more is left out and reported. Checked before anything
    /// walks the schema.
    pub fn max_schema_nodes(mut self, nodes: usize) -> Self {
        self.max_schema_nodes = nodes;
        self
    }

    /// How deep one tool's schemas may nest, in JSON values (default 64);
    /// a deeper tool is left out and reported.
    pub fn max_schema_depth(mut self, depth: usize) -> Self {
        self.max_schema_depth = depth;
        self
    }

    /// The most bytes one result may hold: its text, structured content
    /// and attachments (default 2 MiB). A larger result is a `failed`
    /// envelope naming its size, and never reaches the transcript.
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// The least time between two listings that
    /// `notifications/tools/list_changed` asks for (default 1 s):
    /// notifications that arrive meanwhile make one listing, not one each.
    pub fn relist_interval(mut self, interval: Duration) -> Self {
        self.relist_interval = interval;
        self
    }

    /// How many `sampling/createMessage` requests the model answers
    /// during one call of the server (default 8); the rest are refused.
    pub fn sampling_requests_per_call(mut self, requests: u32) -> Self {
        self.sampling_requests_per_call = requests;
        self
    }

    /// How many tokens, in all, the sampling requests of one call may
    /// ask the model for (default 32,768; each request is also held to
    /// [`McpToolset::sampling_limit`](super::McpToolset::sampling_limit)).
    pub fn sampling_tokens_per_call(mut self, tokens: u64) -> Self {
        self.sampling_tokens_per_call = tokens;
        self
    }

    /// How many sampling requests of this server the model answers in any
    /// minute, over all its calls (default 60).
    pub fn sampling_requests_per_minute(mut self, requests: u32) -> Self {
        self.sampling_requests_per_minute = requests;
        self
    }

    /// The most bytes one sampling request's prompt may hold (its system
    /// prompt and messages, as JSON; default 256 KiB): the budgets above
    /// count what the model writes, this what it reads. A larger request
    /// is refused.
    pub fn max_sampling_prompt_bytes(mut self, bytes: usize) -> Self {
        self.max_sampling_prompt_bytes = bytes;
        self
    }

    /// How many questions (`elicitation/create`) one call of the server
    /// may ask the person (default 8). The questions of a server are asked
    /// one at a time; past the budget, or while a question already waits
    /// with others queued behind it, a question is answered `cancel`.
    pub fn elicitations_per_call(mut self, questions: u32) -> Self {
        self.elicitations_per_call = questions;
        self
    }
}

/// `1.5 MiB`, `12 KiB`, `300 bytes`: a size for messages.
pub(super) fn size(bytes: usize) -> String {
    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;
    if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= KIB {
        format!("{:.1} KiB", bytes as f64 / KIB as f64)
    } else {
        format!("{bytes} bytes")
    }
}

/// How many bytes `value` takes as compact JSON, without writing it out.
pub(super) fn json_bytes<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    /// Counts what is written and keeps nothing.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter fails only for a value that cannot be JSON,
    // which counts as big as it got.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Whether `schema` is within `max_nodes` JSON values and `max_depth`
/// levels; the walk stops at the first value past either, so it costs at
/// most `max_nodes` steps whatever the schema.
pub(super) fn schema_within(
    schema: &serde_json::Value,
    max_nodes: usize,
    max_depth: usize,
) -> Result<(), String> {
    let mut nodes = 0usize;
    // An explicit stack: a deep schema must not deepen ours.
    let mut stack = vec![(schema, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        nodes += 1;
        if nodes > max_nodes {
            return Err(format!(
                "its schemas hold more than {max_nodes} JSON values (the limit, McpLimits::max_schema_nodes)"
            ));
        }
        if depth > max_depth {
            return Err(format!(
                "its schemas nest deeper than {max_depth} levels (the limit, McpLimits::max_schema_depth)"
            ));
        }
        match value {
            serde_json::Value::Object(members) => {
                stack.extend(members.values().map(|member| (member, depth + 1)));
            }
            serde_json::Value::Array(items) => {
                stack.extend(items.iter().map(|item| (item, depth + 1)));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_walk_stops_at_its_bounds() {
        let schema = json!({ "type": "object", "properties": { "a": { "type": "string" } } });
        assert!(schema_within(&schema, 10, 10).is_ok());
        assert!(schema_within(&schema, 4, 10).is_err_and(|e| e.contains("max_schema_nodes")));
        assert!(schema_within(&schema, 10, 3).is_err_and(|e| e.contains("max_schema_depth")));
        let mut deep = json!("leaf");
        for _ in 0..1_000 {
            deep = json!([deep]);
        }
        assert!(schema_within(&deep, 100_000, 64).is_err());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(300), "300 bytes");
        assert_eq!(size(12 << 10), "12.0 KiB");
        assert_eq!(size(3 << 19), "1.5 MiB");
        assert_eq!(json_bytes(&json!({ "a": [1, 2] })), r#"{"a":[1,2]}"#.len());
    }
}
