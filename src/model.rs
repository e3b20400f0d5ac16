//! Trimmed projections of the Kubernetes objects gateway-dns reads, and the one decoder that every
//! source (files, cluster) and the admission webhook use, so they never disagree.
//!
//! A projection keeps only the fields the engine reads: no managedFields, no full specs, no
//! `last-applied-configuration`. Strings are boxed slices to keep a typical route well under 1 KiB.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::Value;

pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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

/// Identity of an object: kind, namespace ("" for cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    pub namespace: Box<str>,
    pub name: Box<str>,
}

impl ObjectKey {
    pub fn new(kind: ObjectKind, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// Labels or annotations: sorted by key, compact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct StringMap(Box<[(Box<str>, Box<str>)]>);

impl StringMap {
    pub fn from_pairs<I: IntoIterator<Item = (String, String)>>(pairs: I) -> StringMap {
        let mut entries: Vec<(Box<str>, Box<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
            .collect();
        // Stable, so a repeated key keeps its last value, as a JSON object reader would: of a
        // run of equal keys, the kept (earlier) entry takes each later one's value.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, kept| {
            let repeated = later.0 == kept.0;
            if repeated {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            repeated
        });
        StringMap(entries.into_boxed_slice())
    }

    /// The entries whose key passes `keep`.
    pub fn filtered(&self, keep: impl Fn(&str) -> bool) -> StringMap {
        StringMap(
            self.0
                .iter()
                .filter(|(key, _)| keep(key))
                .cloned()
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    /// The value at key `prefix` + `name`, found without building the key (a hot-path lookup).
    pub fn get_joined(&self, prefix: &str, name: &str) -> Option<&str> {
        let wanted = || prefix.bytes().chain(name.bytes());
        self.0
            .binary_search_by(|(k, _)| k.bytes().cmp(wanted()))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn heap_bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<(Box<str>, Box<str>)>()
            + self.0.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
    }
}

/// The metadata fields the engine reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub labels: StringMap,
    pub annotations: StringMap,
    /// Seconds since the Unix epoch; None when the object has none (files written by hand).
    pub created: Option<i64>,
    pub generation: Option<i64>,
}

impl Meta {
    pub fn heap_bytes(&self) -> usize {
        self.namespace.len()
            + self.name.len()
            + self.labels.heap_bytes()
            + self.annotations.heap_bytes()
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
    /// The listener's own status said Accepted=False (ListenerSet listeners report this).
    pub rejected: bool,
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
    /// Parses an address value: IP literal first, else a hostname (lower-cased, trailing dot dropped).
    pub fn parse(value: &str) -> Option<Address> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        if let Ok(ip) = value.parse::<IpAddr>() {
            return Some(Address::Ip(ip));
        }
        let host = value.trim_end_matches('.').to_ascii_lowercase();
        crate::engine::hostname::is_dns1123_domain(&host).then(|| Address::Hostname(host.into()))
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
}

/// A route's parentRef with defaults applied, and what the route's status says of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParentRef {
    /// Shared, not copied, for the common group and kinds (most routes name them).
    pub group: Arc<str>,
    pub kind: Arc<str>,
    pub namespace: Box<str>,
    pub name: Box<str>,
    pub section_name: Option<Box<str>>,
    pub port: Option<i32>,
    /// The `status.parents` entry for this exact reference (same parent and sectionName), if any.
    pub status: Option<ParentStatus>,
}

/// The Accepted condition a controller reported for one parentRef.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParentStatus {
    pub accepted: Acceptance,
    pub observed_generation: Option<i64>,
}

impl ParentRef {
    /// The object this reference points at, when it is one gateway-dns reads.
    pub fn target_kind(&self) -> Option<ObjectKind> {
        if &*self.group != GATEWAY_GROUP {
            return None;
        }
        match &*self.kind {
            "Gateway" => Some(ObjectKind::Gateway),
            "ListenerSet" => Some(ObjectKind::ListenerSet),
            _ => None,
        }
    }

    /// Same parent object (ignores sectionName and port).
    pub fn same_parent(&self, other: &ParentRef) -> bool {
        self.group == other.group
            && self.kind == other.kind
            && self.namespace == other.namespace
            && self.name == other.name
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub kind: ObjectKind,
    pub meta: Meta,
    /// `spec.hostnames` as written (validated by the engine, which reports invalid ones).
    pub hostnames: Box<[Box<str>]>,
    pub parent_refs: Box<[ParentRef]>,
}

impl Route {
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.kind, &self.meta.namespace, &self.meta.name)
    }

    /// Approximate heap bytes owned by this projection (for the memory benchmark).
    pub fn heap_bytes(&self) -> usize {
        self.meta.heap_bytes()
            + self.hostnames.iter().map(|h| h.len() + 16).sum::<usize>()
            + self
                .parent_refs
                .iter()
                .map(|p| {
                    std::mem::size_of::<ParentRef>()
                        + p.namespace.len()
                        + p.name.len()
                        + p.section_name.as_ref().map_or(0, |s| s.len())
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
        match self {
            Object::Namespace(_) => ObjectKind::Namespace,
            Object::Gateway(_) => ObjectKind::Gateway,
            Object::ListenerSet(_) => ObjectKind::ListenerSet,
            Object::Route(r) => r.kind,
        }
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
        let meta = self.meta();
        ObjectKey::new(self.kind(), &meta.namespace, &meta.name)
    }
}

/// Why an object could not be read. `path` is the field path, e.g. `spec.hostnames[1]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{path}: {message}")]
    Field { path: String, message: String },
    #[error("missing apiVersion or kind")]
    MissingType,
}

impl DecodeError {
    fn field(path: &str, message: impl Into<String>) -> DecodeError {
        DecodeError::Field {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

/// The `apiVersion` and `kind` of a JSON object, when both are strings.
pub fn type_of(value: &Value) -> Option<(&str, &str)> {
    Some((
        value.get("apiVersion")?.as_str()?,
        value.get("kind")?.as_str()?,
    ))
}

/// The one decoder. Ok(None) for kinds gateway-dns does not read.
pub fn decode_value(value: &Value) -> Result<Option<Object>, DecodeError> {
    let (api_version, kind) = type_of(value).ok_or(DecodeError::MissingType)?;
    match ObjectKind::from_type(api_version, kind) {
        None => Ok(None),
        Some(kind) => decode_kind(kind, value).map(Some),
    }
}

/// Decodes a value known to be of `kind` (the caller checked apiVersion/kind).
pub fn decode_kind(kind: ObjectKind, value: &Value) -> Result<Object, DecodeError> {
    read_raw(value)?.into_object(kind)
}

/// The same decoder over JSON text (the object of an AdmissionReview), reading straight into
/// the projection without building a JSON tree first. Ok(None) for kinds gateway-dns does not
/// read, whatever their shape.
pub fn decode_json(text: &str) -> Result<Option<Object>, DecodeError> {
    // The happy path reads without tracking field paths; a failure reads again with tracking,
    // for the path in the error message.
    let read_untracked = || -> Result<raw::Object, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let raw = serde::Deserialize::deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(raw)
    };
    let raw = read_untracked().map_err(|first| {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        match read_raw(&mut deserializer) {
            Err(tracked) => tracked,
            // Only trailing characters fail an untracked read that a tracked one passes.
            Ok(_) => DecodeError::field("", first.to_string()),
        }
    });
    let raw = match raw {
        Ok(raw) => raw,
        // Only an object of a kind we read can be unreadable to us.
        Err(error) => {
            return match type_probe(text)? {
                Some(_) => Err(error),
                None => Ok(None),
            };
        }
    };
    raw.project()
}

/// An object read in the same pass as the JSON around it (the webhook reads an AdmissionReview's
/// objects so): what [`decode_json`] returns for the object's text. Deserializing fails only
/// when the JSON does not have the shape gateway-dns reads; the caller then reads the object
/// again as text with [`decode_json`], which explains the failure or finds a foreign kind.
#[derive(Clone, Debug)]
pub struct Projection(pub Result<Option<Object>, DecodeError>);

impl<'de> serde::Deserialize<'de> for Projection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <raw::Object as serde::Deserialize>::deserialize(deserializer)?;
        Ok(Projection(raw.project()))
    }
}

/// The kind of a JSON object from its `apiVersion` and `kind` alone (None: not one we read).
fn type_probe(text: &str) -> Result<Option<ObjectKind>, DecodeError> {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "apiVersion")]
        api_version: Option<Value>,
        kind: Option<Value>,
    }
    let probe: Probe =
        serde_json::from_str(text).map_err(|err| DecodeError::field("", err.to_string()))?;
    match (probe.api_version, probe.kind) {
        (Some(Value::String(api_version)), Some(Value::String(kind))) => {
            Ok(ObjectKind::from_type(&api_version, &kind))
        }
        _ => Err(DecodeError::MissingType),
    }
}

/// An object read into the shapes gateway-dns knows, before its kind is applied: what a watch
/// holds between receiving an object and projecting it (a fraction of a JSON tree's size).
#[derive(Clone, Debug)]
pub struct RawObject(raw::Object);

impl RawObject {
    pub fn from_value(value: &Value) -> Result<RawObject, DecodeError> {
        read_raw(value).map(RawObject)
    }

    /// The projection, reading the object as `kind` (the watch knows what it asked for).
    pub fn into_object(self, kind: ObjectKind) -> Result<Object, DecodeError> {
        self.0.into_object(kind)
    }
}

fn read_raw<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<raw::Object, DecodeError> {
    serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let path = err.path().to_string();
        DecodeError::field(&path, err.into_inner().to_string())
    })
}

impl raw::Object {
    /// The projection for the object's own `apiVersion` and `kind` (None: a kind we do not read).
    fn project(self) -> Result<Option<Object>, DecodeError> {
        let (Some(api_version), Some(kind)) = (self.api_version.as_deref(), self.kind.as_deref())
        else {
            return Err(DecodeError::MissingType);
        };
        match ObjectKind::from_type(api_version, kind) {
            None => Ok(None),
            Some(kind) => self.into_object(kind).map(Some),
        }
    }

    fn into_object(self, kind: ObjectKind) -> Result<Object, DecodeError> {
        let meta = self.metadata.into_meta(kind.is_namespaced())?;
        let (spec, status) = (self.spec, self.status);
        Ok(match kind {
            ObjectKind::Namespace => Object::Namespace(Arc::new(Namespace { meta })),
            ObjectKind::Gateway => Object::Gateway(Arc::new(raw::gateway(meta, spec, status)?)),
            ObjectKind::ListenerSet => {
                Object::ListenerSet(Arc::new(raw::listener_set(meta, spec, status)?))
            }
            route_kind => Object::Route(Arc::new(raw::route(route_kind, meta, spec, status)?)),
        })
    }
}

/// Parses an RFC 3339 timestamp (`2024-05-01T10:00:00Z`, optional fraction and offset) to Unix seconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> { text.get(from..to)?.parse::<i64>().ok() };
    if bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b't' | b' ') {
        return None;
    }
    if bytes[13] != b':' || bytes[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Serde shapes of the raw objects: only the fields we read, tolerant of everything else.
mod raw {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize, Clone, Debug)]
    pub struct Object {
        #[serde(rename = "apiVersion")]
        pub api_version: Option<String>,
        pub kind: Option<String>,
        #[serde(default)]
        pub metadata: Metadata,
        #[serde(default)]
        pub spec: Spec,
        #[serde(default)]
        pub status: Status,
    }

    #[derive(Deserialize, Default, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct Metadata {
        pub name: Option<String>,
        pub namespace: Option<String>,
        #[serde(default, deserialize_with = "nullable")]
        pub labels: BTreeMap<String, String>,
        #[serde(default, deserialize_with = "nullable")]
        pub annotations: BTreeMap<String, String>,
        pub creation_timestamp: Option<String>,
        pub generation: Option<i64>,
    }

    impl Metadata {
        pub fn into_meta(self, namespaced: bool) -> Result<Meta, DecodeError> {
            let name = match self.name {
                Some(name) if !name.is_empty() => name,
                _ => return Err(DecodeError::field("metadata.name", "is required")),
            };
            let namespace = if namespaced {
                // Objects written without a namespace live in "default", as kubectl would put them.
                self.namespace
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| "default".to_owned())
            } else {
                String::new()
            };
            let created = match self.creation_timestamp.as_deref() {
                None | Some("") => None,
                Some(text) => Some(parse_rfc3339(text).ok_or_else(|| {
                    DecodeError::field(
                        "metadata.creationTimestamp",
                        format!("{text:?} is not an RFC 3339 timestamp"),
                    )
                })?),
            };
            let annotations = self
                .annotations
                .into_iter()
                .filter(|(k, _)| k != LAST_APPLIED);
            Ok(Meta {
                namespace: namespace.into(),
                name: name.into(),
                labels: StringMap::from_pairs(self.labels),
                annotations: StringMap::from_pairs(annotations),
                created,
                generation: self.generation,
            })
        }
    }

    /// Accepts `null` as the type's default (YAML `labels:` with nothing under it).
    fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: serde::Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
    }

    #[derive(Deserialize, Default, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct Spec {
        #[serde(default, deserialize_with = "nullable")]
        pub listeners: Vec<RawListener>,
        pub allowed_listeners: Option<RawAllowedListeners>,
        pub parent_ref: Option<RawParentRef>,
        #[serde(default, deserialize_with = "nullable")]
        pub parent_refs: Vec<RawParentRef>,
        #[serde(default, deserialize_with = "nullable")]
        pub hostnames: Vec<String>,
    }

    #[derive(Deserialize, Default, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct Status {
        #[serde(default, deserialize_with = "nullable")]
        pub addresses: Vec<RawAddress>,
        #[serde(default, deserialize_with = "nullable")]
        pub parents: Vec<RawParentStatus>,
        #[serde(default, deserialize_with = "nullable")]
        pub conditions: Vec<RawCondition>,
        #[serde(default, deserialize_with = "nullable")]
        pub listeners: Vec<RawListenerStatus>,
    }

    #[derive(Deserialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct RawListener {
        #[serde(default)]
        pub name: String,
        pub hostname: Option<String>,
        pub port: Option<i32>,
        #[serde(default)]
        pub protocol: String,
        pub allowed_routes: Option<RawAllowedRoutes>,
    }

    #[derive(Deserialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct RawAllowedRoutes {
        pub namespaces: Option<RawNamespaces>,
        pub kinds: Option<Vec<RawRouteGroupKind>>,
    }

    #[derive(Deserialize, Clone, Debug)]
    pub struct RawAllowedListeners {
        pub namespaces: Option<RawNamespaces>,
    }

    #[derive(Deserialize, Clone, Debug)]
    pub struct RawNamespaces {
        pub from: Option<String>,
        pub selector: Option<RawSelector>,
    }

    #[derive(Deserialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct RawSelector {
        #[serde(default, deserialize_with = "nullable")]
        pub match_labels: BTreeMap<String, String>,
        #[serde(default, deserialize_with = "nullable")]
        pub match_expressions: Vec<RawExpression>,
    }

    #[derive(Deserialize, Clone, Debug)]
    pub struct RawExpression {
        pub key: String,
        pub operator: String,
        #[serde(default, deserialize_with = "nullable")]
        pub values: Vec<String>,
    }

    #[derive(Deserialize, Clone, Debug)]
    pub struct RawRouteGroupKind {
        pub group: Option<String>,
        pub kind: String,
    }

    #[derive(Deserialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct RawParentRef {
        pub group: Option<String>,
        pub kind: Option<String>,
        pub namespace: Option<String>,
        pub name: String,
        pub section_name: Option<String>,
        pub port: Option<i32>,
    }

    #[derive(Deserialize, Clone, Debug)]
    pub struct RawAddress {
        #[serde(rename = "type")]
        pub kind: Option<String>,
        pub value: String,
    }

    #[derive(Deserialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct RawParentStatus {
        pub parent_ref: RawParentRef,
        #[serde(default, deserialize_with = "nullable")]
        pub conditions: Vec<RawCondition>,
    }

    #[derive(Deserialize, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct RawCondition {
        #[serde(rename = "type")]
        pub kind: String,
        #[serde(deserialize_with = "condition_status")]
        pub status: String,
        pub observed_generation: Option<i64>,
    }

    #[derive(Deserialize, Clone, Debug)]
    pub struct RawListenerStatus {
        pub name: String,
        #[serde(default, deserialize_with = "nullable")]
        pub conditions: Vec<RawCondition>,
    }

    /// Condition status is "True"/"False"/"Unknown"; hand-written YAML sometimes leaves it unquoted.
    fn condition_status<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Status {
            Text(String),
            Flag(bool),
        }
        Ok(match Status::deserialize(d)? {
            Status::Text(text) => text,
            Status::Flag(true) => "True".to_owned(),
            Status::Flag(false) => "False".to_owned(),
        })
    }

    fn accepted(conditions: &[RawCondition]) -> Option<(Acceptance, Option<i64>)> {
        conditions.iter().find(|c| c.kind == "Accepted").map(|c| {
            let state = match c.status.as_str() {
                "True" => Acceptance::Accepted,
                "False" => Acceptance::Rejected,
                _ => Acceptance::Unknown,
            };
            (state, c.observed_generation)
        })
    }

    fn selector(raw: RawSelector, path: &str) -> Result<LabelSelector, DecodeError> {
        let mut requirements: Vec<Requirement> = raw
            .match_labels
            .into_iter()
            .map(|(key, value)| Requirement {
                key,
                operator: SelectorOp::Equals,
                values: vec![value],
            })
            .collect();
        for (i, expr) in raw.match_expressions.into_iter().enumerate() {
            let operator = match expr.operator.as_str() {
                "In" => SelectorOp::In,
                "NotIn" => SelectorOp::NotIn,
                "Exists" => SelectorOp::Exists,
                "DoesNotExist" => SelectorOp::DoesNotExist,
                other => {
                    return Err(DecodeError::field(
                        &format!("{path}.matchExpressions[{i}].operator"),
                        format!("unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)"),
                    ));
                }
            };
            requirements.push(Requirement {
                key: expr.key,
                operator,
                values: expr.values,
            });
        }
        Ok(LabelSelector { requirements })
    }

    fn namespaces_from(
        raw: Option<RawNamespaces>,
        default: NamespacesFrom,
        path: &str,
    ) -> Result<NamespacesFrom, DecodeError> {
        let Some(raw) = raw else { return Ok(default) };
        Ok(match raw.from.as_deref() {
            None => default,
            Some("Same") => NamespacesFrom::Same,
            Some("All") => NamespacesFrom::All,
            Some("None") => NamespacesFrom::None,
            Some("Selector") => NamespacesFrom::Selector(match raw.selector {
                Some(sel) => selector(sel, &format!("{path}.selector"))?,
                // A Selector without a selector selects nothing (the API server rejects it anyway).
                None => LabelSelector {
                    requirements: vec![Requirement {
                        key: String::new(),
                        operator: SelectorOp::In,
                        values: Vec::new(),
                    }],
                },
            }),
            Some(other) => {
                return Err(DecodeError::field(
                    &format!("{path}.from"),
                    format!("unknown value {other:?} (Same, All, Selector, None)"),
                ));
            }
        })
    }

    fn listeners(
        raw: Vec<RawListener>,
        statuses: &[RawListenerStatus],
    ) -> Result<Box<[Listener]>, DecodeError> {
        raw.into_iter()
            .enumerate()
            .map(|(i, l)| {
                let path = format!("spec.listeners[{i}].allowedRoutes");
                let (namespaces, kinds) = match l.allowed_routes {
                    None => (NamespacesFrom::Same, None),
                    Some(ar) => (
                        namespaces_from(
                            ar.namespaces,
                            NamespacesFrom::Same,
                            &format!("{path}.namespaces"),
                        )?,
                        ar.kinds.map(|kinds| {
                            kinds
                                .into_iter()
                                .map(|k| RouteGroupKind {
                                    group: k
                                        .group
                                        .unwrap_or_else(|| GATEWAY_GROUP.to_owned())
                                        .into(),
                                    kind: k.kind.into(),
                                })
                                .collect()
                        }),
                    ),
                };
                let rejected = statuses
                    .iter()
                    .find(|s| s.name == l.name)
                    .and_then(|s| accepted(&s.conditions))
                    .is_some_and(|(state, _)| state == Acceptance::Rejected);
                Ok(Listener {
                    name: l.name.into(),
                    // Hostnames compare case-insensitively (DESIGN.md §1): lower-case once here.
                    hostname: l
                        .hostname
                        .filter(|h| !h.is_empty())
                        .map(|h| h.to_ascii_lowercase().into()),
                    port: l.port,
                    protocol: l.protocol.into(),
                    allowed_routes: AllowedRoutes { namespaces, kinds },
                    rejected,
                })
            })
            .collect()
    }

    pub fn gateway(meta: Meta, spec: Spec, status: Status) -> Result<Gateway, DecodeError> {
        let allowed_listeners = match spec.allowed_listeners {
            None => NamespacesFrom::None,
            Some(al) => namespaces_from(
                al.namespaces,
                NamespacesFrom::None,
                "spec.allowedListeners.namespaces",
            )?,
        };
        let addresses = status
            .addresses
            .iter()
            .filter_map(|a| match a.kind.as_deref() {
                None | Some("IPAddress") | Some("Hostname") => Address::parse(&a.value),
                // NamedAddress and implementation-specific types do not name a DNS target.
                Some(_) => None,
            })
            .collect();
        Ok(Gateway {
            meta,
            listeners: listeners(spec.listeners, &status.listeners)?,
            addresses,
            allowed_listeners,
        })
    }

    pub fn listener_set(
        meta: Meta,
        spec: Spec,
        status: Status,
    ) -> Result<ListenerSet, DecodeError> {
        let Some(parent) = spec.parent_ref else {
            return Err(DecodeError::field("spec.parentRef", "is required"));
        };
        let parent = GatewayRef {
            namespace: parent
                .namespace
                .unwrap_or_else(|| meta.namespace.to_string())
                .into(),
            name: parent.name.into(),
        };
        Ok(ListenerSet {
            listeners: listeners(spec.listeners, &status.listeners)?,
            accepted: accepted(&status.conditions).map(|(state, _)| state),
            parent,
            meta,
        })
    }

    /// One allocation each for the group and kinds nearly every parentRef names.
    fn shared(text: Option<String>, default: &'static str) -> Arc<str> {
        thread_local! {
            static COMMON: [Arc<str>; 3] =
                [GATEWAY_GROUP.into(), "Gateway".into(), "ListenerSet".into()];
        }
        let text = text.filter(|t| !t.is_empty());
        let wanted = text.as_deref().unwrap_or(default);
        COMMON
            .with(|common| common.iter().find(|c| &***c == wanted).cloned())
            .unwrap_or_else(|| wanted.into())
    }

    fn parent_ref(raw: RawParentRef, route_namespace: &str) -> ParentRef {
        ParentRef {
            group: shared(raw.group, GATEWAY_GROUP),
            kind: shared(raw.kind, "Gateway"),
            namespace: raw
                .namespace
                .unwrap_or_else(|| route_namespace.to_owned())
                .into(),
            name: raw.name.into(),
            section_name: raw.section_name.filter(|s| !s.is_empty()).map(Into::into),
            port: raw.port,
            status: None,
        }
    }

    pub fn route(
        kind: ObjectKind,
        meta: Meta,
        spec: Spec,
        status: Status,
    ) -> Result<Route, DecodeError> {
        let hostnames = if kind.has_hostnames() {
            spec.hostnames.into_iter().map(Into::into).collect()
        } else {
            Box::default()
        };
        // Status entries for parents no longer in spec are stale: only those that match a
        // spec parentRef (same parent and sectionName) are kept, on that parentRef.
        let statuses: Vec<ParentRef> = status
            .parents
            .into_iter()
            .map(|s| {
                let (accepted, observed_generation) =
                    accepted(&s.conditions).unwrap_or((Acceptance::Unknown, None));
                ParentRef {
                    status: Some(ParentStatus {
                        accepted,
                        observed_generation,
                    }),
                    ..parent_ref(s.parent_ref, &meta.namespace)
                }
            })
            .collect();
        let parent_refs = spec
            .parent_refs
            .into_iter()
            .map(|p| {
                let mut parent = parent_ref(p, &meta.namespace);
                parent.status = statuses
                    .iter()
                    .find(|s| s.same_parent(&parent) && s.section_name == parent.section_name)
                    .and_then(|s| s.status);
                parent
            })
            .collect();
        Ok(Route {
            kind,
            meta,
            hostnames,
            parent_refs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_route_with_defaults() {
        let value = json!({
            "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": "2024-01-01T00:00:00Z",
                          "annotations": {LAST_APPLIED: "{}", "a": "b"}},
            "spec": {"parentRefs": [{"name": "public", "namespace": "infra"}], "hostnames": ["A.example.com"]}
        });
        let Some(Object::Route(route)) = decode_value(&value).unwrap() else {
            panic!("not a route")
        };
        assert_eq!(route.kind, ObjectKind::HTTPRoute);
        assert_eq!(&*route.parent_refs[0].group, GATEWAY_GROUP);
        assert_eq!(&*route.parent_refs[0].kind, "Gateway");
        assert_eq!(&*route.parent_refs[0].namespace, "infra");
        assert_eq!(route.meta.created, Some(1_704_067_200));
        assert_eq!(route.meta.annotations.get(LAST_APPLIED), None);
        assert_eq!(route.meta.annotations.get("a"), Some("b"));
        assert_eq!(&*route.hostnames[0], "A.example.com");
    }

    #[test]
    fn decode_errors_name_the_field() {
        let value = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"},
            "spec": {"hostnames": ["ok.example.com", 7]}
        });
        let err = decode_value(&value).unwrap_err().to_string();
        assert!(err.starts_with("spec.hostnames[1]:"), "{err}");
    }

    #[test]
    fn json_text_decodes_as_the_value_does() {
        let value = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": "2024-01-01T00:00:00Z",
                          "labels": {"app": "web"}, "annotations": {LAST_APPLIED: "{}", "a": "b"},
                          "managedFields": [{"manager": "kubectl"}]},
            "spec": {"parentRefs": [{"name": "public", "namespace": "infra", "sectionName": "https"}],
                     "hostnames": ["A.example.com", "b.example.com"], "rules": [{"matches": []}]},
            "status": {"parents": [{"parentRef": {"name": "public", "namespace": "infra", "sectionName": "https"},
                                    "conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 1}]}]}
        });
        let text = value.to_string();
        assert_eq!(decode_json(&text).unwrap(), decode_value(&value).unwrap(),);
        assert!(decode_json(&text).unwrap().is_some());
    }

    #[test]
    fn json_text_errors_match_the_value_decoder() {
        // Ours, unreadable: the same field path.
        let broken = r#"{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"}, "spec": {"hostnames": ["ok.example.com", 7]}}"#;
        let err = decode_json(broken).unwrap_err().to_string();
        assert!(err.starts_with("spec.hostnames[1]:"), "{err}");
        // Not ours, in a shape our raw types would refuse: skipped, not an error.
        let foreign = r#"{"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "labels": 3}, "spec": {"hostnames": "x"}}"#;
        assert_eq!(decode_json(foreign).unwrap(), None);
        assert_eq!(
            decode_json(r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}"#)
                .unwrap(),
            None
        );
        for no_type in [
            r#"{"metadata": {"name": "x"}}"#,
            r#"{"apiVersion": 1, "kind": "HTTPRoute"}"#,
        ] {
            assert!(
                matches!(decode_json(no_type), Err(DecodeError::MissingType)),
                "{no_type}"
            );
        }
        assert!(decode_json("[1, 2]").is_err());
        assert!(
            decode_json(
                r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}} x"#
            )
            .is_err()
        );
    }

    #[test]
    fn a_repeated_label_keeps_its_last_value() {
        let map = StringMap::from_pairs(
            [("b", "2"), ("a", "1"), ("b", "3"), ("c", "4"), ("a", "5")]
                .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let pairs: Vec<_> = map.iter().collect();
        assert_eq!(pairs, [("a", "5"), ("b", "3"), ("c", "4")]);
        // As the value decoder reads duplicate keys in JSON text.
        let text = r#"{"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "n", "labels": {"team": "a", "team": "b"}}}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(decode_json(text).unwrap(), decode_value(&value).unwrap());
    }

    #[test]
    fn other_kinds_and_versions_are_skipped() {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}});
        assert!(decode_value(&svc).unwrap().is_none());
        let unknown_version = json!({"apiVersion": "gateway.networking.k8s.io/v9", "kind": "HTTPRoute", "metadata": {"name": "x"}});
        assert!(decode_value(&unknown_version).unwrap().is_none());
        assert_eq!(
            ObjectKind::from_type("gateway.networking.k8s.io/v1alpha2", "TCPRoute"),
            Some(ObjectKind::TCPRoute)
        );
    }

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2000-03-01T00:00:00.123+01:00"),
            Some(951_865_200)
        );
        assert_eq!(parse_rfc3339("2000-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}

#[cfg(test)]
mod string_map_tests {
    use super::StringMap;

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
