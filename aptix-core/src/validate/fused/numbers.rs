//! Numbers and `enum` sets, compared exactly as `jsonschema` compares them.

use std::cmp::Ordering;

use serde_json::{Number, Value};

use super::deserializer::same_bytes;

/// A JSON number as `serde_json` holds it: `U` for any non-negative integer up to `u64::MAX`,
/// `I` for a negative one down to `i64::MIN`, `F` for everything else.
#[derive(Debug, Clone, Copy)]
pub(super) enum Num {
    U(u64),
    I(i64),
    F(f64),
}

/// A non-container JSON value.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scalar<'a> {
    Null,
    Bool(bool),
    Num(Num),
    Str(&'a str),
}

/// The values of one `enum` (or a `const`), split by kind; scalars only.
#[derive(Debug, Default)]
pub(super) struct EnumSet {
    null: bool,
    yes: bool,
    no: bool,
    nums: Vec<Num>,
    /// Sorted and deduplicated.
    strs: Vec<Box<str>>,
}

impl Num {
    pub(super) fn of(n: &Number) -> Option<Num> {
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
    pub(super) fn of_i64(i: i64) -> Num {
        u64::try_from(i).map_or(Num::I(i), Num::U)
    }

    pub(super) fn int(self) -> Option<i128> {
        match self {
            Num::U(u) => Some(i128::from(u)),
            Num::I(i) => Some(i128::from(i)),
            Num::F(_) => None,
        }
    }

    pub(super) fn is_integer(self) -> bool {
        match self {
            Num::F(f) => f.fract() == 0.0,
            Num::U(_) | Num::I(_) => true,
        }
    }

    /// The number as an `f64` that is exactly it (integers within ±2^53), if there is one.
    #[inline]
    pub(super) fn exact_f64(self) -> Option<f64> {
        const LIMIT: u64 = 1 << 53;
        match self {
            Num::F(f) => Some(f),
            Num::U(u) => (u <= LIMIT).then_some(u as f64),
            Num::I(i) => (i.unsigned_abs() <= LIMIT).then_some(i as f64),
        }
    }

    pub(super) fn as_f64(self) -> f64 {
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
pub(super) fn cmp_num(a: Num, b: Num) -> Ordering {
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
pub(super) fn is_multiple_of(n: Num, divisor: u64) -> bool {
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
    pub(super) fn build(values: &[Value]) -> Option<EnumSet> {
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

    pub(super) fn has(&self, value: Scalar<'_>) -> bool {
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
