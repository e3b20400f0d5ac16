//! Hostnames: validation, normalisation, wildcard matching and listener/route intersection.

use std::borrow::Cow;

/// Why a hostname is not a valid DNS name for gateway-dns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostnameError {
    #[error("is empty")]
    Empty,
    #[error("is an IP address, not a DNS name")]
    IpAddress,
    #[error("is longer than 253 characters")]
    TooLong,
    #[error("has a label longer than 63 characters")]
    LabelTooLong,
    #[error("has an empty label")]
    EmptyLabel,
    #[error("has a label that starts or ends with '-'")]
    HyphenAtEdge,
    #[error("contains {0:?}; only a-z, 0-9, '-' and '.' are allowed")]
    BadCharacter(char),
    #[error("may only have '*' as its whole first label")]
    MisplacedWildcard,
}

/// RFC 1123 DNS subdomain check as Kubernetes does it (lower case only, no wildcard).
pub fn is_dns1123_domain(name: &str) -> bool {
    check_labels(name).is_ok()
}

fn check_labels(name: &str) -> Result<(), HostnameError> {
    if name.is_empty() {
        return Err(HostnameError::Empty);
    }
    if name.len() > 253 {
        return Err(HostnameError::TooLong);
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostnameError::EmptyLabel);
        }
        if label.len() > 63 {
            return Err(HostnameError::LabelTooLong);
        }
        if let Some(bad) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Err(if bad == '*' {
                HostnameError::MisplacedWildcard
            } else {
                HostnameError::BadCharacter(bad)
            });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(HostnameError::HyphenAtEdge);
        }
    }
    Ok(())
}

/// Lower-cases and validates a hostname as the Gateway API allows it: RFC 1123, optional leading
/// `*.` label, no IP literals. A single trailing dot is accepted and dropped.
pub fn normalize(raw: &str) -> Result<String, HostnameError> {
    normalize_borrowed(raw).map(Cow::into_owned)
}

/// [`normalize`] without a copy when the name is already in normal form, as nearly every
/// hostname in a manifest is: the webhook normalizes each hostname of every review.
pub fn normalize_borrowed(raw: &str) -> Result<Cow<'_, str>, HostnameError> {
    if is_normal_form(raw) {
        return Ok(Cow::Borrowed(raw));
    }
    normalize_fully(raw).map(Cow::Owned)
}

/// The full path: trims, rejects IP addresses, lower-cases and checks every label.
fn normalize_fully(raw: &str) -> Result<String, HostnameError> {
    let trimmed = raw.strip_suffix('.').unwrap_or(raw);
    if trimmed.is_empty() {
        return Err(HostnameError::Empty);
    }
    if trimmed.parse::<std::net::IpAddr>().is_ok() || is_ipv4_like(trimmed) {
        return Err(HostnameError::IpAddress);
    }
    let lower = trimmed.to_ascii_lowercase();
    let rest = lower.strip_prefix("*.").unwrap_or(&lower);
    if rest.len() + 2 > 253 && lower.starts_with("*.") {
        return Err(HostnameError::TooLong);
    }
    check_labels(rest)?;
    Ok(lower)
}

/// One pass over the bytes: true when `name` is a valid hostname that [`normalize`] would return
/// unchanged (lower case, no trailing dot, not an IPv4 address). False sends the name down the
/// full path, which also says what is wrong with it.
fn is_normal_form(name: &str) -> bool {
    let bytes = name.as_bytes();
    let (wildcard, body) = match bytes.strip_prefix(b"*.") {
        Some(body) => (true, body),
        None => (false, bytes),
    };
    if body.is_empty() || bytes.len() > 253 {
        return false;
    }
    let mut labels = 0;
    let mut label_len = 0;
    let mut numeric_labels = 0;
    let mut label_numeric = true;
    let mut previous = b'.';
    for &byte in body {
        match byte {
            b'.' => {
                if label_len == 0 || previous == b'-' {
                    return false;
                }
                labels += 1;
                numeric_labels += usize::from(label_numeric && label_len <= 3);
                label_len = 0;
                label_numeric = true;
            }
            b'a'..=b'z' | b'0'..=b'9' | b'-' => {
                if label_len == 0 && byte == b'-' {
                    return false;
                }
                label_len += 1;
                if label_len > 63 {
                    return false;
                }
                label_numeric &= byte.is_ascii_digit();
            }
            _ => return false,
        }
        previous = byte;
    }
    if label_len == 0 || previous == b'-' {
        return false;
    }
    labels += 1;
    numeric_labels += usize::from(label_numeric && label_len <= 3);
    // Four short numeric labels read as an IPv4 address: the full path rejects it.
    !(!wildcard && labels == 4 && numeric_labels == 4)
}

/// Four dot-separated decimal numbers: an IPv4 address even when out of range.
fn is_ipv4_like(name: &str) -> bool {
    name.split('.').count() == 4
        && name
            .split('.')
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
}

pub fn is_wildcard(name: &str) -> bool {
    name.starts_with("*.")
}

/// Does wildcard `*.suffix` (given as `suffix`) cover `name`? One or more labels, never the suffix itself.
fn covered_by(suffix: &str, name: &str) -> bool {
    name.len() > suffix.len() + 1
        && name.ends_with(suffix)
        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

/// Intersection of a listener hostname and a route hostname, both already normalized; `None`
/// stands for an unset hostname (matches anything). Returns `Some(None)` when both are unset
/// (the intersection is `*`, i.e. any name), `Some(Some(h))` for a concrete intersection, and
/// `None` when they do not intersect.
pub fn intersect<'a>(listener: Option<&'a str>, route: Option<&'a str>) -> Option<Option<&'a str>> {
    match (listener, route) {
        (None, None) => Some(None),
        (None, Some(r)) => Some(Some(r)),
        (Some(l), None) => Some(Some(l)),
        (Some(l), Some(r)) => intersect_set(l, r).map(Some),
    }
}

fn intersect_set<'a>(l: &'a str, r: &'a str) -> Option<&'a str> {
    match (l.strip_prefix("*."), r.strip_prefix("*.")) {
        (None, None) => (l == r).then_some(l),
        (Some(ls), None) => covered_by(ls, r).then_some(r),
        (None, Some(rs)) => covered_by(rs, l).then_some(l),
        (Some(ls), Some(rs)) => {
            if ls == rs {
                Some(l)
            } else if covered_by(ls, rs) {
                Some(r)
            } else if covered_by(rs, ls) {
                Some(l)
            } else {
                None
            }
        }
    }
}

/// Does `pattern` (exact or wildcard) match the concrete DNS name `name`?
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => covered_by(suffix, name),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_accepts_and_lowercases() {
        assert_eq!(normalize("App.Example.COM").unwrap(), "app.example.com");
        assert_eq!(normalize("*.example.com").unwrap(), "*.example.com");
        assert_eq!(normalize("example.com.").unwrap(), "example.com");
        assert_eq!(normalize("localhost").unwrap(), "localhost");
    }

    #[test]
    fn normalize_rejects() {
        assert_eq!(normalize("").unwrap_err(), HostnameError::Empty);
        assert_eq!(normalize("10.0.0.1").unwrap_err(), HostnameError::IpAddress);
        assert_eq!(normalize("::1").unwrap_err(), HostnameError::IpAddress);
        assert_eq!(
            normalize("999.1.1.1").unwrap_err(),
            HostnameError::IpAddress
        );
        assert_eq!(
            normalize("a.*.example.com").unwrap_err(),
            HostnameError::MisplacedWildcard
        );
        assert_eq!(
            normalize("*example.com").unwrap_err(),
            HostnameError::MisplacedWildcard
        );
        assert_eq!(
            normalize("*").unwrap_err(),
            HostnameError::MisplacedWildcard
        );
        assert_eq!(normalize("a..b").unwrap_err(), HostnameError::EmptyLabel);
        assert_eq!(
            normalize("under_score.x").unwrap_err(),
            HostnameError::BadCharacter('_')
        );
        assert_eq!(normalize("-a.x").unwrap_err(), HostnameError::HyphenAtEdge);
        assert_eq!(
            normalize(&"a".repeat(64)).unwrap_err(),
            HostnameError::LabelTooLong
        );
        let long = vec!["abcdefghi"; 26].join(".");
        assert_eq!(normalize(&long).unwrap_err(), HostnameError::TooLong);
    }

    #[test]
    fn the_shortcut_agrees_with_the_full_path_on_edge_cases() {
        let long_label = "a".repeat(63);
        let cases = [
            "a",
            "a.b",
            "1.2.3.4",
            "1.2.3",
            "1.2.3.4.5",
            "1234.2.3.4",
            "*.1.2.3.4",
            "*.a",
            "*",
            "a-b.c",
            "a-.b",
            "-a.b",
            "a.-b",
            "a.b-",
            "a.b.",
            "a..b",
            ".a",
            "A.b",
            "a_b",
            "a.*.b",
            "**.a",
            "*.",
            "*.-a",
            "xn--bcher-kva.example",
            "0.0.0.0",
            "a.0.0.0",
            "::1",
            "a:b",
            &long_label,
        ];
        for case in cases {
            let longer = format!("{long_label}a.com");
            for name in [case.to_owned(), format!("{case}.example.com"), longer] {
                assert_eq!(normalize(&name), normalize_fully(&name), "{name:?}");
                if is_normal_form(&name) {
                    assert_eq!(normalize_fully(&name).as_deref(), Ok(name.as_str()));
                }
            }
        }
        let at_limit = vec!["abcdefghi"; 25].join(".") + ".abc";
        for name in [
            at_limit.clone(),
            format!("{at_limit}d"),
            format!("*.{at_limit}"),
        ] {
            assert_eq!(normalize(&name), normalize_fully(&name), "{name:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_shortcut_agrees_with_the_full_path(name in "(\\*\\.)?[a-zA-Z0-9.*_:-]{0,12}(\\.[a-z0-9-]{0,4}){0,4}\\.?") {
            proptest::prop_assert_eq!(normalize(&name), normalize_fully(&name));
        }
    }

    #[test]
    fn wildcard_matches_one_or_more_labels_never_the_apex() {
        assert!(matches("*.example.com", "a.example.com"));
        assert!(matches("*.example.com", "a.b.example.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(!matches("*.example.com", "badexample.com"));
        assert!(matches("a.example.com", "a.example.com"));
    }

    #[test]
    fn intersection_both_directions() {
        assert_eq!(
            intersect(Some("*.example.com"), Some("a.example.com")),
            Some(Some("a.example.com"))
        );
        assert_eq!(
            intersect(Some("a.example.com"), Some("*.example.com")),
            Some(Some("a.example.com"))
        );
        assert_eq!(
            intersect(Some("*.com"), Some("*.example.com")),
            Some(Some("*.example.com"))
        );
        assert_eq!(
            intersect(Some("*.example.com"), Some("*.com")),
            Some(Some("*.example.com"))
        );
        assert_eq!(intersect(Some("*.a.com"), Some("*.b.com")), None);
        assert_eq!(intersect(None, None), Some(None));
        assert_eq!(intersect(Some("*.example.com"), Some("example.com")), None);
    }
}
