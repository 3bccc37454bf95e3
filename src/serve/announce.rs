//! The start-up line a person reads: where to point a browser.
//!
//! `staticd: listening on ADDR` (one line per listener, the address as
//! bound) is for scripts and the tests; this one line after them is for
//! people, as `python3 -m http.server` and Caddy print one: the root and
//! the URLs, a wildcard address shown as the loopback one that reaches it
//! (`0.0.0.0` cannot be typed into a browser).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// `staticd: serving ROOT on http://127.0.0.1:8080/, ...`, or None when no
/// listener has a URL (only Unix sockets).
pub fn serving_line(root: &Path, addrs: &[SocketAddr], https: bool) -> Option<String> {
    let (scheme, default_port) = if https { ("https", 443) } else { ("http", 80) };
    let v4_wildcard = |port| {
        addrs
            .iter()
            .any(|a| a.ip() == IpAddr::V4(Ipv4Addr::UNSPECIFIED) && a.port() == port)
    };
    let mut urls: Vec<String> = Vec::new();
    for addr in addrs {
        let ip = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            // Both wildcards bound (the default): one URL says it.
            IpAddr::V6(ip) if ip.is_unspecified() && v4_wildcard(addr.port()) => continue,
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        // The scheme's own port goes without saying.
        let url = match addr.port() == default_port {
            true => format!("{scheme}://{}/", bracketed(ip)),
            false => format!("{scheme}://{}/", SocketAddr::new(ip, addr.port())),
        };
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    if urls.is_empty() {
        return None;
    }
    Some(format!(
        "staticd: serving {} on {}",
        root.display(),
        urls.join(", ")
    ))
}

fn bracketed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(addrs: &[&str], https: bool) -> Option<String> {
        let addrs: Vec<SocketAddr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
        serving_line(Path::new("www"), &addrs, https)
    }

    #[test]
    fn urls_a_browser_can_open() {
        assert_eq!(
            line(&["0.0.0.0:8080", "[::]:8080"], false).unwrap(),
            "staticd: serving www on http://127.0.0.1:8080/"
        );
        assert_eq!(
            line(&["[::]:8443"], true).unwrap(),
            "staticd: serving www on https://[::1]:8443/"
        );
        assert_eq!(
            line(&["127.0.0.1:80", "[::1]:80"], false).unwrap(),
            "staticd: serving www on http://127.0.0.1/, http://[::1]/"
        );
        assert_eq!(
            line(&["192.0.2.7:443"], true).unwrap(),
            "staticd: serving www on https://192.0.2.7/"
        );
        assert_eq!(line(&[], false), None);
    }
}
