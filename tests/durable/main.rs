//! Durable runs: suspension and resolution, faults, refusals kept across a
//! crash, real OS processes sharing a store, and a property test of random
//! interleavings.
//!
//! Each file is a module of this one test binary; `tests/common/` holds the
//! set-up that every test binary shares.

#[path = "../common/mod.rs"]
mod common;

// `pub`: the modules' `pub` items (documented for `missing_docs`) stay
// public, as they were at the root of a test crate of their own.
pub mod approver;
pub mod durable;
pub mod durable_faults;
pub mod durable_processes;
pub mod durable_properties;
pub mod durable_refusals;
pub mod hostile_watch;
pub mod tools;
