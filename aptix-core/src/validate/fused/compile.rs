//! Compiling a JSON Schema into [`FusedValidator`]'s nodes, or declining it.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;

use super::deserializer::find_slot;
use super::numbers::{EnumSet, Num};
use super::pattern::Pattern;
use super::{
    ANY, Checks, FusedValidator, Id, Kind, MAX_CHAIN, MAX_NAME_LEN, MAX_SCHEMA_DEPTH, MAX_SLOTS,
    NEVER, Node, ROOT, Route, Slot, T_ARR, T_BOOL, T_INT, T_NULL, T_NUM, T_OBJ, T_STR,
};
use crate::validate::patterns::PatternBudget;

/// The compiled form of `schema`, or `None` where it declines (see [`FusedValidator::compile`]).
pub(super) fn compile(schema: &Value) -> Option<FusedValidator> {
    if !numbers_are_native() || !depth_within(schema, MAX_SCHEMA_DEPTH) {
        return None;
    }
    let mut compiler = Compiler {
        kinds: vec![Kind::Any, Kind::Never, Kind::Any],
        defs: HashMap::new(),
        patterns: HashMap::new(),
        budget: PatternBudget::default(),
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

struct Compiler {
    kinds: Vec<Kind>,
    defs: HashMap<String, Id>,
    /// Each distinct pattern compiled once.
    patterns: HashMap<String, Pattern>,
    /// What the schema's patterns may still compile to.
    budget: PatternBudget,
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

    fn pattern(&mut self, pattern: &str) -> Option<Pattern> {
        if let Some(known) = self.patterns.get(pattern) {
            return Some(known.clone());
        }
        let compiled = Pattern::compile(pattern, &mut self.budget)?;
        self.patterns.insert(pattern.to_owned(), compiled.clone());
        Some(compiled)
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
                "pattern" => checks.pattern = Some(self.pattern(value.as_str()?)?),
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
