//! A JSON object read member by member, repeated names kept, each value's
//! text as the model wrote it.
//!
//! Taking a meta field (`_reasoningForCall`, `_tool`, `_activity`) out of a
//! call must not change the rest: parsing into a `serde_json::Value` and
//! writing it back keeps only the last of a repeated member, so
//! `{"path":"/tmp/a","path":"/etc/cron.d/x"}` would reach the validator as
//! one unambiguous `path`. Here the members the meta fields leave behind
//! are written back as they came, repeats included, and the validator
//! refuses a repeat as it does in any call.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The members of one JSON object, in order, repeats kept.
#[derive(Debug)]
pub(crate) struct Members(pub(crate) Vec<(String, Box<RawValue>)>);

impl Members {
    /// The members of `text`, or `None` when it is not one JSON object.
    pub(crate) fn parse(text: &str) -> Option<Members> {
        serde_json::from_str(text).ok()
    }

    /// How many members are called `name`.
    pub(crate) fn count(&self, name: &str) -> usize {
        self.0.iter().filter(|(key, _)| key == name).count()
    }

    /// Takes out the one member called `name`: `None`, and nothing taken,
    /// when there is none or more than one (which one would be meant?).
    pub(crate) fn take_one(&mut self, name: &str) -> Option<Box<RawValue>> {
        if self.count(name) != 1 {
            return None;
        }
        let at = self.0.iter().position(|(key, _)| key == name)?;
        Some(self.0.remove(at).1)
    }

    /// The object's text: each remaining member as it came (its value's
    /// text unchanged), repeats included.
    pub(crate) fn to_text(&self) -> String {
        let mut text = String::with_capacity(
            2 + self
                .0
                .iter()
                .map(|(key, value)| key.len() + value.get().len() + 4)
                .sum::<usize>(),
        );
        text.push('{');
        for (index, (key, value)) in self.0.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            // A string's JSON form cannot fail to be written.
            text.push_str(&serde_json::to_string(key).unwrap_or_else(|_| "\"\"".to_owned()));
            text.push(':');
            text.push_str(value.get());
        }
        text.push('}');
        text
    }
}

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_and_values_come_back_as_written() {
        let Some(mut members) =
            Members::parse(r#"{"path": "/tmp/a", "_why": "x", "path":"/etc/cron.d/x", "n": 1.50}"#)
        else {
            panic!("an object");
        };
        assert_eq!(members.count("path"), 2);
        assert!(members.take_one("path").is_none(), "a repeat is not taken");
        assert_eq!(
            members.take_one("_why").map(|v| v.get().to_owned()),
            Some("\"x\"".into())
        );
        assert_eq!(
            members.to_text(),
            r#"{"path":"/tmp/a","path":"/etc/cron.d/x","n":1.50}"#
        );
        assert!(Members::parse("[1]").is_none());
        assert!(Members::parse(r#"{"a":1"#).is_none());
        assert_eq!(
            Members::parse(r#"{"a\"b":{"c":1,"c":2}}"#).map(|m| m.to_text()),
            Some(r#"{"a\"b":{"c":1,"c":2}}"#.to_owned())
        );
    }
}
