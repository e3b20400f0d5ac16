//! DNS names below the model and the engine: the one canonical form of a name, and the rules a
//! hostname must follow (ARCHITECTURE.md, "Hostnames"). The decoder, the engine and the DNS layer
//! all read names through here, so they agree on what a name is.

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

/// The one normal form of a DNS name: ASCII lower case, without the trailing dot of the root.
/// Borrowed when the name is in that form already. It checks nothing: DNS layers hold names
/// (ownership records, zones) that are no hostname.
pub fn canonical(name: &str) -> Cow<'_, str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.bytes().any(|byte| byte.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

/// A hostname as the Gateway API allows it, in [`canonical`] form: RFC 1123, an optional
/// leading `*.` label, no IP literals. Borrowed when `raw` is in that form already, as nearly
/// every hostname in a manifest is (the webhook reads each hostname of every review).
pub fn parse_hostname(raw: &str) -> Result<Cow<'_, str>, HostnameError> {
    if is_normal_form(raw) {
        return Ok(Cow::Borrowed(raw));
    }
    parse_slowly(raw)
}

/// The full path: the canonical form, then every rule, saying which one fails.
fn parse_slowly(raw: &str) -> Result<Cow<'_, str>, HostnameError> {
    let name = canonical(raw);
    if name.is_empty() {
        return Err(HostnameError::Empty);
    }
    if name.parse::<std::net::IpAddr>().is_ok() || is_ipv4_like(&name) {
        return Err(HostnameError::IpAddress);
    }
    let rest = name.strip_prefix("*.").unwrap_or(&name);
    if rest.len() + 2 > 253 && name.starts_with("*.") {
        return Err(HostnameError::TooLong);
    }
    check_labels(rest)?;
    Ok(name)
}

/// One pass over the bytes: true when `name` is a valid hostname that [`parse_hostname`] would return
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

/// Is `name` (canonical) on `list`, whose entries are canonical names or `*.suffix` (any name
/// below the suffix)? The `--shared-name` list is read so by the engine and the sync loop.
pub fn in_name_list(list: &[String], name: &str) -> bool {
    list.iter().any(|entry| match entry.strip_prefix("*.") {
        Some(suffix) => name
            .strip_suffix(suffix)
            .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => entry == name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_form_is_lower_case_without_the_root_dot() {
        assert_eq!(canonical("App.Example.COM."), "app.example.com");
        assert!(matches!(canonical("a.example.com"), Cow::Borrowed(_)));
        assert_eq!(canonical("a.example.com."), "a.example.com");
        assert_eq!(canonical("a-*.Example.com"), "a-*.example.com");
        assert_eq!(canonical("."), "");
    }

    #[test]
    fn hostnames_are_accepted_lower_cased() {
        assert_eq!(
            parse_hostname("App.Example.COM").unwrap(),
            "app.example.com"
        );
        assert_eq!(parse_hostname("*.example.com").unwrap(), "*.example.com");
        assert_eq!(parse_hostname("example.com.").unwrap(), "example.com");
        assert_eq!(parse_hostname("localhost").unwrap(), "localhost");
    }

    #[test]
    fn hostnames_are_refused_with_the_rule_they_break() {
        assert_eq!(parse_hostname("").unwrap_err(), HostnameError::Empty);
        assert_eq!(
            parse_hostname("10.0.0.1").unwrap_err(),
            HostnameError::IpAddress
        );
        assert_eq!(parse_hostname("::1").unwrap_err(), HostnameError::IpAddress);
        assert_eq!(
            parse_hostname("999.1.1.1").unwrap_err(),
            HostnameError::IpAddress
        );
        assert_eq!(
            parse_hostname("a.*.example.com").unwrap_err(),
            HostnameError::MisplacedWildcard
        );
        assert_eq!(
            parse_hostname("*example.com").unwrap_err(),
            HostnameError::MisplacedWildcard
        );
        assert_eq!(
            parse_hostname("*").unwrap_err(),
            HostnameError::MisplacedWildcard
        );
        assert_eq!(
            parse_hostname("a..b").unwrap_err(),
            HostnameError::EmptyLabel
        );
        assert_eq!(
            parse_hostname("under_score.x").unwrap_err(),
            HostnameError::BadCharacter('_')
        );
        assert_eq!(
            parse_hostname("-a.x").unwrap_err(),
            HostnameError::HyphenAtEdge
        );
        assert_eq!(
            parse_hostname(&"a".repeat(64)).unwrap_err(),
            HostnameError::LabelTooLong
        );
        let long = vec!["abcdefghi"; 26].join(".");
        assert_eq!(parse_hostname(&long).unwrap_err(), HostnameError::TooLong);
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
                assert_eq!(parse_hostname(&name), parse_slowly(&name), "{name:?}");
                if is_normal_form(&name) {
                    assert_eq!(parse_slowly(&name).as_deref(), Ok(name.as_str()));
                }
            }
        }
        let at_limit = vec!["abcdefghi"; 25].join(".") + ".abc";
        for name in [
            at_limit.clone(),
            format!("{at_limit}d"),
            format!("*.{at_limit}"),
        ] {
            assert_eq!(parse_hostname(&name), parse_slowly(&name), "{name:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_shortcut_agrees_with_the_full_path(name in "(\\*\\.)?[a-zA-Z0-9.*_:-]{0,12}(\\.[a-z0-9-]{0,4}){0,4}\\.?") {
            proptest::prop_assert_eq!(parse_hostname(&name), parse_slowly(&name));
        }
    }
}
