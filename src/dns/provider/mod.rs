//! The DNS backends the sync loop writes through, one file each: an RFC 2136 server, the
//! PowerDNS API, DNSEndpoint objects, and an external-dns webhook provider. The embedded
//! server is a provider too, but lives in `crate::authority`, which builds on this module.

pub mod dnsendpoint;
pub mod external_dns_webhook;
pub mod pdns;
pub mod rfc2136;
