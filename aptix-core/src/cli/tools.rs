//! `tools`: the catalog as a table, one tool a line.

use std::io::Write;
use std::process::ExitCode;

use crate::catalog::Catalog;

const HEADERS: [&str; 4] = ["NAME", "EXECUTOR", "APPROVAL", "DESCRIPTION"];

/// Writes the table: columns padded to their widest cell, rows in the
/// catalog's order (sorted by name), so the output is the same on every run
/// and can be diffed or grepped.
pub(super) fn run(catalog: &Catalog, out: &mut impl Write) -> std::io::Result<ExitCode> {
    let rows: Vec<[&str; 4]> = catalog
        .definitions()
        .map(|definition| {
            [
                definition.name(),
                definition.executor().as_str(),
                definition.approval().as_str(),
                summary(definition.description()),
            ]
        })
        .collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&HEADERS).chain(&rows) {
        let [name, executor, approval, description] = row;
        writeln!(
            out,
            "{name:<w0$}  {executor:<w1$}  {approval:<w2$}  {description}",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The first line of a description: a table row has room for the summary
/// only (`schema` prints the whole text).
fn summary(description: &str) -> &str {
    description.lines().next().unwrap_or_default().trim()
}
