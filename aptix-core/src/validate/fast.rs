//! Streaming yes/no validation of a tool's raw JSON arguments against its JSON Schema.
//!
//! # Why this is hand-written instead of calling `jsonschema`
//!
//! `jsonschema` is the reference validator of Aptix and stays so: it produces every error message
//! a model is shown, and it is the fallback for any schema this module declines to compile. But it
//! can only validate a materialized [`serde_json::Value`], and building that tree (one allocation
//! per string, array and object, plus a `BTreeMap` per object) costs about as much as the typed
//! `serde::Deserialize` parse that follows it (measured: 2-3x of it), so on the dispatch hot path
//! validation alone would blow the budget. [`FastValidator`] instead walks the schema *while*
//! `serde_json` tokenizes the raw text (a [`DeserializeSeed`]/[`Visitor`] pair that borrows
//! strings where it can and keeps no tree), so a valid call costs one allocation-free pass, about
//! the price of the typed parse and a third to a half of `jsonschema`'s parse-and-validate.
//!
//! It answers only valid/invalid. On `false` the caller re-runs `jsonschema` on a `Value` to get the
//! full list of errors, so the two must agree exactly; they do on every schema
//! [`FastValidator::compile`] accepts, which the property tests at the bottom of this file check
//! against `jsonschema` on random schemas and random (valid, mutated, malformed, duplicate-keyed,
//! escaped, huge-number) documents.
//!
//! # Exactness, in short
//!
//! * Numbers arrive through the very `serde_json` calls a `Value` parse makes (`u64`, negative
//!   `i64`, or `f64`), and are compared exactly across those representations, as `jsonschema` does
//!   (so `1 == 1.0`, `-0.0` is an integer, `1e300` is an integer).
//! * Any value, even one the schema ignores, is parsed with `deserialize_any` (never
//!   `IgnoredAny`, which skips surrogate and number-range checks a `Value` parse makes).
//! * Duplicate member names make a document invalid, as on the exact path (a `Value` would keep
//!   the last one, while the typed parse that follows may read both). Otherwise a document is
//!   always read to its end, never abandoned at the first invalid member.
//! * Keywords that need a whole subtree (`uniqueItems`, `enum`/`const` with arrays or objects,
//!   `anyOf`/`oneOf`/`allOf`/`not` with more than one branch that could accept that array or
//!   object) buffer that subtree only, with `serde_json`'s own `Value` visitor, and walk it with
//!   the same compiled schema (memoized, so nested applicators stay polynomial). The nullable
//!   form `anyOf: [S, {"type": "null"}]` and applicators whose other branches reject the
//!   container's type stream without buffering; scalars never buffer.
//! * With `serde_json/raw_value` (on in Aptix's workspace) a `Value` parse reads an object whose
//!   first member is named `$serde_json::private::RawValue` as the JSON inside that member's
//!   string; the streaming walk mirrors that.
//! * `pattern` is accepted only in a subset of ECMA-262 whose meaning is unambiguous, translated
//!   the way `jsonschema` translates it (`\d` is `[0-9]`, `.` excludes line terminators, ...).
//!
//! Anything else makes [`FastValidator::compile`] return `None`; see its documentation.

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use regex::Regex;

use super::StrictValue;
use super::pattern::translate_pattern;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Index of a node in the arena.
type Id = u32;
/// The schema `true`.
const ANY: Id = 0;
/// The schema `false`.
const NEVER: Id = 1;
/// The document's root schema (`"$ref": "#"`).
const ROOT: Id = 2;

/// Deepest schema document (in JSON nesting) `compile` takes.
const MAX_SCHEMA_DEPTH: usize = 64;
/// Longest chain of applicators (`$ref`, `anyOf`, ...) that apply to the same instance.
const MAX_CHAIN: u32 = 32;
/// Why a document with a repeated member name is invalid here: the exact path refuses it.
const DUPLICATE: &str = "duplicate member name";
/// Longest property name (in bytes) `compile` takes.
const MAX_NAME_LEN: usize = 1024;

const T_NULL: u8 = 1;
const T_BOOL: u8 = 1 << 1;
const T_INT: u8 = 1 << 2;
const T_NUM: u8 = 1 << 3;
const T_STR: u8 = 1 << 4;
const T_ARR: u8 = 1 << 5;
const T_OBJ: u8 = 1 << 6;
const T_ALL: u8 = 0x7f;

/// A schema compiled for streaming validation of raw JSON text.
#[derive(Debug)]
pub struct FastValidator {
    nodes: Vec<Node>,
    root: Id,
    /// Whether `serde_json` was built with `raw_value` (see [`RAW_TOKEN`]).
    raw_token: bool,
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    /// How an array instance is handled.
    arr: Route,
    /// How an object instance is handled.
    obj: Route,
}

#[derive(Debug)]
enum Kind {
    Any,
    Never,
    /// Only during compilation: an alias resolved before use.
    Ref(Id),
    Checks(Box<Checks>),
    AnyOf(Box<[Id]>),
    OneOf(Box<[Id]>),
    AllOf(Box<[Id]>),
    Not(Id),
}

/// What to do with a container instance at a node, decided at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Every instance of this kind is invalid (still parsed to the end).
    Reject,
    /// Every instance of this kind is valid (still parsed to the end).
    Accept,
    /// Stream it through the `Checks` node with this id.
    Stream(Id),
    /// Buffer it into a `Value` and walk it.
    Buffer,
}

/// The assertion keywords of one schema object; all of them must hold.
#[derive(Debug)]
struct Checks {
    types: u8,
    enums: Vec<EnumSet>,
    minimum: Option<Num>,
    maximum: Option<Num>,
    exclusive_minimum: Option<Num>,
    exclusive_maximum: Option<Num>,
    multiple_of: Option<u64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Regex>,
    prefix_items: Vec<Id>,
    items: Id,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    /// `properties` and `required` names, sorted by name.
    slots: Vec<Slot>,
    /// `slot_ranges[len]`: the range of `slots` whose names are `len` bytes long.
    slot_ranges: Vec<(u32, u32)>,
    /// Indices into `slots` of the required names.
    required: Vec<usize>,
    /// The same as a bit mask, when there are at most 64 slots.
    required_mask: u64,
    additional: Id,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
}

impl Default for Checks {
    fn default() -> Self {
        Checks {
            types: T_ALL,
            enums: Vec::new(),
            minimum: None,
            maximum: None,
            exclusive_minimum: None,
            exclusive_maximum: None,
            multiple_of: None,
            min_length: None,
            max_length: None,
            pattern: None,
            prefix_items: Vec::new(),
            items: ANY,
            min_items: None,
            max_items: None,
            unique_items: false,
            slots: Vec::new(),
            slot_ranges: Vec::new(),
            required: Vec::new(),
            required_mask: 0,
            additional: ANY,
            min_properties: None,
            max_properties: None,
        }
    }
}

#[derive(Debug)]
struct Slot {
    name: Box<str>,
    /// The subschema of this member: its `properties` entry, else `additionalProperties`.
    node: Id,
}

/// A JSON number as `serde_json` holds it: `U` for any non-negative integer up to `u64::MAX`,
/// `I` for a negative one down to `i64::MIN`, `F` for everything else.
#[derive(Debug, Clone, Copy)]
enum Num {
    U(u64),
    I(i64),
    F(f64),
}

/// A non-container JSON value.
#[derive(Debug, Clone, Copy)]
enum Scalar<'a> {
    Null,
    Bool(bool),
    Num(Num),
    Str(&'a str),
}

/// The values of one `enum` (or a `const`), split by kind.
#[derive(Debug, Default)]
struct EnumSet {
    null: bool,
    yes: bool,
    no: bool,
    nums: Vec<Num>,
    /// Sorted and deduplicated.
    strs: Vec<Box<str>>,
    arrays: Vec<Vec<Value>>,
    objects: Vec<Map<String, Value>>,
}

impl FastValidator {
    /// None when the schema uses anything this validator does not implement exactly; the caller then uses jsonschema on a Value.
    ///
    /// Implemented exactly: `type`, `enum`, `const`, `minimum`, `maximum`, `exclusiveMinimum`,
    /// `exclusiveMaximum`, `multipleOf` (whole divisors up to 2^53), `minLength`, `maxLength`,
    /// `pattern` (a subset of ECMA-262, see below), `items`, `prefixItems`, `minItems`,
    /// `maxItems`, `uniqueItems`, `properties`, `required`, `additionalProperties`,
    /// `minProperties`, `maxProperties`, `$ref` to `#` or `#/$defs/Name` (recursion included),
    /// `anyOf`, `oneOf`, `allOf`, `not`, root `$defs`, boolean schemas, and the annotations
    /// `title`, `description`, `$comment`, `default`, `examples`, `deprecated`, `readOnly`,
    /// `writeOnly` and `format` (an annotation in draft 2020-12, as `jsonschema` treats it).
    ///
    /// Returns `None` for: any other keyword (`$schema`, `$id`, `if`, `patternProperties`,
    /// `contains`, ...); `$defs` below the root; a `$ref` of any other form or to a missing
    /// definition; a fractional or huge `multipleOf`; a size limit that is not a plain
    /// non-negative integer; a `pattern` outside the subset (lookaround, backreferences, `\b`,
    /// `\x`, `\u`, Annex B oddities, ...); a `$ref`/applicator cycle that never descends into the
    /// instance, or a chain of more than 32 of them; a schema nested deeper than 64 levels; a
    /// property name over 1 KiB; or keyword values of the wrong type (which `jsonschema` rejects
    /// too). It also returns `None` if `serde_json` was built with `arbitrary_precision`.
    ///
    /// The `pattern` subset: literal characters, the escapes `\d \D \w \W \s \S \t \n \r \f \v`
    /// and escaped syntax characters, `.`, `^`, `$`, `|`, `(...)`, `(?:...)`, classes `[...]` /
    /// `[^...]` of characters, ranges and `\d \w \s \D \W \S`, and the quantifiers
    /// `* + ? {n} {n,} {n,m}`, greedy or lazy.
    pub fn compile(schema: &serde_json::Value) -> Option<FastValidator> {
        if !numbers_are_native() || !depth_within(schema, MAX_SCHEMA_DEPTH) {
            return None;
        }
        let mut compiler = Compiler {
            kinds: vec![Kind::Any, Kind::Never, Kind::Any],
            defs: HashMap::new(),
        };
        if let Value::Object(root) = schema
            && let Some(defs) = root.get("$defs")
        {
            let Value::Object(defs) = defs else {
                return None;
            };
            for name in defs.keys() {
                let id = compiler.push(Kind::Any)?;
                compiler.defs.insert(name.clone(), id);
            }
            for (name, def) in defs {
                let id = *compiler.defs.get(name)?;
                let kind = compiler.kind_of(def, false)?;
                *compiler.kinds.get_mut(id as usize)? = kind;
            }
        }
        let root = compiler.kind_of(schema, true)?;
        *compiler.kinds.get_mut(ROOT as usize)? = root;
        compiler.finish()
    }

    /// true iff `raw` is one JSON document valid against the schema (false for malformed JSON or trailing characters).
    pub fn is_valid(&self, raw: &str) -> bool {
        let mut deserializer = serde_json::Deserializer::from_str(raw);
        let verdict = Walk {
            v: self,
            id: self.root,
        }
        .deserialize(&mut deserializer);
        matches!(verdict, Ok(true)) && deserializer.end().is_ok()
    }

    fn node(&self, id: Id) -> &Node {
        static NEVER_NODE: Node = Node {
            kind: Kind::Never,
            arr: Route::Reject,
            obj: Route::Reject,
        };
        self.nodes.get(id as usize).unwrap_or(&NEVER_NODE)
    }

    // ----- scalars (shared by the streaming and the `Value` walk) -----

    /// [`Self::scalar`] with the common case, a plain schema object, inlined into the visitor.
    #[inline(always)]
    fn leaf(&self, id: Id, value: Scalar<'_>) -> bool {
        match &self.node(id).kind {
            Kind::Checks(checks) => checks.scalar(value),
            _ => self.scalar(id, value),
        }
    }

    fn scalar(&self, id: Id, value: Scalar<'_>) -> bool {
        match &self.node(id).kind {
            Kind::Any => true,
            Kind::Never => false,
            Kind::Ref(target) => self.scalar(*target, value),
            Kind::Checks(checks) => checks.scalar(value),
            Kind::AnyOf(branches) => branches.iter().any(|b| self.scalar(*b, value)),
            Kind::AllOf(branches) => branches.iter().all(|b| self.scalar(*b, value)),
            Kind::OneOf(branches) => exactly_one(branches, |b| self.scalar(b, value)),
            Kind::Not(inner) => !self.scalar(*inner, value),
        }
    }

    // ----- streaming containers -----

    // Kept out of line so that `deserialize_any`, which recurses for every value, stays small.
    #[inline(never)]
    fn seq<'de, A: SeqAccess<'de>>(&self, id: Id, mut seq: A) -> Result<bool, A::Error> {
        match self.node(id).arr {
            Route::Reject => drain_seq(self, seq).map(|()| false),
            Route::Accept => drain_seq(self, seq).map(|()| true),
            Route::Stream(target) => match &self.node(target).kind {
                Kind::Checks(checks) => self.stream_seq(checks, seq),
                _ => Ok(self.value(id, &Value::Array(collect_seq(&mut seq)?))),
            },
            Route::Buffer => Ok(self.value(id, &Value::Array(collect_seq(&mut seq)?))),
        }
    }

    fn stream_seq<'de, A: SeqAccess<'de>>(
        &self,
        checks: &Checks,
        mut seq: A,
    ) -> Result<bool, A::Error> {
        let mut valid = true;
        let mut count: usize = 0;
        loop {
            let child = if valid {
                checks
                    .prefix_items
                    .get(count)
                    .copied()
                    .unwrap_or(checks.items)
            } else {
                ANY
            };
            match seq.next_element_seed(Walk { v: self, id: child })? {
                Some(item_valid) => {
                    valid &= item_valid;
                    count = count.saturating_add(1);
                }
                None => break,
            }
        }
        Ok(valid && checks.item_count_ok(count))
    }

    #[inline(never)]
    fn map<'de, A: MapAccess<'de>>(&self, id: Id, map: A) -> Result<bool, A::Error> {
        let route = self.node(id).obj;
        match route {
            Route::Reject | Route::Accept => self.drain_map(id, map, route == Route::Accept),
            Route::Stream(target) => match &self.node(target).kind {
                Kind::Checks(checks) => self.stream_map(id, checks, map),
                _ => self.buffer_map(id, map),
            },
            Route::Buffer => self.buffer_map(id, map),
        }
    }

    /// The object as `serde_json::Value` would build it (this is serde_json's own visitor), walked.
    fn buffer_map<'de, A: MapAccess<'de>>(&self, id: Id, map: A) -> Result<bool, A::Error> {
        let duplicate = RefCell::new(None);
        let value = StrictValue {
            duplicate: &duplicate,
        }
        .visit_map(map)?;
        Ok(self.value(id, &value))
    }

    /// Parses an object whose every member is valid, yielding `verdict`.
    fn drain_map<'de, A: MapAccess<'de>>(
        &self,
        id: Id,
        mut map: A,
        verdict: bool,
    ) -> Result<bool, A::Error> {
        let mut keys = KeySeed {
            slots: &[],
            ranges: &[],
            keep: true,
            raw_token: self.raw_token,
        };
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key_seed(keys)? {
            match key {
                Key::Raw => return self.raw_member(id, map),
                Key::Other(Some(name)) => {
                    if !seen.insert(name) {
                        return Err(de::Error::custom(DUPLICATE));
                    }
                }
                // Not asked for: no slots here, and every name is kept.
                _ => return Err(de::Error::custom(DUPLICATE)),
            }
            keys.raw_token = false;
            map.next_value_seed(Walk { v: self, id: ANY })?;
        }
        Ok(verdict)
    }

    /// With `serde_json/raw_value`, a `Value` parse reads an object whose first member is named
    /// [`RAW_TOKEN`] as the JSON text in that member's string, and fails on any member after it.
    #[cold]
    fn raw_member<'de, A: MapAccess<'de>>(&self, id: Id, mut map: A) -> Result<bool, A::Error> {
        let text: String = map.next_value()?;
        let duplicate = RefCell::new(None);
        let mut inner = serde_json::Deserializer::from_str(&text);
        let value = StrictValue {
            duplicate: &duplicate,
        }
        .deserialize(&mut inner)
        .and_then(|value| inner.end().map(|()| value))
        .map_err(de::Error::custom)?;
        let keys = KeySeed {
            slots: &[],
            ranges: &[],
            keep: false,
            raw_token: false,
        };
        if map.next_key_seed(keys)?.is_some() {
            return Err(de::Error::custom("a member after a raw value"));
        }
        Ok(self.value(id, &value))
    }

    fn stream_map<'de, A: MapAccess<'de>>(
        &self,
        id: Id,
        checks: &Checks,
        mut map: A,
    ) -> Result<bool, A::Error> {
        let slots = checks.slots.len();
        // Per slot: seen at all, and whether its *last* value was invalid.
        let mut present = Bits::new(slots);
        let mut invalid = Bits::new(slots);
        let count_members = checks.min_properties.is_some() || checks.max_properties.is_some();
        let judged_extra = checks.additional != ANY && checks.additional != NEVER;
        // Other member names whose last value was invalid, and (when counting) all other names.
        let mut invalid_extra: Option<HashSet<Cow<'de, str>>> = None;
        let mut seen_extra: Option<HashSet<Cow<'de, str>>> = None;
        // A member `additionalProperties: false` forbids: the object is invalid whatever follows.
        let mut forbidden = false;
        // Every other name is kept, to refuse a duplicate.
        let mut keys = KeySeed {
            slots: &checks.slots,
            ranges: &checks.slot_ranges,
            keep: true,
            raw_token: self.raw_token,
        };
        let mut others: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(key) = map.next_key_seed(keys)? {
            keys.raw_token = false;
            match key {
                Key::Raw => return self.raw_member(id, map),
                Key::Slot(index) => {
                    if present.get(index) {
                        return Err(de::Error::custom(DUPLICATE));
                    }
                    let child = match checks.slots.get(index) {
                        Some(slot) if !forbidden => slot.node,
                        _ => ANY,
                    };
                    let valid = map.next_value_seed(Walk { v: self, id: child })?;
                    present.put(index, true);
                    invalid.put(index, !valid);
                }
                Key::Other(name) => {
                    if let Some(name) = &name
                        && !others.insert(name.clone())
                    {
                        return Err(de::Error::custom(DUPLICATE));
                    }
                    if checks.additional == NEVER {
                        forbidden = true;
                    }
                    let child = if forbidden { ANY } else { checks.additional };
                    let valid = map.next_value_seed(Walk { v: self, id: child })?;
                    if forbidden {
                        continue;
                    }
                    if let Some(name) = name {
                        if count_members {
                            seen_extra.get_or_insert_default().insert(name.clone());
                        }
                        if judged_extra {
                            if !valid {
                                invalid_extra.get_or_insert_default().insert(name);
                            } else if let Some(invalid_extra) = &mut invalid_extra {
                                invalid_extra.remove(&name);
                            }
                        }
                    }
                }
            }
        }
        if forbidden || !invalid.is_empty() || invalid_extra.is_some_and(|set| !set.is_empty()) {
            return Ok(false);
        }
        let required = if present.large.is_empty() {
            present.small & checks.required_mask == checks.required_mask
        } else {
            checks.required.iter().all(|&index| present.get(index))
        };
        if !required {
            return Ok(false);
        }
        if count_members {
            let extra = seen_extra.map_or(0, |set| set.len());
            let count = present.count().saturating_add(extra);
            return Ok(checks.member_count_ok(count));
        }
        Ok(true)
    }

    // ----- the same schema over a materialized `Value` (buffered subtrees) -----

    /// Validates a materialized value (a buffered subtree) against node `id`.
    fn value(&self, id: Id, value: &Value) -> bool {
        ValueWalk {
            v: self,
            memo: HashMap::new(),
        }
        .value(id, value)
    }
}

/// Walks a `Value`. Applicator results on containers are memoized per (node, value), so
/// `anyOf`/`oneOf`/`allOf`/`not` over recursive schemas stay polynomial in the document size.
struct ValueWalk<'v> {
    v: &'v FastValidator,
    memo: HashMap<(Id, usize), bool>,
}

impl ValueWalk<'_> {
    fn value(&mut self, id: Id, value: &Value) -> bool {
        let kind = &self.v.node(id).kind;
        let container = matches!(value, Value::Array(_) | Value::Object(_));
        if !container {
            return match value {
                Value::Null => self.v.scalar(id, Scalar::Null),
                Value::Bool(b) => self.v.scalar(id, Scalar::Bool(*b)),
                Value::Number(n) => Num::of(n).is_some_and(|n| self.v.scalar(id, Scalar::Num(n))),
                Value::String(s) => self.v.scalar(id, Scalar::Str(s)),
                Value::Array(_) | Value::Object(_) => false,
            };
        }
        let key = (id, std::ptr::from_ref(value) as usize);
        let memoized = matches!(
            kind,
            Kind::AnyOf(_) | Kind::OneOf(_) | Kind::AllOf(_) | Kind::Not(_)
        );
        if memoized && let Some(known) = self.memo.get(&key) {
            return *known;
        }
        let verdict = match kind {
            Kind::Any => true,
            Kind::Never => false,
            Kind::Ref(target) => self.value(*target, value),
            Kind::AnyOf(branches) => branches.iter().any(|b| self.value(*b, value)),
            Kind::AllOf(branches) => branches.iter().all(|b| self.value(*b, value)),
            Kind::OneOf(branches) => exactly_one(branches, |b| self.value(b, value)),
            Kind::Not(inner) => !self.value(*inner, value),
            Kind::Checks(checks) => match value {
                Value::Array(items) => self.array(checks, items),
                Value::Object(members) => self.object(checks, members),
                _ => false,
            },
        };
        if memoized {
            self.memo.insert(key, verdict);
        }
        verdict
    }

    fn array(&mut self, checks: &Checks, items: &[Value]) -> bool {
        checks.types & T_ARR != 0
            && checks.enums.iter().all(|e| e.has_array(items))
            && checks.item_count_ok(items.len())
            && items.iter().enumerate().all(|(index, item)| {
                let child = checks
                    .prefix_items
                    .get(index)
                    .copied()
                    .unwrap_or(checks.items);
                self.value(child, item)
            })
            && (!checks.unique_items || is_unique(items))
    }

    fn object(&mut self, checks: &Checks, members: &Map<String, Value>) -> bool {
        checks.types & T_OBJ != 0
            && checks.enums.iter().all(|e| e.has_object(members))
            && checks.member_count_ok(members.len())
            && checks.required.iter().all(|&index| {
                checks
                    .slots
                    .get(index)
                    .is_some_and(|slot| members.contains_key(&*slot.name))
            })
            && members.iter().all(|(name, member)| {
                let child = find_slot(&checks.slots, &checks.slot_ranges, name)
                    .and_then(|index| checks.slots.get(index))
                    .map_or(checks.additional, |slot| slot.node);
                self.value(child, member)
            })
    }
}

fn exactly_one(branches: &[Id], mut valid: impl FnMut(Id) -> bool) -> bool {
    let mut found = false;
    for &branch in branches {
        if valid(branch) {
            if found {
                return false;
            }
            found = true;
        }
    }
    found
}

impl Checks {
    #[inline(always)]
    fn scalar(&self, value: Scalar<'_>) -> bool {
        let typed = match value {
            Scalar::Null => self.types & T_NULL != 0,
            Scalar::Bool(_) => self.types & T_BOOL != 0,
            Scalar::Str(_) => self.types & T_STR != 0,
            // Integers satisfy `integer` and `number`, other numbers only `number`.
            Scalar::Num(n) => {
                self.types & T_NUM != 0 || (self.types & T_INT != 0 && n.is_integer())
            }
        };
        if !typed || !(self.enums.is_empty() || self.enums.iter().all(|e| e.has_scalar(value))) {
            return false;
        }
        match value {
            Scalar::Num(n) => self.number_ok(n),
            Scalar::Str(s) => self.string_ok(s),
            Scalar::Null | Scalar::Bool(_) => true,
        }
    }

    fn number_ok(&self, n: Num) -> bool {
        self.minimum.is_none_or(|m| cmp_num(n, m) != Ordering::Less)
            && self
                .maximum
                .is_none_or(|m| cmp_num(n, m) != Ordering::Greater)
            && self
                .exclusive_minimum
                .is_none_or(|m| cmp_num(n, m) == Ordering::Greater)
            && self
                .exclusive_maximum
                .is_none_or(|m| cmp_num(n, m) == Ordering::Less)
            && self.multiple_of.is_none_or(|d| is_multiple_of(n, d))
    }

    #[inline]
    fn string_ok(&self, s: &str) -> bool {
        if self.min_length.is_some() || self.max_length.is_some() {
            let min = self.min_length.unwrap_or(0);
            let max = self.max_length.unwrap_or(u64::MAX);
            // A code point takes one to four bytes.
            let bytes = s.len() as u64;
            if bytes < min || bytes.div_ceil(4) > max {
                return false;
            }
            if !(min <= bytes.div_ceil(4) && bytes <= max) {
                let chars = s.chars().count() as u64;
                if chars < min || chars > max {
                    return false;
                }
            }
        }
        self.pattern.as_ref().is_none_or(|p| p.is_match(s))
    }

    fn item_count_ok(&self, count: usize) -> bool {
        let count = count as u64;
        self.min_items.is_none_or(|m| count >= m) && self.max_items.is_none_or(|m| count <= m)
    }

    fn member_count_ok(&self, count: usize) -> bool {
        let count = count as u64;
        self.min_properties.is_none_or(|m| count >= m)
            && self.max_properties.is_none_or(|m| count <= m)
    }

    /// True when no keyword here constrains anything.
    fn is_trivial(&self) -> bool {
        self.types == T_ALL
            && self.enums.is_empty()
            && self.accepts_all_numbers_and_strings()
            && self.accepts_all_arrays()
            && self.accepts_all_objects()
    }

    fn accepts_all_numbers_and_strings(&self) -> bool {
        self.minimum.is_none()
            && self.maximum.is_none()
            && self.exclusive_minimum.is_none()
            && self.exclusive_maximum.is_none()
            && self.multiple_of.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
            && self.pattern.is_none()
    }

    fn accepts_all_arrays(&self) -> bool {
        self.prefix_items.iter().all(|&id| id == ANY)
            && self.items == ANY
            && self.min_items.is_none()
            && self.max_items.is_none()
            && !self.unique_items
    }

    fn accepts_all_objects(&self) -> bool {
        self.slots.iter().all(|slot| slot.node == ANY)
            && self.required.is_empty()
            && self.additional == ANY
            && self.min_properties.is_none()
            && self.max_properties.is_none()
    }

    fn route(&self, id: Id, kind: u8) -> Route {
        if self.types & kind == 0 {
            return Route::Reject;
        }
        let mut buffer = false;
        for set in &self.enums {
            let has = if kind == T_ARR {
                !set.arrays.is_empty()
            } else {
                !set.objects.is_empty()
            };
            if !has {
                return Route::Reject;
            }
            buffer = true;
        }
        if kind == T_ARR && self.unique_items {
            buffer = true;
        }
        let trivial = if kind == T_ARR {
            self.accepts_all_arrays()
        } else {
            self.accepts_all_objects()
        };
        if buffer {
            Route::Buffer
        } else if trivial {
            Route::Accept
        } else {
            Route::Stream(id)
        }
    }
}

// ----- numbers -----

impl Num {
    fn of(n: &Number) -> Option<Num> {
        if let Some(u) = n.as_u64() {
            Some(Num::U(u))
        } else if let Some(i) = n.as_i64() {
            Some(Num::I(i))
        } else {
            n.as_f64().map(Num::F)
        }
    }

    /// What `serde_json::Number::from(i64)` stores.
    fn of_i64(i: i64) -> Num {
        u64::try_from(i).map_or(Num::I(i), Num::U)
    }

    fn int(self) -> Option<i128> {
        match self {
            Num::U(u) => Some(i128::from(u)),
            Num::I(i) => Some(i128::from(i)),
            Num::F(_) => None,
        }
    }

    fn is_integer(self) -> bool {
        match self {
            Num::F(f) => f.fract() == 0.0,
            Num::U(_) | Num::I(_) => true,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::U(u) => u as f64,
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

/// Exact comparison of an integer (within `i64::MIN..=u64::MAX`) with a float.
fn cmp_int_float(int: i128, float: f64) -> Ordering {
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    const MINUS_TWO_POW_63: f64 = -9_223_372_036_854_775_808.0;
    if float >= TWO_POW_64 {
        return Ordering::Less;
    }
    if float < MINUS_TWO_POW_63 {
        return Ordering::Greater;
    }
    let whole = float.trunc();
    // Exact: `whole` is an integer within [-2^63, 2^64).
    match int.cmp(&(whole as i128)) {
        Ordering::Equal if float > whole => Ordering::Less,
        Ordering::Equal if float < whole => Ordering::Greater,
        other => other,
    }
}

/// Exact numeric order, whatever the representations (`1 == 1.0`, `-0.0 == 0`).
fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a.int(), b.int(), a, b) {
        (Some(x), Some(y), _, _) => x.cmp(&y),
        (Some(x), None, _, Num::F(y)) => cmp_int_float(x, y),
        (None, Some(y), Num::F(x), _) => cmp_int_float(y, x).reverse(),
        (_, _, x, y) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
    }
}

/// `jsonschema`'s `multipleOf` for a whole divisor `1 <= divisor <= 2^53`.
fn is_multiple_of(n: Num, divisor: u64) -> bool {
    const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;
    match n {
        Num::U(u) => u % divisor == 0,
        Num::I(i) => i64::try_from(divisor).is_ok_and(|d| i % d == 0),
        Num::F(f) => {
            if f.abs() >= MAX_SAFE_INTEGER
                && let Some(text) = Number::from_f64(f).map(|n| n.to_string())
                && let Some(answer) = decimal_is_multiple_of(&text, divisor)
            {
                return answer;
            }
            f.fract() == 0.0 && f % (divisor as f64) == 0.0
        }
    }
}

/// Long division over a plain decimal integer's digits, as `jsonschema` does; `None` for an
/// exponent form.
fn decimal_is_multiple_of(text: &str, divisor: u64) -> Option<bool> {
    if text.contains(['e', 'E']) {
        return None;
    }
    let text = text.strip_prefix('-').unwrap_or(text);
    let (digits, fraction) = match text.split_once('.') {
        Some((digits, fraction)) => (digits, Some(fraction)),
        None => (text, None),
    };
    if fraction.is_some_and(|fraction| !fraction.bytes().all(|byte| byte == b'0')) {
        return Some(false);
    }
    let mut remainder: u64 = 0;
    for byte in digits.bytes() {
        let digit = u64::from(byte.checked_sub(b'0')?);
        remainder = remainder.checked_mul(10)?.checked_add(digit)? % divisor;
    }
    Some(remainder == 0)
}

// ----- equality (JSON Schema semantics, as `jsonschema`) -----

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => match (Num::of(x), Num::of(y)) {
            (Some(x), Some(y)) => cmp_num(x, y) == Ordering::Equal,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => equal_arrays(x, y),
        (Value::Object(x), Value::Object(y)) => equal_objects(x, y),
        _ => false,
    }
}

fn equal_arrays(x: &[Value], y: &[Value]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
}

fn equal_objects(x: &Map<String, Value>, y: &Map<String, Value>) -> bool {
    x.len() == y.len()
        && x.iter()
            .all(|(key, a)| y.get(key).is_some_and(|b| equal(a, b)))
}

/// A hash consistent with [`equal`].
fn hash_value(value: &Value, state: &mut impl Hasher) {
    match value {
        Value::Null => state.write_u8(0),
        Value::Bool(b) => {
            state.write_u8(1);
            b.hash(state);
        }
        Value::Number(n) => {
            state.write_u8(2);
            let f = Num::of(n).map_or(0.0, Num::as_f64);
            state.write_u64(if f == 0.0 { 0 } else { f.to_bits() });
        }
        Value::String(s) => {
            state.write_u8(3);
            s.hash(state);
        }
        Value::Array(items) => {
            state.write_u8(4);
            state.write_usize(items.len());
            for item in items {
                hash_value(item, state);
            }
        }
        Value::Object(members) => {
            state.write_u8(5);
            state.write_usize(members.len());
            let mut combined: u64 = 0;
            for (key, member) in members {
                let mut hasher = DefaultHasher::new();
                key.hash(&mut hasher);
                hash_value(member, &mut hasher);
                combined ^= hasher.finish();
            }
            state.write_u64(combined);
        }
    }
}

fn is_unique(items: &[Value]) -> bool {
    if items.len() <= 16 {
        return items
            .iter()
            .enumerate()
            .all(|(index, a)| items.iter().skip(index + 1).all(|b| !equal(a, b)));
    }
    let mut buckets: HashMap<u64, Vec<&Value>> = HashMap::with_capacity(items.len());
    for item in items {
        let mut hasher = DefaultHasher::new();
        hash_value(item, &mut hasher);
        let bucket = buckets.entry(hasher.finish()).or_default();
        if bucket.iter().any(|other| equal(item, other)) {
            return false;
        }
        bucket.push(item);
    }
    true
}

impl EnumSet {
    fn build(values: &[Value]) -> EnumSet {
        let mut set = EnumSet::default();
        for value in values {
            match value {
                Value::Null => set.null = true,
                Value::Bool(true) => set.yes = true,
                Value::Bool(false) => set.no = true,
                Value::Number(n) => {
                    if let Some(n) = Num::of(n) {
                        set.nums.push(n);
                    }
                }
                Value::String(s) => set.strs.push(s.as_str().into()),
                Value::Array(items) => set.arrays.push(items.clone()),
                Value::Object(members) => set.objects.push(members.clone()),
            }
        }
        set.strs.sort_unstable();
        set.strs.dedup();
        set
    }

    fn has_scalar(&self, value: Scalar<'_>) -> bool {
        match value {
            Scalar::Null => self.null,
            Scalar::Bool(true) => self.yes,
            Scalar::Bool(false) => self.no,
            Scalar::Num(n) => self.nums.iter().any(|m| cmp_num(n, *m) == Ordering::Equal),
            Scalar::Str(s) if self.strs.len() <= 16 => self
                .strs
                .iter()
                .any(|e| same_bytes(e.as_bytes(), s.as_bytes())),
            Scalar::Str(s) => self.strs.binary_search_by(|e| (**e).cmp(s)).is_ok(),
        }
    }

    fn has_array(&self, items: &[Value]) -> bool {
        self.arrays.iter().any(|a| equal_arrays(a, items))
    }

    fn has_object(&self, members: &Map<String, Value>) -> bool {
        self.objects.iter().any(|o| equal_objects(o, members))
    }
}

// ----- streaming plumbing -----

/// Validates one value against node `id` as `serde_json` parses it.
#[derive(Clone, Copy)]
struct Walk<'v> {
    v: &'v FastValidator,
    id: Id,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = bool;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(self.v.leaf(self.id, Scalar::Null))
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<bool, E> {
        Ok(self.v.leaf(self.id, Scalar::Bool(b)))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<bool, E> {
        Ok(self.v.leaf(self.id, Scalar::Num(Num::U(n))))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<bool, E> {
        Ok(self.v.leaf(self.id, Scalar::Num(Num::of_i64(n))))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<bool, E> {
        // A `Value` stores a non-finite float as `null`.
        let value = if f.is_finite() {
            Scalar::Num(Num::F(f))
        } else {
            Scalar::Null
        };
        Ok(self.v.leaf(self.id, value))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
        Ok(self.v.leaf(self.id, Scalar::Str(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        self.v.seq(self.id, seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        self.v.map(self.id, map)
    }
}

fn drain_seq<'de, A: SeqAccess<'de>>(v: &FastValidator, mut seq: A) -> Result<(), A::Error> {
    while seq.next_element_seed(Walk { v, id: ANY })?.is_some() {}
    Ok(())
}

/// The rest of a sequence as `serde_json::Value` would build it.
fn collect_seq<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<Vec<Value>, A::Error> {
    let duplicate = RefCell::new(None);
    let seed = StrictValue {
        duplicate: &duplicate,
    };
    let mut items = Vec::new();
    while let Some(item) = seq.next_element_seed(seed)? {
        items.push(item);
    }
    Ok(items)
}

/// Member names looked up among a schema's slots without allocating.
#[derive(Clone, Copy)]
struct KeySeed<'c> {
    slots: &'c [Slot],
    ranges: &'c [(u32, u32)],
    /// Whether an unknown name must be returned.
    keep: bool,
    /// Whether [`RAW_TOKEN`] is special here (first member, `raw_value` build).
    raw_token: bool,
}

enum Key<'de> {
    /// [`RAW_TOKEN`] as the first member name, with `serde_json/raw_value`.
    Raw,
    Slot(usize),
    Other(Option<Cow<'de, str>>),
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a member name")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
        if self.raw_token && s == RAW_TOKEN {
            return Ok(Key::Raw);
        }
        Ok(match find_slot(self.slots, self.ranges, s) {
            Some(index) => Key::Slot(index),
            None => Key::Other(self.keep.then_some(Cow::Borrowed(s))),
        })
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
        if self.raw_token && s == RAW_TOKEN {
            return Ok(Key::Raw);
        }
        Ok(match find_slot(self.slots, self.ranges, s) {
            Some(index) => Key::Slot(index),
            None => Key::Other(self.keep.then(|| Cow::Owned(s.to_owned()))),
        })
    }
}

/// The slot named `name`: only the (usually one) slots of its byte length are compared.
fn find_slot(slots: &[Slot], ranges: &[(u32, u32)], name: &str) -> Option<usize> {
    let &(start, end) = ranges.get(name.len())?;
    let (start, end) = (start as usize, end as usize);
    let offset = slots
        .get(start..end)?
        .iter()
        .position(|slot| same_bytes(slot.name.as_bytes(), name.as_bytes()))?;
    Some(start + offset)
}

/// Byte equality without a `memcmp` call: member names are short.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A small bit set, inline up to 64 bits.
struct Bits {
    small: u64,
    large: Vec<u64>,
}

impl Bits {
    fn new(len: usize) -> Bits {
        Bits {
            small: 0,
            large: if len > 64 {
                vec![0; len.div_ceil(64)]
            } else {
                Vec::new()
            },
        }
    }

    fn word(&mut self, index: usize) -> Option<(&mut u64, u64)> {
        let bit = 1u64.checked_shl((index % 64) as u32).unwrap_or(0);
        if self.large.is_empty() {
            (index < 64).then_some((&mut self.small, bit))
        } else {
            self.large.get_mut(index / 64).map(|word| (word, bit))
        }
    }

    fn put(&mut self, index: usize, on: bool) {
        if let Some((word, bit)) = self.word(index) {
            if on {
                *word |= bit;
            } else {
                *word &= !bit;
            }
        }
    }

    fn get(&self, index: usize) -> bool {
        let bit = 1u64.checked_shl((index % 64) as u32).unwrap_or(0);
        if self.large.is_empty() {
            index < 64 && self.small & bit != 0
        } else {
            self.large
                .get(index / 64)
                .is_some_and(|word| word & bit != 0)
        }
    }

    fn is_empty(&self) -> bool {
        self.small == 0 && self.large.iter().all(|word| *word == 0)
    }

    fn count(&self) -> usize {
        let large: u32 = self.large.iter().map(|word| word.count_ones()).sum();
        (self.small.count_ones() + large) as usize
    }
}

// ----- compilation -----

struct Compiler {
    kinds: Vec<Kind>,
    defs: HashMap<String, Id>,
}

impl Compiler {
    fn push(&mut self, kind: Kind) -> Option<Id> {
        let id = Id::try_from(self.kinds.len()).ok()?;
        self.kinds.push(kind);
        Some(id)
    }

    fn schema(&mut self, schema: &Value) -> Option<Id> {
        match schema {
            Value::Bool(true) => Some(ANY),
            Value::Bool(false) => Some(NEVER),
            Value::Object(_) => {
                let kind = self.kind_of(schema, false)?;
                self.push(kind)
            }
            _ => None,
        }
    }

    fn schemas(&mut self, list: &Value) -> Option<Box<[Id]>> {
        let list = list.as_array()?;
        if list.is_empty() {
            return None;
        }
        list.iter().map(|s| self.schema(s)).collect()
    }

    fn reference(&self, reference: &str) -> Option<Id> {
        if reference == "#" {
            return Some(ROOT);
        }
        let name = reference.strip_prefix("#/$defs/")?;
        let plain = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if !plain {
            return None;
        }
        self.defs.get(name).copied()
    }

    #[allow(clippy::too_many_lines)]
    fn kind_of(&mut self, schema: &Value, is_root: bool) -> Option<Kind> {
        let members = match schema {
            Value::Bool(true) => return Some(Kind::Any),
            Value::Bool(false) => return Some(Kind::Never),
            Value::Object(members) => members,
            _ => return None,
        };
        let mut checks = Checks::default();
        let mut parts: Vec<Id> = Vec::new();
        if let Some(additional) = members.get("additionalProperties") {
            checks.additional = self.schema(additional)?;
        }
        let mut required: Vec<&str> = Vec::new();
        for (keyword, value) in members {
            match keyword.as_str() {
                "$defs" if is_root => {}
                "title" | "description" | "$comment" | "format" => {
                    value.as_str()?;
                }
                "deprecated" | "readOnly" | "writeOnly" => {
                    value.as_bool()?;
                }
                "examples" => {
                    value.as_array()?;
                }
                "default" | "additionalProperties" => {}
                "type" => checks.types = parse_types(value)?,
                "enum" => checks.enums.push(EnumSet::build(value.as_array()?)),
                "const" => checks
                    .enums
                    .push(EnumSet::build(std::slice::from_ref(value))),
                "minimum" => checks.minimum = Some(Num::of(value.as_number()?)?),
                "maximum" => checks.maximum = Some(Num::of(value.as_number()?)?),
                "exclusiveMinimum" => {
                    checks.exclusive_minimum = Some(Num::of(value.as_number()?)?);
                }
                "exclusiveMaximum" => {
                    checks.exclusive_maximum = Some(Num::of(value.as_number()?)?);
                }
                "multipleOf" => checks.multiple_of = Some(parse_divisor(value)?),
                "minLength" => checks.min_length = Some(value.as_u64()?),
                "maxLength" => checks.max_length = Some(value.as_u64()?),
                "pattern" => {
                    let translated = translate_pattern(value.as_str()?)?;
                    checks.pattern = Some(Regex::new(&translated).ok()?);
                }
                "items" => checks.items = self.schema(value)?,
                "prefixItems" => checks.prefix_items = self.schemas(value)?.into_vec(),
                "minItems" => checks.min_items = Some(value.as_u64()?),
                "maxItems" => checks.max_items = Some(value.as_u64()?),
                "uniqueItems" => checks.unique_items = value.as_bool()?,
                "minProperties" => checks.min_properties = Some(value.as_u64()?),
                "maxProperties" => checks.max_properties = Some(value.as_u64()?),
                "properties" => {
                    for (name, subschema) in value.as_object()? {
                        let node = self.schema(subschema)?;
                        checks.slots.push(Slot {
                            name: name.as_str().into(),
                            node,
                        });
                    }
                }
                "required" => {
                    for name in value.as_array()? {
                        let name = name.as_str()?;
                        if required.contains(&name) {
                            return None;
                        }
                        required.push(name);
                    }
                }
                "$ref" => parts.push(self.reference(value.as_str()?)?),
                "anyOf" => {
                    let branches = self.schemas(value)?;
                    parts.push(self.push(Kind::AnyOf(branches))?);
                }
                "oneOf" => {
                    let branches = self.schemas(value)?;
                    parts.push(self.push(Kind::OneOf(branches))?);
                }
                "allOf" => parts.extend(self.schemas(value)?),
                "not" => {
                    let inner = self.schema(value)?;
                    parts.push(self.push(Kind::Not(inner))?);
                }
                _ => return None,
            }
        }
        for &name in &required {
            if find_slot_unsorted(&checks.slots, name).is_none() {
                checks.slots.push(Slot {
                    name: name.into(),
                    node: checks.additional,
                });
            }
        }
        checks
            .slots
            .sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
        let longest = checks.slots.last().map_or(0, |slot| slot.name.len());
        if longest > MAX_NAME_LEN {
            return None;
        }
        if !checks.slots.is_empty() {
            checks.slot_ranges = vec![(0, 0); longest + 1];
            for (index, slot) in checks.slots.iter().enumerate() {
                let index = u32::try_from(index).ok()?;
                let range = checks.slot_ranges.get_mut(slot.name.len())?;
                if range.0 == range.1 {
                    *range = (index, index + 1);
                } else {
                    range.1 = index + 1;
                }
            }
        }
        for name in required {
            let index = find_slot(&checks.slots, &checks.slot_ranges, name)?;
            checks.required.push(index);
            if checks.slots.len() <= 64 {
                checks.required_mask |= 1u64.checked_shl(u32::try_from(index).ok()?)?;
            }
        }
        if parts.is_empty() {
            return Some(if checks.is_trivial() {
                Kind::Any
            } else {
                Kind::Checks(Box::new(checks))
            });
        }
        if !checks.is_trivial() {
            parts.push(self.push(Kind::Checks(Box::new(checks)))?);
        }
        Some(match parts.as_slice() {
            [single] => Kind::Ref(*single),
            _ => Kind::AllOf(parts.into_boxed_slice()),
        })
    }

    fn finish(mut self) -> Option<FastValidator> {
        // Resolve aliases.
        let len = self.kinds.len();
        let mut target: Vec<Id> = Vec::with_capacity(len);
        for start in 0..len {
            let mut id = Id::try_from(start).ok()?;
            let mut steps = 0;
            while let Some(Kind::Ref(next)) = self.kinds.get(id as usize) {
                id = *next;
                steps += 1;
                if steps > len {
                    return None;
                }
            }
            target.push(id);
        }
        let resolve = |id: &mut Id| {
            if let Some(t) = target.get(*id as usize) {
                *id = *t;
            }
        };
        for kind in &mut self.kinds {
            match kind {
                Kind::Any | Kind::Never => {}
                Kind::Ref(id) | Kind::Not(id) => resolve(id),
                Kind::AnyOf(ids) | Kind::OneOf(ids) | Kind::AllOf(ids) => {
                    ids.iter_mut().for_each(resolve);
                }
                Kind::Checks(checks) => {
                    checks.prefix_items.iter_mut().for_each(resolve);
                    resolve(&mut checks.items);
                    resolve(&mut checks.additional);
                    for slot in &mut checks.slots {
                        resolve(&mut slot.node);
                    }
                }
            }
        }
        let root = *target.get(ROOT as usize)?;
        // Applicators that stay on the same instance must not loop, nor nest too deep.
        let mut height: Vec<Option<u32>> = vec![None; len];
        let mut on_path = vec![false; len];
        for id in 0..len {
            chain_height(
                &self.kinds,
                Id::try_from(id).ok()?,
                &mut height,
                &mut on_path,
            )?;
        }
        let mut routes: [Vec<Option<Route>>; 2] = [vec![None; len], vec![None; len]];
        let mut nodes = Vec::with_capacity(len);
        for index in 0..len {
            let id = Id::try_from(index).ok()?;
            let arr = route(&self.kinds, id, T_ARR, &mut routes[0]);
            let obj = route(&self.kinds, id, T_OBJ, &mut routes[1]);
            nodes.push((arr, obj));
        }
        let nodes = self
            .kinds
            .into_iter()
            .zip(nodes)
            .map(|(kind, (arr, obj))| Node { kind, arr, obj })
            .collect();
        Some(FastValidator {
            nodes,
            root,
            raw_token: raw_token_is_special(),
        })
    }
}

fn find_slot_unsorted(slots: &[Slot], name: &str) -> Option<usize> {
    slots.iter().position(|slot| &*slot.name == name)
}

fn same_instance_children(kind: &Kind) -> &[Id] {
    match kind {
        Kind::Ref(id) | Kind::Not(id) => std::slice::from_ref(id),
        Kind::AnyOf(ids) | Kind::OneOf(ids) | Kind::AllOf(ids) => ids,
        Kind::Any | Kind::Never | Kind::Checks(_) => &[],
    }
}

/// Length of the longest applicator chain from `id`; `None` on a cycle or past [`MAX_CHAIN`].
fn chain_height(
    kinds: &[Kind],
    id: Id,
    height: &mut [Option<u32>],
    on_path: &mut [bool],
) -> Option<u32> {
    let index = id as usize;
    if let Some(known) = *height.get(index)? {
        return Some(known);
    }
    if *on_path.get(index)? {
        return None;
    }
    *on_path.get_mut(index)? = true;
    let mut tallest = 0;
    for &child in same_instance_children(kinds.get(index)?) {
        tallest = tallest.max(chain_height(kinds, child, height, on_path)?);
    }
    *on_path.get_mut(index)? = false;
    let own = tallest + 1;
    if own > MAX_CHAIN {
        return None;
    }
    *height.get_mut(index)? = Some(own);
    Some(own)
}

/// How node `id` handles an instance of container `kind` (memoized; the graph is acyclic here).
fn route(kinds: &[Kind], id: Id, kind: u8, memo: &mut [Option<Route>]) -> Route {
    if let Some(Some(known)) = memo.get(id as usize) {
        return *known;
    }
    let computed = match kinds.get(id as usize) {
        None | Some(Kind::Never) => Route::Reject,
        Some(Kind::Any) => Route::Accept,
        Some(Kind::Ref(target)) => route(kinds, *target, kind, memo),
        Some(Kind::Checks(checks)) => checks.route(id, kind),
        Some(Kind::Not(inner)) => match route(kinds, *inner, kind, memo) {
            Route::Reject => Route::Accept,
            Route::Accept => Route::Reject,
            Route::Stream(_) | Route::Buffer => Route::Buffer,
        },
        Some(Kind::AnyOf(branches)) => {
            let routes: Vec<Route> = branches
                .iter()
                .map(|b| route(kinds, *b, kind, memo))
                .collect();
            if routes.contains(&Route::Accept) {
                Route::Accept
            } else {
                single_or_buffer(routes.into_iter().filter(|r| *r != Route::Reject))
            }
        }
        Some(Kind::OneOf(branches)) => {
            let routes: Vec<Route> = branches
                .iter()
                .map(|b| route(kinds, *b, kind, memo))
                .collect();
            single_or_buffer(routes.into_iter().filter(|r| *r != Route::Reject))
        }
        Some(Kind::AllOf(branches)) => {
            let routes: Vec<Route> = branches
                .iter()
                .map(|b| route(kinds, *b, kind, memo))
                .collect();
            if routes.contains(&Route::Reject) {
                Route::Reject
            } else {
                match single_or_buffer(routes.into_iter().filter(|r| *r != Route::Accept)) {
                    Route::Reject => Route::Accept,
                    other => other,
                }
            }
        }
    };
    if let Some(slot) = memo.get_mut(id as usize) {
        *slot = Some(computed);
    }
    computed
}

/// `Reject` for none, the route itself for one, `Buffer` for more.
fn single_or_buffer(mut routes: impl Iterator<Item = Route>) -> Route {
    match (routes.next(), routes.next()) {
        (None, _) => Route::Reject,
        (Some(only), None) => only,
        (Some(_), Some(_)) => Route::Buffer,
    }
}

fn parse_types(value: &Value) -> Option<u8> {
    fn one(name: &str) -> Option<u8> {
        Some(match name {
            "null" => T_NULL,
            "boolean" => T_BOOL,
            "integer" => T_INT,
            "number" => T_NUM,
            "string" => T_STR,
            "array" => T_ARR,
            "object" => T_OBJ,
            _ => return None,
        })
    }
    match value {
        Value::String(name) => one(name),
        Value::Array(names) if !names.is_empty() => {
            let mut types = 0;
            for name in names {
                let bit = one(name.as_str()?)?;
                if types & bit != 0 {
                    return None;
                }
                types |= bit;
            }
            Some(types)
        }
        _ => None,
    }
}

/// A whole `multipleOf` in `1..=2^53`, the range where `jsonschema` divides exactly.
fn parse_divisor(value: &Value) -> Option<u64> {
    const MAX_SAFE_INTEGER: u64 = 1 << 53;
    let divisor = value.as_u64()?;
    (1..=MAX_SAFE_INTEGER).contains(&divisor).then_some(divisor)
}

fn depth_within(value: &Value, budget: usize) -> bool {
    match value {
        Value::Array(items) => budget > 0 && items.iter().all(|v| depth_within(v, budget - 1)),
        Value::Object(members) => {
            budget > 0 && members.values().all(|v| depth_within(v, budget - 1))
        }
        _ => true,
    }
}

/// The member name `serde_json` (with its `raw_value` feature) reserves for raw values.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// Whether a `Value` parse treats [`RAW_TOKEN`] specially: some crate in the build may enable
/// `serde_json/raw_value`, which changes what the `Value` the fallback validates holds.
fn raw_token_is_special() -> bool {
    static SPECIAL: OnceLock<bool> = OnceLock::new();
    *SPECIAL.get_or_init(|| {
        let probe = format!("{{\"{RAW_TOKEN}\":\"1\"}}");
        !matches!(serde_json::from_str::<Value>(&probe), Ok(Value::Object(_)))
    })
}

/// Whether `serde_json` reports numbers as numbers (it does not under `arbitrary_precision`).
fn numbers_are_native() -> bool {
    struct Probe;
    impl<'de> Visitor<'de> for Probe {
        type Value = bool;
        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("a number")
        }
        fn visit_f64<E: de::Error>(self, f: f64) -> Result<bool, E> {
            Ok(f == 1.5)
        }
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
            Ok(false)
        }
    }
    static NATIVE: OnceLock<bool> = OnceLock::new();
    *NATIVE.get_or_init(|| {
        let mut deserializer = serde_json::Deserializer::from_str("1.5");
        de::Deserializer::deserialize_any(&mut deserializer, Probe).unwrap_or(false)
    })
}

// `pattern`: translated by `super::pattern`.

#[cfg(test)]
mod tests {
    use super::FastValidator;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// `jsonschema`'s answer on the text, as the caller's fallback sees it.
    fn reference(validator: &jsonschema::Validator, raw: &str) -> bool {
        crate::validate::parse_value(raw).is_ok_and(|value| validator.is_valid(&value))
    }

    /// Compiles both, then checks each `(document, expected)` against both.
    fn check(schema: Value, cases: &[(&str, bool)]) {
        let fast = FastValidator::compile(&schema).expect("fast validator compiles");
        let slow = jsonschema::draft202012::new(&schema).expect("jsonschema compiles");
        for (raw, expected) in cases {
            assert_eq!(
                reference(&slow, raw),
                *expected,
                "jsonschema: {schema} on {raw}"
            );
            assert_eq!(fast.is_valid(raw), *expected, "fast: {schema} on {raw}");
            if let Ok(value) = crate::validate::parse_value(raw) {
                assert_eq!(
                    fast.value(fast.root, &value),
                    *expected,
                    "walk: {schema} on {raw}"
                );
            }
        }
    }

    /// Only agreement, no expectation.
    fn agree(schema: Value, docs: &[&str]) {
        let fast = FastValidator::compile(&schema).expect("fast validator compiles");
        let slow = jsonschema::draft202012::new(&schema).expect("jsonschema compiles");
        for raw in docs {
            assert_eq!(
                fast.is_valid(raw),
                reference(&slow, raw),
                "fast: {schema} on {raw}"
            );
        }
    }

    fn declined(schema: Value) {
        assert!(
            FastValidator::compile(&schema).is_none(),
            "should decline {schema}"
        );
    }

    #[test]
    fn malformed_and_trailing_text_is_invalid() {
        check(
            json!({}),
            &[
                ("", false),
                ("{", false),
                ("{} x", false),
                ("{}{}", false),
                ("[1,]", false),
                ("nul", false),
                ("NaN", false),
                ("\"\\ud800\"", false),
                ("\"\u{1}\"", false),
                ("1e400", false),
                ("-", false),
                ("01", false),
                (" {} \n", true),
                ("\"\\ud83d\\ude00\"", true),
            ],
        );
    }

    #[test]
    fn deep_input_is_invalid_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        check(json!({}), &[(&deep, false)]);
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        check(
            json!({"items": {"$ref": "#"}}),
            &[(&ok, true), (&deep, false)],
        );
        let objects = format!("{}1{}", "{\"a\":".repeat(5_000), "}".repeat(5_000));
        check(
            json!({"properties": {"a": {"$ref": "#"}}}),
            &[(&objects, false)],
        );
    }

    #[test]
    fn applicators_over_deep_documents_stay_polynomial() {
        // Both branches descend into the same subtree: a naive walk is exponential in depth.
        let schema = json!({"oneOf": [
            {"type": "object", "properties": {"x": {"$ref": "#"}}},
            {"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["y"]},
            {"type": "integer"}
        ]});
        let fast = FastValidator::compile(&schema).expect("compiles");
        let doc = format!("{}1{}", "{\"x\":".repeat(120), "}".repeat(120));
        let started = std::time::Instant::now();
        assert!(fast.is_valid(&doc));
        let value: Value = serde_json::from_str(&doc).expect("json");
        assert!(fast.value(fast.root, &value));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let slow = jsonschema::draft202012::new(&schema).expect("compiles");
        assert!(reference(&slow, &doc));
    }

    #[test]
    fn raw_value_token_matches_the_value_parse() {
        // Under `serde_json/raw_value` (on in aptix's workspace) a `Value` parse reads this
        // member name specially; whichever way serde_json is built, the answers must agree.
        let token = super::RAW_TOKEN;
        let docs = [
            format!(r#"{{"{token}": "[1, 2]"}}"#),
            format!(r#"{{"{token}": "{{\"name\": \"Ada\"}}"}}"#),
            format!(r#"{{"{token}": "{{\"name\": 1}}"}}"#),
            format!(r#"{{"{token}": "[1, "}}"#),
            format!(r#"{{"{token}": 1}}"#),
            format!(r#"{{"{token}": "1", "name": "Ada"}}"#),
            format!(r#"{{"name": "Ada", "{token}": "1"}}"#),
            format!(r#"{{"name": {{"{token}": "\"Ada\""}}}}"#),
            format!(r#"{{"name": {{"{token}": "7"}}, "name": "Ada"}}"#),
            format!(r#"{{"name": {{"{token}": "nope"}}, "name": "Ada"}}"#),
            format!(r#"[{{"{token}": "{{}}"}}]"#),
        ];
        let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
        for schema in [
            json!({}),
            json!({"type": "object"}),
            json!({"type": "array"}),
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            json!({"properties": {"name": {"type": "string"}}, "additionalProperties": false}),
            json!({"items": {"type": "integer"}}),
            json!({"enum": [[1, 2], {"name": "Ada"}]}),
            json!({"not": {"type": "object"}}),
        ] {
            agree(schema, &docs);
        }
    }

    #[test]
    fn validator_is_shareable() {
        fn assert_send_sync<T: Send + Sync + std::fmt::Debug>() {}
        assert_send_sync::<FastValidator>();
    }

    #[test]
    fn type_keyword() {
        check(
            json!({"type": "integer"}),
            &[
                ("1", true),
                ("1.0", true),
                ("-0", true),
                ("-0.0", true),
                ("1e2", true),
                ("1.5e1", true),
                ("1e-2", false),
                ("1.5", false),
                ("18446744073709551616", true),
                ("-9223372036854775809", true),
                ("123456789012345678901234567890.5", true),
                ("\"1\"", false),
                ("null", false),
            ],
        );
        check(
            json!({"type": ["string", "null"]}),
            &[("\"x\"", true), ("null", true), ("1", false), ("[]", false)],
        );
        check(
            json!({"type": "number"}),
            &[("1", true), ("0.5", true), ("true", false)],
        );
        check(
            json!({"type": ["array", "object", "boolean"]}),
            &[("[]", true), ("{}", true), ("false", true), ("0", false)],
        );
        declined(json!({"type": "float"}));
        declined(json!({"type": []}));
        declined(json!({"type": ["string", "string"]}));
    }

    #[test]
    fn enum_and_const() {
        check(
            json!({"enum": ["red", "green", 1, null, [1, {"a": 2}], {"b": [true]}]}),
            &[
                ("\"red\"", true),
                ("\"r\\u0065d\"", true),
                ("\"blue\"", false),
                ("1.0", true),
                ("1e0", true),
                ("2", false),
                ("null", true),
                ("false", false),
                ("[1.0, {\"a\": 2.0}]", true),
                ("[1, {\"a\": 3}]", false),
                ("{\"b\": [true]}", true),
                ("{\"b\": [true], \"c\": 1}", false),
                ("{\"b\": [false], \"b\": [true]}", false),
            ],
        );
        check(
            json!({"const": 0}),
            &[("0", true), ("-0.0", true), ("0.0", true), ("1", false)],
        );
        check(
            json!({"const": 9_007_199_254_740_993_u64}),
            &[
                ("9007199254740993", true),
                ("9007199254740992", false),
                ("9007199254740993.0", false),
            ],
        );
        check(json!({"enum": []}), &[("1", false), ("null", false)]);
        check(
            json!({"type": "string", "enum": ["a", "b"]}),
            &[("\"a\"", true), ("\"c\"", false)],
        );
    }

    #[test]
    fn numeric_bounds() {
        check(
            json!({"minimum": 1, "maximum": 2.5}),
            &[
                ("1", true),
                ("0.9999999999999999", false),
                ("2.5", true),
                ("2.5000000000000004", false),
                ("\"9\"", true),
            ],
        );
        check(
            json!({"exclusiveMinimum": -1, "exclusiveMaximum": 18_446_744_073_709_551_615_u64}),
            &[
                ("-1", false),
                ("-0.9", true),
                ("18446744073709551614", true),
                ("18446744073709551615", false),
                ("18446744073709551616", false),
                ("1e19", true),
                ("1.8446744073709552e19", false),
            ],
        );
        check(
            json!({"maximum": 9_007_199_254_740_992_u64}),
            &[("9007199254740993", false), ("9007199254740993.0", true)],
        );
        check(
            json!({"minimum": -9_223_372_036_854_775_808_i64}),
            &[
                ("-9223372036854775808", true),
                ("-9223372036854775809", true),
                ("-9223372036854777856", false),
            ],
        );
    }

    #[test]
    fn multiple_of() {
        check(
            json!({"multipleOf": 3}),
            &[
                ("9", true),
                ("-9", true),
                ("10", false),
                ("9.0", true),
                ("0", true),
                ("-0.0", true),
                ("4.5", false),
                ("18446744073709551615", true),
                ("18446744073709551616", false),
                ("\"x\"", true),
            ],
        );
        agree(
            json!({"multipleOf": 3}),
            &[
                "1e300",
                "3e300",
                "1.7976931348623157e308",
                "9007199254740993.0",
            ],
        );
        check(
            json!({"multipleOf": 2}),
            &[
                ("1e300", true),
                ("9007199254740994.0", true),
                ("1e-320", false),
            ],
        );
        declined(json!({"multipleOf": 0.5}));
        declined(json!({"multipleOf": 0}));
        declined(json!({"multipleOf": 1.0}));
    }

    #[test]
    fn string_lengths_and_patterns() {
        check(
            json!({"minLength": 2, "maxLength": 3}),
            &[
                ("\"a\"", false),
                ("\"ab\"", true),
                ("\"ééé\"", true),
                ("\"😀😀😀\"", true),
                ("\"\\ud83d\\ude00\"", false),
                ("\"abcd\"", false),
                ("5", true),
            ],
        );
        check(
            json!({"pattern": "^[a-z]+\\d{2,}$"}),
            &[
                ("\"abc12\"", true),
                ("\"abc1\"", false),
                ("\"ABC12\"", false),
                ("\"abc١٢\"", false),
            ],
        );
        check(
            json!({"pattern": "a.c"}),
            &[
                ("\"xabcx\"", true),
                ("\"a\\nc\"", false),
                ("\"a\\u2028c\"", false),
                ("\"aéc\"", true),
            ],
        );
        check(
            json!({"pattern": "^\\w+\\s\\S$"}),
            &[
                ("\"ab x\"", true),
                ("\"é x\"", false),
                ("\"ab\\ufeffx\"", true),
                ("\"ab\\u0085x\"", false),
            ],
        );
        check(
            json!({"pattern": "^(?:ab|c)*[-.]?$"}),
            &[("\"abcab-\"", true), ("\"abx\"", false), ("\"\"", true)],
        );
        for pattern in [
            "(?=a)", "(?!a)", "(?<=a)", "(a)\\1", "\\bword", "[[a]]", "a{,2}", "\\x41", "\\u0041",
            "a**", "[a-]b]", "(?<n>a)", "[\\w-z]", "[z-a]", "{", "a{2", "\\p{L}", "\\c", "[]",
        ] {
            declined(json!({"pattern": pattern}));
        }
    }

    #[test]
    fn arrays() {
        check(
            json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
            &[
                ("[\"a\"]", true),
                ("[\"a\", 1, 2]", true),
                ("[\"a\", 1, 2, 3]", false),
                ("[]", false),
                ("[1]", false),
                ("[\"a\", 1.5]", false),
            ],
        );
        check(
            json!({"uniqueItems": true}),
            &[
                ("[1, 2]", true),
                ("[1, 1.0]", false),
                ("[{\"a\": 1}, {\"a\": 1.0}]", false),
                ("[[1], [2]]", true),
                (
                    "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, -0.0]",
                    false,
                ),
                (
                    "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18.5]",
                    true,
                ),
            ],
        );
        check(json!({"items": false}), &[("[]", true), ("[1]", false)]);
    }

    #[test]
    fn objects_and_duplicate_keys() {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["name"],
            "additionalProperties": false
        });
        check(
            schema,
            &[
                ("{\"name\": \"Ada\"}", true),
                ("{\"n\\u0061me\": \"Ada\"}", true),
                ("{\"name\": \"Ada\", \"age\": 36}", true),
                ("{\"age\": 36}", false),
                ("{\"name\": \"Ada\", \"x\": 1}", false),
                // A repeated name is refused, whichever value comes last.
                ("{\"name\": 1, \"name\": \"Ada\"}", false),
                ("{\"name\": \"Ada\", \"name\": 1}", false),
                ("{\"name\": \"Ada\", \"age\": -1, \"age\": 2}", false),
                ("[]", false),
            ],
        );
        check(
            json!({"additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 2}),
            &[
                ("{\"a\": 1, \"b\": 2}", true),
                ("{\"a\": 1, \"a\": 2}", false),
                ("{\"a\": 1, \"a\": 2, \"b\": 3}", false),
                ("{\"a\": \"x\", \"b\": 1, \"a\": 2}", false),
                ("{\"a\": 1, \"b\": 1, \"a\": \"x\"}", false),
                ("{\"\\u0061\": \"x\", \"b\": 1, \"a\": 2}", false),
            ],
        );
        check(
            json!({"required": ["a"], "additionalProperties": false}),
            &[("{}", false), ("{\"a\": 1}", false), ("1", true)],
        );
        check(
            json!({"properties": {"a": {"properties": {"b": {"type": "null"}}}}}),
            &[
                ("{\"a\": {\"b\": 1}, \"a\": {\"b\": null}}", false),
                ("{\"a\": {\"b\": null, \"b\": 1}}", false),
            ],
        );
        let many: serde_json::Map<String, Value> = (0..70)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        check(
            json!({"properties": many, "required": ["p69", "p0"]}),
            &[
                ("{\"p0\": 1, \"p69\": 2}", true),
                ("{\"p0\": 1}", false),
                ("{\"p0\": 1, \"p69\": \"x\"}", false),
            ],
        );
    }

    #[test]
    fn refs_and_applicators() {
        let tree = json!({
            "type": "object",
            "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "$defs": {"Node": {"$ref": "#"}}
        });
        check(
            tree,
            &[
                (
                    "{\"value\": 1, \"children\": [{\"value\": 2, \"children\": []}]}",
                    true,
                ),
                ("{\"value\": 1, \"children\": [{\"value\": \"x\"}]}", false),
            ],
        );
        check(
            json!({"properties": {"c": {"anyOf": [{"$ref": "#/$defs/C"}, {"type": "null"}]}}, "$defs": {"C": {"type": "string", "enum": ["r", "g"]}}}),
            &[
                ("{\"c\": null}", true),
                ("{\"c\": \"r\"}", true),
                ("{\"c\": \"b\"}", false),
                ("{\"c\": {}}", false),
            ],
        );
        check(
            json!({"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}, {"type": "string"}]}),
            &[
                ("{\"a\": 1}", true),
                ("{\"a\": 1, \"b\": 2}", false),
                ("{}", false),
                ("\"s\"", true),
                ("1", false),
            ],
        );
        check(
            json!({"allOf": [{"type": "integer"}, {"minimum": 2}], "not": {"const": 3}}),
            &[("2", true), ("3", false), ("1", false), ("2.5", false)],
        );
        check(
            json!({"$ref": "#/$defs/A", "maxProperties": 1, "$defs": {"A": {"additionalProperties": {"type": "string"}}}}),
            &[
                ("{\"a\": \"x\"}", true),
                ("{\"a\": 1}", false),
                ("{\"a\": \"x\", \"b\": \"y\"}", false),
            ],
        );
        declined(json!({"$ref": "#"}));
        declined(
            json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"anyOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"}),
        );
        declined(json!({"$ref": "#/$defs/Missing"}));
        declined(json!({"$ref": "other.json"}));
        declined(json!({"properties": {"a": {"$defs": {}}}}));
        declined(json!({"if": {}, "then": {}}));
        declined(json!({"patternProperties": {}}));
        declined(json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}));
        declined(json!({"required": ["a", "a"]}));
        declined(json!({"minLength": -1}));
        declined(json!({"minLength": 1.0}));
        declined(json!({"title": 1}));
    }

    #[test]
    fn annotations_and_format_are_ignored() {
        check(
            json!({"type": "integer", "format": "uint8", "title": "t", "description": "d", "default": 300,
                   "examples": [1], "deprecated": true, "readOnly": false, "writeOnly": false, "$comment": "c"}),
            &[("300", true), ("-5", true)],
        );
        check(
            json!({"type": "string", "format": "email"}),
            &[("\"not an email\"", true)],
        );
        check(
            json!({"type": "string", "format": "date-time"}),
            &[("\"yesterday\"", true)],
        );
    }

    // ----- schemars-generated schemas -----

    mod derived {
        #![allow(dead_code)]
        use schemars::JsonSchema;
        use serde::Deserialize;

        #[derive(JsonSchema, Deserialize)]
        pub(crate) struct Greet {
            /// Who to greet.
            pub(crate) name: String,
        }

        #[derive(JsonSchema, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub(crate) enum Color {
            Red,
            Green,
            Blue,
        }

        #[derive(JsonSchema, Deserialize)]
        pub(crate) struct Inner {
            pub(crate) x: i32,
            pub(crate) next: Option<Box<Inner>>,
        }

        #[derive(JsonSchema, Deserialize)]
        pub(crate) enum Shape {
            Circle { r: f64 },
            Square(f64),
            Empty,
        }

        #[derive(JsonSchema, Deserialize)]
        pub(crate) struct Ten {
            pub(crate) id: u32,
            pub offset: i64,
            pub ratio: f64,
            pub title: String,
            pub enabled: bool,
            pub note: Option<String>,
            pub bytes: Vec<u8>,
            pub color: Color,
            pub inner: Option<Inner>,
            pub limit: Option<u16>,
            pub shape: Option<Shape>,
            #[serde(default)]
            pub tags: Vec<String>,
        }
    }

    /// The post-processing the framework applies to schemars output.
    fn tool_schema<T: schemars::JsonSchema>() -> Value {
        fn close(value: &mut Value) {
            match value {
                Value::Object(members) => {
                    if members.contains_key("properties") {
                        members.insert("additionalProperties".into(), Value::Bool(false));
                    }
                    members.values_mut().for_each(close);
                }
                Value::Array(items) => items.iter_mut().for_each(close),
                _ => {}
            }
        }
        let generator = schemars::generate::SchemaSettings::draft2020_12()
            .with(|settings| {
                settings.meta_schema = None;
                settings.inline_subschemas = false;
            })
            .into_generator();
        let mut schema = generator.into_root_schema_for::<T>().to_value();
        close(&mut schema);
        if let Value::Object(members) = &mut schema {
            members.remove("$schema");
            members.insert("type".into(), json!("object"));
        }
        schema
    }

    #[test]
    fn schemars_schemas_compile_and_agree() {
        let greet = tool_schema::<derived::Greet>();
        check(
            greet,
            &[
                ("{\"name\":\"Ada Lovelace\"}", true),
                ("{\"name\":null}", false),
                ("{}", false),
                ("{\"name\":\"Ada\",\"extra\":1}", false),
            ],
        );
        let ten = tool_schema::<derived::Ten>();
        check(
            ten.clone(),
            &[
                (TEN_FIELDS, true),
                (&TEN_FIELDS.replace("\"green\"", "\"pink\""), false),
                (&TEN_FIELDS.replace("\"id\":7", "\"id\":-7"), false),
                (&TEN_FIELDS.replace("\"id\":7", "\"id\":7.5"), false),
                (
                    &TEN_FIELDS.replace("\"shape\":null", "\"shape\":{\"Circle\":{\"r\":1.5}}"),
                    true,
                ),
                (
                    &TEN_FIELDS.replace("\"shape\":null", "\"shape\":{\"Square\":2}"),
                    true,
                ),
                (
                    &TEN_FIELDS.replace("\"shape\":null", "\"shape\":\"Empty\""),
                    true,
                ),
                (
                    &TEN_FIELDS.replace("\"shape\":null", "\"shape\":{\"Circle\":{}}"),
                    false,
                ),
                (
                    &TEN_FIELDS.replace(
                        "\"shape\":null",
                        "\"shape\":{\"Square\":2,\"Circle\":{\"r\":1}}",
                    ),
                    false,
                ),
                (
                    &TEN_FIELDS.replace(
                        "\"inner\":{\"x\":1,\"next\":null}",
                        "\"inner\":{\"x\":1,\"next\":{\"x\":2,\"next\":{\"x\":\"3\"}}}",
                    ),
                    false,
                ),
            ],
        );
        // The formats schemars writes (uint32, int64, double, uint8, ...) are annotations.
        assert!(ten.to_string().contains("\"format\":\"uint32\""));
    }

    const TEN_FIELDS: &str = r#"{"id":7,"offset":-3,"ratio":0.5,"title":"t","enabled":true,"note":null,"bytes":[1,2,255],"color":"green","inner":{"x":1,"next":null},"limit":10,"tags":["a"],"shape":null}"#;

    // ----- random schemas against random documents -----

    const KEYS: [&str; 6] = ["a", "b", "c", "ü", "k\"q", "x y"];

    fn scalar_pool() -> Vec<Value> {
        vec![
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(1),
            json!(-1),
            json!(1.0),
            json!(1.5),
            json!(2),
            json!(3),
            json!(-0.0),
            json!(9_007_199_254_740_993_u64),
            json!(18_446_744_073_709_551_615_u64),
            json!(-9_223_372_036_854_775_808_i64),
            json!(1e19),
            json!(""),
            json!("a"),
            json!("ab"),
            json!("é"),
            json!("1"),
        ]
    }

    fn patterns() -> Vec<&'static str> {
        vec![
            "",
            "a",
            "^a",
            "a$",
            "^ab$",
            "^(a|b)$",
            "^[a-c]+$",
            "[^a]",
            "\\d",
            "^\\d+$",
            "\\w",
            "^\\S*$",
            "\\s",
            ".",
            "^.$",
            "^.{2,3}$",
            "a*b?",
            "(ab)+",
            "^(?:a|é)*$",
            "[\\d.]",
            "^[-a]$",
            "^\\.$",
            "\\$",
            "x|",
            "^(a|b|)$",
            "é+",
            "^[^\\s]+$",
            "a{2}",
            "^a{1,}$",
            "^\\/",
            "[a\\-z]",
            "\\D\\W",
            "^[\\w\\s]*$",
            "a+?",
            "^(?:)$",
            "^$",
            "\\t|\\n",
            "[é-ü]",
        ]
    }

    fn limit_pool() -> Vec<Value> {
        vec![
            json!(0),
            json!(1),
            json!(-1),
            json!(2.5),
            json!(-0.5),
            json!(3),
            json!(9_007_199_254_740_992_u64),
            json!(18_446_744_073_709_551_615_u64),
            json!(-9_223_372_036_854_775_808_i64),
            json!(1e19),
            json!(-1e300),
        ]
    }

    fn small_count() -> impl Strategy<Value = Option<u64>> {
        prop::option::weighted(0.3, 0u64..4)
    }

    fn types() -> impl Strategy<Value = Value> {
        let names = [
            "null", "boolean", "integer", "number", "string", "array", "object",
        ];
        prop_oneof![
            prop::sample::select(names.to_vec()).prop_map(|t| json!(t)),
            prop::sample::subsequence(names.to_vec(), 1..4).prop_map(|t| json!(t)),
        ]
    }

    fn insert(members: &mut serde_json::Map<String, Value>, key: &str, value: Option<Value>) {
        if let Some(value) = value {
            members.insert(key.into(), value);
        }
    }

    fn leaf() -> impl Strategy<Value = Value> {
        let limits = limit_pool();
        let number = (
            prop::option::of(prop::sample::select(vec!["integer", "number"])),
            prop::option::weighted(0.3, prop::sample::select(limits.clone())),
            prop::option::weighted(0.3, prop::sample::select(limits.clone())),
            prop::option::weighted(0.2, prop::sample::select(limits.clone())),
            prop::option::weighted(0.2, prop::sample::select(limits)),
            prop::option::weighted(0.2, prop::sample::select(vec![1u64, 2, 3, 7, 10, 1 << 53])),
        )
            .prop_map(|(ty, min, max, xmin, xmax, multiple)| {
                let mut m = serde_json::Map::new();
                insert(&mut m, "type", ty.map(|t| json!(t)));
                insert(&mut m, "minimum", min);
                insert(&mut m, "maximum", max);
                insert(&mut m, "exclusiveMinimum", xmin);
                insert(&mut m, "exclusiveMaximum", xmax);
                insert(&mut m, "multipleOf", multiple.map(|d| json!(d)));
                Value::Object(m)
            });
        let string = (
            prop::bool::ANY,
            small_count(),
            small_count(),
            prop::option::weighted(0.5, prop::sample::select(patterns())),
        )
            .prop_map(|(typed, min, max, pattern)| {
                let mut m = serde_json::Map::new();
                insert(&mut m, "type", typed.then(|| json!("string")));
                insert(&mut m, "minLength", min.map(|n| json!(n)));
                insert(&mut m, "maxLength", max.map(|n| json!(n)));
                insert(&mut m, "pattern", pattern.map(|p| json!(p)));
                insert(&mut m, "format", typed.then(|| json!("email")));
                Value::Object(m)
            });
        let mut enum_items = scalar_pool();
        enum_items.extend([
            json!([1]),
            json!([1.0, "a"]),
            json!({"a": 1}),
            json!({}),
            json!([]),
        ]);
        let enumeration = prop::sample::subsequence(enum_items.clone(), 0..5)
            .prop_map(|items| json!({"enum": items}));
        let constant = prop::sample::select(enum_items).prop_map(|item| json!({"const": item}));
        prop_oneof![
            1 => Just(json!(true)),
            1 => Just(json!(false)),
            1 => Just(json!({"description": "anything"})),
            3 => types().prop_map(|t| json!({"type": t})),
            4 => number,
            4 => string,
            2 => enumeration,
            2 => constant,
            1 => Just(json!({"$ref": "#"})),
            2 => prop::sample::select(vec!["D0", "D1"]).prop_map(|d| json!({"$ref": format!("#/$defs/{d}")})),
        ]
    }

    fn schema() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 40, 4, |inner| {
            let object = (
                prop::bool::ANY,
                prop::collection::btree_map(
                    prop::sample::select(KEYS.to_vec()),
                    inner.clone(),
                    0..4,
                ),
                prop::sample::subsequence(KEYS.to_vec(), 0..3),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(true))),
                    Just(Some(json!(false))),
                    inner.clone().prop_map(Some)
                ],
                small_count(),
                small_count(),
            )
                .prop_map(|(typed, properties, required, additional, min, max)| {
                    let mut m = serde_json::Map::new();
                    insert(&mut m, "type", typed.then(|| json!("object")));
                    if !properties.is_empty() {
                        m.insert("properties".into(), json!(properties));
                    }
                    if !required.is_empty() {
                        m.insert("required".into(), json!(required));
                    }
                    insert(&mut m, "additionalProperties", additional);
                    insert(&mut m, "minProperties", min.map(|n| json!(n)));
                    insert(&mut m, "maxProperties", max.map(|n| json!(n)));
                    Value::Object(m)
                });
            let array = (
                prop::bool::ANY,
                prop::option::of(inner.clone()),
                prop::collection::vec(inner.clone(), 0..3),
                small_count(),
                small_count(),
                prop::option::weighted(0.25, prop::bool::ANY),
            )
                .prop_map(|(typed, items, prefix, min, max, unique)| {
                    let mut m = serde_json::Map::new();
                    insert(&mut m, "type", typed.then(|| json!("array")));
                    insert(&mut m, "items", items);
                    if !prefix.is_empty() {
                        m.insert("prefixItems".into(), json!(prefix));
                    }
                    insert(&mut m, "minItems", min.map(|n| json!(n)));
                    insert(&mut m, "maxItems", max.map(|n| json!(n)));
                    insert(&mut m, "uniqueItems", unique.map(|u| json!(u)));
                    Value::Object(m)
                });
            prop_oneof![
                4 => object,
                3 => array,
                3 => inner.clone().prop_map(|s| json!({"anyOf": [s, {"type": "null"}]})),
                1 => prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"anyOf": v})),
                1 => prop::collection::vec(inner.clone(), 1..4).prop_map(|v| json!({"oneOf": v})),
                1 => prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"allOf": v})),
                1 => inner.clone().prop_map(|s| json!({"not": s})),
                1 => (inner.clone(), inner).prop_map(|(a, b)| match (a, b) {
                    (Value::Object(mut a), Value::Object(b)) => {
                        for (k, v) in b {
                            a.entry(k).or_insert(v);
                        }
                        Value::Object(a)
                    }
                    (a, _) => a,
                }),
            ]
        })
    }

    fn root_schema() -> impl Strategy<Value = Value> {
        (schema(), schema(), schema()).prop_map(|(root, d0, d1)| {
            let mut root = match root {
                Value::Object(m) => m,
                other => {
                    let mut m = serde_json::Map::new();
                    m.insert("allOf".into(), json!([other]));
                    m
                }
            };
            root.insert("$defs".into(), json!({"D0": d0, "D1": d1}));
            Value::Object(root)
        })
    }

    /// A tiny deterministic generator for documents.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % (n.max(1) as u64)) as usize
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    const NUMBER_TEXTS: [&str; 42] = [
        "0",
        "-0",
        "0.0",
        "-0.0",
        "1",
        "1.0",
        "1.5",
        "2",
        "3",
        "-1",
        "-1.0",
        "7",
        "10",
        "1e1",
        "1E+1",
        "2.5e0",
        "1e2",
        "-1e-2",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "9007199254740993",
        "9007199254740992.0",
        "1e19",
        "1e300",
        "1e400",
        "123456789012345678901234567890",
        "0.30000000000000004",
        "4.0",
        "14",
        "2.5",
        "-0.5",
        "21",
        "10000000000000000000",
        "9223372036854775807",
        "-9223372036854775807",
        "0.1",
        "1.7976931348623157e308",
        "5e-324",
        "-1e-400",
        "1e-400",
    ];
    const STRING_TEXTS: [&str; 20] = [
        "\"\"",
        "\"a\"",
        "\"ab\"",
        "\"abc\"",
        "\"é\"",
        "\"\\u00e9\"",
        "\"\\ud83d\\ude00\"",
        "\"😀\"",
        "\"\\ud800\"",
        "\"a b\"",
        "\"1\"",
        "\"12\"",
        "\"\\n\"",
        "\"x\\u0000\"",
        "\"\u{1}\"",
        "\"aab\"",
        "\"b\"",
        "\"ü\"",
        "\"\\u2028\"",
        "\".\"",
    ];

    fn key_text(rng: &mut Rng, key: &str) -> String {
        if key == "a" && rng.chance(20) {
            return "\"\\u0061\"".into();
        }
        Value::String(key.into()).to_string()
    }

    fn random_doc(rng: &mut Rng, depth: usize) -> String {
        if depth > 0 && rng.chance(3) {
            let inner = random_doc(rng, depth - 1);
            let extra = if rng.chance(20) { ",\"a\":1" } else { "" };
            return format!(
                "{{\"{}\":{}{extra}}}",
                super::RAW_TOKEN,
                Value::String(inner)
            );
        }
        match rng.below(if depth == 0 { 4 } else { 6 }) {
            0 => rng.pick(&["null", "true", "false"]).to_string(),
            1 => rng.pick(&NUMBER_TEXTS).to_string(),
            2 | 3 => rng.pick(&STRING_TEXTS).to_string(),
            4 => {
                let items: Vec<String> = (0..rng.below(4))
                    .map(|_| random_doc(rng, depth - 1))
                    .collect();
                format!("[{}]", items.join(","))
            }
            _ => {
                let members: Vec<String> = (0..rng.below(4))
                    .map(|_| {
                        let key = *rng.pick(&KEYS);
                        format!("{}:{}", key_text(rng, key), random_doc(rng, depth - 1))
                    })
                    .collect();
                format!("{{{}}}", members.join(","))
            }
        }
    }

    /// A document that tries to follow `schema` (with deliberate slips).
    fn guided_doc(rng: &mut Rng, root: &Value, schema: &Value, depth: usize) -> String {
        if depth == 0 || rng.chance(5) {
            return random_doc(rng, 1);
        }
        let Value::Object(m) = schema else {
            return random_doc(rng, 2);
        };
        if let Some(Value::String(reference)) = m.get("$ref") {
            let target = if reference == "#" {
                Some(root)
            } else {
                reference
                    .strip_prefix("#/$defs/")
                    .and_then(|name| root.get("$defs").and_then(|d| d.get(name)))
            };
            if let Some(target) = target
                && rng.chance(70)
            {
                return guided_doc(rng, root, target, depth - 1);
            }
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = m.get(key)
                && rng.chance(70)
            {
                let branch = rng.pick(branches).clone();
                return guided_doc(rng, root, &branch, depth - 1);
            }
        }
        for key in ["enum", "const"] {
            let items = match m.get(key) {
                Some(Value::Array(items)) if key == "enum" => items.clone(),
                Some(item) if key == "const" => vec![item.clone()],
                _ => continue,
            };
            if !items.is_empty() && rng.chance(80) {
                let item = rng.pick(&items).clone();
                return match item {
                    Value::Number(n)
                        if rng.chance(30)
                            && n.as_f64()
                                .is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e15) =>
                    {
                        format!("{}.0", n.as_f64().unwrap_or(0.0) as i64)
                    }
                    other => other.to_string(),
                };
            }
        }
        let ty = match m.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) if !ts.is_empty() => {
                rng.pick(ts).as_str().unwrap_or("null").to_owned()
            }
            _ if m.contains_key("properties")
                || m.contains_key("required")
                || m.contains_key("additionalProperties") =>
            {
                "object".into()
            }
            _ if m.contains_key("items") || m.contains_key("prefixItems") => "array".into(),
            _ if m.contains_key("pattern") || m.contains_key("minLength") => "string".into(),
            _ if m.contains_key("minimum") || m.contains_key("multipleOf") => "number".into(),
            _ => return random_doc(rng, 2),
        };
        match ty.as_str() {
            "object" => {
                let mut members = Vec::new();
                if let Some(Value::Object(properties)) = m.get("properties") {
                    for (key, sub) in properties {
                        if rng.chance(75) {
                            members.push(format!(
                                "{}:{}",
                                key_text(rng, key),
                                guided_doc(rng, root, sub, depth - 1)
                            ));
                        }
                    }
                }
                if let Some(Value::Array(required)) = m.get("required") {
                    for key in required.iter().filter_map(Value::as_str) {
                        if rng.chance(60) {
                            let sub = m
                                .get("additionalProperties")
                                .cloned()
                                .unwrap_or(json!(true));
                            members.push(format!(
                                "{}:{}",
                                key_text(rng, key),
                                guided_doc(rng, root, &sub, depth - 1)
                            ));
                        }
                    }
                }
                if rng.chance(25) {
                    let sub = m
                        .get("additionalProperties")
                        .cloned()
                        .unwrap_or(json!(true));
                    let key = *rng.pick(&KEYS);
                    members.push(format!(
                        "{}:{}",
                        key_text(rng, key),
                        guided_doc(rng, root, &sub, depth - 1)
                    ));
                }
                if !members.is_empty() && rng.chance(20) {
                    let dup = rng.pick(&members).clone();
                    let at = rng.below(members.len() + 1);
                    members.insert(at, dup);
                }
                if members.len() > 1 && rng.chance(30) {
                    let a = rng.below(members.len());
                    let b = rng.below(members.len());
                    members.swap(a, b);
                }
                format!("{{{}}}", members.join(","))
            }
            "array" => {
                let mut items = Vec::new();
                if let Some(Value::Array(prefix)) = m.get("prefixItems") {
                    for sub in prefix {
                        if rng.chance(85) {
                            items.push(guided_doc(rng, root, sub, depth - 1));
                        }
                    }
                }
                let sub = m.get("items").cloned().unwrap_or(json!(true));
                for _ in 0..rng.below(4) {
                    items.push(guided_doc(rng, root, &sub, depth - 1));
                }
                if !items.is_empty() && rng.chance(20) {
                    let dup = rng.pick(&items).clone();
                    items.push(dup);
                }
                format!("[{}]", items.join(","))
            }
            "string" => {
                let alphabet = [
                    "a", "b", "c", "é", "1", " ", "-", ".", "\\n", "/", "ü", "$", "\\u2028", "_",
                ];
                let len = rng.below(5);
                let body: String = (0..len).map(|_| *rng.pick(&alphabet)).collect();
                format!("\"{body}\"")
            }
            "integer" | "number" => {
                let mut candidates: Vec<String> =
                    NUMBER_TEXTS.iter().map(|s| s.to_string()).collect();
                for key in [
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "multipleOf",
                ] {
                    if let Some(Value::Number(n)) = m.get(key) {
                        candidates.push(n.to_string());
                        if let Some(f) = n.as_f64() {
                            candidates.push(Value::from(f + 1.0).to_string());
                            candidates.push(Value::from(f * 2.0).to_string());
                        }
                    }
                }
                rng.pick(&candidates).clone()
            }
            "boolean" => rng.pick(&["true", "false"]).to_string(),
            "null" => "null".into(),
            _ => random_doc(rng, 2),
        }
    }

    /// Malformed or odd variants of a document.
    fn mutate(rng: &mut Rng, text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let at = rng.below(chars.len() + 1);
        let (head, tail): (String, String) =
            (chars[..at].iter().collect(), chars[at..].iter().collect());
        match rng.below(6) {
            0 => head,
            1 => format!(
                "{text}{}",
                rng.pick(&[" x", "}", ",1", "]", " ", "\n", "{}"])
            ),
            2 => format!(
                "{head}{}{tail}",
                rng.pick(&["\"", ",", "{", "1", " ", "\\", ":"])
            ),
            3 => format!("{head}{}", &tail.chars().skip(1).collect::<String>()),
            4 => format!(" \t{text}\r\n"),
            _ => text.replace(':', " : ").replace(',', " , "),
        }
    }

    fn agree_on(schema: &Value, seed: u64) -> Result<(), TestCaseError> {
        let Some(fast) = FastValidator::compile(schema) else {
            return Ok(());
        };
        let slow = match jsonschema::draft202012::new(schema) {
            Ok(slow) => slow,
            Err(error) => {
                return Err(TestCaseError::fail(format!(
                    "jsonschema rejects {schema}: {error}"
                )));
            }
        };
        let mut rng = Rng(seed | 1);
        for round in 0..16 {
            let mut doc = if round % 4 == 3 {
                random_doc(&mut rng, 3)
            } else {
                guided_doc(&mut rng, schema, schema, 6)
            };
            if round % 5 == 4 {
                doc = mutate(&mut rng, &doc);
            }
            let expected = reference(&slow, &doc);
            prop_assert_eq!(
                fast.is_valid(&doc),
                expected,
                "schema {} doc {}",
                schema,
                doc
            );
            if let Ok(value) = crate::validate::parse_value(&doc) {
                prop_assert_eq!(
                    fast.value(fast.root, &value),
                    expected,
                    "walk: schema {} doc {}",
                    schema,
                    doc
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 6000, max_shrink_iters: 2000, ..ProptestConfig::default() })]

        #[test]
        fn agrees_with_jsonschema(schema in root_schema(), seed in any::<u64>()) {
            agree_on(&schema, seed)?;
        }

        #[test]
        fn patterns_agree_with_jsonschema(pattern in pattern_strategy(), subjects in prop::collection::vec(subject_strategy(), 8)) {
            let schema = json!({"pattern": pattern});
            if let Some(fast) = FastValidator::compile(&schema) {
                let slow = jsonschema::draft202012::new(&schema).map_err(|e| TestCaseError::fail(format!("{schema}: {e}")))?;
                for subject in subjects {
                    let doc = Value::String(subject).to_string();
                    prop_assert_eq!(fast.is_valid(&doc), reference(&slow, &doc), "pattern {} on {}", pattern, doc);
                }
            }
        }
    }

    fn unique_pool() -> Vec<&'static str> {
        vec![
            "0",
            "-0.0",
            "1",
            "1.0",
            "2",
            "1e0",
            "\"a\"",
            "\"\\u0061\"",
            "null",
            "true",
            "false",
            "[]",
            "[1]",
            "[1.0]",
            "{}",
            "{\"a\":1}",
            "{\"a\":1.0}",
            "{\"b\":1,\"a\":1}",
            "{\"a\":1,\"b\":1}",
            "9007199254740993",
            "9007199254740992",
            "9007199254740992.0",
            "18446744073709551615",
            "1.8446744073709552e19",
            "-1",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        #[test]
        fn unique_items_agree_with_jsonschema(items in prop::collection::vec(prop::sample::select(unique_pool()), 0..40)) {
            let schema = json!({"uniqueItems": true});
            let fast = FastValidator::compile(&schema).ok_or_else(|| TestCaseError::fail("compile"))?;
            let slow = jsonschema::draft202012::new(&schema).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let doc = format!("[{}]", items.join(","));
            prop_assert_eq!(fast.is_valid(&doc), reference(&slow, &doc), "{}", doc);
        }
    }

    fn pattern_strategy() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            prop::sample::select(vec![
                "a", "b", "é", "1", " ", "-", "\\.", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", ".",
                "\\n", "\\/", "_", "😀", "\\t"
            ])
            .prop_map(str::to_owned),
            prop::sample::select(vec![
                "[ab]", "[^a]", "[a-c]", "[\\d_]", "[-a]", "[a-]", "[^\\s]", "[\\W]", "[é-ü]",
                "[.]", "[\\]]", "[\\^a]", "[a^]"
            ])
            .prop_map(str::to_owned),
        ];
        let quantified = (
            atom,
            prop::sample::select(vec![
                "", "", "", "*", "+", "?", "{2}", "{1,}", "{0,2}", "*?", "+?",
            ]),
        )
            .prop_map(|(a, q)| format!("{a}{q}"));
        let seq = prop::collection::vec(quantified, 0..4).prop_map(|parts| parts.concat());
        let group = seq.clone().prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..3).prop_map(|alts| alts.join("|")),
                (
                    inner.clone(),
                    prop::sample::select(vec!["", "*", "?", "+", "{1,2}"])
                )
                    .prop_map(|(g, q)| format!("({g}){q}")),
                (inner, prop::sample::select(vec!["", "*", "?"]))
                    .prop_map(|(g, q)| format!("(?:{g}){q}")),
            ]
        });
        let structured =
            (prop::bool::ANY, group, prop::bool::ANY).prop_map(|(start, body, end)| {
                format!(
                    "{}{body}{}",
                    if start { "^" } else { "" },
                    if end { "$" } else { "" }
                )
            });
        // Arbitrary strings of regex syntax: whatever of these compiles must still agree.
        let noise = prop::collection::vec(
            prop::sample::select(vec![
                'a', 'b', '\\', '[', ']', '(', ')', '?', '*', '+', '{', '}', '1', '2', ',', '-',
                '^', '$', '|', '.', 'd', 'w', 's', 'S', 'b', 'B', ':', '=', '!', '<', 'u', 'x',
                'c', 'n', '0', '/', '&', '~', 'é',
            ]),
            0..10,
        )
        .prop_map(|chars| chars.into_iter().collect::<String>());
        prop_oneof![3 => structured, 2 => noise]
    }

    fn subject_strategy() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                'a', 'b', 'c', 'é', 'ü', '1', '٣', ' ', '\n', '\r', '\u{2028}', '\u{feff}',
                '\u{85}', '\u{a0}', '-', '.', '_', '/', '😀', '^', ']', '\t',
            ]),
            0..6,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    #[test]
    fn random_schemas_mostly_compile() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut compiled = 0;
        let total = 300;
        for _ in 0..total {
            let schema = proptest::strategy::ValueTree::current(
                &root_schema().new_tree(&mut runner).expect("strategy"),
            );
            if FastValidator::compile(&schema).is_some() {
                compiled += 1;
            }
        }
        assert!(
            compiled * 2 > total,
            "only {compiled} of {total} random schemas compiled"
        );
    }

    #[test]
    fn schemars_schemas_agree_on_random_documents() {
        for schema in [
            tool_schema::<derived::Greet>(),
            tool_schema::<derived::Ten>(),
            tool_schema::<derived::Inner>(),
            tool_schema::<derived::Shape>(),
        ] {
            for seed in 1..400 {
                agree_on(&schema, seed * 7919).expect("agreement");
            }
        }
    }
}
