//! When a BIND zone holds every one of a set of names, to within a poll: the zone's SOA serial
//! is asked by UDP every few milliseconds, and each new serial's differences are read by an
//! incremental transfer (IXFR, RFC 1995). No name is asked for on its own, so the watch neither
//! loads the server with a query per name nor lags behind it by one (a poll that asks name by
//! name, one at a time, reaches the last name well after the server holds it), and the order
//! in which a tool writes its names does not matter.

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gateway_dns::dns::provider::rfc2136::{
    IncrementalTransfer, ServerAddress, TransferStep, ZoneTransfer, read_answer, soa_serial_of,
};
use gateway_dns::tsig::TsigKey;
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{Name, RData, Record, RecordType, TSigner};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

pub struct ZoneWatch {
    server: SocketAddr,
    zone: Name,
    signer: TSigner,
    socket: UdpSocket,
    serial: u32,
    /// The names watched (lower case, no final dot), and those without an A record yet.
    names: HashSet<String>,
    missing: HashSet<String>,
}

impl ZoneWatch {
    /// Watches `zone` at `server` for an A record at each of `names`; `key` may transfer it.
    pub fn new(server: SocketAddr, zone: &str, key: TsigKey, names: &[String]) -> ZoneWatch {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let names: HashSet<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
        let mut watch = ZoneWatch {
            server,
            zone: Name::from_ascii(format!("{zone}.")).unwrap(),
            signer: key.signer().unwrap(),
            socket,
            serial: 0,
            missing: names.clone(),
            names,
        };
        watch.serial = watch.soa_serial().expect("the zone's SOA");
        watch
    }

    /// How many names are still missing.
    pub fn missing(&self) -> usize {
        self.missing.len()
    }

    /// Polls every `every` until every name is in or `limit` has passed since `started`;
    /// returns when the serial that completed the set was first seen (a name is in DNS from
    /// the moment its serial is served), or when its transfer ended if the server had moved
    /// past the serial polled by then.
    pub async fn wait_all(
        &mut self,
        started: Instant,
        every: Duration,
        limit: Duration,
    ) -> Option<Duration> {
        while started.elapsed() < limit {
            let Some(serial) = self.soa_serial() else {
                tokio::time::sleep(every).await;
                continue;
            };
            let seen = started.elapsed();
            if serial != self.serial {
                let read = self.read_changes().await;
                if self.missing.is_empty() {
                    return Some(if read == serial {
                        seen
                    } else {
                        started.elapsed()
                    });
                }
            }
            tokio::time::sleep(every).await;
        }
        None
    }

    fn soa_serial(&self) -> Option<u32> {
        let id = fastrand::u16(..);
        let mut query = Message::new(id, MessageType::Query, OpCode::Query);
        query.add_query(Query::query(self.zone.clone(), RecordType::SOA));
        self.socket
            .send_to(&query.to_vec().ok()?, self.server)
            .ok()?;
        let mut reply = [0u8; 1232];
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            let (len, _) = self.socket.recv_from(&mut reply).ok()?;
            if let Ok(message) = Message::from_vec(&reply[..len])
                && message.metadata.id == id
            {
                return soa_serial_of(&message);
            }
        }
        None
    }

    /// Reads the differences from the known serial to the server's, and counts the names they
    /// add; returns the serial read to.
    async fn read_changes(&mut self) -> u32 {
        let id = fastrand::u16(..);
        let mut query = Message::new(id, MessageType::Query, OpCode::Query);
        query.add_query(Query::query(self.zone.clone(), RecordType::IXFR));
        let soa = SOA::new(
            self.zone.clone(),
            self.zone.clone(),
            self.serial,
            0,
            0,
            0,
            0,
        );
        query.add_authority(Record::from_rdata(self.zone.clone(), 0, RData::SOA(soa)));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        query.finalize(&self.signer, now).unwrap();
        let bytes = query.to_vec().unwrap();
        let mut stream = TcpStream::connect(self.server).await.unwrap();
        stream
            .write_all(&(bytes.len() as u16).to_be_bytes())
            .await
            .unwrap();
        stream.write_all(&bytes).await.unwrap();
        let address = ServerAddress::new(self.server.ip().to_string(), self.server.port());
        // RFC 1995 4: the differences per version; a server without the versions back to our
        // serial sends the zone whole instead, read as a zone transfer of the same messages.
        let mut incremental = Some(IncrementalTransfer::new(self.serial));
        let mut whole = ZoneTransfer::new();
        let serial = loop {
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).await.unwrap();
            let mut buffer = vec![0u8; u16::from_be_bytes(len) as usize];
            stream.read_exact(&mut buffer).await.unwrap();
            // The request is signed because BIND transfers only to the key; its answers are
            // read without checking their signatures, as a measurement, not a client.
            let message = read_answer(&address, &buffer, id, None, "IXFR").unwrap();
            let Some(transfer) = incremental.as_mut() else {
                if let Some(serial) = whole.absorb(message) {
                    break serial;
                }
                continue;
            };
            // Until its first version begins, the answer may still be the zone whole: read
            // it as that too, and no further.
            let closed = if transfer.versions().is_empty() {
                whole.absorb(message.clone())
            } else {
                None
            };
            match transfer.absorb(message) {
                TransferStep::Done(serial) => break serial,
                TransferStep::Whole => {
                    incremental = None;
                    if let Some(serial) = closed {
                        break serial;
                    }
                }
                TransferStep::More => {}
            }
        };
        match incremental {
            Some(transfer) => {
                for (deleted, added) in transfer.versions() {
                    for record in deleted.iter().filter(|r| r.record_type() == RecordType::A) {
                        let name = watched_name(&record.name.to_ascii());
                        if self.names.contains(&name) {
                            self.missing.insert(name);
                        }
                    }
                    for record in added.iter().filter(|r| r.record_type() == RecordType::A) {
                        self.missing.remove(&watched_name(&record.name.to_ascii()));
                    }
                }
            }
            None => {
                let present: HashSet<String> = whole
                    .endpoints()
                    .iter()
                    .filter(|e| e.record_type == gateway_dns::model::RecordType::A)
                    .map(|e| watched_name(&e.dns_name))
                    .collect();
                self.missing = self.names.difference(&present).cloned().collect();
            }
        }
        self.serial = serial;
        serial
    }
}

/// A name as the watch keeps names: lower case, no final dot.
fn watched_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}
