//! The summary a run ends with: every cell, staticd's ratio to the best
//! peer in it (the best of nginx, lighttpd, apache2, h2o, Caddy and
//! static-web-server; never the ceiling), which peer that is, and whether
//! staticd met the target the cell has:
//!
//! - keep-alive, in the clear and over HTTPS, at 50 and 2,000
//!   connections: x1.00 or more, with server CPU per request no higher
//!   than the best peer's;
//! - Connection: close in the clear: x1.10 or more at 1 KB, x1.00 at the
//!   other sizes;
//! - HTTPS full handshakes (wrk, Connection: close) and resumed
//!   handshakes: x1.50 or more;
//! - p99 at 2,000 and 10,000 connections (keep-alive): no higher than the
//!   best peer's (the lowest p99 of the peers without errors);
//! - inetd start (inetd-spawn, p50) within 0.25 ms of /bin/true's;
//! - the inetd cell (issue 43): staticd-inetd's requests/s x1.00 or more
//!   of eris's, both under tcpserver, ab -c 50 without keep-alive;
//! - idle keep-alive connections: 0.5 KiB or less each;
//! - HTTP/3 (issue 30): x1.50 or more of Caddy in every h3 cell (h3load's;
//!   oha's cross-check cell is listed without a target); CPU per
//!   1 KB h3 request no more than 1.5x staticd's own over h2 (h2load, the
//!   same connections and streams); 1 MB requests/s over h3 at least 0.8x
//!   staticd's own over HTTPS on TCP (wrk keep-alive, 50 connections;
//!   issue 42's, where issue 30 asked 0.5x);
//!   memory per idle h3 connection no more than 2x an idle TLS one.
//!
//! Cells without a target (HTTP/2, 10,000 connections' requests/s, ab,
//! other connection counts) are listed with their ratio and "-".

use std::fmt::Write as _;

use crate::docroot::label;
use crate::load::{Mode, Tool};
use crate::report::{self, median, tenths, Block, Report, Summary, Target};
use crate::servers::{Kind, Proto, ALL};

/// The least ratio of requests/s a cell's target asks for, and whether
/// staticd's CPU per request must be no higher than the best peer's.
fn rps_target(block: Block, size: u64) -> Option<(f64, bool, &'static str)> {
    let (tool, mode, conns, proto, _) = block;
    match (tool, mode, proto) {
        (Tool::Wrk, Mode::KeepAlive, Proto::Http | Proto::Https) if [50, 2000].contains(&conns) => {
            Some((1.0, true, ">= x1.00, CPU/req <= best peer's"))
        }
        (Tool::Wrk, Mode::Close, Proto::Http) if size == 1_000 => Some((1.1, false, ">= x1.10")),
        (Tool::Wrk, Mode::Close, Proto::Http) => Some((1.0, false, ">= x1.00")),
        (Tool::Wrk, Mode::Close, Proto::Https) => Some((1.5, false, ">= x1.50")),
        (Tool::Resume, _, Proto::Https) => Some((1.5, false, ">= x1.50")),
        (Tool::H3load, _, Proto::H3) => Some((1.5, false, ">= x1.50")),
        _ => None,
    }
}

fn cell_name((tool, mode, conns, proto, streams): Block, size: u64) -> String {
    let what = match (tool, proto) {
        (Tool::H2load, Proto::H2) => format!("h2 c={conns} x {streams}"),
        (Tool::H2load, _) => format!("h2c c={conns} x {streams}"),
        (Tool::H3load, _) => format!("h3 c={conns} x {streams}"),
        (Tool::Oha, _) => format!("h3 (oha, cross-check) c={conns} x {streams}"),
        (Tool::Resume, _) => format!("HTTPS c={conns}, resumed handshakes"),
        (Tool::Wrk, Proto::Https) if mode == Mode::Close => {
            format!("HTTPS close c={conns}, full handshakes")
        }
        (Tool::Ab, _) => format!("ab {} c={conns}", mode.label()),
        (_, Proto::Https) => format!("HTTPS {} c={conns}", mode.label()),
        _ => format!("HTTP/1.1 {} c={conns}", mode.label()),
    };
    format!("{what} {}", label(size))
}

fn cpu(m: Option<&Summary>) -> Option<f64> {
    m.and_then(|m| median(m.cpu_us_per_request))
}

fn with_client_cpu(m: Option<&Summary>) -> Option<f64> {
    m.and_then(|m| median(m.server_and_client_cpu_us_per_request))
}

/// `a` over `b`, when both are known and `b` is above 0.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The summary's rows for a report.
pub fn rows(r: &Report) -> Vec<Target> {
    let staticd = Kind::Staticd.name();
    let mut out = Vec::new();
    for block in r.blocks() {
        for size in r.sizes(block) {
            let mine = r.find(block, size, staticd);
            let rps = mine.and_then(Summary::rps);
            let best = r.best_peer(block, size);
            let best_m = best.as_ref().and_then(|(_, n)| r.find(block, size, n));
            let ratio = ratio(rps, best.as_ref().map(|(b, _)| *b));
            let goal = rps_target(block, size);
            let cpus = (cpu(mine), cpu(best_m));
            let met = goal.and_then(|(least, check_cpu, _)| {
                let ratio = ratio?;
                let cpu_ok = match cpus {
                    _ if !check_cpu => true,
                    (Some(a), Some(b)) => a <= b,
                    _ => return None,
                };
                Some(ratio >= least && cpu_ok)
            });
            out.push(Target {
                cell: cell_name(block, size),
                staticd: rps.map_or(if mine.is_some() { "failed" } else { "n/a" }.into(), |v| {
                    format!("{v:.0} req/s")
                }),
                best_peer: best.as_ref().map(|(v, n)| format!("{n} {v:.0}")),
                ratio,
                cpu_us_per_request: Some(cpus),
                with_client_cpu_us_per_request: matches!(block.0, Tool::Wrk | Tool::Ab)
                    .then(|| (with_client_cpu(mine), with_client_cpu(best_m))),
                target: goal.map_or("-".into(), |g| g.2.into()),
                met,
            });
        }
    }
    p99_rows(r, &mut out);
    startup_row(r, &mut out);
    inetd_row(r, &mut out);
    idle_row(r, &mut out);
    h3_rows(r, &mut out);
    out
}

/// CPU per 1 KB h3 request over staticd's own h2 may be at most this.
const H3_CPU_OVER_H2: f64 = 1.5;
/// 1 MB requests/s over h3 over staticd's own HTTPS on TCP: at least this.
const H3_1MB_OVER_HTTPS: f64 = 0.8;
/// Memory per idle h3 connection over an idle TLS one: at most this.
const H3_IDLE_OVER_TLS: f64 = 2.0;

/// Issue 30's ratios of staticd to itself: h3 against h2 (CPU per 1 KB
/// request), against HTTPS over TCP (1 MB requests/s) and against an idle
/// TLS connection (memory).
fn h3_rows(r: &Report, out: &mut Vec<Target>) {
    let staticd = Kind::Staticd.name();
    let h3_blocks: Vec<Block> = r
        .blocks()
        .into_iter()
        .filter(|b| b.0 == Tool::H3load && b.3 == Proto::H3)
        .collect();
    let h2_blocks: Vec<Block> = r
        .blocks()
        .into_iter()
        .filter(|b| b.0 == Tool::H2load && b.3 == Proto::H2)
        .collect();
    for &block in &h3_blocks {
        let (_, _, conns, _, streams) = block;
        // The h2 cell with as many connections and streams; else the one
        // with the most streams, shown without a target.
        let same = h2_blocks
            .iter()
            .find(|b| b.2 == conns && b.4 == streams)
            .copied();
        let h2 = same.or_else(|| h2_blocks.iter().max_by_key(|b| b.4).copied());
        let (Some(mine), Some(h2)) = (r.find(block, 1_000, staticd), h2) else {
            continue;
        };
        let h3_cpu = cpu(Some(mine));
        let h2_cpu = cpu(r.find(h2, 1_000, staticd));
        let ratio = ratio(h3_cpu, h2_cpu);
        out.push(Target {
            cell: format!("h3 c={conns} x {streams} 1 KB: CPU/req over staticd's h2"),
            staticd: h3_cpu.map_or("-".into(), |u| format!("{u:.1} us/req")),
            best_peer: Some(format!(
                "staticd h2 c={} x {} {}",
                h2.2,
                h2.4,
                h2_cpu.map_or("-".into(), |u| format!("{u:.1} us/req"))
            )),
            ratio,
            cpu_us_per_request: Some((h3_cpu, h2_cpu)),
            with_client_cpu_us_per_request: None,
            target: if same.is_some() {
                format!("<= x{H3_CPU_OVER_H2:.2}")
            } else {
                "-".into()
            },
            met: same.and(ratio).map(|x| x <= H3_CPU_OVER_H2),
        });
    }
    let https = r
        .blocks()
        .into_iter()
        .find(|b| b.0 == Tool::Wrk && b.1 == Mode::KeepAlive && b.2 == 50 && b.3 == Proto::Https);
    for &block in &h3_blocks {
        let (_, _, conns, _, streams) = block;
        let (Some(mine), Some(https)) = (r.find(block, 1_000_000, staticd), https) else {
            continue;
        };
        let tcp = r.find(https, 1_000_000, staticd).and_then(Summary::rps);
        let rps = mine.rps();
        let ratio = ratio(rps, tcp);
        out.push(Target {
            cell: format!("h3 c={conns} x {streams} 1 MB: req/s over staticd's HTTPS (TCP)"),
            staticd: rps.map_or("failed".into(), |v| format!("{v:.0} req/s")),
            best_peer: Some(format!(
                "staticd HTTPS keep-alive c=50 {}",
                tcp.map_or("-".into(), |v| format!("{v:.0}"))
            )),
            ratio,
            cpu_us_per_request: Some((cpu(Some(mine)), cpu(r.find(https, 1_000_000, staticd)))),
            with_client_cpu_us_per_request: None,
            // Judged like for like: one request in flight per connection,
            // as wrk's; more streams are shown without a target.
            target: if streams == 1 {
                format!(">= x{H3_1MB_OVER_HTTPS:.2}")
            } else {
                "-".into()
            },
            met: ratio
                .filter(|_| streams == 1)
                .map(|x| x >= H3_1MB_OVER_HTTPS),
        });
    }
    let idle = |h3: bool| {
        r.idle_memory
            .iter()
            .find(|m| {
                m.server == staticd
                    && if h3 {
                        m.proto == Proto::H3
                    } else {
                        m.https && m.proto == Proto::Https
                    }
            })
            .and_then(|m| m.kib_per_connection)
    };
    if let Some(quic) = idle(true) {
        let tls = idle(false);
        let ratio = ratio(Some(quic), tls);
        out.push(Target {
            cell: "idle h3 connection, memory each, over an idle TLS one".into(),
            staticd: format!("{quic:.2} KiB"),
            best_peer: Some(format!(
                "staticd idle TLS {}",
                tls.map_or("-".into(), |t| format!("{t:.2} KiB"))
            )),
            ratio,
            cpu_us_per_request: None,
            with_client_cpu_us_per_request: None,
            target: format!("<= x{H3_IDLE_OVER_TLS:.2}"),
            met: ratio.map(|x| x <= H3_IDLE_OVER_TLS),
        });
    }
}

/// p99 at 2,000 and 10,000 connections, keep-alive (in the clear or over
/// HTTPS, where a run has such cells).
fn p99_rows(r: &Report, out: &mut Vec<Target>) {
    let many = r.blocks().into_iter().filter(|&(t, m, c, p, _)| {
        t == Tool::Wrk && m == Mode::KeepAlive && [2000, 10_000].contains(&c) && !p.http2()
    });
    for block in many {
        for size in r.sizes(block) {
            let mine = r
                .find(block, size, Kind::Staticd.name())
                .and_then(|m| median(m.p99_us));
            let best = r.best_peer_p99(block, size);
            let ratio = ratio(mine, best.as_ref().map(|(_, b)| *b));
            out.push(Target {
                cell: format!("p99 {}", cell_name(block, size)),
                staticd: report::latency(mine),
                best_peer: best
                    .as_ref()
                    .map(|(n, us)| format!("{n} {}", report::latency(Some(*us)))),
                ratio,
                cpu_us_per_request: None,
                with_client_cpu_us_per_request: None,
                target: "<= best peer's p99".into(),
                met: ratio.map(|x| x <= 1.0),
            });
        }
    }
}

/// The most inetd-spawn's median may exceed /bin/true's, in us.
const INETD_OVER_TRUE_US: f64 = 250.0;

fn startup_row(r: &Report, out: &mut Vec<Target>) {
    let p50 = |name: &str| {
        r.startup
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.p50_us)
    };
    let (Some(spawn), Some(truth)) = (p50("inetd-spawn"), p50("true")) else {
        return;
    };
    let over = spawn - truth;
    out.push(Target {
        cell: "inetd start to first byte, p50".into(),
        staticd: report::micros(Some(spawn)),
        best_peer: Some(format!("/bin/true {}", report::micros(Some(truth)))),
        ratio: None,
        cpu_us_per_request: None,
        with_client_cpu_us_per_request: None,
        target: format!(
            "<= /bin/true + {:.2} ms (is {:+.3} ms)",
            INETD_OVER_TRUE_US / 1000.0,
            over / 1000.0
        ),
        met: Some(over <= INETD_OVER_TRUE_US),
    });
}

/// staticd-inetd's requests/s over eris's in the inetd cell: at least this.
const INETD_OVER_ERIS: f64 = 1.0;

/// The inetd cell: staticd-inetd against eris, fnord's maintained fork.
fn inetd_row(r: &Report, out: &mut Vec<Target>) {
    let Some(cell) = &r.inetd else {
        return;
    };
    let (mine, eris) = (cell.of(Kind::StaticdInetd), cell.of(Kind::Eris));
    let (Some(first), Some(eris_m)) = (cell.measurements.first(), eris) else {
        return;
    };
    let rps = mine.and_then(Summary::rps);
    let theirs = eris_m.rps();
    let ratio = ratio(rps, theirs);
    out.push(Target {
        cell: format!(
            "inetd under tcpserver, ab close c={} {}: staticd-inetd over eris",
            first.connections,
            label(first.size)
        ),
        staticd: rps.map_or("failed".into(), |v| format!("{v:.0} req/s")),
        best_peer: Some(format!(
            "eris {}",
            theirs.map_or("failed".into(), |v| format!("{v:.0}"))
        )),
        ratio,
        cpu_us_per_request: Some((cpu(mine), cpu(Some(eris_m)))),
        with_client_cpu_us_per_request: None,
        target: format!(">= x{INETD_OVER_ERIS:.2} of eris"),
        met: ratio.map(|x| x >= INETD_OVER_ERIS),
    });
}

/// The most an idle keep-alive connection may add to staticd's memory.
const IDLE_KIB: f64 = 0.5;

fn idle_row(r: &Report, out: &mut Vec<Target>) {
    let Some(kib) = r
        .idle_memory
        .iter()
        .find(|m| m.server == Kind::Staticd.name() && !m.https && !m.proto.http2())
        .and_then(|m| m.kib_per_connection)
    else {
        return;
    };
    out.push(Target {
        cell: "idle keep-alive connection, memory each".into(),
        staticd: format!("{kib:.2} KiB"),
        best_peer: None,
        ratio: None,
        cpu_us_per_request: None,
        with_client_cpu_us_per_request: None,
        target: format!("<= {IDLE_KIB} KiB"),
        met: Some(kib <= IDLE_KIB),
    });
}

/// The summary as the last table of table.txt.
pub fn table(out: &mut String, rows: &[Target]) {
    if rows.is_empty() {
        return;
    }
    let judged: Vec<bool> = rows.iter().filter_map(|t| t.met).collect();
    let _ = writeln!(
        out,
        "\n== summary: staticd against the best peer in every cell (peers: {}; not the ceiling); targets met: {} of {} ==",
        ALL.iter()
            .filter(|k| k.is_peer())
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
        judged.iter().filter(|&&m| m).count(),
        judged.len()
    );
    let header: Vec<String> = [
        "cell",
        "staticd",
        "best peer",
        "ratio",
        "CPU us/req staticd / best",
        "with load client",
        "target",
        "result",
    ]
    .map(String::from)
    .to_vec();
    // staticd's figure and the best peer's.
    let pair = |v: Option<(Option<f64>, Option<f64>)>| {
        v.map_or("-".into(), |(a, b)| {
            format!("{} / {}", tenths(a), tenths(b))
        })
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|t| {
            vec![
                t.cell.clone(),
                t.staticd.clone(),
                t.best_peer.clone().unwrap_or_else(|| "-".into()),
                t.ratio.map_or("-".into(), |x| format!("x{x:.2}")),
                pair(t.cpu_us_per_request),
                pair(t.with_client_cpu_us_per_request),
                t.target.clone(),
                match t.met {
                    Some(true) => "met".into(),
                    Some(false) => "missed".into(),
                    None if t.target == "-" => "-".into(),
                    None => "n/a".into(),
                },
            ]
        })
        .collect();
    report::render(out, &header, &body);
}
