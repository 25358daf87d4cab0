//! What `#[agent_tool]` expands to refers to, and nothing else. Not a public
//! API: names here change without notice. Routing generated paths through
//! this module means users depend on `aptix` alone.

pub use core::future::Future;
pub use core::marker::{Send, Sync};
pub use core::option::Option;
pub use core::result::Result;
pub use core::time::Duration;
pub use std::sync::OnceLock;

pub use schemars::JsonSchema;
pub use serde::Serialize;
pub use serde::de::DeserializeOwned;

pub use crate::context::{StateType, ToolContext};
pub use crate::error::ToolError;
pub use crate::meta::{
    Annotations, Approval, ExecutorKind, Redaction, Retention, SourceLocation, ToolMeta,
};
pub use crate::tool::{
    Code, Tool, ToolArgs, ToolFn, ToolOutput, ToolOutputSchema, ToolPartialSchema,
};
pub use serde_json::Value;

/// The schema of a declared partial type. A function with the bound, not a
/// projection: a type without `JsonSchema` is then reported with the
/// message of [`ToolPartialSchema`], on the user's type.
pub fn partial_schema<T: ToolPartialSchema>() -> Value {
    crate::schema::canonical_output::<T::Schema>()
}

/// The arguments of the stub a failed `#[agent_tool]` emits; never used at run time.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct StubArgs {}

/// The return type of a tool function: `Result<T, E>` with `E: Into<ToolError>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a valid return type for an agent tool",
    label = "an agent tool returns `Result<T, E>`",
    note = "`T` must implement `Serialize` and `JsonSchema`, and `E` must convert into `aptix::ToolError` (any `std::error::Error` does)"
)]
pub trait IntoToolResult {
    /// The success type `T`.
    type Ok;
    /// Converts the error side into a `ToolError`.
    fn into_tool_result(self) -> Result<Self::Ok, ToolError>;
}

impl<T, E: IntoToolError> IntoToolResult for Result<T, E> {
    type Ok = T;
    #[inline]
    fn into_tool_result(self) -> Result<T, ToolError> {
        self.map_err(IntoToolError::into_tool_error)
    }
}

/// The error type of a tool function: `ToolError`, or anything that
/// converts into it (every `std::error::Error + Send + Sync + 'static`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the error type of an agent tool",
    label = "the error type must convert into `aptix::ToolError`",
    note = "return `ToolError` (e.g. `ToolError::failed(\"...\")`) or a type that implements `std::error::Error + Send + Sync + 'static`"
)]
pub trait IntoToolError {
    /// Converts into the `ToolError` the envelope reports.
    fn into_tool_error(self) -> ToolError;
}

#[diagnostic::do_not_recommend]
impl<E: Into<ToolError>> IntoToolError for E {
    #[inline]
    fn into_tool_error(self) -> ToolError {
        self.into()
    }
}

/// Proves a declared `output = T` type (what a client or person sends back).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the declared output of an agent tool",
    label = "this type must derive `Deserialize`",
    note = "the client's or person's answer is parsed into `{Self}`: add `#[derive(Deserialize)]` to `{Self}` (it is in `aptix::prelude`)"
)]
pub trait ToolResolution: 'static {}
#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned + 'static> ToolResolution for T {}

/// Type-level assertion used by generated code at the span of the user's type.
pub const fn assert_resolution<T: ToolResolution>() {}
/// Type-level assertion used by generated code at the span of the user's return type.
pub const fn assert_return<T: IntoToolResult>() {}

pub use linkme;

/// Every tool `#[agent_tool]` declared in the crates linked into this
/// binary, each as the builder step that adds it ([`crate::Catalog::linked`]).
#[linkme::distributed_slice]
pub static LINKED_TOOLS: [fn(crate::catalog::CatalogBuilder) -> crate::catalog::CatalogBuilder];

/// Adds `$tool` to [`LINKED_TOOLS`]. A `macro_rules!` of this crate rather
/// than tokens the attribute writes: what it expands to is this crate's
/// code, not the user's.
#[doc(hidden)]
#[macro_export]
macro_rules! __link_tool {
    ($tool:ty) => {
        const _: () = {
            #[$crate::__private::linkme::distributed_slice($crate::__private::LINKED_TOOLS)]
            #[linkme(crate = $crate::__private::linkme)]
            static LINKED: fn($crate::catalog::CatalogBuilder) -> $crate::catalog::CatalogBuilder =
                $crate::catalog::CatalogBuilder::tool::<$tool>;
        };
    };
}
pub use __link_tool as link_tool;
