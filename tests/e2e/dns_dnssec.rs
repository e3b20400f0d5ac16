//! DNSSEC on the embedded server, judged by BIND's own tools: `delv` validates answers
//! (positive, wildcard, CNAME, NXDOMAIN, NODATA) with the zone's DNSKEY as trust anchor,
//! `dnssec-verify` accepts the zone as AXFR transfers it, and a BIND secondary serves the
//! signed zone so that `delv` validates its answers too.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns, ZoneKey};
use gateway_dns::dns::Endpoint;
use gateway_dns::model::RecordType;
use gateway_dns::sync::{SyncConfig, Syncer};

use crate::dns_secondary::{Replica, axfr, replica_dirs, wait_for_early_in_a_minute, zone_records};
use crate::support::bind::{Bind, KEY_NAME, SECRET};
use crate::support::dig;
use crate::support::net::{free_port, require_binary};
use crate::support::records::source_of;

const ZONE: &str = "example.com";

/// `gateway-dns dnssec ARGS…`: (exit code, stdout, stderr).
fn dnssec_command(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .arg("dnssec")
        .args(args)
        .output()
        .expect("run gateway-dns dnssec");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Makes a key with `gateway-dns dnssec --generate`; returns the DNSKEY line it printed.
fn generate_key(path: &Path, algorithm: &str) -> String {
    let key = path.to_str().unwrap();
    let (code, out, err) = dnssec_command(&[
        "--generate",
        "--algorithm",
        algorithm,
        "--key",
        key,
        "--zone",
        ZONE,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(" IN DS "), "{out}");
    // Printing again from the file gives the same records.
    let (code, again, err) = dnssec_command(&["--key", key, "--zone", ZONE]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, again);
    out.lines()
        .find(|line| line.contains(" IN DNSKEY "))
        .expect("a DNSKEY line")
        .to_string()
}

/// delv's trust-anchor file for the DNSKEY line `example.com. 3600 IN DNSKEY 257 3 13 KEY`.
fn write_anchor(path: &Path, dnskey: &str) {
    let fields: Vec<&str> = dnskey.split_whitespace().collect();
    let [owner, _, _, _, flags, protocol, algorithm, key] = fields[..] else {
        panic!("unexpected DNSKEY line {dnskey}");
    };
    std::fs::write(
        path,
        format!(
            "trust-anchors {{ \"{owner}\" static-key {flags} {protocol} {algorithm} \"{key}\"; }};\n"
        ),
    )
    .unwrap();
}

/// `delv` against `server` with the anchor; its whole output.
fn delv(server: std::net::SocketAddr, anchor: &Path, name: &str, rtype: &str) -> String {
    let output = Command::new(require_binary("delv", "bind9-dnsutils"))
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .arg("-a")
        .arg(anchor)
        .arg(format!("+root={ZONE}"))
        .args(["+nortrace", "+nomtrace", "+novtrace"])
        .arg(name)
        .arg(rtype)
        .output()
        .expect("run delv");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn desired() -> Vec<Endpoint> {
    vec![
        Endpoint::new("app.example.com", RecordType::A, ["192.0.2.1"]),
        Endpoint::new("app.example.com", RecordType::AAAA, ["2001:db8::1"]),
        Endpoint::new("www.example.com", RecordType::CNAME, ["app.example.com"]),
        Endpoint::new("text.example.com", RecordType::TXT, ["hello world"]),
        Endpoint::new("*.wild.example.com", RecordType::A, ["192.0.2.3"]),
        // b.example.com becomes an empty non-terminal.
        Endpoint::new("a.b.example.com", RecordType::A, ["192.0.2.4"]),
    ]
}

/// Every kind of answer validates, for each algorithm.
fn assert_answers_validate(server: std::net::SocketAddr, anchor: &Path) {
    for (name, rtype, expect) in [
        ("app.example.com", "A", "192.0.2.1"),
        ("app.example.com", "AAAA", "2001:db8::1"),
        ("www.example.com", "A", "192.0.2.1"),
        ("text.example.com", "TXT", "hello world"),
        ("x.y.wild.example.com", "A", "192.0.2.3"),
        ("example.com", "SOA", "hostmaster.example.com"),
        ("example.com", "NS", "ns1.example.com"),
        ("example.com", "DNSKEY", "DNSKEY"),
    ] {
        let out = delv(server, anchor, name, rtype);
        assert!(
            out.contains("; fully validated") && out.contains(expect),
            "{name} {rtype}: {out}"
        );
    }
    for (name, rtype, expect) in [
        ("nope.example.com", "A", "NXDOMAIN"),
        ("deep.nope.b.example.com", "A", "NXDOMAIN"),
        ("app.example.com", "TXT", "NXRRSET"),
        ("b.example.com", "A", "NXRRSET"),
        ("x.wild.example.com", "TXT", "NXRRSET"),
    ] {
        let out = delv(server, anchor, name, rtype);
        assert!(
            out.contains("; negative response, fully validated") && out.contains(expect),
            "{name} {rtype}: {out}"
        );
    }
    // A CNAME to a name without the type: the CNAME validates, then the NODATA proof.
    let out = delv(server, anchor, "www.example.com", "TXT");
    assert!(
        out.contains("; fully validated") && out.contains("NXRRSET") && out.contains("NSEC"),
        "www.example.com TXT: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delv_validates_answers_and_dnssec_verify_accepts_the_transferred_zone() {
    let work = tempfile::tempdir().unwrap();
    for algorithm in ["ecdsap256sha256", "ed25519"] {
        let key_path = work.path().join(format!("{algorithm}.key"));
        let dnskey = generate_key(&key_path, algorithm);
        let anchor = work.path().join(format!("{algorithm}.anchor"));
        write_anchor(&anchor, &dnskey);

        let bind_port = free_port();
        let mut config = EmbeddedConfig::new(vec![ZONE.into()]);
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.secondaries = vec![([127, 0, 0, 1], bind_port).into()];
        config.transfer_key = Some(
            gateway_dns::tsig::TsigKey::from_base64(
                KEY_NAME,
                "hmac-sha256".parse().unwrap(),
                SECRET,
            )
            .unwrap(),
        );
        config.dnssec_keys = vec![Arc::new(ZoneKey::load(&key_path).unwrap())];
        let server = Arc::new(EmbeddedDns::start(config).await.unwrap());
        let primary = server.local_addr();
        let records = Arc::new(Mutex::new(desired()));
        let source = source_of(&records);
        let syncer = Syncer::new(
            server.clone(),
            source,
            SyncConfig::new("gw", vec![ZONE.into()]),
            Default::default(),
        );
        assert!(syncer.run_once().await.unwrap().converged);

        let anchor_for_primary = anchor.clone();
        tokio::task::spawn_blocking(move || assert_answers_validate(primary, &anchor_for_primary))
            .await
            .unwrap();

        // Without the DO bit: the plain answer, no signatures.
        let plain = dig::query(primary, "app.example.com", "A", false);
        assert_eq!(plain.data("A"), ["192.0.2.1"]);
        assert!(plain.data("RRSIG").is_empty(), "{plain:?}");

        // The zone as AXFR sends it passes BIND's verifier (-z: the one key is a combined
        // signing key, flagged as KSK, that signs everything).
        let key = format!("hmac-sha256:{KEY_NAME}:{SECRET}");
        let zone_text = axfr(primary, ZONE, Some(&key));
        assert!(zone_text.contains("\tRRSIG\t") && zone_text.contains("\tNSEC\t"));
        let zone_file = work.path().join(format!("{algorithm}.zone"));
        std::fs::write(&zone_file, &zone_text).unwrap();
        let verify = Command::new(require_binary("dnssec-verify", "bind9-utils"))
            .args(["-z", "-o", ZONE])
            .arg(&zone_file)
            .output()
            .expect("run dnssec-verify");
        let verify_out = format!(
            "{}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
        assert!(verify.status.success(), "dnssec-verify: {verify_out}");
        assert!(verify_out.contains("Zone fully signed"), "{verify_out}");

        // A BIND secondary serves the signed zone: its answers validate as well.
        let bind =
            tokio::task::spawn_blocking(move || Bind::start_secondary(ZONE, bind_port, primary))
                .await
                .unwrap();
        let secondary = bind.addr();
        let anchor_for_secondary = anchor.clone();
        tokio::task::spawn_blocking(move || {
            assert_answers_validate(secondary, &anchor_for_secondary)
        })
        .await
        .unwrap();

        // A change reaches the secondary by NOTIFY and IXFR (signatures and NSEC included),
        // and still validates there.
        let before = server.serial(ZONE).unwrap();
        records.lock().unwrap()[0] =
            Endpoint::new("app.example.com", RecordType::A, ["192.0.2.10"]);
        assert!(syncer.run_once().await.unwrap().converged);
        let started = Instant::now();
        let anchor_for_change = anchor.clone();
        let validated = tokio::task::spawn_blocking(move || {
            while started.elapsed() < Duration::from_secs(10) {
                let out = delv(secondary, &anchor_for_change, "app.example.com", "A");
                if out.contains("192.0.2.10") {
                    return out;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            panic!("the secondary never served the change");
        })
        .await
        .unwrap();
        assert!(validated.contains("; fully validated"), "{validated}");
        let log = std::fs::read_to_string(bind.log_path()).unwrap_or_default();
        let serial = server.serial(ZONE).unwrap();
        let completed = format!("(serial {serial})");
        let transfer_line = log
            .lines()
            .find(|line| line.contains("Transfer completed") && line.contains(&completed))
            .unwrap_or_else(|| panic!("no transfer of the change in BIND's log:\n{log}"));
        // An IXFR: 4 SOAs; the old and new A, their RRSIGs, and the old and new RRSIG of the SOA.
        assert!(transfer_line.contains(" 10 records"), "{transfer_line}");
        let ixfr =
            crate::dns_secondary::transfer(primary, ZONE, &format!("IXFR={before}"), Some(&key));
        assert!(!ixfr.contains("hello world"), "only the change: {ixfr}");
        assert!(
            ixfr.contains("\tRRSIG\t") && ixfr.contains("192.0.2.10"),
            "{ixfr}"
        );
        eprintln!(
            "{algorithm}: a change validated on the BIND secondary after {:?}",
            started.elapsed()
        );
        drop(bind);
    }
}

#[test]
fn a_bad_key_file_is_refused_with_exit_2() {
    let work = tempfile::tempdir().unwrap();
    let bad = work.path().join("bad.key");
    std::fs::write(&bad, "not a key\n").unwrap();
    let (code, _, err) = dnssec_command(&["--key", bad.to_str().unwrap(), "--zone", ZONE]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a PEM PKCS#8 private key"), "{err}");
    let missing = work.path().join("missing.key");
    let (code, _, err) = dnssec_command(&["--key", missing.to_str().unwrap(), "--zone", ZONE]);
    assert_eq!(code, 2, "{err}");
    // --generate never overwrites a key without --force.
    let (code, _, err) =
        dnssec_command(&["--generate", "--key", bad.to_str().unwrap(), "--zone", ZONE]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read_to_string(&bad).unwrap(), "not a key\n");

    // serve refuses to start with it (exit 2, like the other refused settings).
    let manifests = work.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(
        manifests.join("ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_gateway-dns"))
        .args(["serve", "--manifests"])
        .arg(&manifests)
        .args(["--zone", ZONE])
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--dns-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--local-ca-out")
        .arg(work.path().join("ca.crt"))
        .arg("--embedded-dnssec-key")
        .arg(&bad)
        .output()
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--embedded-dnssec-key"), "{stderr}");
}

#[test]
fn ed25519_replicas_serve_the_same_signed_zone() {
    let work = tempfile::tempdir().unwrap();
    let manifests = crate::support::webhook::examples_dir().join("cluster");
    let key_path = work.path().join("zone.key");
    generate_key(&key_path, "ed25519");
    let key = format!("hmac-sha256:{KEY_NAME}:{SECRET}");
    // Both replicas start in the same minute window, so they agree on the serial.
    wait_for_early_in_a_minute();
    let (dns_a, dns_b) = (free_port(), free_port());
    let extra = [
        std::ffi::OsStr::new("--embedded-dnssec-key"),
        key_path.as_os_str(),
    ];
    let (dir_a, dir_b) = replica_dirs(work.path());
    let _replica_a = Replica::start_with(&manifests, &dir_a, dns_a, &extra);
    let _replica_b = Replica::start_with(&manifests, &dir_b, dns_b, &extra);
    let records = |dns: u16| zone_records(&axfr(([127, 0, 0, 1], dns).into(), ZONE, Some(&key)));
    let (zone_a, zone_b) = (records(dns_a), records(dns_b));
    assert!(
        zone_a.iter().any(|line| line.contains("\tRRSIG\t")),
        "{zone_a:?}"
    );
    // Ed25519 signatures are deterministic: byte-identical zones, signatures included.
    assert_eq!(zone_a, zone_b);
}
