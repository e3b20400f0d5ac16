//! The hidden primary's side of zone transfers: who may transfer, the records of an AXFR and
//! an IXFR, and NOTIFY to the secondaries after each change (RFC 1995, RFC 1996).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, OpCode, Query};
use hickory_proto::rr::{RData, Record, RecordType as WireType, TSigner};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::debug;

use crate::dns::wire::{DNS_HEADER_LEN, QR_BIT, wire_name};

use super::zone::{Delta, Zone, soa_record, soa_with_serial, unix_now, zone_records};

/// Records per message of a zone transfer: far below 64 KiB even with long TXT values.
pub(super) const TRANSFER_RECORDS_PER_MESSAGE: usize = 64;

/// NOTIFY attempts per secondary and change; the wait for an answer doubles from the first.
pub(super) const NOTIFY_ATTEMPTS: u32 = 5;

pub(super) const NOTIFY_FIRST_WAIT: Duration = Duration::from_secs(1);

/// Who may pull the zones, and the key that signs transfers and NOTIFYs.
pub(super) struct Transfers {
    pub(super) secondaries: Vec<SocketAddr>,
    pub(super) signer: Option<TSigner>,
}

impl Transfers {
    pub(super) fn allowed(&self, peer: IpAddr) -> bool {
        self.signer.is_some() && self.secondaries.iter().any(|s| s.ip() == peer)
    }
}

/// Sends NOTIFY for each (apex, serial) received to every secondary, each with its retries.
pub(super) async fn notify_secondaries(
    mut changes: mpsc::Receiver<(String, u32)>,
    transfers: Arc<Transfers>,
    soa_ttl: u32,
    // Told of each change, so that the secondaries' serials are asked after it.
    changed: Arc<tokio::sync::Notify>,
) {
    // Aborting this task drops the set, which aborts the NOTIFYs in flight.
    let mut in_flight = JoinSet::new();
    loop {
        tokio::select! {
            change = changes.recv() => {
                let Some((apex, serial)) = change else { return };
                changed.notify_one();
                for secondary in &transfers.secondaries {
                    in_flight.spawn(notify_one(
                        *secondary,
                        transfers.signer.clone(),
                        apex.clone(),
                        serial,
                        soa_ttl,
                        NOTIFY_FIRST_WAIT,
                    ));
                }
            }
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
        }
    }
}

/// One NOTIFY (RFC 1996) for `apex` at `serial`, signed, until `secondary` answers or the
/// attempts run out; the wait for an answer starts at `first_wait` and doubles. Returns the
/// attempts made when answered.
pub(super) async fn notify_one(
    secondary: SocketAddr,
    signer: Option<TSigner>,
    apex: String,
    serial: u32,
    soa_ttl: u32,
    first_wait: Duration,
) -> Option<u32> {
    let Ok(name) = wire_name(&apex) else {
        return None;
    };
    let local: SocketAddr = if secondary.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let socket = match UdpSocket::bind(local).await {
        Ok(socket) => socket,
        Err(err) => {
            debug!(error = %err, "embedded DNS: no socket for NOTIFY");
            return None;
        }
    };
    let mut wait = first_wait;
    for attempt in 1..=NOTIFY_ATTEMPTS {
        let id = fastrand::u16(..);
        let mut message = Message::query();
        message.metadata.id = id;
        message.metadata.op_code = OpCode::Notify;
        message.metadata.authoritative = true;
        message.metadata.recursion_desired = false;
        message.add_query(Query::query(name.clone(), WireType::SOA));
        let zone = Zone::new(apex.clone(), serial);
        message.add_answer(soa_record(&zone, soa_ttl, false));
        if let Some(signer) = &signer
            && message.finalize(signer, unix_now()).is_err()
        {
            return None;
        }
        let Ok(bytes) = message.to_vec() else {
            return None;
        };
        if socket.send_to(&bytes, secondary).await.is_ok()
            && wait_for_answer(&socket, secondary, id, wait).await
        {
            debug!(%secondary, zone = %apex, serial, attempt, "embedded DNS: NOTIFY answered");
            return Some(attempt);
        }
        wait *= 2;
    }
    tracing::warn!(%secondary, zone = %apex, serial, "embedded DNS: NOTIFY unanswered");
    None
}

/// Whether an answer with `id` comes from `secondary` within `wait`.
pub(super) async fn wait_for_answer(
    socket: &UdpSocket,
    secondary: SocketAddr,
    id: u16,
    wait: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    let mut buffer = [0u8; 4096];
    // Bounded by the deadline: each receive waits at most until then.
    loop {
        match tokio::time::timeout_at(deadline, socket.recv_from(&mut buffer)).await {
            Ok(Ok((len, from))) => {
                if from == secondary
                    && len >= DNS_HEADER_LEN
                    && buffer[2] & QR_BIT != 0
                    && u16::from_be_bytes([buffer[0], buffer[1]]) == id
                {
                    return true;
                }
            }
            Ok(Err(_)) | Err(_) => return false,
        }
    }
}

/// The records answering a transfer of `zone` allowed to this request: for an IXFR whose
/// authority section names a serial the journal still reaches, the changes since (the SOA
/// alone when up to date, RFC 1995 2); else the whole zone.
pub(super) fn transfer_answer(
    zone: &Zone,
    request: &Message,
    query: &Query,
    soa_ttl: u32,
) -> Vec<Record> {
    let known = request
        .authorities
        .iter()
        .find_map(|record| match &record.data {
            RData::SOA(soa) if query.query_type() == WireType::IXFR => Some(soa.serial),
            _ => None,
        });
    match known {
        // Up to date: the current SOA alone (RFC 1995 2).
        Some(serial) if serial == zone.serial => vec![soa_record(zone, soa_ttl, false)],
        Some(serial) => match zone.changes_since(serial) {
            Some(deltas) => incremental_records(zone, soa_ttl, &deltas),
            None => transfer_records(zone, soa_ttl),
        },
        None => transfer_records(zone, soa_ttl),
    }
}

/// A zone transfer's answer as TCP sends it: messages of [`TRANSFER_RECORDS_PER_MESSAGE`]
/// records, the first carrying the question.
pub(super) fn split_transfer(mut response: Message, id: u16) -> Vec<Message> {
    let records = std::mem::take(&mut response.answers);
    let mut messages = Vec::new();
    for (index, chunk) in records.chunks(TRANSFER_RECORDS_PER_MESSAGE).enumerate() {
        let mut message = Message::response(id, response.metadata.op_code);
        message.metadata.authoritative = true;
        if index == 0 {
            message.add_queries(response.queries.iter().cloned());
        }
        message.add_answers(chunk.iter().cloned());
        messages.push(message);
    }
    messages
}

/// The whole zone as AXFR sends it: SOA, the rest (signed, when DNSSEC is on), SOA again.
fn transfer_records(zone: &Zone, soa_ttl: u32) -> Vec<Record> {
    let mut records = match &zone.signed {
        Some(signed) => {
            let mut records = vec![soa_record(zone, soa_ttl, false)];
            records.extend(signed.records_without_soa().cloned());
            records
        }
        None => zone_records(zone, soa_ttl),
    };
    records.push(soa_record(zone, soa_ttl, false));
    records
}

/// An incremental transfer (RFC 1995 4): the current SOA; per change the old SOA, the records
/// removed, the new SOA, the records added; the current SOA again.
fn incremental_records(zone: &Zone, soa_ttl: u32, deltas: &[&Delta]) -> Vec<Record> {
    let soa = |serial| soa_with_serial(zone, soa_ttl, serial);
    let mut records = vec![soa(zone.serial)];
    for delta in deltas {
        records.push(soa(delta.from));
        records.extend(delta.removed.iter().cloned());
        records.push(soa(delta.to));
        records.extend(delta.added.iter().cloned());
    }
    records.push(soa(zone.serial));
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::timeout;

    use crate::tsig::TsigKey;

    #[tokio::test]
    async fn notify_is_retried_a_bounded_number_of_times_until_answered() {
        let key = TsigKey::from_base64(
            "k",
            "hmac-sha256".parse().unwrap(),
            "Z2F0ZXdheS1kbnMtdGVzdC1zZWNyZXQtMzItYnl0ZXM=",
        )
        .unwrap();
        let signer = key.signer().unwrap();
        // A secondary that never answers: exactly NOTIFY_ATTEMPTS signed NOTIFYs, then give up.
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let wait = Duration::from_millis(10);
        let outcome = notify_one(
            addr,
            Some(signer.clone()),
            "example.com".into(),
            7,
            300,
            wait,
        );
        assert_eq!(outcome.await, None);
        let mut buffer = [0u8; 4096];
        let mut received = 0;
        while let Ok(Ok((len, _))) =
            timeout(Duration::from_millis(50), silent.recv_from(&mut buffer)).await
        {
            let message = Message::from_vec(&buffer[..len]).unwrap();
            assert_eq!(message.metadata.op_code, OpCode::Notify);
            assert!(message.signature().is_some(), "signed");
            received += 1;
        }
        assert_eq!(received, NOTIFY_ATTEMPTS);

        // A secondary that answers the second NOTIFY: two attempts.
        let answering = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = answering.local_addr().unwrap();
        let responder = tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            for seen in 1..=2 {
                let (len, from) = answering.recv_from(&mut buffer).await.unwrap();
                if seen == 2 {
                    let mut answer = buffer[..len].to_vec();
                    answer[2] |= QR_BIT;
                    answering.send_to(&answer, from).await.unwrap();
                }
            }
        });
        let attempts = notify_one(addr, Some(signer), "example.com".into(), 7, 300, wait).await;
        assert_eq!(attempts, Some(2));
        responder.await.unwrap();
    }

    #[test]
    fn transfers_need_a_listed_peer_and_a_key() {
        let key = TsigKey::from_base64(
            "k",
            "hmac-sha256".parse().unwrap(),
            "Z2F0ZXdheS1kbnMtdGVzdC1zZWNyZXQtMzItYnl0ZXM=",
        )
        .unwrap();
        let transfers = Transfers {
            secondaries: vec!["192.0.2.53:53".parse().unwrap()],
            signer: Some(key.signer().unwrap()),
        };
        assert!(transfers.allowed("192.0.2.53".parse().unwrap()));
        assert!(!transfers.allowed("192.0.2.54".parse().unwrap()));
        let keyless = Transfers {
            signer: None,
            ..transfers
        };
        assert!(!keyless.allowed("192.0.2.53".parse().unwrap()));
    }
}
