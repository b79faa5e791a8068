//! Presentation: terminal tables and number formats in the published form, exports, the JSON
//! result and the self-contained HTML report. Pure functions of the result — they compute nothing the analysis did not.

pub mod export;
pub mod fio;
pub mod format;
pub mod html;
pub mod terminal;

use std::path::Path;

use iocurve_analysis::RunResult;

/// Writes the full result document (`--json`), via a temporary file so that a reader never
/// sees half a document.
pub fn write_json(result: &RunResult, path: &Path) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(result).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text + "\n")?;
    std::fs::rename(&tmp, path)
}
