use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use gateway_dns::cli::{Cli, Command, LogFormat};
use gateway_dns::cmd;

/// Every admission review decodes its object into a few dozen short-lived allocations on a
/// worker thread; mimalloc serves those from thread-local pages, where glibc's malloc pays for
/// each in instructions and cold metadata. Built without transparent huge pages (`no_thp`), which
/// only made the process larger. The measurements behind both: docs/benchmarks.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gateway_dns::allocator::return_freed_pages_promptly();
    let (args, notes) = match gateway_dns::cli::external_dns_flags(std::env::args_os()) {
        Ok(read) => read,
        Err(message) => {
            // As clap reports a flag it refuses: on stderr, exit 2.
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let plugin = args
        .first()
        .is_some_and(|argv0| gateway_dns::cli::invoked_as_plugin(argv0));
    let args = gateway_dns::cli::join_boolean_values(args);
    let cli = if plugin {
        // Run by kubectl as `kubectl gateway-dns`: its own command line, kubectl's flags.
        gateway_dns::cli::parse_plugin(args, cmd::plugin::context_namespace)
            .unwrap_or_else(|err| err.exit())
    } else {
        Cli::parse_from(args)
    };
    if !matches!(cli.command, Command::Serve(_)) {
        for note in &notes {
            eprintln!("gateway-dns: {note}");
        }
    }
    match cli.command {
        Command::Check(args) => ExitCode::from(cmd::check::run(&args)),
        Command::Explain(args) => ExitCode::from(cmd::explain::run(&args)),
        Command::Certs(args) => ExitCode::from(cmd::certs::run(&args)),
        Command::Zone(command) => ExitCode::from(cmd::zone::run(&command)),
        Command::Dnssec(args) => ExitCode::from(cmd::dnssec::run(&args)),
        Command::Completions(args) => ExitCode::from(cmd::completions::run(&args)),
        Command::Man(args) => ExitCode::from(cmd::man::run(&args)),
        Command::Serve(args) => {
            init_tracing(&args.log_level, args.log_format);
            for note in &notes {
                tracing::info!("{note}");
            }
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(worker_threads())
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    eprintln!("gateway-dns serve: cannot start the async runtime: {err}");
                    return ExitCode::from(2);
                }
            };
            match runtime.block_on(cmd::serve::run(*args)) {
                Ok(code) => ExitCode::from(code),
                Err(err) => {
                    // Once, on stderr, with each cause once (the log goes to stderr too).
                    eprintln!("gateway-dns serve: {}", cmd::error_chain(err.as_ref()));
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// At most this many async worker threads unless `TOKIO_WORKER_THREADS` says otherwise: a
/// review takes microseconds, the sync loop is one task, and settling and reading manifests run
/// on the blocking pool, while every worker keeps its own allocator pages. Without a CPU limit a pod sees every
/// core of its node, and one worker per core there cost resident memory for nothing
/// (docs/benchmarks.md, "Memory of `serve`").
const MAX_WORKER_THREADS: usize = 4;

fn worker_threads() -> usize {
    let configured = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|value| value.trim().parse::<usize>().ok())
        .filter(|threads| *threads > 0);
    configured.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(MAX_WORKER_THREADS)
    })
}

/// Logs on stderr at `--log-level`, or as the filter in GATEWAY_DNS_LOG says when it is set
/// (e.g. `info,gateway_dns::sync=debug`); text on a terminal and JSON otherwise, unless
/// `--log-format` says.
fn init_tracing(level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GATEWAY_DNS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    if json {
        builder.json().init();
    } else {
        // Colour codes only where a person reads them: files and pipes get plain text.
        let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        builder.with_ansi(colour).init();
    }
}
