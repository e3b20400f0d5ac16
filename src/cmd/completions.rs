//! `gateway-dns completions SHELL`: the completion script clap_complete generates from the clap
//! definitions, so it knows every subcommand, flag and value the binary does.

use std::io::Write as _;

use clap::CommandFactory as _;

use super::{EXIT_INPUT, EXIT_OK};
use crate::cli::{Cli, CompletionsArgs};

/// The completion script for `shell`.
pub fn script(shell: clap_complete::Shell) -> Vec<u8> {
    let mut command = Cli::command();
    let name = command.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, name.clone(), &mut script);
    if shell == clap_complete::Shell::Bash {
        return fix_bash_states(script, &name);
    }
    script
}

/// clap_complete's bash script names each subcommand's state twice: the loop that reads the
/// words escapes the binary's hyphen as `__` (`gateway__dns__subcmd__serve`), the `case` arms
/// as the subcommand separator (`gateway__subcmd__dns__subcmd__serve`), so no arm matches and
/// nothing after a subcommand completes. Spell the arms as the loop does (a no-op once clap
/// spells them alike).
fn fix_bash_states(script: Vec<u8>, name: &str) -> Vec<u8> {
    let Ok(text) = String::from_utf8(script.clone()) else {
        return script;
    };
    let wrong = format!("{}__subcmd__", name.replace('-', "__subcmd__"));
    let right = format!("{}__subcmd__", name.replace('-', "__"));
    text.replace(&wrong, &right).into_bytes()
}

/// Prints the script on stdout.
pub fn run(args: &CompletionsArgs) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(&script(args.shell))
        .and_then(|()| stdout.flush())
    {
        Ok(()) => EXIT_OK,
        Err(err) => {
            eprintln!("gateway-dns completions: writing the script: {err}");
            EXIT_INPUT
        }
    }
}
