//! Validation fused into the typed parse: one pass over a tool's raw JSON arguments that checks
//! them against the tool's JSON Schema *while* deserializing them into the Rust arguments type.
//!
//! # Why this is hand-written
//!
//! `jsonschema` is the reference validator of Aptix and stays so: it produces every error message
//! a model is shown, and it is the exact path for anything this module cannot vouch for. But it
//! validates a materialized [`serde_json::Value`], and the typed parse that must follow reads the
//! text a second time. [`super::fast::FastValidator`] removed the `Value`, yet still walks the
//! text twice (validate, then parse); on the dispatch hot path that second walk costs as much as
//! the typed parse itself. [`FusedValidator`] walks it once: it wraps `serde_json`'s deserializer
//! (the way `serde_path_to_error` and `serde_ignored` do) in a [`Deserializer`] that carries the
//! current schema node, hands the arguments type's own `Deserialize` a wrapping [`Visitor`] that
//! checks the node's keywords on every `visit_*` call, and wraps [`MapAccess`]/[`SeqAccess`] so
//! that every member and item is checked against its subschema. A violation is a custom
//! deserialization error, and [`FusedValidator::parse`] then answers `None`.
//!
//! `None` means "invalid, or not sure": the caller takes the slow, exact path (`Value` +
//! `jsonschema` + `serde_path_to_error`), which also writes the error messages. So `None` is
//! always safe, and only `Some` has to be sound: `Some(args)` only if `jsonschema` accepts the
//! document *and* `serde_json::from_str::<A>` yields the same `args`. The property tests at the
//! bottom of this file check exactly that on thousands of generated documents (valid ones for
//! each Rust type, and mutations of them: wrong types, missing and unknown members, out-of-range
//! and float-for-integer numbers, nulls, duplicate keys, escapes, malformed text), against
//! `jsonschema` and plain `serde_json`, and that valid documents are (all but never) declined.
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
//!   objects and decline); 128-bit integers, `f32`, bytes and `RawValue` decline, and so does any member
//!   named `$serde_json::private::RawValue`, which a `Value` parse reads differently.
//! * Nesting depth is `serde_json`'s (128); the validator adds no recursion of its own beyond a
//!   bounded chain of `$ref`/`anyOf`/`oneOf` on the same value.
//!
//! # Cost
//!
//! Measured in release on the scratch benchmark (best of interleaved rounds; callgrind
//! instruction counts in brackets), against plain `serde_json::from_str`: a one-string struct
//! 1.2x [1.25x], a ten-field constrained struct 1.3x [1.36x]; `fast` + typed parse was 2.3x and
//! 2.4x, and the `Value` + `jsonschema` path 3.1x and 3.9x. Nodes carry the scalar kinds they
//! accept unconditionally (one test for an unconstrained field), number bounds are compared as
//! `f64` where that is exact, and `^[class]+$`-shaped patterns are a bitmap test instead of a
//! regex search (checked against the regex when compiled).
//!
//! # What compiles, and what declines
//!
//! See [`FusedValidator::compile`]. Everything declined is left to the exact path.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use super::pattern::{MAX_REPEAT, translate_pattern};
use serde::de::value::{BorrowedStrDeserializer, StrDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess,
    Visitor,
};
use serde_json::{Number, Value};

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

/// The member name `serde_json` (with its `raw_value` feature, on in Aptix's workspace) reserves
/// for raw values: a `Value` parse reads such an object differently from a typed parse, so any
/// member of that name is declined.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// A schema compiled for validating while deserializing.
#[derive(Debug)]
pub struct FusedValidator {
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
static OPEN: Checks = Checks {
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

/// The values of one `enum` (or a `const`), split by kind; scalars only.
#[derive(Debug, Default)]
struct EnumSet {
    null: bool,
    yes: bool,
    no: bool,
    nums: Vec<Num>,
    /// Sorted and deduplicated.
    strs: Vec<Box<str>>,
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
    pub fn compile(schema: &serde_json::Value) -> Option<FusedValidator> {
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

    /// Some(args) only if `raw` is valid against the schema AND deserializes into `A`.
    /// None means "invalid or not sure": the caller then takes the slow, exact path
    /// (which produces the error messages). So None is always safe; Some must be sound.
    pub fn parse<A: DeserializeOwned>(&self, raw: &str) -> Option<A> {
        let cx = Cx {
            v: self,
            failed: Cell::new(false),
        };
        let mut deserializer = serde_json::Deserializer::from_str(raw);
        let args = A::deserialize(Checked {
            cx: &cx,
            id: self.root,
            de: &mut deserializer,
        })
        .ok()?;
        deserializer.end().ok()?;
        (!cx.failed.get()).then_some(args)
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

// ----- the wrapping deserializer -----

/// One parse's context. `failed` is sticky: a type whose `Deserialize` swallows an error (a
/// lenient `deserialize_with`, say) must not turn a refused or malformed value into `Some`.
struct Cx<'a> {
    v: &'a FusedValidator,
    failed: Cell<bool>,
}

impl Cx<'_> {
    /// The refusal that makes [`FusedValidator::parse`] answer `None`.
    #[cold]
    fn fail<E: de::Error>(&self) -> E {
        self.failed.set(true);
        E::custom("not provably valid against the schema")
    }

    /// Remembers any error on its way back to the type, whoever raised it.
    #[inline(always)]
    fn watch<T, E>(&self, result: Result<T, E>) -> Result<T, E> {
        if result.is_err() {
            self.failed.set(true);
        }
        result
    }
}

/// `de`, whose next value must be valid against node `id`.
struct Checked<'v, D> {
    cx: &'v Cx<'v>,
    id: Id,
    de: D,
}

/// `seed`, whose value must be valid against node `id`.
struct CheckedSeed<'v, S> {
    cx: &'v Cx<'v>,
    id: Id,
    seed: S,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for CheckedSeed<'_, S> {
    type Value = S::Value;

    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Checked {
            cx: self.cx,
            id: self.id,
            de,
        })
    }
}

macro_rules! forward_checked {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {$(
        #[inline]
        fn $method<V: Visitor<'de>>(
            self,
            $($($arg: $ty,)*)?
            visitor: V,
        ) -> Result<V::Value, D::Error> {
            self.cx.watch(self.de.$method($($($arg,)*)? Check::<V, false> {
                cx: self.cx,
                id: self.id,
                inner: visitor,
            }))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Checked<'_, D> {
    type Error = D::Error;

    forward_checked! {
        deserialize_any;
        deserialize_bool;
        deserialize_i8;
        deserialize_i16;
        deserialize_i32;
        deserialize_i64;
        deserialize_u8;
        deserialize_u16;
        deserialize_u32;
        deserialize_u64;
        deserialize_f64;
        deserialize_char;
        deserialize_str;
        deserialize_string;
        deserialize_option;
        deserialize_unit;
        deserialize_seq;
        deserialize_map;
        deserialize_identifier;
        deserialize_unit_struct(name: &'static str);
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
    }

    /// With `float_roundtrip` (which `jsonschema` turns on), `serde_json` parses an `f32` target
    /// at single precision, so the number checked here would be the rounded one, not the one
    /// `jsonschema` checks: declined.
    fn deserialize_f32<V: Visitor<'de>>(self, _: V) -> Result<V::Value, D::Error> {
        Err(self.cx.fail())
    }

    /// `serde_json` reads 128-bit integers with its own scanner, whose number can differ in
    /// representation from the `Value` parse's: declined.
    fn deserialize_i128<V: Visitor<'de>>(self, _: V) -> Result<V::Value, D::Error> {
        Err(self.cx.fail())
    }

    fn deserialize_u128<V: Visitor<'de>>(self, _: V) -> Result<V::Value, D::Error> {
        Err(self.cx.fail())
    }

    /// `serde_json` reads a string as bytes without the checks a `Value` parse makes: declined.
    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> Result<V::Value, D::Error> {
        Err(self.cx.fail())
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value, D::Error> {
        Err(self.cx.fail())
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // `Box<RawValue>` skips the text unseen.
        if name == RAW_TOKEN {
            return Err(self.cx.fail());
        }
        self.cx.watch(self.de.deserialize_newtype_struct(
            name,
            Check::<V, false> {
                cx: self.cx,
                id: self.id,
                inner: visitor,
            },
        ))
    }

    /// Only unit variants, written as strings (the only enums whose schemas compile): the string
    /// is checked, then handed to the type as the variant name. The object form `{"A": null}`
    /// that `serde_json` also accepts is not a string, so it fails the node's `type`.
    #[inline]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.cx.watch(self.de.deserialize_str(Check::<V, true> {
            cx: self.cx,
            id: self.id,
            inner: visitor,
        }))
    }

    /// A value the type skips is still read in full and checked.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.cx
            .watch(self.de.deserialize_any(Check::<IgnoredAny, false> {
                cx: self.cx,
                id: self.id,
                inner: IgnoredAny,
            }))?;
        self.cx.watch(visitor.visit_unit())
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// The type's visitor, behind the checks of node `id`. With `ENUM`, a string is handed on as
/// the name of a unit variant.
struct Check<'v, V, const ENUM: bool> {
    cx: &'v Cx<'v>,
    id: Id,
    inner: V,
}

impl<V, const ENUM: bool> Check<'_, V, ENUM> {
    #[inline(always)]
    fn leaf<E: de::Error>(&self, value: Scalar<'_>) -> Result<(), E> {
        if self.cx.v.leaf(self.id, value) {
            Ok(())
        } else {
            Err(self.cx.fail())
        }
    }
}

impl<'de, V: Visitor<'de>, const ENUM: bool> Visitor<'de> for Check<'_, V, ENUM> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    #[inline]
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<V::Value, E> {
        self.leaf(Scalar::Bool(b))?;
        self.inner.visit_bool(b)
    }

    #[inline]
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<V::Value, E> {
        self.leaf(Scalar::Num(Num::of_i64(n)))?;
        self.inner.visit_i64(n)
    }

    #[inline]
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<V::Value, E> {
        self.leaf(Scalar::Num(Num::U(n)))?;
        self.inner.visit_u64(n)
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<V::Value, E> {
        Err(self.cx.fail())
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<V::Value, E> {
        Err(self.cx.fail())
    }

    #[inline]
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<V::Value, E> {
        // `serde_json` never reads a non-finite number; a `Value` would hold it as `null`.
        if !f.is_finite() {
            return Err(self.cx.fail());
        }
        self.leaf(Scalar::Num(Num::F(f)))?;
        self.inner.visit_f64(f)
    }

    #[inline]
    fn visit_str<E: de::Error>(self, s: &str) -> Result<V::Value, E> {
        self.leaf(Scalar::Str(s))?;
        if ENUM {
            self.inner.visit_enum(StrDeserializer::new(s))
        } else {
            self.inner.visit_str(s)
        }
    }

    #[inline]
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<V::Value, E> {
        self.leaf(Scalar::Str(s))?;
        if ENUM {
            self.inner.visit_enum(BorrowedStrDeserializer::new(s))
        } else {
            self.inner.visit_borrowed_str(s)
        }
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<V::Value, E> {
        self.leaf(Scalar::Str(&s))?;
        if ENUM {
            self.inner.visit_enum(StringDeserializer::new(s))
        } else {
            self.inner.visit_string(s)
        }
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<V::Value, E> {
        Err(self.cx.fail())
    }

    fn visit_borrowed_bytes<E: de::Error>(self, _: &'de [u8]) -> Result<V::Value, E> {
        Err(self.cx.fail())
    }

    fn visit_byte_buf<E: de::Error>(self, _: Vec<u8>) -> Result<V::Value, E> {
        Err(self.cx.fail())
    }

    #[inline]
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.leaf(Scalar::Null)?;
        self.inner.visit_none()
    }

    #[inline]
    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Checked {
            cx: self.cx,
            id: self.id,
            de,
        })
    }

    #[inline]
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.leaf(Scalar::Null)?;
        self.inner.visit_unit()
    }

    #[inline]
    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Checked {
            cx: self.cx,
            id: self.id,
            de,
        })
    }

    #[inline]
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let Some(checks) = self.cx.v.container(self.cx.v.node(self.id).arr) else {
            return Err(self.cx.fail());
        };
        let mut access = CheckedSeq {
            cx: self.cx,
            checks,
            seq,
            count: 0,
        };
        let value = self.inner.visit_seq(&mut access)?;
        // Also right when the visitor stopped early: `serde_json` then fails on any item left.
        if checks.item_count_ok(access.count) {
            Ok(value)
        } else {
            Err(self.cx.fail())
        }
    }

    #[inline]
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let Some(checks) = self.cx.v.container(self.cx.v.node(self.id).obj) else {
            return Err(self.cx.fail());
        };
        let mut access = CheckedMap {
            cx: self.cx,
            checks,
            map,
            present: 0,
            next: NEVER,
            extra: None,
        };
        let value = self.inner.visit_map(&mut access)?;
        if access.complete() {
            Ok(value)
        } else {
            Err(self.cx.fail())
        }
    }

    /// `serde_json` calls this only from `deserialize_enum`, which [`Checked`] never forwards.
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<V::Value, A::Error> {
        Err(self.cx.fail())
    }
}

/// The items of an array, each checked against `prefixItems`/`items`.
struct CheckedSeq<'v, A> {
    cx: &'v Cx<'v>,
    checks: &'v Checks,
    seq: A,
    count: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for CheckedSeq<'_, A> {
    type Error = A::Error;

    #[inline]
    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        let id = self
            .checks
            .prefix_items
            .get(self.count)
            .copied()
            .unwrap_or(self.checks.items);
        let item = self.cx.watch(self.seq.next_element_seed(CheckedSeed {
            cx: self.cx,
            id,
            seed,
        }))?;
        if item.is_some() {
            self.count = self.count.saturating_add(1);
        }
        Ok(item)
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// The members of an object: each name looked up among the slots (or refused by
/// `additionalProperties: false`), each value checked against its subschema.
struct CheckedMap<'v, A> {
    cx: &'v Cx<'v>,
    checks: &'v Checks,
    map: A,
    /// One bit per slot seen.
    present: u64,
    /// The subschema of the value to be read next.
    next: Id,
    /// The other names seen, to refuse a duplicate.
    extra: Option<HashSet<String>>,
}

impl<A> CheckedMap<'_, A> {
    fn complete(&self) -> bool {
        let required = self.checks.required_mask;
        if self.present & required != required {
            return false;
        }
        if self.checks.counts_members() {
            let count =
                self.present.count_ones() as usize + self.extra.as_ref().map_or(0, HashSet::len);
            return self.checks.member_count_ok(count);
        }
        true
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for CheckedMap<'_, A> {
    type Error = A::Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut found = Found::Nothing;
        let key = self.cx.watch(self.map.next_key_seed(KeySeed {
            seed,
            cx: self.cx,
            checks: self.checks,
            found: &mut found,
        }))?;
        if key.is_some() {
            match found {
                // The name never reached a string visitor (a number-keyed map, say).
                Found::Nothing => return Err(self.cx.fail()),
                Found::Slot(index) => {
                    let bit = 1u64.checked_shl(index).unwrap_or(0);
                    if self.present & bit != 0 {
                        return Err(self.cx.fail());
                    }
                    self.present |= bit;
                    self.next = self
                        .checks
                        .slots
                        .get(index as usize)
                        .map_or(NEVER, |slot| slot.node);
                }
                Found::Extra(name) => {
                    self.next = self.checks.additional;
                    if !self.extra.get_or_insert_default().insert(name) {
                        return Err(self.cx.fail());
                    }
                }
            }
        }
        Ok(key)
    }

    #[inline]
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        let id = std::mem::replace(&mut self.next, NEVER);
        self.cx.watch(self.map.next_value_seed(CheckedSeed {
            cx: self.cx,
            id,
            seed,
        }))
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// What a member name turned out to be.
enum Found {
    Nothing,
    Slot(u32),
    /// Not a slot.
    Extra(String),
}

/// The type's seed for a member name, recording the name as it is read.
struct KeySeed<'a, 'v, K> {
    seed: K,
    cx: &'v Cx<'v>,
    checks: &'v Checks,
    found: &'a mut Found,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, '_, K> {
    type Value = K::Value;

    #[inline]
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<K::Value, D::Error> {
        self.seed.deserialize(KeyDe {
            de,
            cx: self.cx,
            checks: self.checks,
            found: self.found,
        })
    }
}

/// The member-name deserializer, letting through only requests that read the name as a string.
struct KeyDe<'a, 'v, D> {
    de: D,
    cx: &'v Cx<'v>,
    checks: &'v Checks,
    found: &'a mut Found,
}

impl<'a, 'v, D> KeyDe<'a, 'v, D> {
    fn visitor<V, const ENUM: bool>(self, inner: V) -> (D, KeyVisitor<'a, 'v, V, ENUM>) {
        (
            self.de,
            KeyVisitor {
                inner,
                cx: self.cx,
                checks: self.checks,
                found: self.found,
            },
        )
    }
}

macro_rules! forward_key {
    ($($method:ident)*) => {$(
        #[inline]
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            let cx = self.cx;
            let (de, visitor) = self.visitor::<V, false>(visitor);
            cx.watch(de.$method(visitor))
        }
    )*};
}

macro_rules! decline_key {
    ($($method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {$(
        fn $method<V: Visitor<'de>>(
            self,
            $($(_: $ty,)*)?
            _: V,
        ) -> Result<V::Value, D::Error> {
            Err(self.cx.fail())
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'_, '_, D> {
    type Error = D::Error;

    forward_key! {
        deserialize_any deserialize_str deserialize_string deserialize_identifier
        deserialize_char deserialize_option
    }

    decline_key! {
        deserialize_bool;
        deserialize_i8;
        deserialize_i16;
        deserialize_i32;
        deserialize_i64;
        deserialize_i128;
        deserialize_u8;
        deserialize_u16;
        deserialize_u32;
        deserialize_u64;
        deserialize_u128;
        deserialize_f32;
        deserialize_f64;
        deserialize_bytes;
        deserialize_byte_buf;
        deserialize_unit;
        deserialize_seq;
        deserialize_map;
        deserialize_unit_struct(name: &'static str);
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if name == RAW_TOKEN {
            return Err(self.cx.fail());
        }
        let cx = self.cx;
        let (de, visitor) = self.visitor::<V, false>(visitor);
        cx.watch(de.deserialize_newtype_struct(name, visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let cx = self.cx;
        let (de, visitor) = self.visitor::<V, true>(visitor);
        cx.watch(de.deserialize_str(visitor))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        let cx = self.cx;
        let (de, ignore) = self.visitor::<IgnoredAny, false>(IgnoredAny);
        cx.watch(de.deserialize_str(ignore))?;
        cx.watch(visitor.visit_unit())
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// The type's visitor for a member name, recording the name first.
struct KeyVisitor<'a, 'v, V, const ENUM: bool> {
    inner: V,
    cx: &'v Cx<'v>,
    checks: &'v Checks,
    found: &'a mut Found,
}

impl<V, const ENUM: bool> KeyVisitor<'_, '_, V, ENUM> {
    #[inline]
    fn record<E: de::Error>(&mut self, name: &str) -> Result<(), E> {
        if name.len() == RAW_TOKEN.len() && name == RAW_TOKEN {
            return Err(self.cx.fail());
        }
        let checks = self.checks;
        *self.found = match find_slot(&checks.slots, &checks.slot_ranges, name) {
            Some(index) => Found::Slot(index),
            None if checks.additional == NEVER => return Err(self.cx.fail()),
            None => Found::Extra(name.to_owned()),
        };
        Ok(())
    }
}

impl<'de, V: Visitor<'de>, const ENUM: bool> Visitor<'de> for KeyVisitor<'_, '_, V, ENUM> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    #[inline]
    fn visit_str<E: de::Error>(mut self, s: &str) -> Result<V::Value, E> {
        self.record(s)?;
        if ENUM {
            self.inner.visit_enum(StrDeserializer::new(s))
        } else {
            self.inner.visit_str(s)
        }
    }

    #[inline]
    fn visit_borrowed_str<E: de::Error>(mut self, s: &'de str) -> Result<V::Value, E> {
        self.record(s)?;
        if ENUM {
            self.inner.visit_enum(BorrowedStrDeserializer::new(s))
        } else {
            self.inner.visit_borrowed_str(s)
        }
    }

    fn visit_string<E: de::Error>(mut self, s: String) -> Result<V::Value, E> {
        self.record(&s)?;
        if ENUM {
            self.inner.visit_enum(StringDeserializer::new(s))
        } else {
            self.inner.visit_string(s)
        }
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(KeyDe {
            de,
            cx: self.cx,
            checks: self.checks,
            found: self.found,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(KeyDe {
            de,
            cx: self.cx,
            checks: self.checks,
            found: self.found,
        })
    }

    // Every other `visit_*` keeps serde's default: an `invalid_type` error.
}

/// The slot named `name`: only the (usually one) slots of its byte length are compared.
#[inline]
fn find_slot(slots: &[Slot], ranges: &[(u32, u32)], name: &str) -> Option<u32> {
    let &(start, end) = ranges.get(name.len())?;
    let offset = slots
        .get(start as usize..end as usize)?
        .iter()
        .position(|slot| same_bytes(slot.name.as_bytes(), name.as_bytes()))?;
    start.checked_add(u32::try_from(offset).ok()?)
}

/// Byte equality without a `memcmp` call: member names are short.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

// ----- numbers (exactly as `jsonschema` compares them) -----

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
    #[inline]
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

    /// The number as an `f64` that is exactly it (integers within ±2^53), if there is one.
    #[inline]
    fn exact_f64(self) -> Option<f64> {
        const LIMIT: u64 = 1 << 53;
        match self {
            Num::F(f) => Some(f),
            Num::U(u) => (u <= LIMIT).then_some(u as f64),
            Num::I(i) => (i.unsigned_abs() <= LIMIT).then_some(i as f64),
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
#[inline]
fn cmp_num(a: Num, b: Num) -> Ordering {
    // The common cases first: same representation compares natively (and exactly).
    match (a, b) {
        (Num::F(x), Num::F(y)) => return x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Num::U(x), Num::U(y)) => return x.cmp(&y),
        _ => {}
    }
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

impl EnumSet {
    /// None if a value is an array or an object.
    fn build(values: &[Value]) -> Option<EnumSet> {
        let mut set = EnumSet::default();
        for value in values {
            match value {
                Value::Null => set.null = true,
                Value::Bool(true) => set.yes = true,
                Value::Bool(false) => set.no = true,
                Value::Number(n) => set.nums.push(Num::of(n)?),
                Value::String(s) => set.strs.push(s.as_str().into()),
                Value::Array(_) | Value::Object(_) => return None,
            }
        }
        set.strs.sort_unstable();
        set.strs.dedup();
        Some(set)
    }

    fn has(&self, value: Scalar<'_>) -> bool {
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
                "enum" => checks.enums.push(EnumSet::build(value.as_array()?)?),
                "const" => checks
                    .enums
                    .push(EnumSet::build(std::slice::from_ref(value))?),
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
                    checks.pattern = Some(Pattern::compile(value.as_str()?)?);
                }
                "items" => checks.items = self.schema(value)?,
                "prefixItems" => checks.prefix_items = self.schemas(value)?.into_vec(),
                "minItems" => checks.min_items = Some(value.as_u64()?),
                "maxItems" => checks.max_items = Some(value.as_u64()?),
                // Uniqueness needs every item at once.
                "uniqueItems" => {
                    if value.as_bool()? {
                        return None;
                    }
                }
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
                "allOf" => match &*self.schemas(value)? {
                    [single] => parts.push(*single),
                    _ => return None,
                },
                _ => return None,
            }
        }
        for &name in &required {
            if !checks.slots.iter().any(|slot| &*slot.name == name) {
                checks.slots.push(Slot {
                    name: name.into(),
                    node: checks.additional,
                });
            }
        }
        if checks.slots.len() > MAX_SLOTS {
            return None;
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
            checks.required_mask |= 1u64.checked_shl(index)?;
        }
        checks.prepare_float_bounds();
        match parts.as_slice() {
            [] if checks.is_trivial() => Some(Kind::Any),
            [] => Some(Kind::Checks(Box::new(checks))),
            // Assertions beside an applicator would need both to hold: declined.
            [single] if checks.is_trivial() => Some(Kind::Ref(*single)),
            _ => None,
        }
    }

    fn finish(mut self) -> Option<FusedValidator> {
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
                Kind::Ref(id) => resolve(id),
                Kind::AnyOf(ids) | Kind::OneOf(ids) => ids.iter_mut().for_each(resolve),
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
        let mut arr_routes: Vec<Option<Route>> = vec![None; len];
        let mut obj_routes: Vec<Option<Route>> = vec![None; len];
        let mut routes = Vec::with_capacity(len);
        for index in 0..len {
            let id = Id::try_from(index).ok()?;
            let arr = route(&self.kinds, id, T_ARR, &mut arr_routes)?;
            let obj = route(&self.kinds, id, T_OBJ, &mut obj_routes)?;
            routes.push((arr, obj));
        }
        let nodes = self
            .kinds
            .into_iter()
            .zip(routes)
            .map(|(kind, (arr, obj))| Node {
                free: free_scalars(&kind),
                kind,
                arr,
                obj,
            })
            .collect();
        Some(FusedValidator { nodes, root })
    }
}

/// [`Node::free`] of a node.
fn free_scalars(kind: &Kind) -> u8 {
    match kind {
        Kind::Any => T_NULL | T_BOOL | T_INT | T_STR,
        Kind::Checks(checks) if checks.enums.is_empty() => {
            let mut free = checks.types & (T_NULL | T_BOOL);
            // `number` takes every number; `integer` alone needs a look at the value.
            let numbers_free = checks.float_bounds
                == Some([
                    f64::NEG_INFINITY,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::INFINITY,
                ])
                && checks.multiple_of.is_none();
            if checks.types & T_NUM != 0 && numbers_free {
                free |= T_INT;
            }
            if checks.types & T_STR != 0
                && checks.min_length.is_none()
                && checks.max_length.is_none()
                && checks.pattern.is_none()
            {
                free |= T_STR;
            }
            free
        }
        _ => 0,
    }
}

fn same_instance_children(kind: &Kind) -> &[Id] {
    match kind {
        Kind::Ref(id) => std::slice::from_ref(id),
        Kind::AnyOf(ids) | Kind::OneOf(ids) => ids,
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

/// How node `id` checks an instance of container `kind` (memoized; the graph is acyclic here);
/// `None` where two branches of an applicator could both take it.
fn route(kinds: &[Kind], id: Id, kind: u8, memo: &mut [Option<Route>]) -> Option<Route> {
    if let Some(Some(known)) = memo.get(id as usize) {
        return Some(*known);
    }
    let computed = match kinds.get(id as usize) {
        None | Some(Kind::Never) => Route::Reject,
        Some(Kind::Any) => Route::Accept,
        Some(Kind::Ref(target)) => route(kinds, *target, kind, memo)?,
        Some(Kind::Checks(checks)) => checks.route(id, kind),
        Some(Kind::AnyOf(branches)) => {
            let routes = branches
                .iter()
                .map(|b| route(kinds, *b, kind, memo))
                .collect::<Option<Vec<Route>>>()?;
            if routes.contains(&Route::Accept) {
                Route::Accept
            } else {
                single(routes)?
            }
        }
        Some(Kind::OneOf(branches)) => {
            let routes = branches
                .iter()
                .map(|b| route(kinds, *b, kind, memo))
                .collect::<Option<Vec<Route>>>()?;
            single(routes)?
        }
    };
    if let Some(slot) = memo.get_mut(id as usize) {
        *slot = Some(computed);
    }
    Some(computed)
}

/// The one branch route that does not reject; `Reject` for none, `None` for several.
fn single(routes: Vec<Route>) -> Option<Route> {
    let mut taking = routes.into_iter().filter(|r| *r != Route::Reject);
    match (taking.next(), taking.next()) {
        (None, _) => Some(Route::Reject),
        (Some(only), None) => Some(only),
        (Some(_), Some(_)) => None,
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

// `pattern`: translated by `super::pattern`, whose subset `fast` proves against `jsonschema`.

/// A compiled `pattern`.
#[derive(Debug)]
enum Pattern {
    Regex(Regex),
    /// `^[set]{min,max}$` over ASCII characters: a bitmap test per byte, no regex engine.
    Run {
        set: [u64; 2],
        min: u64,
        max: u64,
    },
}

impl Pattern {
    fn compile(pattern: &str) -> Option<Pattern> {
        let regex = Regex::new(&translate_pattern(pattern)?).ok()?;
        Some(match run_of(pattern) {
            Some((set, min, max)) if run_agrees(&regex, set, min, max) => {
                Pattern::Run { set, min, max }
            }
            _ => Pattern::Regex(regex),
        })
    }

    #[inline]
    fn is_match(&self, s: &str) -> bool {
        match self {
            Pattern::Regex(regex) => regex.is_match(s),
            Pattern::Run { set, min, max } => {
                let len = s.len() as u64;
                *min <= len
                    && len <= *max
                    && s.bytes().all(|b| {
                        let bit = 1u64 << (b & 63);
                        match b {
                            0..=63 => set[0] & bit != 0,
                            64..=127 => set[1] & bit != 0,
                            _ => false,
                        }
                    })
            }
        }
    }
}

/// `^[class]quantifier$` with a class of ASCII letters, digits, ranges of them, `\d`, `\w` and
/// the characters `_ . @ +` (and `-` first or last): its set and length bounds.
fn run_of(pattern: &str) -> Option<([u64; 2], u64, u64)> {
    let body = pattern.strip_prefix("^[")?.strip_suffix('$')?;
    let (class, quantifier) = body.split_once(']')?;
    let (min, max) = match quantifier {
        "+" => (1, u64::MAX),
        "*" => (0, u64::MAX),
        _ => {
            let bounds = quantifier.strip_prefix('{')?.strip_suffix('}')?;
            let number = |text: &str| {
                text.parse::<u64>()
                    .ok()
                    .filter(|n| *n <= u64::from(MAX_REPEAT))
            };
            match bounds.split_once(',') {
                None => (number(bounds)?, number(bounds)?),
                Some((low, "")) => (number(low)?, u64::MAX),
                Some((low, high)) => (number(low)?, number(high)?),
            }
        }
    };
    if min > max {
        return None;
    }
    let mut set = [0u64; 2];
    let mut add = |c: u8| {
        if let Some(word) = set.get_mut(usize::from(c >> 6)) {
            *word |= 1u64 << (c & 63);
        }
    };
    let chars: Vec<u8> = class.bytes().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            b'\\' => {
                match chars.get(i + 1)? {
                    b'd' => (b'0'..=b'9').for_each(&mut add),
                    b'w' => (b'0'..=b'9')
                        .chain(b'a'..=b'z')
                        .chain(b'A'..=b'Z')
                        .chain([b'_'])
                        .for_each(&mut add),
                    _ => return None,
                }
                i += 2;
            }
            b'-' if i == 0 || i + 1 == chars.len() => {
                add(c);
                i += 1;
            }
            c if c.is_ascii_alphanumeric() => {
                if chars.get(i + 1) == Some(&b'-') && i + 2 < chars.len() {
                    let high = *chars.get(i + 2)?;
                    if !high.is_ascii_alphanumeric() || high < c {
                        return None;
                    }
                    (c..=high).for_each(&mut add);
                    i += 3;
                } else {
                    add(c);
                    i += 1;
                }
            }
            b'_' | b'.' | b'@' | b'+' => {
                if chars.get(i + 1) == Some(&b'-') && i + 2 < chars.len() {
                    return None;
                }
                add(c);
                i += 1;
            }
            _ => return None,
        }
    }
    (set != [0, 0]).then_some((set, min, max))
}

/// Double-checks a [`Pattern::Run`] against the translated regex: every ASCII character, at the
/// lengths around the bounds, and a few non-ASCII ones.
fn run_agrees(regex: &Regex, set: [u64; 2], min: u64, max: u64) -> bool {
    let run = Pattern::Run { set, min, max };
    let lengths = [
        min.saturating_sub(1),
        min,
        min.saturating_add(1),
        max,
        max.saturating_add(1),
    ];
    let lengths: Vec<usize> = lengths
        .into_iter()
        .filter_map(|len| usize::try_from(len).ok().filter(|len| *len <= 64))
        .collect();
    let ascii = (0u8..128).map(char::from);
    let others = ['é', '\u{2028}', '\u{feff}', '\u{212a}', '😀'];
    ascii.chain(others).all(|c| {
        lengths.iter().all(|&len| {
            let subject: String = std::iter::repeat_n(c, len).collect();
            run.is_match(&subject) == regex.is_match(&subject)
        })
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::BTreeMap;
    use std::fmt::Debug;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::{FusedValidator, RAW_TOKEN};
    use crate::schema::canonical_parameters;

    // ----- the harness: every answer is checked against the exact path -----

    /// A schema compiled both ways.
    struct Pair {
        schema: Value,
        fused: FusedValidator,
        full: jsonschema::Validator,
    }

    fn pair_of(schema: Value) -> Pair {
        let full = match jsonschema::draft202012::new(&schema) {
            Ok(full) => full,
            Err(error) => panic!("jsonschema rejects {schema}: {error}"),
        };
        let Some(fused) = FusedValidator::compile(&schema) else {
            panic!("declined: {schema}");
        };
        Pair {
            schema,
            fused,
            full,
        }
    }

    /// The canonical schema of `T`, as the executor validates against it.
    fn pair<T: JsonSchema>() -> Pair {
        pair_of(canonical_parameters::<T>())
    }

    /// Parses `raw` the fused way and asserts soundness against the exact path: `Some` only
    /// if `jsonschema` accepts the document and plain `serde_json` yields the same value.
    /// Returns (valid for the exact path, accepted by `parse`).
    fn judge<T: DeserializeOwned + PartialEq + Debug>(
        pair: &Pair,
        raw: &str,
    ) -> Result<(bool, bool), TestCaseError> {
        let fused = pair.fused.parse::<T>(raw);
        let valid = crate::validate::parse_value(raw).is_ok_and(|v| pair.full.is_valid(&v));
        let typed = serde_json::from_str::<T>(raw).ok();
        if let Some(args) = &fused {
            prop_assert!(valid, "accepted what jsonschema rejects: {}", raw);
            prop_assert_eq!(
                Some(args),
                typed.as_ref(),
                "differs from serde_json: {}",
                raw
            );
        }
        Ok((valid && typed.is_some(), fused.is_some()))
    }

    /// Each `(document, accepted)`: `parse`'s answer is as expected, and sound.
    fn check<T: DeserializeOwned + PartialEq + Debug>(pair: &Pair, cases: &[(&str, bool)]) {
        for (raw, expected) in cases {
            match judge::<T>(pair, raw) {
                Ok((_, accepted)) => assert_eq!(accepted, *expected, "{raw}"),
                Err(error) => panic!("{error}"),
            }
        }
    }

    // ----- types -----

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Hello {
        name: String,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Flat {
        name: String,
        count: u32,
        delta: i64,
        ratio: f64,
        flag: bool,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Inner {
        x: i32,
        label: String,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Optional {
        a: Option<String>,
        b: Option<u32>,
        #[serde(default)]
        c: bool,
        #[serde(default)]
        d: Vec<i32>,
        e: Option<Inner>,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Listy {
        #[schemars(length(min = 1, max = 4))]
        tags: Vec<String>,
        pair: (u8, String),
        fixed: [u8; 2],
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Nested {
        inner: Inner,
        more: Vec<Inner>,
        maybe: Option<Inner>,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    enum Mode {
        Fast,
        Slow,
    }

    /// Documented variants make schemars write a `oneOf` of `const`s.
    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    enum Doc {
        /// Quick.
        Quick,
        /// Careful.
        Careful,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Enums {
        mode: Mode,
        doc: Doc,
        maybe: Option<Mode>,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Tree {
        name: String,
        children: Vec<Tree>,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Constrained {
        #[schemars(range(min = 1, max = 100))]
        n: u32,
        #[schemars(length(min = 2, max = 5))]
        s: String,
        #[schemars(regex(pattern = r"^[a-z][a-z0-9_]*$"))]
        id: String,
        #[schemars(range(min = -1.5, max = 2.5))]
        f: f64,
        #[schemars(extend("multipleOf" = 5))]
        step: i64,
        c: char,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Mapped {
        counts: BTreeMap<String, u32>,
        extra: Value,
    }

    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Flattened {
        a: u32,
        #[serde(flatten)]
        inner: Inner,
    }

    // ----- keywords, one by one -----

    #[test]
    fn types_and_required() {
        let pair = pair::<Flat>();
        check::<Flat>(
            &pair,
            &[
                (
                    r#"{"name":"a","count":1,"delta":-2,"ratio":0.5,"flag":true}"#,
                    true,
                ),
                (
                    r#" { "flag" : false , "ratio" : 1 , "delta" : 0 , "count" : 0 , "name" : "" } "#,
                    true,
                ),
                (r#"{"name":"a","count":1,"delta":-2,"ratio":0.5}"#, false),
                (
                    r#"{"name":1,"count":1,"delta":-2,"ratio":0.5,"flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":"1","delta":-2,"ratio":0.5,"flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":-1,"delta":-2,"ratio":0.5,"flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":1,"delta":-2,"ratio":"x","flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":1,"delta":-2,"ratio":0.5,"flag":null}"#,
                    false,
                ),
                // Valid for the schema (`integer` takes 1.0), not for `u32`.
                (
                    r#"{"name":"a","count":1.0,"delta":-2,"ratio":0.5,"flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":4294967296,"delta":-2,"ratio":0.5,"flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":1,"delta":-9223372036854775808,"ratio":0.5,"flag":true}"#,
                    true,
                ),
                (
                    r#"{"name":"a","count":1,"delta":9223372036854775808,"ratio":0.5,"flag":true}"#,
                    false,
                ),
                (
                    r#"{"name":"a","count":1,"delta":1,"ratio":1e400,"flag":true}"#,
                    false,
                ),
                (r#"["a",1,-2,0.5,true]"#, false),
                ("null", false),
                ("", false),
            ],
        );
    }

    #[test]
    fn closed_objects_escapes_and_duplicates() {
        let pair = pair::<Hello>();
        check::<Hello>(
            &pair,
            &[
                (r#"{"name":"Ada Lovelace"}"#, true),
                (r#"{"n\u0061me":"Ada \u00e9\ud83d\ude00\n"}"#, true),
                (r#"{"name":"Ada","extra":1}"#, false),
                (r#"{"name":"Ada","Name":"x"}"#, false),
                (r#"{}"#, false),
                // serde's derive refuses a duplicate field.
                (r#"{"name":"a","name":"b"}"#, false),
                (r#"{"name":"\ud800"}"#, false),
                (r#"{"name":"Ada"} x"#, false),
                (r#"{"name":"Ada""#, false),
                (r#"{"name":"Ada",}"#, false),
                (&format!(r#"{{"{RAW_TOKEN}":"{{}}"}}"#), false),
            ],
        );
    }

    #[test]
    fn options_nulls_and_defaults() {
        let pair = pair::<Optional>();
        check::<Optional>(
            &pair,
            &[
                (r#"{}"#, true),
                (r#"{"a":null,"b":null,"e":null}"#, true),
                (
                    r#"{"a":"x","b":3,"c":true,"d":[1,-2],"e":{"x":1,"label":"l"}}"#,
                    true,
                ),
                (r#"{"c":null}"#, false),
                (r#"{"d":null}"#, false),
                (r#"{"b":-1}"#, false),
                (r#"{"e":{"x":1}}"#, false),
                (r#"{"e":{"x":1,"label":"l","y":2}}"#, false),
                (r#"{"e":"x"}"#, false),
                (r#"{"e":[1,"l"]}"#, false),
            ],
        );
    }

    #[test]
    fn numeric_bounds_and_multiples() {
        let pair = pair::<Constrained>();
        let doc = |n: &str, f: &str, step: &str| {
            format!(r#"{{"n":{n},"s":"abc","id":"a_1","f":{f},"step":{step},"c":"é"}}"#)
        };
        let cases = [
            (doc("1", "0", "0"), true),
            (doc("100", "2.5", "-10"), true),
            (doc("0", "0", "0"), false),
            (doc("101", "0", "0"), false),
            (doc("50", "-1.5", "5"), true),
            (doc("50", "-1.5000001", "5"), false),
            (doc("50", "2.5000001", "5"), false),
            (doc("50", "1e-300", "9223372036854775805"), true),
            (doc("50", "0", "7"), false),
            (doc("50", "0", "5.0"), false),
            (doc("5e1", "0", "5"), false),
        ];
        let cases: Vec<(&str, bool)> = cases.iter().map(|(d, ok)| (d.as_str(), *ok)).collect();
        check::<Constrained>(&pair, &cases);
    }

    #[test]
    fn string_lengths_in_code_points_and_patterns() {
        let pair = pair::<Constrained>();
        let doc = |s: &str, id: &str, c: &str| {
            format!(r#"{{"n":1,"s":"{s}","id":"{id}","f":0,"step":0,"c":"{c}"}}"#)
        };
        let cases = [
            (doc("ab", "a", "x"), true),
            (doc("ééééé", "a", "😀"), true),
            (doc("😀😀😀😀😀", "a", "x"), true),
            (doc("éééééé", "a", "x"), false),
            (doc("a", "a", "x"), false),
            (doc(r"\u00e9\u00e9", "z9_", "x"), true),
            (doc("ab", "A", "x"), false),
            (doc("ab", "9a", "x"), false),
            (doc("ab", "", "x"), false),
            (doc("ab", r"a\n", "x"), false),
            (doc("ab", "a", "xy"), false),
            (doc("ab", "a", ""), false),
        ];
        let cases: Vec<(&str, bool)> = cases.iter().map(|(d, ok)| (d.as_str(), *ok)).collect();
        check::<Constrained>(&pair, &cases);
    }

    #[test]
    fn arrays_items_and_tuples() {
        let pair = pair::<Listy>();
        check::<Listy>(
            &pair,
            &[
                (r#"{"tags":["a"],"pair":[1,"x"],"fixed":[1,2]}"#, true),
                (
                    r#"{"tags":["a","b","c","d"],"pair":[255,""],"fixed":[0,255]}"#,
                    true,
                ),
                (r#"{"tags":[],"pair":[1,"x"],"fixed":[1,2]}"#, false),
                (
                    r#"{"tags":["a","b","c","d","e"],"pair":[1,"x"],"fixed":[1,2]}"#,
                    false,
                ),
                (r#"{"tags":["a",1],"pair":[1,"x"],"fixed":[1,2]}"#, false),
                (r#"{"tags":["a"],"pair":[1,"x",2],"fixed":[1,2]}"#, false),
                (r#"{"tags":["a"],"pair":[1],"fixed":[1,2]}"#, false),
                (r#"{"tags":["a"],"pair":["x",1],"fixed":[1,2]}"#, false),
                (r#"{"tags":["a"],"pair":[1,"x"],"fixed":[1,2,3]}"#, false),
                (r#"{"tags":["a"],"pair":[1,"x"],"fixed":[1,256]}"#, false),
                (r#"{"tags":"a","pair":[1,"x"],"fixed":[1,2]}"#, false),
            ],
        );
    }

    #[test]
    fn refs_and_recursion() {
        let nested = pair::<Nested>();
        check::<Nested>(
            &nested,
            &[
                (
                    r#"{"inner":{"x":1,"label":"a"},"more":[],"maybe":null}"#,
                    true,
                ),
                (
                    r#"{"inner":{"x":1,"label":"a"},"more":[{"x":-1,"label":""}]}"#,
                    true,
                ),
                (r#"{"inner":{"x":1,"label":"a"},"more":[{"x":-1}]}"#, false),
                (r#"{"inner":{"x":1,"label":"a","z":0},"more":[]}"#, false),
                (r#"{"inner":{"x":2147483648,"label":"a"},"more":[]}"#, false),
                (r#"{"inner":null,"more":[]}"#, false),
            ],
        );
        let tree = pair::<Tree>();
        check::<Tree>(
            &tree,
            &[
                (
                    r#"{"name":"r","children":[{"name":"a","children":[]}]}"#,
                    true,
                ),
                (r#"{"name":"r","children":[{"name":"a"}]}"#, false),
                (
                    r#"{"name":"r","children":[{"name":"a","children":[],"x":1}]}"#,
                    false,
                ),
            ],
        );
        // Deep documents: valid up to serde_json's limit, then refused, never a crash.
        let deep = |levels: usize| {
            let mut text = String::new();
            for _ in 0..levels {
                text.push_str(r#"{"name":"n","children":["#);
            }
            text.push_str(r#"{"name":"leaf","children":[]}"#);
            for _ in 0..levels {
                text.push_str("]}");
            }
            text
        };
        check::<Tree>(
            &tree,
            &[(&deep(60), true), (&deep(70), false), (&deep(500), false)],
        );
    }

    #[test]
    fn unit_enums_plain_and_documented() {
        let pair = pair::<Enums>();
        check::<Enums>(
            &pair,
            &[
                (r#"{"mode":"Fast","doc":"Quick","maybe":null}"#, true),
                (r#"{"mode":"Slow","doc":"Careful","maybe":"Fast"}"#, true),
                (r#"{"mode":"Sl\u006fw","doc":"Careful"}"#, true),
                (r#"{"mode":"Other","doc":"Quick"}"#, false),
                (r#"{"mode":"Fast","doc":"Slow"}"#, false),
                (r#"{"mode":"fast","doc":"Quick"}"#, false),
                // serde_json also reads a unit variant as `{"Fast": null}`; the schema does not.
                (r#"{"mode":{"Fast":null},"doc":"Quick"}"#, false),
                (r#"{"mode":"Fast","doc":{"Quick":null}}"#, false),
                (r#"{"mode":"Fast","doc":"Quick","maybe":"Other"}"#, false),
                (r#"{"mode":null,"doc":"Quick"}"#, false),
                (r#"{"mode":0,"doc":"Quick"}"#, false),
            ],
        );
    }

    #[test]
    fn maps_any_values_and_flatten() {
        let mapped = pair::<Mapped>();
        check::<Mapped>(
            &mapped,
            &[
                (r#"{"counts":{},"extra":null}"#, true),
                (
                    r#"{"counts":{"a":1,"b\u00e9":2},"extra":{"deep":[1,{"x":null}]}}"#,
                    true,
                ),
                // A map keeps the last duplicate, as a `Value` does; both are valid here.
                (r#"{"counts":{"a":1,"a":2},"extra":1}"#, false),
                (r#"{"counts":{"a":1,"a":-2},"extra":1}"#, false),
                (r#"{"counts":{"a":-1},"extra":1}"#, false),
                (r#"{"counts":{"a":1.5},"extra":1}"#, false),
                (r#"{"counts":[],"extra":1}"#, false),
                (
                    &format!(r#"{{"counts":{{"{RAW_TOKEN}":1}},"extra":1}}"#),
                    false,
                ),
                (
                    &format!(r#"{{"counts":{{}},"extra":{{"{RAW_TOKEN}":"1"}}}}"#),
                    false,
                ),
                (r#"{"counts":{},"extra":"\ud800"}"#, false),
            ],
        );
        let flat = pair::<Flattened>();
        check::<Flattened>(
            &flat,
            &[
                (r#"{"a":1,"x":2,"label":"l"}"#, true),
                (r#"{"label":"l","x":2,"a":1}"#, true),
                (r#"{"a":1,"x":2}"#, false),
                (r#"{"a":1,"x":"2","label":"l"}"#, false),
                (r#"{"a":1,"x":2,"label":"l","z":0}"#, false),
            ],
        );
    }

    #[test]
    fn skipped_values_are_still_checked() {
        // An open object: the type skips `other`, the schema does not.
        let open = pair_of(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": {"type": "integer", "maximum": 10}
        }));
        check::<Hello>(
            &open,
            &[
                (r#"{"name":"a","other":3}"#, true),
                (r#"{"name":"a","other":11}"#, false),
                (r#"{"name":"a","other":"x"}"#, false),
                (r#"{"name":"a","other":[1]}"#, false),
            ],
        );
        let anything = pair_of(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        }));
        // `serde_json` skips a lone surrogate unread; the `Value` parse of the exact path fails.
        assert!(serde_json::from_str::<Hello>(r#"{"name":"a","other":"\ud800"}"#).is_ok());
        check::<Hello>(
            &anything,
            &[
                (r#"{"name":"a","other":{"x":[1,null,{"y":"z"}]}}"#, true),
                (r#"{"name":"a","other":"\ud800"}"#, false),
                (r#"{"name":"a","other":[1e400]}"#, false),
                (r#"{"name":"a","other":[1,]}"#, false),
            ],
        );
        let counted = pair_of(json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "minProperties": 2,
            "maxProperties": 2
        }));
        check::<Hello>(
            &counted,
            &[
                (r#"{"name":"a","b":1}"#, true),
                (r#"{"name":"a","b":1,"b":2}"#, false),
                (r#"{"name":"a"}"#, false),
                (r#"{"name":"a","b":1,"c":2}"#, false),
            ],
        );
    }

    fn lenient<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<u32>, D::Error> {
        Ok(Option::<u32>::deserialize(de).ok().flatten())
    }

    /// A field whose `Deserialize` swallows errors.
    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Lenient {
        #[serde(default, deserialize_with = "lenient")]
        n: Option<u32>,
        name: String,
    }

    #[test]
    fn swallowed_errors_still_refuse() {
        let pair = pair::<Lenient>();
        let swallowed = [r#"{"n":-1,"name":"a"}"#, r#"{"n":"x","name":"a"}"#];
        for raw in swallowed {
            assert!(serde_json::from_str::<Lenient>(raw).is_ok(), "{raw}");
        }
        check::<Lenient>(
            &pair,
            &[
                (r#"{"n":5,"name":"a"}"#, true),
                (r#"{"name":"a"}"#, true),
                (swallowed[0], false),
                (swallowed[1], false),
            ],
        );
    }

    #[test]
    fn declines_what_one_pass_cannot_check() {
        #[derive(Deserialize, JsonSchema)]
        #[serde(untagged)]
        #[allow(dead_code)]
        enum Untagged {
            A { a: u32 },
            B { b: String },
        }
        #[derive(Deserialize, JsonSchema)]
        #[serde(tag = "kind")]
        #[allow(dead_code)]
        enum Tagged {
            A { a: u32 },
            B { b: String },
        }
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        enum Data {
            Unit,
            A(u32),
            B { x: u32 },
        }
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Holder {
            untagged: Untagged,
            tagged: Tagged,
            data: Data,
        }
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Set {
            set: std::collections::HashSet<String>,
        }
        for schema in [
            canonical_parameters::<Untagged>(),
            canonical_parameters::<Tagged>(),
            canonical_parameters::<Data>(),
            canonical_parameters::<Holder>(),
            canonical_parameters::<Set>(),
            json!({"allOf": [{"type": "object"}, {"required": ["a"]}]}),
            json!({"not": {"type": "string"}}),
            json!({"if": {"type": "string"}, "then": {"minLength": 1}}),
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
            json!({"type": "array", "uniqueItems": true}),
            json!({"type": "array", "contains": {"type": "string"}}),
            json!({"$ref": "https://example.com/schema"}),
            json!({"$ref": "#/definitions/A", "definitions": {"A": true}}),
            json!({"$ref": "#/$defs/Missing"}),
            json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}),
            json!({"anyOf": [{"$ref": "#"}, {"type": "null"}]}),
            json!({"$ref": "#/$defs/A", "minLength": 1, "$defs": {"A": true}}),
            json!({"anyOf": [{"type": "object", "required": ["b"]}, {"type": "object", "required": ["a"]}]}),
            json!({"oneOf": [{"type": "array"}, {"type": "array", "minItems": 1}]}),
            json!({"enum": [[1], {"a": 1}]}),
            json!({"const": {"a": 1}}),
            json!({"type": "string", "pattern": "(?=a)"}),
            json!({"type": "string", "pattern": "\\bword"}),
            json!({"type": "string", "pattern": "\\u0041"}),
            json!({"type": "string", "pattern": "(a)\\1"}),
            json!({"type": "number", "multipleOf": 0.5}),
            json!({"type": "string", "minLength": 1.5}),
            json!({"type": "object", "properties": {"a": {"$defs": {}}}}),
            json!({"type": "object", "x-unknown": 1}),
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
            json!({"type": "object", "properties": (0..65).map(|i| (format!("p{i}"), json!(true))).collect::<serde_json::Map<String, Value>>()}),
        ] {
            assert!(
                FusedValidator::compile(&schema).is_none(),
                "compiled {schema}"
            );
        }
        // `true` at the root and a nullable self-reference that descends are fine.
        assert!(FusedValidator::compile(&json!(true)).is_some());
        assert!(
            FusedValidator::compile(
                &json!({"type": "array", "items": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}})
            )
            .is_some()
        );
    }

    #[test]
    fn refuses_bytes_and_big_integers_it_cannot_compare() {
        #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
        struct Wide {
            n: i128,
        }
        let pair = pair::<Wide>();
        check::<Wide>(&pair, &[(r#"{"n":1}"#, false)]);
        let any = pair_of(json!(true));
        check::<Value>(
            &any,
            &[(r#"{"a":[1,2.5,"x",null,true]}"#, true), ("[1] 2", false)],
        );
    }

    #[test]
    fn simple_patterns_skip_the_regex_engine() {
        use super::Pattern;
        for (pattern, run) in [
            ("^[A-Z0-9-]+$", true),
            ("^[a-z0-9_-]{2,5}$", true),
            ("^[\\w.@+-]*$", true),
            ("^[\\d]{3}$", true),
            ("^[a-z][a-z0-9_]*$", false),
            ("^[^a-z]+$", false),
            ("[a-z]+", false),
            ("^[_-a]+$", false),
            ("^[a-z]+?$", false),
        ] {
            let compiled = Pattern::compile(pattern);
            assert!(compiled.is_some(), "{pattern}");
            assert_eq!(
                matches!(compiled, Some(Pattern::Run { .. })),
                run,
                "{pattern}"
            );
        }
    }

    #[test]
    fn validator_is_shareable() {
        fn assert_send_sync<T: Send + Sync + std::fmt::Debug>() {}
        assert_send_sync::<FusedValidator>();
    }

    // ----- random documents for each type -----

    /// A tiny deterministic generator, seeded by proptest.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            if n == 0 {
                0
            } else {
                (self.next() % n as u64) as usize
            }
        }

        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    /// Documents that follow a schema, with deliberate slips when `slips` is on.
    struct Gen<'a> {
        rng: Rng,
        root: &'a Value,
        slips: bool,
        /// How often slips happen, in quarters of their base rate.
        rate: u64,
    }

    const WRONG: [&str; 12] = [
        "null",
        "true",
        "0",
        "-1",
        "1.5",
        "\"x\"",
        "[]",
        "{}",
        "[1,\"a\"]",
        "{\"a\":1}",
        "1e400",
        "\"\\ud800\"",
    ];

    impl<'a> Gen<'a> {
        fn slip(&mut self, percent: u64) -> bool {
            self.slips && self.rng.chance(percent * self.rate / 4)
        }

        fn resolve(&self, mut schema: &'a Value) -> &'a Value {
            for _ in 0..8 {
                match schema.get("$ref").and_then(Value::as_str) {
                    Some("#") => schema = self.root,
                    Some(reference) => {
                        let name = reference.trim_start_matches("#/$defs/");
                        match self.root.get("$defs").and_then(|defs| defs.get(name)) {
                            Some(target) => schema = target,
                            None => return schema,
                        }
                    }
                    None => return schema,
                }
            }
            schema
        }

        fn value(&mut self, schema: &'a Value, depth: usize) -> String {
            let schema = self.resolve(schema);
            if self.slip(3) {
                return (*self.rng.pick(&WRONG)).to_owned();
            }
            let Value::Object(members) = schema else {
                return self.anything(depth);
            };
            if let Some(Value::Array(branches)) =
                members.get("anyOf").or_else(|| members.get("oneOf"))
            {
                let branch = self.rng.pick(branches);
                return self.value(branch, depth);
            }
            if let Some(constant) = members.get("const") {
                return self.scalar(constant);
            }
            if let Some(Value::Array(values)) = members.get("enum") {
                if self.slip(10) {
                    return self.string("Fas", 0);
                }
                let value = self.rng.pick(values);
                return self.scalar(value);
            }
            let types: Vec<&str> = match members.get("type") {
                Some(Value::String(name)) => vec![name.as_str()],
                Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
                _ => vec![
                    "null", "boolean", "integer", "number", "string", "array", "object",
                ],
            };
            match *self.rng.pick(&types) {
                "null" => "null".to_owned(),
                "boolean" => if self.rng.chance(50) { "true" } else { "false" }.to_owned(),
                "integer" => self.integer(members),
                "number" => self.number(members),
                "string" if members.contains_key("pattern") => {
                    // Subjects for the `^[a-z][a-z0-9_]*$` of `Constrained`.
                    let subject = if self.slip(30) {
                        *self.rng.pick(&["", "9a", "A", "_x", "a-b", "é", "a\n"])
                    } else {
                        *self
                            .rng
                            .pick(&["a", "abc", "a_1", "z9", "hello_world", "x0_"])
                    };
                    self.encode(subject)
                }
                "string" => {
                    let min = members
                        .get("minLength")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    let max = members
                        .get("maxLength")
                        .and_then(Value::as_u64)
                        .unwrap_or(8);
                    let len = self.length(min, max);
                    self.string("ab zé😀\"\\\n\u{7f}-_A1", len)
                }
                "array" => self.array(members, depth),
                _ => self.object(members, depth),
            }
        }

        fn anything(&mut self, depth: usize) -> String {
            match self.rng.below(if depth > 3 { 6 } else { 8 }) {
                0 => "null".to_owned(),
                1 => "false".to_owned(),
                2 => format!("{}", self.rng.below(2000) as i64 - 1000),
                3 => format!("{}.{}", self.rng.below(100), self.rng.below(100)),
                4 | 5 => self.string("ab é😀\"\\", 3),
                6 => {
                    let n = self.rng.below(3);
                    let items: Vec<String> = (0..n).map(|_| self.anything(depth + 1)).collect();
                    format!("[{}]", items.join(","))
                }
                _ => {
                    let n = self.rng.below(3);
                    let members: Vec<String> = (0..n)
                        .map(|i| format!("\"k{i}\":{}", self.anything(depth + 1)))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }
            }
        }

        fn scalar(&mut self, value: &Value) -> String {
            match value {
                Value::String(s) => self.encode(s),
                other => other.to_string(),
            }
        }

        fn length(&mut self, min: u64, max: u64) -> usize {
            let mut candidates = vec![min, max.min(min + 6), min + (max.saturating_sub(min)) / 2];
            if self.slips {
                candidates.push(min.saturating_sub(1));
                candidates.push(max.saturating_add(1));
            }
            (*self.rng.pick(&candidates)).min(12) as usize
        }

        fn string(&mut self, alphabet: &str, len: usize) -> String {
            let alphabet: Vec<char> = alphabet.chars().collect();
            let text: String = (0..len).map(|_| *self.rng.pick(&alphabet)).collect();
            self.encode(&text)
        }

        /// JSON text of a string, with random escapes.
        fn encode(&mut self, text: &str) -> String {
            let mut out = String::from("\"");
            for c in text.chars() {
                let escape = self.rng.chance(8);
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c if escape || (c as u32) < 0x20 => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            if self.slip(1) {
                out.push_str("\\ud800");
            }
            out.push('"');
            out
        }

        fn bound(members: &serde_json::Map<String, Value>, key: &str) -> Option<f64> {
            members.get(key).and_then(Value::as_f64)
        }

        fn integer(&mut self, members: &serde_json::Map<String, Value>) -> String {
            let min = Self::bound(members, "minimum").map_or(-1000.0, f64::ceil) as i128;
            let max = Self::bound(members, "maximum").map_or(1000.0, f64::floor) as i128;
            let step = members
                .get("multipleOf")
                .and_then(Value::as_u64)
                .unwrap_or(1) as i128;
            if self.slip(30) {
                let edges = [
                    (min - 1).to_string(),
                    (max + 1).to_string(),
                    format!("{min}.0"),
                    "-0".to_owned(),
                    "1e2".to_owned(),
                    "2.5".to_owned(),
                    "4294967295".to_owned(),
                    "4294967296".to_owned(),
                    "-2147483649".to_owned(),
                    "9223372036854775807".to_owned(),
                    "9223372036854775808".to_owned(),
                    "-9223372036854775809".to_owned(),
                    "18446744073709551615".to_owned(),
                    "18446744073709551616".to_owned(),
                    (step * 3 + 1).to_string(),
                ];
                return self.rng.pick(&edges).clone();
            }
            let span = (max - min).clamp(0, 1 << 40) as usize;
            let mut n = min + self.rng.below(span + 1) as i128;
            n -= n.rem_euclid(step);
            if n < min {
                n += step;
            }
            if self.rng.chance(10) {
                min.to_string()
            } else if self.rng.chance(10) {
                max.to_string()
            } else {
                n.to_string()
            }
        }

        fn number(&mut self, members: &serde_json::Map<String, Value>) -> String {
            let min = Self::bound(members, "minimum").unwrap_or(-1e6);
            let max = Self::bound(members, "maximum").unwrap_or(1e6);
            if self.slip(30) {
                let edges = [
                    format!("{}", min - 1e-7),
                    format!("{}", max + 1e-7),
                    format!("{min:e}"),
                    "1e308".to_owned(),
                    "1e309".to_owned(),
                    "-0.0".to_owned(),
                    "18446744073709551616".to_owned(),
                    "\"1.5\"".to_owned(),
                ];
                return self.rng.pick(&edges).clone();
            }
            let unit = self.rng.below(1001) as f64 / 1000.0;
            let value = min + (max - min) * unit;
            match self.rng.below(4) {
                0 => format!("{min}"),
                1 => format!("{max}"),
                2 => format!("{value:e}"),
                _ => format!("{value}"),
            }
        }

        fn array(&mut self, members: &'a serde_json::Map<String, Value>, depth: usize) -> String {
            let min = members.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let max = members.get("maxItems").and_then(Value::as_u64).unwrap_or(4);
            let len = if depth > 4 {
                min as usize
            } else {
                self.length(min, max)
            };
            let prefix: &[Value] = members
                .get("prefixItems")
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice);
            let items = members.get("items").unwrap_or(&Value::Bool(true));
            let texts: Vec<String> = (0..len)
                .map(|i| {
                    let schema = prefix.get(i).unwrap_or(items);
                    self.value(schema, depth + 1)
                })
                .collect();
            format!("[{}]", texts.join(self.comma()))
        }

        fn comma(&mut self) -> &'static str {
            const COMMAS: [&str; 3] = [",", ", ", " ,\n"];
            COMMAS[self.rng.below(COMMAS.len())]
        }

        fn key(&mut self, name: &str) -> String {
            self.encode(name)
        }

        fn object(&mut self, members: &'a serde_json::Map<String, Value>, depth: usize) -> String {
            static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> =
                std::sync::OnceLock::new();
            let properties = members
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or_else(|| EMPTY.get_or_init(serde_json::Map::new));
            let required: Vec<&str> = members
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut pairs: Vec<(String, String)> = Vec::new();
            for (name, schema) in properties {
                let keep = if required.contains(&name.as_str()) {
                    !self.slip(4)
                } else {
                    self.rng.chance(60)
                };
                if keep {
                    let value = if self.slip(4) {
                        "null".to_owned()
                    } else {
                        self.value(schema, depth + 1)
                    };
                    pairs.push((self.key(name), value));
                }
            }
            if let Some(additional @ Value::Object(_)) = members.get("additionalProperties") {
                for i in 0..self.rng.below(3) {
                    let value = self.value(additional, depth + 1);
                    pairs.push((self.key(&format!("k{i}é")), value));
                }
            }
            if self.slip(4) {
                let value = self.anything(depth + 1);
                let name = *self.rng.pick(&["extra", "Name", "x", RAW_TOKEN]);
                pairs.push((self.key(name), value));
            }
            if !pairs.is_empty() && self.slip(4) {
                let index = self.rng.below(pairs.len());
                let key = pairs[index].0.clone();
                let value = if self.rng.chance(50) {
                    pairs[index].1.clone()
                } else {
                    self.anything(depth + 1)
                };
                pairs.push((key, value));
            }
            // Shuffle.
            for i in (1..pairs.len()).rev() {
                let j = self.rng.below(i + 1);
                pairs.swap(i, j);
            }
            let comma = self.comma();
            let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("{{{}}}", body.join(comma))
        }

        /// Malformed variants.
        fn mutate(&mut self, text: String) -> String {
            let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            let at = boundaries
                .get(self.rng.below(boundaries.len()))
                .copied()
                .unwrap_or(0);
            match self.rng.below(5) {
                0 => text[..at].to_owned(),
                1 => format!("{text}{}", self.rng.pick(&["x", "}", ",", " ", "\n{}"])),
                2 => format!(
                    "{}{}{}",
                    &text[..at],
                    self.rng.pick(&[",", "\"", "]", "}", "\\", " "]),
                    &text[at..]
                ),
                3 => text.replacen(':', ",", 1),
                _ => text.replacen('"', "'", 1),
            }
        }

        fn document(seed: u64, root: &'a Value, slips: bool) -> String {
            let mut generator = Gen {
                rng: Rng(seed | 1),
                root,
                slips,
                rate: 4,
            };
            generator.rate = *generator.rng.pick(&[1, 2, 4, 8]);
            let text = generator.value(root, 0);
            if generator.slip(6) {
                generator.mutate(text)
            } else {
                text
            }
        }
    }

    /// Tallies of one run.
    #[derive(Default, Debug)]
    struct Tally {
        total: Cell<u32>,
        valid: Cell<u32>,
        accepted: Cell<u32>,
    }

    /// `cases` random documents for `T`: soundness on every one; returns the tally.
    fn run<T: DeserializeOwned + PartialEq + Debug + JsonSchema>(cases: u32, slips: bool) -> Tally {
        let pair = pair::<T>();
        let tally = Tally::default();
        let config = Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        };
        let result = TestRunner::new(config).run(&any::<u64>(), |seed| {
            let raw = Gen::document(seed, &pair.schema, slips);
            let (valid, accepted) = judge::<T>(&pair, &raw)?;
            if !slips && !valid && std::env::var("FUSED_DEBUG").is_ok() {
                eprintln!("invalid clean doc: {raw}");
            }
            tally.total.set(tally.total.get() + 1);
            tally.valid.set(tally.valid.get() + u32::from(valid));
            tally
                .accepted
                .set(tally.accepted.get() + u32::from(accepted));
            Ok(())
        });
        if let Err(error) = result {
            panic!("{}: {error}", std::any::type_name::<T>());
        }
        tally
    }

    /// Soundness on mutated documents, and usefulness on clean ones.
    fn sound_and_useful<T: DeserializeOwned + PartialEq + Debug + JsonSchema>() {
        let mutated = run::<T>(2000, true);
        let clean = run::<T>(1000, false);
        let name = std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("?");
        eprintln!(
            "{name}: mutated {} docs, {} valid, {} accepted; clean {} docs, {} valid, {} accepted",
            mutated.total.get(),
            mutated.valid.get(),
            mutated.accepted.get(),
            clean.total.get(),
            clean.valid.get(),
            clean.accepted.get(),
        );
        // Usefulness (soundness is asserted per document above): every clean
        // document is accepted; of the randomly mutated valid ones, a rare one
        // may be declined (`None` is always allowed: the exact path decides),
        // so an exact count would make this test flaky.
        assert!(
            mutated.accepted.get() * 100 >= mutated.valid.get() * 99,
            "{name}: too many valid documents declined"
        );
        assert_eq!(clean.accepted.get(), clean.valid.get(), "{name}");
        assert!(
            clean.valid.get() * 10 >= clean.total.get() * 9,
            "{name}: clean documents too often invalid"
        );
        assert!(
            mutated.valid.get() < mutated.total.get(),
            "{name}: no slips generated"
        );
    }

    #[test]
    fn random_flat() {
        sound_and_useful::<Flat>();
    }

    #[test]
    fn random_optional_and_defaults() {
        sound_and_useful::<Optional>();
    }

    #[test]
    fn random_arrays() {
        sound_and_useful::<Listy>();
    }

    #[test]
    fn random_nested_refs() {
        sound_and_useful::<Nested>();
    }

    #[test]
    fn random_enums() {
        sound_and_useful::<Enums>();
    }

    #[test]
    fn random_tree() {
        sound_and_useful::<Tree>();
    }

    #[test]
    fn random_constrained() {
        sound_and_useful::<Constrained>();
    }

    #[test]
    fn random_maps_and_values() {
        sound_and_useful::<Mapped>();
    }

    #[test]
    fn random_flattened() {
        sound_and_useful::<Flattened>();
    }

    proptest! {
        #![proptest_config(Config { cases: 2000, failure_persistence: None, ..Config::default() })]

        /// Patterns: the translation agrees with `jsonschema` on random subjects.
        #[test]
        fn patterns_agree_with_jsonschema(
            pattern in prop::sample::select(vec![
                "^[a-z][a-z0-9_]*$", "^\\d{3}-\\d{4}$", "ab|cd", "^(?:foo|bar)+$", "[^a-c]",
                "^.{2,3}$", "\\s", "^\\w+@\\w+\\.com$", "^[A-Z0-9-]+$", "x*?y", "^$", "é+",
                "^[a-z0-9_-]{2,5}$", "^[\\w.@+-]*$", "^[A-Za-z]{3}$", "^[0-9]{2,}$", "^[\\d.]{0,3}$",
            ]),
            subject in "[a-dA-Z0-9_@.\\- é\n\u{2028}xyfobr]{0,8}",
        ) {
            let schema = json!({
                "type": "object",
                "properties": {"name": {"type": "string", "pattern": pattern}},
                "required": ["name"],
                "additionalProperties": false
            });
            let pair = pair_of(schema);
            let raw = json!({"name": subject}).to_string();
            let (valid, accepted) = judge::<Hello>(&pair, &raw)?;
            prop_assert_eq!(valid, accepted, "{}", raw);
        }
    }
}
