//! Virtual hosts: which directory under the root a Host header picks.

/// Longest Host name accepted as a directory name.
const MAX_HOST_BYTES: usize = 255;

/// The Host value could name something other than a plain directory entry.
#[derive(Debug, PartialEq, Eq)]
pub struct BadHost;

/// Directory names to try for a Host value, most specific first:
/// `host:port` (when a port is named), `host`, then `default`.
pub fn candidates(host: Option<&str>) -> Result<Vec<String>, BadHost> {
    let host = host.map(str::trim).unwrap_or("");
    if host.is_empty() {
        return Ok(vec!["default".to_string()]);
    }
    let host = host.to_ascii_lowercase();
    let (name, port) = split_port(&host);
    check_entry_name(name)?;
    let mut out = Vec::with_capacity(3);
    if let Some(port) = port {
        let with_port = format!("{name}:{port}");
        check_entry_name(&with_port)?;
        out.push(with_port);
    }
    out.push(name.to_string());
    out.push("default".to_string());
    Ok(out)
}

/// `example.com:8080` -> (`example.com`, `8080`); `[::1]:80` -> (`[::1]`, `80`).
pub fn split_port(host: &str) -> (&str, Option<&str>) {
    let name_end = if host.starts_with('[') {
        host.find(']').map_or(host.len(), |i| i + 1)
    } else {
        0
    };
    match host[name_end..].rfind(':') {
        Some(i) => {
            let at = name_end + i;
            let port = &host[at + 1..];
            let port = (!port.is_empty()).then_some(port);
            (&host[..at], port)
        }
        None => (host, None),
    }
}

fn check_entry_name(name: &str) -> Result<(), BadHost> {
    let plain = !name.is_empty()
        && name.len() <= MAX_HOST_BYTES
        && !name.starts_with('.')
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b'\\' || b == 0 || b.is_ascii_control());
    if plain {
        Ok(())
    } else {
        Err(BadHost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_in_order() {
        assert_eq!(
            candidates(Some("WWW.Foo.test")).unwrap(),
            ["www.foo.test", "default"]
        );
        assert_eq!(
            candidates(Some("foo.test:8080")).unwrap(),
            ["foo.test:8080", "foo.test", "default"]
        );
        assert_eq!(
            candidates(Some("[::1]:80")).unwrap(),
            ["[::1]:80", "[::1]", "default"]
        );
        assert_eq!(candidates(Some("[::1]")).unwrap(), ["[::1]", "default"]);
        assert_eq!(candidates(None).unwrap(), ["default"]);
        assert_eq!(candidates(Some("")).unwrap(), ["default"]);
        assert_eq!(
            candidates(Some("foo.test:")).unwrap(),
            ["foo.test", "default"]
        );
    }

    #[test]
    fn refuses_what_is_not_a_plain_name() {
        for h in ["..", ".hidden", "a/b", "/", "a\\b", "a\0b", ":80"] {
            assert_eq!(candidates(Some(h)), Err(BadHost), "{h:?}");
        }
        assert_eq!(candidates(Some(&"a".repeat(256))), Err(BadHost));
        assert!(candidates(Some(&"a".repeat(255))).is_ok());
    }
}
