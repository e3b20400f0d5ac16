//! Taking over a zone that external-dns wrote with its TXT registry options (`--txt-prefix`,
//! `--txt-suffix` with `%{record_type}`, `--txt-wildcard-replacement`, `--txt-encrypt-enabled`):
//! real BIND 9 seeded with records in external-dns's format, the sync loop writing through
//! RFC 2136, every effect checked with dig.
//!
//! The encrypted values below were written by external-dns v0.22.0's own code
//! (`endpoint.Labels.Serialize(true, true, key)`, as its TXT registry calls it), so they are
//! external-dns's bytes, not ours.

use std::sync::{Arc, Mutex};

use gateway_dns::dns::Endpoint;
use gateway_dns::dns::provider::rfc2136::Rfc2136Provider;
use gateway_dns::dns::registry::{TxtRegistry, Value};
use gateway_dns::dns::txt_crypto::TxtCipher;
use gateway_dns::model::RecordType;
use gateway_dns::sync::{BlockReason, SyncConfig, Syncer};

use crate::support::bind::Bind;
use crate::support::dig;
use crate::support::records::a;
use crate::support::records::{Desired, source_of};

const ZONE: &str = "example.com";
const OWNER: &str = "gw-test";
const KEY: &str = "passphrasewhichneedstobe32bytes!";
/// external-dns's value for owner `gw-test`, resource `httproute/shop/web`, under [`KEY`].
const SEALED_APP: &str = "ed11HV9XHqu9Pegf+MIfC1GWfjtYP0u17Us+c7pIGOrgepGPuhJsrcxFbECSatnTzU107e8kGXZ8IxUaniwaDTgdCmuI0Qo2P8uIVTX1y05SNy9OosoNh1UK/AQJ0YQ0HRY0ACbD7KWZ7VOUZ4CY13ThyLhwZHPS";
/// external-dns's value for owner `gw-test` under another key: it must not count as ours.
const SEALED_OTHER_KEY: &str = "E47RZV42jPaEV4T+3JmenfcmPOUtf6fkbU6IuWaeIOUgvPh+ltXYmNHwSzKviuTRWw0Hi/zK3NpbkpNSjAqECjcMzNBLUm2pjGzsGdvrFd7Qra2DyOnQ0Ud6uNFVG84=";
const PLAIN_APP: &str =
    "heritage=external-dns,external-dns/owner=gw-test,external-dns/resource=httproute/shop/web";

fn syncer(bind: &Bind, desired: &Desired, registry: TxtRegistry) -> Syncer {
    let provider = Arc::new(Rfc2136Provider::new(bind.provider_config()).unwrap());
    let mut config = SyncConfig::new(OWNER, vec![ZONE.into()]);
    config.registry = registry;
    Syncer::new(provider, source_of(desired), config, Default::default())
}

fn lookup(bind: &Bind, name: &str, rtype: &str) -> Vec<String> {
    dig::query(bind.addr(), name, rtype, false).data(rtype)
}

fn cipher() -> TxtCipher {
    TxtCipher::from_key_text(KEY).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_records_external_dns_wrote_with_a_prefix_and_encryption() {
    let seed = [
        "app IN A 192.0.2.1".to_string(),
        format!("txt.a-app IN TXT \"{SEALED_APP}\""),
        "other IN A 192.0.2.50".to_string(),
        format!("txt.a-other IN TXT \"{SEALED_OTHER_KEY}\""),
    ]
    .join("\n");
    let bind = Bind::start(ZONE, &seed);
    let registry = TxtRegistry::new(OWNER)
        .with_affixes(Some("txt.".into()), None)
        .with_encryption(Some(cipher()), true);
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("app.example.com", &["192.0.2.9"]),
        a("other.example.com", &["192.0.2.9"]),
        a("new.example.com", &["192.0.2.10"]),
    ]));
    let syncer = syncer(&bind, &desired, registry.clone());

    let first = syncer.run_once().await.unwrap();
    // Ours through the encrypted, prefixed record: updated in place, ownership kept as written.
    assert_eq!(lookup(&bind, "app.example.com", "A"), ["192.0.2.9"]);
    assert_eq!(lookup(&bind, "txt.a-app.example.com", "TXT"), [SEALED_APP]);
    assert!(lookup(&bind, "a-app.example.com", "TXT").is_empty());
    // Sealed with another key: not ours, left alone, and reported.
    assert_eq!(lookup(&bind, "other.example.com", "A"), ["192.0.2.50"]);
    assert_eq!(
        lookup(&bind, "txt.a-other.example.com", "TXT"),
        [SEALED_OTHER_KEY]
    );
    let blocked: Vec<(&str, &BlockReason)> = first
        .pass
        .plan
        .blocked
        .iter()
        .map(|b| (b.dns_name.as_str(), &b.reason))
        .collect();
    assert_eq!(
        blocked,
        [("other.example.com", &BlockReason::ForeignRecord)]
    );
    assert_eq!(first.pass.plan.undecryptable, ["txt.a-other.example.com"]);
    // A new record gets an encrypted ownership record under the prefix, in the clear nowhere.
    assert_eq!(lookup(&bind, "new.example.com", "A"), ["192.0.2.10"]);
    let new_txt = lookup(&bind, "txt.a-new.example.com", "TXT");
    assert_eq!(new_txt.len(), 1);
    assert!(!new_txt[0].contains("heritage"), "{new_txt:?}");
    assert_eq!(
        cipher().decrypt(&new_txt[0]).unwrap(),
        "heritage=external-dns,external-dns/owner=gw-test,external-dns/resource=httproute/shop/web"
    );
    assert!(matches!(registry.parse(&new_txt[0]), Value::Ownership(_)));

    // Steady state: nothing is rewritten under a fresh nonce.
    let idle = syncer.sync_pass().await.unwrap();
    assert_eq!(idle.applied, 0, "{:?}", idle.plan.changes);
    assert_eq!(lookup(&bind, "txt.a-new.example.com", "TXT"), new_txt);

    // Ownership survived the takeover: removing the record removes it and its TXT record.
    desired
        .lock()
        .unwrap()
        .retain(|e| e.dns_name != "app.example.com");
    syncer.run_once().await.unwrap();
    assert!(lookup(&bind, "app.example.com", "A").is_empty());
    assert!(lookup(&bind, "txt.a-app.example.com", "TXT").is_empty());
    assert_eq!(lookup(&bind, "other.example.com", "A"), ["192.0.2.50"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_over_records_external_dns_wrote_with_a_typed_suffix_and_wildcard_replacement() {
    // Names as external-dns v0.22.0 makes them with --txt-suffix=-%{record_type}
    // --txt-wildcard-replacement=any: `any-a.wild.example.com`, `web-aaaa.example.com`.
    let seed = [
        "*.wild IN A 192.0.2.5".to_string(),
        format!("any-a.wild IN TXT \"{PLAIN_APP}\""),
        "web IN AAAA 2001:db8::1".to_string(),
        format!("web-aaaa IN TXT \"{PLAIN_APP}\""),
    ]
    .join("\n");
    let bind = Bind::start(ZONE, &seed);
    let registry = TxtRegistry::new(OWNER)
        .with_affixes(None, Some("-%{record_type}".into()))
        .with_wildcard_replacement(Some("any".into()));
    let desired: Desired = Arc::new(Mutex::new(vec![
        a("*.wild.example.com", &["192.0.2.6"]),
        Endpoint::new("web.example.com", RecordType::AAAA, ["2001:db8::2"])
            .with_resource("httproute/shop/web"),
    ]));
    let syncer = syncer(&bind, &desired, registry);

    let first = syncer.run_once().await.unwrap();
    assert!(first.pass.plan.blocked.is_empty(), "{:?}", first.pass.plan);
    assert_eq!(lookup(&bind, "x.wild.example.com", "A"), ["192.0.2.6"]);
    assert_eq!(lookup(&bind, "web.example.com", "AAAA"), ["2001:db8::2"]);
    assert_eq!(lookup(&bind, "any-a.wild.example.com", "TXT"), [PLAIN_APP]);
    assert_eq!(lookup(&bind, "web-aaaa.example.com", "TXT"), [PLAIN_APP]);
    assert!(lookup(&bind, "aaaa-web.example.com", "TXT").is_empty());
    assert!(lookup(&bind, "a-any.wild.example.com", "TXT").is_empty());

    *desired.lock().unwrap() = Vec::new();
    syncer.run_once().await.unwrap();
    assert!(lookup(&bind, "x.wild.example.com", "A").is_empty());
    assert!(lookup(&bind, "web.example.com", "AAAA").is_empty());
    assert!(lookup(&bind, "any-a.wild.example.com", "TXT").is_empty());
    assert!(lookup(&bind, "web-aaaa.example.com", "TXT").is_empty());
}

/// `gateway-dns serve --once` over the example cluster (a.example.com and b.example.com on
/// 203.0.113.10) against `bind`, with `args` and `env` added: (exit status, stdout, stderr).
fn serve_once(bind: &Bind, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let manifests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gateway-dns"));
    command
        .args([
            "serve",
            "--once",
            "--webhook=false",
            "--txt-owner-id",
            OWNER,
        ])
        .args(bind.serve_args())
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
        .envs(bind.serve_env())
        .envs(env.iter().copied());
    let out = command.output().expect("gateway-dns runs");
    (
        out.status.code().expect("exited, not signalled"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The flags and environment variables reach the registry: `serve --once` takes over a record
/// whose ownership external-dns wrote prefixed and encrypted, only with the right key.
#[test]
fn serve_reads_the_registry_options_from_flags_and_environment() {
    let seed = [
        "a IN A 198.51.100.99".to_string(),
        format!("txt.a-a IN TXT \"{SEALED_APP}\""),
    ]
    .join("\n");
    let bind = Bind::start(ZONE, &seed);
    let prefix = ["--txt-prefix", "txt.", "--txt-encrypt-enabled"];

    // Another key (a dry run, so that b is not written under it): a.example.com is not ours.
    let wrong = serve_once(
        &bind,
        &[&prefix[..], &["--dry-run"]].concat(),
        &[(
            "GATEWAY_DNS_TXT_ENCRYPT_AES_KEY",
            "01234567890123456789012345678901",
        )],
    );
    assert_eq!(wrong.0, 0, "stdout: {}\nstderr: {}", wrong.1, wrong.2);
    assert!(wrong.1.contains("blocked: a.example.com"), "{}", wrong.1);
    assert!(!wrong.2.contains("0123456789"), "the key is never shown");
    assert_eq!(lookup(&bind, "a.example.com", "A"), ["198.51.100.99"]);
    assert_eq!(lookup(&bind, "txt.a-a.example.com", "TXT"), [SEALED_APP]);

    // external-dns's key, from a file: taken over, and every ownership record encrypted.
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("aes-key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let key_file = key_file.to_str().unwrap();
    let right = serve_once(
        &bind,
        &[&prefix[..], &["--txt-encrypt-aes-key-file", key_file]].concat(),
        &[],
    );
    assert_eq!(right.0, 0, "stdout: {}\nstderr: {}", right.1, right.2);
    assert_eq!(lookup(&bind, "a.example.com", "A"), ["203.0.113.10"]);
    assert_eq!(lookup(&bind, "b.example.com", "A"), ["203.0.113.10"]);
    for txt in ["txt.a-a.example.com", "txt.a-b.example.com"] {
        let values = lookup(&bind, txt, "TXT");
        assert_eq!(values.len(), 1, "{txt}: {values:?}");
        let plain = cipher().decrypt(&values[0]).unwrap();
        assert!(
            plain.starts_with("heritage=external-dns,external-dns/owner=gw-test,"),
            "{txt}: {plain}"
        );
    }
    assert!(lookup(&bind, "a-b.example.com", "TXT").is_empty());

    // Settings external-dns refuses are refused too, before anything is written.
    let both = serve_once(&bind, &["--txt-prefix", "x.", "--txt-suffix", "-y"], &[]);
    assert_eq!(both.0, 2, "{}", both.2);
    assert!(both.2.contains("--txt-suffix"), "{}", both.2);
    let keyless = serve_once(&bind, &["--txt-encrypt-enabled"], &[]);
    assert_eq!(keyless.0, 2, "{}", keyless.2);
    assert!(
        keyless.2.contains("GATEWAY_DNS_TXT_ENCRYPT_AES_KEY"),
        "{}",
        keyless.2
    );
    let short = serve_once(
        &bind,
        &[],
        &[("GATEWAY_DNS_TXT_ENCRYPT_AES_KEY", "too-short-a-key")],
    );
    assert_eq!(short.0, 2, "{}", short.2);
    assert!(short.2.contains("32 bytes"), "{}", short.2);
    assert!(!short.2.contains("too-short-a-key"), "{}", short.2);
}
