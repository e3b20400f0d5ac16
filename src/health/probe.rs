//! One probe of one target: a TCP connection to the address itself (never a DNS lookup), then
//! for http and https a GET with Host (and SNI) set to a name published through the Gateway.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::spec::{CheckSpec, Protocol};

/// Why a probe failed, in a few words for the finding, the log and `explain`.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("connection failed: {0}")]
    Connect(std::io::Error),
    #[error("TLS failed: {0}")]
    Tls(std::io::Error),
    #[error("{0:?} cannot be sent as SNI")]
    ServerName(String),
    #[error("HTTP failed: {0}")]
    Http(#[from] hyper::Error),
    #[error("bad request: {0}")]
    Request(#[from] hyper::http::Error),
    #[error("status {0} is not an expected code")]
    Status(u16),
}

/// Probes `address` as `spec` says, within its timeout, with `host` as Host and SNI.
pub async fn probe(
    tls: &TlsConnector,
    address: SocketAddr,
    host: &str,
    spec: &CheckSpec,
) -> Result<(), ProbeError> {
    match tokio::time::timeout(spec.timeout, probe_unbounded(tls, address, host, spec)).await {
        Ok(result) => result,
        Err(_) => Err(ProbeError::Timeout(spec.timeout)),
    }
}

async fn probe_unbounded(
    tls: &TlsConnector,
    address: SocketAddr,
    host: &str,
    spec: &CheckSpec,
) -> Result<(), ProbeError> {
    let tcp = TcpStream::connect(address)
        .await
        .map_err(ProbeError::Connect)?;
    match spec.protocol {
        Protocol::Tcp => Ok(()),
        Protocol::Http => get(tcp, host, spec).await,
        Protocol::Https => {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|_| ProbeError::ServerName(host.to_owned()))?;
            let tls = tls.connect(name, tcp).await.map_err(ProbeError::Tls)?;
            get(tls, host, spec).await
        }
    }
}

/// One GET over `stream`; passes when the status is an expected code. The body is not read.
async fn get<S>(stream: S, host: &str, spec: &CheckSpec) -> Result<(), ProbeError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // Drives the connection until the answer's head is in; dropped with it.
    let driver = tokio::spawn(connection);
    let request = hyper::Request::get(spec.path.as_str())
        .header(hyper::header::HOST, authority(host, spec))
        .header(hyper::header::USER_AGENT, "gateway-dns-health-check")
        .header(hyper::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())?;
    let answer = sender.send_request(request).await;
    driver.abort();
    let status = answer?.status().as_u16();
    if spec.expected_codes.contains(status) {
        Ok(())
    } else {
        Err(ProbeError::Status(status))
    }
}

/// The Host header: the name, with the port unless it is the scheme's own.
fn authority(host: &str, spec: &CheckSpec) -> String {
    match (spec.protocol, spec.port) {
        (Protocol::Http, 80) | (Protocol::Https, 443) => host.to_owned(),
        (_, port) => format!("{host}:{port}"),
    }
}

/// The TLS client of https probes: any certificate is accepted, because a probe checks that
/// the target serves, not whom to trust (clients check that themselves); the handshake's
/// signatures are still verified, so it is a real one.
pub fn tls_connector() -> Result<TlsConnector, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Accepts every certificate and checks the handshake's signatures with the provider's
/// algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::spec::{Defaults, PREFIX, read};
    use crate::model::StringMap;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn spec(protocol: &str, port: u16) -> CheckSpec {
        let annotations = StringMap::from_pairs([
            (format!("{PREFIX}protocol"), protocol.to_owned()),
            (format!("{PREFIX}port"), port.to_string()),
            (format!("{PREFIX}timeout"), "1s".to_owned()),
        ]);
        read(&annotations, &Defaults::default())
            .and_then(Result::ok)
            .unwrap()
    }

    /// A server on loopback that answers every request with `status`, or never answers.
    async fn server(status: Option<u16>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    let _ = tcp.read(&mut buffer).await;
                    match status {
                        Some(status) => {
                            let answer = format!(
                                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            );
                            let _ = tcp.write_all(answer.as_bytes()).await;
                        }
                        None => tokio::time::sleep(std::time::Duration::from_secs(30)).await,
                    }
                });
            }
        });
        address
    }

    #[tokio::test]
    async fn a_probe_passes_on_expected_codes_only_and_fails_in_words() {
        let tls = tls_connector().unwrap();
        let ok = server(Some(204)).await;
        probe(&tls, ok, "app.example.com", &spec("http", ok.port()))
            .await
            .unwrap();
        let missing = server(Some(404)).await;
        let err = probe(
            &tls,
            missing,
            "app.example.com",
            &spec("http", missing.port()),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ProbeError::Status(404)), "{err}");
        // A TCP check only opens the connection.
        probe(
            &tls,
            missing,
            "app.example.com",
            &spec("tcp", missing.port()),
        )
        .await
        .unwrap();
        let silent = server(None).await;
        let err = probe(
            &tls,
            silent,
            "app.example.com",
            &spec("http", silent.port()),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ProbeError::Timeout(_)), "{err}");
        // Nothing listens there any more.
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let err = probe(&tls, closed, "app.example.com", &spec("tcp", closed.port()))
            .await
            .unwrap_err();
        assert!(matches!(err, ProbeError::Connect(_)), "{err}");
        // An https probe of a server that speaks no TLS fails in the handshake.
        let err = probe(&tls, ok, "app.example.com", &spec("https", ok.port()))
            .await
            .unwrap_err();
        assert!(matches!(err, ProbeError::Tls(_)), "{err}");
    }
}
