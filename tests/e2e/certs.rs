//! `gateway-dns certs`: what lands on disk, and what the certificates say.

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::PermissionsExt as _;

use gateway_dns::webhook::certs;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::X509Certificate;

const DAY: i64 = 24 * 60 * 60;

fn with_parsed<T>(pem: &str, inspect: impl FnOnce(&X509Certificate<'_>) -> T) -> T {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let certificate = pem.parse_x509().unwrap();
    inspect(&certificate)
}

fn validity_days(certificate: &X509Certificate<'_>) -> f64 {
    let validity = certificate.validity();
    (validity.not_after.timestamp() - validity.not_before.timestamp()) as f64 / DAY as f64
}

#[test]
fn serving_certificate_names_the_service_and_lasts_a_year() {
    let generated = certs::generate("webhook", "infra").unwrap();
    let (dns_names, ips, days, is_ca) = with_parsed(&generated.cert_pem, |certificate| {
        let san = certificate
            .subject_alternative_name()
            .unwrap()
            .expect("the serving certificate has SANs");
        let mut dns_names = Vec::new();
        let mut ips = Vec::new();
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns_name) => dns_names.push(dns_name.to_string()),
                GeneralName::IPAddress(bytes) => {
                    let octets: [u8; 4] = (*bytes).try_into().unwrap();
                    ips.push(IpAddr::from(octets));
                }
                other => panic!("unexpected SAN {other:?}"),
            }
        }
        (
            dns_names,
            ips,
            validity_days(certificate),
            certificate.is_ca(),
        )
    });
    assert_eq!(
        dns_names,
        [
            "webhook",
            "webhook.infra",
            "webhook.infra.svc",
            "webhook.infra.svc.cluster.local",
            "localhost"
        ]
    );
    assert_eq!(ips, [IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    // Every SAN listed by service_sans is present, so manifests can be cross-checked with it.
    for san in certs::service_sans("webhook", "infra") {
        assert!(
            dns_names.contains(&san) || ips.iter().any(|ip| ip.to_string() == san),
            "{san} missing"
        );
    }
    assert!(!is_ca);
    // One year, plus the few minutes of backdating for clock skew.
    assert!((365.0..365.1).contains(&days), "leaf validity {days} days");
}

#[test]
fn ca_is_a_ca_and_lasts_ten_years() {
    let generated = certs::generate("webhook", "infra").unwrap();
    let (days, is_ca, issuer_of_leaf, ca_subject) = with_parsed(&generated.ca_cert_pem, |ca| {
        let issuer_of_leaf = with_parsed(&generated.cert_pem, |leaf| leaf.issuer().to_string());
        (
            validity_days(ca),
            ca.is_ca(),
            issuer_of_leaf,
            ca.subject().to_string(),
        )
    });
    assert!(is_ca);
    assert!((3650.0..3650.1).contains(&days), "CA validity {days} days");
    assert_eq!(issuer_of_leaf, ca_subject);
}

#[test]
fn run_writes_three_files_with_a_private_key_mode() {
    let directory = tempfile::tempdir().unwrap();
    let out = directory.path().join("nested/out");
    let written = certs::run("webhook", "infra", &out, false).unwrap();
    let names: Vec<_> = written
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["ca.crt", "tls.crt", "tls.key"]);
    let mode = |name: &str| {
        std::fs::metadata(out.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("tls.key"), 0o600);
    assert_eq!(mode("tls.crt"), 0o644);
    assert_eq!(mode("ca.crt"), 0o644);
    // What was written is a usable pair.
    let cert = std::fs::read(out.join("tls.crt")).unwrap();
    let key = std::fs::read(out.join("tls.key")).unwrap();
    gateway_dns::webhook::tls::load_pair(&cert, &key).unwrap();
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
}

#[test]
fn refuses_to_overwrite_without_force_and_overwrites_with_it() {
    let directory = tempfile::tempdir().unwrap();
    let out = directory.path();
    certs::run("webhook", "infra", out, false).unwrap();
    let before: Vec<Vec<u8>> = ["ca.crt", "tls.crt", "tls.key"]
        .iter()
        .map(|name| std::fs::read(out.join(name)).unwrap())
        .collect();

    let error = certs::run("webhook", "infra", out, false).unwrap_err();
    assert!(
        matches!(error, certs::Error::WouldOverwrite { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("ca.crt") && message.contains("--force"),
        "{message}"
    );
    let unchanged: Vec<Vec<u8>> = ["ca.crt", "tls.crt", "tls.key"]
        .iter()
        .map(|name| std::fs::read(out.join(name)).unwrap())
        .collect();
    assert_eq!(before, unchanged);

    // Only one of the three present is enough to refuse.
    let partial = tempfile::tempdir().unwrap();
    std::fs::write(partial.path().join("tls.key"), "mine").unwrap();
    assert!(certs::run("webhook", "infra", partial.path(), false).is_err());
    assert_eq!(
        std::fs::read_to_string(partial.path().join("tls.key")).unwrap(),
        "mine"
    );
    assert!(!partial.path().join("ca.crt").exists());

    certs::run("webhook", "infra", out, true).unwrap();
    let after: Vec<Vec<u8>> = ["ca.crt", "tls.crt", "tls.key"]
        .iter()
        .map(|name| std::fs::read(out.join(name)).unwrap())
        .collect();
    for (old, new) in before.iter().zip(&after) {
        assert_ne!(old, new);
    }
    let mode = std::fs::metadata(out.join("tls.key"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}
