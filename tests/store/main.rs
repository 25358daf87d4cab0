//! The stores: the conformance suite on every backend, and real OS
//! processes racing on one store.
//!
//! Each file is a module of this one test binary; `tests/common/` holds the
//! set-up that every test binary shares.

#[path = "../common/mod.rs"]
mod common;

// `pub`: the modules' `pub` items (documented for `missing_docs`) stay
// public, as they were at the root of a test crate of their own.
pub mod store;
pub mod store_race;
