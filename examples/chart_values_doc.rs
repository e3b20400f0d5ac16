//! Regenerates the values table of `charts/gateway-dns/README.md` from the chart's
//! `values.schema.json` and `values.yaml`: `cargo run --example chart_values_doc`.

use std::path::Path;
use std::process::ExitCode;

#[path = "../tests/support/chart_values.rs"]
mod chart_values;

fn main() -> ExitCode {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/gateway-dns");
    let readme_path = chart.join("README.md");
    let (schema, values) = chart_values::load(&chart);
    let readme = std::fs::read_to_string(&readme_path).unwrap_or_default();
    let Some(updated) = chart_values::with_table(&readme, &chart_values::table(&schema, &values))
    else {
        eprintln!(
            "{} lacks the table markers:\n{}\n{}",
            readme_path.display(),
            chart_values::TABLE_START,
            chart_values::TABLE_END
        );
        return ExitCode::FAILURE;
    };
    match std::fs::write(&readme_path, updated) {
        Ok(()) => {
            println!("wrote {}", readme_path.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("cannot write {}: {err}", readme_path.display());
            ExitCode::FAILURE
        }
    }
}
