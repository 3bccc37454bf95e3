//! Who a request is from when a trusted proxy forwarded it: `Forwarded`
//! (RFC 7239, its `for=` parameters) or else `X-Forwarded-For`, read
//! without allocating.
//!
//! Each proxy appends the address it got the request from, so the list
//! reads from the client (left) to the last proxy (right). Only the
//! entries our trusted proxies added can be believed: the client is the
//! rightmost entry that is not itself a trusted proxy. Everything to the
//! left of it is whatever that client chose to send.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::TrustedProxies;
use crate::http::parse::Request;

/// A client address a forwarding header gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The address as written (an IPv6 one without its brackets): a valid
    /// IP address, safe to log as it is.
    pub address: &'a str,
    /// The port, when the header gave one.
    pub port: Option<u16>,
}

/// The request's client by its forwarding headers, when `peer` (the
/// connection's client, as the log names it) is a trusted proxy and the
/// headers name someone. None: `peer` stands.
pub fn origin<'a>(
    trusted: &TrustedProxies,
    peer: &str,
    forwarded: Option<&'a str>,
    x_forwarded_for: Option<&'a str>,
) -> Option<Origin<'a>> {
    if trusted.is_empty() || !trusted.trusts_peer(peer) {
        return None;
    }
    let mut scan = Scan::default();
    if let Some(value) = forwarded {
        for hop in ForwardedFor::new(value) {
            scan.push(trusted, hop);
        }
    }
    if scan.hops == 0 {
        for hop in x_forwarded_for.unwrap_or_default().split(',') {
            scan.push(trusted, node(hop.trim()));
        }
    }
    scan.result()
}

/// `origin` from a parsed request's headers.
pub fn request_origin<'a>(
    trusted: &TrustedProxies,
    peer: &str,
    request: &'a Request<'_>,
) -> Option<Origin<'a>> {
    let (forwarded, x_forwarded_for) = (&request.forwarded, &request.x_forwarded_for);
    origin(
        trusted,
        peer,
        forwarded.as_deref(),
        x_forwarded_for.as_deref(),
    )
}

/// How the access log names a request's client: as its forwarding
/// headers do when `peer` is trusted, else as `peer`.
pub fn client_name<'a>(
    trusted: &TrustedProxies,
    peer: &'a str,
    request: Option<&'a Request<'_>>,
) -> &'a str {
    match request.and_then(|r| request_origin(trusted, peer, r)) {
        Some(origin) => origin.address,
        None => peer,
    }
}

/// One entry of the list: an address, or something that is none
/// (`unknown`, an obfuscated name, garbage, an element without `for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hop<'a> {
    Address(Origin<'a>, IpAddr),
    Unknown,
}

/// The walk from the right, done from the left in one pass: what matters is
/// the trailing run of trusted addresses and the entry just before it.
#[derive(Default)]
struct Scan<'a> {
    hops: usize,
    /// The rightmost entry that is not a trusted address.
    boundary: Option<Hop<'a>>,
    /// The leftmost trusted address right of `boundary`.
    run_start: Option<Origin<'a>>,
}

impl<'a> Scan<'a> {
    fn push(&mut self, trusted: &TrustedProxies, hop: Hop<'a>) {
        self.hops += 1;
        match hop {
            Hop::Address(origin, ip) if trusted.contains(ip) => {
                self.run_start.get_or_insert(origin);
            }
            _ => {
                self.boundary = Some(hop);
                self.run_start = None;
            }
        }
    }

    /// The rightmost untrusted address. Past an entry that names no
    /// address nothing further left can be placed, so the nearest trusted
    /// proxy is the client as far as anyone can tell; with every entry
    /// trusted, the leftmost is.
    fn result(self) -> Option<Origin<'a>> {
        match self.boundary {
            Some(Hop::Address(origin, _)) => Some(origin),
            _ => self.run_start,
        }
    }
}

/// A node as both headers write it: `192.0.2.1`, `192.0.2.1:80`,
/// `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:80` (RFC 7239 §6).
fn node(text: &str) -> Hop<'_> {
    let parsed = if let Some(rest) = text.strip_prefix('[') {
        bracketed(rest)
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        Some((text, ip, None))
    } else {
        text.split_once(':').and_then(|(v4, port)| {
            let ip = v4.parse::<Ipv4Addr>().ok()?;
            Some((v4, IpAddr::V4(ip), node_port(port).ok()?))
        })
    };
    match parsed {
        Some((address, ip, port)) => Hop::Address(Origin { address, port }, ip),
        None => Hop::Unknown,
    }
}

/// `2001:db8::1]` or `2001:db8::1]:80`, after the `[`.
fn bracketed(rest: &str) -> Option<(&str, IpAddr, Option<u16>)> {
    let (v6, after) = rest.split_once(']')?;
    let ip = IpAddr::V6(v6.parse::<Ipv6Addr>().ok()?);
    let port = match after {
        "" => None,
        _ => node_port(after.strip_prefix(':')?).ok()?,
    };
    Some((v6, ip, port))
}

/// A port in decimal, or an obfuscated one (`_abc`, RFC 7239 §6.3), which
/// says nothing: Ok(None).
fn node_port(text: &str) -> Result<Option<u16>, ()> {
    if text.starts_with('_') {
        return Ok(None);
    }
    let digits = !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit());
    match digits {
        true => text.parse().map(Some).map_err(drop),
        false => Err(()),
    }
}

/// The `for` of each element of a `Forwarded` value, left to right
/// (`for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8::1]:4711"`),
/// as hops; only elements with a `for` count, and an element with
/// a malformed `for` is an unknown hop.
struct ForwardedFor<'a> {
    rest: &'a str,
}

impl<'a> ForwardedFor<'a> {
    fn new(value: &'a str) -> Self {
        ForwardedFor { rest: value }
    }
}

impl<'a> Iterator for ForwardedFor<'a> {
    type Item = Hop<'a>;

    fn next(&mut self) -> Option<Hop<'a>> {
        while !self.rest.is_empty() {
            let (element, rest) = split_unquoted(self.rest, b',');
            self.rest = rest;
            let mut pairs = element;
            while !pairs.is_empty() {
                let (pair, rest) = split_unquoted(pairs, b';');
                pairs = rest;
                let Some((name, value)) = pair.split_once('=') else {
                    continue;
                };
                if name.trim().eq_ignore_ascii_case("for") {
                    return Some(unquote(value.trim()).map_or(Hop::Unknown, node));
                }
            }
        }
        None
    }
}

/// `s` up to the first `sep` outside a quoted string, and what follows it.
/// A quote left open runs to the end.
fn split_unquoted(s: &str, sep: u8) -> (&str, &str) {
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            _ if b == sep && !quoted => return (&s[..i], &s[i + 1..]),
            _ => {}
        }
    }
    (s, "")
}

/// A token as it is; a quoted string without its quotes. None for a broken
/// one, or one with escapes, which no address needs.
fn unquote(value: &str) -> Option<&str> {
    match value.strip_prefix('"') {
        None if !value.contains('"') => Some(value),
        None => None,
        Some(inner) => inner.strip_suffix('"').filter(|s| !s.contains(['"', '\\'])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(items: &[&str]) -> TrustedProxies {
        TrustedProxies(items.iter().map(|s| s.parse().unwrap()).collect())
    }

    fn who(
        peer: &str,
        forwarded: Option<&str>,
        xff: Option<&str>,
    ) -> Option<(String, Option<u16>)> {
        let t = trusted(&["10.0.0.0/8", "2001:db8:ffff::/48", "unix:"]);
        origin(&t, peer, forwarded, xff).map(|o| (o.address.to_string(), o.port))
    }

    fn addr(s: &str) -> Option<(String, Option<u16>)> {
        Some((s.to_string(), None))
    }

    #[test]
    fn x_forwarded_for_rightmost_untrusted() {
        assert_eq!(
            who("10.0.0.1", None, Some("203.0.113.9")),
            addr("203.0.113.9")
        );
        // The client put a fake entry first; our proxy appended the truth.
        assert_eq!(
            who("10.0.0.1", None, Some("1.2.3.4, 203.0.113.9")),
            addr("203.0.113.9")
        );
        // Two of our proxies in a row.
        assert_eq!(
            who(
                "10.0.0.1",
                None,
                Some("1.2.3.4, 203.0.113.9, 10.0.0.2,10.9.9.9")
            ),
            addr("203.0.113.9")
        );
        assert_eq!(
            who("10.0.0.1", None, Some("2001:db8::5")),
            addr("2001:db8::5")
        );
        assert_eq!(
            who("10.0.0.1", None, Some("[2001:db8::5]:443")),
            Some(("2001:db8::5".into(), Some(443)))
        );
        assert_eq!(
            who("10.0.0.1", None, Some("198.51.100.1:8080")),
            Some(("198.51.100.1".into(), Some(8080)))
        );
        // Every entry trusted: the leftmost.
        assert_eq!(
            who("10.0.0.1", None, Some("10.0.0.3, 10.0.0.2")),
            addr("10.0.0.3")
        );
        // An entry that is no address ends the walk at our proxy before it.
        assert_eq!(who("10.0.0.1", None, Some("203.0.113.9, garbage")), None);
        assert_eq!(
            who("10.0.0.1", None, Some("203.0.113.9, garbage, 10.0.0.7")),
            addr("10.0.0.7")
        );
        assert_eq!(who("10.0.0.1", None, Some("")), None);
        assert_eq!(who("10.0.0.1", None, None), None);
        // A Unix-socket proxy, trusted as unix:.
        assert_eq!(who("unix:", None, Some("203.0.113.9")), addr("203.0.113.9"));
    }

    #[test]
    fn untrusted_peers_are_not_believed() {
        assert_eq!(who("203.0.113.50", None, Some("1.2.3.4")), None);
        assert_eq!(who("203.0.113.50", Some("for=1.2.3.4"), None), None);
        assert_eq!(who("-", None, Some("1.2.3.4")), None);
        let none = TrustedProxies::default();
        assert_eq!(origin(&none, "10.0.0.1", None, Some("1.2.3.4")), None);
    }

    #[test]
    fn forwarded_for() {
        assert_eq!(
            who(
                "10.0.0.1",
                Some("for=192.0.2.60;proto=http;by=203.0.113.43"),
                None
            ),
            addr("192.0.2.60")
        );
        assert_eq!(
            who(
                "10.0.0.1",
                Some(r#"for=1.1.1.1, For="[2001:db8:cafe::17]:4711""#),
                None
            ),
            Some(("2001:db8:cafe::17".into(), Some(4711)))
        );
        // Forwarded wins over X-Forwarded-For.
        assert_eq!(
            who("10.0.0.1", Some("for=192.0.2.60"), Some("198.51.100.7")),
            addr("192.0.2.60")
        );
        // Without a `for`, X-Forwarded-For decides.
        assert_eq!(
            who("10.0.0.1", Some("proto=https"), Some("198.51.100.7")),
            addr("198.51.100.7")
        );
        // unknown and obfuscated nodes, quoted separators, broken quotes.
        assert_eq!(
            who("10.0.0.1", Some("for=192.0.2.60, for=unknown"), None),
            None
        );
        assert_eq!(
            who(
                "10.0.0.1",
                Some("for=192.0.2.60, for=_hidden, for=10.1.1.1"),
                None
            ),
            addr("10.1.1.1")
        );
        assert_eq!(
            who(
                "10.0.0.1",
                Some(r#"for=192.0.2.60;x="a,b;c", for="[2001:db8::9]:_p""#),
                None
            ),
            addr("2001:db8::9")
        );
        assert_eq!(who("10.0.0.1", Some(r#"for="192.0.2.60"#), None), None);
        assert_eq!(who("10.0.0.1", Some(r#"for="192.0.2.\60""#), None), None);
        assert_eq!(
            who("10.0.0.1", Some("for=[2001:db8::1]"), None),
            addr("2001:db8::1")
        );
        assert_eq!(who("10.0.0.1", Some("for=[2001:db8::1]x"), None), None);
    }

    #[test]
    fn nodes() {
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4:",
            "1.2.3.4:65536",
            "1.2.3.4:+1",
            "[::1",
            "[1.2.3.4]",
            "::1:80:x",
            "fe80::1%eth0",
        ] {
            assert_eq!(node(bad), Hop::Unknown, "{bad}");
        }
    }
}
