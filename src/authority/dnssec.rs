//! DNSSEC for the embedded server (opt-in, `--embedded-dnssec-key`): keys, the signed zone and
//! the denial-of-existence chain. The crypto and the wire forms are hickory-proto's.
//!
//! - Keys: ECDSAP256SHA256 (algorithm 13) or ED25519 (15), each a PEM PKCS#8 file made by
//!   `gateway-dns dnssec --generate`. Every key given signs every zone, as a combined signing
//!   key (DNSKEY flags 257): one key is the usual setup, two are for a rollover.
//! - Denial of existence: NSEC (RFC 4034/4035), not NSEC3. Our names are the hostnames of
//!   Gateway routes, published on purpose and seen in certificate transparency logs anyway, so
//!   NSEC3's hashing would hide little while costing hashing on every build and a harder proof
//!   logic; NSEC is what every validator handles best.
//! - Signing happens when a zone is built, once per serial, not per query: the whole zone is
//!   signed (unchanged RRsets keep their signatures), so answers, AXFR and IXFR all carry the
//!   same signed data, and an IXFR delta holds the signatures and NSEC records that changed.
//! - Validity: a signature's inception and expiration depend only on the signing period, a
//!   [`RESIGN_PERIOD`] of Unix time (7 days): inception an hour before the period starts (for
//!   clocks running behind), expiration [`VALIDITY_PERIODS`] periods after its start. At every
//!   period boundary the server re-signs each zone, a zone change that takes a new serial by
//!   the usual rule; a signature served therefore has at least 14 days left, far more than the
//!   SOA expire (1 day) a secondary keeps a zone it can no longer refresh.
//! - Replicas: the signed fields are the same on every replica for the same content and
//!   period. ED25519 signatures are deterministic (RFC 8032), so replicas with the same key
//!   serve byte-identical zones; ECDSA signatures carry a random nonce, so replicas serve
//!   different but equally valid signatures for the same serial.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hickory_proto::dnssec::crypto::{EcdsaSigningKey, Ed25519SigningKey};
use hickory_proto::dnssec::rdata::{DNSKEY, DNSSECRData, DS, NSEC, RRSIG, SigInput};
use hickory_proto::dnssec::{Algorithm, DigestType, PublicKey as _, SigningKey, TBS};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber};
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::pem::PemObject as _;

/// Signatures are renewed at each multiple of this in Unix time.
pub const RESIGN_PERIOD: u64 = 7 * 24 * 3600;
/// Inception this long before the period starts: validators whose clock runs behind.
pub const INCEPTION_SKEW: u64 = 3600;
/// Expiration: this many periods after the period's start.
pub const VALIDITY_PERIODS: u64 = 3;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("DNSSEC key {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "DNSSEC key {path}: not a PEM PKCS#8 private key (\"BEGIN PRIVATE KEY\"); make one with `gateway-dns dnssec --generate`"
    )]
    NotPem { path: PathBuf },
    #[error(
        "DNSSEC key {path}: neither an ECDSA P-256 nor an Ed25519 private key (the algorithms supported: ECDSAP256SHA256, ED25519)"
    )]
    Unsupported { path: PathBuf },
    #[error("DNSSEC key: {0}")]
    Crypto(String),
}

/// The algorithms keys can be made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// Algorithm 13: ECDSA with curve P-256 and SHA-256.
    Ecdsap256sha256,
    /// Algorithm 15: Ed25519 (deterministic signatures: replicas sign identically).
    Ed25519,
}

/// One zone key: the private half signs, the DNSKEY publishes the public half.
pub struct ZoneKey {
    signing: Box<dyn SigningKey>,
    dnskey: DNSKEY,
    key_tag: u16,
}

impl std::fmt::Debug for ZoneKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneKey")
            .field("algorithm", &self.algorithm())
            .field("key_tag", &self.key_tag)
            .finish_non_exhaustive()
    }
}

impl ZoneKey {
    /// Reads a PEM PKCS#8 key file (a mounted Kubernetes Secret works the same).
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let pem = std::fs::read(path).map_err(|source| KeyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_pem(&pem, path)
    }

    fn from_pem(pem: &[u8], path: &Path) -> Result<Self, KeyError> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem).map_err(|_| KeyError::NotPem {
            path: path.to_path_buf(),
        })?;
        let signing: Box<dyn SigningKey> =
            match EcdsaSigningKey::from_pkcs8(&der, Algorithm::ECDSAP256SHA256) {
                Ok(key) => Box::new(key),
                Err(_) => match Ed25519SigningKey::from_pkcs8(&der) {
                    Ok(key) => Box::new(key),
                    Err(_) => {
                        return Err(KeyError::Unsupported {
                            path: path.to_path_buf(),
                        });
                    }
                },
            };
        Self::from_signing(signing)
    }

    fn from_signing(signing: Box<dyn SigningKey>) -> Result<Self, KeyError> {
        let public = signing
            .to_public_key()
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let dnskey = DNSKEY::from_key(&public);
        let key_tag = dnskey
            .calculate_key_tag()
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        Ok(ZoneKey {
            signing,
            dnskey,
            key_tag,
        })
    }

    /// A new key and its PEM file text.
    pub fn generate(algorithm: KeyAlgorithm) -> Result<(Self, String), KeyError> {
        let der = match algorithm {
            KeyAlgorithm::Ecdsap256sha256 => {
                EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256)
            }
            KeyAlgorithm::Ed25519 => Ed25519SigningKey::generate_pkcs8(),
        }
        .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let pem = pem_private_key(der.secret_pkcs8_der());
        let key = Self::from_pem(pem.as_bytes(), Path::new("(generated)"))?;
        Ok((key, pem))
    }

    pub fn algorithm(&self) -> Algorithm {
        self.signing.algorithm()
    }

    pub fn key_tag(&self) -> u16 {
        self.key_tag
    }

    /// The DNSKEY record of `zone` in presentation form.
    pub fn dnskey_text(&self, zone: &Name, ttl: u32) -> String {
        format!(
            "{} {ttl} IN DNSKEY {} 3 {} {}",
            zone,
            self.dnskey.flags(),
            u8::from(self.algorithm()),
            data_encoding::BASE64.encode(self.dnskey.public_key().public_bytes())
        )
    }

    /// The DS record (SHA-256 digest) the parent of `zone` publishes, in presentation form.
    pub fn ds_text(&self, zone: &Name, ttl: u32) -> Result<String, KeyError> {
        let digest = self
            .dnskey
            .to_digest(zone, DigestType::SHA256)
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let ds = DS::new(
            self.key_tag,
            self.algorithm(),
            DigestType::SHA256,
            digest.as_ref().to_vec(),
        );
        Ok(format!(
            "{} {ttl} IN DS {} {} {} {}",
            zone,
            ds.key_tag(),
            u8::from(ds.algorithm()),
            u8::from(ds.digest_type()),
            data_encoding::HEXUPPER.encode(ds.digest())
        ))
    }

    fn sign(
        &self,
        apex: &Name,
        rrset: &[Record],
        validity: (u32, u32),
    ) -> Result<Record, KeyError> {
        let first = rrset
            .first()
            .ok_or_else(|| KeyError::Crypto("empty RRset".into()))?;
        let input = SigInput {
            type_covered: first.record_type(),
            algorithm: self.algorithm(),
            num_labels: first.name.num_labels(),
            original_ttl: first.ttl,
            sig_expiration: SerialNumber::from(validity.1),
            sig_inception: SerialNumber::from(validity.0),
            key_tag: self.key_tag,
            signer_name: apex.clone(),
        };
        let tbs = TBS::from_input(&first.name, DNSClass::IN, &input, rrset.iter())
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        let signature = self
            .signing
            .sign(&tbs)
            .map_err(|e| KeyError::Crypto(e.to_string()))?;
        Ok(Record::from_rdata(
            first.name.clone(),
            first.ttl,
            RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(input, signature))),
        ))
    }
}

fn pem_private_key(der: &[u8]) -> String {
    let body = data_encoding::BASE64.encode(der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    pem
}

/// The signing period `now` (Unix seconds) falls in.
pub fn signing_period(now: u64) -> u64 {
    now / RESIGN_PERIOD
}

/// (inception, expiration) of the signatures made in `period`, in RFC 1982 serial arithmetic
/// as RRSIG carries them (Unix seconds mod 2^32).
pub fn validity(period: u64) -> (u32, u32) {
    let start = period * RESIGN_PERIOD;
    (
        start.saturating_sub(INCEPTION_SKEW) as u32,
        (start + VALIDITY_PERIODS * RESIGN_PERIOD) as u32,
    )
}

type RrsetKey = (Name, RecordType);

/// A zone with its DNSKEY, NSEC chain and signatures, built for one serial.
pub struct SignedZone {
    pub period: u64,
    /// Every RRset, SOA, DNSKEY and NSEC included, by lower-case owner and type.
    rrsets: BTreeMap<RrsetKey, Vec<Record>>,
    /// The RRSIGs of each RRset.
    signatures: BTreeMap<RrsetKey, Vec<Record>>,
    /// Owners of the NSEC chain, in canonical order (RFC 4034 6.1).
    nsec_owners: BTreeSet<Name>,
}

impl SignedZone {
    /// Signs `records` (the zone's RRsets, SOA first) with every key for the period `now` is
    /// in. `previous` lends the signatures of RRsets unchanged since, made in the same period.
    pub fn build(
        apex: &Name,
        records: Vec<Record>,
        keys: &[Arc<ZoneKey>],
        dnskey_ttl: u32,
        nsec_ttl: u32,
        now: u64,
        previous: Option<&SignedZone>,
    ) -> SignedZone {
        let period = signing_period(now);
        let mut rrsets: BTreeMap<RrsetKey, Vec<Record>> = BTreeMap::new();
        for mut record in records {
            record.name = record.name.to_lowercase();
            let key = (record.name.clone(), record.record_type());
            let set = rrsets.entry(key).or_default();
            if !set.contains(&record) {
                set.push(record);
            }
        }
        let apex = apex.to_lowercase();
        rrsets.insert(
            (apex.clone(), RecordType::DNSKEY),
            keys.iter()
                .map(|key| {
                    Record::from_rdata(
                        apex.clone(),
                        dnskey_ttl,
                        RData::DNSSEC(DNSSECRData::DNSKEY(key.dnskey.clone())),
                    )
                })
                .collect(),
        );
        // The NSEC chain: every owner name, each pointing at the next, the last at the apex.
        let mut types: BTreeMap<Name, Vec<RecordType>> = BTreeMap::new();
        for (name, record_type) in rrsets.keys() {
            types.entry(name.clone()).or_default().push(*record_type);
        }
        let owners: Vec<Name> = types.keys().cloned().collect();
        for (index, owner) in owners.iter().enumerate() {
            let next = owners.get(index + 1).unwrap_or(&apex).clone();
            let present = types.get(owner).cloned().unwrap_or_default();
            let nsec = NSEC::new_cover_self(next, present);
            rrsets.insert(
                (owner.clone(), RecordType::NSEC),
                vec![Record::from_rdata(
                    owner.clone(),
                    nsec_ttl,
                    RData::DNSSEC(DNSSECRData::NSEC(nsec)),
                )],
            );
        }
        let validity = validity(period);
        let mut signatures = BTreeMap::new();
        for (key, rrset) in &rrsets {
            let reused = previous
                .filter(|previous| previous.period == period)
                .filter(|previous| previous.rrsets.get(key) == Some(rrset))
                .and_then(|previous| previous.signatures.get(key));
            let sigs = match reused {
                Some(sigs) => sigs.clone(),
                None => keys
                    .iter()
                    .filter_map(|zone_key| match zone_key.sign(&apex, rrset, validity) {
                        Ok(sig) => Some(sig),
                        Err(err) => {
                            tracing::warn!(error = %err, name = %key.0, "embedded DNS: cannot sign an RRset");
                            None
                        }
                    })
                    .collect(),
            };
            signatures.insert(key.clone(), sigs);
        }
        SignedZone {
            period,
            rrsets,
            signatures,
            nsec_owners: owners.into_iter().collect(),
        }
    }

    /// The RRSIGs covering `record_type` at `name`.
    pub fn signatures(&self, name: &Name, record_type: RecordType) -> &[Record] {
        self.signatures
            .get(&(name.to_lowercase(), record_type))
            .map_or(&[], Vec::as_slice)
    }

    /// Every RRSIG at `name`, of all its RRsets.
    pub fn signatures_at(&self, name: &Name) -> impl Iterator<Item = &Record> {
        let name = name.to_lowercase();
        // Type 0 sorts first: the range starts at the name's first RRset.
        self.signatures
            .range((name.clone(), RecordType::ZERO)..)
            .take_while(move |((owner, _), _)| *owner == name)
            .flat_map(|(_, sigs)| sigs)
    }

    /// The records of one RRset the unsigned zone does not hold (DNSKEY, NSEC).
    pub fn rrset(&self, name: &Name, record_type: RecordType) -> &[Record] {
        self.rrsets
            .get(&(name.to_lowercase(), record_type))
            .map_or(&[], Vec::as_slice)
    }

    /// The NSEC whose owner is `name`, if `name` owns records.
    pub fn nsec_at(&self, name: &Name) -> Option<&Record> {
        self.rrset(name, RecordType::NSEC).first()
    }

    /// The NSEC proving `name` absent: the one with the last owner before it in canonical
    /// order (its next name comes after `name`, or it is the last and wraps to the apex).
    pub fn nsec_covering(&self, name: &Name) -> Option<&Record> {
        let name = name.to_lowercase();
        let owner = self
            .nsec_owners
            .range(..&name)
            .next_back()
            .or_else(|| self.nsec_owners.last())?;
        self.nsec_at(owner)
    }

    /// Every record but the SOA, with the signatures: what a transfer sends between its SOAs
    /// and what IXFR deltas are computed from.
    pub fn records_without_soa(&self) -> impl Iterator<Item = &Record> {
        self.rrsets
            .iter()
            .filter(|((_, record_type), _)| *record_type != RecordType::SOA)
            .flat_map(|(_, set)| set)
            .chain(self.signatures.values().flatten())
    }

    /// The records removed and added from `self` to `next` (the SOA aside: IXFR sends those).
    pub fn diff(&self, next: &SignedZone) -> (Vec<Record>, Vec<Record>) {
        let mut removed = Vec::new();
        let mut added = Vec::new();
        // The SOA itself is left out; its signatures are not.
        for (old_sets, new_sets, with_soa) in [
            (&self.rrsets, &next.rrsets, false),
            (&self.signatures, &next.signatures, true),
        ] {
            let keys: BTreeSet<&RrsetKey> = old_sets.keys().chain(new_sets.keys()).collect();
            for key in keys {
                if key.1 == RecordType::SOA && !with_soa {
                    continue;
                }
                let old = old_sets.get(key).map_or(&[][..], Vec::as_slice);
                let new = new_sets.get(key).map_or(&[][..], Vec::as_slice);
                if old == new {
                    continue;
                }
                removed.extend(old.iter().filter(|r| !new.contains(r)).cloned());
                added.extend(new.iter().filter(|r| !old.contains(r)).cloned());
            }
        }
        (removed, added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;

    fn a(name: &str, ip: [u8; 4]) -> Record {
        Record::from_rdata(
            Name::from_ascii(name).unwrap(),
            60,
            RData::A(A::from(std::net::Ipv4Addr::from(ip))),
        )
    }

    #[test]
    fn keys_round_trip_through_pem_and_bad_files_say_why() {
        for algorithm in [KeyAlgorithm::Ecdsap256sha256, KeyAlgorithm::Ed25519] {
            let (key, pem) = ZoneKey::generate(algorithm).unwrap();
            let again = ZoneKey::from_pem(pem.as_bytes(), Path::new("k")).unwrap();
            assert_eq!(key.key_tag(), again.key_tag());
            let zone = Name::from_ascii("example.com.").unwrap();
            assert!(key.dnskey_text(&zone, 300).contains(" DNSKEY 257 3 "));
            assert!(key.ds_text(&zone, 300).unwrap().contains(" DS "));
        }
        let not_pem = ZoneKey::from_pem(b"hello", Path::new("k")).unwrap_err();
        assert!(matches!(not_pem, KeyError::NotPem { .. }), "{not_pem}");
        let garbage = pem_private_key(b"not a key at all");
        let unsupported = ZoneKey::from_pem(garbage.as_bytes(), Path::new("k")).unwrap_err();
        assert!(
            matches!(unsupported, KeyError::Unsupported { .. }),
            "{unsupported}"
        );
    }

    #[test]
    fn ed25519_zones_are_identical_and_unchanged_rrsets_keep_their_signatures() {
        let (key, _) = ZoneKey::generate(KeyAlgorithm::Ed25519).unwrap();
        let keys = [Arc::new(key)];
        let apex = Name::from_ascii("example.com.").unwrap();
        let records = vec![a("a.example.com.", [192, 0, 2, 1])];
        let now = 1_800_000_000;
        let one = SignedZone::build(&apex, records.clone(), &keys, 300, 60, now, None);
        let two = SignedZone::build(&apex, records.clone(), &keys, 300, 60, now + 5, None);
        assert_eq!(one.diff(&two), (vec![], vec![]), "replicas agree");
        let mut more = records.clone();
        more.push(a("b.example.com.", [192, 0, 2, 2]));
        let three = SignedZone::build(&apex, more, &keys, 300, 60, now, Some(&one));
        let (removed, added) = one.diff(&three);
        // a's NSEC now points at b: that NSEC and its RRSIG go; b's A, NSEC and RRSIGs come.
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert_eq!(added.len(), 6, "{added:?}");
        let a_name = Name::from_ascii("a.example.com.").unwrap();
        assert_eq!(
            one.signatures(&a_name, RecordType::A),
            three.signatures(&a_name, RecordType::A)
        );
        // ECDSA draws a nonce per signature: same content, different signature bytes.
        let (ecdsa, _) = ZoneKey::generate(KeyAlgorithm::Ecdsap256sha256).unwrap();
        let ecdsa = [Arc::new(ecdsa)];
        let first = SignedZone::build(&apex, records.clone(), &ecdsa, 300, 60, now, None);
        let second = SignedZone::build(&apex, records.clone(), &ecdsa, 300, 60, now, None);
        assert_ne!(first.diff(&second), (vec![], vec![]));
        let covering = three
            .nsec_covering(&Name::from_ascii("aa.example.com.").unwrap())
            .unwrap();
        assert_eq!(covering.name, a_name);
    }

    #[test]
    fn validity_depends_on_the_period_only() {
        let now = 1_800_000_000;
        let (inception, expiration) = validity(signing_period(now));
        assert!(u64::from(inception) <= now - INCEPTION_SKEW);
        assert!(u64::from(expiration) >= now + (VALIDITY_PERIODS - 1) * RESIGN_PERIOD);
        assert_eq!(
            validity(signing_period(now)),
            validity(signing_period(now + 1))
        );
    }
}
