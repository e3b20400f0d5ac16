//! Text held in one shared allocation behind a one-word pointer: an object's identity
//! ([`ObjectKey`]) and a DNS name ([`Name`]). The index holds each of these in several maps at
//! once, for every route: `Arc<str>` takes two words in each, and a struct of boxed strings one
//! allocation per string (docs/benchmarks.md, "Memory of the index").

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use triomphe::ThinArc;

use super::ObjectKind;

/// Strings joined, with a fixed header, in one reference-counted allocation.
struct ThinText<H>(ThinArc<H, u8>);

impl<H> ThinText<H> {
    fn new(header: H, text: &str) -> ThinText<H> {
        ThinText(ThinArc::from_header_and_slice(header, text.as_bytes()))
    }

    /// `first` and `second` joined; short texts are joined on the stack, not in a buffer on
    /// the heap.
    fn joined(header: H, first: &str, second: &str) -> ThinText<H> {
        let mut buffer = [0u8; 256];
        let len = first.len() + second.len();
        match buffer.get_mut(..len) {
            Some(joined) => {
                let (head, tail) = joined.split_at_mut(first.len());
                head.copy_from_slice(first.as_bytes());
                tail.copy_from_slice(second.as_bytes());
                ThinText(ThinArc::from_header_and_slice(header, joined))
            }
            None => ThinText::new(header, &[first, second].concat()),
        }
    }

    #[inline]
    fn header(&self) -> &H {
        &self.0.header.header
    }

    #[inline]
    fn text(&self) -> &str {
        // SAFETY: the bytes are only ever written by `new` and `joined`, from whole `&str`s, and
        // UTF-8 strings joined are UTF-8.
        unsafe { std::str::from_utf8_unchecked(&self.0.slice) }
    }

    fn same_allocation(&self, other: &ThinText<H>) -> bool {
        std::ptr::eq(&self.0.header, &other.0.header)
    }
}

impl<H> Clone for ThinText<H> {
    fn clone(&self) -> ThinText<H> {
        ThinText(self.0.clone())
    }
}

/// Identity of an object: kind, namespace ("" for cluster-scoped) and name, in one allocation
/// shared by the object's metadata and every map that names it. Ordered by kind, then
/// namespace, then name.
#[derive(Clone)]
pub struct ObjectKey(ThinText<KeyHeader>);

/// The kind's position in [`ObjectKind::ALL`] in the low byte, the namespace's length above it:
/// one word. A namespace of 2^56 bytes cannot be in memory.
#[derive(Clone, Copy, PartialEq, Eq)]
struct KeyHeader(u64);

impl KeyHeader {
    fn new(kind: ObjectKind, namespace_len: usize) -> KeyHeader {
        let position = ObjectKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        KeyHeader(((namespace_len as u64) << 8) | position as u64)
    }

    fn kind(self) -> ObjectKind {
        let position = (self.0 & 0xff) as usize;
        ObjectKind::ALL
            .get(position)
            .copied()
            .unwrap_or(ObjectKind::Namespace)
    }
}

fn header_namespace_len(header: u64) -> usize {
    (header >> 8) as usize
}

impl ObjectKey {
    pub fn new(kind: ObjectKind, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey(ThinText::joined(
            KeyHeader::new(kind, namespace.len()),
            namespace,
            name,
        ))
    }

    pub fn kind(&self) -> ObjectKind {
        self.0.header().kind()
    }

    pub fn namespace(&self) -> &str {
        self.parts().1
    }

    pub fn name(&self) -> &str {
        self.parts().2
    }

    /// The kind's position, the namespace and the name, read through the pointer once: keys
    /// are compared on every lookup in the index.
    #[inline]
    fn parts(&self) -> (u8, &str, &str) {
        let KeyHeader(header) = *self.0.header();
        let text = self.0.text();
        let (namespace, name) = text
            .split_at_checked(header_namespace_len(header))
            .unwrap_or((text, ""));
        ((header & 0xff) as u8, namespace, name)
    }

    pub fn ptr_eq(a: &ObjectKey, b: &ObjectKey) -> bool {
        a.0.same_allocation(&b.0)
    }

    /// Heap bytes of the shared allocation (for the memory benchmarks).
    pub fn heap_bytes(&self) -> usize {
        3 * std::mem::size_of::<u64>() + self.0.text().len()
    }
}

impl PartialEq for ObjectKey {
    #[inline]
    fn eq(&self, other: &ObjectKey) -> bool {
        self.0.same_allocation(&other.0)
            || (self.0.header() == other.0.header() && self.0.text() == other.0.text())
    }
}

impl Eq for ObjectKey {}

impl Ord for ObjectKey {
    #[inline]
    fn cmp(&self, other: &ObjectKey) -> Ordering {
        if self.0.same_allocation(&other.0) {
            return Ordering::Equal;
        }
        // Positions in `ObjectKind::ALL` are in the kinds' own order.
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &ObjectKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for ObjectKey {
    fn hash<S: Hasher>(&self, state: &mut S) {
        self.parts().hash(state);
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectKey")
            .field("kind", &self.kind())
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace().is_empty() {
            write!(f, "{}/{}", self.kind(), self.name())
        } else {
            write!(f, "{}/{}/{}", self.kind(), self.namespace(), self.name())
        }
    }
}

/// A DNS name as a route wrote it, shared by the route, its evaluation's claims and the index's
/// name → claimants map. Reads, compares and hashes as its text.
#[derive(Clone)]
pub struct Name(ThinText<()>);

impl Name {
    pub fn new(text: &str) -> Name {
        Name(ThinText::new((), text))
    }

    pub fn as_str(&self) -> &str {
        self.0.text()
    }

    pub fn ptr_eq(a: &Name, b: &Name) -> bool {
        a.0.same_allocation(&b.0)
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        self.0.text()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.0.text()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.0.text()
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Name {
        Name::new(&text)
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        Name::ptr_eq(self, other) || self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for Name {
    fn hash<S: Hasher>(&self, state: &mut S) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{Name, ObjectKey};
    use crate::model::ObjectKind;

    #[test]
    fn a_key_reads_back_its_parts_and_orders_as_kind_namespace_name() {
        let cases = [
            (ObjectKind::HTTPRoute, "a-b", "y"),
            (ObjectKind::HTTPRoute, "a", "x"),
            (ObjectKind::HTTPRoute, "a", ""),
            (ObjectKind::HTTPRoute, "", "ab"),
            (ObjectKind::Gateway, "ü", "ключ"),
            (ObjectKind::UDPRoute, "a", "b"),
            (ObjectKind::Namespace, "", "a"),
        ];
        for (kind, namespace, name) in cases {
            let key = ObjectKey::new(kind, namespace, name);
            assert_eq!(
                (key.kind(), key.namespace(), key.name()),
                (kind, namespace, name)
            );
            assert_eq!(key, ObjectKey::new(kind, namespace, name));
        }
        // Past the stack buffer the parts are joined on the heap.
        let long = "n".repeat(300);
        let key = ObjectKey::new(ObjectKind::HTTPRoute, &long, "web");
        assert_eq!((key.namespace(), key.name()), (long.as_str(), "web"));
        // "a"/"bc" and "ab"/"c" join to the same text; the namespace's length tells them apart.
        assert_ne!(
            ObjectKey::new(ObjectKind::HTTPRoute, "a", "bc"),
            ObjectKey::new(ObjectKind::HTTPRoute, "ab", "c")
        );
        let keys: BTreeSet<ObjectKey> = cases
            .iter()
            .map(|(kind, namespace, name)| ObjectKey::new(*kind, namespace, name))
            .collect();
        let mut tuples = cases.to_vec();
        tuples.sort();
        let read: Vec<_> = keys
            .iter()
            .map(|key| (key.kind(), key.namespace(), key.name()))
            .collect();
        assert_eq!(read, tuples);
        assert_eq!(
            ObjectKey::new(ObjectKind::Namespace, "", "apps").to_string(),
            "Namespace/apps"
        );
        assert_eq!(
            ObjectKey::new(ObjectKind::HTTPRoute, "apps", "web").to_string(),
            "HTTPRoute/apps/web"
        );
    }

    #[test]
    fn a_name_behaves_as_its_text() {
        let names: BTreeSet<Name> = ["b.example", "a.example", "", "ä.example"]
            .into_iter()
            .map(Name::from)
            .collect();
        let read: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        assert_eq!(read, ["", "a.example", "b.example", "ä.example"]);
        assert!(names.contains("a.example"));
        let name = Name::from("a.example");
        assert!(Name::ptr_eq(&name, &name.clone()));
        assert!(!Name::ptr_eq(&name, &Name::from("a.example")));
        assert_eq!(name, Name::from("a.example"));
        assert_eq!(format!("{name:?} {name}"), "\"a.example\" a.example");
    }
}
