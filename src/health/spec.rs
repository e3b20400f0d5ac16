//! The health-check annotations of a Gateway or ListenerSet, read into a [`CheckSpec`]
//! (ARCHITECTURE.md, "Health checks"). Pure: what a bad value means is an error naming the
//! annotation, never a probe with a guess.

use std::time::Duration;

use crate::model::StringMap;

/// Every health-check annotation starts with this.
pub const PREFIX: &str = "gateway-dns.io/health-check-";

/// How a target is probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// A GET over HTTP/1.1; the status must be one of the expected codes.
    Http,
    /// The same over TLS, with SNI; any certificate is accepted (it checks serving, not trust).
    Https,
    /// A TCP connection that opens.
    Tcp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Https => "https",
            Protocol::Tcp => "tcp",
        }
    }

    fn default_port(self) -> Option<u16> {
        match self {
            Protocol::Http => Some(80),
            Protocol::Https => Some(443),
            Protocol::Tcp => None,
        }
    }
}

/// HTTP status codes that pass: codes and inclusive ranges.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExpectedCodes(Vec<(u16, u16)>);

impl ExpectedCodes {
    /// Reads `200-399,404`: codes from 100 to 599 and ranges of them, comma-separated.
    pub fn parse(text: &str) -> Option<ExpectedCodes> {
        let code = |t: &str| {
            t.trim()
                .parse::<u16>()
                .ok()
                .filter(|c| (100..=599).contains(c))
        };
        let mut ranges = Vec::new();
        for part in text.split(',') {
            let range = match part.split_once('-') {
                Some((low, high)) => (code(low)?, code(high)?),
                None => {
                    let one = code(part)?;
                    (one, one)
                }
            };
            if range.0 > range.1 {
                return None;
            }
            ranges.push(range);
        }
        Some(ExpectedCodes(ranges))
    }

    pub fn contains(&self, status: u16) -> bool {
        self.0
            .iter()
            .any(|(low, high)| (*low..=*high).contains(&status))
    }
}

/// The defaults of the values an annotation may leave out (the `--health-check-*` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Defaults {
    pub interval: Duration,
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub success_threshold: u32,
    pub expected_codes: ExpectedCodes,
    pub path: String,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
            failure_threshold: 3,
            success_threshold: 2,
            expected_codes: ExpectedCodes(vec![(200, 399)]),
            path: "/".to_owned(),
        }
    }
}

/// How the targets of one Gateway are probed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CheckSpec {
    pub protocol: Protocol,
    pub port: u16,
    /// Path and query of the GET (http and https).
    pub path: String,
    pub interval: Duration,
    /// At most the interval.
    pub timeout: Duration,
    pub failure_threshold: u32,
    pub success_threshold: u32,
    pub expected_codes: ExpectedCodes,
}

/// A health-check annotation whose value cannot be used: the object is not probed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("annotation {PREFIX}{annotation}: {value:?} is not {expected}; its targets are not probed")]
pub struct SpecError {
    pub annotation: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// Most probes of one target per second, and most failures or successes in a row asked for:
/// enough for any real check, and a bound on what an annotation can make gateway-dns do.
const SHORTEST_INTERVAL: Duration = Duration::from_secs(1);
const MOST_IN_A_ROW: u32 = 100;

/// The check the annotations ask for: None without `health-check-protocol` (nothing is probed),
/// an error naming the first annotation with a value that cannot be used.
pub fn read(annotations: &StringMap, defaults: &Defaults) -> Option<Result<CheckSpec, SpecError>> {
    let protocol = annotations.get_joined(PREFIX, "protocol")?;
    Some(read_with(protocol, annotations, defaults))
}

fn read_with(
    protocol: &str,
    annotations: &StringMap,
    defaults: &Defaults,
) -> Result<CheckSpec, SpecError> {
    let bad = |annotation: &'static str, value: &str, expected: &'static str| SpecError {
        annotation,
        value: value.to_owned(),
        expected,
    };
    let protocol = match protocol.trim().to_ascii_lowercase().as_str() {
        "http" => Protocol::Http,
        "https" => Protocol::Https,
        "tcp" => Protocol::Tcp,
        _ => return Err(bad("protocol", protocol, "http, https or tcp")),
    };
    let get = |name: &str| annotations.get_joined(PREFIX, name).map(str::trim);
    let port = match get("port") {
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("port", text, "a port from 1 to 65535"))?,
        None => protocol
            .default_port()
            .ok_or_else(|| bad("port", "", "set: tcp checks have no default port"))?,
    };
    let path = match get("path") {
        Some(text)
            if text.starts_with('/')
                && !text.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            text.to_owned()
        }
        Some(text) => return Err(bad("path", text, "a path starting with / without spaces")),
        None => defaults.path.clone(),
    };
    let duration = |name: &'static str, default: Duration| match get(name) {
        Some(text) => crate::cli::parse_duration(text)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| bad(name, text, "a duration such as 30s or 1m")),
        None => Ok(default),
    };
    let interval = duration("interval", defaults.interval)?.max(SHORTEST_INTERVAL);
    let timeout = duration("timeout", defaults.timeout)?.min(interval);
    let count = |name: &'static str, default: u32| match get(name) {
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MOST_IN_A_ROW).contains(n))
            .ok_or_else(|| bad(name, text, "a count from 1 to 100")),
        None => Ok(default),
    };
    let failure_threshold = count("failure-threshold", defaults.failure_threshold)?;
    let success_threshold = count("success-threshold", defaults.success_threshold)?;
    let expected_codes = match get("expected-codes") {
        Some(text) => ExpectedCodes::parse(text).ok_or_else(|| {
            bad(
                "expected-codes",
                text,
                "codes or ranges such as 200-399,404",
            )
        })?,
        None => defaults.expected_codes.clone(),
    };
    Ok(CheckSpec {
        protocol,
        port,
        path,
        interval,
        timeout,
        failure_threshold,
        success_threshold,
        expected_codes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> StringMap {
        StringMap::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string())),
        )
    }

    #[test]
    fn without_a_protocol_nothing_is_probed() {
        let map = annotations(&[("port", "8080")]);
        assert_eq!(read(&map, &Defaults::default()), None);
    }

    #[test]
    fn values_left_out_come_from_the_defaults() {
        let spec = read(&annotations(&[("protocol", "HTTPS")]), &Defaults::default())
            .unwrap()
            .unwrap();
        assert_eq!(spec.protocol, Protocol::Https);
        assert_eq!(spec.port, 443);
        assert_eq!(spec.path, "/");
        assert_eq!(spec.interval, Duration::from_secs(30));
        assert_eq!((spec.failure_threshold, spec.success_threshold), (3, 2));
        assert!(spec.expected_codes.contains(302) && !spec.expected_codes.contains(404));

        let spec = read(
            &annotations(&[
                ("protocol", "http"),
                ("port", "8080"),
                ("path", "/healthz"),
                ("interval", "10s"),
                ("timeout", "1m"),
                ("failure-threshold", "1"),
                ("success-threshold", "5"),
                ("expected-codes", "200, 404-404"),
            ]),
            &Defaults::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!((spec.port, spec.path.as_str()), (8080, "/healthz"));
        // A timeout longer than the interval is cut to it.
        assert_eq!(spec.timeout, Duration::from_secs(10));
        assert_eq!((spec.failure_threshold, spec.success_threshold), (1, 5));
        assert!(spec.expected_codes.contains(404) && !spec.expected_codes.contains(201));
    }

    #[test]
    fn a_bad_value_names_its_annotation_and_nothing_is_probed() {
        for (pairs, annotation) in [
            (vec![("protocol", "udp")], "protocol"),
            (vec![("protocol", "tcp")], "port"),
            (vec![("protocol", "tcp"), ("port", "0")], "port"),
            (vec![("protocol", "http"), ("port", "http")], "port"),
            (vec![("protocol", "http"), ("path", "healthz")], "path"),
            (vec![("protocol", "http"), ("interval", "soon")], "interval"),
            (vec![("protocol", "http"), ("timeout", "0s")], "timeout"),
            (
                vec![("protocol", "http"), ("failure-threshold", "0")],
                "failure-threshold",
            ),
            (
                vec![("protocol", "http"), ("success-threshold", "-1")],
                "success-threshold",
            ),
            (
                vec![("protocol", "http"), ("expected-codes", "2xx")],
                "expected-codes",
            ),
            (
                vec![("protocol", "http"), ("expected-codes", "399-200")],
                "expected-codes",
            ),
        ] {
            let err = read(&annotations(&pairs), &Defaults::default())
                .unwrap()
                .unwrap_err();
            assert_eq!(err.annotation, annotation, "{pairs:?}");
            assert!(err.to_string().contains("not probed"), "{err}");
        }
    }
}
