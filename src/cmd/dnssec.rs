//! `gateway-dns dnssec`: the DNSKEY and the DS record of a DNSSEC key file for the embedded
//! server, making the key first with `--generate`.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use hickory_proto::rr::Name;

use super::{EXIT_INPUT, EXIT_OK};
use crate::authority::dnssec::{KeyAlgorithm, ZoneKey};
use crate::cli::{DnssecAlgorithm, DnssecArgs};

/// Runs `dnssec`; returns the process exit code.
pub fn run(args: &DnssecArgs) -> u8 {
    match print_records(args) {
        Ok(text) => {
            print!("{text}");
            EXIT_OK
        }
        Err(err) => {
            eprintln!("gateway-dns dnssec: {}", super::error_chain(err.as_ref()));
            EXIT_INPUT
        }
    }
}

fn print_records(args: &DnssecArgs) -> Result<String> {
    let key = if args.generate {
        let algorithm = match args.algorithm {
            DnssecAlgorithm::Ecdsap256sha256 => KeyAlgorithm::Ecdsap256sha256,
            DnssecAlgorithm::Ed25519 => KeyAlgorithm::Ed25519,
        };
        let (key, pem) = ZoneKey::generate(algorithm)?;
        write_key(&args.key, &pem, args.force)?;
        key
    } else {
        ZoneKey::load(&args.key)?
    };
    let mut out = format!(
        "; key {}: algorithm {} ({}), key tag {}\n",
        args.key.display(),
        key.algorithm(),
        u8::from(key.algorithm()),
        key.key_tag()
    );
    for zone in &args.zones {
        let name = Name::from_ascii(format!("{}.", zone.trim_end_matches('.')))
            .with_context(|| format!("--zone {zone}: not a DNS name"))?;
        out.push_str(&format!(
            "; {name} DNSKEY (served by the embedded server)\n{}\n",
            key.dnskey_text(&name, args.ttl)
        ));
        out.push_str(&format!(
            "; {name} DS (publish at the parent zone)\n{}\n",
            key.ds_text(&name, args.ttl)?
        ));
    }
    Ok(out)
}

/// Writes the private key readable by its owner only; never over an existing file unless
/// `force`.
fn write_key(path: &Path, pem: &str, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!(
            "{} exists: pass --force to replace it (the old key's DS at the parent would stop matching)",
            path.display()
        );
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(pem.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
