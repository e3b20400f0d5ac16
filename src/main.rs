use std::process::ExitCode;

use clap::Parser;
use gateway_dns::cli::{Cli, Command, run_check};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => ExitCode::from(run_check(&args)),
    }
}
