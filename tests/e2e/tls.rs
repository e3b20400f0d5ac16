//! TLS of the webhook over real sockets: versions, ALPN, trust, and certificate rotation through
//! a Kubernetes Secret-volume style `..data` symlink swap.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway_dns::webhook::certs::{self, GeneratedCerts};
use gateway_dns::webhook::state::WebhookOptions;
use gateway_dns::webhook::tls::{self, CertSource};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::support::webhook::{
    HttpsConnection, NAMESPACE, SERVICE, TestHandler, TestWebhook, client_tls_config, review,
    service_host,
};

const BOTH_VERSIONS: [&rustls::SupportedProtocolVersion; 2] =
    [&rustls::version::TLS13, &rustls::version::TLS12];
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Upper bound on waiting for the reloader to notice a change (many poll intervals).
const RELOAD_WAIT: Duration = Duration::from_secs(10);

fn leaf_der(generated: &GeneratedCerts) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(generated.cert_pem.as_bytes()).unwrap()
}

async fn assert_review_allowed(connection: &mut HttpsConnection, uid: &str) {
    let (status, body) = connection.post_review(&review(uid, "web", "allow")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["response"]["uid"], uid);
    assert_eq!(body["response"]["allowed"], true);
}

#[tokio::test]
async fn tls_12_and_13_both_negotiate() {
    let webhook = TestWebhook::start(Arc::new(TestHandler), WebhookOptions::default()).await;
    for (version, expected) in [
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
    ] {
        let config = client_tls_config(&[&webhook.ca_pem], &[b"h2", b"http/1.1"], &[version]);
        let mut connection = HttpsConnection::connect_with(webhook.addr, config, &service_host())
            .await
            .unwrap();
        assert_eq!(connection.tls_version, Some(expected));
        assert_review_allowed(&mut connection, &format!("{expected:?}")).await;
    }
}

#[tokio::test]
async fn http2_and_http11_are_both_served() {
    let webhook = TestWebhook::start(Arc::new(TestHandler), WebhookOptions::default()).await;
    /// (protocols the client offers, protocol the server must pick)
    type AlpnCase = (&'static [&'static [u8]], Option<&'static [u8]>);
    let offers: [AlpnCase; 3] = [
        (&[b"h2"], Some(b"h2")),
        (&[b"http/1.1"], Some(b"http/1.1")),
        // No ALPN at all: the server must still speak HTTP/1.1.
        (&[], None),
    ];
    for (offered, expected) in offers {
        let config = client_tls_config(&[&webhook.ca_pem], offered, &BOTH_VERSIONS);
        let mut connection = HttpsConnection::connect_with(webhook.addr, config, &service_host())
            .await
            .unwrap();
        assert_eq!(connection.alpn.as_deref(), expected);
        // Several requests on one keep-alive connection.
        for index in 0..3 {
            assert_review_allowed(&mut connection, &format!("alpn-{expected:?}-{index}")).await;
        }
    }
}

#[tokio::test]
async fn the_client_verifies_the_service_names_and_the_ca() {
    let webhook = TestWebhook::start(Arc::new(TestHandler), WebhookOptions::default()).await;
    for name in certs::service_sans(SERVICE, NAMESPACE) {
        let mut connection = HttpsConnection::connect(webhook.addr, &webhook.ca_pem, &name)
            .await
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_review_allowed(&mut connection, &name).await;
    }
    let wrong_name =
        HttpsConnection::connect(webhook.addr, &webhook.ca_pem, "other.example.com").await;
    assert!(
        wrong_name.is_err(),
        "a name outside the SANs must not verify"
    );

    let other_ca = certs::generate(SERVICE, NAMESPACE).unwrap().ca_cert_pem;
    let wrong_ca = HttpsConnection::connect(webhook.addr, &other_ca, &service_host()).await;
    assert!(
        wrong_ca.is_err(),
        "a CA we did not generate must not verify the server"
    );
}

#[tokio::test]
async fn in_memory_mode_writes_only_the_ca_certificate() {
    let directory = tempfile::tempdir().unwrap();
    let ca_out = directory.path().join("certs/ca.crt");
    let metrics = Arc::new(gateway_dns::metrics::Metrics::new());
    let runtime = tls::start(
        CertSource::InMemory {
            service: SERVICE.into(),
            namespace: NAMESPACE.into(),
            ca_out: ca_out.clone(),
        },
        metrics,
    )
    .await
    .unwrap();
    let written = std::fs::read_to_string(&ca_out).unwrap();
    assert_eq!(Some(written), runtime.ca_cert_pem);
    let files: Vec<_> = std::fs::read_dir(directory.path().join("certs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(files, ["ca.crt"]);
}

/// A directory laid out like a kubelet-managed Secret volume: `tls.crt -> ..data/tls.crt`,
/// `..data -> ..gen_N`, swapped by renaming a new symlink over `..data`.
struct SecretVolume {
    root: tempfile::TempDir,
    generation: usize,
}

impl SecretVolume {
    fn new(cert_pem: &str, key_pem: &str) -> Self {
        let root = tempfile::tempdir().unwrap();
        let mut volume = Self {
            root,
            generation: 0,
        };
        let first = volume.write_generation(cert_pem.as_bytes(), key_pem.as_bytes());
        std::os::unix::fs::symlink(&first, volume.root.path().join("..data")).unwrap();
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(
                Path::new("..data").join(file),
                volume.root.path().join(file),
            )
            .unwrap();
        }
        volume
    }

    fn write_generation(&mut self, cert: &[u8], key: &[u8]) -> PathBuf {
        self.generation += 1;
        let name = PathBuf::from(format!("..gen_{}", self.generation));
        let directory = self.root.path().join(&name);
        std::fs::create_dir(&directory).unwrap();
        std::fs::write(directory.join("tls.crt"), cert).unwrap();
        std::fs::write(directory.join("tls.key"), key).unwrap();
        name
    }

    /// Atomically points `..data` at a new generation holding `cert` and `key`.
    fn swap(&mut self, cert: &[u8], key: &[u8]) {
        let generation = self.write_generation(cert, key);
        let staging = self.root.path().join("..data_tmp");
        std::os::unix::fs::symlink(&generation, &staging).unwrap();
        std::fs::rename(&staging, self.root.path().join("..data")).unwrap();
    }

    fn source(&self) -> CertSource {
        CertSource::Files {
            cert_path: self.root.path().join("tls.crt"),
            key_path: self.root.path().join("tls.key"),
            poll_interval: POLL_INTERVAL,
        }
    }
}

/// The certificate a full handshake (no resumption) gets from the server now.
async fn presented_certificate(
    webhook: &TestWebhook,
    config: &Arc<rustls::ClientConfig>,
) -> CertificateDer<'static> {
    let mut no_resumption = (**config).clone();
    no_resumption.resumption = rustls::client::Resumption::disabled();
    let connection =
        HttpsConnection::connect_with(webhook.addr, Arc::new(no_resumption), &service_host())
            .await
            .unwrap();
    assert_eq!(connection.handshake_kind, Some(rustls::HandshakeKind::Full));
    connection.server_certificate
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < RELOAD_WAIT,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(POLL_INTERVAL / 2).await;
    }
}

#[tokio::test]
async fn rotation_through_a_swapped_data_symlink_needs_no_restart() {
    let first = certs::generate(SERVICE, NAMESPACE).unwrap();
    let second = certs::generate(SERVICE, NAMESPACE).unwrap();
    let third = certs::generate(SERVICE, NAMESPACE).unwrap();
    let mut volume = SecretVolume::new(&first.cert_pem, &first.key_pem);
    let webhook = TestWebhook::start_with(
        Arc::new(TestHandler),
        WebhookOptions::default(),
        volume.source(),
    )
    .await;
    let config = client_tls_config(
        &[&first.ca_cert_pem, &second.ca_cert_pem, &third.ca_cert_pem],
        &[b"h2", b"http/1.1"],
        &BOTH_VERSIONS,
    );
    let mut kept_open =
        HttpsConnection::connect_with(webhook.addr, config.clone(), &service_host())
            .await
            .unwrap();
    assert_eq!(kept_open.server_certificate, leaf_der(&first));
    // A request lets the client receive its TLS 1.3 session ticket.
    assert_review_allowed(&mut kept_open, "before-rotation").await;
    let mut resumed = HttpsConnection::connect_with(webhook.addr, config.clone(), &service_host())
        .await
        .unwrap();
    assert_eq!(resumed.handshake_kind, Some(rustls::HandshakeKind::Resumed));
    assert_review_allowed(&mut resumed, "resumed").await;

    volume.swap(second.cert_pem.as_bytes(), second.key_pem.as_bytes());
    wait_until("the second certificate to be served", || {
        webhook.metrics.tls_reloads("reloaded") == 1
    })
    .await;
    // The same client, holding resumable sessions, gets a full handshake with the new
    // certificate: rotation forgets the sessions of the old one.
    let after = HttpsConnection::connect_with(webhook.addr, config.clone(), &service_host())
        .await
        .unwrap();
    assert_eq!(after.handshake_kind, Some(rustls::HandshakeKind::Full));
    assert_eq!(after.server_certificate, leaf_der(&second));
    assert_eq!(
        presented_certificate(&webhook, &config).await,
        leaf_der(&second)
    );
    // A connection opened before the rotation keeps working.
    assert_review_allowed(&mut kept_open, "after-rotation").await;

    // A certificate with someone else's key: rejected, the second pair stays.
    volume.swap(third.cert_pem.as_bytes(), first.key_pem.as_bytes());
    wait_until("the mismatched pair to be rejected", || {
        webhook.metrics.tls_reloads("rejected") == 1
    })
    .await;
    assert_eq!(
        presented_certificate(&webhook, &config).await,
        leaf_der(&second)
    );

    // A half-written key (as if copied non-atomically): rejected too.
    let half_key = &third.key_pem.as_bytes()[..third.key_pem.len() / 2];
    volume.swap(third.cert_pem.as_bytes(), half_key);
    wait_until("the half-written pair to be rejected", || {
        webhook.metrics.tls_reloads("rejected") == 2
    })
    .await;
    assert_eq!(
        presented_certificate(&webhook, &config).await,
        leaf_der(&second)
    );

    // Once the pair is complete, it is served.
    volume.swap(third.cert_pem.as_bytes(), third.key_pem.as_bytes());
    wait_until("the third certificate to be served", || {
        webhook.metrics.tls_reloads("reloaded") == 2
    })
    .await;
    assert_eq!(
        presented_certificate(&webhook, &config).await,
        leaf_der(&third)
    );
    assert!(
        webhook
            .metrics
            .render()
            .contains("gateway_dns_tls_reloads_total{result=\"rejected\"} 2")
    );
}

#[tokio::test]
async fn a_file_source_starts_only_from_a_valid_pair() {
    let first = certs::generate(SERVICE, NAMESPACE).unwrap();
    let second = certs::generate(SERVICE, NAMESPACE).unwrap();
    let volume = SecretVolume::new(&first.cert_pem, &second.key_pem);
    let metrics = Arc::new(gateway_dns::metrics::Metrics::new());
    let error = tls::start(volume.source(), metrics.clone())
        .await
        .unwrap_err();
    assert!(matches!(error, tls::Error::KeyMismatch(_)), "{error:?}");

    let missing = CertSource::Files {
        cert_path: volume.root.path().join("absent.crt"),
        key_path: volume.root.path().join("tls.key"),
        poll_interval: POLL_INTERVAL,
    };
    let error = tls::start(missing, metrics).await.unwrap_err();
    assert!(error.to_string().contains("absent.crt"), "{error}");
}
