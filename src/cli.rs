//! Command line: `check`, `serve`, `certs`. Every flag can also come from `GATEWAY_DNS_<FLAG>`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::engine::{
    AttachmentMode, Config, ConfigError, ConflictResolution, Mode, Scope, selector,
};

#[derive(Debug, Parser)]
#[command(
    name = "gateway-dns",
    version,
    about = "DNS governance for the Kubernetes Gateway API"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate YAML/JSON files offline: the records they would publish and every finding.
    Check(CheckArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Files or directories (multi-document YAML, JSON, `kind: List`); `-` reads stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", env = "GATEWAY_DNS_OUTPUT")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Flags shared by `check` and `serve`: what the engine decides and for which objects.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// How routes attach: predicted from spec, or only where status says Accepted=True.
    #[arg(long, default_value = "spec", value_parser = ["spec", "status"], env = "GATEWAY_DNS_ATTACHMENT")]
    pub attachment: String,
    /// Only Gateways with this name.
    #[arg(long, env = "GATEWAY_DNS_GATEWAY_NAME")]
    pub gateway_name: Option<String>,
    /// Only Gateways in this namespace.
    #[arg(long, env = "GATEWAY_DNS_GATEWAY_NAMESPACE")]
    pub gateway_namespace: Option<String>,
    /// Only Gateways whose labels match this selector (e.g. `dns=public,tier in (edge)`).
    #[arg(long, env = "GATEWAY_DNS_GATEWAY_SELECTOR")]
    pub gateway_selector: Option<String>,
    /// Only routes in this namespace.
    #[arg(long, env = "GATEWAY_DNS_NAMESPACE")]
    pub namespace: Option<String>,
    /// Only routes whose labels match this selector.
    #[arg(long, env = "GATEWAY_DNS_ROUTE_SELECTOR")]
    pub route_selector: Option<String>,
    /// Only routes whose annotations match this selector.
    #[arg(long, env = "GATEWAY_DNS_ANNOTATION_FILTER")]
    pub annotation_filter: Option<String>,
    /// Read ListenerSets (true|false).
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL", env = "GATEWAY_DNS_LISTENER_SETS")]
    pub listener_sets: bool,
    /// Publish the wildcard hostname a hostless route inherits from its listener.
    #[arg(long, env = "GATEWAY_DNS_ALLOW_INHERITED_WILDCARDS")]
    pub allow_inherited_wildcards: bool,
    /// Ignore the external-dns hostname annotation on routes.
    #[arg(long, env = "GATEWAY_DNS_IGNORE_HOSTNAME_ANNOTATION")]
    pub ignore_hostname_annotation: bool,
    /// Who keeps a name claimed through Gateways with different addresses.
    #[arg(long, default_value = "oldest-wins", value_parser = ["oldest-wins", "exclude"], env = "GATEWAY_DNS_CONFLICT_RESOLUTION")]
    pub conflict_resolution: String,
    /// enforce: deny; warn: denials become warnings; audit: only logged and counted.
    #[arg(long, default_value = "enforce", value_parser = ["enforce", "warn", "audit"], env = "GATEWAY_DNS_MODE")]
    pub mode: String,
    /// Override one reason's action: REASON=deny|warn|ignore (repeatable).
    #[arg(
        long = "action",
        value_name = "REASON=ACTION",
        env = "GATEWAY_DNS_ACTION",
        value_delimiter = ','
    )]
    pub actions: Vec<String>,
}

impl EngineArgs {
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let parse_selector = |s: &Option<String>| s.as_deref().map(selector::parse).transpose();
        let mut actions = BTreeMap::new();
        for text in &self.actions {
            let (reason, action) = Config::parse_action(text)?;
            actions.insert(reason, action);
        }
        Ok(Config {
            attachment: self.attachment.parse::<AttachmentMode>()?,
            scope: Scope {
                gateway_name: self.gateway_name.clone(),
                gateway_namespace: self.gateway_namespace.clone(),
                gateway_selector: parse_selector(&self.gateway_selector)?,
                namespace: self.namespace.clone(),
                route_selector: parse_selector(&self.route_selector)?,
                annotation_filter: parse_selector(&self.annotation_filter)?,
            },
            listener_sets: self.listener_sets,
            allow_inherited_wildcards: self.allow_inherited_wildcards,
            ignore_hostname_annotation: self.ignore_hostname_annotation,
            conflict_resolution: self.conflict_resolution.parse::<ConflictResolution>()?,
            mode: self.mode.parse::<Mode>()?,
            actions,
        })
    }
}

/// Exit codes of `check`.
pub const EXIT_OK: u8 = 0;
pub const EXIT_DENIED: u8 = 1;
pub const EXIT_INPUT: u8 = 2;

/// Runs `check`; returns the process exit code.
pub fn run_check(args: &CheckArgs) -> u8 {
    let cfg = match args.engine.to_config() {
        Ok(cfg) => cfg,
        Err(err) => {
            eprintln!("gateway-dns check: {err}");
            return EXIT_INPUT;
        }
    };
    let loaded = match crate::source::files::load_paths(&args.paths) {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("gateway-dns check: {err}");
            return EXIT_INPUT;
        }
    };
    let plan = crate::check::run(Arc::new(cfg), loaded);
    match args.output {
        OutputFormat::Json => println!("{}", crate::check::to_json(&plan)),
        OutputFormat::Text => {
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            print!("{}", crate::check::to_text(&plan, colour));
        }
    }
    if plan.denies() { EXIT_DENIED } else { EXIT_OK }
}
