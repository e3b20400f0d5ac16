//! The one decoder: what every source (files, cluster) and the webhook use to read an object into
//! its projection, so they never disagree. Tolerant of every field it does not read; precise,
//! with the field path, about the ones it does. The webhook's quick scan of route reviews
//! ([`scan`]) reads JSON text its own way but fills these same shapes and projects them with
//! the same functions, and leaves every text it is not sure of to the serde reads here.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::dns_name::canonical;
use super::{
    Acceptance, Address, AllowedRoutes, GATEWAY_GROUP, Gateway, GatewayRef, LabelSelector,
    Listener, ListenerSet, Meta, Name, Namespace, NamespacesFrom, Object, ObjectKey, ObjectKind,
    ParentRef, ParentStatus, ParentType, Requirement, Route, RouteGroupKind, SelectorOp, StringMap,
};

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

pub mod scan;

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
    let raw = match read_raw_json(text) {
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

/// Reads JSON text into the raw shapes. The happy path reads without tracking field paths; a
/// failure reads again with tracking, for the path in the error message.
fn read_raw_json(text: &str) -> Result<raw::Object, DecodeError> {
    let read_untracked = || -> Result<raw::Object, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let raw = serde::Deserialize::deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(raw)
    };
    read_untracked().map_err(|first| {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        match read_raw(&mut deserializer) {
            Err(tracked) => tracked,
            // Only trailing characters fail an untracked read that a tracked one passes.
            Ok(_) => DecodeError::field("", first.to_string()),
        }
    })
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
    /// Reads JSON text, with no JSON tree in between.
    pub fn from_json(text: &str) -> Result<RawObject, DecodeError> {
        read_raw_json(text).map(RawObject)
    }

    pub fn name(&self) -> Option<&str> {
        self.0.metadata.name.as_deref()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.0.metadata.namespace.as_deref()
    }

    /// `metadata.resourceVersion`, taken out: the projection does not keep it.
    pub fn take_resource_version(&mut self) -> Option<String> {
        self.0.metadata.resource_version.take()
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
        let (Some(api_version), Some(kind)) = (&self.api_version, &self.kind) else {
            return Err(DecodeError::MissingType);
        };
        let read_kind = match (api_version.as_str(), kind.as_str()) {
            (Some(api_version), Some(kind)) => ObjectKind::from_type(api_version, kind),
            // Longer than any type name gateway-dns reads.
            _ => None,
        };
        match read_kind {
            None => Ok(None),
            Some(kind) => self.into_object(kind).map(Some),
        }
    }

    fn into_object(self, kind: ObjectKind) -> Result<Object, DecodeError> {
        let meta = self.metadata.into_meta(kind)?;
        let (spec, status) = (
            self.spec,
            self.status.map_or_else(raw::Status::default, |s| *s),
        );
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

/// Unix seconds as Kubernetes writes timestamps (`2024-05-01T10:00:00Z`, UTC, whole seconds);
/// `None` outside the representable years.
pub fn format_rfc3339(seconds: i64) -> Option<String> {
    let at = OffsetDateTime::from_unix_timestamp(seconds).ok()?;
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    ))
}

/// Unix seconds of an RFC 3339 timestamp (`2024-05-01T10:00:00Z`, optional fraction and offset).
fn parse_rfc3339(text: &str) -> Option<i64> {
    if let Some(seconds) = parse_kubernetes_timestamp(text) {
        return Some(seconds);
    }
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .map(OffsetDateTime::unix_timestamp)
}

/// The one form Kubernetes writes, `YYYY-MM-DDTHH:MM:SSZ`, read by position (every object under
/// review has one; the general parser costs several times this). None for any other text,
/// which the general parser then reads; the date and time checks are `time`'s own.
fn parse_kubernetes_timestamp(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let separators = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'Z'),
    ];
    if bytes.len() != 20 || separators.iter().any(|(at, byte)| bytes[*at] != *byte) {
        return None;
    }
    let number = |from: usize, to: usize| -> Option<u16> {
        bytes[from..to].iter().try_fold(0u16, |value, digit| {
            digit
                .is_ascii_digit()
                .then(|| value * 10 + u16::from(digit - b'0'))
        })
    };
    let two = |from: usize| number(from, from + 2).and_then(|value| u8::try_from(value).ok());
    let month = time::Month::try_from(two(5)?).ok()?;
    let date = time::Date::from_calendar_date(i32::from(number(0, 4)?), month, two(8)?).ok()?;
    let clock = time::Time::from_hms(two(11)?, two(14)?, two(17)?).ok()?;
    Some(
        time::PrimitiveDateTime::new(date, clock)
            .assume_utc()
            .unix_timestamp(),
    )
}

/// Serde shapes of the raw objects: only the fields we read, tolerant of everything else.
mod raw {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize, Clone, Debug)]
    pub struct Object {
        #[serde(rename = "apiVersion")]
        pub api_version: Option<TypeName>,
        pub kind: Option<TypeName>,
        #[serde(default)]
        pub metadata: Metadata,
        #[serde(default)]
        pub spec: Spec,
        /// Boxed, as the parts of `spec` only some kinds have: most objects under review have
        /// no status, and every step of the read moves the object by value.
        #[serde(default, deserialize_with = "boxed")]
        pub status: Option<Box<Status>>,
    }

    /// A present member read as a plain `T`, then boxed: `null` fails as it does for an unboxed
    /// `T` (an absent one is `None` through `#[serde(default)]`).
    fn boxed<'de, D, T>(deserializer: D) -> Result<Option<Box<T>>, D::Error>
    where
        D: serde::Deserializer<'de>,
        T: Deserialize<'de>,
    {
        T::deserialize(deserializer).map(|value| Some(Box::new(value)))
    }

    #[derive(Deserialize, Default, Clone, Debug)]
    #[serde(rename_all = "camelCase")]
    pub struct Metadata {
        pub name: Option<String>,
        pub namespace: Option<String>,
        #[serde(default, deserialize_with = "nullable")]
        pub labels: StringPairs,
        #[serde(default, deserialize_with = "nullable")]
        pub annotations: StringPairs,
        pub creation_timestamp: Option<Timestamp>,
        pub generation: Option<i64>,
        /// Read for a watch to resume from; not part of the projection.
        pub resource_version: Option<String>,
    }

    impl Metadata {
        pub fn into_meta(self, kind: ObjectKind) -> Result<Meta, DecodeError> {
            MetaParts {
                name: self.name.as_deref(),
                namespace: self.namespace.as_deref(),
                labels: self.labels.0,
                annotations: self.annotations.0,
                creation_timestamp: self.creation_timestamp,
                generation: self.generation,
            }
            .into_meta(kind)
        }
    }

    /// What the projection keeps of `metadata`, however it was read: owned by the serde
    /// shapes, borrowed from the text by the scan.
    pub struct MetaParts<'t, T: AsRef<str>> {
        pub name: Option<&'t str>,
        pub namespace: Option<&'t str>,
        pub labels: Vec<(T, T)>,
        pub annotations: Vec<(T, T)>,
        pub creation_timestamp: Option<Timestamp>,
        pub generation: Option<i64>,
    }

    impl<T: AsRef<str>> MetaParts<'_, T> {
        pub fn into_meta(self, kind: ObjectKind) -> Result<Meta, DecodeError> {
            let name = match self.name {
                Some(name) if !name.is_empty() => name,
                _ => return Err(DecodeError::field("metadata.name", "is required")),
            };
            let namespace = if kind.is_namespaced() {
                // Objects written without a namespace live in "default", as kubectl would put them.
                match self.namespace {
                    Some(namespace) if !namespace.is_empty() => namespace,
                    _ => "default",
                }
            } else {
                ""
            };
            let created = match self.creation_timestamp {
                None | Some(Timestamp::Empty) => None,
                Some(Timestamp::Seconds(seconds)) => Some(seconds),
                Some(Timestamp::Unreadable(text)) => {
                    return Err(DecodeError::field(
                        "metadata.creationTimestamp",
                        format!("{text:?} is not an RFC 3339 timestamp"),
                    ));
                }
            };
            Ok(Meta {
                key: ObjectKey::new(kind, namespace, name),
                labels: StringMap::from_read_pairs(self.labels),
                annotations: StringMap::from_read_pairs(self.annotations),
                created: created.into(),
                generation: self.generation.into(),
            })
        }
    }

    /// A value read from a JSON string by `from_text` (the scan calls the same constructors);
    /// another JSON type fails.
    fn from_text<'de, D, T>(deserializer: D, from_text: fn(&str) -> T) -> Result<T, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        struct Visitor<T>(fn(&str) -> T);
        impl<T> serde::de::Visitor<'_> for Visitor<T> {
            type Value = T;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
                Ok((self.0)(text))
            }
        }
        deserializer.deserialize_string(Visitor(from_text))
    }

    /// An `apiVersion` or `kind`, kept inline: it is only compared, never stored.
    #[derive(Clone, Debug)]
    pub struct TypeName {
        len: u8,
        bytes: [u8; TypeName::CAPACITY],
    }

    impl TypeName {
        /// Longer than every type name gateway-dns reads (`gateway.networking.k8s.io/v1alpha3`).
        const CAPACITY: usize = 48;

        pub fn from_text(text: &str) -> TypeName {
            let mut name = TypeName {
                len: u8::MAX,
                bytes: [0; TypeName::CAPACITY],
            };
            if let Some(bytes) = name.bytes.get_mut(..text.len()) {
                bytes.copy_from_slice(text.as_bytes());
                name.len = text.len() as u8;
            }
            name
        }

        /// The text; None when longer than [`Self::CAPACITY`], so not a type gateway-dns reads.
        pub fn as_str(&self) -> Option<&str> {
            let len = usize::from(self.len);
            if len > Self::CAPACITY {
                return None;
            }
            std::str::from_utf8(&self.bytes[..len]).ok()
        }
    }

    impl<'de> Deserialize<'de> for TypeName {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            from_text(deserializer, TypeName::from_text)
        }
    }

    /// `metadata.creationTimestamp`, read as it is parsed: no copy of the text unless it is
    /// unreadable (then kept for the error message).
    #[derive(Clone, Debug)]
    pub enum Timestamp {
        Empty,
        Seconds(i64),
        Unreadable(String),
    }

    impl Timestamp {
        pub fn from_text(text: &str) -> Timestamp {
            if text.is_empty() {
                Timestamp::Empty
            } else {
                match parse_rfc3339(text) {
                    Some(seconds) => Timestamp::Seconds(seconds),
                    None => Timestamp::Unreadable(text.to_owned()),
                }
            }
        }
    }

    impl<'de> Deserialize<'de> for Timestamp {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            from_text(deserializer, Timestamp::from_text)
        }
    }

    /// Labels or annotations read straight into the pairs a [`StringMap`] keeps, with no map in
    /// between; the `last-applied-configuration` annotation (a copy of the whole object) is
    /// checked to be a string and passed over without being copied.
    #[derive(Clone, Debug, Default)]
    pub struct StringPairs(pub Vec<(Box<str>, Box<str>)>);

    impl<'de> Deserialize<'de> for StringPairs {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            use serde::de::{DeserializeSeed, MapAccess};

            /// A key, or None for the one that is passed over.
            struct Key;
            impl<'de> DeserializeSeed<'de> for Key {
                type Value = Option<Box<str>>;
                fn deserialize<D: serde::Deserializer<'de>>(
                    self,
                    deserializer: D,
                ) -> Result<Self::Value, D::Error> {
                    deserializer.deserialize_string(self)
                }
            }
            impl serde::de::Visitor<'_> for Key {
                type Value = Option<Box<str>>;
                fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                    formatter.write_str("a string")
                }
                fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                    Ok((text != LAST_APPLIED).then(|| text.into()))
                }
            }

            /// A string value that is checked, not kept.
            struct Unkept;
            impl<'de> Deserialize<'de> for Unkept {
                fn deserialize<D: serde::Deserializer<'de>>(
                    deserializer: D,
                ) -> Result<Self, D::Error> {
                    deserializer.deserialize_string(Unkept)
                }
            }
            impl serde::de::Visitor<'_> for Unkept {
                type Value = Unkept;
                fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                    formatter.write_str("a string")
                }
                fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Unkept, E> {
                    Ok(Unkept)
                }
            }

            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = StringPairs;
                fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                    formatter.write_str("a map")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringPairs, A::Error> {
                    let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                    while let Some(key) = map.next_key_seed(Key)? {
                        match key {
                            Some(key) => pairs.push((key, map.next_value::<Box<str>>()?)),
                            None => {
                                map.next_value::<Unkept>()?;
                            }
                        }
                    }
                    Ok(StringPairs(pairs))
                }
            }
            deserializer.deserialize_map(Visitor)
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
        pub allowed_listeners: Option<Box<RawAllowedListeners>>,
        pub parent_ref: Option<Box<RawParentRef>>,
        #[serde(default, deserialize_with = "nullable")]
        pub parent_refs: Vec<RawParentRef>,
        #[serde(default, deserialize_with = "nullable")]
        pub hostnames: Vec<Name>,
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
        pub group: Option<SharedName>,
        pub kind: Option<SharedName>,
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

    /// Is a condition of `kind` set to `status` (`True`/`False`)? A condition observed for
    /// another generation than `generation` is stale and says nothing.
    fn says(
        conditions: &[RawCondition],
        kind: &str,
        status: &str,
        generation: Option<i64>,
    ) -> bool {
        conditions.iter().any(|c| {
            c.kind == kind
                && c.status == status
                && (c.observed_generation.is_none()
                    || generation.is_none()
                    || c.observed_generation == generation)
        })
    }

    /// Readiness as the controller reports it: only an explicit `Programmed=False` (or, for a
    /// listener, `Conflicted=True`) counts; no status yet is no news (ARCHITECTURE.md,
    /// "Readiness").
    fn programmed(conditions: &[RawCondition], generation: Option<i64>) -> bool {
        !says(conditions, "Programmed", "False", generation)
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
        generation: Option<i64>,
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
                let status = statuses.iter().find(|s| s.name == l.name);
                let listener_accepted = status
                    .and_then(|s| accepted(&s.conditions))
                    .map(|(state, _)| state);
                let listener_programmed = status.is_none_or(|s| {
                    programmed(&s.conditions, generation)
                        && !says(&s.conditions, "Conflicted", "True", generation)
                });
                Ok(Listener {
                    name: l.name.into(),
                    // Hostnames compare in canonical form: made once here.
                    hostname: l
                        .hostname
                        .filter(|h| !h.is_empty())
                        .map(|h| canonical(&h).into()),
                    port: l.port,
                    protocol: l.protocol.into(),
                    allowed_routes: AllowedRoutes { namespaces, kinds },
                    accepted: listener_accepted,
                    programmed: listener_programmed,
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
        let generation = meta.generation.get();
        Ok(Gateway {
            listeners: listeners(spec.listeners, &status.listeners, generation)?,
            addresses,
            allowed_listeners,
            programmed: programmed(&status.conditions, generation),
            meta,
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
                .unwrap_or_else(|| meta.namespace().to_string())
                .into(),
            name: parent.name.into(),
        };
        let generation = meta.generation.get();
        Ok(ListenerSet {
            listeners: listeners(spec.listeners, &status.listeners, generation)?,
            accepted: accepted(&status.conditions).map(|(state, _)| state),
            programmed: programmed(&status.conditions, generation),
            parent,
            meta,
        })
    }

    /// A parentRef's group or kind, `default` when absent or empty.
    fn text_or<'t>(name: &'t Option<SharedName>, default: &'static str) -> &'t str {
        match name {
            Some(SharedName(text)) if !text.is_empty() => text,
            _ => default,
        }
    }

    /// A parentRef's group or kind as read: no allocation for the group and kinds nearly
    /// every parentRef names (they end up as a [`ParentType`] tag).
    #[derive(Clone, Debug)]
    pub struct SharedName(Cow<'static, str>);

    impl SharedName {
        pub fn from_text(text: &str) -> SharedName {
            SharedName(
                [GATEWAY_GROUP, "Gateway", "ListenerSet"]
                    .into_iter()
                    .find(|common| *common == text)
                    .map_or_else(|| Cow::Owned(text.to_owned()), Cow::Borrowed),
            )
        }
    }

    impl<'de> Deserialize<'de> for SharedName {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            from_text(deserializer, SharedName::from_text)
        }
    }

    /// A hostname read straight into the shared name the route keeps: one allocation.
    impl<'de> Deserialize<'de> for Name {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            from_text(deserializer, Name::new)
        }
    }

    fn parent_ref(raw: RawParentRef, route_namespace: &str) -> ParentRef {
        ParentRef {
            parent_type: ParentType::new(
                text_or(&raw.group, GATEWAY_GROUP),
                text_or(&raw.kind, "Gateway"),
            ),
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
            // Shared: the engine's claims on these names point at the same strings.
            spec.hostnames.into_boxed_slice()
        } else {
            Box::default()
        };
        // Status entries for parents no longer in spec are stale: only those that match a
        // spec parentRef on the parent (group, kind, namespace, name; external-dns's match) are
        // kept, on that parentRef, the entry with its sectionName first. The entry keeps its
        // own sectionName and port: with `--attachment status` they choose the listeners.
        let statuses: Vec<(ParentRef, Acceptance, bool)> = status
            .parents
            .into_iter()
            .map(|s| {
                let (accepted, observed_generation) =
                    accepted(&s.conditions).unwrap_or((Acceptance::Unknown, None));
                let entry = parent_ref(s.parent_ref, meta.namespace());
                let current = observed_generation.is_none_or(|g| Some(g) == meta.generation.get());
                (entry, accepted, current)
            })
            .collect();
        let parent_refs = spec
            .parent_refs
            .into_iter()
            .map(|p| {
                let mut parent = parent_ref(p, meta.namespace());
                let same_parent = || statuses.iter().filter(|(s, ..)| s.same_parent(&parent));
                parent.status = same_parent()
                    .find(|(s, ..)| s.section_name == parent.section_name)
                    .or_else(|| same_parent().next())
                    .map(|(entry, accepted, current)| {
                        ParentStatus::new(
                            *accepted,
                            *current,
                            entry.section_name.clone(),
                            entry.port,
                            &parent,
                        )
                    });
                parent
            })
            .collect();
        Ok(Route {
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
        assert_eq!(route.kind(), ObjectKind::HTTPRoute);
        assert_eq!(route.parent_refs[0].group(), GATEWAY_GROUP);
        assert_eq!(route.parent_refs[0].kind(), "Gateway");
        assert_eq!(route.parent_refs[0].parent_type, ParentType::Gateway);
        assert_eq!(&*route.parent_refs[0].namespace, "infra");
        assert_eq!(route.meta.created.get(), Some(1_704_067_200));
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
    fn a_status_entry_keeps_its_own_listener_only_where_it_differs_from_the_spec() {
        let route = |status_ref: serde_json::Value| {
            let value = json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"parentRefs": [{"name": "public", "namespace": "infra", "sectionName": "https", "port": 443}]},
                "status": {"parents": [{"parentRef": status_ref,
                                        "conditions": [{"type": "Accepted", "status": "True"}]}]}
            });
            let Some(Object::Route(route)) = decode_value(&value).unwrap() else {
                panic!("not a route")
            };
            route.parent_refs[0].clone()
        };
        let same = route(
            json!({"name": "public", "namespace": "infra", "sectionName": "https", "port": 443}),
        );
        assert_eq!(
            same.status.as_ref().map(|s| s.listener.is_none()),
            Some(true)
        );
        assert_eq!(same.status_listener(), Some((Some("https"), Some(443))));
        // The parent alone matches: the entry's own sectionName and port are kept.
        let other = route(json!({"name": "public", "namespace": "infra", "sectionName": "http"}));
        assert_eq!(other.status_listener(), Some((Some("http"), None)));
        let none = route(json!({"name": "public", "namespace": "infra"}));
        assert_eq!(none.status_listener(), Some((None, None)));
        let elsewhere = route(json!({"name": "private", "namespace": "infra"}));
        assert_eq!(elsewhere.status_listener(), None);
    }

    #[test]
    fn a_status_entry_is_current_when_it_observed_the_routes_generation_or_names_none() {
        let current = |observed: serde_json::Value| {
            let value = json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": "web", "namespace": "shop", "generation": 2},
                "spec": {"parentRefs": [{"name": "public", "namespace": "infra"}]},
                "status": {"parents": [{"parentRef": {"name": "public", "namespace": "infra"},
                                        "conditions": [{"type": "Accepted", "status": "False",
                                                        "observedGeneration": observed}]}]}
            });
            let Some(Object::Route(route)) = decode_value(&value).unwrap() else {
                panic!("not a route")
            };
            route.parent_refs[0]
                .status
                .as_ref()
                .map(|s| (s.accepted, s.current))
        };
        assert_eq!(current(json!(2)), Some((Acceptance::Rejected, true)));
        assert_eq!(current(json!(1)), Some((Acceptance::Rejected, false)));
        assert_eq!(current(json!(null)), Some((Acceptance::Rejected, true)));
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
    fn the_kubernetes_form_reads_as_the_general_parser_reads_it() {
        let general = |text: &str| {
            OffsetDateTime::parse(text, &Rfc3339)
                .ok()
                .map(OffsetDateTime::unix_timestamp)
        };
        let mut read_by_position = 0;
        for year in [0, 1, 1969, 1970, 1999, 2000, 2024, 2100, 9999] {
            for month in 0..=13 {
                for day in [0, 1, 28, 29, 30, 31, 32] {
                    for (hour, minute, second) in
                        [(0, 0, 0), (23, 59, 59), (24, 0, 0), (12, 60, 7), (1, 2, 60)]
                    {
                        let text = format!(
                            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z"
                        );
                        let fast = parse_kubernetes_timestamp(&text);
                        if fast.is_some() {
                            read_by_position += 1;
                            assert_eq!(fast, general(&text), "{text}");
                        }
                        assert_eq!(parse_rfc3339(&text), general(&text), "{text}");
                    }
                }
            }
        }
        assert!(read_by_position > 500, "{read_by_position}");
        for other in [
            "2024-05-01t10:00:00Z",
            "2024-05-01T10:00:00+00:00",
            "2024-05-01T10:00:00.5Z",
            "2024-5-01T10:00:00Z",
            "+024-05-01T10:00:00Z",
            "2024-05-01T10:00:0xZ",
        ] {
            assert_eq!(parse_kubernetes_timestamp(other), None, "{other}");
            assert_eq!(parse_rfc3339(other), general(other), "{other}");
        }
    }

    #[test]
    fn labels_and_annotations_read_as_before() {
        let value = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "n", "labels": {"b": "2", "a": "1", "b": "3"},
                          "annotations": {LAST_APPLIED: "{\"x\": 1}", "z": "", "c\u{e9}": "d"}}
        });
        let text = value.to_string();
        let Some(Object::Namespace(namespace)) = decode_json(&text).unwrap() else {
            panic!("not a namespace")
        };
        assert_eq!(
            namespace.meta.labels.iter().collect::<Vec<_>>(),
            [("a", "1"), ("b", "3")]
        );
        assert_eq!(
            namespace.meta.annotations.iter().collect::<Vec<_>>(),
            [("cé", "d"), ("z", "")]
        );
        // The passed-over annotation must still be a string, and every value too.
        for (broken, path) in [
            (
                r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": 1}}}"#,
                "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {"a": ["b"]}}}"#,
                "metadata.labels.a",
            ),
            (
                r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": 3}}"#,
                "metadata.labels",
            ),
        ] {
            let error = decode_json(broken).unwrap_err().to_string();
            let value_error = decode_value(&serde_json::from_str(broken).unwrap())
                .unwrap_err()
                .to_string();
            // The text decoder adds the line and column; the rest is the same.
            assert!(error.starts_with(&value_error), "{error} / {value_error}");
            assert!(error.starts_with(&format!("{path}:")), "{error}");
        }
    }

    #[test]
    fn type_names_longer_than_any_we_read_are_foreign() {
        let long = "x".repeat(200);
        let text = format!(
            r#"{{"apiVersion": "{long}", "kind": "HTTPRoute", "metadata": {{"name": "a"}}}}"#
        );
        assert_eq!(decode_json(&text).unwrap(), None);
        let text =
            format!(r#"{{"apiVersion": "v1", "kind": "{long}", "metadata": {{"name": "a"}}}}"#);
        assert_eq!(decode_json(&text).unwrap(), None);
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

    #[test]
    fn timestamps_written_as_kubernetes_writes_them() {
        assert_eq!(format_rfc3339(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            format_rfc3339(1_700_000_000).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(
            format_rfc3339(1_704_067_200).as_deref(),
            Some("2024-01-01T00:00:00Z")
        );
        assert_eq!(
            format_rfc3339(1_768_208_400).as_deref(),
            Some("2026-01-12T09:00:00Z")
        );
    }
}
