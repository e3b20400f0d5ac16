//! The command line's conveniences through the real binary and the real tools that read them:
//! `--version` (and build.rs, which stamps it, run as cargo runs it: in this checkout, outside
//! any git checkout, without git), `completions` loaded into bash and fish (zsh checks its
//! syntax), and `man` rendered by groff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clap::CommandFactory as _;
use gateway_dns::cli::Cli;

use crate::support::install::repo;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}: {}{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// A tool the tests need, from Debian's packages (scripts/test.sh installs them).
fn tool(name: &str, package: &str) -> PathBuf {
    let path = PathBuf::from("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{name} is missing: install Debian's {package} package (scripts/test.sh does)"
    );
    path
}

fn git_head(dir: &Path) -> Option<String> {
    let output = Command::new("git")
        .args(["-C"])
        .arg(dir)
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn parse_date(text: &str) -> time::Date {
    let parts: Vec<&str> = text.split('-').collect();
    assert_eq!(parts.len(), 3, "a YYYY-MM-DD date: {text}");
    let month: u8 = parts[1].parse().unwrap();
    time::Date::from_calendar_date(
        parts[0].parse().unwrap(),
        time::Month::try_from(month).unwrap(),
        parts[2].parse().unwrap(),
    )
    .unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn version_names_the_revision_and_the_build_date() {
    let line = stdout(&binary().arg("--version").output().unwrap());
    let rest = line
        .trim()
        .strip_prefix(&format!(
            "gateway-dns {} (revision ",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap_or_else(|| panic!("--version: {line}"));
    let (revision, date) = rest
        .strip_suffix(')')
        .and_then(|r| r.split_once(", built "))
        .unwrap_or_else(|| panic!("--version: {line}"));
    // Built from this checkout: its HEAD (a build with GATEWAY_DNS_REVISION set says so).
    let expected = std::env::var("GATEWAY_DNS_REVISION")
        .ok()
        .or_else(|| git_head(&repo()))
        .unwrap_or_else(|| "unknown".to_string());
    assert_eq!(revision, expected, "--version: {line}");
    let built = parse_date(date);
    let today = time::OffsetDateTime::now_utc().date();
    assert!(
        built <= today && built.year() >= 2025,
        "built {built}, today {today}"
    );
    // The same revision in the build_info metric.
    assert_eq!(gateway_dns::metrics::REVISION, revision);
}

/// build.rs compiled as cargo compiles it, then run as cargo runs it, with `env` set.
struct BuildScript {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl BuildScript {
    fn compile() -> BuildScript {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("build-script");
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
        let output = Command::new(rustc)
            .args(["--edition", "2024", "-o"])
            .arg(&path)
            .arg(repo().join("build.rs"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "compiling build.rs: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        BuildScript { _dir: dir, path }
    }

    /// The `cargo:rustc-env` values it prints.
    fn run(&self, manifest_dir: &Path, env: &[(&str, &str)]) -> (String, String) {
        let mut command = Command::new(&self.path);
        command
            .env_remove("GATEWAY_DNS_REVISION")
            .env_remove("SOURCE_DATE_EPOCH")
            .env("CARGO_MANIFEST_DIR", manifest_dir);
        for (name, value) in env {
            command.env(name, value);
        }
        let text = stdout(&command.output().unwrap());
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("cargo:rustc-env={name}=")))
                .unwrap_or_else(|| panic!("{name} not set: {text}"))
                .to_string()
        };
        (
            value("GATEWAY_DNS_REVISION"),
            value("GATEWAY_DNS_BUILD_DATE"),
        )
    }
}

#[test]
fn build_script_stamps_a_checkout_a_tarball_and_a_reproducible_build() {
    let script = BuildScript::compile();
    // In this checkout: HEAD, and today's date.
    let (revision, date) = script.run(&repo(), &[]);
    if let Some(head) = git_head(&repo()) {
        assert_eq!(revision, head);
    }
    assert_eq!(parse_date(&date), time::OffsetDateTime::now_utc().date());
    // Unpacked from a tarball (no .git above it), or built where git is not installed.
    let tarball = tempfile::tempdir().unwrap();
    std::fs::write(tarball.path().join("Cargo.toml"), "[package]\n").unwrap();
    assert_eq!(script.run(tarball.path(), &[]).0, "unknown");
    let no_git = tempfile::tempdir().unwrap();
    let path = no_git.path().display().to_string();
    assert_eq!(script.run(&repo(), &[("PATH", &path)]).0, "unknown");
    // A container build passes the revision in; SOURCE_DATE_EPOCH fixes the date.
    let (revision, date) = script.run(
        tarball.path(),
        &[
            ("GATEWAY_DNS_REVISION", "0123456789ab"),
            ("SOURCE_DATE_EPOCH", "1764806400"),
        ],
    );
    assert_eq!(
        (revision.as_str(), date.as_str()),
        ("0123456789ab", "2025-12-04")
    );
    for (epoch, expected) in [
        ("0", "1970-01-01"),
        ("951782400", "2000-02-29"),
        ("4107542399", "2100-02-28"),
    ] {
        let (_, date) = script.run(tarball.path(), &[("SOURCE_DATE_EPOCH", epoch)]);
        assert_eq!(date, expected, "SOURCE_DATE_EPOCH={epoch}");
    }
}

fn completion_script(shell: &str, dir: &Path) -> PathBuf {
    let script = stdout(&binary().args(["completions", shell]).output().unwrap());
    assert!(!script.is_empty());
    let path = dir.join(format!("gateway-dns.{shell}"));
    std::fs::write(&path, script).unwrap();
    path
}

/// Subcommands and the long flags of `serve`, from the clap definitions.
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect()
}

#[test]
fn bash_completes_subcommands_flags_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script("bash", dir.path());
    let complete = |words: &[&str]| -> BTreeSet<String> {
        let line = words.join(" ");
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; \
             COMP_POINT=${{#COMP_LINE}}; \
             f=$(complete -p gateway-dns | awk '{{for (i = 1; i < NF; i++) if ($i == \"-F\") print $(i + 1)}}'); \
             \"$f\" gateway-dns '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            quoted.join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let output = Command::new(tool("bash", "bash"))
            .args(["--norc", "-c", &program])
            .output()
            .unwrap();
        stdout(&output)
            .lines()
            .map(|l| l.trim().to_string())
            .collect()
    };
    let all = complete(&["gateway-dns", ""]);
    for subcommand in subcommands() {
        assert!(all.contains(&subcommand), "{subcommand} in {all:?}");
    }
    assert_eq!(
        complete(&["gateway-dns", "se"]),
        BTreeSet::from(["serve".to_string()])
    );
    let flags = complete(&["gateway-dns", "serve", "--metrics-l"]);
    assert_eq!(flags, BTreeSet::from(["--metrics-listen".to_string()]));
    let shells = complete(&["gateway-dns", "completions", ""]);
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.contains(shell), "{shell} in {shells:?}");
    }
}

#[test]
fn fish_completes_subcommands_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script("fish", dir.path());
    let complete = |line: &str| -> BTreeSet<String> {
        let program = format!("source '{}'; complete -C '{line}'", script.display());
        let output = Command::new(tool("fish", "fish"))
            .args(["--no-config", "-c", &program])
            .output()
            .unwrap();
        // Each candidate is followed by a tab and its description.
        stdout(&output)
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default().to_string())
            .collect()
    };
    let all = complete("gateway-dns ");
    for subcommand in subcommands() {
        assert!(all.contains(&subcommand), "{subcommand} in {all:?}");
    }
    assert_eq!(
        complete("gateway-dns serve --metrics-l"),
        BTreeSet::from(["--metrics-listen".to_string()])
    );
}

#[test]
fn zsh_completion_is_a_valid_compdef() {
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script("zsh", dir.path());
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.starts_with("#compdef gateway-dns"), "{text}");
    for subcommand in subcommands() {
        assert!(text.contains(&format!("'{subcommand}:")), "{subcommand}");
    }
    let output = Command::new(tool("zsh", "zsh"))
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    stdout(&output);
    // An unknown shell is refused by the argument parser (exit 2), not a panic.
    let unknown = binary().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

/// A page rendered as `man` would show it, with groff's warnings on.
fn render_page(page: &Path) -> String {
    let output = Command::new(tool("groff", "groff-base"))
        .args([
            "-man",
            "-Tascii",
            "-ww",
            "-rLL=200n",
            "-P-c",
            "-P-b",
            "-P-u",
        ])
        .arg(page)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.trim().is_empty(),
        "groff warns about {}: {stderr}",
        page.display()
    );
    stdout(&output)
}

#[test]
fn man_pages_render_and_list_every_flag() {
    let dir = tempfile::tempdir().unwrap();
    let listed = stdout(
        &binary()
            .args(["man", "--out-dir"])
            .arg(dir.path())
            .output()
            .unwrap(),
    );
    let mut expected: BTreeSet<String> = subcommands()
        .iter()
        .map(|s| format!("gateway-dns-{s}.1"))
        .collect();
    expected.insert("gateway-dns.1".to_string());
    let written: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(written, expected);
    assert_eq!(listed.lines().count(), expected.len(), "{listed}");

    // gateway-dns(1) names every subcommand's page and says which build it describes.
    let root = render_page(&dir.path().join("gateway-dns.1"));
    for subcommand in subcommands() {
        assert!(
            root.contains(&format!("gateway-dns-{subcommand}(1)")),
            "gateway-dns(1) names gateway-dns-{subcommand}(1):\n{root}"
        );
    }
    assert!(root.contains(&format!("gateway-dns {}", env!("CARGO_PKG_VERSION"))));
    // Each subcommand's page lists each of its flags (hidden aliases stay out, as in --help).
    let command = Cli::command();
    for subcommand in command.get_subcommands() {
        let page = render_page(
            &dir.path()
                .join(format!("gateway-dns-{}.1", subcommand.get_name())),
        );
        for argument in subcommand.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = argument.get_long() {
                assert!(
                    page.contains(&format!("--{long}")),
                    "gateway-dns-{}(1) lists --{long}:\n{page}",
                    subcommand.get_name()
                );
            }
        }
    }
    // Without --out-dir, gateway-dns(1) on stdout: the same page.
    let printed = binary().arg("man").output().unwrap();
    assert_eq!(
        stdout(&printed).as_bytes(),
        std::fs::read(dir.path().join("gateway-dns.1")).unwrap()
    );
}
