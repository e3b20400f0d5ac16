//! `serve --once` as a pipeline runs it, the real binary against real BIND and PowerDNS: the
//! exit status says converged, dry run, blocked or failed; servers may be host names, resolved
//! when the sync connects; external-dns's flag names work; an error is one line, each cause once.

use std::path::Path;
use std::process::Command;

use crate::support::bind::{Bind, KEY_NAME, SECRET};
use crate::support::dig;
use crate::support::pdns::{API_KEY, Pdns};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `gateway-dns serve --once` over the example cluster (a.example.com and b.example.com on
/// 203.0.113.10), the webhook off and logs off, so stderr holds only what the command says.
fn serve_once(args: &[&str], env: &[(&str, &str)]) -> Run {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster");
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command
        .args([
            "serve",
            "--once",
            "--webhook=false",
            "--zone",
            "example.com",
        ])
        .arg("--manifests")
        .arg(manifests)
        .args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") {
            command.env_remove(key);
        }
    }
    command
        .env("GATEWAY_DNS_LOG", "off")
        .envs(env.iter().copied());
    let out = command.output().expect("gateway-dns runs");
    Run {
        code: out.status.code().expect("exited, not signalled"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn a_records(bind: &Bind, name: &str) -> Vec<String> {
    dig::query(bind.addr(), name, "A", false).data("A")
}

/// One line on stderr, and no cause in it twice.
fn assert_single_chain(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    let parts: Vec<&str> = lines[0].split(": ").collect();
    for (i, part) in parts.iter().enumerate() {
        assert!(
            !parts[i + 1..].contains(part),
            "{part:?} repeated in {stderr}"
        );
    }
}

#[test]
fn once_exit_status_over_bind_reached_by_host_name() {
    // a.example.com already exists, written by someone else: gateway-dns must not take it.
    let bind = Bind::start("example.com", "a IN A 198.51.100.99");
    let port = bind.port.to_string();
    let tsig = [("GATEWAY_DNS_RFC2136_TSIG_SECRET", SECRET)];
    let by_name = format!("localhost:{port}");
    fn rfc2136<'a>(server_flags: &[&'a str]) -> Vec<&'a str> {
        let mut flags = vec!["--provider", "rfc2136", "--rfc2136-tsig-key-name", KEY_NAME];
        flags.extend_from_slice(server_flags);
        flags
    }

    // Dry run, through external-dns's --rfc2136-host/--rfc2136-port: the plan is the result.
    let dry = serve_once(
        &[
            &rfc2136(&["--rfc2136-host", "localhost", "--rfc2136-port", &port])[..],
            &["--dry-run"],
        ]
        .concat(),
        &tsig,
    );
    assert_eq!(
        dry.code, 0,
        "stdout: {}\nstderr: {}",
        dry.stdout, dry.stderr
    );
    assert!(
        dry.stdout.contains("dry run: nothing written")
            && dry.stdout.contains("create: b.example.com")
            && dry.stdout.contains("blocked: a.example.com"),
        "{}",
        dry.stdout
    );
    assert!(
        a_records(&bind, "b.example.com").is_empty(),
        "nothing written"
    );

    // For real, by host name: b is written, a stays blocked: exit 3, not a failure.
    let blocked = serve_once(&rfc2136(&["--rfc2136-server", &by_name]), &tsig);
    assert_eq!(
        blocked.code, 3,
        "stdout: {}\nstderr: {}",
        blocked.stdout, blocked.stderr
    );
    assert!(
        blocked.stdout.contains("blocked: a.example.com"),
        "{}",
        blocked.stdout
    );
    assert_eq!(a_records(&bind, "b.example.com"), ["203.0.113.10"]);
    assert_eq!(a_records(&bind, "a.example.com"), ["198.51.100.99"]);

    // The server goes away: the pass fails, exit 1, the reason once.
    drop(bind);
    let failed = serve_once(&rfc2136(&["--rfc2136-server", &by_name]), &tsig);
    assert_eq!(
        failed.code, 1,
        "stdout: {}\nstderr: {}",
        failed.stdout, failed.stderr
    );
    assert!(
        failed
            .stderr
            .starts_with(&format!("gateway-dns serve --once: listing the records failed, nothing written: cannot reach DNS server {by_name}")),
        "{}",
        failed.stderr
    );
    assert_single_chain(&failed.stderr);
}

#[test]
fn once_converges_through_powerdns_reached_by_host_name() {
    let pdns = Pdns::start("example.com", &[]);
    let url = format!("http://localhost:{}", pdns.api_addr().port());
    let key = [("GATEWAY_DNS_PDNS_API_KEY", API_KEY)];
    let first = serve_once(&["--provider", "pdns", "--pdns-server", &url], &key);
    assert_eq!(
        first.code, 0,
        "stdout: {}\nstderr: {}",
        first.stdout, first.stderr
    );
    assert!(first.stdout.contains("converged"), "{}", first.stdout);
    assert_eq!(
        dig::query(pdns.dns_addr(), "a.example.com", "A", false).data("A"),
        ["203.0.113.10"]
    );
}

#[test]
fn configuration_errors_exit_2_with_one_line() {
    let bad_server = serve_once(
        &["--provider", "rfc2136", "--rfc2136-server", "bind dns:53"],
        &[],
    );
    assert_eq!(bad_server.code, 2, "{}", bad_server.stderr);
    assert!(
        bad_server
            .stderr
            .starts_with("gateway-dns serve: --rfc2136-server: \"bind dns:53\" is not HOST:PORT"),
        "{}",
        bad_server.stderr
    );
    assert_single_chain(&bad_server.stderr);

    let missing_key = serve_once(
        &[
            "--provider",
            "pdns",
            "--pdns-server",
            "http://localhost:1",
            "--pdns-api-key-file",
            "/nonexistent/gateway-dns/api-key",
        ],
        &[],
    );
    assert_eq!(missing_key.code, 2, "{}", missing_key.stderr);
    assert!(
        missing_key
            .stderr
            .starts_with("gateway-dns serve: loading the PowerDNS API key: "),
        "{}",
        missing_key.stderr
    );
    assert!(
        missing_key
            .stderr
            .contains("/nonexistent/gateway-dns/api-key")
    );
    assert_single_chain(&missing_key.stderr);

    // The older `--sync false` is read as `--sync=false`: with the webhook off too, nothing
    // is left to run.
    let separate = serve_once(&["--sync", "false"], &[]);
    assert_eq!(separate.code, 2);
    assert_eq!(
        separate.stderr,
        "gateway-dns serve: --webhook=false and --sync=false leave nothing to run\n"
    );
}
