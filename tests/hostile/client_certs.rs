//! `--client-ca`: with it the webhook answers only clients presenting a certificate from that
//! CA, as kube-apiserver does when its AdmissionConfiguration gives it one.

use std::sync::Arc;

use gateway_dns::webhook::server;
use gateway_dns::webhook::state::WebhookOptions;
use gateway_dns::webhook::tls;
use hyper::http::StatusCode;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::support::webhook::{
    HttpsConnection, TestHandler, TestWebhook, apiserver_tls_config, review, service_host,
};

/// A CA (PEM) and a client certificate and key it signed (PEM).
fn client_ca_and_certificate() -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let mut client_params = CertificateParams::new(vec!["kube-apiserver".to_owned()]).unwrap();
    client_params.is_ca = IsCa::ExplicitNoCa;
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client_cert = client_params.signed_by(&client_key, &issuer).unwrap();
    (ca_cert.pem(), client_cert.pem(), client_key.serialize_pem())
}

fn with_client_certificate(
    ca_pem: &str,
    client_cert_pem: &str,
    client_key_pem: &str,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(certificate.unwrap()).unwrap();
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(client_cert_pem.as_bytes())
            .map(Result::unwrap)
            .collect();
    let key = PrivateKeyDer::from_pem_slice(client_key_pem.as_bytes()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_clients_with_its_certificates_are_answered() {
    let webhook = TestWebhook::start(Arc::new(TestHandler), WebhookOptions::default()).await;
    let (client_ca, client_cert, client_key) = client_ca_and_certificate();
    let dir = tempfile::tempdir().unwrap();
    let client_ca_path = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca_path, &client_ca).unwrap();
    let config = tls::requiring_client_certs(&webhook.tls, &client_ca_path).unwrap();

    // A second listener with the same certificates, requiring client certificates.
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server::router(gateway_dns::webhook::state::WebhookState::new(
        Arc::new(TestHandler),
        webhook.metrics.clone(),
        webhook.readiness.clone(),
        WebhookOptions::default(),
    ));
    let serving = tokio::spawn(server::serve_tls(
        listener,
        config,
        app,
        webhook.readiness.clone(),
        std::future::pending::<()>(),
    ));

    // Without a certificate: no answer (TLS 1.3 reports the refusal on first use).
    let anonymous =
        HttpsConnection::connect_with(addr, apiserver_tls_config(&webhook.ca_pem), &service_host())
            .await;
    if let Ok(mut connection) = anonymous {
        let body = serde_json::to_vec(&review("u1", "web", "allow")).unwrap();
        let reply = connection
            .send(
                hyper::http::Method::POST,
                crate::support::webhook::VALIDATE_PATH,
                &crate::support::webhook::JSON,
                body,
            )
            .await;
        assert!(reply.is_err(), "answered a client without a certificate");
    }

    // With a certificate from the client CA: answered.
    let trusted = with_client_certificate(&webhook.ca_pem, &client_cert, &client_key);
    let mut connection = HttpsConnection::connect_with(addr, trusted, &service_host())
        .await
        .unwrap();
    let (status, body) = connection.post_review(&review("u2", "web", "allow")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);

    // A bad CA file is an error, not an open door.
    std::fs::write(&client_ca_path, "not a certificate").unwrap();
    assert!(tls::requiring_client_certs(&webhook.tls, &client_ca_path).is_err());
    serving.abort();
}
