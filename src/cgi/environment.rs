//! The script's environment (RFC 3875 §4): the meta-variables for one
//! request, and nothing inherited from the server.

use std::path::Path;

/// The only PATH a script gets: the server's own environment stays private.
const SCRIPT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// One request, as the script will see it.
pub struct CgiParams<'a> {
    /// The file to run, as found on disk.
    pub script_path: &'a Path,
    /// The URL path of the script, e.g. `/cgi-bin/a.cgi`.
    pub script_name: &'a str,
    /// What follows the script in the URL path, already percent-decoded
    /// (RFC 3875 §4.1.5); empty when nothing follows.
    pub path_info: &'a str,
    /// The query string as it came, still percent-encoded, without the `?`.
    pub query: &'a str,
    pub method: &'a str,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub protocol: &'a str,
    /// Every request header field, in the order received.
    pub headers: &'a [(&'a str, &'a str)],
    /// The length of the request body; `None` when there is no body.
    pub content_length: Option<u64>,
    pub server_name: &'a str,
    pub server_port: u16,
    pub remote_addr: &'a str,
    pub remote_port: Option<u16>,
    /// The request came over TLS: HTTPS=on, as Apache, nginx and lighttpd
    /// tell scripts (not in RFC 3875, but what scripts look for).
    pub https: bool,
}

/// The script's whole environment (RFC 3875 §4.1): nothing is inherited
/// from the server.
pub fn environment(p: &CgiParams) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::with_capacity(16 + p.headers.len());
    let mut set = |name: &str, value: &str| env.push((name.to_string(), value.to_string()));
    set("PATH", SCRIPT_PATH);
    set("GATEWAY_INTERFACE", "CGI/1.1");
    set(
        "SERVER_SOFTWARE",
        concat!("staticd/", env!("CARGO_PKG_VERSION")),
    );
    set("SERVER_NAME", p.server_name);
    set("SERVER_PORT", &p.server_port.to_string());
    set("SERVER_PROTOCOL", p.protocol);
    set("REQUEST_METHOD", p.method);
    set("SCRIPT_NAME", p.script_name);
    // §4.1.5: no path info means no PATH_INFO, not an empty one.
    if !p.path_info.is_empty() {
        set("PATH_INFO", p.path_info);
    }
    set("QUERY_STRING", p.query);
    if p.https {
        set("HTTPS", "on");
    }
    set("REMOTE_ADDR", p.remote_addr);
    if let Some(port) = p.remote_port {
        set("REMOTE_PORT", &port.to_string());
    }
    if let Some(len) = p.content_length {
        set("CONTENT_LENGTH", &len.to_string());
        if let Some(ty) = joined_field(p.headers, "content-type") {
            set("CONTENT_TYPE", &ty);
        }
    }
    for (name, value) in p.headers {
        let Some(var) = header_variable(name) else {
            continue;
        };
        // An environment entry cannot hold a NUL; the parser should never
        // let one through, but a script must not fail to start over it.
        if value.contains('\0') {
            continue;
        }
        match env.iter_mut().find(|(n, _)| *n == var) {
            Some((_, joined)) => {
                joined.push_str(field_separator(name));
                joined.push_str(value);
            }
            None => env.push((var, value.to_string())),
        }
    }
    env
}

/// `HTTP_*` for a request header, or None for one the script must not see
/// that way.
fn header_variable(name: &str) -> Option<String> {
    // The body's length and type have their own variables (§4.1.18).
    if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("content-type") {
        return None;
    }
    // `X_Forwarded_For` and `X-Forwarded-For` would both become
    // HTTP_X_FORWARDED_FOR, letting a client forge a header a proxy in front
    // of us set; like Apache, names that are not letters, digits and `-` are
    // not passed on at all.
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    let var: String = "HTTP_"
        .chars()
        .chain(name.chars().map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        }))
        .collect();
    // httpoxy: a client's `Proxy:` header would become the HTTP_PROXY that
    // many HTTP libraries take as the proxy for the script's own requests.
    if var == "HTTP_PROXY" {
        return None;
    }
    Some(var)
}

/// Repeated fields are one list joined with commas (RFC 9110 §5.3), except
/// Cookie, whose pairs are separated by semicolons (RFC 6265 §5.4).
fn field_separator(name: &str) -> &'static str {
    if name.eq_ignore_ascii_case("cookie") {
        "; "
    } else {
        ", "
    }
}

fn joined_field(headers: &[(&str, &str)], name: &str) -> Option<String> {
    let mut values = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v);
    let first = values.next()?.to_string();
    Some(values.fold(first, |mut all, v| {
        all.push_str(", ");
        all.push_str(v);
        all
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgi::tests::params;

    fn var<'e>(env: &'e [(String, String)], name: &str) -> Option<&'e str> {
        env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn environment_has_the_meta_variables_and_nothing_else() {
        let env = environment(&params(&[]));
        let expected = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("SERVER_NAME", "example.org"),
            ("SERVER_PORT", "8080"),
            ("SERVER_PROTOCOL", "HTTP/1.1"),
            ("REQUEST_METHOD", "GET"),
            ("SCRIPT_NAME", "/a.cgi"),
            ("QUERY_STRING", ""),
            ("REMOTE_ADDR", "192.0.2.7"),
            ("REMOTE_PORT", "40000"),
        ];
        for (name, value) in expected {
            assert_eq!(var(&env, name), Some(value), "{name}");
        }
        let software = var(&env, "SERVER_SOFTWARE").unwrap();
        assert_eq!(software, format!("staticd/{}", env!("CARGO_PKG_VERSION")));
        assert_eq!(env.len(), expected.len() + 1, "{env:?}");
    }

    #[test]
    fn path_info_is_what_follows_the_script() {
        for (info, expected) in [("", None), ("/", Some("/")), ("/x/y", Some("/x/y"))] {
            let p = CgiParams {
                path_info: info,
                ..params(&[])
            };
            assert_eq!(var(&environment(&p), "PATH_INFO"), expected, "{info:?}");
        }
    }

    #[test]
    fn query_string_is_passed_as_it_came() {
        let p = CgiParams {
            query: "a=1&b=%20",
            ..params(&[])
        };
        assert_eq!(var(&environment(&p), "QUERY_STRING"), Some("a=1&b=%20"));
    }

    #[test]
    fn headers_become_http_variables() {
        let headers = [
            ("User-Agent", "curl/8"),
            ("X-Forwarded-For", "192.0.2.1"),
            ("accept", "text/html"),
            ("x-forwarded-for", "192.0.2.2"),
            ("Cookie", "a=1"),
            ("cookie", "b=2"),
        ];
        let env = environment(&params(&headers));
        assert_eq!(var(&env, "HTTP_USER_AGENT"), Some("curl/8"));
        assert_eq!(var(&env, "HTTP_ACCEPT"), Some("text/html"));
        assert_eq!(
            var(&env, "HTTP_X_FORWARDED_FOR"),
            Some("192.0.2.1, 192.0.2.2")
        );
        assert_eq!(var(&env, "HTTP_COOKIE"), Some("a=1; b=2"));
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    #[test]
    fn proxy_and_underscored_headers_are_not_passed() {
        let headers = [
            ("Proxy", "http://evil.example:3128"),
            ("X_Forwarded_For", "spoofed"),
            ("X.Dotted", "odd"),
        ];
        let env = environment(&params(&headers));
        assert_eq!(var(&env, "HTTP_PROXY"), None);
        assert_eq!(var(&env, "HTTP_X_FORWARDED_FOR"), None);
        assert!(env.iter().all(|(n, _)| !n.starts_with("HTTP_")), "{env:?}");
    }

    #[test]
    fn body_length_and_type_have_their_own_variables() {
        let headers = [("Content-Type", "text/plain"), ("Content-Length", "3")];
        let with_body = CgiParams {
            method: "POST",
            content_length: Some(3),
            ..params(&headers)
        };
        let env = environment(&with_body);
        assert_eq!(var(&env, "CONTENT_LENGTH"), Some("3"));
        assert_eq!(var(&env, "CONTENT_TYPE"), Some("text/plain"));
        assert_eq!(var(&env, "HTTP_CONTENT_TYPE"), None);
        assert_eq!(var(&env, "HTTP_CONTENT_LENGTH"), None);

        let env = environment(&params(&headers));
        assert_eq!(var(&env, "CONTENT_LENGTH"), None);
        assert_eq!(var(&env, "CONTENT_TYPE"), None);
    }
}
