//! Between our string forms and the DNS wire format (hickory-proto): names, record types,
//! targets, and wire records grouped back into RRsets.

use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType as WireType};

use super::{Endpoint, Targets};
use crate::model::RecordType;

/// The length of a DNS message header.
pub(crate) const DNS_HEADER_LEN: usize = 12;

/// The QR bit in the third byte of the header: set on responses.
pub(crate) const QR_BIT: u8 = 0x80;

/// The wire type of a record type.
pub(crate) fn wire_type(record_type: RecordType) -> WireType {
    match record_type {
        RecordType::A => WireType::A,
        RecordType::AAAA => WireType::AAAA,
        RecordType::CNAME => WireType::CNAME,
        RecordType::TXT => WireType::TXT,
    }
}

/// The record type of a wire type, when it is one gateway-dns handles.
pub(crate) fn record_type_of(wire: WireType) -> Option<RecordType> {
    match wire {
        WireType::A => Some(RecordType::A),
        WireType::AAAA => Some(RecordType::AAAA),
        WireType::CNAME => Some(RecordType::CNAME),
        WireType::TXT => Some(RecordType::TXT),
        _ => None,
    }
}

/// Build a fully qualified wire name from our string form; any byte is allowed in a label
/// (external-dns writes names such as `a-*.example.com`).
pub(crate) fn wire_name(name: &str) -> Result<Name, hickory_proto::ProtoError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let mut wire = if name.is_empty() {
        Name::root()
    } else {
        Name::from_labels(name.split('.').map(str::as_bytes))?
    };
    wire.set_fqdn(true);
    Ok(wire)
}

/// Our string form of a wire name: labels lower-cased, joined by dots, no trailing dot.
pub(crate) fn name_string(name: &Name) -> String {
    let labels: Vec<String> = name
        .iter()
        .map(|label| String::from_utf8_lossy(label).to_ascii_lowercase())
        .collect();
    labels.join(".")
}

/// A target that cannot be written as the record type says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{dns_name} {record_type}: invalid target {target:?}")]
pub struct InvalidTarget {
    pub dns_name: String,
    pub record_type: RecordType,
    pub target: String,
}

/// The wire records of an RRset.
pub(crate) fn wire_records(endpoint: &Endpoint, ttl: u32) -> Result<Vec<Record>, InvalidTarget> {
    wire_rrset(
        &endpoint.dns_name,
        endpoint.record_type,
        endpoint.targets.iter().map(String::as_str),
        ttl,
    )
}

/// [`wire_records`] of an RRset given by its parts.
pub(crate) fn wire_rrset<'t>(
    dns_name: &str,
    record_type: RecordType,
    targets: impl Iterator<Item = &'t str>,
    ttl: u32,
) -> Result<Vec<Record>, InvalidTarget> {
    let invalid = |target: &str| InvalidTarget {
        dns_name: dns_name.to_owned(),
        record_type,
        target: target.to_string(),
    };
    let name = wire_name(dns_name).map_err(|_| invalid(""))?;
    targets
        .map(|target| {
            let data = match record_type {
                RecordType::A => RData::A(A(target.parse().map_err(|_| invalid(target))?)),
                RecordType::AAAA => RData::AAAA(AAAA(target.parse().map_err(|_| invalid(target))?)),
                RecordType::CNAME => {
                    RData::CNAME(CNAME(wire_name(target).map_err(|_| invalid(target))?))
                }
                RecordType::TXT => RData::TXT(txt_rdata(target)),
            };
            Ok(Record::from_rdata(name.clone(), ttl, data))
        })
        .collect()
}

/// TXT data as character-strings of at most 255 bytes (split on char boundaries).
fn txt_rdata(text: &str) -> TXT {
    let mut chunks = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        if current.len() + ch.len_utf8() > 255 {
            chunks.push(std::mem::take(&mut current));
        }
        current.push(ch);
    }
    chunks.push(current);
    TXT::new(chunks)
}

/// Our target string for a wire record, when it is of a type we handle.
pub(crate) fn wire_target(data: &RData) -> Option<String> {
    match data {
        RData::A(a) => Some(a.0.to_string()),
        RData::AAAA(aaaa) => Some(aaaa.0.to_string()),
        RData::CNAME(cname) => Some(name_string(&cname.0)),
        RData::TXT(txt) => Some(
            txt.txt_data
                .iter()
                .map(|chunk| String::from_utf8_lossy(chunk))
                .collect(),
        ),
        _ => None,
    }
}

/// Group wire records into RRsets (TTL: the smallest seen), keeping only the types we handle.
pub(crate) fn group_records<'r>(records: impl IntoIterator<Item = &'r Record>) -> Vec<Endpoint> {
    let mut sets: std::collections::BTreeMap<(String, RecordType), Endpoint> = Default::default();
    for record in records {
        let Some(record_type) = record_type_of(record.record_type()) else {
            continue;
        };
        let Some(target) = wire_target(&record.data) else {
            continue;
        };
        let dns_name = name_string(&record.name);
        let entry = sets
            .entry((dns_name.clone(), record_type))
            .or_insert_with(|| Endpoint {
                dns_name,
                record_type,
                targets: Targets::new(),
                ttl: Some(record.ttl),
                resource: None,
            });
        entry.targets.insert(target);
        entry.ttl = entry.ttl.map(|ttl| ttl.min(record.ttl));
    }
    sets.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_including_odd_labels() {
        assert_eq!(
            name_string(&wire_name("a.example.com.").unwrap()),
            "a.example.com"
        );
        for name in ["a.example.com", "*.example.com", "a-*.example.com", "x"] {
            let wire = wire_name(name).unwrap();
            assert!(wire.is_fqdn());
            assert_eq!(name_string(&wire), name);
        }
    }
}
