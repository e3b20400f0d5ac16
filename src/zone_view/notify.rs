//! NOTIFY (RFC 1996) into the zone view: the primary a zone is written to (BIND with
//! `also-notify`) tells every replica at once that a zone changed, so a name another cluster
//! just published is refused within a round trip rather than at the next poll. Only NOTIFY
//! messages from the configured primary's address, for a managed zone, are taken; each is
//! answered (as RFC 1996 asks, so the primary stops resending) and wakes the zone view, which
//! reads the zone's SOA and transfers it if its serial moved. Wakes that come while a read is
//! under way are one wake.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use hickory_proto::op::{Message, MessageType, OpCode};
use tokio::net::UdpSocket;
use tokio::sync::Notify;

/// Where NOTIFY is taken and from whom.
#[derive(Clone, Debug)]
pub struct NotifyConfig {
    /// The primary's addresses: NOTIFY from anywhere else is dropped.
    pub primaries: Vec<IpAddr>,
    /// The managed zones (lower case, no trailing dot).
    pub zones: Vec<String>,
}

/// What one datagram comes to.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// A NOTIFY for one of the zones: the answer to send, and the zone.
    Notify { answer: Vec<u8>, zone: String },
    /// Anything else (another opcode, another zone, not DNS, not from a primary): dropped.
    Dropped(&'static str),
}

/// Judges one datagram from `from`.
pub fn hear(config: &NotifyConfig, from: IpAddr, datagram: &[u8]) -> Heard {
    if !config.primaries.contains(&from) {
        return Heard::Dropped("not from the primary");
    }
    let Ok(message) = Message::from_vec(datagram) else {
        return Heard::Dropped("not a DNS message");
    };
    if message.metadata.op_code != OpCode::Notify
        || message.metadata.message_type != MessageType::Query
    {
        return Heard::Dropped("not a NOTIFY");
    }
    let Some(query) = message.queries.first() else {
        return Heard::Dropped("no zone named");
    };
    let name = query.name().to_ascii().to_ascii_lowercase();
    let zone = name.trim_end_matches('.').to_owned();
    if !config.zones.contains(&zone) {
        return Heard::Dropped("not a managed zone");
    }
    let mut answer = Message::new(message.metadata.id, MessageType::Response, OpCode::Notify);
    answer.metadata.authoritative = true;
    answer.add_query(query.clone());
    match answer.to_vec() {
        Ok(answer) => Heard::Notify { answer, zone },
        Err(_) => Heard::Dropped("no answer could be encoded"),
    }
}

/// Binds `listen` (UDP) now, so a bad address stops `serve` at start.
pub async fn bind(listen: SocketAddr) -> std::io::Result<UdpSocket> {
    UdpSocket::bind(listen).await
}

/// Takes NOTIFY on `socket` for the life of the process, waking `wake` for each one.
pub async fn run(socket: UdpSocket, config: NotifyConfig, wake: Arc<Notify>) {
    let mut buffer = vec![0u8; 4096];
    loop {
        let (len, from) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(error) => {
                tracing::debug!(%error, "zone view: NOTIFY socket");
                continue;
            }
        };
        match hear(&config, from.ip(), &buffer[..len]) {
            Heard::Notify { answer, zone } => {
                tracing::debug!(%from, %zone, "zone view: NOTIFY");
                let _ = socket.send_to(&answer, from).await;
                wake.notify_one();
            }
            Heard::Dropped(why) => tracing::debug!(%from, why, "zone view: datagram dropped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::{Name, RecordType};

    fn notify(zone: &str, op_code: OpCode) -> Vec<u8> {
        let mut message = Message::new(4242, MessageType::Query, op_code);
        message.add_query(Query::query(
            Name::from_ascii(zone).unwrap(),
            RecordType::SOA,
        ));
        message.to_vec().unwrap()
    }

    #[test]
    fn only_a_notify_from_the_primary_for_a_managed_zone_is_taken() {
        let primary: IpAddr = "127.0.0.1".parse().unwrap();
        let config = NotifyConfig {
            primaries: vec![primary],
            zones: vec!["example.com".to_owned()],
        };
        let Heard::Notify { answer, zone } =
            hear(&config, primary, &notify("Example.COM.", OpCode::Notify))
        else {
            panic!("a NOTIFY for example.com is taken");
        };
        assert_eq!(zone, "example.com");
        let answer = Message::from_vec(&answer).unwrap();
        assert_eq!(answer.metadata.id, 4242);
        assert_eq!(answer.metadata.message_type, MessageType::Response);
        assert_eq!(answer.metadata.op_code, OpCode::Notify);
        let elsewhere: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(
            hear(&config, elsewhere, &notify("example.com.", OpCode::Notify)),
            Heard::Dropped("not from the primary")
        );
        assert_eq!(
            hear(&config, primary, &notify("example.org.", OpCode::Notify)),
            Heard::Dropped("not a managed zone")
        );
        assert_eq!(
            hear(&config, primary, &notify("example.com.", OpCode::Query)),
            Heard::Dropped("not a NOTIFY")
        );
        assert_eq!(
            hear(&config, primary, b"\x01\x02"),
            Heard::Dropped("not a DNS message")
        );
    }
}
