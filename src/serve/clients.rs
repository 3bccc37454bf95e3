//! `--max-connections-per-ip`: open connections counted per client address
//! (IPv6 by `--ipv6-prefix`, as one host usually holds a whole /64), so one
//! address cannot take every place `--max-connections` allows. Standalone
//! mode only: inetd mode has no count shared between its processes, and
//! leaves this bound to the super-server (tcpsvd -C, systemd
//! MaxConnectionsPerSource=).

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use rustix::net::{RecvFlags, SendFlags};

use crate::complaint::{complain, Complaint};
use crate::config::Config;

/// A client as counted: an IPv4 address, or an IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ClientKey {
    V4(u32),
    V6(u128),
}

impl ClientKey {
    /// `ip`'s key; an IPv4-mapped IPv6 address counts as its IPv4 address.
    pub(crate) fn of(ip: IpAddr, v6_prefix: u8) -> ClientKey {
        match ip {
            IpAddr::V4(v4) => ClientKey::V4(v4.into()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey::V4(v4.into()),
                None => {
                    let bits = u128::from(v6);
                    let mask = match v6_prefix {
                        0 => 0,
                        p if p >= 128 => u128::MAX,
                        p => u128::MAX << (128 - u32::from(p)),
                    };
                    ClientKey::V6(bits & mask)
                }
            },
        }
    }
}

/// Open connections per client.
pub(crate) struct PerClient {
    /// 0: no bound.
    max: usize,
    v6_prefix: u8,
    open: Mutex<HashMap<ClientKey, usize>>,
}

impl PerClient {
    pub(crate) fn new(cfg: &Config) -> PerClient {
        PerClient {
            max: cfg.max_connections_per_ip,
            v6_prefix: cfg.ipv6_prefix,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Whether connections from `ip` are counted: not when the bound is
    /// off, nor for a `--trusted-proxy` peer, whose connections carry many
    /// clients (it bounds its own), nor for a loopback one unless
    /// `--per-ip-loopback`: a proxy or a load generator on the same machine
    /// brings every client from one address. Every transport admits
    /// through this one decision.
    pub(crate) fn counts(&self, ip: IpAddr, cfg: &Config) -> bool {
        self.max > 0
            && !cfg.trusted_proxies.contains(ip)
            && (cfg.per_ip_loopback || !is_loopback(ip))
    }

    /// Counts one more connection from `ip`: a claim that gives the place
    /// back when dropped, or None if `ip` already has the most allowed.
    pub(crate) fn claim(self: &Arc<Self>, ip: IpAddr) -> Option<Claim> {
        let key = ClientKey::of(ip, self.v6_prefix);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Claim {
            key,
            table: Arc::clone(self),
        })
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

/// 127.0.0.0/8 and ::1, also as an IPv4-mapped address (`::ffff:127.0.0.1`,
/// what a dual-stack listener sees of an IPv4 loopback client).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The start-up line that says which clients `--max-connections-per-ip`
/// leaves out, or None when it counts every client (or is off).
pub(crate) fn not_counted_line(cfg: &Config) -> Option<String> {
    let max = cfg.max_connections_per_ip;
    let proxies = !cfg.trusted_proxies.0.is_empty();
    let who = match (cfg.per_ip_loopback, proxies) {
        _ if max == 0 => return None,
        (true, false) => return None,
        (true, true) => "--trusted-proxy peers",
        (false, false) => "loopback clients",
        (false, true) => "loopback clients and --trusted-proxy peers",
    };
    let hint = match cfg.per_ip_loopback {
        true => "",
        false => " (--per-ip-loopback counts them too)",
    };
    Some(format!(
        "staticd: --max-connections-per-ip ({max}) does not count {who}{hint}"
    ))
}

/// One counted connection of a client.
pub(crate) struct Claim {
    key: ClientKey,
    table: Arc<PerClient>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The answer to a request that arrived with a refused connection.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Retry-After: 1\r\n\
Content-Type: text/plain\r\n\
Content-Length: 38\r\n\
Connection: close\r\n\
\r\n\
Too many connections from one address\n";

/// Turns away a connection over its client's bound, before it is served:
/// if an HTTP/1 request is already there (on a cleartext port), it gets a
/// 503 with Retry-After; otherwise the connection just closes. Never
/// waits: the socket must be non-blocking, or the flags make it so.
pub(crate) fn refuse(fd: BorrowedFd<'_>, client: &str, cleartext: bool, max: usize) {
    complain(client, Complaint::OverPerClient { max });
    let mut first = [0u8; 4096];
    let Ok((n, _)) = rustix::net::recv(fd, &mut first, RecvFlags::DONTWAIT) else {
        return;
    };
    if !cleartext || n == 0 || !looks_like_http1(&first[..n]) {
        return;
    }
    // Whatever else the client sent is read away, so closing sends a FIN
    // (the 503 then arrives) rather than a reset that could destroy it.
    while let Ok((more, _)) = rustix::net::recv(fd, &mut first, RecvFlags::DONTWAIT) {
        if more == 0 {
            break;
        }
    }
    let _ = rustix::net::send(fd, REFUSAL, SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
    let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Write);
}

/// Whether bytes open an HTTP/1 request (a method token, then a space), not
/// a TLS record or the HTTP/2 preface: only such a client can read a 503.
fn looks_like_http1(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"PRI * HTTP/2") {
        return false;
    }
    let method = bytes.iter().take_while(|b| b.is_ascii_uppercase()).count();
    method > 0 && bytes.get(method) == Some(&b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max: usize) -> Arc<PerClient> {
        Arc::new(PerClient {
            max,
            v6_prefix: 64,
            open: Mutex::new(HashMap::new()),
        })
    }

    #[test]
    fn ipv6_counts_by_prefix_and_mapped_v4_as_v4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::of(a, 64), ClientKey::of(b, 64));
        assert_ne!(ClientKey::of(a, 64), ClientKey::of(c, 64));
        assert_ne!(ClientKey::of(a, 128), ClientKey::of(b, 128));
        assert_eq!(ClientKey::of(a, 0), ClientKey::of(c, 0));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(ClientKey::of(mapped, 64), ClientKey::of(v4, 64));
    }

    #[test]
    fn loopback_is_every_form_of_it() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.2"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["128.0.0.1", "192.0.2.1", "::2", "::ffff:192.0.2.1", "::"] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn loopback_and_trusted_proxies_are_counted_only_when_asked() {
        let t = table(256);
        let outside: IpAddr = "192.0.2.1".parse().unwrap();
        let proxy: IpAddr = "192.0.2.9".parse().unwrap();
        let local: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let mut cfg = Config {
            trusted_proxies: crate::config::TrustedProxies(vec!["192.0.2.9".parse().unwrap()]),
            ..Config::default()
        };
        assert!(t.counts(outside, &cfg));
        assert!(!t.counts(proxy, &cfg));
        assert!(!t.counts(local, &cfg));
        cfg.per_ip_loopback = true;
        assert!(t.counts(local, &cfg));
        assert!(!t.counts(proxy, &cfg));
        assert!(!table(0).counts(outside, &cfg));
    }

    #[test]
    fn the_start_up_line_names_what_is_not_counted() {
        let mut cfg = Config::default();
        assert_eq!(
            not_counted_line(&cfg).unwrap(),
            "staticd: --max-connections-per-ip (256) does not count loopback clients \
             (--per-ip-loopback counts them too)"
        );
        cfg.per_ip_loopback = true;
        assert_eq!(not_counted_line(&cfg), None);
        cfg.trusted_proxies = crate::config::TrustedProxies(vec!["10.0.0.0/8".parse().unwrap()]);
        assert_eq!(
            not_counted_line(&cfg).unwrap(),
            "staticd: --max-connections-per-ip (256) does not count --trusted-proxy peers"
        );
        cfg.max_connections_per_ip = 0;
        assert_eq!(not_counted_line(&cfg), None);
    }

    #[test]
    fn claims_are_bounded_per_client_and_given_back() {
        let t = table(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = t.claim(a).unwrap();
        let _second = t.claim(a).unwrap();
        assert!(t.claim(a).is_none());
        assert!(t.claim(b).is_some());
        drop(first);
        assert!(t.claim(a).is_some());
    }

    #[test]
    fn the_table_forgets_clients_with_no_connection() {
        let t = table(1);
        for i in 0..100u32 {
            drop(t.claim(IpAddr::V4(i.into())).unwrap());
        }
        assert!(t.open.lock().unwrap().is_empty());
    }

    #[test]
    fn only_http1_requests_get_a_503() {
        assert!(looks_like_http1(b"GET / HTTP/1.1\r\n"));
        assert!(looks_like_http1(b"POST /x HTTP/1.0\r\n"));
        assert!(!looks_like_http1(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
        assert!(!looks_like_http1(&[0x16, 0x03, 0x01, 0x02, 0x00]));
        assert!(!looks_like_http1(b"GET"));
        assert!(!looks_like_http1(b""));
    }

    #[test]
    fn the_refusal_is_framed_right() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
    }
}
