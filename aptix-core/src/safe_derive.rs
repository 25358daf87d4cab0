//! `PartialEq` for enums, written out in safe code.
//!
//! Why not `#[derive(PartialEq)]`: on an enum whose every variant holds
//! data, rustc's derive compares the discriminants first and ends the match
//! with a `_ =>` arm calling `::core::intrinsics::unreachable()` in an unsafe block, so the derive
//! puts `unsafe` code into this crate, which compiles none. [`enum_eq!`]
//! writes the same comparison with a `_ => false` arm. It is checked by the
//! compiler like the derive: every variant must be listed (the match on
//! `self` is exhaustive) and a struct variant with all of its fields (its
//! pattern has no `..`).
//!
//! ```text
//! enum_eq!(Message { System { content }, Done, Text(_) });
//! ```
//!
//! Tuple variants hold one field.

macro_rules! enum_eq {
    ($name:ident $(<$lt:lifetime>)? { $($body:tt)* }) => {
        impl $(<$lt>)? ::core::cmp::PartialEq for $name $(<$lt>)? {
            fn eq(&self, other: &Self) -> bool {
                $crate::safe_derive::enum_eq!(@arms self, other, [] $($body)*)
            }
        }
    };
    (@arms $this:ident, $other:ident, [$($arms:tt)*]
        $variant:ident { $($field:ident),* $(,)? } $(, $($rest:tt)*)?) => {
        $crate::safe_derive::enum_eq!(@arms $this, $other, [$($arms)*
            Self::$variant { $($field),* } => {
                let left = ($($field,)*);
                match $other {
                    Self::$variant { $($field),* } => left == ($($field,)*),
                    _ => false,
                }
            }
        ] $($($rest)*)?)
    };
    (@arms $this:ident, $other:ident, [$($arms:tt)*]
        $variant:ident ( _ ) $(, $($rest:tt)*)?) => {
        $crate::safe_derive::enum_eq!(@arms $this, $other, [$($arms)*
            Self::$variant(left) => matches!($other, Self::$variant(right) if left == right),
        ] $($($rest)*)?)
    };
    (@arms $this:ident, $other:ident, [$($arms:tt)*]
        $variant:ident $(, $($rest:tt)*)?) => {
        $crate::safe_derive::enum_eq!(@arms $this, $other, [$($arms)*
            Self::$variant => matches!($other, Self::$variant),
        ] $($($rest)*)?)
    };
    (@arms $this:ident, $other:ident, [$($arms:tt)*]) => {
        match $this { $($arms)* }
    };
}

pub(crate) use enum_eq;
