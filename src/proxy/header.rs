//! The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and
//! 2) that a load balancer sends first on each connection to say whose it
//! is, as a pure function of the bytes received so far.
//!
//! The transports read it before anything else (before TLS) and must not take a byte past its end:
//! what follows belongs to the request or the TLS handshake.
//! [`Incomplete`](crate::proxy::header::Parsed::Incomplete) therefore says how many more bytes at
//! least belong to the header, so a reader that cannot peek reads no further.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Version 1 (text) is at most this long, CRLF included (spec 2.1).
pub const MAX_V1: usize = 107;
/// The longest version 2 header taken, fixed part included. The length
/// field allows 64 KiB of TLVs; senders put a few dozen bytes there, and a
/// bound keeps what a connection may make us hold small.
pub const MAX_V2: usize = 16 + 1024;
/// No header is longer: a buffer this big always holds a whole one.
pub const MAX_LEN: usize = MAX_V2;

/// Version 2's twelve-byte signature, which no text protocol starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
const V1_PREFIX: &[u8; 6] = b"PROXY ";
/// The shortest header of either version (`PROXY UNKNOWN\r\n`).
const SHORTEST: usize = 15;

/// What the bytes received so far come to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not yet a whole header; at least `needed` more bytes belong to it.
    Incomplete { needed: usize },
    /// The proxy relayed a client's connection from `source` to
    /// `destination` (the address the client connected to); the header is
    /// the first `len` bytes.
    Header {
        len: usize,
        source: SocketAddr,
        destination: SocketAddr,
    },
    /// The header is the first `len` bytes and names no client: the proxy
    /// connected on its own behalf (version 2's LOCAL, a health check), or
    /// for a client without an IP address (version 1's UNKNOWN, version 2's
    /// UNSPEC and UNIX families). The connection's own addresses stand.
    Local { len: usize },
    /// Not a PROXY header, or a malformed or oversized one: the connection
    /// is closed.
    Invalid,
}

/// Parses the header at the start of `buf`. Bytes after it are not looked at.
pub fn parse(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::Incomplete { needed: SHORTEST };
    }
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        return v2(buf);
    }
    let n = buf.len().min(V1_PREFIX.len());
    if buf[..n] == V1_PREFIX[..n] {
        return v1(buf);
    }
    Parsed::Invalid
}

/// `PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n` or
/// `PROXY UNKNOWN ...\r\n`.
fn v1(buf: &[u8]) -> Parsed {
    let window = &buf[..buf.len().min(MAX_V1)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        if window.len() == MAX_V1 {
            return Parsed::Invalid;
        }
        return Parsed::Incomplete {
            needed: SHORTEST.saturating_sub(buf.len()).max(1),
        };
    };
    let len = lf + 1;
    let Some(line) = window[..lf].strip_suffix(b"\r") else {
        return Parsed::Invalid;
    };
    let Ok(line) = std::str::from_utf8(&line[V1_PREFIX.len()..]) else {
        return Parsed::Invalid;
    };
    let mut fields = line.split(' ');
    match fields.next() {
        // The rest of the line says nothing the receiver may use.
        Some("UNKNOWN") => Parsed::Local { len },
        Some("TCP4") => v1_addresses(fields, len, |s| s.parse::<Ipv4Addr>().ok().map(IpAddr::V4)),
        Some("TCP6") => v1_addresses(fields, len, |s| s.parse::<Ipv6Addr>().ok().map(IpAddr::V6)),
        _ => Parsed::Invalid,
    }
}

/// `SRC DST SRCPORT DSTPORT`, each separated by exactly one space.
fn v1_addresses<'a>(
    mut fields: impl Iterator<Item = &'a str>,
    len: usize,
    ip: impl Fn(&str) -> Option<IpAddr>,
) -> Parsed {
    let mut next = || fields.next().unwrap_or_default();
    let (src, dst, src_port, dst_port) = (next(), next(), next(), next());
    let trailing = !next().is_empty();
    let parsed = (ip(src), ip(dst), port(src_port), port(dst_port));
    match parsed {
        (Some(src), Some(dst), Some(sp), Some(dp)) if !trailing => Parsed::Header {
            len,
            source: SocketAddr::new(src, sp),
            destination: SocketAddr::new(dst, dp),
        },
        _ => Parsed::Invalid,
    }
}

/// A decimal port, 0 to 65535, without sign or leading zeros.
fn port(s: &str) -> Option<u16> {
    let plain = !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !plain || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

/// The binary form: signature, version and command, family and transport,
/// the length of what follows, then the addresses and TLVs.
fn v2(buf: &[u8]) -> Parsed {
    let Some(fixed) = buf.get(..16) else {
        // The signature (or its start) matched; the rest of the fixed
        // part is to come.
        return Parsed::Incomplete {
            needed: 16 - buf.len(),
        };
    };
    let version = fixed[12] >> 4;
    let command = fixed[12] & 0x0f;
    let family = fixed[13] >> 4;
    let transport = fixed[13] & 0x0f;
    let len = 16 + usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    // Unassigned values must be refused (spec 2.2).
    if version != 2 || command > 1 || family > 3 || transport > 2 || len > MAX_V2 {
        return Parsed::Invalid;
    }
    // Each family's addresses must fit in the length given.
    let addresses = match family {
        1 => 12,
        2 => 36,
        3 => 216,
        _ => 0,
    };
    if len < 16 + addresses {
        return Parsed::Invalid;
    }
    let Some(block) = buf.get(16..len) else {
        return Parsed::Incomplete {
            needed: len - buf.len(),
        };
    };
    // LOCAL: the proxy's own connection, whatever the block says.
    if command == 0 {
        return Parsed::Local { len };
    }
    match family {
        1 => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    block[at],
                    block[at + 1],
                    block[at + 2],
                    block[at + 3],
                ))
            };
            let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
            Parsed::Header {
                len,
                source: SocketAddr::new(ip(0), port(8)),
                destination: SocketAddr::new(ip(4), port(10)),
            }
        }
        2 => {
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&block[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
            Parsed::Header {
                len,
                source: SocketAddr::new(ip(0), port(32)),
                destination: SocketAddr::new(ip(16), port(34)),
            }
        }
        _ => Parsed::Local { len },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn v2_header(cmd: u8, fam: u8, block: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(0x20 | cmd);
        h.push(fam);
        h.extend_from_slice(&(block.len() as u16).to_be_bytes());
        h.extend_from_slice(block);
        h
    }

    #[test]
    fn v1_tcp4_and_tcp6() {
        let h = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            parse(h),
            Parsed::Header {
                len: 45,
                source: addr("192.0.2.1:56324"),
                destination: addr("198.51.100.2:443"),
            }
        );
        let h = b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
        assert_eq!(
            parse(h),
            Parsed::Header {
                len: h.len(),
                source: addr("[2001:db8::1]:65535"),
                destination: addr("[::1]:0"),
            }
        );
        assert_eq!(
            parse(b"PROXY UNKNOWN whatever\r\nrest"),
            Parsed::Local { len: 24 }
        );
        assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Parsed::Local { len: 15 });
    }

    #[test]
    fn v1_malformed() {
        for bad in [
            &b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\n"[..],
            b"PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n",
            b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443 x\r\n",
            b"PROXY TCP4 192.0.2.1  198.51.100.2 56324 443\r\n",
            b"PROXY TCP4 2001:db8::1 198.51.100.2 56324 443\r\n",
            b"PROXY TCP6 192.0.2.1 ::1 56324 443\r\n",
            b"PROXY TCP4 192.0.2.1 198.51.100.2 65536 443\r\n",
            b"PROXY TCP4 192.0.2.1 198.51.100.2 080 443\r\n",
            b"PROXY TCP4 192.0.2.1 198.51.100.2 +80 443\r\n",
            b"PROXY UDP4 192.0.2.1 198.51.100.2 80 443\r\n",
            b"proxy TCP4 192.0.2.1 198.51.100.2 80 443\r\n",
            b"GET / HTTP/1.1\r\n",
            b"\x16\x03\x01",
        ] {
            assert_eq!(
                parse(bad),
                Parsed::Invalid,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // No line end within 107 bytes.
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(MAX_V1, b'x');
        assert_eq!(parse(&long), Parsed::Invalid);
        long.truncate(MAX_V1 - 1);
        assert!(matches!(parse(&long), Parsed::Incomplete { .. }));
        // The longest: exactly 107 bytes.
        let mut longest = b"PROXY UNKNOWN ".to_vec();
        longest.resize(MAX_V1 - 2, b'x');
        longest.extend_from_slice(b"\r\n");
        assert_eq!(parse(&longest), Parsed::Local { len: MAX_V1 });
    }

    #[test]
    fn v2_inet_inet6_local_unspec() {
        let mut block = vec![192, 0, 2, 1, 198, 51, 100, 2];
        block.extend_from_slice(&56324u16.to_be_bytes());
        block.extend_from_slice(&443u16.to_be_bytes());
        // A TLV after the addresses is skipped.
        block.extend_from_slice(&[0x04, 0x00, 0x01, 0x00]);
        let mut h = v2_header(1, 0x11, &block);
        let len = h.len();
        h.extend_from_slice(b"GET /");
        assert_eq!(
            parse(&h),
            Parsed::Header {
                len,
                source: addr("192.0.2.1:56324"),
                destination: addr("198.51.100.2:443"),
            }
        );
        let mut block6 = Vec::new();
        block6.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
        block6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        block6.extend_from_slice(&[0x12, 0x34, 0x01, 0xbb]);
        let h = v2_header(1, 0x21, &block6);
        assert_eq!(
            parse(&h),
            Parsed::Header {
                len: 52,
                source: addr("[2001:db8::7]:4660"),
                destination: addr("[::1]:443"),
            }
        );
        assert_eq!(parse(&v2_header(0, 0x00, &[])), Parsed::Local { len: 16 });
        assert_eq!(
            parse(&v2_header(0, 0x11, &block)),
            Parsed::Local {
                len: 16 + block.len()
            }
        );
        assert_eq!(parse(&v2_header(1, 0x00, &[])), Parsed::Local { len: 16 });
        assert_eq!(
            parse(&v2_header(1, 0x31, &[0; 216])),
            Parsed::Local { len: 232 }
        );
    }

    #[test]
    fn v2_refused() {
        let block = [0u8; 12];
        assert_eq!(
            parse(&v2_header(2, 0x11, &block)),
            Parsed::Invalid,
            "command 2"
        );
        assert_eq!(
            parse(&v2_header(1, 0x41, &block)),
            Parsed::Invalid,
            "family 4"
        );
        assert_eq!(
            parse(&v2_header(1, 0x13, &block)),
            Parsed::Invalid,
            "transport 3"
        );
        assert_eq!(
            parse(&v2_header(1, 0x11, &block[..11])),
            Parsed::Invalid,
            "short block"
        );
        assert_eq!(
            parse(&v2_header(1, 0x21, &block)),
            Parsed::Invalid,
            "short for IPv6"
        );
        let mut h = v2_header(1, 0x11, &block);
        h[12] = 0x11;
        assert_eq!(parse(&h), Parsed::Invalid, "version 1 in binary");
        let h = v2_header(1, 0x11, &vec![0; MAX_V2 - 15]);
        assert_eq!(parse(&h[..16]), Parsed::Invalid, "oversized");
    }

    #[test]
    fn every_prefix_is_incomplete_and_never_overreads() {
        let mut block = vec![10, 0, 0, 1, 10, 0, 0, 2, 0, 80, 1, 187];
        block.extend_from_slice(&[0x20, 0x00, 0x05, 1, 0, 0, 0, 0]);
        let headers = [
            b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".to_vec(),
            b"PROXY UNKNOWN\r\n".to_vec(),
            v2_header(1, 0x11, &block),
            v2_header(0, 0x00, &[]),
        ];
        for h in headers {
            for cut in 0..h.len() {
                match parse(&h[..cut]) {
                    Parsed::Incomplete { needed } => {
                        assert!(
                            needed >= 1 && cut + needed <= h.len(),
                            "cut {cut} needed {needed}"
                        )
                    }
                    other => panic!("prefix of {cut} bytes: {other:?}"),
                }
            }
            let whole = parse(&h);
            assert!(
                matches!(whole, Parsed::Header { len, .. } | Parsed::Local { len } if len == h.len())
            );
        }
    }
}
