//! A strict JSON reader for the one shape the webhook reads on nearly every request: a route
//! under review. It walks the text once, borrows what it can, passes over what it does not
//! read without building anything, and fills the decoder's own raw shapes, which the same
//! projection as every other read then turns into the model's objects.
//!
//! It answers only when it is sure to give what the serde decoder gives. Anything else (other
//! kinds, a member of an unusual type, `null` where serde would refuse it, a repeated member,
//! escapes in a member's name, a lone surrogate, deep nesting, any JSON error) makes it answer
//! `None`, and the caller reads the text again with the serde decoder, which gives the answer
//! or the precise error. Tests and the `admission_review` fuzz target check both readers agree.

use std::borrow::Cow;

use std::sync::Arc;

use super::raw::{
    self, MetaParts, RawCondition, RawParentRef, RawParentStatus, SharedName, Timestamp, TypeName,
};
use super::{DecodeError, LAST_APPLIED};
use crate::model::{Name, Object, ObjectKind};

/// Deeper than any object the webhook reads, shallower than serde_json's own limit (128): the
/// serde decoder reads what is deeper, and refuses it alike.
const MAX_DEPTH: u32 = 64;

/// A position in JSON text. Every reading method returns `None` when the text is not what it
/// reads, leaving the cursor somewhere in between: the caller then gives up on the whole text.
pub struct Cursor<'a> {
    text: &'a str,
    at: usize,
    depth: u32,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Cursor<'a> {
        Cursor {
            text,
            at: 0,
            depth: 0,
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn eat_literal(&mut self, literal: &str) -> Option<()> {
        self.skip_whitespace();
        let rest = self.bytes().get(self.at..)?;
        rest.starts_with(literal.as_bytes())
            .then(|| self.at += literal.len())
    }

    /// Only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.at == self.text.len()
    }

    /// Consumes a `null` and says so; leaves anything else.
    pub fn null(&mut self) -> bool {
        self.eat_literal("null").is_some()
    }

    /// An object, calling `member` with each member's name (None for a name with escapes, which
    /// `member` may only pass over) and the cursor at its value, which `member` must consume.
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Option<&'a str>) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.enter()?;
        if self.peek()? == b'}' {
            self.at += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            let name = self.member_name()?;
            self.eat(b':')?;
            member(self, name)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array, calling `element` with the cursor at each element, which it must consume.
    pub fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.enter()?;
        if self.peek()? == b']' {
            self.at += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            element(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// A member's name: borrowed when it has no escapes; None (checked and passed over) when it
    /// has, since an escaped name may spell one of the names the caller reads.
    fn member_name(&mut self) -> Option<Option<&'a str>> {
        self.eat(b'"')?;
        let start = self.at;
        self.plain_run()?;
        if self.bytes()[self.at] == b'"' {
            self.at += 1;
            return Some(Some(&self.text[start..self.at - 1]));
        }
        self.rest_of_string(None)?;
        Some(None)
    }

    /// A string: borrowed when it has no escapes, else unescaped into its own buffer.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        self.plain_run()?;
        if self.bytes()[self.at] == b'"' {
            self.at += 1;
            return Some(Cow::Borrowed(&self.text[start..self.at - 1]));
        }
        let mut unescaped = String::from(&self.text[start..self.at]);
        self.rest_of_string(Some(&mut unescaped))?;
        Some(Cow::Owned(unescaped))
    }

    /// A string, checked as [`Self::string`] reads it but not kept.
    pub fn check_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        self.plain_run()?;
        self.rest_of_string(None)
    }

    /// Moves to the next `"` or `\`; None at a control character (not allowed in JSON strings)
    /// or at the end of the text.
    fn plain_run(&mut self) -> Option<()> {
        // Eight bytes at a time: most texts are names a few dozen bytes long, and annotations
        // can be kilobytes. In each word, the lowest byte flagged is exactly the first that
        // ends the run (a flag can only be carried upwards from a true one).
        const ONES: u64 = u64::from_le_bytes([1; 8]);
        const HIGH_BITS: u64 = u64::from_le_bytes([0x80; 8]);
        let has_zero_byte = |word: u64| word.wrapping_sub(ONES) & !word & HIGH_BITS;
        while let Some(chunk) = self.bytes().get(self.at..self.at + 8) {
            let mut word_bytes = [0; 8];
            word_bytes.copy_from_slice(chunk);
            let word = u64::from_le_bytes(word_bytes);
            let ends_run = has_zero_byte(word ^ (ONES * u64::from(b'"')))
                | has_zero_byte(word ^ (ONES * u64::from(b'\\')))
                // A byte below 0x20: a control character.
                | (word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS);
            if ends_run != 0 {
                self.at += (ends_run.trailing_zeros() / 8) as usize;
                return (self.bytes()[self.at] >= 0x20).then_some(());
            }
            self.at += 8;
        }
        loop {
            match *self.bytes().get(self.at)? {
                b'"' | b'\\' => return Some(()),
                0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
    }

    /// From a `"` or `\` found by [`Self::plain_run`] to past the closing quote, unescaping into
    /// `out` when given.
    fn rest_of_string(&mut self, mut out: Option<&mut String>) -> Option<()> {
        loop {
            if self.bytes()[self.at] == b'"' {
                self.at += 1;
                return Some(());
            }
            // A backslash.
            let escaped = *self.bytes().get(self.at + 1)?;
            self.at += 2;
            let unescaped = match escaped {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                // Surrogates (halves of a pair, or lone) are left to serde_json, whose reading
                // of them differs between the values it keeps and those it passes over.
                b'u' => char::from_u32(self.hex4()?)?,
                _ => return None,
            };
            if let Some(out) = out.as_deref_mut() {
                out.push(unescaped);
            }
            let start = self.at;
            self.plain_run()?;
            if let Some(out) = out.as_deref_mut() {
                out.push_str(&self.text[start..self.at]);
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.at..self.at + 4)?;
        let mut value = 0;
        for digit in digits {
            value = value * 16 + char::from(*digit).to_digit(16)?;
        }
        self.at += 4;
        Some(value)
    }

    /// Any value, checked to be JSON and passed over.
    pub fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|cursor, _| cursor.skip()),
            b'[' => self.array(Cursor::skip),
            b'"' => self.check_string(),
            b't' => self.eat_literal("true"),
            b'f' => self.eat_literal("false"),
            b'n' => self.eat_literal("null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, passed over.
    fn number(&mut self) -> Option<()> {
        if self.bytes().get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match *self.bytes().get(self.at)? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.bytes().get(self.at) == Some(&b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.bytes().get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes().get(self.at) {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.bytes().get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    /// An integer as serde reads one into an `i64`: no fraction or exponent, no `-0` (which
    /// serde_json reads as a float), within range.
    pub fn integer(&mut self) -> Option<i64> {
        self.skip_whitespace();
        let negative = self.bytes().get(self.at) == Some(&b'-');
        if negative {
            self.at += 1;
        }
        let start = self.at;
        let mut magnitude: u64 = 0;
        while let Some(digit) = self
            .bytes()
            .get(self.at)
            .filter(|byte| byte.is_ascii_digit())
        {
            magnitude = magnitude
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && self.bytes()[start] == b'0';
        if digits == 0 || leading_zero {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes().get(self.at) {
            return None;
        }
        let value = i64::try_from(magnitude).ok()?;
        match (negative, value) {
            (true, 0) => None,
            (true, value) => Some(-value),
            (false, value) => Some(value),
        }
    }

    pub fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.eat_literal("true").map(|()| true),
            b'f' => self.eat_literal("false").map(|()| false),
            _ => None,
        }
    }
}

/// Marks a member read; None when it was already (serde refuses a repeated member).
pub fn first_time(seen: &mut u32, member: u32) -> Option<()> {
    let bit = 1 << member;
    (*seen & bit == 0).then(|| *seen |= bit)
}

/// `null`, or what `read` reads.
pub fn nullable<'a, T>(
    cursor: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if cursor.null() {
        Some(None)
    } else {
        read(cursor).map(Some)
    }
}

/// An array, each element read by `element`; `null` reads as empty (the serde decoder's
/// `nullable` lists).
fn list<'a, T>(
    cursor: &mut Cursor<'a>,
    mut element: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<Vec<T>> {
    let mut items = Vec::new();
    if !cursor.null() {
        cursor.array(|cursor| {
            items.push(element(cursor)?);
            Some(())
        })?;
    }
    Some(items)
}

fn owned_string(cursor: &mut Cursor<'_>) -> Option<String> {
    cursor.string().map(Cow::into_owned)
}

/// A route under review, as the projection reads it (`Ok(None)` never: other kinds are left
/// to the serde decoder). None when only the serde decoder can tell.
pub fn route(cursor: &mut Cursor<'_>) -> Option<Result<Option<Object>, DecodeError>> {
    let (mut api_version, mut kind) = (None, None);
    let mut metadata = Metadata::default();
    let mut spec = raw::Spec::default();
    let mut status = None;
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "apiVersion" => {
                first_time(&mut seen, 0)?;
                api_version = Some(TypeName::from_text(&cursor.string()?));
            }
            "kind" => {
                first_time(&mut seen, 1)?;
                kind = Some(TypeName::from_text(&cursor.string()?));
            }
            "metadata" => {
                first_time(&mut seen, 2)?;
                read_metadata(cursor, &mut metadata)?;
            }
            "spec" => {
                first_time(&mut seen, 3)?;
                read_spec(cursor, &mut spec)?;
            }
            "status" => {
                first_time(&mut seen, 4)?;
                status = Some(read_status(cursor)?);
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    let kind = ObjectKind::from_type(api_version?.as_str()?, kind?.as_str()?)?;
    if !kind.is_route() {
        return None;
    }
    let parts = MetaParts {
        name: metadata.name.as_deref(),
        namespace: metadata.namespace.as_deref(),
        labels: metadata.labels,
        annotations: metadata.annotations,
        creation_timestamp: metadata.creation_timestamp,
        generation: metadata.generation,
    };
    let route = parts
        .into_meta(kind)
        .and_then(|meta| raw::route(kind, meta, spec, status.unwrap_or_default()));
    Some(route.map(|route| Some(Object::Route(Arc::new(route)))))
}

/// `metadata` as read in place: its texts borrow from the review where they have no escapes.
#[derive(Default)]
struct Metadata<'a> {
    name: Option<Cow<'a, str>>,
    namespace: Option<Cow<'a, str>>,
    labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    annotations: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    creation_timestamp: Option<Timestamp>,
    generation: Option<i64>,
}

fn read_metadata<'a>(cursor: &mut Cursor<'a>, metadata: &mut Metadata<'a>) -> Option<()> {
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "name" => {
                first_time(&mut seen, 0)?;
                metadata.name = nullable(cursor, Cursor::string)?;
            }
            "namespace" => {
                first_time(&mut seen, 1)?;
                metadata.namespace = nullable(cursor, Cursor::string)?;
            }
            "labels" => {
                first_time(&mut seen, 2)?;
                metadata.labels = nullable(cursor, string_pairs)?.unwrap_or_default();
            }
            "annotations" => {
                first_time(&mut seen, 3)?;
                metadata.annotations = nullable(cursor, string_pairs)?.unwrap_or_default();
            }
            "creationTimestamp" => {
                first_time(&mut seen, 4)?;
                metadata.creation_timestamp = nullable(cursor, |cursor| {
                    Some(Timestamp::from_text(&cursor.string()?))
                })?;
            }
            "generation" => {
                first_time(&mut seen, 5)?;
                metadata.generation = nullable(cursor, Cursor::integer)?;
            }
            "resourceVersion" => {
                // Read by serde for watches; the projection does not keep it.
                first_time(&mut seen, 6)?;
                nullable(cursor, Cursor::check_string)?;
            }
            _ => cursor.skip()?,
        }
        Some(())
    })
}

/// Labels or annotations, as the serde decoder's `StringPairs` reads them (the last-applied
/// configuration checked, not kept).
type Pairs<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;

fn string_pairs<'a>(cursor: &mut Cursor<'a>) -> Option<Pairs<'a>> {
    let mut pairs = Vec::new();
    cursor.object(|cursor, key| {
        let key = key?;
        if key == LAST_APPLIED {
            cursor.check_string()
        } else {
            pairs.push((Cow::Borrowed(key), cursor.string()?));
            Some(())
        }
    })?;
    Some(pairs)
}

fn read_spec(cursor: &mut Cursor<'_>, spec: &mut raw::Spec) -> Option<()> {
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "parentRefs" => {
                first_time(&mut seen, 0)?;
                spec.parent_refs = list(cursor, parent_ref)?;
            }
            "hostnames" => {
                first_time(&mut seen, 1)?;
                spec.hostnames = list(cursor, |cursor| Some(Name::new(&cursor.string()?)))?;
            }
            // Members of Gateways and ListenerSets: the serde decoder reads them.
            "listeners" | "allowedListeners" | "parentRef" => return None,
            _ => cursor.skip()?,
        }
        Some(())
    })
}

fn parent_ref(cursor: &mut Cursor<'_>) -> Option<RawParentRef> {
    let (mut group, mut kind, mut namespace, mut name, mut section_name, mut port) =
        (None, None, None, None, None, None);
    let mut seen = 0;
    let shared = |cursor: &mut Cursor<'_>| Some(SharedName::from_text(&cursor.string()?));
    cursor.object(|cursor, member| {
        match member? {
            "group" => {
                first_time(&mut seen, 0)?;
                group = nullable(cursor, shared)?;
            }
            "kind" => {
                first_time(&mut seen, 1)?;
                kind = nullable(cursor, shared)?;
            }
            "namespace" => {
                first_time(&mut seen, 2)?;
                namespace = nullable(cursor, owned_string)?;
            }
            "name" => {
                first_time(&mut seen, 3)?;
                name = Some(owned_string(cursor)?);
            }
            "sectionName" => {
                first_time(&mut seen, 4)?;
                section_name = nullable(cursor, owned_string)?;
            }
            "port" => {
                first_time(&mut seen, 5)?;
                port = nullable(cursor, |cursor| i32::try_from(cursor.integer()?).ok())?;
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    Some(RawParentRef {
        group,
        kind,
        namespace,
        name: name?,
        section_name,
        port,
    })
}

fn read_status(cursor: &mut Cursor<'_>) -> Option<raw::Status> {
    let mut status = raw::Status::default();
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "parents" => {
                first_time(&mut seen, 0)?;
                status.parents = list(cursor, parent_status)?;
            }
            // Members of Gateways and ListenerSets: the serde decoder reads them.
            "addresses" | "conditions" | "listeners" => return None,
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    Some(status)
}

fn parent_status(cursor: &mut Cursor<'_>) -> Option<RawParentStatus> {
    let (mut parent_ref_read, mut conditions) = (None, Vec::new());
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "parentRef" => {
                first_time(&mut seen, 0)?;
                parent_ref_read = Some(parent_ref(cursor)?);
            }
            "conditions" => {
                first_time(&mut seen, 1)?;
                conditions = list(cursor, condition)?;
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    Some(RawParentStatus {
        parent_ref: parent_ref_read?,
        conditions,
    })
}

fn condition(cursor: &mut Cursor<'_>) -> Option<RawCondition> {
    let (mut kind, mut state, mut observed_generation) = (None, None, None);
    let mut seen = 0;
    cursor.object(|cursor, name| {
        match name? {
            "type" => {
                first_time(&mut seen, 0)?;
                kind = Some(owned_string(cursor)?);
            }
            "status" => {
                first_time(&mut seen, 1)?;
                // Text, or a YAML-style boolean as the serde decoder takes it.
                state = Some(match cursor.peek()? {
                    b'"' => owned_string(cursor)?,
                    _ => if cursor.boolean()? { "True" } else { "False" }.to_owned(),
                });
            }
            "observedGeneration" => {
                first_time(&mut seen, 2)?;
                observed_generation = nullable(cursor, Cursor::integer)?;
            }
            _ => cursor.skip()?,
        }
        Some(())
    })?;
    Some(RawCondition {
        kind: kind?,
        status: state?,
        observed_generation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(text: &str) -> Option<usize> {
        let mut cursor = Cursor::new(text);
        cursor.skip()?;
        cursor.at_end().then_some(cursor.at)
    }

    #[test]
    fn passes_over_exactly_what_json_allows() {
        for valid in [
            r#"{"a": [1, -0.5e+3, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"], "k:{\"n\":1}": {}}"#,
            "[]",
            " 0 ",
            "-0",
            "1E9",
        ] {
            assert!(skipped(valid).is_some(), "{valid}");
            serde_json::from_str::<serde::de::IgnoredAny>(valid).expect(valid);
        }
        for invalid in [
            "01",
            "1.",
            ".5",
            "-",
            "+1",
            "1e",
            "tru",
            "nul",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\"}",
            "\"\u{1}\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[",
            "{",
            "\"open",
            "1 2",
        ] {
            assert!(skipped(invalid).is_none(), "{invalid:?}");
            assert!(
                serde_json::from_str::<serde::de::IgnoredAny>(invalid).is_err(),
                "{invalid:?}"
            );
        }
        // Surrogates are left to serde_json: it refuses a lone one in a string it keeps, but not
        // in one it passes over.
        assert!(Cursor::new(r#""\uD800""#).string().is_none());
        assert!(skipped(r#""\uD83D\uDE00""#).is_none());
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(skipped(&deep).is_none());
    }

    #[test]
    fn reads_integers_as_serde_does() {
        for (text, expected) in [
            ("0", Some(0)),
            ("42", Some(42)),
            ("-7", Some(-7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("9223372036854775808", None),
            ("-0", None),
            ("1.0", None),
            ("1e2", None),
            ("007", None),
        ] {
            assert_eq!(Cursor::new(text).integer(), expected, "{text}");
            let serde: Option<i64> = serde_json::from_str(text).ok();
            assert_eq!(serde, expected, "serde on {text}");
        }
    }

    #[test]
    fn long_strings_end_and_fail_where_serde_says() {
        for at in 0..20 {
            for (inside, quoted) in [
                ("\\\"", true),
                ("\\n", true),
                ("\u{1}", false),
                ("\u{e9}", true),
            ] {
                let text = format!("\"{}{inside}{}\"", "a".repeat(at), "b".repeat(at % 9));
                let ours = Cursor::new(&text).string().map(Cow::into_owned);
                let serde: Option<String> = serde_json::from_str(&text).ok();
                assert_eq!(ours, serde, "{text:?}");
                assert_eq!(ours.is_some(), quoted, "{text:?}");
            }
        }
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        assert!(matches!(
            Cursor::new(r#""plain""#).string(),
            Some(Cow::Borrowed("plain"))
        ));
        let unescaped = Cursor::new(r#""a\"b\u00e9c""#).string();
        assert_eq!(unescaped.as_deref(), Some("a\"béc"));
        assert!(matches!(unescaped, Some(Cow::Owned(_))));
    }
}
