//! Regenerates `docs/flags.md` from the clap definitions: `cargo run --example flags_doc`.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/flags.md");
    match std::fs::write(&path, gateway_dns::cmd::flags_doc::flags_markdown()) {
        Ok(()) => {
            println!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("cannot write {}: {err}", path.display());
            ExitCode::FAILURE
        }
    }
}
