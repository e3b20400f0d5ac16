//! external-dns parity: the shared `extdns-compare` tool over the shared reference case
//! `extdns-visible.yaml`, with the built binary. It must end with `0 failed`, and skip only FQDN-template cases and unit
//! cases (those are ported in `unit_cases.rs`).

use std::process::Command;

use crate::objects::shared_dir;

const UNIT_SKIP: &str = "unit case: covered by the project's own unit tests";
const TEMPLATE_SKIP: &str = "FQDN templates not supported";

#[test]
fn extdns_compare_passes() {
    let shared = shared_dir();
    let tool = shared.join("tools").join("extdns-compare");
    let cases = shared.join("cases").join("extdns-visible.yaml");
    assert!(
        tool.is_file(),
        "the extdns-compare tool is missing: {} does not exist",
        tool.display()
    );
    assert!(
        cases.is_file(),
        "the shared cases are missing: {} does not exist",
        cases.display()
    );
    let python = Command::new("python3")
        .args(["-c", "import yaml"])
        .output()
        .unwrap_or_else(|err| {
            panic!("python3 is needed to run extdns-compare ({err}); install it: apt-get install python3 python3-yaml")
        });
    assert!(
        python.status.success(),
        "extdns-compare needs PyYAML: apt-get install python3-yaml (or pip install pyyaml)\n{}",
        String::from_utf8_lossy(&python.stderr)
    );

    let out = Command::new("python3")
        .arg(&tool)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_gateway-dns"))
        .arg(&cases)
        .output()
        .expect("python3 runs extdns-compare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    let failed: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("FAIL "))
        .collect();
    assert!(
        failed.is_empty(),
        "extdns-compare cases failed:\n{}\n(rerun: python3 {} --verbose --bin {} {})",
        failed.join("\n"),
        tool.display(),
        env!("CARGO_BIN_EXE_gateway-dns"),
        cases.display()
    );
    let last = lines.last().copied().unwrap_or_default();
    let counts: Vec<u64> = last
        .split(", ")
        .filter_map(|part| part.split_once(' ')?.0.parse().ok())
        .collect();
    let [passed, failed, skipped] = counts[..] else {
        panic!("unexpected last line {last:?}; stdout:\n{stdout}\nstderr:\n{stderr}");
    };
    assert!(
        last.ends_with(" skipped") && last.contains(" passed, ") && last.contains(" failed, "),
        "{last}"
    );
    assert_eq!(failed, 0, "{last}");
    assert!(passed > 0, "nothing passed: {last}");
    assert!(out.status.success(), "exit status {}: {stderr}", out.status);

    let skips: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("SKIP "))
        .collect();
    assert_eq!(skips.len() as u64, skipped, "SKIP lines vs {last}");
    let unexpected: Vec<&&str> = skips
        .iter()
        .filter(|line| {
            let Some((id, reason)) = line["SKIP ".len()..].split_once(": ") else {
                return true;
            };
            let unit = id.starts_with("unit/") && reason == UNIT_SKIP;
            let template = reason.starts_with(TEMPLATE_SKIP);
            !(unit || template)
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "skips other than FQDN-template and unit cases:\n{unexpected:#?}"
    );
    assert!(
        skips.iter().any(|l| l.contains(UNIT_SKIP)),
        "the unit cases are listed as skipped"
    );
}
