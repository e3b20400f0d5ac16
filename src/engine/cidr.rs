//! IP networks (`10.0.0.0/8`, `2001:db8::/32`) for choosing which of a Gateway's addresses an
//! installation publishes (ARCHITECTURE.md, "Scope").

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::model::Address;

/// An IP network: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IP network (e.g. 10.0.0.0/8 or 2001:db8::/32)")]
pub struct BadCidr(pub String);

impl FromStr for Cidr {
    type Err = BadCidr;
    fn from_str(text: &str) -> Result<Cidr, BadCidr> {
        let bad = || BadCidr(text.to_owned());
        let (ip, prefix) = text.trim().split_once('/').ok_or_else(bad)?;
        let network: IpAddr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Cidr {
    /// Is `ip` inside this network (same family, same leading `prefix` bits)?
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => same_prefix(
                u128::from(net.to_bits()) << 96,
                u128::from(ip.to_bits()) << 96,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                same_prefix(net.to_bits(), ip.to_bits(), self.prefix)
            }
            _ => false,
        }
    }
}

fn same_prefix(a: u128, b: u128, prefix: u8) -> bool {
    let mask = match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p)),
    };
    a & mask == b & mask
}

/// Which of a Gateway's `status.addresses` this installation publishes: `--target-cidr` keeps
/// only IP addresses inside one of its networks (and no hostname), `--exclude-target-cidr` drops
/// those inside one of its networks. Empty lists keep everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetFilter {
    pub include: Vec<Cidr>,
    pub exclude: Vec<Cidr>,
}

impl TargetFilter {
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    pub fn keeps(&self, address: &Address) -> bool {
        match address {
            Address::Hostname(_) => self.include.is_empty(),
            Address::Ip(ip) => {
                (self.include.is_empty() || self.include.iter().any(|c| c.contains(*ip)))
                    && !self.exclude.iter().any(|c| c.contains(*ip))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_contain_their_addresses_only() {
        let ten: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(ten.contains("10.1.2.3".parse().unwrap()));
        assert!(!ten.contains("11.0.0.1".parse().unwrap()));
        assert!(!ten.contains("::ffff:10.0.0.1".parse().unwrap()));
        let doc: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(doc.contains("2001:db8:1::7".parse().unwrap()));
        assert!(!doc.contains("2001:db9::1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.1".parse().unwrap()));
        let host: Cidr = "203.0.113.10/32".parse().unwrap();
        assert!(host.contains("203.0.113.10".parse().unwrap()));
        assert!(!host.contains("203.0.113.11".parse().unwrap()));
        for bad in ["10.0.0.0", "10.0.0.0/33", "::/129", "x/8", "10.0.0.0/-1"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        assert_eq!(ten.to_string(), "10.0.0.0/8");
    }
}
