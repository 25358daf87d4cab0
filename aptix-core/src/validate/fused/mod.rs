//! Validation fused into the typed parse: one pass over a tool's raw JSON arguments that checks
//! them against the tool's JSON Schema *while* deserializing them into the Rust arguments type.
//!
//! # Why this is hand-written
//!
//! `jsonschema` is the reference validator of Aptix and stays so: it writes every error message
//! a model is shown, and it is the exact path for anything this module cannot vouch for. But it
//! validates a materialized [`serde_json::Value`], and the typed parse that must follow reads the
//! text a second time; on the dispatch hot path that costs more than the typed parse itself.
//! [`FusedValidator`] reads the text once: it wraps `serde_json`'s deserializer (the way
//! `serde_path_to_error` and `serde_ignored` do) in a [`serde::Deserializer`] that carries the
//! current schema node, hands the arguments type's own `Deserialize` a wrapping
//! [`serde::de::Visitor`] that checks the node's keywords on every `visit_*` call, and wraps
//! `MapAccess`/`SeqAccess` so that every member and item is checked against its subschema. A
//! violation is a custom deserialization error, and [`FusedValidator::parse`] then answers
//! `None`.
//!
//! `None` means "invalid, or not sure": the caller takes the exact path (a `Value` and
//! `jsonschema`, then the typed parse of [`FusedValidator::parse_open`]), which also writes the
//! error messages. So `None` is always safe, and
//! only `Some` has to be sound: `Some(args)` only if `jsonschema` accepts the document *and*
//! `serde_json::from_str::<A>` yields the same `args`. The tests check exactly that on thousands
//! of generated documents (valid ones for each Rust type and for random schemas, and mutations of
//! them: wrong types, missing and unknown members, out-of-range and float-for-integer numbers,
//! nulls, duplicate keys, escapes, malformed text), against `jsonschema` and plain `serde_json`,
//! and that valid documents are (all but never) declined.
//!
//! # Why one pass is exact
//!
//! Every token `serde_json` reads reaches one of the wrapping visitors, whatever the Rust type
//! asks for, so what is checked is the document `jsonschema` would see:
//!
//! * Values the type skips (unknown members, read with `deserialize_ignored_any`) are read with
//!   `deserialize_any` and checked like the rest (`serde_json`'s skipping would not even reject
//!   the lone surrogates and out-of-range numbers that make the `Value` parse fail). Members
//!   `additionalProperties: false` forbids are refused as soon as their name is read.
//! * Numbers arrive through the very calls a `Value` parse makes (`u64`, negative `i64`, `f64`)
//!   and are compared exactly across representations, as `jsonschema` does (`1 == 1.0`). A float
//!   where the type wants an integer passes the schema's `integer` but fails the type: `None`.
//! * Map-shaped types (`flatten`, untagged buffering into `Content`) still read every member
//!   through the wrapped `MapAccess`, so they are checked as objects; a shape the node cannot
//!   have (an object at a string node) is refused by the node's `type`.
//! * Duplicate member names are refused (`None`), as the exact path refuses them: a `Value`
//!   would keep the last, while a type that buffers (an untagged enum) may pick another.
//! * `required`, `minItems`/`maxItems` and the member counts are checked when the typed visitor
//!   returns, which covers visitors that stop before the end (`serde_json` then fails on the
//!   remaining items itself).
//! * Any error on its way back to the type, whether a refusal of ours or `serde_json`'s own, is
//!   remembered: a type whose `Deserialize` swallows errors (a lenient `deserialize_with`) cannot
//!   turn a refused value into `Some`.
//! * `deserialize_enum` is read as a string (unit variants; enums with data have `oneOf`s of
//!   objects and decline); 128-bit integers, `f32`, bytes and `RawValue` decline, and so does any
//!   member named `$serde_json::private::RawValue`, which a `Value` parse reads differently.
//! * Nesting depth is `serde_json`'s (128); the validator adds no recursion of its own beyond a
//!   bounded chain of `$ref`/`anyOf`/`oneOf` on the same value.
//!
//! # Cost
//!
//! Nodes carry the scalar kinds they accept unconditionally (one test for an unconstrained
//! field), number bounds are compared as `f64` where that is exact, and `^[class]+$`-shaped
//! patterns are a bitmap test instead of a regex search (checked against the regex when
//! compiled).
//!
//! # Layout
//!
//! This file holds the compiled form (nodes and their checks); `compile` builds it from a schema
//! (see [`FusedValidator::compile`] for what compiles and what declines), `deserializer` is the
//! wrapping deserializer, `numbers` compares numbers and `enum` values as `jsonschema` does, and
//! `pattern` translates `pattern` to the `regex` crate.

mod compile;
mod deserializer;
mod numbers;
mod pattern;
#[cfg(test)]
mod schema_tests;

#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::sync::LazyLock;

use serde::de::{self, DeserializeOwned};
use serde_json::de::StrRead;

use deserializer::{Checked, Cx};
use numbers::{EnumSet, Num, Scalar, cmp_num, is_multiple_of};
use pattern::Pattern;

/// The checking deserializer of a document's root, over `serde_json`'s.
type Root<'v, 'de> = Checked<'v, &'v mut serde_json::Deserializer<StrRead<'de>>>;

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
/// Longest chain of `$ref`/`anyOf`/`oneOf` that apply to the same instance.
const MAX_CHAIN: u32 = 32;
/// Most `properties` (and `required` names) of one object schema: one bit each in a `u64`.
const MAX_SLOTS: usize = 64;
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

/// A schema compiled for validating while deserializing.
#[derive(Debug)]
pub(crate) struct FusedValidator {
    nodes: Vec<Node>,
    root: Id,
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    /// The scalar kinds (`T_*` bits, `T_INT` standing for every number) valid here whatever
    /// their value: the common unconstrained field costs one test.
    free: u8,
    /// How an array instance is checked.
    arr: Route,
    /// How an object instance is checked.
    obj: Route,
}

#[derive(Debug)]
enum Kind {
    Any,
    Never,
    /// Only during compilation: an alias resolved before use.
    Ref(Id),
    Checks(Box<Checks>),
    /// Only where at most one branch can accept an array, and at most one an object.
    AnyOf(Box<[Id]>),
    /// Likewise.
    OneOf(Box<[Id]>),
}

/// How a node checks a container instance, decided at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Every instance of this kind is invalid.
    Reject,
    /// Every instance of this kind is valid (its members are still read through the wrappers).
    Accept,
    /// Checked by the `Checks` node with this id.
    Stream(Id),
}

/// The assertion keywords of one schema object; all of them must hold.
#[derive(Debug)]
struct Checks {
    types: u8,
    /// `enum` and `const`, scalars only.
    enums: Vec<EnumSet>,
    minimum: Option<Num>,
    maximum: Option<Num>,
    exclusive_minimum: Option<Num>,
    exclusive_maximum: Option<Num>,
    multiple_of: Option<u64>,
    /// The four bounds as exact `f64`s (absent ones infinite), when all of them are exact.
    float_bounds: Option<[f64; 4]>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Pattern>,
    prefix_items: Vec<Id>,
    items: Id,
    min_items: Option<u64>,
    max_items: Option<u64>,
    /// `properties` and `required` names, sorted by (length, name).
    slots: Vec<Slot>,
    /// `slot_ranges[len]`: the range of `slots` whose names are `len` bytes long.
    slot_ranges: Vec<(u32, u32)>,
    /// One bit per required slot.
    required_mask: u64,
    additional: Id,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
}

/// The checks of `true`: containers whose members are read but not constrained.
static OPEN: Checks = Checks::OPEN;

impl Checks {
    /// No constraint: what `true` checks, and where a schema's compilation starts.
    const OPEN: Checks = Checks {
        types: T_ALL,
        enums: Vec::new(),
        minimum: None,
        maximum: None,
        exclusive_minimum: None,
        exclusive_maximum: None,
        multiple_of: None,
        float_bounds: None,
        min_length: None,
        max_length: None,
        pattern: None,
        prefix_items: Vec::new(),
        items: ANY,
        min_items: None,
        max_items: None,
        slots: Vec::new(),
        slot_ranges: Vec::new(),
        required_mask: 0,
        additional: ANY,
        min_properties: None,
        max_properties: None,
    };
}

impl Default for Checks {
    fn default() -> Self {
        Checks::OPEN
    }
}

#[derive(Debug)]
struct Slot {
    name: Box<str>,
    /// The subschema of this member: its `properties` entry, else `additionalProperties`.
    node: Id,
}

impl FusedValidator {
    /// None when the schema uses anything this validator cannot check exactly in one pass.
    ///
    /// Checked exactly: `type` (one name or a list), `enum` and `const` (of scalars),
    /// `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf` (whole divisors
    /// up to 2^53), `minLength`/`maxLength` (in code points), `pattern` (a subset of ECMA-262,
    /// see below), `items`, `prefixItems`, `minItems`, `maxItems`, `uniqueItems: false`,
    /// `properties` (up to 64 with the `required` names), `required`, `additionalProperties`,
    /// `minProperties`, `maxProperties`, `$ref` to `#` or `#/$defs/Name` (recursion included),
    /// root `$defs`, boolean schemas, `allOf` with a single branch, and `anyOf`/`oneOf` whose
    /// branches can be told apart by the instance's kind: any branches for scalars (each is
    /// evaluated on the scalar), but at most one that can accept an array and at most one that
    /// can accept an object. That covers schemars' nullable forms (`anyOf: [X, {"type":
    /// "null"}]`, `type: [T, "null"]`) and its enums of documented unit variants (`oneOf` of
    /// `const` strings). The annotations `title`, `description`, `$comment`, `default`,
    /// `examples`, `deprecated`, `readOnly`, `writeOnly` and `format` are ignored, as
    /// `jsonschema` ignores them by default.
    ///
    /// Returns `None` for: any other keyword (`$schema`, `$id`, `allOf` with several branches,
    /// `not`, `if`, `patternProperties`, `contains`, `uniqueItems: true`, ...); assertion
    /// keywords beside `$ref`/`anyOf`/`oneOf`; `anyOf`/`oneOf` with two branches that can accept
    /// the same container kind (untagged or internally tagged enums, enums with data); `enum` or
    /// `const` with arrays or objects; `$defs` below the root; a `$ref` of any other form or to a
    /// missing definition; a fractional or huge `multipleOf`; a size limit that is not a plain
    /// non-negative integer; a `pattern` outside the subset (lookaround, backreferences, `\b`,
    /// `\x`, `\u`, Annex B oddities, ...); a `$ref` cycle that never descends into the instance,
    /// or a chain of more than 32; a schema nested deeper than 64 levels; more than 64 property
    /// names in one object schema, or a name over 1 KiB; keyword values of the wrong type; and
    /// a build of `serde_json` with `arbitrary_precision`.
    ///
    /// The `pattern` subset: literal characters, the escapes `\d \D \w \W \s \S \t \n \r \f \v`
    /// and escaped syntax characters, `.`, `^`, `$`, `|`, `(...)`, `(?:...)`, classes `[...]` /
    /// `[^...]` of characters, ranges and `\d \w \s \D \W \S`, and the quantifiers
    /// `* + ? {n} {n,} {n,m}`, greedy or lazy; translated as `jsonschema` translates them.
    pub(crate) fn compile(schema: &serde_json::Value) -> Option<FusedValidator> {
        compile::compile(schema)
    }

    /// Some(args) only if `raw` is valid against the schema AND deserializes into `A`.
    /// None means "invalid or not sure": the caller then takes the slow, exact path
    /// (which produces the error messages). So None is always safe; Some must be sound.
    #[inline]
    pub(crate) fn parse<A: DeserializeOwned>(&self, raw: &str) -> Option<A> {
        self.deserialize(raw, None).ok()
    }

    /// `text` parsed into `A` the way `serde_json` parses it, nothing checked: the exact path's
    /// typed parse of a document `jsonschema` has accepted. On an error, `trace` holds the
    /// member names and item indexes it passed, innermost first.
    ///
    /// It is [`FusedValidator::parse`]'s read of the always-valid schema, with what that read
    /// declines handed to `serde_json`, instead of a second deserializer (`serde_path_to_error`
    /// over the `Value`, which it replaces): each arguments type's `Deserialize` is then built
    /// once, for this deserializer, not twice, and that is most of the code every tool adds to
    /// a build. The path it reports stops at an enum's data, which `serde_json` reads unseen.
    pub(crate) fn parse_open<A: DeserializeOwned>(
        text: &str,
        trace: &RefCell<Vec<String>>,
    ) -> Result<A, serde_json::Error> {
        static ANYTHING: LazyLock<Option<FusedValidator>> =
            LazyLock::new(|| FusedValidator::compile(&serde_json::Value::Bool(true)));
        match &*ANYTHING {
            Some(anything) => anything.deserialize(text, Some(trace)),
            // A `serde_json` whose numbers this reader cannot hold exactly (`arbitrary_precision`
            // in the build): its own parse, without a path.
            None => serde_json::from_str(text),
        }
    }

    /// The one generic step of a read: `A` from the checking deserializer. Shared by
    /// [`FusedValidator::parse`] and [`FusedValidator::parse_open`].
    #[inline]
    fn deserialize<A: DeserializeOwned>(
        &self,
        raw: &str,
        trace: Option<&RefCell<Vec<String>>>,
    ) -> Result<A, serde_json::Error> {
        let mut args = None;
        self.read(raw, trace, &mut |checked| {
            args = Some(A::deserialize(checked)?);
            Ok(())
        })?;
        args.ok_or_else(|| de::Error::custom("no value read"))
    }

    /// One read of `raw`: `deserialize` reads the document through the checking deserializer
    /// of the root node; `Ok` if it succeeded, the text ended there and no check failed on the
    /// way. Apart from [`FusedValidator::deserialize`], so that the set-up is not built again
    /// for every arguments type.
    fn read(
        &self,
        raw: &str,
        trace: Option<&RefCell<Vec<String>>>,
        deserialize: &mut dyn FnMut(Root<'_, '_>) -> Result<(), serde_json::Error>,
    ) -> Result<(), serde_json::Error> {
        let cx = Cx {
            v: self,
            failed: Cell::new(false),
            trace,
        };
        let mut deserializer = serde_json::Deserializer::from_str(raw);
        deserialize(Checked {
            cx: &cx,
            id: self.root,
            de: &mut deserializer,
        })?;
        deserializer.end()?;
        if cx.failed.get() && trace.is_none() {
            return Err(de::Error::custom("not provably valid against the schema"));
        }
        Ok(())
    }

    fn node(&self, id: Id) -> &Node {
        static NEVER_NODE: Node = Node {
            kind: Kind::Never,
            free: 0,
            arr: Route::Reject,
            obj: Route::Reject,
        };
        self.nodes.get(id as usize).unwrap_or(&NEVER_NODE)
    }

    /// [`Self::scalar`] with the common case, a plain schema object, inlined into the visitor.
    #[inline(always)]
    fn leaf(&self, id: Id, value: Scalar<'_>) -> bool {
        let node = self.node(id);
        let bit = match value {
            Scalar::Null => T_NULL,
            Scalar::Bool(_) => T_BOOL,
            Scalar::Num(_) => T_INT,
            Scalar::Str(_) => T_STR,
        };
        if node.free & bit != 0 {
            return true;
        }
        match &node.kind {
            Kind::Checks(checks) => checks.scalar(value),
            Kind::Any => true,
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
            Kind::OneOf(branches) => {
                let mut matched = false;
                for &branch in branches {
                    if self.scalar(branch, value) {
                        if matched {
                            return false;
                        }
                        matched = true;
                    }
                }
                matched
            }
        }
    }

    /// The checks a container instance is held to, or None if it is invalid here.
    #[inline]
    fn container(&self, route: Route) -> Option<&Checks> {
        match route {
            Route::Reject => None,
            Route::Accept => Some(&OPEN),
            Route::Stream(id) => match &self.node(id).kind {
                Kind::Checks(checks) => Some(checks),
                _ => None,
            },
        }
    }
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
        if !typed || !(self.enums.is_empty() || self.enums.iter().all(|e| e.has(value))) {
            return false;
        }
        match value {
            Scalar::Num(n) => self.number_ok(n),
            Scalar::Str(s) => self.string_ok(s),
            Scalar::Null | Scalar::Bool(_) => true,
        }
    }

    #[inline]
    fn number_ok(&self, n: Num) -> bool {
        if let Some([min, max, exclusive_min, exclusive_max]) = self.float_bounds
            && let Some(x) = n.exact_f64()
        {
            // Exact: both sides are exactly the numbers they stand for.
            return x >= min
                && x <= max
                && x > exclusive_min
                && x < exclusive_max
                && self.multiple_of.is_none_or(|d| is_multiple_of(n, d));
        }
        self.number_ok_exactly(n)
    }

    fn number_ok_exactly(&self, n: Num) -> bool {
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

    /// Fills [`Checks::float_bounds`] when every bound is an exact `f64`.
    fn prepare_float_bounds(&mut self) {
        let bound = |b: Option<Num>, absent: f64| match b {
            None => Some(absent),
            Some(n) => n.exact_f64(),
        };
        self.float_bounds = (|| {
            Some([
                bound(self.minimum, f64::NEG_INFINITY)?,
                bound(self.maximum, f64::INFINITY)?,
                bound(self.exclusive_minimum, f64::NEG_INFINITY)?,
                bound(self.exclusive_maximum, f64::INFINITY)?,
            ])
        })();
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

    fn counts_members(&self) -> bool {
        self.min_properties.is_some() || self.max_properties.is_some()
    }

    /// True when no keyword here constrains anything.
    fn is_trivial(&self) -> bool {
        self.types == T_ALL
            && self.enums.is_empty()
            && self.minimum.is_none()
            && self.maximum.is_none()
            && self.exclusive_minimum.is_none()
            && self.exclusive_maximum.is_none()
            && self.multiple_of.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
            && self.pattern.is_none()
            && self.accepts_all_arrays()
            && self.accepts_all_objects()
    }

    fn accepts_all_arrays(&self) -> bool {
        self.prefix_items.iter().all(|&id| id == ANY)
            && self.items == ANY
            && self.min_items.is_none()
            && self.max_items.is_none()
    }

    fn accepts_all_objects(&self) -> bool {
        self.slots.iter().all(|slot| slot.node == ANY)
            && self.required_mask == 0
            && self.additional == ANY
            && self.min_properties.is_none()
            && self.max_properties.is_none()
    }

    fn route(&self, id: Id, kind: u8) -> Route {
        // `enum`/`const` hold scalars only, so no container equals one of their values.
        if self.types & kind == 0 || !self.enums.is_empty() {
            return Route::Reject;
        }
        let trivial = if kind == T_ARR {
            self.accepts_all_arrays()
        } else {
            self.accepts_all_objects()
        };
        if trivial {
            Route::Accept
        } else {
            Route::Stream(id)
        }
    }
}
