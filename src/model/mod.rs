//! Trimmed projections of the Kubernetes objects gateway-dns reads (this file), the one decoder
//! that reads them ([`decode`]) and the DNS name rules below both ([`dns_name`]).
//!
//! A projection keeps only the fields the engine reads: no managedFields, no full specs, no
//! `last-applied-configuration`. Strings are boxed slices, a parentRef's group and kind a tag,
//! labels and annotations one string each: every stored route holds these types.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

mod decode;
pub mod dns_name;
mod thin;

pub use decode::{
    DecodeError, Projection, RawObject, decode_json, decode_value, format_rfc3339, scan, type_of,
};
pub use thin::{Name, ObjectKey};

pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// Every kind of object gateway-dns reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Namespace,
    Gateway,
    ListenerSet,
    HTTPRoute,
    GRPCRoute,
    TLSRoute,
    TCPRoute,
    UDPRoute,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 8] = [
        ObjectKind::Namespace,
        ObjectKind::Gateway,
        ObjectKind::ListenerSet,
        ObjectKind::HTTPRoute,
        ObjectKind::GRPCRoute,
        ObjectKind::TLSRoute,
        ObjectKind::TCPRoute,
        ObjectKind::UDPRoute,
    ];
    pub const ROUTES: [ObjectKind; 5] = [
        ObjectKind::HTTPRoute,
        ObjectKind::GRPCRoute,
        ObjectKind::TLSRoute,
        ObjectKind::TCPRoute,
        ObjectKind::UDPRoute,
    ];

    /// API group ("" for the core group).
    pub fn group(self) -> &'static str {
        match self {
            ObjectKind::Namespace => "",
            _ => GATEWAY_GROUP,
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            ObjectKind::Namespace => "Namespace",
            ObjectKind::Gateway => "Gateway",
            ObjectKind::ListenerSet => "ListenerSet",
            ObjectKind::HTTPRoute => "HTTPRoute",
            ObjectKind::GRPCRoute => "GRPCRoute",
            ObjectKind::TLSRoute => "TLSRoute",
            ObjectKind::TCPRoute => "TCPRoute",
            ObjectKind::UDPRoute => "UDPRoute",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            ObjectKind::Namespace => "namespaces",
            ObjectKind::Gateway => "gateways",
            ObjectKind::ListenerSet => "listenersets",
            ObjectKind::HTTPRoute => "httproutes",
            ObjectKind::GRPCRoute => "grpcroutes",
            ObjectKind::TLSRoute => "tlsroutes",
            ObjectKind::TCPRoute => "tcproutes",
            ObjectKind::UDPRoute => "udproutes",
        }
    }

    /// API versions gateway-dns reads, newest first. All versions of a kind share the fields we read.
    pub fn versions(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Namespace => &["v1"],
            ObjectKind::Gateway | ObjectKind::GRPCRoute => &["v1", "v1beta1"],
            ObjectKind::ListenerSet => &["v1"],
            ObjectKind::HTTPRoute => &["v1", "v1beta1"],
            ObjectKind::TLSRoute | ObjectKind::TCPRoute | ObjectKind::UDPRoute => {
                &["v1", "v1alpha3", "v1alpha2"]
            }
        }
    }

    pub fn is_route(self) -> bool {
        matches!(
            self,
            ObjectKind::HTTPRoute
                | ObjectKind::GRPCRoute
                | ObjectKind::TLSRoute
                | ObjectKind::TCPRoute
                | ObjectKind::UDPRoute
        )
    }

    pub fn is_namespaced(self) -> bool {
        self != ObjectKind::Namespace
    }

    /// Route kinds that carry `spec.hostnames`.
    pub fn has_hostnames(self) -> bool {
        matches!(
            self,
            ObjectKind::HTTPRoute | ObjectKind::GRPCRoute | ObjectKind::TLSRoute
        )
    }

    /// The kind for an `apiVersion` + `kind` pair, or None when gateway-dns does not read it.
    pub fn from_type(api_version: &str, kind: &str) -> Option<ObjectKind> {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let object_kind = ObjectKind::ALL.into_iter().find(|k| k.kind() == kind)?;
        (object_kind.group() == group && object_kind.versions().contains(&version))
            .then_some(object_kind)
    }

    pub fn from_kind_name(kind: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.kind() == kind)
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// Labels or annotations: sorted by key, in one allocation. Each entry is its key and its value,
/// each written as its length (see [`write_length`]) and its text. A map of n entries takes one
/// string of its text and about 2n bytes more, where boxed pairs took 32n bytes and 2n
/// allocations: every stored route, Gateway and Namespace has some.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StringMap(Box<str>);

/// A length as ASCII, so the encoded map stays a `str`: six bits a byte, low bits first, 0x40
/// set on every byte but the last (a length under 64 takes one byte).
fn write_length(out: &mut String, mut length: usize) {
    while length >= 0x40 {
        out.push(char::from(b'\x40' | (length & 0x3f) as u8));
        length >>= 6;
    }
    out.push(char::from(length as u8));
}

fn length_size(mut length: usize) -> usize {
    let mut size = 1;
    while length >= 0x40 {
        length >>= 6;
        size += 1;
    }
    size
}

/// The entries of an encoded map, in key order.
#[derive(Clone)]
pub struct StringMapIter<'a> {
    rest: &'a str,
}

impl<'a> StringMapIter<'a> {
    fn text(&mut self) -> Option<&'a str> {
        let mut length = 0usize;
        let mut shift = 0u32;
        let bytes = self.rest.as_bytes();
        let mut at = 0;
        loop {
            let byte = *bytes.get(at)?;
            at += 1;
            length |= usize::from(byte & 0x3f).checked_shl(shift)?;
            if byte & 0x40 == 0 {
                break;
            }
            shift += 6;
        }
        // Written by `write_length` before whole strs: both ends are char boundaries.
        let text = self.rest.get(at..at.checked_add(length)?)?;
        self.rest = self.rest.get(at + length..)?;
        Some(text)
    }
}

impl<'a> Iterator for StringMapIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let key = self.text()?;
        let value = self.text()?;
        Some((key, value))
    }
}

impl StringMap {
    pub fn from_pairs<I: IntoIterator<Item = (String, String)>>(pairs: I) -> StringMap {
        StringMap::from_read_pairs(pairs.into_iter().collect())
    }

    /// The map of pairs in the order they were read, owned or borrowed (as the decoders read
    /// them); a repeated key keeps its last value.
    pub fn from_read_pairs<T: AsRef<str>>(mut entries: Vec<(T, T)>) -> StringMap {
        // Stable, so a repeated key keeps its last value, as a JSON object reader would: of a
        // run of equal keys, the kept (earlier) entry takes each later one's value.
        entries.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        entries.dedup_by(|later, kept| {
            let repeated = later.0.as_ref() == kept.0.as_ref();
            if repeated {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            repeated
        });
        StringMap::encoded(entries.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))
    }

    /// The map of `entries`, given sorted by key and without repeated keys.
    fn encoded<'a>(entries: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> StringMap {
        let size = entries
            .clone()
            .map(|(k, v)| length_size(k.len()) + k.len() + length_size(v.len()) + v.len())
            .sum();
        let mut out = String::with_capacity(size);
        for (key, value) in entries {
            write_length(&mut out, key.len());
            out.push_str(key);
            write_length(&mut out, value.len());
            out.push_str(value);
        }
        StringMap(out.into_boxed_str())
    }

    /// The entries whose key passes `keep`.
    pub fn filtered(&self, keep: impl Fn(&str) -> bool) -> StringMap {
        let keep = &keep;
        StringMap::encoded(self.iter().filter(move |(key, _)| keep(key)))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(|k| k.cmp(key))
    }

    /// The value at key `prefix` + `name`, found without building the key (a hot-path lookup).
    pub fn get_joined(&self, prefix: &str, name: &str) -> Option<&str> {
        self.find(|k| k.bytes().cmp(prefix.bytes().chain(name.bytes())))
    }

    /// The value of the entry whose key `order` finds Equal (keys are sorted: the scan stops at
    /// the first greater one). Maps are small: a scan reads fewer bytes than a search would.
    fn find(&self, order: impl Fn(&str) -> std::cmp::Ordering) -> Option<&str> {
        for (key, value) in self.iter() {
            match order(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Some(value),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }

    pub fn iter(&self) -> StringMapIter<'_> {
        StringMapIter { rest: &self.0 }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn heap_bytes(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The metadata fields the engine reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Kind, namespace and name; shared with every map of the index that names the object.
    pub key: ObjectKey,
    pub labels: StringMap,
    pub annotations: StringMap,
    /// Seconds since the Unix epoch; none when the object has none (files written by hand).
    pub created: OptionalI64,
    pub generation: OptionalI64,
}

/// An `Option<i64>` in one word rather than two: every stored object and parentRef holds some.
/// `i64::MIN` stands for none, so [`OptionalI64::new`] reads a present `i64::MIN` (no timestamp
/// or generation is that) as `i64::MIN + 1`: the order of values is kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptionalI64(i64);

impl OptionalI64 {
    pub const NONE: OptionalI64 = OptionalI64(i64::MIN);

    pub fn new(value: Option<i64>) -> OptionalI64 {
        match value {
            Some(value) => OptionalI64(value.max(i64::MIN + 1)),
            None => OptionalI64::NONE,
        }
    }

    pub fn get(self) -> Option<i64> {
        (self.0 != i64::MIN).then_some(self.0)
    }
}

impl From<Option<i64>> for OptionalI64 {
    fn from(value: Option<i64>) -> OptionalI64 {
        OptionalI64::new(value)
    }
}

impl fmt::Debug for OptionalI64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Meta {
    pub fn namespace(&self) -> &str {
        self.key.namespace()
    }

    pub fn name(&self) -> &str {
        self.key.name()
    }

    pub fn heap_bytes(&self) -> usize {
        self.key.heap_bytes() + self.labels.heap_bytes() + self.annotations.heap_bytes()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub meta: Meta,
}

/// A label selector (matchLabels + matchExpressions), as in Kubernetes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: SelectorOp,
    pub values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Equals,
    NotEquals,
}

/// `from` of allowedRoutes.namespaces or allowedListeners.namespaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespacesFrom {
    Same,
    All,
    Selector(LabelSelector),
    None,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteGroupKind {
    pub group: Box<str>,
    pub kind: Box<str>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedRoutes {
    pub namespaces: NamespacesFrom,
    /// None: the kinds the listener's protocol supports.
    pub kinds: Option<Box<[RouteGroupKind]>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: Box<str>,
    pub hostname: Option<Box<str>>,
    pub port: Option<i32>,
    pub protocol: Box<str>,
    pub allowed_routes: AllowedRoutes,
    /// The Accepted condition of the listener's own `status.listeners` entry; None when there is
    /// no entry or no such condition (ListenerSet listeners report this).
    pub accepted: Option<Acceptance>,
    /// False when the listener's `status.listeners` entry says `Programmed=False` or
    /// `Conflicted=True` (ARCHITECTURE.md, "Readiness").
    pub programmed: bool,
}

/// An address a Gateway publishes: an IP literal or a DNS hostname.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Address {
    Ip(IpAddr),
    Hostname(Box<str>),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(ip) => write!(f, "{ip}"),
            Address::Hostname(h) => f.write_str(h),
        }
    }
}

impl Address {
    /// Parses an address value: IP literal first, else a hostname in canonical form.
    pub fn parse(value: &str) -> Option<Address> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        if let Ok(ip) = value.parse::<IpAddr>() {
            return Some(Address::Ip(ip));
        }
        let host = dns_name::canonical(value);
        dns_name::is_dns1123_domain(&host).then(|| Address::Hostname(host.into()))
    }
}

/// TTL used when neither the desired record nor the provider says otherwise.
pub const DEFAULT_TTL: u32 = 300;

/// The DNS record types gateway-dns publishes (A, AAAA, CNAME) or reads back (TXT, which its
/// ownership records use). One type for the engine, the sync plan and the providers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[allow(clippy::upper_case_acronyms)]
pub enum RecordType {
    A,
    AAAA,
    CNAME,
    TXT,
}

impl RecordType {
    pub const ALL: [RecordType; 4] = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::TXT,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecordType::A => "A",
            RecordType::AAAA => "AAAA",
            RecordType::CNAME => "CNAME",
            RecordType::TXT => "TXT",
        }
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record type gateway-dns does not handle.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown record type {0:?} (expected A, AAAA, CNAME or TXT)")]
pub struct UnknownRecordType(pub String);

impl std::str::FromStr for RecordType {
    type Err = UnknownRecordType;

    /// Case-insensitive, as DNS APIs spell types either way.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        RecordType::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| UnknownRecordType(text.to_string()))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gateway {
    pub meta: Meta,
    pub listeners: Box<[Listener]>,
    /// From `status.addresses`.
    pub addresses: Box<[Address]>,
    /// `spec.allowedListeners.namespaces.from` (default None: no ListenerSet may attach).
    pub allowed_listeners: NamespacesFrom,
    /// False when `status.conditions` says `Programmed=False` for the current generation
    /// (ARCHITECTURE.md, "Readiness").
    pub programmed: bool,
}

/// A reference from a ListenerSet to its Gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayRef {
    pub namespace: Box<str>,
    pub name: Box<str>,
}

/// Accepted condition, as the controller reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Acceptance {
    Accepted,
    Rejected,
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSet {
    pub meta: Meta,
    pub parent: GatewayRef,
    pub listeners: Box<[Listener]>,
    /// From `status.conditions` type Accepted; None when there is no such condition.
    pub accepted: Option<Acceptance>,
    /// False when `status.conditions` says `Programmed=False` for the current generation
    /// (ARCHITECTURE.md, "Readiness").
    pub programmed: bool,
}

/// A parentRef's group and kind: the two gateway-dns attaches through, kept as a tag, or any
/// other as written (one word of tag and one pointer, where two shared strings took four).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParentType {
    Gateway,
    ListenerSet,
    /// Never the group and kind of the two above, so equal types compare equal.
    Other(Box<OtherParentType>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OtherParentType {
    pub group: Box<str>,
    pub kind: Box<str>,
}

impl ParentType {
    pub fn new(group: &str, kind: &str) -> ParentType {
        match (group, kind) {
            (GATEWAY_GROUP, "Gateway") => ParentType::Gateway,
            (GATEWAY_GROUP, "ListenerSet") => ParentType::ListenerSet,
            _ => ParentType::Other(Box::new(OtherParentType {
                group: group.into(),
                kind: kind.into(),
            })),
        }
    }

    pub fn group(&self) -> &str {
        match self {
            ParentType::Gateway | ParentType::ListenerSet => GATEWAY_GROUP,
            ParentType::Other(other) => &other.group,
        }
    }

    pub fn kind(&self) -> &str {
        match self {
            ParentType::Gateway => "Gateway",
            ParentType::ListenerSet => "ListenerSet",
            ParentType::Other(other) => &other.kind,
        }
    }
}

/// A route's parentRef with defaults applied, and what the route's status says of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParentRef {
    pub parent_type: ParentType,
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub section_name: Option<Box<str>>,
    pub port: Option<i32>,
    /// The `status.parents` entry for this reference, matched on the parent alone (group,
    /// kind, namespace and name, as external-dns matches it): the one with the same
    /// sectionName when there is one, else the first for that parent.
    pub status: Option<ParentStatus>,
}

/// The Accepted condition a controller reported for one parentRef, and the sectionName and
/// port its status entry names (which may differ from the spec's).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParentStatus {
    pub accepted: Acceptance,
    /// The entry's observedGeneration is the route's generation, or it names none: all that
    /// is read of it, so a flag rather than the number.
    pub current: bool,
    /// None when the entry names the spec parentRef's sectionName and port, as controllers
    /// mostly write it: every stored parentRef holds a status, and a box only where they
    /// differ keeps it one word.
    pub listener: Option<Box<StatusListener>>,
}

/// The sectionName and port of a status entry that differ from its spec parentRef's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StatusListener {
    pub section_name: Option<Box<str>>,
    pub port: Option<i32>,
}

impl ParentStatus {
    /// The status of `spec`'s parent, from an entry naming `section_name` and `port`.
    pub fn new(
        accepted: Acceptance,
        current: bool,
        section_name: Option<Box<str>>,
        port: Option<i32>,
        spec: &ParentRef,
    ) -> ParentStatus {
        let listener = (section_name != spec.section_name || port != spec.port)
            .then(|| Box::new(StatusListener { section_name, port }));
        ParentStatus {
            accepted,
            current,
            listener,
        }
    }
}

impl ParentRef {
    pub fn group(&self) -> &str {
        self.parent_type.group()
    }

    pub fn kind(&self) -> &str {
        self.parent_type.kind()
    }

    /// The object this reference points at, when it is one gateway-dns reads.
    pub fn target_kind(&self) -> Option<ObjectKind> {
        match self.parent_type {
            ParentType::Gateway => Some(ObjectKind::Gateway),
            ParentType::ListenerSet => Some(ObjectKind::ListenerSet),
            ParentType::Other(_) => None,
        }
    }

    /// The sectionName and port its status entry names, when it has one.
    pub fn status_listener(&self) -> Option<(Option<&str>, Option<i32>)> {
        let status = self.status.as_ref()?;
        Some(match &status.listener {
            Some(listener) => (listener.section_name.as_deref(), listener.port),
            None => (self.section_name.as_deref(), self.port),
        })
    }

    /// Same parent object (ignores sectionName and port).
    pub fn same_parent(&self, other: &ParentRef) -> bool {
        self.parent_type == other.parent_type
            && self.namespace == other.namespace
            && self.name == other.name
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub meta: Meta,
    /// `spec.hostnames` as written (validated by the engine, which reports invalid ones).
    /// Shared with the claims on them: most are written in canonical form already.
    pub hostnames: Box<[Name]>,
    pub parent_refs: Box<[ParentRef]>,
}

impl Route {
    pub fn kind(&self) -> ObjectKind {
        self.meta.key.kind()
    }

    pub fn key(&self) -> ObjectKey {
        self.meta.key.clone()
    }

    /// Approximate heap bytes owned by this projection (for the memory benchmark).
    pub fn heap_bytes(&self) -> usize {
        self.meta.heap_bytes()
            + self.hostnames.iter().map(|h| h.len() + 24).sum::<usize>()
            + self
                .parent_refs
                .iter()
                .map(|p| {
                    std::mem::size_of::<ParentRef>()
                        + match &p.parent_type {
                            ParentType::Other(other) => {
                                std::mem::size_of::<OtherParentType>()
                                    + other.group.len()
                                    + other.kind.len()
                            }
                            _ => 0,
                        }
                        + p.namespace.len()
                        + p.name.len()
                        + p.section_name.as_ref().map_or(0, |s| s.len())
                        + p.status
                            .as_ref()
                            .and_then(|s| s.listener.as_ref())
                            .map_or(0, |l| {
                                std::mem::size_of::<StatusListener>()
                                    + l.section_name.as_ref().map_or(0, |s| s.len())
                            })
                })
                .sum::<usize>()
    }
}

/// Any object gateway-dns reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Object {
    Namespace(Arc<Namespace>),
    Gateway(Arc<Gateway>),
    ListenerSet(Arc<ListenerSet>),
    Route(Arc<Route>),
}

impl Object {
    pub fn kind(&self) -> ObjectKind {
        self.meta().key.kind()
    }

    pub fn meta(&self) -> &Meta {
        match self {
            Object::Namespace(o) => &o.meta,
            Object::Gateway(o) => &o.meta,
            Object::ListenerSet(o) => &o.meta,
            Object::Route(o) => &o.meta,
        }
    }

    pub fn key(&self) -> ObjectKey {
        self.meta().key.clone()
    }

    /// This object with another creationTimestamp (the API server sets its own: `check` lays
    /// files over a cluster with the times the cluster would give them).
    pub fn with_created(&self, created: OptionalI64) -> Object {
        fn set<T: Clone>(
            object: &Arc<T>,
            meta: impl FnOnce(&mut T) -> &mut Meta,
            created: OptionalI64,
        ) -> Arc<T> {
            let mut object = T::clone(object);
            meta(&mut object).created = created;
            Arc::new(object)
        }
        match self {
            Object::Namespace(o) => Object::Namespace(set(o, |o| &mut o.meta, created)),
            Object::Gateway(o) => Object::Gateway(set(o, |o| &mut o.meta, created)),
            Object::ListenerSet(o) => Object::ListenerSet(set(o, |o| &mut o.meta, created)),
            Object::Route(o) => Object::Route(set(o, |o| &mut o.meta, created)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RecordType, StringMap};

    #[test]
    fn record_type_parses_case_insensitively() {
        assert_eq!("aaaa".parse::<RecordType>().unwrap(), RecordType::AAAA);
        assert!("MX".parse::<RecordType>().is_err());
    }

    #[test]
    fn string_map_keeps_every_entry_sorted_with_long_and_odd_text() {
        let long = "v".repeat(70_000);
        let pairs = [
            ("b", "2"),
            ("a", ""),
            ("", "empty key"),
            ("ü/ключ", "värde\u{0}\n"),
            ("long", long.as_str()),
            ("b", "3"),
        ];
        let map = StringMap::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let entries: Vec<(&str, &str)> = map.iter().collect();
        assert_eq!(
            entries,
            vec![
                ("", "empty key"),
                ("a", ""),
                ("b", "3"),
                ("long", long.as_str()),
                ("ü/ключ", "värde\u{0}\n"),
            ]
        );
        for (key, value) in &entries {
            assert_eq!(map.get(key), Some(*value), "{key}");
        }
        assert_eq!(map.get("c"), None);
        assert_eq!(map.get("aa"), None);
        assert_eq!(map.filtered(|k| k.len() == 1).iter().count(), 2);
        assert!(StringMap::default().iter().next().is_none());
    }

    #[test]
    fn joined_lookup_matches_plain_lookup() {
        let map = StringMap::from_pairs(
            ["a/x", "a/xy", "b", "a/", "external-dns.kubernetes.io/ttl"]
                .iter()
                .map(|k| (k.to_string(), format!("v-{k}"))),
        );
        for (prefix, name) in [
            ("a/", "x"),
            ("a/", "xy"),
            ("a/", ""),
            ("", "b"),
            ("external-dns.kubernetes.io/", "ttl"),
            ("a/", "z"),
            ("c", ""),
        ] {
            let joined = format!("{prefix}{name}");
            assert_eq!(map.get_joined(prefix, name), map.get(&joined), "{joined}");
        }
    }
}
