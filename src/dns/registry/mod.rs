//! Ownership registry in external-dns's TXT format, so an installation can take over records
//! that external-dns wrote with the same owner id (and leave every other record alone).
//!
//! Value: `heritage=external-dns,external-dns/owner=<id>,external-dns/resource=<kind>/<ns>/<name>`.
//! Name (external-dns's default mapper, no prefix/suffix): the record type, lower-cased, and a
//! dash are put in front of the first label — `a-app.example.com`, `cname-app.example.com`,
//! `a-*.example.com` for a wildcard. Older external-dns wrote the TXT at the record's own name
//! (the "legacy" format, which external-dns applies to every type but AAAA); we read both and
//! write only the new one.
//!
//! external-dns's registry options change the name and the value, and [`TxtRegistry`] follows
//! each as external-dns's name mapper and label serializer do: `--txt-prefix` before the first
//! label or `--txt-suffix` after it (`%{record_type}` in either takes the type's place),
//! `--txt-wildcard-replacement` for a leading `*`, and `--txt-encrypt-enabled` (the value
//! encrypted, see [`super::txt_crypto`]).

pub mod heartbeat;
mod ledger;
pub use ledger::{Holder, OwnershipLedger, TxtChange};

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::txt_crypto::{CryptoError, TxtCipher, looks_encrypted};
use super::{Endpoint, sort_later_wins};
use crate::model::RecordType;

pub const HERITAGE: &str = "external-dns";
const LABEL_PREFIX: &str = "external-dns/";
const OWNER_KEY: &str = "owner";
const RESOURCE_KEY: &str = "resource";
/// gateway-dns's own labels, outside external-dns's `external-dns/` space so that external-dns
/// reads past them: the targets an owner adds to a name shared across clusters, and its TTL.
const SHARED_KEY: &str = "gateway-dns/shared";
const TTL_KEY: &str = "gateway-dns/ttl";
/// Between the targets of `gateway-dns/shared` (no `,`, `=`, space or `;`: a value stays one
/// token to external-dns's parser and to a zone file's).
const TARGET_SEPARATOR: char = '+';

/// Labels parsed from one ownership TXT value: only what the plan reads, as a sync pass parses
/// one per ownership record the provider lists. They borrow the value they were read from; a
/// value opened with the registry's key owns its plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels<'v> {
    pub owner: Cow<'v, str>,
    pub resource: Option<Cow<'v, str>>,
    /// On a name shared across clusters: the targets this owner adds to the name, joined by
    /// `+` (read with [`Labels::shared_targets`]); `None` on a name the owner holds alone.
    pub shared: Option<Cow<'v, str>>,
    /// The TTL this owner writes a shared name with.
    pub ttl: Option<u32>,
    /// The plain text of a value that was encrypted with the registry's key (without quotes);
    /// `None` when the value was not encrypted.
    pub decrypted: Option<Box<str>>,
}

impl Labels<'_> {
    /// Labels that no longer borrow the text they were read from.
    pub fn into_owned(self) -> Labels<'static> {
        Labels {
            owner: Cow::Owned(self.owner.into_owned()),
            resource: self
                .resource
                .map(|resource| Cow::Owned(resource.into_owned())),
            shared: self.shared.map(|shared| Cow::Owned(shared.into_owned())),
            ttl: self.ttl,
            decrypted: self.decrypted,
        }
    }

    /// The targets this owner adds to a shared name (none for a name it holds alone).
    pub fn shared_targets(&self) -> impl Iterator<Item = &str> {
        self.shared
            .as_deref()
            .unwrap_or_default()
            .split(TARGET_SEPARATOR)
            .filter(|target| !target.is_empty())
    }
}

/// The TXT value that marks a record as owned by `owner_id`, in external-dns's layout
/// (heritage first, then the labels sorted by key).
pub fn ownership_value(owner_id: &str, resource: Option<&str>) -> String {
    let mut value = format!("heritage={HERITAGE},{LABEL_PREFIX}{OWNER_KEY}={owner_id}");
    if let Some(resource) = resource {
        value.push_str(&format!(",{LABEL_PREFIX}{RESOURCE_KEY}={resource}"));
    }
    value
}

/// The TXT value that marks `owner_id`'s part of a name shared across clusters: the ownership
/// value with the targets this owner adds and the TTL it writes them with. external-dns reads
/// it as an ordinary ownership value of `owner_id`.
pub fn shared_value<'t>(
    owner_id: &str,
    resource: Option<&str>,
    targets: impl IntoIterator<Item = &'t str>,
    ttl: u32,
) -> String {
    let mut value = ownership_value(owner_id, resource);
    value.push(',');
    value.push_str(SHARED_KEY);
    value.push('=');
    for (i, target) in targets.into_iter().enumerate() {
        if i > 0 {
            value.push(TARGET_SEPARATOR);
        }
        value.push_str(target);
    }
    value.push_str(&format!(",{TTL_KEY}={ttl}"));
    value
}

/// Parse an ownership value; `None` when it is not an external-dns heritage record (an
/// ordinary TXT record). Surrounding quotes, as some APIs return them, are tolerated.
pub fn parse_ownership(value: &str) -> Option<Labels<'_>> {
    let value = strip_quotes(value);
    let mut heritage_ok = false;
    let (mut owner, mut resource, mut shared, mut ttl) = (None, None, None, None);
    for pair in value.split(',') {
        let (key, val) = pair.split_once('=')?;
        if key == SHARED_KEY {
            shared = Some(val);
        } else if key == TTL_KEY {
            ttl = val.parse().ok();
        } else if key == "heritage" {
            if val != HERITAGE {
                return None;
            }
            heritage_ok = true;
        } else if let Some(key) = key.strip_prefix(LABEL_PREFIX) {
            // A label written twice counts with its last value.
            match key {
                OWNER_KEY => owner = Some(val),
                RESOURCE_KEY => resource = Some(val),
                _ => {}
            }
        }
    }
    if !heritage_ok {
        return None;
    }
    Some(Labels {
        owner: Cow::Borrowed(owner.unwrap_or_default()),
        resource: resource.map(Cow::Borrowed),
        shared: shared.map(Cow::Borrowed),
        ttl,
        decrypted: None,
    })
}

/// The value without surrounding white space and quotes.
fn strip_quotes(value: &str) -> &str {
    let value = value.trim();
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// Name of the ownership TXT record for `dns_name`/`record_type` (external-dns's new format,
/// without prefix, suffix or wildcard replacement).
pub fn txt_name(dns_name: &str, record_type: RecordType) -> String {
    TxtRegistry::new("").txt_name(dns_name, record_type)
}

/// external-dns's placeholder in `--txt-prefix`/`--txt-suffix` for the lower-cased record type.
pub const RECORD_TYPE_TEMPLATE: &str = "%{record_type}";

/// The record types external-dns's name mapper recognises, in the order it tries them (the
/// order matters with a placeholder: the first type whose affix matches wins).
const MAPPER_TYPES: [&str; 10] = [
    "a", "aaaa", "cname", "ns", "mx", "ptr", "srv", "naptr", "txt", "dname",
];

/// The registry's settings, each one of external-dns's TXT registry options, so an installation
/// can take over from external-dns as it was configured: the owner id, `--txt-prefix` or
/// `--txt-suffix`, `--txt-wildcard-replacement` (many providers, PowerDNS among them, reject a
/// `*` inside a label such as `a-*.example.com`) and the AES key of `--txt-encrypt-enabled`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxtRegistry {
    pub owner_id: String,
    pub wildcard_replacement: Option<String>,
    /// Lower-cased, as external-dns keeps it; at most one of prefix and suffix is set.
    pub prefix: String,
    pub suffix: String,
    /// Reads encrypted values (external-dns reads them whenever a key is set).
    pub cipher: Option<TxtCipher>,
    /// Writes encrypted values.
    pub encrypt: bool,
}

/// What one TXT value is to the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'v> {
    Ownership(Labels<'v>),
    /// Looks like an encrypted ownership value, but the configured key does not open it: it is
    /// not ours, and it is reported rather than taken for an ordinary TXT record in silence.
    Undecryptable,
    /// An ordinary TXT value.
    Other,
}

impl TxtRegistry {
    pub fn new(owner_id: impl Into<String>) -> Self {
        TxtRegistry {
            owner_id: owner_id.into(),
            wildcard_replacement: None,
            prefix: String::new(),
            suffix: String::new(),
            cipher: None,
            encrypt: false,
        }
    }

    pub fn with_wildcard_replacement(mut self, replacement: Option<String>) -> Self {
        self.wildcard_replacement = replacement
            .map(|r| r.to_ascii_lowercase())
            .filter(|r| !r.is_empty());
        self
    }

    /// external-dns's `--txt-prefix` and `--txt-suffix` (the caller keeps them exclusive; with
    /// both set, as in external-dns, no ownership record would be recognised).
    pub fn with_affixes(mut self, prefix: Option<String>, suffix: Option<String>) -> Self {
        self.prefix = prefix.unwrap_or_default().to_ascii_lowercase();
        self.suffix = suffix.unwrap_or_default().to_ascii_lowercase();
        self
    }

    /// The AES key, and whether values are written encrypted (read whenever a key is set).
    pub fn with_encryption(mut self, cipher: Option<TxtCipher>, encrypt: bool) -> Self {
        self.encrypt = encrypt && cipher.is_some();
        self.cipher = cipher;
        self
    }

    /// The name under which the registry knows `dns_name` (the leading `*` replaced).
    pub fn registry_name<'n>(&self, dns_name: &'n str) -> Cow<'n, str> {
        match (&self.wildcard_replacement, dns_name.strip_prefix("*.")) {
            (Some(replacement), Some(rest)) => format!("{replacement}.{rest}").into(),
            _ => dns_name.into(),
        }
    }

    /// The records a registry name may stand for: itself, and the wildcard it replaced.
    pub fn record_names(&self, registry_name: &str) -> Vec<String> {
        let mut names = vec![registry_name.to_string()];
        if let Some(replacement) = &self.wildcard_replacement
            && let Some(rest) = registry_name
                .strip_prefix(replacement.as_str())
                .and_then(|r| r.strip_prefix('.'))
        {
            names.push(format!("*.{rest}"));
        }
        names
    }

    fn type_in_affix(&self) -> bool {
        self.prefix.contains(RECORD_TYPE_TEMPLATE) || self.suffix.contains(RECORD_TYPE_TEMPLATE)
    }

    /// external-dns's `ToTXTName`: the prefix before the first label and the suffix after it
    /// (the placeholder replaced by the type); the `<type>-` in front of the first label only
    /// when no affix carries the placeholder; a leading `*` replaced first.
    pub fn txt_name(&self, dns_name: &str, record_type: RecordType) -> String {
        let record_type = record_type.as_str().to_ascii_lowercase();
        let prefix = self.prefix.replace(RECORD_TYPE_TEMPLATE, &record_type);
        let suffix = self.suffix.replace(RECORD_TYPE_TEMPLATE, &record_type);
        let (first, rest) = match dns_name.split_once('.') {
            Some((first, rest)) => (first, Some(rest)),
            None => (dns_name, None),
        };
        let first = match &self.wildcard_replacement {
            Some(replacement) if first == "*" => replacement.as_str(),
            _ => first,
        };
        let type_mark = if self.type_in_affix() {
            String::new()
        } else {
            format!("{record_type}-")
        };
        match rest {
            Some(rest) => format!("{prefix}{type_mark}{first}{suffix}.{rest}"),
            None => format!("{prefix}{type_mark}{first}{suffix}"),
        }
    }

    /// external-dns's `ToEndpointName`: what the TXT record `txt_name` covers.
    pub fn covered_by(&self, txt_name: &str) -> Covers {
        let name = txt_name.to_ascii_lowercase();
        let found = if self.suffix.is_empty() {
            self.drop_affix(&name)
        } else if self.prefix.is_empty() {
            // The suffix sits after the first label (and after as many more as it has dots).
            let dots = self.suffix.matches('.').count();
            let parts: Vec<&str> = name.splitn(dots + 2, '.').collect();
            if parts.len() <= dots {
                None
            } else {
                let head = parts[..=dots].join(".");
                self.drop_affix(&head)
                    .map(|(covered, record_type)| match parts.get(dots + 1) {
                        Some(rest) => (format!("{covered}.{rest}"), record_type),
                        None => (covered, record_type),
                    })
            }
        } else {
            None
        };
        match found {
            None => Covers::Unrelated,
            Some((covered, "")) => Covers::Legacy(covered),
            Some((covered, record_type)) => {
                match record_type.to_ascii_uppercase().parse::<RecordType>() {
                    Ok(record_type) => Covers::Record(covered, record_type),
                    Err(_) => Covers::OtherType,
                }
            }
        }
    }

    /// external-dns's `dropAffixExtractType`: the name without the affix and the type it names
    /// (`""` for the legacy format), `None` when the affix is not there.
    fn drop_affix(&self, name: &str) -> Option<(String, &'static str)> {
        let is_prefix = self.suffix.is_empty();
        let mut prefix = self.prefix.clone();
        let mut suffix = self.suffix.clone();
        if self.type_in_affix() {
            for record_type in MAPPER_TYPES {
                let typed_prefix = prefix.replace(RECORD_TYPE_TEMPLATE, record_type);
                let typed_suffix = suffix.replace(RECORD_TYPE_TEMPLATE, record_type);
                if is_prefix && let Some(rest) = name.strip_prefix(typed_prefix.as_str()) {
                    return Some((rest.to_string(), record_type));
                }
                if !is_prefix && let Some(rest) = name.strip_suffix(typed_suffix.as_str()) {
                    return Some((rest.to_string(), record_type));
                }
            }
            // Records written before the placeholder was configured.
            prefix = prefix.replace(RECORD_TYPE_TEMPLATE, "");
            suffix = suffix.replace(RECORD_TYPE_TEMPLATE, "");
        }
        let rest = if is_prefix {
            name.strip_prefix(prefix.as_str())
        } else {
            name.strip_suffix(suffix.as_str())
        }?;
        Some(type_in_default_position(rest))
    }

    /// What `value` is: an ownership value (plain, or encrypted and opened with our key), one
    /// our key cannot open, or an ordinary TXT value.
    pub fn parse<'v>(&self, value: &'v str) -> Value<'v> {
        if let Some(labels) = parse_ownership(value) {
            return Value::Ownership(labels);
        }
        let Some(cipher) = &self.cipher else {
            return Value::Other;
        };
        match cipher.decrypt(value) {
            Ok(plain) => match parse_ownership(&plain) {
                Some(labels) => Value::Ownership(Labels {
                    decrypted: Some(strip_quotes(&plain).into()),
                    ..labels.into_owned()
                }),
                None => Value::Other,
            },
            Err(_) if looks_encrypted(value) => Value::Undecryptable,
            Err(_) => Value::Other,
        }
    }

    /// Our ownership value for `resource`. Encrypted, it keeps a value of ours that already says
    /// the same (so an unchanged record is not rewritten under a new nonce every pass).
    pub fn value_for(
        &self,
        resource: Option<&str>,
        present: &[(&str, Labels<'_>)],
    ) -> Result<String, CryptoError> {
        self.sealed(ownership_value(&self.owner_id, resource), present)
    }

    /// Our part of a shared name at a TXT name holding `present`: the targets we add and
    /// their TTL (see [`shared_value`]), sealed as [`Self::value_for`] seals.
    pub fn shared_value_for<'t>(
        &self,
        resource: Option<&str>,
        targets: impl IntoIterator<Item = &'t str>,
        ttl: u32,
        present: &[(&str, Labels<'_>)],
    ) -> Result<String, CryptoError> {
        self.sealed(
            shared_value(&self.owner_id, resource, targets, ttl),
            present,
        )
    }

    /// `plain` as written: encrypted when we write encrypted values, keeping a value of ours
    /// that already says the same.
    fn sealed(&self, plain: String, present: &[(&str, Labels<'_>)]) -> Result<String, CryptoError> {
        match &self.cipher {
            Some(cipher) if self.encrypt => present
                .iter()
                .find(|(_, labels)| labels.decrypted.as_deref() == Some(plain.as_str()))
                .map(|(raw, _)| Ok((*raw).to_owned()))
                .unwrap_or_else(|| cipher.encrypt(&plain)),
            _ => Ok(plain),
        }
    }

    /// The plain ownership value for `resource` (what [`Self::value_for`] encrypts).
    pub fn value(&self, resource: Option<&str>) -> String {
        ownership_value(&self.owner_id, resource)
    }
}

/// external-dns's `extractRecordTypeDefaultPosition`: a known type and a dash in front of the
/// first label, else the legacy format (type `""`).
fn type_in_default_position(name: &str) -> (String, &'static str) {
    let first = name.split('-').next().unwrap_or_default();
    match MAPPER_TYPES.iter().find(|t| **t == first) {
        Some(record_type) => (
            name.strip_prefix(&format!("{first}-"))
                .unwrap_or(name)
                .to_string(),
            record_type,
        ),
        None => (name.to_string(), ""),
    }
}

/// What an ownership TXT record's name says it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Covers {
    /// New format: the record of this name and type.
    Record(String, RecordType),
    /// New format for a type we do not manage (NS, MX, PTR, SRV, NAPTR, DNAME).
    OtherType,
    /// Legacy format: records at this very name (every type but AAAA, as external-dns reads it).
    Legacy(String),
    /// The configured prefix or suffix is not there: nothing this registry knows of.
    Unrelated,
}

/// Reverse of [`txt_name`] (no prefix or suffix), reading the legacy layout too.
pub fn covered_by(txt_name: &str) -> Covers {
    TxtRegistry::new("").covered_by(txt_name)
}

/// `covered` borrowed from the end of `listed` when it is written there as it is (the usual
/// case: `a-www.example.com` covers `www.example.com`), so an index over a whole listing does
/// not copy every name.
fn tail_of(listed: &str, covered: String) -> Cow<'_, str> {
    let tail = listed
        .len()
        .checked_sub(covered.len())
        .and_then(|start| listed.get(start..));
    match tail {
        Some(tail) if tail == covered => Cow::Borrowed(tail),
        _ => Cow::Owned(covered),
    }
}

/// Who owns a record, and through which TXT record we know it (borrowed from the listing the
/// [`OwnershipIndex`] reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    pub owner: &'a str,
    pub resource: Option<&'a str>,
    pub txt_name: &'a str,
    pub legacy: bool,
    /// The owner's value marks the name shared across clusters (`gateway-dns/shared`).
    pub shared: bool,
}

/// The heritage values at one TXT name.
#[derive(Debug, Clone)]
struct RegistryTxt<'r> {
    /// Each value as listed, and parsed.
    values: Vec<(&'r str, Labels<'r>)>,
    /// The name holds ownership values only: registry bookkeeping, not data.
    only_ownership: bool,
}

/// Ownership of every record, read from the TXT records of a listing. It borrows the listing's
/// names and values: a sync pass builds one over every record the provider holds.
#[derive(Debug, Clone)]
pub struct OwnershipIndex<'r> {
    registry: TxtRegistry,
    /// The TXT name owning each record in the new format (the record's name borrowed from the
    /// TXT name where it is written there as it is).
    /// Sorted by (name, type), as `registry_txt` by TXT name: sorted vectors, not maps, for a
    /// resync holds this index for every record beside the listing it borrows from.
    by_record: Vec<((Cow<'r, str>, RecordType), &'r str)>,
    /// The TXT name owning the records at a name in the legacy format.
    legacy_by_name: BTreeMap<Cow<'r, str>, &'r str>,
    /// TXT names holding at least one heritage value.
    registry_txt: Vec<(&'r str, RegistryTxt<'r>)>,
    /// TXT names holding a value that looks encrypted but that our key does not open.
    undecryptable: BTreeSet<String>,
}

impl<'r> OwnershipIndex<'r> {
    pub fn from_records(records: &'r [Endpoint], registry: &TxtRegistry) -> Self {
        let mut index = OwnershipIndex {
            registry: registry.clone(),
            by_record: Vec::new(),
            legacy_by_name: BTreeMap::new(),
            registry_txt: Vec::new(),
            undecryptable: BTreeSet::new(),
        };
        // Sized once, as in `Current` of the plan: at most one entry per TXT record.
        let txt_records = records
            .iter()
            .filter(|r| r.record_type == RecordType::TXT)
            .count();
        index.by_record.reserve_exact(txt_records);
        index.registry_txt.reserve_exact(txt_records);
        for record in records.iter().filter(|r| r.record_type == RecordType::TXT) {
            let mut values: Vec<(&'r str, Labels<'r>)> = Vec::new();
            let mut only_ownership = !record.targets.is_empty();
            for value in &record.targets {
                match registry.parse(value) {
                    Value::Ownership(labels) => values.push((value.as_str(), labels)),
                    Value::Undecryptable => {
                        index.undecryptable.insert(record.dns_name.clone());
                        only_ownership = false;
                    }
                    Value::Other => only_ownership = false,
                }
            }
            if values.is_empty() {
                continue;
            }
            let txt_name = record.dns_name.as_str();
            match registry.covered_by(txt_name) {
                Covers::Record(name, record_type) => {
                    let name = tail_of(txt_name, name);
                    index.by_record.push(((name, record_type), txt_name));
                }
                Covers::Legacy(name) => {
                    index
                        .legacy_by_name
                        .insert(tail_of(txt_name, name), txt_name);
                }
                Covers::OtherType | Covers::Unrelated => {}
            }
            values.shrink_to_fit();
            index.registry_txt.push((
                txt_name,
                RegistryTxt {
                    values,
                    only_ownership,
                },
            ));
        }
        sort_later_wins(&mut index.by_record, |(a, _), (b, _)| a.cmp(b));
        sort_later_wins(&mut index.registry_txt, |(a, _), (b, _)| a.cmp(b));
        index
    }

    /// The place of `txt_name` in `registry_txt`.
    fn txt_at(&self, txt_name: &str) -> Option<usize> {
        self.registry_txt
            .binary_search_by(|(name, _)| (*name).cmp(txt_name))
            .ok()
    }

    fn txt(&self, txt_name: &str) -> Option<&RegistryTxt<'r>> {
        self.txt_at(txt_name).map(|at| &self.registry_txt[at].1)
    }

    /// The new-format TXT name covering `name`/`record_type`.
    fn covering_txt(&self, name: &str, record_type: RecordType) -> Option<&'r str> {
        self.by_record
            .binary_search_by(|((covered, t), _)| (covered.as_ref(), *t).cmp(&(name, record_type)))
            .ok()
            .map(|at| self.by_record[at].1)
    }

    /// TXT records with a value that looks encrypted but does not open with our key (another
    /// installation's key, or a wrong one): not ours, and worth telling the operator.
    pub fn undecryptable(&self) -> &BTreeSet<String> {
        &self.undecryptable
    }

    /// The owner named by the first heritage value at `txt_name`, as external-dns reads it; on
    /// a name shared across clusters, ours when one of its values is our shared one.
    fn owner_at(&self, txt_name: &'r str, legacy: bool) -> Option<Owner<'_>> {
        let values = &self.txt(txt_name)?.values;
        let (_, labels) = values
            .iter()
            .find(|(_, labels)| labels.shared.is_some() && labels.owner == self.registry.owner_id)
            .or_else(|| values.first())?;
        Some(Owner {
            owner: &labels.owner,
            resource: labels.resource.as_deref(),
            txt_name,
            legacy,
            shared: labels.shared.is_some(),
        })
    }

    /// The TXT name that owns the record `name`/`record_type` (new format, then legacy).
    pub fn owning_txt(&self, name: &str, record_type: RecordType) -> Option<&'r str> {
        let name = self.registry.registry_name(name);
        if let Some(txt_name) = self.covering_txt(&name, record_type) {
            return Some(txt_name);
        }
        if record_type == RecordType::AAAA {
            return None;
        }
        self.legacy_by_name.get(name.as_ref()).copied()
    }

    /// The owner of the record `name`/`record_type`: the new format first, then the legacy one
    /// (which external-dns never applies to AAAA).
    pub fn owner_of(&self, name: &str, record_type: RecordType) -> Option<Owner<'_>> {
        let txt_name = self.owning_txt(name, record_type)?;
        let legacy = self
            .covering_txt(&self.registry.registry_name(name), record_type)
            .is_none();
        self.owner_at(txt_name, legacy)
    }

    /// Heritage values (raw text, parsed) stored at `txt_name`.
    pub fn registry_values(&self, txt_name: &str) -> &[(&'r str, Labels<'r>)] {
        self.txt(txt_name)
            .map(|txt| txt.values.as_slice())
            .unwrap_or(&[])
    }

    /// True when `record` (one of the indexed records) is a TXT RRset made only of heritage
    /// values, plain or opened with our key: registry bookkeeping,
    /// not a record anyone published for its own sake.
    pub fn is_registry_record(&self, record: &Endpoint) -> bool {
        record.record_type == RecordType::TXT
            && self
                .txt(record.dns_name.as_str())
                .is_some_and(|txt| txt.only_ownership)
    }

    /// New-format ownership records whose owner is `owner_id` (name, type covered, owner).
    pub fn owned_new_format<'a>(
        &'a self,
        owner_id: &'a str,
    ) -> impl Iterator<Item = ((&'a str, RecordType), Owner<'a>)> + 'a {
        self.by_record
            .iter()
            .filter_map(|((name, record_type), txt_name)| {
                Some((
                    (name.as_ref(), *record_type),
                    self.owner_at(txt_name, false)?,
                ))
            })
            .filter(move |(_, owner)| owner.owner == owner_id)
    }

    /// Names covered by a legacy TXT owned by `owner_id`.
    pub fn owned_legacy_names<'a>(&'a self, owner_id: &'a str) -> BTreeSet<&'a str> {
        self.legacy_by_name
            .iter()
            .filter(|(_, txt_name)| {
                self.owner_at(txt_name, true)
                    .is_some_and(|owner| owner.owner == owner_id)
            })
            .map(|(name, _)| name.as_ref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_matches_external_dns_layout() {
        assert_eq!(
            ownership_value("gw", Some("httproute/shop/web")),
            "heritage=external-dns,external-dns/owner=gw,external-dns/resource=httproute/shop/web"
        );
        assert_eq!(
            ownership_value("gw", None),
            "heritage=external-dns,external-dns/owner=gw"
        );
    }

    #[test]
    fn parses_quoted_and_unquoted_values_and_rejects_others() {
        let labels = parse_ownership(
            "\"heritage=external-dns,external-dns/owner=a,external-dns/resource=ingress/x/y\"",
        )
        .unwrap();
        assert_eq!(labels.owner, "a");
        assert_eq!(labels.resource.as_deref(), Some("ingress/x/y"));
        assert!(parse_ownership("v=spf1 -all").is_none());
        assert!(parse_ownership("heritage=someone-else,external-dns/owner=a").is_none());
        assert!(parse_ownership("external-dns/owner=a").is_none());
    }

    #[test]
    fn txt_names_follow_the_type_prefixed_format() {
        assert_eq!(
            txt_name("app.example.com", RecordType::A),
            "a-app.example.com"
        );
        assert_eq!(
            txt_name("app.example.com", RecordType::CNAME),
            "cname-app.example.com"
        );
        assert_eq!(
            txt_name("*.example.com", RecordType::AAAA),
            "aaaa-*.example.com"
        );
        assert_eq!(
            covered_by("aaaa-*.example.com"),
            Covers::Record("*.example.com".into(), RecordType::AAAA)
        );
        assert_eq!(covered_by("mx-example.com"), Covers::OtherType);
        assert_eq!(
            covered_by("txt-note.example.com"),
            Covers::Record("note.example.com".into(), RecordType::TXT)
        );
        assert_eq!(
            covered_by("app.example.com"),
            Covers::Legacy("app.example.com".into())
        );
        assert_eq!(
            covered_by("my-app.example.com"),
            Covers::Legacy("my-app.example.com".into())
        );
    }

    #[test]
    fn wildcard_replacement_maps_both_ways() {
        let registry = TxtRegistry::new("gw").with_wildcard_replacement(Some("Any".into()));
        assert_eq!(
            registry.txt_name("*.example.com", RecordType::A),
            "a-any.example.com"
        );
        assert_eq!(
            registry.record_names("any.example.com"),
            ["any.example.com", "*.example.com"]
        );
        let records = vec![Endpoint::new(
            "a-any.example.com",
            RecordType::TXT,
            [ownership_value("gw", None)],
        )];
        let index = OwnershipIndex::from_records(&records, &registry);
        assert!(index.owner_of("*.example.com", RecordType::A).is_some());
    }

    #[test]
    fn index_prefers_new_format_and_skips_legacy_for_aaaa() {
        let records = vec![
            Endpoint::new(
                "a-app.example.com",
                RecordType::TXT,
                [ownership_value("new", None)],
            ),
            Endpoint::new(
                "app.example.com",
                RecordType::TXT,
                [ownership_value("old", None), "v=spf1 -all".to_string()],
            ),
        ];
        let index = OwnershipIndex::from_records(&records, &TxtRegistry::new("x"));
        assert_eq!(
            index
                .owner_of("app.example.com", RecordType::A)
                .unwrap()
                .owner,
            "new"
        );
        assert_eq!(
            index
                .owner_of("app.example.com", RecordType::CNAME)
                .unwrap()
                .owner,
            "old"
        );
        assert!(
            index
                .owner_of("app.example.com", RecordType::AAAA)
                .is_none()
        );
        assert!(index.is_registry_record(&records[0]));
        assert!(!index.is_registry_record(&records[1]));
    }

    /// The index borrows a covered name from its TXT name where it is written there as it is,
    /// and copies it where it is not (upper case, which an endpoint's name never keeps, or a
    /// suffix inside the name); both are found.
    #[test]
    fn index_finds_names_borrowed_from_txt_names_and_copied_ones() {
        assert!(matches!(
            tail_of("a-app.example.com", "app.example.com".into()),
            Cow::Borrowed("app.example.com")
        ));
        assert!(matches!(
            tail_of("A-App.Example.com", "app.example.com".into()),
            Cow::Owned(_)
        ));
        assert!(matches!(
            tail_of("x", "app.example.com".into()),
            Cow::Owned(_)
        ));
        let records = vec![
            Endpoint::new(
                "a-app.example.com",
                RecordType::TXT,
                [ownership_value("lower", Some("httproute/a/app"))],
            ),
            Endpoint::new(
                "AAAA-Web.Example.com",
                RecordType::TXT,
                [ownership_value("upper", None)],
            ),
            Endpoint::new(
                "OLD.example.com",
                RecordType::TXT,
                [ownership_value("legacy", None)],
            ),
        ];
        let index = OwnershipIndex::from_records(&records, &TxtRegistry::new("x"));
        let app = index.owner_of("app.example.com", RecordType::A).unwrap();
        assert_eq!(
            (app.owner, app.resource),
            ("lower", Some("httproute/a/app"))
        );
        let web = index.owner_of("web.example.com", RecordType::AAAA).unwrap();
        assert_eq!((web.owner, web.txt_name), ("upper", "aaaa-web.example.com"));
        assert_eq!(
            index
                .owner_of("old.example.com", RecordType::A)
                .unwrap()
                .owner,
            "legacy"
        );
        assert_eq!(
            index.owned_legacy_names("legacy"),
            BTreeSet::from(["old.example.com"])
        );
        let owned: Vec<_> = index
            .owned_new_format("upper")
            .map(|(key, _)| key)
            .collect();
        assert_eq!(owned, [("web.example.com", RecordType::AAAA)]);
        // Suffixed names sit inside the TXT name: copied, and found the same.
        let suffixed = affixed("", "-own", None);
        let records = vec![Endpoint::new(
            "a-app-own.example.com",
            RecordType::TXT,
            [ownership_value("gw", None)],
        )];
        let index = OwnershipIndex::from_records(&records, &suffixed);
        assert!(index.owner_of("app.example.com", RecordType::A).is_some());
    }

    fn affixed(prefix: &str, suffix: &str, wildcard: Option<&str>) -> TxtRegistry {
        TxtRegistry::new("gw")
            .with_affixes(
                Some(prefix.to_string()).filter(|p| !p.is_empty()),
                Some(suffix.to_string()).filter(|s| !s.is_empty()),
            )
            .with_wildcard_replacement(wildcard.map(str::to_string))
    }

    /// external-dns's `ToTXTName`/`ToEndpointName` cases (registry/mapper), both ways.
    #[test]
    fn affixes_name_records_as_external_dns_does() {
        // (prefix, suffix, wildcard replacement, record name, type, ownership record name)
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            &'a str,
            RecordType,
            &'a str,
        );
        let cases: [Case; 12] = [
            (
                "",
                "",
                None,
                "foo.example.com",
                RecordType::A,
                "a-foo.example.com",
            ),
            (
                "txt-",
                "",
                None,
                "foo.example.com",
                RecordType::A,
                "txt-a-foo.example.com",
            ),
            (
                "TXT.",
                "",
                None,
                "foo.example.com",
                RecordType::CNAME,
                "txt.cname-foo.example.com",
            ),
            (
                "%{record_type}-",
                "",
                None,
                "foo.example.com",
                RecordType::AAAA,
                "aaaa-foo.example.com",
            ),
            (
                "ext-%{record_type}.",
                "",
                None,
                "foo.example.com",
                RecordType::A,
                "ext-a.foo.example.com",
            ),
            (
                "",
                "-%{record_type}",
                None,
                "foo.example.com",
                RecordType::CNAME,
                "foo-cname.example.com",
            ),
            (
                "",
                "-owner",
                None,
                "foo.example.com",
                RecordType::A,
                "a-foo-owner.example.com",
            ),
            (
                "",
                ".reg",
                None,
                "foo.example.com",
                RecordType::AAAA,
                "aaaa-foo.reg.example.com",
            ),
            (
                "txt-",
                "",
                Some("wild"),
                "*.example.com",
                RecordType::A,
                "txt-a-wild.example.com",
            ),
            (
                "%{record_type}-",
                "",
                Some("wild"),
                "*.example.com",
                RecordType::A,
                "a-wild.example.com",
            ),
            (
                "",
                "-%{record_type}",
                Some("wild"),
                "*.example.com",
                RecordType::AAAA,
                "wild-aaaa.example.com",
            ),
            (
                "",
                "-%{record_type}",
                None,
                "example",
                RecordType::A,
                "example-a",
            ),
        ];
        for (prefix, suffix, wildcard, name, record_type, want) in cases {
            let registry = affixed(prefix, suffix, wildcard);
            assert_eq!(
                registry.txt_name(name, record_type),
                want,
                "{prefix:?} {suffix:?} {name}"
            );
            let registry_name = registry.registry_name(name).into_owned();
            assert_eq!(
                registry.covered_by(want),
                Covers::Record(registry_name, record_type),
                "{prefix:?} {suffix:?} {want}"
            );
        }
    }

    #[test]
    fn affixes_read_legacy_and_foreign_names_as_external_dns_does() {
        let prefixed = affixed("txt.", "", None);
        // Written before the type mark existed: the record's own name behind the prefix.
        assert_eq!(
            prefixed.covered_by("txt.app.example.com"),
            Covers::Legacy("app.example.com".into())
        );
        // Without the prefix, nothing of ours (external-dns keys it on an empty name).
        assert_eq!(prefixed.covered_by("a-app.example.com"), Covers::Unrelated);
        assert_eq!(
            prefixed.covered_by("txt.mx-app.example.com"),
            Covers::OtherType
        );
        // A placeholder prefix still reads records written with the plain one.
        let templated = affixed("%{record_type}-reg.", "", None);
        assert_eq!(
            templated.covered_by("cname-reg.app.example.com"),
            Covers::Record("app.example.com".into(), RecordType::CNAME)
        );
        assert_eq!(
            templated.covered_by("-reg.a-app.example.com"),
            Covers::Record("app.example.com".into(), RecordType::A)
        );
        // Suffix with dots: the labels it spans are taken out after the first label.
        let dotted = affixed("", ".foo.bar", None);
        assert_eq!(
            dotted.covered_by("a-example.foo.bar.com"),
            Covers::Record("example.com".into(), RecordType::A)
        );
        assert_eq!(dotted.covered_by("a-example.foo"), Covers::Unrelated);
        // external-dns gives up when both are set; so do we (the flags forbid it anyway).
        assert_eq!(
            affixed("pre-", "-suf", None).covered_by("pre-a-foo-suf.example.com"),
            Covers::Unrelated
        );
        assert_eq!(
            covered_by("ptr-2.1.168.192.in-addr.arpa"),
            Covers::OtherType
        );
    }

    const KEY: &str = "passphrasewhichneedstobe32bytes!";

    fn encrypted(registry: TxtRegistry, write: bool) -> TxtRegistry {
        registry.with_encryption(Some(TxtCipher::from_key_text(KEY).unwrap()), write)
    }

    #[test]
    fn encrypted_values_are_read_kept_and_undecryptable_ones_are_not_ours() {
        let registry = encrypted(TxtRegistry::new("gw"), true);
        let plain = ownership_value("gw", Some("httproute/shop/web"));
        // A fixture in external-dns's format: base64(nonce || AES-GCM(gzip(value))), quoted.
        let sealed = TxtCipher::from_key_text(KEY)
            .unwrap()
            .encrypt(&plain)
            .unwrap();
        let quoted = format!("\"{sealed}\"");
        let other_key = TxtCipher::from_key_text("ZPitL0NGVQBZbTD6DwXJzD8RiStSazzYXQsdUowLURY=")
            .unwrap()
            .encrypt(&ownership_value("gw", None))
            .unwrap();
        let records = vec![
            Endpoint::new("a-web.example.com", RecordType::TXT, [quoted.clone()]),
            Endpoint::new("a-other.example.com", RecordType::TXT, [other_key]),
        ];
        let index = OwnershipIndex::from_records(&records, &registry);
        let owner = index.owner_of("web.example.com", RecordType::A).unwrap();
        assert_eq!(owner.owner, "gw");
        assert_eq!(owner.resource, Some("httproute/shop/web"));
        assert!(index.is_registry_record(&records[0]));
        assert!(index.owner_of("other.example.com", RecordType::A).is_none());
        assert!(!index.is_registry_record(&records[1]));
        assert_eq!(
            index.undecryptable().iter().collect::<Vec<_>>(),
            ["a-other.example.com"]
        );
        // The same claim keeps the value it has (no new nonce every pass) ...
        let present = index.registry_values("a-web.example.com");
        assert_eq!(
            registry
                .value_for(Some("httproute/shop/web"), present)
                .unwrap(),
            quoted
        );
        // ... a changed one is sealed afresh, and opens to the new text.
        let moved = registry
            .value_for(Some("httproute/shop/new"), present)
            .unwrap();
        assert_ne!(moved, quoted);
        assert!(matches!(
            registry.parse(&moved),
            Value::Ownership(Labels { decrypted: Some(_), ref resource, .. })
                if resource.as_deref() == Some("httproute/shop/new")
        ));
        // With the key but encryption off, values are read and written in the clear.
        let reading = encrypted(TxtRegistry::new("gw"), false);
        assert_eq!(
            reading
                .value_for(Some("httproute/shop/web"), present)
                .unwrap(),
            plain
        );
        // Without a key, the encrypted value is an ordinary TXT record.
        assert_eq!(TxtRegistry::new("gw").parse(&quoted), Value::Other);
    }
}
