//! `schema NAME [--dialect D]`: one tool's definition as JSON.

use std::io::Write;
use std::process::ExitCode;

use super::{CliError, SchemaDialect, unknown_tool, write_pretty};
use crate::catalog::Catalog;

/// Prints the definition exactly as the agent would send it to that
/// provider (the same `lower` call), so what is printed is what the model
/// sees; a definition the dialect cannot express is the dialect's error.
pub(super) fn run(
    catalog: &Catalog,
    name: &str,
    dialect: SchemaDialect,
    out: &mut impl Write,
) -> Result<ExitCode, CliError> {
    let definition = catalog
        .get(name)
        .ok_or_else(|| unknown_tool(catalog, name))?;
    let value = match dialect.dialect() {
        None => definition.canonical_json(),
        Some(dialect) => definition.lower(dialect)?,
    };
    write_pretty(out, &value)?;
    Ok(ExitCode::SUCCESS)
}
