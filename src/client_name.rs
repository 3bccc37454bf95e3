//! How the access log names a connection's client: its IP address as text,
//! `unix:` for a Unix-socket client, or `-` when unknown.
//!
//! The name is held inline, not in a `String`: a connection's name lives
//! as long as the connection, and a small heap allocation made at accept
//! time lands among the short-lived ones of its first request. Once those
//! are freed, the name alone keeps their page resident. Measured with
//! 10,000 idle keep-alive connections opened one after another: 1.38-1.48
//! KiB of RSS per connection with the Strings, 0.66-0.68 without
//! (benches/README.md, "What moved the figures this round").

use std::fmt::{self, Write};
use std::net::IpAddr;

/// The longest name: an IPv6 address in full with an embedded IPv4 one
/// ("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255") is 45 bytes.
const MAX: usize = 46;

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ClientName {
    len: u8,
    bytes: [u8; MAX],
}

impl ClientName {
    /// `text`, cut at a character boundary if longer than any address.
    pub fn new(text: &str) -> ClientName {
        let mut end = text.len().min(MAX);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut name = ClientName {
            len: end as u8,
            bytes: [0; MAX],
        };
        name.bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
        name
    }

    /// An address as text, formatted without allocating.
    pub fn ip(ip: IpAddr) -> ClientName {
        let mut name = ClientName {
            len: 0,
            bytes: [0; MAX],
        };
        // Every address fits (see MAX): write! cannot fail.
        let _ = write!(name, "{ip}");
        name
    }

    pub fn as_str(&self) -> &str {
        // Only whole characters are ever stored (`new`, `write_str`).
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("-")
    }
}

impl Write for ClientName {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let at = self.len as usize;
        let end = at + s.len();
        if end > MAX {
            return Err(fmt::Error);
        }
        self.bytes[at..end].copy_from_slice(s.as_bytes());
        self.len = end as u8;
        Ok(())
    }
}

impl std::ops::Deref for ClientName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for ClientName {
    fn from(text: &str) -> ClientName {
        ClientName::new(text)
    }
}

impl From<String> for ClientName {
    fn from(text: String) -> ClientName {
        ClientName::new(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_address_fits_whole() {
        let ip: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"
            .parse()
            .unwrap();
        assert_eq!(ClientName::ip(ip).as_str(), ip.to_string());
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(&*ClientName::ip(v4), "192.0.2.1");
    }

    #[test]
    fn text_is_kept_and_overlong_text_cut_at_a_character() {
        assert_eq!(ClientName::new("unix:").as_str(), "unix:");
        assert_eq!(ClientName::new("-").to_string(), "-");
        let long = "é".repeat(40);
        let cut = ClientName::new(&long);
        assert!(cut.len() <= MAX && long.starts_with(cut.as_str()));
        assert_eq!(cut.len(), 46);
    }
}
