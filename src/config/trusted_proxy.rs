//! `--trusted-proxy`: the peers whose forwarding headers are believed.

use std::net::IpAddr;
use std::str::FromStr;

/// How the access log names a Unix-socket client
/// ([`serve::listen::UNIX_CLIENT`](crate::serve::listen::UNIX_CLIENT); tests/proxy_protocol.rs
/// checks they agree), and how `--trusted-proxy` names them all.
const UNIX: &str = "unix:";

/// One `--trusted-proxy` value: an address range, or `unix:` for every
/// client of a Unix-socket listener (a proxy on this host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustedProxy {
    Range { network: IpAddr, prefix: u8 },
    Unix,
}

impl FromStr for TrustedProxy {
    type Err = String;

    /// `10.0.0.0/8`, `2001:db8::/32`, `192.0.2.7` (one address), `unix:`.
    fn from_str(s: &str) -> Result<TrustedProxy, String> {
        if s == UNIX {
            return Ok(TrustedProxy::Unix);
        }
        let (ip, prefix) = match s.split_once('/') {
            Some((ip, prefix)) => (ip, Some(prefix)),
            None => (s, None),
        };
        let network: IpAddr = ip
            .parse()
            .map_err(|_| format!("{s}: not an IP address, CIDR range or unix:"))?;
        let bits = bits(network);
        let prefix = match prefix {
            None => bits,
            Some(p) => prefix_length(p)
                .filter(|&p| p <= bits)
                .ok_or_else(|| format!("{s}: the prefix length must be 0 to {bits}"))?,
        };
        if masked(network, prefix) != network {
            return Err(format!(
                "{s}: bits set after the prefix (the range is {}/{prefix})",
                masked(network, prefix)
            ));
        }
        Ok(TrustedProxy::Range { network, prefix })
    }
}

/// A prefix length in plain decimal: `/08` and `/+8` are refused, as
/// typing slips rather than another way to write 8.
fn prefix_length(p: &str) -> Option<u8> {
    let plain = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if !plain || (p.len() > 1 && p.starts_with('0')) {
        return None;
    }
    p.parse().ok()
}

fn bits(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `ip` with every bit after the first `prefix` cleared.
fn masked(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

/// Every `--trusted-proxy`, as one set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<TrustedProxy>);

impl TrustedProxies {
    /// Whether no peer is trusted: forwarding headers are never read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` is in a trusted range. An IPv4 address seen as IPv6
    /// (`::ffff:10.0.0.1`, on a dual-stack socket) is its IPv4 self.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|t| match *t {
            TrustedProxy::Range { network, prefix } => {
                bits(network) == bits(ip) && masked(ip, prefix) == network
            }
            TrustedProxy::Unix => false,
        })
    }

    /// Whether the connection's client, as the access log names it (an IP
    /// address, `unix:`, or `-`), is trusted.
    pub fn trusts_peer(&self, client: &str) -> bool {
        if client == UNIX {
            return self.0.contains(&TrustedProxy::Unix);
        }
        client.parse().is_ok_and(|ip| self.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> TrustedProxies {
        TrustedProxies(items.iter().map(|s| s.parse().unwrap()).collect())
    }

    #[test]
    fn ranges_and_addresses() {
        let t = set(&["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "unix:"]);
        for yes in ["10.1.2.3", "192.0.2.7", "2001:db8:1::9", "::ffff:10.0.0.1"] {
            assert!(t.trusts_peer(yes), "{yes}");
        }
        for no in [
            "11.0.0.1",
            "192.0.2.8",
            "2001:db9::1",
            "::1",
            "-",
            "",
            "::ffff:11.0.0.1",
        ] {
            assert!(!t.trusts_peer(no), "{no}");
        }
        assert!(t.trusts_peer("unix:"));
        assert!(!set(&["127.0.0.1"]).trusts_peer("unix:"));
        assert!(set(&["0.0.0.0/0"]).trusts_peer("203.0.113.9"));
        assert!(!set(&["0.0.0.0/0"]).trusts_peer("2001:db8::1"));
        assert!(set(&["::/0"]).trusts_peer("2001:db8::1"));
    }

    #[test]
    fn refused() {
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/08",
            "10.0.0.0/8/8",
            "example.com",
            "",
            "unix:/run/x.sock",
        ] {
            assert!(bad.parse::<TrustedProxy>().is_err(), "{bad}");
        }
        let e = "10.0.0.1/8".parse::<TrustedProxy>().unwrap_err();
        assert!(e.contains("10.0.0.0/8"), "{e}");
    }
}
