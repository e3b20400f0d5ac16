//! `docs/flags.md`, generated from the clap definitions in `src/cli.rs` so the reference cannot
//! drift: `cargo run --example flags_doc` writes it, and a test fails when it is stale.

use clap::ArgAction;

use crate::cli::Cli;

/// The command that regenerates `docs/flags.md` from [`flags_markdown`].
pub const FLAGS_DOC_COMMAND: &str = "cargo run --example flags_doc";

/// `docs/flags.md`: every subcommand and flag, with its environment variable, default and
/// allowed values, generated from the clap definitions so the reference cannot drift.
pub fn flags_markdown() -> String {
    use clap::CommandFactory as _;
    use std::fmt::Write as _;

    let mut cli = Cli::command();
    // Building fills in the subcommands' usage lines ("gateway-dns serve [OPTIONS]").
    cli.build();
    let name = cli.get_name().to_string();
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = writeln!(out, "# Flags reference\n");
    let _ = writeln!(
        out,
        "<!-- Generated from the clap definitions in src/cli.rs by `{FLAGS_DOC_COMMAND}`; \
         do not edit by hand. A test fails when this file is stale. -->\n"
    );
    let _ = writeln!(
        out,
        "`{}`: {}\n\nEvery flag can also be set through the environment variable shown beside it \
         (the command line wins). A `[=BOOL]` flag is a switch: `--flag` turns it on and \
         `--flag=false` off (`--flag false`, a separate word, is still read for older scripts); \
         its environment variable takes `true`, `false`, `1`, `0`, `yes` or `no`. Durations are written like `500ms`, `2s`, `1m30s`.\n",
        name,
        cli.get_about()
            .map(|about| about.to_string())
            .unwrap_or_default()
    );
    for subcommand in cli.get_subcommands_mut() {
        // clap's own `help` subcommand documents nothing of ours.
        if subcommand.is_hide_set() || subcommand.get_name() == "help" {
            continue;
        }
        let usage = subcommand.render_usage().to_string();
        let usage = usage.trim_start_matches("Usage:").trim();
        let _ = writeln!(out, "## `{name} {}`\n", subcommand.get_name());
        if let Some(about) = subcommand
            .get_long_about()
            .or_else(|| subcommand.get_about())
        {
            let _ = writeln!(out, "{}\n", sentence(&about.to_string()));
        }
        let _ = writeln!(out, "```text\n{usage}\n```\n");
        let _ = writeln!(out, "| flag | environment | default | description |");
        let _ = writeln!(out, "|---|---|---|---|");
        for argument in subcommand.get_arguments() {
            if argument.is_hide_set() || matches!(argument.get_id().as_str(), "help" | "version") {
                continue;
            }
            let _ = writeln!(out, "{}", flag_row(argument));
        }
        let _ = writeln!(out);
        if let Some(after) = subcommand.get_after_help() {
            let _ = writeln!(out, "```text\n{}\n```\n", after.to_string().trim_end());
        }
    }
    out
}

/// clap drops the final period of a doc comment; the table reads better with it.
fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() || text.ends_with(['.', '!', '?', ')', '`']) {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

/// One table row: `| --flag VALUE | ENV | default | help; values |`.
fn flag_row(argument: &clap::Arg) -> String {
    let value_name = argument
        .get_value_names()
        .and_then(|names| names.first())
        .map(|name| name.to_string())
        .unwrap_or_else(|| argument.get_id().as_str().to_uppercase());
    let takes_value = argument
        .get_num_args()
        .is_some_and(|range| range.takes_values())
        && !matches!(
            argument.get_action(),
            ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
        );
    let mut flag = match (argument.get_long(), argument.get_short()) {
        (Some(long), Some(short)) => format!("`-{short}`, `--{long}"),
        (Some(long), None) => format!("`--{long}"),
        (None, Some(short)) => format!("`-{short}"),
        (None, None) => format!("`{value_name}"),
    };
    let optional_value = argument
        .get_num_args()
        .is_some_and(|range| range.min_values() == 0 && range.takes_values());
    if argument.is_positional() {
        // `PATH...` takes several values, `SHELL` one.
        let many = matches!(argument.get_action(), ArgAction::Append)
            || argument
                .get_num_args()
                .is_some_and(|range| range.max_values() > 1);
        flag.push_str(if many { "...`" } else { "`" });
    } else if optional_value {
        flag.push_str(&format!("[={value_name}]`"));
    } else if takes_value {
        flag.push_str(&format!(" {value_name}`"));
    } else {
        flag.push('`');
    }
    if argument.is_required_set() {
        flag.push_str(" (required)");
    }
    if matches!(argument.get_action(), ArgAction::Append) && !argument.is_positional() {
        flag.push_str(" (repeatable)");
    }
    let environment = argument
        .get_env()
        .map(|name| format!("`{}`", name.to_string_lossy()))
        .unwrap_or_default();
    let defaults: Vec<String> = argument
        .get_default_values()
        .iter()
        .map(|value| format!("`{}`", value.to_string_lossy()))
        .collect();
    let mut description = sentence(
        &argument
            .get_long_help()
            .or_else(|| argument.get_help())
            .map(|help| help.to_string())
            .unwrap_or_default()
            .replace('\n', " "),
    );
    let possible: Vec<String> = argument
        .get_possible_values()
        .iter()
        .filter(|value| !value.is_hide_set())
        .map(|value| format!("`{}`", value.get_name()))
        .collect();
    // Switches and BOOL flags list true/false as possible values; the flag column says so.
    if !possible.is_empty() && takes_value && value_name != "BOOL" {
        description.push_str(&format!(" Values: {}.", possible.join(", ")));
    }
    if let Some(delimiter) = argument.get_value_delimiter() {
        description.push_str(&format!(
            " Several values may be joined with `{delimiter}`."
        ));
    }
    format!(
        "| {} | {} | {} | {} |",
        escape_cell(&flag),
        environment,
        escape_cell(&defaults.join(", ")),
        escape_cell(description.trim())
    )
}

/// Markdown table cells cannot hold a bare `|`.
fn escape_cell(text: &str) -> String {
    text.replace('|', "\\|")
}
