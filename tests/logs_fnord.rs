//! Access-log lines: fnord's `IP STATUS SIZE HOST USER_AGENT REFERER PATH` and Apache's
//! combined format. Every test runs in both modes; in inetd mode the client address comes
//! from TCPREMOTEIP, as tcpserver sets it.

#[macro_use]
mod common;

use common::*;

/// What tcpserver would put in TCPREMOTEIP for the inetd runs (TEST-NET-1).
const INETD_CLIENT: &str = "192.0.2.7";

const AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) Tester/1.0";
const AGENT_UNDERSCORED: &str = "Mozilla/5.0_(X11;_Linux_x86_64)_Tester/1.0";

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

fn logging_server(v: Variant, root: &Docroot, format: &str) -> Server {
    let builder = Server::builder(v, root.path()).log_format(format);
    match v.mode {
        Mode::Standalone => builder,
        Mode::Inetd => builder.env("TCPREMOTEIP", INETD_CLIENT),
    }
    .start()
}

fn client_ip(v: Variant) -> &'static str {
    match v.mode {
        Mode::Standalone => "127.0.0.1",
        Mode::Inetd => INETD_CLIENT,
    }
}

/// Sends one request (over HTTP/2 in the HTTP/2 cells), checks the status, and
/// returns the response and the first access-log line that contains `marker`.
fn logged(server: &Server, raw: &str, status: u16, marker: &str) -> (Response, String) {
    let resp = server.exchange(raw);
    assert_eq!(resp.status, status, "{resp:#?}");
    let line = server
        .stderr()
        .wait_line(|l| !l.starts_with("staticd: ") && l.contains(marker));
    (resp, line)
}

fn fnord_line_has_the_exact_shape(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "fnord");
    let (_, line) = logged(
        &server,
        &format!("GET /a.txt?x=1 HTTP/1.1\r\nHost: logs.test\r\nUser-Agent: {AGENT}\r\n\r\n"),
        200,
        "/a.txt",
    );
    let ip = client_ip(v);
    assert_eq!(
        line,
        format!("{ip} 200 6 logs.test {AGENT_UNDERSCORED} none /a.txt?x=1")
    );
}

fn fnord_line_carries_the_referer(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "fnord");
    let (_, line) = logged(
        &server,
        &format!(
            "GET /a.txt HTTP/1.1\r\nHost: logs.test\r\nUser-Agent: {AGENT}\r\n\
             Referer: http://ref.test/from?p=1\r\n\r\n"
        ),
        200,
        "/a.txt",
    );
    let ip = client_ip(v);
    assert_eq!(
        line,
        format!("{ip} 200 6 logs.test {AGENT_UNDERSCORED} http://ref.test/from?p=1 /a.txt")
    );
}

fn fnord_line_without_host_has_a_dash(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "fnord");
    let (_, line) = logged(
        &server,
        "GET /a.txt HTTP/1.0\r\nUser-Agent: curl/8.0\r\n\r\n",
        200,
        "/a.txt",
    );
    let ip = client_ip(v);
    assert_eq!(line, format!("{ip} 200 6 - curl/8.0 none /a.txt"));
}

fn fnord_line_logs_error_status_and_size(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "fnord");
    let (resp, line) = logged(
        &server,
        "GET /missing.txt HTTP/1.1\r\nHost: logs.test\r\nUser-Agent: curl/8.0\r\n\r\n",
        404,
        "/missing.txt",
    );
    let ip = client_ip(v);
    let size = resp.body.len();
    assert_eq!(
        line,
        format!("{ip} 404 {size} logs.test curl/8.0 none /missing.txt")
    );
}

fn fnord_path_is_the_target_as_sent(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "fnord");
    let (_, line) = logged(
        &server,
        "GET /%61.txt?q=%20 HTTP/1.1\r\nHost: logs.test\r\nUser-Agent: curl/8.0\r\n\r\n",
        200,
        "/%61.txt",
    );
    let ip = client_ip(v);
    assert_eq!(
        line,
        format!("{ip} 200 6 logs.test curl/8.0 none /%61.txt?q=%20")
    );
}

fn combined_line_has_quoted_referer_and_agent(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "combined");
    let (_, line) = logged(
        &server,
        &format!(
            "GET /a.txt HTTP/1.1\r\nHost: logs.test\r\nUser-Agent: {AGENT}\r\n\
             Referer: http://ref.test/x\r\n\r\n"
        ),
        200,
        "/a.txt",
    );
    let (ip, rest) = split_common(&line);
    assert_eq!(ip, client_ip(v));
    let version = server.log_version();
    assert_eq!(
        rest,
        format!("\"GET /a.txt {version}\" 200 6 \"http://ref.test/x\" \"{AGENT}\"")
    );
}

fn combined_line_without_referer_and_agent_has_dashes(v: Variant) {
    let root = site();
    let server = logging_server(v, &root, "combined");
    let (_, line) = logged(
        &server,
        "GET /a.txt HTTP/1.1\r\nHost: logs.test\r\n\r\n",
        200,
        "/a.txt",
    );
    let (ip, rest) = split_common(&line);
    assert_eq!(ip, client_ip(v));
    let version = server.log_version();
    assert_eq!(rest, format!("\"GET /a.txt {version}\" 200 6 \"-\" \"-\""));
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    fnord_line_has_the_exact_shape,
    fnord_line_carries_the_referer,
    fnord_line_without_host_has_a_dash,
    fnord_line_logs_error_status_and_size,
    fnord_path_is_the_target_as_sent,
    combined_line_has_quoted_referer_and_agent,
    combined_line_without_referer_and_agent_has_dashes,
);
