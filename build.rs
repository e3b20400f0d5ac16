//! Stamps the binary with the git revision and the build date, for `--version` and the
//! `gateway_dns_build_info` metric.
//!
//! - `GATEWAY_DNS_REVISION`: the environment variable of that name when set (a container build
//!   passes it in, having no `.git`), else `git rev-parse --short=12 HEAD`, else `unknown` (a
//!   source tarball, no git installed).
//! - `GATEWAY_DNS_BUILD_DATE`: the UTC date (YYYY-MM-DD) of `SOURCE_DATE_EPOCH` when set, for
//!   reproducible builds, else of the time of the build.
//!
//! Nothing here fails the build: a missing `.git` or `git` only gives `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-env-changed=GATEWAY_DNS_REVISION");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let revision = match std::env::var("GATEWAY_DNS_REVISION") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => git_revision().unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=GATEWAY_DNS_REVISION={revision}");
    println!("cargo:rustc-env=GATEWAY_DNS_BUILD_DATE={}", build_date());
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(text.trim().to_string())
}

/// The short HEAD commit; None outside a git checkout of this crate. Asks cargo to rerun when
/// HEAD moves.
fn git_revision() -> Option<String> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let top = git(&["-C", &manifest_dir, "rev-parse", "--show-toplevel"])?;
    // A crate unpacked inside some other repository is not that repository's commit.
    if !same_dir(Path::new(&top), Path::new(&manifest_dir)) {
        return None;
    }
    let git_dir = PathBuf::from(git(&[
        "-C",
        &manifest_dir,
        "rev-parse",
        "--absolute-git-dir",
    ])?);
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    if let Some(reference) = git(&["-C", &manifest_dir, "symbolic-ref", "-q", "HEAD"]) {
        let common = git(&["-C", &manifest_dir, "rev-parse", "--git-common-dir"])
            .map(|dir| Path::new(&manifest_dir).join(dir))
            .unwrap_or_else(|| git_dir.clone());
        // A path that does not exist makes cargo rerun on every build, and a branch whose ref is
        // packed has no loose file: then the nearest existing folder is watched, where the loose
        // ref appears on the next commit.
        let loose = common.join(&reference);
        let watched = loose.ancestors().find(|path| path.exists());
        if let Some(path) = watched {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        let packed = common.join("packed-refs");
        if packed.exists() {
            println!("cargo:rerun-if-changed={}", packed.display());
        }
    }
    git(&["-C", &manifest_dir, "rev-parse", "--short=12", "HEAD"])
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The UTC date of `SOURCE_DATE_EPOCH`, or of now.
fn build_date() -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|value| value.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs() as i64)
        });
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    format!("{year:04}-{month:02}-{day:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
