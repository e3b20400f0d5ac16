//! A DNS packet → the embedded server's handler, as a UDP query and as a TCP query from an
//! allowed secondary (where zone transfers are answered), over a zone holding every record type
//! the server serves: A, AAAA, CNAME (a chain and one leaving the zone), TXT (long values),
//! a wildcard, an empty non-terminal, and enough records that a transfer spans messages.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::OnceLock;

use gateway_dns::authority::{EmbeddedConfig, EmbeddedDns};
use gateway_dns::dns::{Changes, Endpoint, Provider};
use gateway_dns::model::RecordType;
use gateway_dns::tsig::TsigKey;
use libfuzzer_sys::fuzz_target;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

struct Server {
    dns: EmbeddedDns,
    // Kept alive for the server's tasks; the handler itself runs synchronously.
    _runtime: tokio::runtime::Runtime,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let mut config = EmbeddedConfig::new(vec!["example.com".into(), "sub.example.com".into()]);
        config.listen = SocketAddr::from((LOOPBACK, 0));
        // The secondary is on loopback, so TCP queries from LOOPBACK may transfer the zones.
        config.secondaries = vec![SocketAddr::from((LOOPBACK, 9))];
        config.transfer_key = Some(
            TsigKey::from_base64(
                "transfer",
                "hmac-sha256".parse().expect("an algorithm"),
                "c2VjcmV0LWZvci10aGUtZnV6emVy",
            )
            .expect("a key"),
        );
        let dns = runtime
            .block_on(EmbeddedDns::start(config))
            .expect("the server starts");
        let mut create = vec![
            Endpoint::new("example.com", RecordType::A, ["192.0.2.1"]),
            Endpoint::new("www.example.com", RecordType::A, ["192.0.2.2", "192.0.2.3"]),
            Endpoint::new("www.example.com", RecordType::AAAA, ["2001:db8::1"]),
            Endpoint::new("alias.example.com", RecordType::CNAME, ["www.example.com"]),
            Endpoint::new(
                "chain.example.com",
                RecordType::CNAME,
                ["alias.example.com"],
            ),
            Endpoint::new(
                "away.example.com",
                RecordType::CNAME,
                ["elsewhere.example.net"],
            ),
            Endpoint::new("loop.example.com", RecordType::CNAME, ["loop.example.com"]),
            Endpoint::new("*.apps.example.com", RecordType::A, ["192.0.2.4"]),
            Endpoint::new("a.b.deep.example.com", RecordType::TXT, ["deep"]),
            Endpoint::new("txt.example.com", RecordType::TXT, ["x".repeat(700)]),
            Endpoint::new("host.sub.example.com", RecordType::A, ["192.0.2.5"]),
        ];
        create.extend((0..80).map(|i| {
            Endpoint::new(
                &format!("r{i}.example.com"),
                RecordType::A,
                [format!("192.0.2.{i}")],
            )
        }));
        let changes = Changes {
            create,
            ..Changes::default()
        };
        runtime
            .block_on(dns.apply(&changes))
            .expect("the records apply");
        Server {
            dns,
            _runtime: runtime,
        }
    })
}

fuzz_target!(|packet: &[u8]| {
    let server = server();
    for tcp_peer in [None, Some(LOOPBACK)] {
        let Some(answers) = server.dns.answer(packet, tcp_peer) else {
            continue;
        };
        for answer in answers {
            // A UDP answer fits the largest payload the server announces; a TCP one, 64 KiB.
            let limit = if tcp_peer.is_some() { 65_535 } else { 1232 };
            assert!(answer.len() <= limit, "answer of {} bytes", answer.len());
            assert!(answer.len() >= 12, "answer shorter than a DNS header");
            // Every answer the server writes must read back as a DNS message.
            if let Err(error) = hickory_proto::op::Message::from_vec(&answer) {
                panic!("the server wrote an unreadable answer: {error}");
            }
        }
    }
});
