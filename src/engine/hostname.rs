//! Hostnames: validation, normalisation, wildcard matching and listener/route intersection.

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
