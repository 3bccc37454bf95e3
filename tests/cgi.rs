//! CGI/1.1 (`--cgi`, RFC 3875): the script's environment, input and working directory,
//! how its output becomes a response, framing and keep-alive, time and concurrency
//! limits, and what is refused. Scripts are small /bin/sh files written into the docroot.
//! Every test runs in both modes except the concurrency limit (one inetd process serves
//! one connection, whose requests run one after the other).

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// Writes an executable `/bin/sh` script.
fn script(root: &Docroot, rel: &str, body: &str) -> PathBuf {
    let path = root.file(rel, format!("#!/bin/sh\n{body}"));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Prints its whole environment as the body.
const ENV_SCRIPT: &str = "printf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec /usr/bin/env\n";

/// Echoes the request body, with the body's meta-variables as response headers.
const ECHO_SCRIPT: &str = "printf 'Content-Type: application/octet-stream\\r\\nX-Length: %s\\r\\nX-Type: %s\\r\\n\\r\\n' \"$CONTENT_LENGTH\" \"$CONTENT_TYPE\"\nexec cat\n";

/// Answers with a body and no Content-Length, so the server must frame it.
const UNFRAMED_SCRIPT: &str =
    "printf 'Content-Type: text/plain\\n\\n'\necho first line\necho second line\n";
const UNFRAMED_BODY: &str = "first line\nsecond line\n";

fn site() -> Docroot {
    let root = Docroot::new();
    script(&root, "dir/env.cgi", ENV_SCRIPT);
    script(&root, "echo.cgi", ECHO_SCRIPT);
    script(&root, "unframed.cgi", UNFRAMED_SCRIPT);
    root.file("static.txt", "static text\n");
    root
}

fn cgi_server(v: Variant, root: &Docroot) -> Server {
    Server::builder(v, root.path()).arg("--cgi").start()
}

/// `GET target` with a Host and extra header lines, on a fresh connection (over HTTP/2
/// in the HTTP/2 cells).
fn get(server: &Server, target: &str, extra: &[&str]) -> Response {
    server.exchange(request("GET", target, extra))
}

/// The environment a script printed with `env`.
fn env_of(resp: &Response) -> BTreeMap<String, String> {
    assert_eq!(resp.status, 200, "{resp:#?}");
    resp.body_str()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn var<'a>(env: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(String::as_str)
}

/// A `POST` with a Content-Length body.
fn post(target: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST {target} HTTP/1.1\r\nHost: test\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

// --- environment ----------------------------------------------------------------------

fn env_has_the_meta_variables(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    let local_port = conn.stream().local_addr().unwrap().port();
    let resp = conn.roundtrip(
        "GET /dir/env.cgi?a=1&b=%20x HTTP/1.1\r\nHost: cgi.test:8123\r\n\
         X-Custom: hello\r\nProxy: evil\r\n\r\n",
    );
    let env = env_of(&resp);
    let software = format!("staticd/{}", env!("CARGO_PKG_VERSION"));
    let expected = [
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_SOFTWARE", software.as_str()),
        ("SERVER_NAME", "cgi.test"),
        ("SERVER_PORT", "8123"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_METHOD", "GET"),
        ("SCRIPT_NAME", "/dir/env.cgi"),
        ("QUERY_STRING", "a=1&b=%20x"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HTTP_X_CUSTOM", "hello"),
        ("HTTP_HOST", "cgi.test:8123"),
    ];
    for (name, value) in expected {
        assert_eq!(var(&env, name), Some(value), "{name} in {env:#?}");
    }
    assert_eq!(
        var(&env, "REMOTE_PORT"),
        Some(local_port.to_string().as_str()),
        "{env:#?}"
    );
    assert!(var(&env, "PATH_INFO").unwrap_or("").is_empty(), "{env:#?}");
    assert_eq!(var(&env, "HTTP_PROXY"), None, "httpoxy: {env:#?}");
    assert_eq!(var(&env, "CONTENT_LENGTH"), None, "no body: {env:#?}");
}

fn env_inherits_nothing_from_the_server(v: Variant) {
    let root = site();
    let server = Server::builder(v, root.path())
        .arg("--cgi")
        .env("STATICD_TEST_LEAK", "leaked")
        .start();
    let env = env_of(&get(&server, "/dir/env.cgi", &[]));
    // What the contract lists, plus what /bin/sh itself sets.
    let allowed = [
        "GATEWAY_INTERFACE",
        "SERVER_SOFTWARE",
        "SERVER_NAME",
        "SERVER_PORT",
        "SERVER_PROTOCOL",
        "REQUEST_METHOD",
        "SCRIPT_NAME",
        "PATH_INFO",
        "QUERY_STRING",
        "CONTENT_LENGTH",
        "CONTENT_TYPE",
        "REMOTE_ADDR",
        "REMOTE_PORT",
        "HTTPS",
        "PATH",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ];
    for name in env.keys() {
        assert!(
            allowed.contains(&name.as_str()) || name.starts_with("HTTP_"),
            "{name} should not be in the script's environment: {env:#?}"
        );
    }
    assert_eq!(var(&env, "STATICD_TEST_LEAK"), None);
    // HTTPS=on over TLS (as Apache and nginx set it), absent otherwise.
    let https = server.is_tls().then_some("on");
    assert_eq!(var(&env, "HTTPS"), https, "{env:#?}");
}

fn path_info_is_what_follows_the_script(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    for (target, expected) in [
        ("/dir/env.cgi/", "/"),
        ("/dir/env.cgi/x/y", "/x/y"),
        ("/dir/env.cgi/x%20y", "/x y"),
    ] {
        let env = env_of(&get(&server, target, &[]));
        assert_eq!(var(&env, "PATH_INFO"), Some(expected), "GET {target}");
        assert_eq!(
            var(&env, "SCRIPT_NAME"),
            Some("/dir/env.cgi"),
            "GET {target}"
        );
    }
}

fn query_string_is_set_even_when_empty(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let env = env_of(&get(&server, "/dir/env.cgi", &[]));
    assert_eq!(var(&env, "QUERY_STRING"), Some(""), "{env:#?}");
}

fn server_name_and_port_come_from_the_socket_without_host(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let resp = server
        .connect()
        .roundtrip("GET /dir/env.cgi HTTP/1.0\r\n\r\n");
    let env = env_of(&resp);
    assert_eq!(var(&env, "SERVER_PROTOCOL"), Some("HTTP/1.0"), "{env:#?}");
    let port = server.addr().port().to_string();
    assert_eq!(var(&env, "SERVER_PORT"), Some(port.as_str()), "{env:#?}");
    // The address the client connected to (RFC 3875 4.1.14: a hostname or network
    // address of the server the request was directed to).
    assert_eq!(var(&env, "SERVER_NAME"), Some("127.0.0.1"), "{env:#?}");
}

fn server_port_comes_from_the_socket_when_host_has_none(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let resp = server.exchange("GET /dir/env.cgi HTTP/1.1\r\nHost: named.test\r\n\r\n");
    let env = env_of(&resp);
    assert_eq!(var(&env, "SERVER_NAME"), Some("named.test"), "{env:#?}");
    let port = server.addr().port().to_string();
    assert_eq!(var(&env, "SERVER_PORT"), Some(port.as_str()), "{env:#?}");
}

// --- input and working directory ----------------------------------------------------

fn post_body_is_the_scripts_stdin(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let body = b"name=value&binary=\x00\x01\xff end";
    let resp = server.exchange(post("/echo.cgi", "application/x-test", body));
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert!(resp.body == body, "{resp:#?}");
    assert_eq!(
        resp.header("x-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(resp.header("x-type"), Some("application/x-test"));
}

fn large_post_body_is_echoed_whole(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let body = pattern(300 * 1024);
    let mut conn = server.connect();
    // Write from another thread: the script answers while it is still reading.
    let sender = conn.send_in_background(post("/echo.cgi", "application/octet-stream", &body));
    let resp = conn.read_response();
    sender.join().unwrap();
    assert_eq!(resp.status, 200, "{:?}", resp.headers);
    assert_eq!(resp.body.len(), body.len());
    assert!(resp.body == body, "echoed body differs");
}

fn script_runs_in_its_own_directory(v: Variant) {
    let root = site();
    script(
        &root,
        "sub/dir/pwd.cgi",
        "printf 'Content-Type: text/plain\\n\\n'\npwd -P\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/sub/dir/pwd.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    let expected = fs::canonicalize(root.join("sub/dir")).unwrap();
    assert_eq!(resp.body_str().trim_end(), expected.to_str().unwrap());
}

// --- the script's header block ------------------------------------------------------

fn status_field_sets_code_and_reason(v: Variant) {
    let root = site();
    script(
        &root,
        "nope.cgi",
        "printf 'Status: 404 Nope\\r\\nContent-Type: text/plain\\r\\n\\r\\nnot here\\n'\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/nope.cgi", &[]);
    assert_eq!(resp.status, 404, "{resp:#?}");
    assert_eq!(resp.body_str(), "not here\n");
    // HTTP/2 and HTTP/3 have no reason phrase to carry the script's.
    if !resp.is_multiplexed() {
        assert_eq!(resp.version, "HTTP/1.1");
        assert_eq!(resp.reason, "Nope");
    }
}

fn crlf_header_block_is_understood(v: Variant) {
    let root = site();
    script(
        &root,
        "crlf.cgi",
        "printf 'Content-Type: text/x-crlf\\r\\nX-Mine: yes\\r\\n\\r\\nbody-crlf'\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/crlf.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-type"), Some("text/x-crlf"));
    assert_eq!(resp.header("x-mine"), Some("yes"));
    assert_eq!(resp.body_str(), "body-crlf");
}

fn lf_header_block_is_understood(v: Variant) {
    let root = site();
    script(
        &root,
        "lf.cgi",
        "printf 'Content-Type: text/x-lf\\nX-Mine: yes\\n\\nbody-lf'\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/lf.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-type"), Some("text/x-lf"));
    assert_eq!(resp.header("x-mine"), Some("yes"));
    assert_eq!(resp.body_str(), "body-lf");
}

fn scripts_content_length_is_passed_through(v: Variant) {
    let root = site();
    script(
        &root,
        "sized.cgi",
        "printf 'Content-Type: text/plain\\nContent-Length: 5\\n\\nhello'\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/sized.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.content_length(), Some(5));
    assert_eq!(resp.header("transfer-encoding"), None);
    assert_eq!(resp.body_str(), "hello");
}

/// RFC 3875 §6.3.1: the server SHOULD NOT guess a type the script left out, and a block
/// without one (even without any CGI field, as Apache and lighttpd allow) is no error.
fn document_without_content_type_is_passed_on_untyped(v: Variant) {
    let root = site();
    script(
        &root,
        "untyped.cgi",
        "printf 'Status: 200 OK\\r\\nX-Custom: kept\\r\\n\\r\\nuntyped body\\n'\n",
    );
    script(&root, "bare.cgi", "printf 'X-Only: 1\\n\\nbare body'\n");
    let server = cgi_server(v, &root);
    let resp = get(&server, "/untyped.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-type"), None, "{resp:#?}");
    assert_eq!(resp.header("x-custom"), Some("kept"));
    assert_eq!(resp.body_str(), "untyped body\n");
    let resp = get(&server, "/bare.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-type"), None, "{resp:#?}");
    assert_eq!(resp.header("x-only"), Some("1"));
    assert_eq!(resp.body_str(), "bare body");
}

/// `_headers` applies to a script's response as to a file's: its fields
/// are added, and replace the script's own of the same name.
fn site_headers_apply_to_script_responses(v: Variant) {
    let root = site();
    script(
        &root,
        "tagged.cgi",
        "printf 'Content-Type: text/plain\\nX-Frame-Options: SAMEORIGIN\\n\\nbody'\n",
    );
    root.file(
        "_headers",
        "/*\n  X-Frame-Options: DENY\n/tagged.cgi\n  Cache-Control: no-store\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/tagged.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header_count("x-frame-options"), 1, "{resp:#?}");
    assert_eq!(resp.header("x-frame-options"), Some("DENY"), "{resp:#?}");
    assert_eq!(resp.header("cache-control"), Some("no-store"), "{resp:#?}");
    assert_eq!(resp.body_str(), "body");
    let other = get(&server, "/dir/env.cgi", &[]);
    assert_eq!(other.header("x-frame-options"), Some("DENY"), "{other:#?}");
    assert_eq!(other.header("cache-control"), None, "{other:#?}");
}

fn local_location_is_served_internally(v: Variant) {
    let root = site();
    script(&root, "local.cgi", "printf 'Location: /static.txt\\n\\n'\n");
    let server = cgi_server(v, &root);
    let resp = get(&server, "/local.cgi", &[]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "static text\n");
    assert_eq!(resp.header("location"), None);
}

fn local_location_after_post_is_fetched_with_get(v: Variant) {
    let root = site();
    script(
        &root,
        "forward.cgi",
        "cat >/dev/null\nprintf 'Location: /dir/env.cgi?from=post\\n\\n'\n",
    );
    let server = cgi_server(v, &root);
    let resp = server.exchange(post("/forward.cgi", "text/plain", b"some body"));
    let env = env_of(&resp);
    assert_eq!(var(&env, "REQUEST_METHOD"), Some("GET"), "{env:#?}");
    assert_eq!(var(&env, "QUERY_STRING"), Some("from=post"), "{env:#?}");
    assert_eq!(var(&env, "SCRIPT_NAME"), Some("/dir/env.cgi"), "{env:#?}");
    assert_eq!(var(&env, "CONTENT_LENGTH"), None, "{env:#?}");
}

fn local_location_loop_ends_in_a_server_error(v: Variant) {
    let root = site();
    script(&root, "loop.cgi", "printf 'Location: /loop.cgi\\n\\n'\n");
    let server = cgi_server(v, &root);
    let resp = get(&server, "/loop.cgi", &[]);
    assert!(resp.status >= 500, "{resp:#?}");
}

fn url_location_gets_302(v: Variant) {
    let root = site();
    script(
        &root,
        "away.cgi",
        "printf 'Location: http://elsewhere.test/x?y=1\\n\\n'\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/away.cgi", &[]);
    assert_eq!(resp.status, 302, "{resp:#?}");
    assert_eq!(resp.header("location"), Some("http://elsewhere.test/x?y=1"));
}

fn url_location_with_status_keeps_the_status(v: Variant) {
    let root = site();
    script(
        &root,
        "moved.cgi",
        "printf 'Status: 301 Moved Permanently\\nLocation: http://elsewhere.test/\\n\\n'\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/moved.cgi", &[]);
    assert_eq!(resp.status, 301, "{resp:#?}");
    assert_eq!(resp.header("location"), Some("http://elsewhere.test/"));
}

fn output_without_header_block_gets_502_and_a_log_line(v: Variant) {
    let root = site();
    script(&root, "bad.cgi", "echo just some text\n");
    let server = cgi_server(v, &root);
    let resp = get(&server, "/bad.cgi", &[]);
    assert_error(&resp, 502);
    assert!(!resp.body_str().contains("just some text"));
    server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: cgi /bad.cgi: ") && l.len() > 23);
}

fn empty_output_gets_502(v: Variant) {
    let root = site();
    script(&root, "silent.cgi", "exit 0\n");
    let server = cgi_server(v, &root);
    assert_error(&get(&server, "/silent.cgi", &[]), 502);
    server
        .stderr()
        .wait_line(|l| l.starts_with("staticd: cgi /silent.cgi: "));
}

/// A script that fails gets the site's own page for the status, and the
/// site's `_headers`, like any other error.
fn a_failed_script_gets_the_sites_error_page(v: Variant) {
    let root = site();
    script(&root, "silent.cgi", "exit 0\n");
    root.file("502.html", "<p>our own 502 page</p>\n");
    root.file("_headers", "/*\n  X-Site: yes\n");
    let server = cgi_server(v, &root);
    let resp = get(&server, "/silent.cgi", &[]);
    assert_eq!(resp.status, 502, "{resp:#?}");
    assert_eq!(resp.body_str(), "<p>our own 502 page</p>\n");
    assert!(
        resp.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{resp:#?}"
    );
    assert_eq!(resp.header("x-site"), Some("yes"), "{resp:#?}");
}

/// Writes a line to stderr before it answers.
const NOISY_SCRIPT: &str =
    "echo 'oops from script' >&2\nprintf 'Content-Type: text/plain\\n\\nfine'\n";

fn script_stderr_goes_to_server_stderr_with_prefix(v: Variant) {
    let root = site();
    script(&root, "noisy.cgi", NOISY_SCRIPT);
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/noisy.cgi", &[]));
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "fine");
    // The connection stays open meanwhile, so an inetd process is still running.
    server
        .stderr()
        .wait_line(|l| l == "staticd: cgi /noisy.cgi: oops from script");
}

fn script_stderr_is_not_lost_when_the_connection_closes(v: Variant) {
    let root = site();
    // 5000 lines in large writes, then one to look for, all before the script answers.
    script(
        &root,
        "chatty.cgi",
        "seq 1 5000 | sed 's/^/chatter /' >&2\n\
         echo 'last words' >&2\nprintf 'Content-Type: text/plain\\n\\nfine'\n",
    );
    let server = cgi_server(v, &root);
    // A closing connection (which ends an inetd process) must not lose what the script
    // wrote before it answered and exited.
    let resp = get(&server, "/chatty.cgi", &["Connection: close"]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    server
        .stderr()
        .wait_line(|l| l == "staticd: cgi /chatty.cgi: last words");
}

// --- framing and connections --------------------------------------------------------

fn http_1_1_without_length_is_chunked(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    // The reader decodes (strictly) because of the Transfer-Encoding it checks here.
    let resp = conn.roundtrip(request("GET", "/unframed.cgi", &[]));
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(
        resp.header("transfer-encoding")
            .map(str::to_ascii_lowercase),
        Some("chunked".to_string())
    );
    assert_eq!(resp.content_length(), None);
    assert_eq!(resp.body_str(), UNFRAMED_BODY);
    // Still usable afterwards.
    let next = conn.roundtrip(request("GET", "/static.txt", &[]));
    assert_eq!(next.body_str(), "static text\n");
}

fn http_1_0_without_length_is_close_delimited(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    conn.send("GET /unframed.cgi HTTP/1.0\r\n\r\n");
    let head = conn.read_head();
    assert_eq!(head.status, 200, "{head:#?}");
    assert_eq!(head.content_length(), None, "{head:#?}");
    assert_eq!(head.header("transfer-encoding"), None, "{head:#?}");
    assert!(head.has_token("connection", "close"), "{head:#?}");
    let (body, ended) = conn.read_to_end();
    assert_eq!(ended, Ended::Eof);
    assert_eq!(String::from_utf8_lossy(&body), UNFRAMED_BODY);
}

fn keep_alive_survives_script_responses(v: Variant) {
    let root = site();
    script(
        &root,
        "sized.cgi",
        "printf 'Content-Type: text/plain\\nContent-Length: 5\\n\\nhello'\n",
    );
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    let first = conn.roundtrip(request("GET", "/unframed.cgi", &[]));
    assert_eq!(first.body_str(), UNFRAMED_BODY);
    let second = conn.roundtrip(request("GET", "/sized.cgi", &[]));
    assert_eq!(second.body_str(), "hello");
    let third = conn.roundtrip(request("GET", "/unframed.cgi", &[]));
    assert_eq!(third.body_str(), UNFRAMED_BODY);
}

fn pipelined_get_after_post_to_script_is_answered(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    let mut bytes = post("/echo.cgi", "text/plain", b"hello body");
    bytes.extend_from_slice(request("GET", "/static.txt", &[]).as_bytes());
    conn.send(bytes);
    let first = conn.read_response();
    assert_eq!(first.status, 200, "{first:#?}");
    assert_eq!(first.body_str(), "hello body");
    let second = conn.read_response();
    assert_eq!(second.status, 200, "{second:#?}");
    assert_eq!(second.body_str(), "static text\n");
}

fn head_runs_the_script_without_sending_a_body(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let mut conn = server.connect();
    let head = conn.roundtrip(request("HEAD", "/unframed.cgi", &[]));
    assert_eq!(head.status, 200, "{head:#?}");
    assert_eq!(head.header("content-type"), Some("text/plain"));
    // A body sent anyway would be read as the next response's head.
    let next = conn.roundtrip(request("GET", "/static.txt", &[]));
    assert_eq!(next.status, 200, "{next:#?}");
    assert_eq!(next.body_str(), "static text\n");
}

// --- limits -------------------------------------------------------------------------

/// Whether a process is running (a zombie is not).
fn running(pid: &str) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
            state != Some('Z')
        }
        Err(_) => false,
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {IO_TIMEOUT:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn timeout_kills_the_process_group_and_answers_504(v: Variant) {
    let root = site();
    let scratch = tempfile::tempdir().unwrap();
    let pid_file = scratch.path().join("pids");
    script(
        &root,
        "hang.cgi",
        &format!(
            "sleep 100 &\necho \"$$ $!\" > '{}'\nsleep 100\n",
            pid_file.display()
        ),
    );
    let server = Server::builder(v, root.path())
        .args(["--cgi", "--cgi-timeout", "1"])
        .start();
    let resp = get(&server, "/hang.cgi", &[]);
    assert_error(&resp, 504);

    let pids = fs::read_to_string(&pid_file).expect("the script wrote its pids");
    let pids: Vec<&str> = pids.split_whitespace().collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    let (shell, background) = (pids[0], pids[1]);
    // The shell is staticd's child: it must be killed and reaped (no zombie).
    wait_until(&format!("script process {shell} gone"), || {
        !Path::new(&format!("/proc/{shell}")).exists()
    });
    // The background `sleep 100` was reparented when the shell died; reaping it is its
    // new parent's job, but it must not be running.
    wait_until(&format!("background sleep {background} killed"), || {
        !running(background)
    });
}

fn timeout_after_output_cuts_the_response(v: Variant) {
    let root = site();
    script(
        &root,
        "partial.cgi",
        "printf 'Content-Type: text/plain\\n\\npartial'\nsleep 100\n",
    );
    let server = Server::builder(v, root.path())
        .args(["--cgi", "--cgi-timeout", "1"])
        .start();
    let mut conn = server.connect();
    conn.send(request("GET", "/partial.cgi", &[]));
    let head = conn.read_head();
    if head.status == 504 {
        // Nothing had been sent yet: a plain 504 is fine too.
        return;
    }
    assert_eq!(head.status, 200, "{head:#?}");
    assert_eq!(
        head.header("transfer-encoding")
            .map(str::to_ascii_lowercase),
        Some("chunked".to_string()),
        "{head:#?}"
    );
    // The body so far, then the connection ends without the last chunk: the client can
    // tell that the response is incomplete.
    let (rest, _) = conn.read_to_end();
    assert!(
        contains(&rest, b"partial"),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
    assert!(
        !contains(&rest, b"0\r\n\r\n"),
        "a cut response must not end with the last chunk: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

fn over_cgi_max_concurrent_scripts_get_503(v: Variant) {
    let root = site();
    let gate = tempfile::tempdir().unwrap();
    let started = gate.path().join("started");
    let go = gate.path().join("go");
    script(
        &root,
        "slow.cgi",
        &format!(
            "touch '{started}'\ni=0\n\
             while [ ! -e '{go}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n\
             printf 'Content-Type: text/plain\\n\\nslow done'\n",
            started = started.display(),
            go = go.display()
        ),
    );
    let server = Server::builder(v, root.path())
        .args(["--cgi", "--cgi-max", "1"])
        .start();
    let mut first = server.connect();
    first.send(request("GET", "/slow.cgi", &[]));
    wait_until("the first script started", || started.exists());

    assert_error(&get(&server, "/slow.cgi", &[]), 503);
    assert_error(&get(&server, "/dir/env.cgi", &[]), 503);
    // Static files are not limited.
    assert_eq!(get(&server, "/static.txt", &[]).status, 200);

    fs::write(&go, "").unwrap();
    let resp = first.read_response();
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "slow done");
    // The place is given back once the first script is gone.
    wait_until("a script runs again", || {
        get(&server, "/dir/env.cgi", &[]).status == 200
    });
}

fn script_in_a_virtual_host(v: Variant) {
    let root = Docroot::new();
    script(&root, "site.test/env.cgi", ENV_SCRIPT);
    let server = Server::builder(v, root.path())
        .args(["--cgi", "--vhosts"])
        .start();
    let resp = server.exchange("GET /env.cgi/more HTTP/1.1\r\nHost: site.test\r\n\r\n");
    let env = env_of(&resp);
    assert_eq!(var(&env, "SCRIPT_NAME"), Some("/env.cgi"), "{env:#?}");
    assert_eq!(var(&env, "PATH_INFO"), Some("/more"), "{env:#?}");
    assert_eq!(var(&env, "SERVER_NAME"), Some("site.test"), "{env:#?}");
}

// --- refusals -----------------------------------------------------------------------

fn non_executable_script_is_403_and_never_shown(v: Variant) {
    let root = site();
    root.file(
        "source.cgi",
        "#!/bin/sh\n# SECRET-SOURCE-MARKER\necho SECRET-SOURCE-MARKER\n",
    );
    let server = cgi_server(v, &root);
    let resp = get(&server, "/source.cgi", &[]);
    assert_error(&resp, 403);
    assert!(!resp.body_str().contains("SECRET-SOURCE-MARKER"));
    let resp = server.exchange(request("HEAD", "/source.cgi", &[]));
    assert_eq!(resp.status, 403, "{resp:#?}");
}

fn chunked_post_to_script_gets_411(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let resp = server.connect().roundtrip(
        "POST /echo.cgi HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\nhello\r\n0\r\n\r\n",
    );
    assert_error(&resp, 411);
}

fn post_to_a_static_file_gets_405_with_allow(v: Variant) {
    let root = site();
    let server = cgi_server(v, &root);
    let resp = server.exchange(post("/static.txt", "text/plain", b"x=1"));
    assert_error(&resp, 405);
    assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
}

fn post_without_cgi_flag_gets_405(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.exchange(post("/echo.cgi", "text/plain", b"x=1"));
    assert_error(&resp, 405);
    assert_eq!(resp.header("allow"), Some("GET, HEAD, OPTIONS"));
}

fn lone_dot_cgi_is_not_a_script(v: Variant) {
    let root = site();
    script(&root, ".cgi", ENV_SCRIPT);
    let server = cgi_server(v, &root);
    assert_error(&get(&server, "/.cgi", &[]), 404);
}

fn script_requests_are_logged_with_their_status(v: Variant) {
    let root = site();
    script(&root, "bad.cgi", "echo no header block\n");
    let server = Server::builder(v, root.path())
        .arg("--cgi")
        .log_format("common")
        .start();
    assert_eq!(get(&server, "/unframed.cgi", &[]).status, 200);
    assert_eq!(get(&server, "/bad.cgi", &[]).status, 502);
    let version = server.log_version();
    server
        .stderr()
        .wait_line(|l| l.contains(&format!("\"GET /unframed.cgi {version}\" 200 ")));
    server
        .stderr()
        .wait_line(|l| l.contains(&format!("\"GET /bad.cgi {version}\" 502 ")));
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    env_has_the_meta_variables,
    env_inherits_nothing_from_the_server,
    path_info_is_what_follows_the_script,
    query_string_is_set_even_when_empty,
    server_name_and_port_come_from_the_socket_without_host,
    server_port_comes_from_the_socket_when_host_has_none,
    post_body_is_the_scripts_stdin,
    large_post_body_is_echoed_whole,
    script_runs_in_its_own_directory,
    status_field_sets_code_and_reason,
    crlf_header_block_is_understood,
    lf_header_block_is_understood,
    scripts_content_length_is_passed_through,
    document_without_content_type_is_passed_on_untyped,
    site_headers_apply_to_script_responses,
    local_location_is_served_internally,
    local_location_after_post_is_fetched_with_get,
    local_location_loop_ends_in_a_server_error,
    url_location_gets_302,
    url_location_with_status_keeps_the_status,
    output_without_header_block_gets_502_and_a_log_line,
    empty_output_gets_502,
    a_failed_script_gets_the_sites_error_page,
    script_stderr_goes_to_server_stderr_with_prefix,
    script_stderr_is_not_lost_when_the_connection_closes,
    http_1_1_without_length_is_chunked,
    http_1_0_without_length_is_close_delimited,
    keep_alive_survives_script_responses,
    pipelined_get_after_post_to_script_is_answered,
    head_runs_the_script_without_sending_a_body,
    timeout_kills_the_process_group_and_answers_504,
    timeout_after_output_cuts_the_response,
    script_in_a_virtual_host,
    non_executable_script_is_403_and_never_shown,
    chunked_post_to_script_gets_411,
    post_to_a_static_file_gets_405_with_allow,
    post_without_cgi_flag_gets_405,
    lone_dot_cgi_is_not_a_script,
    script_requests_are_logged_with_their_status,
);

// Standalone only: `--cgi-max` bounds scripts across connections of one process, and an
// inetd process only ever has one connection, whose requests run one at a time.
matrix!([h1, tls, h2c, h2_tls, h3, uring] standalone: over_cgi_max_concurrent_scripts_get_503);
