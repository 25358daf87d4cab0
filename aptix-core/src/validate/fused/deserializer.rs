//! The wrapping deserializer: `serde_json`'s, with every value checked against its schema node
//! on its way to the arguments type.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, StrDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::numbers::{Num, Scalar};
use super::{Checks, FusedValidator, Id, NEVER, Slot};
use crate::validate::RAW_TOKEN;

/// One parse's context. `failed` is sticky: a type whose `Deserialize` swallows an error (a
/// lenient `deserialize_with`, say) must not turn a refused or malformed value into `Some`.
pub(super) struct Cx<'a> {
    pub(super) v: &'a FusedValidator,
    pub(super) failed: Cell<bool>,
    /// Set for the exact path's typed parse of a document `jsonschema` accepted (see
    /// [`FusedValidator::parse_open`]): what a checked read declines is handed to `serde_json`
    /// as asked, and the members and items an error passes on its way up are recorded here,
    /// innermost first.
    pub(super) trace: Option<&'a RefCell<Vec<String>>>,
}

impl Cx<'_> {
    /// Whether this read hands on what a checked read declines.
    #[inline(always)]
    fn open(&self) -> bool {
        self.trace.is_some()
    }

    /// Records `segment` of the path an error is travelling up, in an open read.
    #[cold]
    fn trace(&self, segment: impl FnOnce() -> String) {
        if let Some(trace) = self.trace {
            trace.borrow_mut().push(segment());
        }
    }

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
pub(super) struct Checked<'v, D> {
    pub(super) cx: &'v Cx<'v>,
    pub(super) id: Id,
    pub(super) de: D,
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

/// A request a checked read declines, and an open read hands to `serde_json` (through
/// `handed_on`, which for a member name records it for the trace).
macro_rules! decline {
    ($($(#[$doc:meta])* $method:ident $(($($arg:ident: $ty:ty),*))?;)*) => {$(
        $(#[$doc])*
        fn $method<V: Visitor<'de>>(
            self,
            $($($arg: $ty,)*)?
            visitor: V,
        ) -> Result<V::Value, D::Error> {
            if self.cx.open() {
                let (de, visitor) = self.handed_on(visitor);
                return de.$method($($($arg,)*)? visitor);
            }
            Err(self.cx.fail())
        }
    )*};
}

impl<D> Checked<'_, D> {
    /// What an open read hands to `serde_json`: the type's own visitor.
    fn handed_on<V>(self, visitor: V) -> (D, V) {
        (self.de, visitor)
    }
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
    }

    /// Read as a map: a struct's schema is an object, so the array form `serde_json` also
    /// accepts for a struct would fail the node's `type` anyway. Not asking for it keeps the
    /// type's `visit_seq` out of the code built for every arguments type, so an open read
    /// refuses that form too: a hand-written schema that allows an array for a struct gets
    /// "expected a map" for one.
    #[inline]
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.cx.watch(self.de.deserialize_map(Check::<V, false> {
            cx: self.cx,
            id: self.id,
            inner: visitor,
        }))
    }

    decline! {
        /// With `float_roundtrip` (which `jsonschema` turns on), `serde_json` parses an `f32`
        /// target at single precision, so the number checked here would be the rounded one, not
        /// the one `jsonschema` checks: declined.
        deserialize_f32;
        /// `serde_json` reads 128-bit integers with its own scanner, whose number can differ in
        /// representation from the `Value` parse's: declined.
        deserialize_i128;
        deserialize_u128;
        /// `serde_json` reads a string as bytes without the checks a `Value` parse makes:
        /// declined.
        deserialize_bytes;
        deserialize_byte_buf;
    }

    #[inline]
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // `Box<RawValue>` skips the text unseen.
        if name == RAW_TOKEN {
            if self.cx.open() {
                return self.de.deserialize_newtype_struct(name, visitor);
            }
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
    /// that `serde_json` also accepts is not a string, so it fails the node's `type`. An open
    /// read hands any enum to `serde_json`.
    #[inline]
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if self.cx.open() {
            return self.de.deserialize_enum(name, variants, visitor);
        }
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
            map,
            members: Members {
                cx: self.cx,
                checks,
                present: 0,
                next: NEVER,
                extra: None,
                name: None,
            },
        };
        let value = self.inner.visit_map(&mut access)?;
        if access.members.complete() {
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
        let item = self
            .cx
            .watch(self.seq.next_element_seed(CheckedSeed {
                cx: self.cx,
                id,
                seed,
            }))
            .inspect_err(|_| self.cx.trace(|| self.count.to_string()))?;
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
    map: A,
    members: Members<'v>,
}

/// What an object's reader knows of the members read so far. Apart from the
/// map it reads, so that its code is not copied for every member-name type.
struct Members<'v> {
    cx: &'v Cx<'v>,
    checks: &'v Checks,
    /// One bit per slot seen.
    present: u64,
    /// The subschema of the value to be read next.
    next: Id,
    /// The other names seen, to refuse a duplicate.
    extra: Option<HashSet<String>>,
    /// In an open read, the name of the value to be read next (for the trace).
    name: Option<String>,
}

impl Members<'_> {
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

    /// Takes the member the key named: where its value is checked next.
    /// `false` refuses the object (a duplicate, or a name no visitor saw).
    fn accept(&mut self, found: Found) -> bool {
        match found {
            // An open read checks nothing, duplicates neither (it reads a text whose
            // duplicates `parse_value` refused already): only the name is kept, for the trace.
            Found::Extra(name) if self.cx.open() => {
                self.next = self.checks.additional;
                self.name = Some(name);
            }
            // A key read as bytes names nothing it could check; an open read takes it as
            // `serde_json` does.
            Found::Nothing if self.cx.open() => {
                self.next = self.checks.additional;
                self.name = None;
            }
            // The name never reached a string visitor (a number-keyed map, say).
            Found::Nothing => return false,
            Found::Slot(index) => {
                let bit = 1u64.checked_shl(index).unwrap_or(0);
                if self.present & bit != 0 {
                    return false;
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
                    return false;
                }
            }
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
        let members = &mut self.members;
        let key = members.cx.watch(self.map.next_key_seed(KeySeed {
            seed,
            cx: members.cx,
            checks: members.checks,
            found: &mut found,
        }))?;
        if key.is_some() && !members.accept(found) {
            return Err(members.cx.fail());
        }
        Ok(key)
    }

    #[inline]
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        let members = &mut self.members;
        let id = std::mem::replace(&mut members.next, NEVER);
        members
            .cx
            .watch(self.map.next_value_seed(CheckedSeed {
                cx: members.cx,
                id,
                seed,
            }))
            .inspect_err(|_| members.cx.trace(|| members.name.take().unwrap_or_default()))
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

    /// What an open read hands to `serde_json`: the type's visitor, behind one that records
    /// the name (a number, say) for the trace.
    fn handed_on<V>(self, inner: V) -> (D, KeyName<'a, V>) {
        (
            self.de,
            KeyName {
                inner,
                found: self.found,
            },
        )
    }
}

/// A member name read as something else than a string, in an open read: recorded as text.
struct KeyName<'a, V> {
    inner: V,
    found: &'a mut Found,
}

/// `visit_*` methods handed on as they are, the scalar ones after recording the value.
macro_rules! key_name {
    (named { $($method:ident($ty:ty);)* } plain { $($other:ident($oty:ty);)* }) => {
        $(
            fn $method<E: de::Error>(self, value: $ty) -> Result<V::Value, E> {
                *self.found = Found::Extra(value.to_string());
                self.inner.$method(value)
            }
        )*
        $(
            fn $other<E: de::Error>(self, value: $oty) -> Result<V::Value, E> {
                self.inner.$other(value)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyName<'_, V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(formatter)
    }

    key_name! {
        named {
            visit_bool(bool);
            visit_i8(i8);
            visit_i16(i16);
            visit_i32(i32);
            visit_i64(i64);
            visit_i128(i128);
            visit_u8(u8);
            visit_u16(u16);
            visit_u32(u32);
            visit_u64(u64);
            visit_u128(u128);
            visit_f32(f32);
            visit_f64(f64);
            visit_char(char);
            visit_str(&str);
            visit_borrowed_str(&'de str);
        }
        plain {
            visit_bytes(&[u8]);
            visit_borrowed_bytes(&'de [u8]);
            visit_byte_buf(Vec<u8>);
        }
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<V::Value, E> {
        *self.found = Found::Extra(value.clone());
        self.inner.visit_string(value)
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(de)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(map)
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
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

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'_, '_, D> {
    type Error = D::Error;

    forward_key! {
        deserialize_any deserialize_str deserialize_string deserialize_identifier
        deserialize_char deserialize_option
    }

    decline! {
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
            if self.cx.open() {
                return self.de.deserialize_newtype_struct(name, visitor);
            }
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
        match key_found(self.cx, self.checks, name) {
            Some(found) => {
                *self.found = found;
                Ok(())
            }
            None => Err(self.cx.fail()),
        }
    }
}

/// [`found`], and in an open read any other name too.
fn key_found(cx: &Cx<'_>, checks: &Checks, name: &str) -> Option<Found> {
    match found(checks, name) {
        None if cx.open() => Some(Found::Extra(name.to_owned())),
        found => found,
    }
}

/// What member `name` is at an object node with `checks`; `None` when it is refused. Apart from
/// the visitor it serves, so that every arguments type shares one copy.
fn found(checks: &Checks, name: &str) -> Option<Found> {
    if name.len() == RAW_TOKEN.len() && name == RAW_TOKEN {
        return None;
    }
    match find_slot(&checks.slots, &checks.slot_ranges, name) {
        Some(index) => Some(Found::Slot(index)),
        None if checks.additional == NEVER => None,
        None => Some(Found::Extra(name.to_owned())),
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
pub(super) fn find_slot(slots: &[Slot], ranges: &[(u32, u32)], name: &str) -> Option<u32> {
    let &(start, end) = ranges.get(name.len())?;
    let offset = slots
        .get(start as usize..end as usize)?
        .iter()
        .position(|slot| same_bytes(slot.name.as_bytes(), name.as_bytes()))?;
    start.checked_add(u32::try_from(offset).ok()?)
}

/// Byte equality without a `memcmp` call for the short strings member names and `enum` values
/// mostly are: up to 16 bytes, two overlapping word loads per side cover every byte.
#[inline]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let len = a.len();
    match (a, b) {
        _ if len > 16 => a == b,
        _ if len >= 8 => {
            word::<8>(a, 0) == word::<8>(b, 0) && word::<8>(a, len - 8) == word::<8>(b, len - 8)
        }
        _ if len >= 4 => {
            word::<4>(a, 0) == word::<4>(b, 0) && word::<4>(a, len - 4) == word::<4>(b, len - 4)
        }
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    }
}

/// The `N` bytes of `bytes` from `at` (zeros past the end, which the callers never reach).
#[inline(always)]
fn word<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    bytes
        .get(at..at + N)
        .and_then(|slice| <[u8; N]>::try_from(slice).ok())
        .unwrap_or([0; N])
}
