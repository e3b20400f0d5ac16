//! Hostname matching: wildcards and the intersection of listener and route hostnames. Names
//! arrive here already valid and in normal form ([`crate::model::dns_name`]).

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

/// The names a route gets on a listener with hostname `listener`: each of the route's
/// hostnames (`written`) met with it, or, when the route wrote none (`None`), the listener's own
/// hostname; sorted, each once.
pub fn names_on_listener<'a>(
    listener: Option<&'a str>,
    written: Option<impl Iterator<Item = &'a str>>,
) -> Vec<String> {
    let mut names: Vec<String> = match written {
        Some(hostnames) => hostnames
            .filter_map(|h| intersect(listener, Some(h)).flatten())
            .map(str::to_owned)
            .collect(),
        None => listener.iter().map(|h| (*h).to_owned()).collect(),
    };
    names.sort();
    names.dedup();
    names
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
