//! One request in, its answer out: decode, check TSIG, look the question up in the zones
//! (RFC 1034 and 4592 rules, RFC 2308 negative answers), add the DNSSEC records a signed zone
//! proves it with, fit the answer to UDP or split a transfer, and sign it.

use std::net::IpAddr;
use std::sync::RwLock;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType as WireType};

use crate::dns::in_zone;
use crate::dns::wire::{DNS_HEADER_LEN, QR_BIT, name_string, wire_name, wire_type};
use crate::model::RecordType;
use crate::model::dns_name::canonical;

use super::auth::{Auth, authenticate, seal_all};
use super::transfer::{TRANSFER_RECORDS_PER_MESSAGE, Transfers, split_transfer, transfer_answer};
use super::zone::{Store, Zone, ns_record, soa_record, unix_now};

/// Largest UDP answer we send (the EDNS buffer size recommended since DNS flag day 2020).
pub(super) const MAX_UDP_PAYLOAD: u16 = 1232;

/// CNAME chains followed inside our zones.
pub(super) const MAX_CNAME_HOPS: usize = 8;

/// Room kept in a UDP answer for the TSIG record of a signed answer.
pub(super) const TSIG_ROOM: usize = 256;

/// Decode a request and encode the answer: one message, or a zone transfer's several over TCP
/// (`peer` is the TCP client; `None` for UDP). `None` when there is nothing sensible to send.
pub(super) fn answer_bytes(
    request: &[u8],
    store: &RwLock<Store>,
    soa_ttl: u32,
    peer: Option<IpAddr>,
    transfers: &Transfers,
) -> Option<Vec<Vec<u8>>> {
    answer_request(request, store, soa_ttl, peer, transfers).map(|answered| answered.messages)
}

pub(super) struct Answered {
    pub(super) messages: Vec<Vec<u8>>,
    /// The same request bytes (after the ID) get the same bytes again until the zones change:
    /// an answer that fits, to a request without TSIG (a signed answer covers the time).
    pub(super) repeatable: bool,
}

impl Answered {
    pub(super) fn once(messages: Vec<Vec<u8>>) -> Self {
        Answered {
            messages,
            repeatable: false,
        }
    }
}

/// [`answer_bytes`], also saying whether the answer may be replayed.
pub(super) fn answer_request(
    request: &[u8],
    store: &RwLock<Store>,
    soa_ttl: u32,
    peer: Option<IpAddr>,
    transfers: &Transfers,
) -> Option<Answered> {
    // Shorter than a header, or itself a response (QR=1): answering would only feed loops
    // and reflection, so such packets are dropped (RFC 1035 4.1.1; RFC 5358).
    if request.len() < DNS_HEADER_LEN || request[2] & QR_BIT != 0 {
        return None;
    }
    let raw = request;
    let request = match Message::from_vec(request) {
        Ok(request) => request,
        Err(_) => {
            // Answer FORMERR when at least the header is there.
            let id = u16::from_be_bytes([*request.first()?, *request.get(1)?]);
            let error = Message::error_msg(id, OpCode::Query, ResponseCode::FormErr);
            return error.to_vec().ok().map(|bytes| Answered::once(vec![bytes]));
        }
    };
    if request.metadata.message_type != MessageType::Query {
        return None;
    }
    let now = unix_now();
    let auth = authenticate(raw, &request, transfers.signer.as_ref(), now);
    let signer = transfers.signer.as_ref();
    let mut response = match &auth {
        Auth::Rejected(_) => {
            let mut response = Message::response(request.metadata.id, request.metadata.op_code);
            response.add_queries(request.queries.iter().cloned());
            response.metadata.response_code = ResponseCode::NotAuth;
            response
        }
        Auth::Unsigned | Auth::Signed { .. } => {
            let may_transfer = matches!(auth, Auth::Signed { .. })
                && peer.is_some_and(|peer| transfers.allowed(peer));
            let store = store.read().ok()?;
            let mut response = respond(&store, &request, soa_ttl, may_transfer);
            if dnssec_ok(&request) {
                add_dnssec(&store, &request, &mut response);
            }
            response
        }
    };
    let id = request.metadata.id;
    let transfer = request
        .queries
        .iter()
        .any(|q| matches!(q.query_type(), WireType::AXFR | WireType::IXFR));
    if transfer && peer.is_some() && response.answers.len() > TRANSFER_RECORDS_PER_MESSAGE {
        let messages = split_transfer(response, id);
        return seal_all(messages, &auth, signer, id, now).map(Answered::once);
    }
    let limit = if peer.is_some() {
        u16::MAX as usize
    } else {
        let limit = match &request.edns {
            Some(edns) => edns.max_payload().clamp(512, MAX_UDP_PAYLOAD) as usize,
            None => 512,
        };
        if matches!(auth, Auth::Unsigned) {
            limit
        } else {
            limit - TSIG_ROOM
        }
    };
    let bytes = response.to_vec().ok()?;
    if bytes.len() > limit {
        // Too big for UDP: an empty truncated answer tells the client to retry over TCP.
        response.metadata.truncation = true;
        response.answers.clear();
        response.authorities.clear();
        response.additionals.clear();
    } else if matches!(auth, Auth::Unsigned) {
        // Nothing to sign: the encoding just measured is the answer (no second encoding).
        return Some(Answered {
            messages: vec![bytes],
            repeatable: true,
        });
    }
    seal_all(vec![response], &auth, signer, id, now).map(Answered::once)
}

/// The answer to one query message. Pure apart from reading the zone data.
pub(super) fn respond(
    store: &Store,
    request: &Message,
    soa_ttl: u32,
    may_transfer: bool,
) -> Message {
    let mut response = Message::response(request.metadata.id, request.metadata.op_code);
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    if request.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(MAX_UDP_PAYLOAD);
        // RFC 3225: the DO bit is copied into the response.
        edns.set_dnssec_ok(dnssec_ok(request));
        response.set_edns(edns);
    }
    // Only EDNS version 0 exists; anything else gets BADVERS (RFC 6891 6.1.3).
    if request
        .edns
        .as_ref()
        .is_some_and(|edns| edns.version() != 0)
    {
        response.metadata.response_code = ResponseCode::BADVERS;
        return response;
    }
    if request.metadata.op_code != OpCode::Query {
        response.metadata.response_code = ResponseCode::NotImp;
        return response;
    }
    let [query] = request.queries.as_slice() else {
        response.metadata.response_code = ResponseCode::FormErr;
        return response;
    };
    response.add_query(query.clone());
    let qname = name_string(query.name());
    let Some(zone) = store.zone(&qname) else {
        response.metadata.response_code = ResponseCode::Refused;
        return response;
    };
    // Zone transfers only to the secondaries, signed; and only the IN class.
    if matches!(query.query_type(), WireType::AXFR | WireType::IXFR)
        && may_transfer
        && zone.apex == qname
        && query.query_class() == DNSClass::IN
    {
        response.metadata.authoritative = true;
        response.add_answers(transfer_answer(zone, request, query, soa_ttl));
        return response;
    }
    if matches!(query.query_type(), WireType::AXFR | WireType::IXFR)
        || !matches!(query.query_class(), DNSClass::IN | DNSClass::ANY)
    {
        response.metadata.response_code = ResponseCode::Refused;
        return response;
    }
    response.metadata.authoritative = true;

    let qtype = query.query_type();
    let mut owner = query.name().clone();
    let mut name = qname;
    for _ in 0..MAX_CNAME_HOPS {
        let Some(node) = find_node(zone, &name) else {
            // The first name decides the rcode; a dangling CNAME inside the zone still NOERROR.
            if response.answers.is_empty() {
                response.metadata.response_code = ResponseCode::NXDomain;
                response.add_authority(soa_record(zone, soa_ttl, true));
            }
            return response;
        };
        let before = response.answers.len();
        if name == zone.apex && matches!(qtype, WireType::SOA | WireType::ANY) {
            response.add_answer(soa_record(zone, soa_ttl, false));
        }
        if name == zone.apex && matches!(qtype, WireType::NS | WireType::ANY) {
            response.add_answer(ns_record(zone, soa_ttl));
        }
        let matching: Vec<RecordType> = RecordType::ALL
            .into_iter()
            .filter(|t| qtype == WireType::ANY || wire_type(*t) == qtype)
            .filter(|t| zone.rrset(&node, *t).is_some())
            .collect();
        for record_type in &matching {
            add_rrset(&mut response, zone, &node, *record_type, &owner);
        }
        // A signed zone's own records: the apex DNSKEY, the NSEC of a name, and its RRSIGs
        // when asked for them (the NSEC bitmap says the name has them).
        if let Some(signed) = &zone.signed
            && node == name
        {
            for record_type in [WireType::DNSKEY, WireType::NSEC] {
                if qtype == record_type || (qtype == WireType::ANY && node == zone.apex) {
                    response.add_answers(signed.rrset(&owner, record_type).iter().cloned());
                }
            }
            if qtype == WireType::RRSIG {
                response.add_answers(signed.signatures_at(&owner).cloned());
            }
        }
        if response.answers.len() > before || qtype == WireType::ANY {
            if response.answers.is_empty() {
                response.add_authority(soa_record(zone, soa_ttl, true));
            }
            return response;
        }
        let cname = zone.rrset(&node, RecordType::CNAME);
        match cname.and_then(|set| set.targets.first()) {
            Some(target) if qtype != WireType::CNAME => {
                add_rrset(&mut response, zone, &node, RecordType::CNAME, &owner);
                let target = canonical(target).into_owned();
                if !in_zone(&target, &zone.apex) {
                    return response; // the resolver follows it elsewhere
                }
                let Ok(next_owner) = wire_name(&target) else {
                    return response;
                };
                owner = next_owner;
                name = target;
            }
            _ => {
                // NODATA: the name exists, not with this type.
                if response.answers.is_empty() {
                    response.add_authority(soa_record(zone, soa_ttl, true));
                }
                return response;
            }
        }
    }
    response
}

pub(super) fn dnssec_ok(request: &Message) -> bool {
    request
        .edns
        .as_ref()
        .is_some_and(|edns| edns.flags().dnssec_ok)
}

/// DNSSEC for an answer from a signed zone (RFC 4035 3.1): the RRSIGs of every RRset in the
/// answer and authority sections; for a wildcard answer, the NSEC proving the name itself
/// absent; for NXDOMAIN and NODATA (also at the end of a CNAME chain), the NSEC records that
/// prove it, with their RRSIGs.
pub(super) fn add_dnssec(store: &Store, request: &Message, response: &mut Message) {
    let [query] = request.queries.as_slice() else {
        return;
    };
    let Some(zone) = store.zone(&name_string(query.name())) else {
        return;
    };
    let Some(signed) = &zone.signed else { return };
    if !response.metadata.authoritative
        || !matches!(
            response.metadata.response_code,
            ResponseCode::NoError | ResponseCode::NXDomain
        )
        || matches!(query.query_type(), WireType::AXFR | WireType::IXFR)
    {
        return;
    }
    let mut proofs: Vec<Record> = Vec::new();
    let mut answer_signatures = Vec::new();
    let mut sets: Vec<(Name, WireType)> = Vec::new();
    for record in &response.answers {
        let set = (record.name.clone(), record.record_type());
        if !sets.contains(&set) {
            sets.push(set);
        }
    }
    for (owner, record_type) in sets {
        let own = signed.signatures(&owner, record_type);
        if !own.is_empty() {
            answer_signatures.extend(own.iter().cloned());
            continue;
        }
        // Synthesised from a wildcard: its signatures (their label count tells the validator)
        // under the name asked, and the NSEC proving no closer name exists.
        let Some(node) = find_node(zone, &name_string(&owner)) else {
            continue;
        };
        if !node.starts_with("*.") || node == name_string(&owner) {
            continue; // not synthesised: an RRset without signatures of its own (RRSIG)
        }
        let Ok(wildcard) = wire_name(&node) else {
            continue;
        };
        for signature in signed.signatures(&wildcard, record_type) {
            let mut signature = signature.clone();
            signature.name = owner.clone();
            answer_signatures.push(signature);
        }
        proofs.extend(signed.nsec_covering(&owner).cloned());
    }
    response.add_answers(answer_signatures);

    // The name the answer ends at: the question, or the target of its CNAME chain.
    let qtype = query.query_type();
    let mut last = query.name().clone();
    if qtype != WireType::CNAME {
        for _ in 0..=MAX_CNAME_HOPS {
            let target = response
                .answers
                .iter()
                .find_map(|record| match &record.data {
                    RData::CNAME(target) if record.name == last => Some(target.0.clone()),
                    _ => None,
                });
            match target {
                Some(target) => last = target,
                None => break,
            }
        }
    }
    let answered = response.answers.iter().any(|record| {
        record.name == last && (qtype == WireType::ANY || record.record_type() == qtype)
    });
    let last_name = name_string(&last);
    if !answered && in_zone(&last_name, &zone.apex) {
        match find_node(zone, &last_name) {
            // NODATA at a name that owns records: its NSEC lists what it has; at an empty
            // non-terminal, the NSEC covering it (its next name is below it).
            Some(node) if node == last_name => {
                proofs.extend(
                    signed
                        .nsec_at(&last)
                        .or_else(|| signed.nsec_covering(&last))
                        .cloned(),
                );
            }
            // NODATA from a wildcard: no closer name, and the wildcard's own NSEC.
            Some(wildcard) => {
                proofs.extend(signed.nsec_covering(&last).cloned());
                if let Ok(wildcard) = wire_name(&wildcard) {
                    proofs.extend(signed.nsec_at(&wildcard).cloned());
                }
            }
            // NXDOMAIN: no such name, and no wildcard at the closest encloser.
            None => {
                proofs.extend(signed.nsec_covering(&last).cloned());
                let mut encloser = last_name.as_str();
                while !zone.has_name(encloser) {
                    match encloser.split_once('.') {
                        Some((_, parent)) => encloser = parent,
                        None => break,
                    }
                }
                if let Ok(wildcard) = wire_name(&format!("*.{encloser}")) {
                    proofs.extend(signed.nsec_covering(&wildcard).cloned());
                }
            }
        }
    }
    let mut authority_sets: Vec<(Name, WireType)> = Vec::new();
    for record in response.authorities.iter().chain(&proofs) {
        let set = (record.name.clone(), record.record_type());
        if !authority_sets.contains(&set) {
            authority_sets.push(set);
        }
    }
    let mut seen: Vec<Name> = Vec::new();
    for proof in proofs {
        if !seen.contains(&proof.name) {
            seen.push(proof.name.clone());
            response.add_authority(proof);
        }
    }
    for (owner, record_type) in authority_sets {
        response.add_authorities(signed.signatures(&owner, record_type).iter().cloned());
    }
}

/// The node whose records answer `name`: the name itself when it exists (with records or as an
/// empty non-terminal), else the wildcard at its closest encloser, else none (NXDOMAIN).
pub(super) fn find_node(zone: &Zone, name: &str) -> Option<String> {
    if zone.has_name(name) {
        return Some(name.to_string());
    }
    let mut encloser = name;
    while encloser != zone.apex {
        encloser = encloser.split_once('.').map(|(_, parent)| parent)?;
        if zone.has_name(encloser) {
            let wildcard = format!("*.{encloser}");
            return zone.has_records_at(&wildcard).then_some(wildcard);
        }
    }
    None
}

pub(super) fn add_rrset(
    response: &mut Message,
    zone: &Zone,
    node: &str,
    record_type: RecordType,
    owner: &Name,
) {
    let Some(set) = zone.rrset(node, record_type) else {
        return;
    };
    if let Ok(records) = set.wire() {
        for mut record in records {
            record.name = owner.clone();
            response.add_answer(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use hickory_proto::op::Query;

    use crate::authority::zone::RrSet;
    use crate::dns::Endpoint;

    fn store() -> Store {
        let mut zone = Zone::new("example.com".into(), 7);
        for endpoint in [
            Endpoint::new("a.b.example.com", RecordType::A, ["192.0.2.1"]),
            Endpoint::new("*.example.com", RecordType::A, ["192.0.2.9"]),
            Endpoint::new("*.example.com", RecordType::TXT, ["wild"]),
            Endpoint::new("www.example.com", RecordType::CNAME, ["a.b.example.com"]),
        ] {
            zone.rrsets.push(RrSet::from_endpoint(&endpoint));
        }
        zone.rrsets.sort_by(|a, b| a.key().cmp(&b.key()));
        zone.reindex();
        Store {
            zones: vec![zone],
            generation: Arc::default(),
        }
    }

    fn ask(name: &str, qtype: WireType) -> Message {
        let mut request = Message::query();
        request.add_query(Query::query(wire_name(name).unwrap(), qtype));
        respond(&store(), &request, 300, false)
    }

    #[test]
    fn exact_wildcard_empty_non_terminal_and_nxdomain() {
        let exact = ask("a.b.example.com", WireType::A);
        assert_eq!(exact.metadata.response_code, ResponseCode::NoError);
        assert!(exact.metadata.authoritative);
        assert_eq!(exact.answers.len(), 1);

        // b.example.com exists as an empty non-terminal: NODATA, never the wildcard.
        let ent = ask("b.example.com", WireType::A);
        assert_eq!(ent.metadata.response_code, ResponseCode::NoError);
        assert!(ent.answers.is_empty());
        assert_eq!(ent.authorities[0].record_type(), WireType::SOA);

        // Below the empty non-terminal: closest encloser b.example.com has no wildcard.
        let below = ask("x.b.example.com", WireType::A);
        assert_eq!(below.metadata.response_code, ResponseCode::NXDomain);

        // Synthesised from *.example.com, owner = the query name, several labels deep.
        let wild = ask("q.r.example.com", WireType::A);
        assert_eq!(wild.metadata.response_code, ResponseCode::NoError);
        assert_eq!(name_string(&wild.answers[0].name), "q.r.example.com");
        let wild_nodata = ask("q.example.com", WireType::AAAA);
        assert!(wild_nodata.answers.is_empty());
        assert_eq!(wild_nodata.metadata.response_code, ResponseCode::NoError);
    }

    #[test]
    fn cname_is_followed_inside_the_zone() {
        let answer = ask("www.example.com", WireType::A);
        let types: Vec<WireType> = answer.answers.iter().map(|r| r.record_type()).collect();
        assert_eq!(types, [WireType::CNAME, WireType::A]);
    }

    #[test]
    fn refuses_outside_and_answers_apex() {
        assert_eq!(
            ask("example.org", WireType::A).metadata.response_code,
            ResponseCode::Refused
        );
        let soa = ask("example.com", WireType::SOA);
        assert_eq!(soa.answers[0].record_type(), WireType::SOA);
        assert_eq!(
            ask("example.com", WireType::AXFR).metadata.response_code,
            ResponseCode::Refused
        );
        let ns = ask("example.com", WireType::NS);
        assert_eq!(ns.answers[0].record_type(), WireType::NS);
    }
}
