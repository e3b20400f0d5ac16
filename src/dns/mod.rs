//! DNS layer: the records we want or have, and the providers that hold them.
//!
//! Everything above this module (the engine, the sync loop) speaks in [`Endpoint`]s: one RRset,
//! named in lower case without the trailing dot. Providers translate to their wire or API format.

pub mod embedded;
pub mod pdns;
pub mod registry;
pub mod rfc2136;

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use futures::future::BoxFuture;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType as WireType};

use crate::model::RecordType;
use crate::model::dns_name::canonical;

/// TTL used when neither the desired record nor the provider says otherwise.
pub const DEFAULT_TTL: u32 = 300;

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

/// One RRset we want or have.
///
/// `dns_name`: lower-case, no trailing dot, may start with `*.` (wildcard).
/// `targets`: addresses for A/AAAA, a host name (lower-case, no trailing dot) for CNAME, the
/// text (character-strings joined, no quotes) for TXT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub dns_name: String,
    pub record_type: RecordType,
    pub targets: BTreeSet<String>,
    /// `None` → the configured default ([`DEFAULT_TTL`]).
    pub ttl: Option<u32>,
    /// Owner resource for the registry, e.g. `httproute/shop/web`.
    pub resource: Option<String>,
}

impl Endpoint {
    pub fn new<I, S>(dns_name: &str, record_type: RecordType, targets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Endpoint {
            dns_name: canonical(dns_name).into_owned(),
            record_type,
            targets: targets.into_iter().map(Into::into).collect(),
            ttl: None,
            resource: None,
        }
    }

    pub fn with_ttl(mut self, ttl: u32) -> Self {
        self.ttl = Some(ttl);
        self
    }

    pub fn with_resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    pub fn key(&self) -> (&str, RecordType) {
        (&self.dns_name, self.record_type)
    }

    pub fn ttl_or_default(&self) -> u32 {
        self.ttl.unwrap_or(DEFAULT_TTL)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let targets: Vec<&str> = self.targets.iter().map(String::as_str).collect();
        write!(
            f,
            "{} {} {}",
            self.dns_name,
            self.record_type,
            targets.join(",")
        )?;
        if let Some(ttl) = self.ttl {
            write!(f, " ttl={ttl}")?;
        }
        Ok(())
    }
}

/// A batch of RRset-level changes. Providers apply `delete`, then `update`, then `create`, each
/// list in order (the plan relies on this to write ownership before records and delete it after).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// RRsets that do not exist yet.
    pub create: Vec<Endpoint>,
    /// RRsets replaced wholesale by the new value.
    pub update: Vec<Endpoint>,
    /// RRsets removed (matched by name and type).
    pub delete: Vec<Endpoint>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }

    pub fn len(&self) -> usize {
        self.create.len() + self.update.len() + self.delete.len()
    }
}

/// A DNS backend: list the RRsets of the managed zones, apply a change batch.
///
/// Object-safe (boxed futures) so the sync loop can hold an `Arc<dyn Provider>`.
pub trait Provider: Send + Sync {
    /// All A/AAAA/CNAME/TXT RRsets in the managed zones. Must fail (not return a subset) when any
    /// zone could not be listed completely: the sync loop deletes nothing unless this is whole.
    fn records(&self) -> BoxFuture<'_, Result<Vec<Endpoint>, Error>>;

    /// Apply the changes; on error, some batches may have been applied (the next pass re-lists).
    fn apply<'a>(&'a self, changes: &'a Changes) -> BoxFuture<'a, Result<(), Error>>;

    /// The zones this provider manages (lower-case, no trailing dot).
    fn zones(&self) -> &[String];

    /// Make the next [`records`](Provider::records) read everything from the server, bypassing
    /// any listing cache (the periodic resync calls this to catch drift).
    fn invalidate_cache(&self) {}
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rfc2136(#[from] rfc2136::Error),
    #[error(transparent)]
    Pdns(#[from] pdns::Error),
    #[error(transparent)]
    Embedded(#[from] embedded::Error),
    #[error("cannot read secret file {path}: {source}")]
    SecretFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("secret file {0} is empty")]
    EmptySecretFile(PathBuf),
    #[error("no secret given: set {env} or pass a secret file")]
    MissingSecret { env: String },
}

/// Where a secret (TSIG key, API key) comes from: never the command line itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    File(PathBuf),
    Env(String),
}

impl SecretSource {
    /// The file if one is given, else the environment variable `env`.
    pub fn pick(file: Option<PathBuf>, env: &str) -> Self {
        match file {
            Some(path) => SecretSource::File(path),
            None => SecretSource::Env(env.to_string()),
        }
    }

    /// Read the secret, trimmed of surrounding white space.
    pub fn load(&self) -> Result<String, Error> {
        match self {
            SecretSource::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| Error::SecretFile {
                    path: path.clone(),
                    source,
                })?;
                let secret = text.trim().to_string();
                if secret.is_empty() {
                    return Err(Error::EmptySecretFile(path.clone()));
                }
                Ok(secret)
            }
            SecretSource::Env(env) => match std::env::var(env) {
                Ok(value) if !value.trim().is_empty() => Ok(value.trim().to_string()),
                _ => Err(Error::MissingSecret { env: env.clone() }),
            },
        }
    }
}

/// True when `name` is `zone` or below it.
pub fn in_zone(name: &str, zone: &str) -> bool {
    name == zone
        || (name.len() > zone.len()
            && name.ends_with(zone)
            && name.as_bytes()[name.len() - zone.len() - 1] == b'.')
}

/// The batches of one zone's changes, in order, for a server that applies each batch all or
/// nothing: a batch it rejects for its content is split in halves, and the halves are sent
/// next, until the changes it refuses stand alone and the others have gone through.
pub struct HalvingBatches<'a, T> {
    /// The work list, next batch last.
    pending: Vec<&'a [T]>,
}

impl<'a, T> HalvingBatches<'a, T> {
    pub fn new(changes: &'a [T], batch_size: usize) -> Self {
        Self {
            pending: changes.chunks(batch_size.max(1)).rev().collect(),
        }
    }

    /// The server refused `batch` for its content. Returns false when it is a single change:
    /// that one is the culprit, to be reported; a larger batch is split and sent again.
    pub fn split_rejected(&mut self, batch: &'a [T]) -> bool {
        if batch.len() < 2 {
            return false;
        }
        let (first, second) = batch.split_at(batch.len() / 2);
        self.pending.push(second);
        self.pending.push(first);
        true
    }
}

impl<'a, T> Iterator for HalvingBatches<'a, T> {
    type Item = &'a [T];

    fn next(&mut self) -> Option<&'a [T]> {
        self.pending.pop()
    }
}

/// The most specific of `zones` that contains `name`.
pub fn zone_of<'z>(name: &str, zones: &'z [String]) -> Option<&'z str> {
    zones
        .iter()
        .map(String::as_str)
        .filter(|zone| in_zone(name, zone))
        .max_by_key(|zone| zone.len())
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
    let invalid = |target: &str| InvalidTarget {
        dns_name: endpoint.dns_name.clone(),
        record_type: endpoint.record_type,
        target: target.to_string(),
    };
    let name = wire_name(&endpoint.dns_name).map_err(|_| invalid(""))?;
    endpoint
        .targets
        .iter()
        .map(|target| {
            let data = match endpoint.record_type {
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
                targets: BTreeSet::new(),
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
    fn rejected_batches_are_halved_until_the_culprits_stand_alone() {
        let changes: Vec<u32> = (0..10).collect();
        let refused = [3, 8];
        let mut batches = HalvingBatches::new(&changes, 4);
        let (mut applied, mut culprits, mut sent) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(batch) = batches.next() {
            sent.push(batch.to_vec());
            if batch.iter().any(|change| refused.contains(change)) {
                if !batches.split_rejected(batch) {
                    culprits.extend_from_slice(batch);
                }
            } else {
                applied.extend_from_slice(batch);
            }
        }
        assert_eq!(culprits, refused);
        assert_eq!(applied, [0, 1, 2, 4, 5, 6, 7, 9], "the rest, in order");
        assert_eq!(
            sent,
            [
                vec![0, 1, 2, 3],
                vec![0, 1],
                vec![2, 3],
                vec![2],
                vec![3],
                vec![4, 5, 6, 7],
                vec![8, 9],
                vec![8],
                vec![9],
            ]
        );
        let none: [u32; 0] = [];
        assert_eq!(HalvingBatches::new(&none, 4).count(), 0);
        assert_eq!(
            HalvingBatches::new(&changes, 0).count(),
            10,
            "a zero size means one"
        );
    }

    #[test]
    fn zone_of_picks_the_most_specific_zone() {
        let zones = vec!["example.com".to_string(), "sub.example.com".to_string()];
        assert_eq!(
            zone_of("a.sub.example.com", &zones),
            Some("sub.example.com")
        );
        assert_eq!(zone_of("a.example.com", &zones), Some("example.com"));
        assert_eq!(zone_of("example.com", &zones), Some("example.com"));
        assert_eq!(zone_of("badexample.com", &zones), None);
        assert_eq!(zone_of("example.org", &zones), None);
    }

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

    #[test]
    fn secrets_come_from_a_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "  c2VjcmV0\n").unwrap();
        let source = SecretSource::pick(Some(path.clone()), "UNUSED");
        assert_eq!(source.load().unwrap(), "c2VjcmV0");
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(source.load(), Err(Error::EmptySecretFile(_))));
        let missing = SecretSource::pick(None, "GATEWAY_DNS_TEST_SURELY_UNSET_VARIABLE");
        let err = missing.load().unwrap_err().to_string();
        assert!(
            err.contains("GATEWAY_DNS_TEST_SURELY_UNSET_VARIABLE"),
            "{err}"
        );
        let key = rfc2136::TsigKey::load(
            "k",
            rfc2136::TsigAlgorithmName::HmacSha256,
            &SecretSource::File(dir.path().join("absent")),
        );
        assert!(matches!(key, Err(Error::SecretFile { .. })));
    }
}
