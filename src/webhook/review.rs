//! The AdmissionReview envelope and the seam between transport and decision: the server reads
//! the body into an [`AdmissionRequest`] here, hands it to an [`AdmissionHandler`], and encodes
//! the handler's [`AdmissionAnswer`] ([`super::encode`]). Nothing here knows about Gateway API rules.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::model::scan::{self, Cursor};
use crate::model::{DecodeError, Object, Projection, decode_json};

pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

/// Decides on one admission request. Implemented by [`super::handler::EngineHandler`] (the rule
/// engine) and by test doubles.
pub trait AdmissionHandler: Send + Sync + 'static {
    /// Called on the blocking pool (or, when [`Self::is_quick`], on the request's own task);
    /// must not block for long: the server answers "allowed" with an `EvaluationTimeout`
    /// warning once the admission deadline passes.
    fn handle(&self, request: &AdmissionRequest<'_>) -> AdmissionAnswer;

    /// True when deciding `request` is quick and bounded (microseconds): the server then runs
    /// it on the request's own task instead of the blocking pool. Default: not quick.
    fn is_quick(&self, _request: &AdmissionRequest<'_>) -> bool {
        false
    }
}

impl<F> AdmissionHandler for F
where
    F: Fn(&AdmissionRequest<'_>) -> AdmissionAnswer + Send + Sync + 'static,
{
    fn handle(&self, request: &AdmissionRequest<'_>) -> AdmissionAnswer {
        self(request)
    }
}

/// The `request` member of an AdmissionReview: what a handler reads. The objects arrive already
/// read by the model's decoder, in the same pass as the envelope: no JSON tree, no second scan.
/// Its texts borrow from the request body where they need no unescaping (`'a`), so reading
/// them allocates nothing; [`AdmissionRequest::into_owned`] detaches a request from the body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionRequest<'a> {
    pub uid: Cow<'a, str>,
    /// `request.kind`: the type of the object under review (empty when absent).
    pub kind: GroupVersionKind<'a>,
    /// `request.operation` ([`Operation::Unknown`] when absent or not one of the four).
    pub operation: Operation,
    pub namespace: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub dry_run: bool,
    /// `request.object`; None when absent or null (DELETE).
    pub object: Option<ReviewObject>,
    /// `request.oldObject`; None when absent or null (CREATE).
    pub old_object: Option<ReviewObject>,
}

/// An object under review as the model's decoder reads it: `Ok(None)` for a kind gateway-dns
/// does not read, `Err` when it cannot read the object (the handler decides what that means).
pub type ReviewObject = Result<Option<Object>, DecodeError>;

/// What the API server is doing to the object under review.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
    /// Absent, or a value kube-apiserver does not send.
    #[default]
    Unknown,
}

impl Operation {
    /// The wire form (`CREATE`, …; empty for [`Operation::Unknown`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
            Operation::Unknown => "",
        }
    }

    fn from_wire(text: &str) -> Operation {
        [
            Operation::Create,
            Operation::Update,
            Operation::Delete,
            Operation::Connect,
        ]
        .into_iter()
        .find(|operation| operation.as_str() == text)
        .unwrap_or_default()
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Any string reads (an unknown one as [`Operation::Unknown`]); another JSON type fails, and the
/// tolerant read then takes the member as absent.
impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Text(text) = Text::deserialize(deserializer)?;
        Ok(Operation::from_wire(&text))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct GroupVersionKind<'a> {
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

impl GroupVersionKind<'_> {
    pub fn into_owned(self) -> GroupVersionKind<'static> {
        GroupVersionKind {
            group: Cow::Owned(self.group.into_owned()),
            version: Cow::Owned(self.version.into_owned()),
            kind: Cow::Owned(self.kind.into_owned()),
        }
    }
}

/// A JSON string borrowed from the body when it has no escapes, else unescaped into its own
/// buffer. (`Cow<str>`'s own `Deserialize` always copies; a derived field of that exact type
/// borrows, but not one inside an `Option`.)
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Visitor(std::marker::PhantomData))
    }
}

fn into_cow(member: Option<Text<'_>>) -> Option<Cow<'_, str>> {
    member.map(|Text(text)| text)
}

/// The members of `request` as they sit in the body; read further by [`Members::into_request`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Members<'a> {
    #[serde(borrow)]
    uid: Option<&'a RawValue>,
    #[serde(borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    operation: Option<&'a RawValue>,
    #[serde(borrow)]
    namespace: Option<&'a RawValue>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    dry_run: Option<&'a RawValue>,
    #[serde(borrow)]
    object: Option<&'a RawValue>,
    #[serde(borrow)]
    old_object: Option<&'a RawValue>,
}

impl<'a> Members<'a> {
    /// Only a string `uid` is required; members of the wrong type read as absent, as
    /// kube-apiserver never sends them so.
    fn into_request(self) -> Result<AdmissionRequest<'a>, Error> {
        fn read<'a, T: Deserialize<'a>>(member: Option<&'a RawValue>) -> Option<T> {
            serde_json::from_str(member?.get()).ok()
        }
        let uid = into_cow(read(self.uid)).ok_or(Error::MissingUid)?;
        Ok(AdmissionRequest {
            uid,
            kind: read(self.kind).unwrap_or_default(),
            operation: read(self.operation).unwrap_or_default(),
            namespace: into_cow(read(self.namespace)),
            name: into_cow(read(self.name)),
            dry_run: read(self.dry_run).unwrap_or(false),
            object: self.object.map(read_object),
            old_object: self.old_object.map(read_object),
        })
    }
}

/// An object member that did not fit the one-pass read: its text through the full decoder,
/// which says why it cannot be read (or that its kind is not one gateway-dns reads).
fn read_object(member: &RawValue) -> ReviewObject {
    decode_json(member.get())
}

/// The envelope's `request` member, read in the same pass as the envelope: its members when it
/// is an object, else nothing usable (which is [`Error::MissingRequest`], not bad JSON).
enum RequestMember<'a> {
    Object(Members<'a>),
    NotAnObject,
}

impl<'de: 'a, 'a> Deserialize<'de> for RequestMember<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};

        struct MemberVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for MemberVisitor<'a> {
            type Value = RequestMember<'a>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let members =
                    Members::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RequestMember::Object(members))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RequestMember::NotAnObject)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(RequestMember::NotAnObject)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(RequestMember::NotAnObject)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(RequestMember::NotAnObject)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(RequestMember::NotAnObject)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(RequestMember::NotAnObject)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(RequestMember::NotAnObject)
            }
        }

        deserializer.deserialize_any(MemberVisitor(std::marker::PhantomData))
    }
}

impl<'a> AdmissionRequest<'a> {
    /// Reads the `request` member from its JSON text.
    pub fn from_json(text: &'a str) -> Result<AdmissionRequest<'a>, Error> {
        let members: Members<'_> = serde_json::from_str(text).map_err(|_| Error::MissingRequest)?;
        members.into_request()
    }

    /// Builds a request from a JSON tree (tests and tools).
    pub fn from_value(request: &Value) -> Result<AdmissionRequest<'static>, Error> {
        if !request.is_object() {
            return Err(Error::MissingRequest);
        }
        AdmissionRequest::from_json(&request.to_string()).map(AdmissionRequest::into_owned)
    }

    /// The same request with texts of its own, apart from the body it was read from.
    pub fn into_owned(self) -> AdmissionRequest<'static> {
        let owned = |text: Cow<'_, str>| Cow::Owned(text.into_owned());
        AdmissionRequest {
            uid: owned(self.uid),
            kind: self.kind.into_owned(),
            operation: self.operation,
            namespace: self.namespace.map(owned),
            name: self.name.map(owned),
            dry_run: self.dry_run,
            object: self.object,
            old_object: self.old_object,
        }
    }

    /// The object under review when gateway-dns could read it.
    pub fn object(&self) -> Option<&Object> {
        self.object.as_ref()?.as_ref().ok()?.as_ref()
    }
}

/// The answer to one admission request.
///
/// `denial` is rendered only when `allowed` is false; a refusal without `denial` gets a generic
/// message. Warnings are sent as given (the handler prefixes each with `Reason: `), limited to
/// [`MAX_WARNINGS_BYTES`](super::encode::MAX_WARNINGS_BYTES) in total by
/// [`limit_warnings`](super::encode::limit_warnings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionAnswer {
    pub allowed: bool,
    pub warnings: Vec<String>,
    pub denial: Option<Denial>,
}

impl AdmissionAnswer {
    pub fn allow() -> Self {
        Self {
            allowed: true,
            warnings: Vec::new(),
            denial: None,
        }
    }

    pub fn allow_with_warnings(warnings: Vec<String>) -> Self {
        Self {
            allowed: true,
            warnings,
            denial: None,
        }
    }

    pub fn deny(denial: Denial, warnings: Vec<String>) -> Self {
        Self {
            allowed: false,
            warnings,
            denial: Some(denial),
        }
    }
}

/// Why a request is refused: `message` is `status.message` (one line per denying finding),
/// `causes` become `status.details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub message: String,
    pub causes: Vec<Cause>,
}

/// One denying finding: `reason` is ours (e.g. `HostnameConflict`), `field` the object path
/// (e.g. `spec.hostnames[1]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    pub reason: String,
    pub field: String,
    pub message: String,
}

/// Envelope problems; each maps to HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("request body is not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("request body is not a JSON object")]
    NotAnObject,
    #[error("apiVersion must be \"{API_VERSION}\", got {0}")]
    WrongApiVersion(String),
    #[error("kind must be \"{KIND}\", got {0}")]
    WrongKind(String),
    #[error("AdmissionReview has no \"request\" object")]
    MissingRequest,
    #[error("AdmissionReview request has no string \"uid\"")]
    MissingUid,
}

/// Decodes and checks an AdmissionReview body in one pass: the envelope, the request's members
/// and the objects, read straight into the model's projection. A body that does not fit that
/// typed read (bad input, odd member types, an object of another shape) is read again by the
/// tolerant path, which gives the same answer for well-formed reviews and the precise error
/// for the rest.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest<'_>, Error> {
    let Ok(text) = std::str::from_utf8(body) else {
        return parse_tolerantly(body);
    };
    if let Some(request) = scan_review(text) {
        return Ok(request);
    }
    parse_with_serde(text)
}

/// The serde readers alone, without [`scan_review`]: what the scan must agree with (tests and
/// fuzzing compare the two).
pub fn parse_with_serde(text: &str) -> Result<AdmissionRequest<'_>, Error> {
    if let Some(request) = parse_typed(text) {
        return Ok(request);
    }
    parse_tolerantly(text.as_bytes())
}

/// The quickest read, for the review nearly every request is: a well-formed AdmissionReview
/// whose objects are routes (or absent), read in one walk by the model's scanner
/// ([`crate::model::scan`]), which fills the decoder's own shapes. None for anything else,
/// which the serde readers then read.
pub fn scan_review(text: &str) -> Option<AdmissionRequest<'_>> {
    let mut cursor = Cursor::new(text);
    let (mut api_version, mut kind, mut request) = (None, None, None);
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "apiVersion" => {
                scan::first_time(&mut seen, 0)?;
                api_version = Some(cursor.string()?);
            }
            "kind" => {
                scan::first_time(&mut seen, 1)?;
                kind = Some(cursor.string()?);
            }
            "request" => {
                scan::first_time(&mut seen, 2)?;
                request = Some(scan_request(cursor)?);
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    // The typed serde read borrows both texts: escaped ones are left to the serde readers.
    let expected = |text: Option<Cow<'_, str>>, expected: &str| matches!(text, Some(Cow::Borrowed(text)) if text == expected);
    (cursor.at_end() && expected(api_version, API_VERSION) && expected(kind, KIND))
        .then_some(request)
        .flatten()
}

fn scan_request<'a>(cursor: &mut Cursor<'a>) -> Option<AdmissionRequest<'a>> {
    let mut request = AdmissionRequest::default();
    let (mut uid, mut dry_run) = (None, None);
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "uid" => {
                scan::first_time(&mut seen, 0)?;
                uid = Some(cursor.string()?);
            }
            "kind" => {
                scan::first_time(&mut seen, 1)?;
                request.kind = scan_kind(cursor)?;
            }
            "operation" => {
                scan::first_time(&mut seen, 2)?;
                request.operation = Operation::from_wire(&cursor.string()?);
            }
            "namespace" => {
                scan::first_time(&mut seen, 3)?;
                request.namespace = scan::nullable(cursor, Cursor::string)?;
            }
            "name" => {
                scan::first_time(&mut seen, 4)?;
                request.name = scan::nullable(cursor, Cursor::string)?;
            }
            "dryRun" => {
                scan::first_time(&mut seen, 5)?;
                dry_run = scan::nullable(cursor, Cursor::boolean)?;
            }
            "object" => {
                scan::first_time(&mut seen, 6)?;
                request.object = scan::nullable(cursor, scan::route)?;
            }
            "oldObject" => {
                scan::first_time(&mut seen, 7)?;
                request.old_object = scan::nullable(cursor, scan::route)?;
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    request.uid = uid?;
    request.dry_run = dry_run.unwrap_or(false);
    Some(request)
}

fn scan_kind<'a>(cursor: &mut Cursor<'a>) -> Option<GroupVersionKind<'a>> {
    let mut kind = GroupVersionKind::default();
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "group" => {
                scan::first_time(&mut seen, 0)?;
                kind.group = cursor.string()?;
            }
            "version" => {
                scan::first_time(&mut seen, 1)?;
                kind.version = cursor.string()?;
            }
            "kind" => {
                scan::first_time(&mut seen, 2)?;
                kind.kind = cursor.string()?;
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    Some(kind)
}

/// The one-pass read of a well-formed review; None sends the body to [`parse_tolerantly`].
fn parse_typed(text: &str) -> Option<AdmissionRequest<'_>> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        kind: &'a str,
        #[serde(borrow)]
        request: TypedMembers<'a>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct TypedMembers<'a> {
        #[serde(borrow)]
        uid: Text<'a>,
        #[serde(default, borrow)]
        kind: GroupVersionKind<'a>,
        #[serde(default)]
        operation: Operation,
        #[serde(borrow)]
        namespace: Option<Text<'a>>,
        #[serde(borrow)]
        name: Option<Text<'a>>,
        dry_run: Option<bool>,
        object: Option<Projection>,
        old_object: Option<Projection>,
    }
    let envelope: Envelope<'_> = serde_json::from_str(text).ok()?;
    if envelope.api_version != API_VERSION || envelope.kind != KIND {
        return None;
    }
    let members = envelope.request;
    Some(AdmissionRequest {
        uid: members.uid.0,
        kind: members.kind,
        operation: members.operation,
        namespace: into_cow(members.namespace),
        name: into_cow(members.name),
        dry_run: members.dry_run.unwrap_or(false),
        object: members.object.map(|projection| projection.0),
        old_object: members.old_object.map(|projection| projection.0),
    })
}

/// Reads any body: the envelope's and the request's members as raw JSON, each then read on its
/// own, so a member of the wrong type reads as absent and a bad body gets a precise error.
fn parse_tolerantly(body: &[u8]) -> Result<AdmissionRequest<'_>, Error> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "apiVersion", borrow)]
        api_version: Option<&'a RawValue>,
        #[serde(borrow)]
        kind: Option<&'a RawValue>,
        #[serde(borrow)]
        request: Option<RequestMember<'a>>,
    }
    let envelope: Envelope<'_> = serde_json::from_slice(body).map_err(|error| {
        let first = body.iter().find(|byte| !byte.is_ascii_whitespace());
        if error.is_data() && first.is_some_and(|byte| *byte != b'{') {
            Error::NotAnObject
        } else {
            Error::NotJson(error)
        }
    })?;
    if !is_json_string(envelope.api_version, API_VERSION) {
        return Err(Error::WrongApiVersion(describe(envelope.api_version)));
    }
    if !is_json_string(envelope.kind, KIND) {
        return Err(Error::WrongKind(describe(envelope.kind)));
    }
    match envelope.request {
        Some(RequestMember::Object(members)) => members.into_request(),
        Some(RequestMember::NotAnObject) | None => Err(Error::MissingRequest),
    }
}

/// Is `member` the JSON string `expected` (however it is escaped)?
fn is_json_string(member: Option<&RawValue>, expected: &str) -> bool {
    let Some(raw) = member else {
        return false;
    };
    let text = raw.get();
    // The common case, without unescaping: `"expected"` verbatim.
    if text.len() == expected.len() + 2
        && text.starts_with('"')
        && text.ends_with('"')
        && &text[1..text.len() - 1] == expected
    {
        return true;
    }
    serde_json::from_str::<Cow<'_, str>>(text).is_ok_and(|value| value == expected)
}

fn describe(member: Option<&RawValue>) -> String {
    match member {
        None => "nothing".to_string(),
        Some(raw) => {
            let mut text = raw.get().to_string();
            if text.len() > 64 {
                let cut = (0..=64)
                    .rev()
                    .find(|index| text.is_char_boundary(*index))
                    .unwrap_or(0);
                text.truncate(cut);
                text.push('…');
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": API_VERSION, "kind": KIND, "request": request}))
            .unwrap()
    }

    #[test]
    fn parse_review_checks_the_envelope() {
        let body = review(json!({"uid": "abc", "operation": "CREATE"}));
        let parsed = parse_review(&body).unwrap();
        assert_eq!(parsed.uid, "abc");
        assert_eq!(parsed.operation, Operation::Create);
        assert!(parsed.object.is_none());

        assert!(matches!(parse_review(b"{nope"), Err(Error::NotJson(_))));
        assert!(matches!(parse_review(b"[1]"), Err(Error::NotAnObject)));
        assert!(matches!(
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}"#),
            Err(Error::WrongApiVersion(_))
        ));
        assert!(matches!(
            parse_review(
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"a"}}"#
            ),
            Err(Error::WrongKind(_))
        ));
        assert!(matches!(
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            Err(Error::MissingRequest)
        ));
        assert!(matches!(
            parse_review(&review(json!({"uid": 7}))),
            Err(Error::MissingUid)
        ));
        assert!(matches!(
            parse_review(&review(json!("not an object"))),
            Err(Error::MissingRequest)
        ));
        assert!(matches!(
            parse_review(b"  \"text\""),
            Err(Error::NotAnObject)
        ));
        assert!(matches!(parse_review(b""), Err(Error::NotJson(_))));
        assert!(matches!(
            parse_review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a"}} trailing"#),
            Err(Error::NotJson(_))
        ));
    }

    #[test]
    fn the_request_members_are_read_without_a_tree() {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "aé"}});
        let body = review(json!({
            "uid": "u-1", "operation": "UPDATE", "dryRun": true, "namespace": "shop", "name": "web",
            "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
            "object": object, "oldObject": null, "userInfo": {"username": "alice"}
        }));
        let parsed = parse_review(&body).unwrap();
        assert_eq!(parsed.uid, "u-1");
        assert_eq!(parsed.operation, Operation::Update);
        assert!(parsed.dry_run);
        assert_eq!(parsed.namespace.as_deref(), Some("shop"));
        assert_eq!(parsed.name.as_deref(), Some("web"));
        assert_eq!(parsed.kind.kind, "HTTPRoute");
        assert_eq!(parsed.kind.group, "gateway.networking.k8s.io");
        match parsed.object() {
            Some(Object::Namespace(namespace)) => assert_eq!(namespace.meta.name(), "aé"),
            other => panic!("expected the Namespace, got {other:?}"),
        }
        assert!(parsed.old_object.is_none());
        // Members of the wrong type read as absent; only the uid is required.
        let body = review(json!({"uid": "u", "operation": 5, "kind": "x", "dryRun": "yes"}));
        let odd = parse_review(&body).unwrap();
        assert_eq!(
            (odd.operation, &*odd.kind.kind, odd.dry_run),
            (Operation::Unknown, "", false)
        );
        // Escaped envelope strings still match.
        let escaped = br#"{"apiVersion":"admission.k8s.io\/v1","kind":"Admission\u0052eview","request":{"uid":"a"}}"#;
        assert_eq!(parse_review(escaped).unwrap().uid, "a");
    }

    /// Every review the one-pass read takes must read the same through the tolerant path, and
    /// every review the scan takes the same as through the one-pass read.
    fn assert_both_paths_agree(body: &[u8]) -> bool {
        assert_paths_agree(body).0
    }

    /// (read by the one-pass serde read, read by the scan)
    fn assert_paths_agree(body: &[u8]) -> (bool, bool) {
        let text = String::from_utf8_lossy(body);
        let tolerant = parse_tolerantly(body).expect("a well-formed review");
        let typed = std::str::from_utf8(body).ok().and_then(parse_typed);
        if let Some(typed) = &typed {
            assert_eq!(typed, &tolerant, "{text}");
        }
        let scanned = std::str::from_utf8(body).ok().and_then(scan_review);
        if let Some(scanned) = &scanned {
            assert_eq!(Some(scanned), typed.as_ref(), "{text}");
        }
        assert_eq!(parse_review(body).expect("a well-formed review"), tolerant);
        (typed.is_some(), scanned.is_some())
    }

    #[test]
    fn the_scan_reads_route_reviews_as_the_serde_reads_do() {
        let route = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop", "generation": 3, "uid": "x",
                "creationTimestamp": null, "resourceVersion": "17",
                "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{}}\n",
                                "note": "tab\there \u{e9}"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"k:{\"name\":\"gw\"}": {}}}}]},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "infra", "port": 443, "kind": "Gateway"},
                                    {"name": "other", "group": "example.net", "kind": "Thing", "sectionName": null}],
                     "hostnames": ["web.example.com", "Web.Example.com."],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "weight": 1.5e0}]},
            "status": {"parents": [{"parentRef": {"name": "gw", "namespace": "infra"}, "controllerName": "c",
                                    "conditions": [{"type": "Accepted", "status": "True", "observedGeneration": 3,
                                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}
        });
        let mut old = route.clone();
        old["spec"]["hostnames"] = json!(["old.example.com"]);
        old["status"]["parents"][0]["conditions"][0]["status"] = json!(false);
        let scanned = [
            json!({"uid": "u1", "kind": {"group": "gateway.networking.k8s.io", "version": "v1", "kind": "HTTPRoute"},
                   "operation": "UPDATE", "namespace": "shop", "name": "web", "dryRun": false,
                   "userInfo": {"username": "a", "groups": ["x"]}, "object": route, "oldObject": old}),
            json!({"uid": "u2", "operation": "CREATE", "object": route.clone(), "oldObject": null}),
            json!({"uid": "u3", "operation": "DELETE", "object": null, "oldObject": route.clone()}),
            // A route the projection cannot read: the same error from both.
            json!({"uid": "u4", "operation": "CREATE", "object": {"apiVersion": "gateway.networking.k8s.io/v1",
                   "kind": "GRPCRoute", "metadata": {"namespace": "a"}}}),
        ];
        for request in scanned {
            assert_eq!(assert_paths_agree(&review(request)), (true, true));
        }
        // Left to the serde readers: another kind, a member of another type, a repeated
        // member, an escaped member name, a lone surrogate.
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}});
        let left = [
            review(json!({"uid": "u", "operation": "CREATE", "object": namespace})),
            review(json!({"uid": "u", "operation": 5, "object": route.clone()})),
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","uid":"b"}}"#.to_vec(),
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"u\u0069d":"a"}}"#.to_vec(),
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"\ud800"}}"#.to_vec(),
        ];
        for body in &left {
            let text = std::str::from_utf8(body).unwrap();
            assert!(scan_review(text).is_none(), "{text}");
        }
        // ...which still read them: the Namespace, and the route beside an odd operation.
        let namespace_review = parse_review(&left[0]).unwrap();
        assert!(matches!(
            namespace_review.object(),
            Some(Object::Namespace(_))
        ));
        let odd_operation = parse_review(&left[1]).unwrap();
        assert_eq!(odd_operation.operation, Operation::Unknown);
        assert!(matches!(odd_operation.object(), Some(Object::Route(_))));
        let trailing = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a"}} x"#;
        assert!(scan_review(std::str::from_utf8(trailing).unwrap()).is_none());
        assert!(parse_review(trailing).is_err());
    }

    #[test]
    fn the_one_pass_read_agrees_with_the_tolerant_read_on_every_review_fixture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let (mut read_in_one_pass, mut scanned, mut route_reviews) = (0, 0, 0);
        let mut files = 0;
        for dir in ["tests/fixtures/admission/reviews", "examples/admission"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let body = std::fs::read(&path).unwrap();
                files += 1;
                let (one_pass, scan) = assert_paths_agree(&body);
                read_in_one_pass += usize::from(one_pass);
                scanned += usize::from(scan);
                let request = parse_review(&body).unwrap();
                let is_route = |object: &Option<ReviewObject>| {
                    matches!(object, None | Some(Ok(Some(Object::Route(_)))))
                };
                route_reviews += usize::from(
                    one_pass && is_route(&request.object) && is_route(&request.old_object),
                );
            }
        }
        assert!(files >= 20, "{files} fixtures");
        // Only the deliberately unreadable object falls back to the tolerant read.
        assert_eq!(read_in_one_pass, files - 1);
        // The scan takes every review of routes.
        assert!(route_reviews >= 15, "{route_reviews} route reviews");
        assert_eq!(scanned, route_reviews);
    }

    #[test]
    fn objects_the_one_pass_read_cannot_take_read_as_before() {
        let route = |spec: Value| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                   "metadata": {"name": "r", "namespace": "a"}, "spec": spec})
        };
        let cases = [
            // A field of the wrong type: unreadable, with its path.
            json!({"uid": "u", "operation": "CREATE", "object": route(json!({"hostnames": "x"}))}),
            // A foreign kind with a shape unlike ours: not ours to read.
            json!({"uid": "u", "operation": "CREATE", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "spec": [1]}}),
            // Odd member types next to a readable object.
            json!({"uid": "u", "operation": 7, "dryRun": "no", "object": route(json!({"hostnames": ["a.example.com"]}))}),
            json!({"uid": "u", "kind": null, "namespace": 3, "oldObject": route(json!({}))}),
            // Readable in one pass.
            json!({"uid": "u", "operation": "UPDATE", "dryRun": true, "object": route(json!({"hostnames": ["a.example.com"]})), "oldObject": route(json!({}))}),
        ];
        let mut one_pass = Vec::new();
        for request in cases {
            one_pass.push(assert_both_paths_agree(&review(request)));
        }
        assert_eq!(one_pass, [false, false, false, false, true]);
        let body = review(json!({"uid": "u", "object": route(json!({"hostnames": "x"}))}));
        let unreadable = parse_review(&body).unwrap();
        match unreadable.object {
            Some(Err(DecodeError::Field { path, .. })) => assert_eq!(path, "spec.hostnames"),
            other => panic!("expected a field error, got {other:?}"),
        }
        let body = review(
            json!({"uid": "u", "object": {"apiVersion": "v1", "kind": "ConfigMap", "spec": [1]}}),
        );
        let foreign = parse_review(&body).unwrap();
        assert!(matches!(foreign.object, Some(Ok(None))));
    }
}
