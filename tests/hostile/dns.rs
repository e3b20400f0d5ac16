//! The embedded DNS server against idle TCP clients and malformed packets. Queries are written
//! byte by byte so that each test controls exactly what goes on the wire.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::metrics::Metrics;
use gateway_dns::webhook::server::{self, ListenerOptions};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};

use super::connections::connect_from;

pub const ZONE: &str = "example.com";
/// A bound for one answer on loopback that no healthy server comes near.
const ANSWER_LIMIT: Duration = Duration::from_secs(2);

pub async fn start_dns() -> EmbeddedDns {
    let mut config = EmbeddedConfig::new(vec![ZONE.into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    EmbeddedDns::start(config).await.unwrap()
}

/// A query for `example.com` SOA with id 0x1234, RD set, and an OPT record of `edns_version`
/// when given.
pub fn soa_query(edns_version: Option<u8>) -> Vec<u8> {
    let mut packet = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0];
    packet.push(u8::from(edns_version.is_some()));
    for label in ZONE.split('.') {
        packet.push(label.len() as u8);
        packet.extend_from_slice(label.as_bytes());
    }
    packet.extend_from_slice(&[0, 0, 6, 0, 1]);
    if let Some(version) = edns_version {
        // Root owner, type OPT, payload 1232, extended rcode 0, version, flags 0, no options.
        packet.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, version, 0, 0, 0, 0]);
    }
    packet
}

/// The response code of an answer, extended by its OPT record's upper bits when present.
pub fn rcode(answer: &[u8]) -> u16 {
    let low = u16::from(answer[3] & 0x0f);
    let high = opt_extended_rcode(answer).map_or(0, u16::from);
    (high << 4) | low
}

/// The extended-rcode byte of the OPT record, found by walking the answer's sections.
fn opt_extended_rcode(answer: &[u8]) -> Option<u8> {
    let count = |at: usize| usize::from(u16::from_be_bytes([answer[at], answer[at + 1]]));
    let (questions, records) = (count(4), count(6) + count(8) + count(10));
    let mut at = 12;
    let skip_name = |mut at: usize| -> Option<usize> {
        // Bounded by the packet's length: every step moves forward.
        while at < answer.len() {
            let length = answer[at];
            if length & 0xc0 == 0xc0 {
                return Some(at + 2);
            }
            if length == 0 {
                return Some(at + 1);
            }
            at += 1 + usize::from(length);
        }
        None
    };
    for _ in 0..questions {
        at = skip_name(at)? + 4;
    }
    for _ in 0..records {
        at = skip_name(at)?;
        let rtype = u16::from_be_bytes([*answer.get(at)?, *answer.get(at + 1)?]);
        let rdlength = usize::from(u16::from_be_bytes([
            *answer.get(at + 8)?,
            *answer.get(at + 9)?,
        ]));
        if rtype == 41 {
            return answer.get(at + 4).copied();
        }
        at += 10 + rdlength;
    }
    None
}

/// Sends `packet` over TCP on `stream` and reads one framed answer.
pub async fn ask_tcp(stream: &mut TcpStream, packet: &[u8]) -> Vec<u8> {
    let exchange = async {
        let mut framed = (packet.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(packet);
        stream.write_all(&framed).await?;
        let mut length = [0u8; 2];
        stream.read_exact(&mut length).await?;
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(length))];
        stream.read_exact(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    tokio::time::timeout(ANSWER_LIMIT, exchange)
        .await
        .expect("a TCP answer within the limit")
        .expect("a TCP answer")
}

/// Sends `packet` over UDP and waits up to `wait` for an answer.
pub async fn ask_udp(server: SocketAddr, packet: &[u8], wait: Duration) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(packet, server).await.unwrap();
    let mut buffer = vec![0u8; 4096];
    let (length, _) = tokio::time::timeout(wait, socket.recv_from(&mut buffer))
        .await
        .ok()?
        .ok()?;
    buffer.truncate(length);
    Some(buffer)
}

/// Opens `count` TCP connections to `server` that send nothing, spread over eight source
/// addresses other than 127.0.0.1.
async fn idle_connections(server: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(count);
    for index in 0..count {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (index % 8) as u8);
        // A refused or reset connection is what the server may do with a newcomer; keep going.
        if let Ok(stream) = connect_from(source, server).await {
            open.push(stream);
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tcp_connections_do_not_stop_a_new_query() {
    let dns = start_dns().await;
    // More than the 256 connections the server keeps open.
    let idle = idle_connections(dns.local_addr(), 300).await;
    let mut stream = connect_from(Ipv4Addr::LOCALHOST, dns.local_addr())
        .await
        .unwrap();
    let answer = ask_tcp(&mut stream, &soa_query(None)).await;
    assert_eq!(&answer[..2], &[0x12, 0x34]);
    assert_eq!(rcode(&answer), 0, "NOERROR for the zone's SOA");
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_metrics_connections_affect_neither_healthz_nor_dns() {
    let dns = start_dns().await;
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let metrics_addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(server::serve_plain(
        listener,
        server::metrics_router(
            Arc::new(Metrics::new()),
            gateway_dns::webhook::state::Readiness::new(),
        ),
        ListenerOptions::default(),
        std::future::pending::<()>(),
    ));
    // More than the listener's cap of 4096, within this process's open-file limit.
    let idle = idle_connections(metrics_addr, 6000).await;

    let mut stream = connect_from(Ipv4Addr::LOCALHOST, metrics_addr)
        .await
        .unwrap();
    let request = "GET /healthz HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(ANSWER_LIMIT, stream.read_to_string(&mut response))
        .await
        .expect("/healthz answered within the limit")
        .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");

    let mut dns_stream = connect_from(Ipv4Addr::LOCALHOST, dns.local_addr())
        .await
        .unwrap();
    assert_eq!(rcode(&ask_tcp(&mut dns_stream, &soa_query(None)).await), 0);
    drop(idle);
    serving.abort();
}

#[tokio::test]
async fn an_edns_version_other_than_zero_gets_badvers() {
    let dns = start_dns().await;
    let addr = dns.local_addr();
    let answer = ask_udp(addr, &soa_query(Some(1)), ANSWER_LIMIT)
        .await
        .expect("an answer");
    assert_eq!(rcode(&answer), 16, "BADVERS");
    let answer = ask_udp(addr, &soa_query(Some(0)), ANSWER_LIMIT)
        .await
        .expect("an answer");
    assert_eq!(rcode(&answer), 0, "version 0 is answered");
}

#[tokio::test]
async fn short_packets_and_responses_are_dropped_not_answered() {
    let dns = start_dns().await;
    let addr = dns.local_addr();
    // How long a dropped packet is given to be answered anyway.
    let wait = Duration::from_millis(500);
    let short = &soa_query(None)[..11];
    assert_eq!(ask_udp(addr, short, wait).await, None, "11 bytes");
    let mut response = soa_query(None);
    response[2] |= 0x80;
    assert_eq!(ask_udp(addr, &response, wait).await, None, "QR=1");
    // A garbled query with a whole header still gets FORMERR.
    let garbled = [&soa_query(None)[..12], &[0xff, 0xff][..]].concat();
    let answer = ask_udp(addr, &garbled, ANSWER_LIMIT)
        .await
        .expect("FORMERR");
    assert_eq!(rcode(&answer), 1);
    // And the server still answers a good query afterwards.
    let good = ask_udp(addr, &soa_query(None), ANSWER_LIMIT)
        .await
        .expect("an answer");
    assert_eq!(rcode(&good), 0);
}

#[tokio::test]
async fn udp_answers_to_one_source_are_rate_limited() {
    let mut config = EmbeddedConfig::new(vec![ZONE.into()]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.udp_answers_per_source_per_second = 5;
    let dns = EmbeddedDns::start(config).await.unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let queries = 40;
    for _ in 0..queries {
        socket
            .send_to(&soa_query(None), dns.local_addr())
            .await
            .unwrap();
    }
    let mut answered = 0;
    let mut buffer = vec![0u8; 4096];
    // Bounded: one answer per query at most, each awaited briefly.
    for _ in 0..queries {
        match tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buffer)).await
        {
            Ok(Ok(_)) => answered += 1,
            _ => break,
        }
    }
    assert!(answered >= 5, "the burst is answered ({answered})");
    assert!(answered < queries / 2, "{answered} of {queries} answered");
    // Another source has its own bucket.
    let other = UdpSocket::bind("127.0.0.2:0").await.unwrap();
    other
        .send_to(&soa_query(None), dns.local_addr())
        .await
        .unwrap();
    let answer = tokio::time::timeout(ANSWER_LIMIT, other.recv_from(&mut buffer)).await;
    assert!(matches!(answer, Ok(Ok(_))), "another source is answered");
}
