//! Which names certificates are ordered for: `--acme NAME` checked, and
//! `--acme-vhosts` read from the virtual-host directories.

use std::net::IpAddr;
use std::path::Path;

/// `--acme NAME`: a DNS name, lower-cased, without a trailing dot. IP
/// addresses and wildcards are refused: the challenges staticd answers
/// (TLS-ALPN-01, HTTP-01) cannot prove either.
pub fn parse(text: &str) -> Result<String, String> {
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.parse::<IpAddr>().is_ok() {
        return Err("an IP address: certificates are ordered for DNS names".to_string());
    }
    if name.starts_with("*.") {
        return Err(
            "a wildcard needs the DNS-01 challenge, which staticd does not answer".to_string(),
        );
    }
    if !is_dns_name(&name) {
        return Err("not a DNS name (letters, digits, '-' and dots)".to_string());
    }
    Ok(name)
}

/// Letters, digits and inner hyphens in labels of 1 to 63 bytes, at most
/// 253 in all: also what makes a name safe as a file name in the state
/// directory.
fn is_dns_name(name: &str) -> bool {
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    (1..=253).contains(&name.len()) && name.split('.').all(label_ok)
}

/// `--acme-vhosts`: the names of the virtual-host directories under
/// `root`, sorted; `default`, names with a port, IP addresses and anything
/// else that is not a DNS name are left out.
pub fn from_vhosts(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name != "default" && !name.contains(':'))
        .filter_map(|name| parse(&name).ok().filter(|parsed| *parsed == name))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_lower_cased() {
        assert_eq!(parse("Example.ORG.").unwrap(), "example.org");
        assert_eq!(parse("a-b.example").unwrap(), "a-b.example");
        for bad in [
            "",
            "192.0.2.1",
            "::1",
            "*.example.org",
            "a..b",
            "-a.example",
            "a_b.example",
            "a/b",
            "..",
            "example.org:443",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn vhost_directories_give_the_dns_names_only() {
        let root = std::env::temp_dir().join(format!("staticd-acme-vhosts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in [
            "b.example",
            "a.example",
            "default",
            "127.0.0.1",
            "c.example:8080",
            "Upper.example",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("file.example"), "").unwrap();
        assert_eq!(from_vhosts(&root), ["a.example", "b.example"]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
