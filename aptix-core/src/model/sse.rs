//! Server-Sent Events read from a response body, in time linear in its
//! length and memory bounded by one event.
//!
//! Written here rather than taken from `eventsource-stream`: that crate
//! parses an unfinished line again from its start each time more of it
//! arrives, so one event that never ends costs time quadratic in its length,
//! and it holds the event without a limit. A model endpoint is a peer from
//! outside and may send exactly that. The decoder follows the WHATWG
//! event-stream rules the adapters need: lines end at LF, CRLF or CR; a
//! blank line dispatches; `event` and `data` fields (data lines joined with
//! LF); comments and the other fields ignored; a leading BOM dropped; an
//! event left unfinished when the body ends is discarded.

use std::collections::VecDeque;

use super::http::SseEvent;

/// Why a body is not an event stream the decoder will read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// One event went past the limit before its blank line.
    #[error(
        "one server-sent event went past {0} bytes (HttpPolicy::max_event_bytes); the stream was ended"
    )]
    TooLarge(usize),
    /// A line is not UTF-8.
    #[error("the event stream is not UTF-8")]
    NotUtf8,
}

/// Turns the chunks of a body into events, one chunk at a time.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    /// The line read so far, not yet ended.
    line: Vec<u8>,
    /// The event's type, from its `event:` field.
    event: String,
    /// The event's data lines, each followed by LF.
    data: String,
    /// Whether the event has a `data` field (possibly empty).
    has_data: bool,
    /// The bytes of the event so far, its unfinished line included.
    event_bytes: usize,
    max_event_bytes: usize,
    /// Whether the last byte seen was a CR, whose LF (if it comes in the
    /// next chunk) ends no second line.
    after_cr: bool,
    /// Whether the first line (which may start with a BOM) was seen.
    started: bool,
}

impl SseDecoder {
    /// A decoder that refuses any event longer than `max_event_bytes`.
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            event: String::new(),
            data: String::new(),
            has_data: false,
            event_bytes: 0,
            max_event_bytes,
            after_cr: false,
            started: false,
        }
    }

    /// Reads `chunk`, appending every event it completes to `out`.
    pub(crate) fn feed(
        &mut self,
        mut chunk: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), SseError> {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.take(&chunk[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_ended(&line, out)?;
            self.line = line;
            self.line.clear();
            let skip = if chunk[end] == b'\r' {
                match chunk.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    None => {
                        self.after_cr = true;
                        1
                    }
                }
            } else {
                1
            };
            chunk = &chunk[end + skip..];
        }
        self.take(chunk)
    }

    /// Adds `bytes` to the unfinished line, within the event's limit.
    fn take(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        self.event_bytes = self.event_bytes.saturating_add(bytes.len());
        if self.event_bytes > self.max_event_bytes {
            return Err(SseError::TooLarge(self.max_event_bytes));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_ended(&mut self, line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        let mut line = line;
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            if self.has_data {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                out.push_back(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            self.event_bytes = 0;
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]], limit: usize) -> Result<Vec<(String, String)>, SseError> {
        let mut decoder = SseDecoder::new(limit);
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out)?;
        }
        Ok(out
            .into_iter()
            .map(|event| (event.event, event.data))
            .collect())
    }

    fn event(kind: &str, data: &str) -> (String, String) {
        (kind.to_owned(), data.to_owned())
    }

    #[test]
    fn events_are_read_across_every_line_ending_and_seam() -> Result<(), SseError> {
        let body = "\u{feff}: a comment\r\nevent: message_start\r\ndata: {\"a\":\r\ndata:1}\r\n\r\ndata: [DONE]\r\rdata:x\n\nid: 3\nretry: 10\ndata\n\nevent: lonely\n\n";
        let whole = decode(&[body.as_bytes()], 1 << 20)?;
        let expected = vec![
            event("message_start", "{\"a\":\n1}"),
            event("", "[DONE]"),
            event("", "x"),
            event("", ""),
        ];
        assert_eq!(whole, expected, "an event without data is not dispatched");
        // Cut at every byte: a CRLF split in two, a UTF-8 character split.
        let bytes = body.as_bytes();
        let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&pieces, 1 << 20)?, expected);
        let accented = "data: Zürich 😀\n\n".as_bytes();
        let pieces: Vec<&[u8]> = accented.chunks(1).collect();
        assert_eq!(decode(&pieces, 1 << 20)?, vec![event("", "Zürich 😀")]);
        Ok(())
    }

    #[test]
    fn an_unfinished_event_at_the_end_is_dropped() -> Result<(), SseError> {
        assert_eq!(
            decode(&[b"data: whole\n\ndata: half"], 1 << 20)?,
            vec![event("", "whole")]
        );
        Ok(())
    }

    #[test]
    fn an_event_past_its_limit_is_refused_whether_in_one_line_or_many() {
        assert_eq!(
            decode(&[b"data: ", &[b'x'; 100]], 64),
            Err(SseError::TooLarge(64))
        );
        let many = "data: 0123456789\n".repeat(10);
        assert_eq!(decode(&[many.as_bytes()], 64), Err(SseError::TooLarge(64)));
        // Events under the limit, however many, are read.
        let events = "data: 0123456789\n\n".repeat(100);
        assert_eq!(decode(&[events.as_bytes()], 64).map(|e| e.len()), Ok(100));
    }

    #[test]
    fn a_line_that_is_not_utf8_is_refused() {
        assert_eq!(decode(&[b"data: \xff\n\n"], 64), Err(SseError::NotUtf8));
    }
}
