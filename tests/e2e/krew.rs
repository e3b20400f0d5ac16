//! The krew plugin manifest template (krew/gateway-dns.yaml): YAML with its placeholders
//! quoted, a krew `Plugin` named gateway-dns whose every platform installs the binary that
//! kubectl runs for `kubectl gateway-dns`, and that binary, so named, is the plugin.

use std::process::Command;

use serde_yaml_ng::Value;

use crate::support::install::repo;

#[test]
fn the_krew_template_installs_kubectl_gateway_dns() {
    let path = repo().join("krew/gateway-dns.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let manifest: Value = serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    assert_eq!(
        manifest["apiVersion"].as_str(),
        Some("krew.googlecontainertools.github.com/v1alpha2")
    );
    assert_eq!(manifest["kind"].as_str(), Some("Plugin"));
    assert_eq!(manifest["metadata"]["name"].as_str(), Some("gateway-dns"));
    let spec = &manifest["spec"];
    assert_eq!(spec["version"].as_str(), Some("{{ .TagName }}"));
    for field in ["homepage", "shortDescription", "description"] {
        assert!(
            spec[field].as_str().is_some_and(|s| !s.trim().is_empty()),
            "spec.{field}"
        );
    }
    let platforms = spec["platforms"].as_sequence().expect("spec.platforms");
    assert!(!platforms.is_empty());
    for platform in platforms {
        let labels = &platform["selector"]["matchLabels"];
        let (os, arch) = (
            labels["os"].as_str().unwrap(),
            labels["arch"].as_str().unwrap(),
        );
        assert_eq!(
            platform["bin"].as_str(),
            Some(gateway_dns::cli::PLUGIN_FILE_NAME),
            "{os}/{arch}"
        );
        let uri = platform["uri"].as_str().unwrap();
        assert!(
            uri.contains("{{ .TagName }}") && uri.ends_with(&format!("-{os}-{arch}.tar.gz")),
            "{os}/{arch}: {uri}"
        );
        let sha256 = platform["sha256"].as_str().unwrap();
        assert_eq!(
            sha256,
            format!("{{{{ sha256 \"{os}-{arch}\" }}}}"),
            "{os}/{arch}"
        );
        assert_eq!(
            platform["files"][0]["from"].as_str(),
            Some(gateway_dns::cli::PLUGIN_FILE_NAME),
            "{os}/{arch}"
        );
    }

    // The binary under that name is the plugin.
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join(gateway_dns::cli::PLUGIN_FILE_NAME);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gateway-dns"), &plugin).unwrap();
    let out = Command::new(&plugin).arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.starts_with("kubectl gateway-dns "), "{version}");
    let out = Command::new(&plugin).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for offered in ["explain", "check", "zone"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(offered)),
            "{offered}: {help}"
        );
    }
    assert!(
        !help.lines().any(|l| l.trim_start().starts_with("serve")),
        "{help}"
    );
}
