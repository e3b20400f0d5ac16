//! `scripts/dev-cluster`, the real script over the test control plane: `up` in audit mode waits
//! for the webhook as in any mode, keeps the default zone beside flags given after `--`, names
//! its addresses so they cannot be mistaken for serve's settings, and a failed `up` leaves no
//! process running.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::cluster::{TOOLS_ENV, repo_root, tools};

fn dev_cluster(args: &[&str]) -> Output {
    let mut command = Command::new(repo_root().join("scripts/dev-cluster"));
    command
        .args(args)
        .env("GATEWAY_DNS_BIN", env!("CARGO_BIN_EXE_gateway-dns"))
        .env(TOOLS_ENV, tools())
        // The tools are built already; a rebuild would rewrite what other tests run.
        .env("DEV_CLUSTER_PREBUILT", "1");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GATEWAY_DNS_") && key != TOOLS_ENV {
            command.env_remove(key);
        }
    }
    command.output().expect("scripts/dev-cluster runs")
}

/// Stops the cluster under the directory, whatever the test did.
struct Down<'d>(&'d Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = dev_cluster(&["down", &self.0.display().to_string()]);
    }
}

/// The command lines of the running processes that name `dir`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        // Zombies have an empty command line; the script's own shell is gone by now.
        if cmdline.contains(&dir) {
            found.push(cmdline);
        }
    }
    found
}

#[test]
fn up_in_audit_mode_keeps_the_default_zone_and_a_failed_up_stops_everything() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("audit");
    let dir_text = dir.display().to_string();
    let _down = Down(&dir);
    let up = dev_cluster(&["up", &dir_text, "--", "--mode", "audit"]);
    assert!(
        up.status.success(),
        "up in audit mode: {}\n{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    let pid = std::fs::read_to_string(dir.join("run/gateway-dns.pid")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let has = |pair: [&str; 2]| args.windows(2).any(|w| w[0] == pair[0] && w[1] == pair[1]);
    assert!(has(["--zone", "example.com"]), "{args:?}");
    assert!(has(["--mode", "audit"]), "{args:?}");
    let env = std::fs::read_to_string(dir.join("env")).unwrap();
    for name in [
        "DEV_CLUSTER_DNS_ADDR=127.0.0.1:",
        "DEV_CLUSTER_METRICS_ADDR=127.0.0.1:",
        "DEV_CLUSTER_WEBHOOK_ADDR=127.0.0.1:",
    ] {
        assert!(env.contains(name), "{name} in:\n{env}");
    }
    assert!(
        !env.contains("GATEWAY_DNS_"),
        "looks like serve's settings:\n{env}"
    );
    let down = dev_cluster(&["down", &dir_text]);
    assert!(down.status.success());

    // serve refuses its flags: up fails, and etcd and kube-apiserver are stopped with it.
    let failed = work.path().join("failed");
    let _down_failed = Down(&failed);
    let up = dev_cluster(&["up", &failed.display().to_string(), "--", "--no-such-flag"]);
    assert!(!up.status.success(), "up with a flag serve refuses");
    let stderr = String::from_utf8_lossy(&up.stderr);
    assert!(stderr.contains("up failed; stopping"), "{stderr}");
    assert!(
        failed.join("run").exists(),
        "the cluster was started before serve failed"
    );
    assert_eq!(processes_naming(&failed), Vec::<String>::new());
}
