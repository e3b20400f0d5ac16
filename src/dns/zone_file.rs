//! A zone in master-file format (RFC 1035, section 5) into RRsets: what `check --zone-file`
//! reads, usually a `dig AXFR` dump. The text is parsed by hickory's zone-file parser; two
//! habits of `dig`'s output it does not take are smoothed first: the zone's SOA printed again
//! at the end of a transfer (with the TSIG of a signed one), and no `$ORIGIN` (every name is
//! absolute there).

use hickory_proto::rr::Name;
use hickory_proto::serialize::txt::Parser;

use super::Endpoint;
use super::wire::group_records;

/// A zone file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("not a zone in master-file format: {0}")]
pub struct ZoneFileError(String);

/// The A, AAAA, CNAME and TXT RRsets of a zone file (other types are left out), named as the
/// providers' listings name them.
pub fn parse(text: &str) -> Result<Vec<Endpoint>, ZoneFileError> {
    let (text, soa_owner) = without_repeated_soa(text);
    let has_origin = text
        .lines()
        .any(|line| line.trim_start().starts_with("$ORIGIN"));
    // Without $ORIGIN, the SOA's owner (absolute in a transfer's dump) is the origin, else the
    // root: every name of such a file must be absolute anyway.
    let origin = match (has_origin, soa_owner) {
        (true, _) => None,
        (false, Some(owner)) => {
            Some(Name::from_ascii(&owner).map_err(|e| ZoneFileError(format!("{owner}: {e}")))?)
        }
        (false, None) => Some(Name::root()),
    };
    let (_, sets) = Parser::new(text, None, origin)
        .parse()
        .map_err(|e| ZoneFileError(e.to_string()))?;
    Ok(group_records(
        sets.values().flat_map(|set| set.records_without_rrsigs()),
    ))
}

/// The text without the SOA records after the first (a transfer's dump ends with the SOA it
/// began with), and the first SOA's owner name when written on its line.
fn without_repeated_soa(text: &str) -> (String, Option<String>) {
    let mut out = String::with_capacity(text.len());
    let mut owner = None;
    let mut seen = false;
    for line in text.lines() {
        let data = line.split(';').next().unwrap_or_default();
        let tokens: Vec<&str> = data.split_whitespace().collect();
        // The type comes after the owner, TTL and class (each of the first two may be left
        // out): among the first four tokens. A signed transfer's dump ends with its TSIG, which
        // is no zone data.
        let is_type = |wanted: &str| {
            tokens
                .iter()
                .take(4)
                .position(|t| t.eq_ignore_ascii_case(wanted))
        };
        if is_type("TSIG").is_some() {
            continue;
        }
        let soa = is_type("SOA");
        if let Some(at) = soa {
            if seen {
                continue;
            }
            seen = true;
            let starts_with_owner = !line.starts_with(char::is_whitespace);
            if starts_with_owner && at > 0 && tokens[0] != "@" {
                owner = Some(tokens[0].to_owned());
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RecordType;

    const DUMP: &str = r#"
; <<>> DiG 9.18 <<>> @127.0.0.1 -p 5300 example.com AXFR
; (1 server found)
;; global options: +cmd
example.com.		300	IN	SOA	ns.example.com. admin.example.com. 7 3600 600 86400 300
example.com.		300	IN	NS	ns.example.com.
b.example.com.		300	IN	A	203.0.113.10
a-b.example.com.	300	IN	TXT	"heritage=external-dns,external-dns/owner=east,external-dns/resource=httproute/apps/b1"
v6.example.com.		60	IN	AAAA	2001:db8::1
alias.example.com.	300	IN	CNAME	b.example.com.
long.example.com.	300	IN	TXT	"first part " "second part"
example.com.		300	IN	SOA	ns.example.com. admin.example.com. 7 3600 600 86400 300
gateway-dns-key.	0	ANY	TSIG	hmac-sha256. 1764900000 300 32 q3l2R8Ty0= 4242 NOERROR 0
;; Query time: 1 msec
"#;

    #[test]
    fn a_dig_axfr_dump_reads_as_a_listing() {
        let records = parse(DUMP).unwrap();
        let find = |name: &str, record_type| {
            records
                .iter()
                .find(|r| r.dns_name == name && r.record_type == record_type)
                .unwrap_or_else(|| panic!("{name} {record_type} in {records:?}"))
        };
        assert_eq!(
            find("b.example.com", RecordType::A)
                .targets
                .first()
                .unwrap(),
            "203.0.113.10"
        );
        assert_eq!(find("v6.example.com", RecordType::AAAA).ttl, Some(60));
        assert_eq!(
            find("alias.example.com", RecordType::CNAME)
                .targets
                .first()
                .unwrap(),
            "b.example.com"
        );
        assert_eq!(
            find("long.example.com", RecordType::TXT)
                .targets
                .first()
                .unwrap(),
            "first part second part"
        );
        assert!(
            find("a-b.example.com", RecordType::TXT)
                .targets
                .first()
                .unwrap()
                .contains("owner=east")
        );
        // SOA and NS are no records gateway-dns handles.
        assert_eq!(records.len(), 5);
    }

    #[test]
    fn a_zone_file_with_origin_and_relative_names_reads_too() {
        let text = "$ORIGIN example.com.\n$TTL 120\n@ IN SOA ns admin (1 3600 600 86400 300)\nwww IN A 192.0.2.7\n";
        let records = parse(text).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].dns_name, "www.example.com");
        assert_eq!(records[0].ttl, Some(120));
    }

    #[test]
    fn text_that_is_no_zone_is_an_error() {
        let err = parse("kind: HTTPRoute\nmetadata: {name: x}\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("not a zone in master-file format"),
            "{err}"
        );
    }
}
