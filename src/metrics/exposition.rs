//! The Prometheus text exposition format, version 0.0.4: `# HELP` and
//! `# TYPE` before each metric, one sample a line. Pure: totals in, text
//! out. (Written here rather than through a client crate: those bring
//! their own shared-atomic metric types, which the per-thread counters
//! replace, and the format itself is these few lines; `promtool check
//! metrics` in tests/metrics.rs holds them to it.)

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::unsent;

use super::counters::{Event, RequestKind, Totals, METHODS, PROTOCOLS, SCHEMES, STATUS_CLASSES};

/// The Content-Type of what `render` writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a scrape shows besides the counters.
pub struct Process {
    pub started: SystemTime,
    /// `--max-connections`.
    pub max_connections: usize,
}

/// The features this binary was built with, as `staticd_build_info` says.
pub fn features() -> String {
    let built = [
        ("tls", cfg!(feature = "tls")),
        ("http2", cfg!(feature = "http2")),
        ("http3", cfg!(feature = "http3")),
        ("auth", cfg!(feature = "auth")),
        ("compress", cfg!(feature = "compress")),
        ("acme", cfg!(feature = "acme")),
        ("uring", cfg!(feature = "uring")),
    ];
    let names: Vec<&str> = built.iter().filter(|f| f.1).map(|f| f.0).collect();
    names.join(",")
}

/// The whole page.
pub fn render(t: &Totals, p: &Process) -> String {
    let mut out = String::with_capacity(16 << 10);
    // Writing to a String cannot fail.
    let _ = write_all(&mut out, t, p);
    out
}

fn write_all(out: &mut String, t: &Totals, p: &Process) -> std::fmt::Result {
    head(
        out,
        "staticd_requests_total",
        "counter",
        "Requests answered, by status class, method, protocol and scheme.",
    )?;
    for (status, code) in STATUS_CLASSES.iter().enumerate() {
        for (method, m) in METHODS.iter().enumerate() {
            for (protocol, proto) in PROTOCOLS.iter().enumerate() {
                for (scheme, s) in SCHEMES.iter().enumerate() {
                    let kind = RequestKind {
                        status,
                        method,
                        protocol,
                        scheme,
                    };
                    writeln!(
                        out,
                        "staticd_requests_total{{code=\"{code}\",method=\"{m}\",protocol=\"{proto}\",scheme=\"{s}\"}} {}",
                        t.requests(kind)
                    )?;
                }
            }
        }
    }
    let counter = |out: &mut String, name: &str, help: &str, value: u64| {
        head(out, name, "counter", help)?;
        writeln!(out, "{name} {value}")
    };
    counter(
        out,
        "staticd_response_body_bytes_total",
        "Response body bytes sent (the access log's size field, summed).",
        t.event(Event::BodyBytes),
    )?;
    head(
        out,
        "staticd_connections_open",
        "gauge",
        "Client connections open now.",
    )?;
    writeln!(out, "staticd_connections_open {}", t.connections_open())?;
    head(
        out,
        "staticd_connections_max",
        "gauge",
        "The --max-connections bound.",
    )?;
    writeln!(out, "staticd_connections_max {}", p.max_connections)?;
    counter(
        out,
        "staticd_connections_accepted_total",
        "Client connections accepted and served.",
        t.event(Event::ConnectionOpened),
    )?;
    counter(
        out,
        "staticd_connections_at_limit_total",
        "Connections accepted while --max-connections were open: each waited, unserved, for a place.",
        t.event(Event::ConnectionAtLimit),
    )?;
    counter(
        out,
        "staticd_connections_refused_total",
        "Connections refused at accept: their client was over --max-connections-per-ip.",
        t.event(Event::ConnectionRefused),
    )?;
    counter(
        out,
        "staticd_connections_shed_total",
        "Idle connections closed to make room at --max-connections.",
        t.event(Event::ConnectionShed),
    )?;
    head(
        out,
        "staticd_connections_too_slow_total",
        "counter",
        "Connections closed for moving slower than --min-rate: a request body, or a response.",
    )?;
    for (direction, e) in [
        ("request", Event::SlowBody),
        ("response", Event::SlowResponse),
    ] {
        writeln!(
            out,
            "staticd_connections_too_slow_total{{direction=\"{direction}\"}} {}",
            t.event(e)
        )?;
    }
    head(
        out,
        "staticd_unsent_budget_bytes",
        "gauge",
        "The --unsent-budget: kernel memory raised unsent queues may hold together.",
    )?;
    writeln!(out, "staticd_unsent_budget_bytes {}", unsent::budget())?;
    head(
        out,
        "staticd_unsent_budget_held_bytes",
        "gauge",
        "Bytes of the --unsent-budget that raised unsent queues hold now.",
    )?;
    writeln!(out, "staticd_unsent_budget_held_bytes {}", unsent::held())?;
    counter(
        out,
        "staticd_unsent_raises_total",
        "Responses (HTTP/2: connections' runs of frames) whose unsent queue was raised for a fast client.",
        unsent::raises(),
    )?;
    head(
        out,
        "staticd_tls_handshakes_total",
        "counter",
        "TLS handshakes: full, resumed (a session ticket or ID), or failed.",
    )?;
    for (result, e) in [
        ("full", Event::TlsFull),
        ("resumed", Event::TlsResumed),
        ("failed", Event::TlsFailed),
    ] {
        writeln!(
            out,
            "staticd_tls_handshakes_total{{result=\"{result}\"}} {}",
            t.event(e)
        )?;
    }
    counter(
        out,
        "staticd_open_file_cache_hits_total",
        "Path lookups answered by the per-thread open-file cache.",
        t.event(Event::CacheHit),
    )?;
    counter(
        out,
        "staticd_open_file_cache_misses_total",
        "Path lookups that went to the file system (not cached, or older than a second).",
        t.event(Event::CacheMiss),
    )?;
    counter(
        out,
        "staticd_cgi_runs_total",
        "CGI scripts started.",
        t.event(Event::CgiRun),
    )?;
    counter(
        out,
        "staticd_cgi_timeouts_total",
        "CGI scripts killed for running past --cgi-timeout.",
        t.event(Event::CgiTimeout),
    )?;
    head(
        out,
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since the Unix epoch, in seconds.",
    )?;
    let since = p.started.duration_since(UNIX_EPOCH).unwrap_or_default();
    writeln!(
        out,
        "process_start_time_seconds {}.{:03}",
        since.as_secs(),
        since.subsec_millis()
    )?;
    head(
        out,
        "staticd_build_info",
        "gauge",
        "Always 1: the version and the features staticd was built with.",
    )?;
    writeln!(
        out,
        "staticd_build_info{{version=\"{}\",features=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        features()
    )
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) -> std::fmt::Result {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn page() -> String {
        let p = Process {
            started: UNIX_EPOCH + Duration::from_millis(1_700_000_000_250),
            max_connections: 512,
        };
        render(&super::super::counters::totals(), &p)
    }

    #[test]
    fn every_sample_follows_its_help_and_type() {
        let text = page();
        let mut typed = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed = rest.split(' ').next();
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap();
            assert_eq!(Some(name), typed, "{line}");
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn fixed_samples() {
        let text = page();
        assert!(text.contains("\nprocess_start_time_seconds 1700000000.250\n"));
        assert!(text.contains("\nstaticd_connections_max 512\n"));
        let info = format!(
            "\nstaticd_build_info{{version=\"{}\",features=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            features()
        );
        assert!(text.contains(&info));
        let cube = text
            .lines()
            .filter(|l| l.starts_with("staticd_requests_total{"))
            .count();
        assert_eq!(cube, 5 * 4 * 4 * 2);
    }
}
