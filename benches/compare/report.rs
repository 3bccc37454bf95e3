//! What a run produced: the records, the text table, results.json and the
//! SVG chart.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use crate::compressed::{self, Compressed};
use crate::docroot::label;
use crate::idle::IdleMemory;
use crate::load::{Mode, Outcome, Tool};
use crate::servers::{Description, Kind, Proto, PROTOS};
use crate::startup::Startup;

/// One server in one cell.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub tool: Tool,
    /// On the server's HTTPS (or h2) instance.
    pub https: bool,
    /// HTTP/2 cells only: on the h2 or the h2c instance.
    #[serde(skip_serializing_if = "Proto::is_http1")]
    pub proto: Proto,
    /// HTTP/2 cells only: concurrent streams per connection (h2load -m).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    pub server: String,
    pub size: u64,
    pub connections: u32,
    pub mode: Mode,
    /// How long the load was meant to run (the client reports the actual time).
    pub cell_seconds: f64,
    /// None when the client could not be run or read; see `error`.
    pub outcome: Option<Outcome>,
    pub error: Option<String>,
    /// Largest VmRSS sum over the server's processes sampled during the cell.
    pub rss_kib: u64,
    /// utime + stime of the server's processes over the cell (h2load: over
    /// its measured part, `cpu_window_seconds` long).
    pub server_cpu_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_window_seconds: Option<f64>,
    pub cpu_us_per_request: Option<f64>,
    /// CPU used by the load client (it shares the machine).
    pub client_cpu_seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    pub server: String,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub quick: bool,
    pub sizes: Vec<u64>,
    pub connections: Vec<u32>,
    pub modes: Vec<Mode>,
    pub duration_seconds: f64,
    pub warmup_seconds: f64,
    pub client_threads: u32,
    pub ab: bool,
    pub ab_connections: u32,
    pub ab_duration_seconds: f64,
    /// RLIMIT_NOFILE of the harness, inherited by servers and clients.
    pub fd_limit: u64,
    /// Idle keep-alive connections per server for the memory measurement.
    pub idle_connections: u32,
    /// Runs of each start-to-first-byte series.
    pub startup_runs: u32,
    /// HTTPS servers and cells were run, and only those.
    pub https: bool,
    pub https_only: bool,
    /// The certificate every HTTPS server was given.
    pub certificate: Option<String>,
    /// HTTP/2 servers and cells were run, and only those (with https_only:
    /// those and the HTTPS ones).
    pub h2: bool,
    pub h2_only: bool,
    /// Connections for the memory-with-open-streams measurement.
    pub h2_connections: u32,
    /// Streams each of them holds open (at most; fewer if a server allows
    /// fewer at once).
    pub h2_open_streams: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct Host {
    pub cores: usize,
    pub kernel: String,
    pub cpu: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub total_seconds: f64,
    pub interrupted: bool,
    pub host: Host,
    pub settings: Settings,
    pub servers: Vec<Description>,
    pub skipped: Vec<Skipped>,
    pub measurements: Vec<Measurement>,
    /// Memory per idle keep-alive connection, one record per server.
    pub idle_memory: Vec<IdleMemory>,
    /// Process start (or connect) to first response byte, one record per series.
    pub startup: Vec<Startup>,
    /// The compression cell, one record per server.
    pub compressed: Vec<Compressed>,
}

/// A table of the report: the cells of one client, mode, connection count,
/// protocol and (HTTP/2) streams per connection.
type Block = (Tool, Mode, u32, Proto, u32);

fn block_of(m: &Measurement) -> Block {
    (
        m.tool,
        m.mode,
        m.connections,
        m.proto_of(),
        m.streams.unwrap_or(1),
    )
}

impl Measurement {
    /// The instance it ran on (`proto` says only which HTTP/2 one).
    fn proto_of(&self) -> Proto {
        match (self.proto, self.https) {
            (Proto::H2 | Proto::H2c, _) => self.proto,
            (_, true) => Proto::Https,
            (_, false) => Proto::Http,
        }
    }
}

impl Report {
    /// The blocks that have results, in table order: the cleartext ones,
    /// the HTTPS ones, then h2 and h2c (more streams first).
    fn blocks(&self) -> Vec<Block> {
        let mut out: Vec<Block> = Vec::new();
        for proto in PROTOS {
            for tool in [Tool::Wrk, Tool::Ab, Tool::Resume, Tool::H2load] {
                for &mode in &[Mode::KeepAlive, Mode::Close] {
                    let mut keys: Vec<(u32, u32)> = self
                        .measurements
                        .iter()
                        .filter(|m| m.tool == tool && m.mode == mode && m.proto_of() == proto)
                        .map(|m| (m.connections, m.streams.unwrap_or(1)))
                        .collect();
                    keys.sort_unstable_by_key(|&(c, s)| (c, std::cmp::Reverse(s)));
                    keys.dedup();
                    out.extend(keys.into_iter().map(|(c, s)| (tool, mode, c, proto, s)));
                }
            }
        }
        out
    }

    /// Every server once, in table order (staticd first; a server with an
    /// HTTPS or HTTP/2 instance has more than one description).
    fn server_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for s in &self.servers {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
        names.sort_by_key(|n| crate::servers::ALL.iter().position(|k| k.name() == n));
        names
    }

    /// The columns of a block: every server for the cleartext ones (as
    /// always), only those measured in it for HTTPS, and for HTTP/2 those
    /// measured in any HTTP/2 cell (n/a where one has no instance for the
    /// block's protocol).
    fn block_names(&self, block: Block) -> Vec<String> {
        self.server_names()
            .into_iter()
            .filter(|n| match block.3 {
                Proto::Http => true,
                Proto::Https => self
                    .measurements
                    .iter()
                    .any(|m| block_of(m) == block && &m.server == n),
                Proto::H2 | Proto::H2c => self
                    .measurements
                    .iter()
                    .any(|m| m.proto_of().http2() && &m.server == n),
            })
            .collect()
    }

    fn find(&self, block: Block, size: u64, server: &str) -> Option<&Measurement> {
        self.measurements
            .iter()
            .find(|m| block_of(m) == block && m.size == size && m.server == server)
    }

    fn sizes(&self, block: Block) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .measurements
            .iter()
            .filter(|m| block_of(m) == block)
            .map(|m| m.size)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// The best requests/s among the peers (not staticd, not the ceiling).
    /// In the resumed-handshake cells, among the peers that resumed every
    /// handshake, if any did: a peer that made some in full (it sends no new
    /// ticket on a resumed handshake, and the client uses each ticket once)
    /// measured something else.
    fn best_peer(&self, block: Block, size: u64) -> Option<(f64, String)> {
        let peers: Vec<(&Outcome, String)> = self
            .measurements
            .iter()
            .filter(|m| block_of(m) == block && m.size == size)
            .filter(|m| kind_of(&m.server).is_some_and(Kind::is_peer))
            .filter_map(|m| Some((m.outcome.as_ref()?, m.server.clone())))
            .collect();
        let all_resumed = peers.iter().any(|(o, _)| o.not_resumed == 0);
        peers
            .into_iter()
            .filter(|(o, _)| block.0 != Tool::Resume || !all_resumed || o.not_resumed == 0)
            .map(|(o, name)| (o.requests_per_second, name))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let s = &self.settings;
        let _ = writeln!(
            out,
            "staticd comparison: {} core(s), {}; kernel {}",
            self.host.cores, self.host.cpu, self.host.kernel
        );
        let _ = writeln!(
            out,
            "cells: {:.2} s at 50 connections, scaled by connections, each after a {:.2} s warm-up; wrk with {} thread(s); load client and servers share the machine{}",
            s.duration_seconds,
            s.warmup_seconds,
            s.client_threads,
            if self.interrupted { "; INTERRUPTED: partial results" } else { "" }
        );
        for sk in &self.skipped {
            let _ = writeln!(out, "skipped {}: {}", sk.server, sk.reason);
        }
        if let Some(cert) = &s.certificate {
            // "HTTPS: ...", as before HTTP/2, when there is no h2 instance.
            let parts = [
                self.servers
                    .iter()
                    .any(|d| d.https && d.proto == Proto::Https),
                self.servers.iter().any(|d| d.proto == Proto::H2),
            ];
            let _ = writeln!(
                out,
                "{}: every server has the same certificate, {cert}",
                match parts {
                    [true, true] => "HTTPS and h2",
                    [false, true] => "h2",
                    _ => "HTTPS",
                }
            );
            for d in self.servers.iter().filter(|d| d.https) {
                let _ = writeln!(
                    out,
                    "  {}{}: {}",
                    d.name,
                    if d.proto == Proto::H2 {
                        Proto::H2.suffix()
                    } else {
                        Proto::Https.suffix()
                    },
                    d.tls.as_deref().unwrap_or("?")
                );
            }
        }
        for block in self.blocks() {
            let names = self.block_names(block);
            let title = block_title(block);
            let sizes = self.sizes(block);
            let secs = self
                .measurements
                .iter()
                .find(|m| block_of(m) == block)
                .map_or(0.0, |m| m.cell_seconds);
            let mut notes = Vec::new();

            let mut rows = Vec::new();
            let absent = if block.3.http2() { "n/a" } else { "-" };
            for &size in &sizes {
                let best = self.best_peer(block, size);
                let mut row = vec![label(size)];
                for name in &names {
                    let cell = match self.find(block, size, name) {
                        None => absent.to_string(),
                        Some(m) => match &m.outcome {
                            None => {
                                notes.push(format!(
                                    "{name} {}: {}",
                                    label(size),
                                    m.error.as_deref().unwrap_or("failed")
                                ));
                                "failed".to_string()
                            }
                            Some(o) => {
                                let mut c = format!("{:.0}", o.requests_per_second);
                                let is_staticd = kind_of(name).is_some_and(Kind::is_staticd);
                                if let (true, Some((b, _))) = (is_staticd, &best) {
                                    if *b > 0.0 {
                                        let _ = write!(c, " x{:.2}", o.requests_per_second / b);
                                    }
                                }
                                if o.error_count() > 0 {
                                    c.push('!');
                                    notes.push(format!(
                                        "{name} {}: {}",
                                        label(size),
                                        o.describe_errors()
                                    ));
                                }
                                c
                            }
                        },
                    };
                    row.push(cell);
                }
                let best_name = best.map_or("-".to_string(), |(_, n)| n);
                row.push(best_name);
                rows.push(row);
            }
            let mut header = vec!["size".to_string()];
            header.extend(names.iter().cloned());
            header.push("best peer".into());
            let _ = writeln!(
                out,
                "\n== {title}, {secs:.2} s cells: requests/s (staticd: xN = ratio to the best peer) =="
            );
            render(&mut out, &header, &rows);

            let metric = |f: &dyn Fn(&Measurement) -> String| -> Vec<Vec<String>> {
                sizes
                    .iter()
                    .map(|&size| {
                        let mut row = vec![label(size)];
                        for name in &names {
                            row.push(self.find(block, size, name).map_or(absent.into(), f));
                        }
                        row
                    })
                    .collect()
            };
            let header: Vec<String> = std::iter::once("size".to_string())
                .chain(names.iter().cloned())
                .collect();

            if block.0 == Tool::H2load {
                let _ = writeln!(
                    out,
                    "-- {title}: time per request, mean / sd (h2load has no percentiles) --"
                );
                render(
                    &mut out,
                    &header,
                    &metric(&|m| match &m.outcome {
                        Some(o) => format!("{} / {}", latency(o.mean_us), latency(o.sd_us)),
                        None => "-".into(),
                    }),
                );
            } else {
                let _ = writeln!(out, "-- {title}: latency p50 / p99 --");
                render(
                    &mut out,
                    &header,
                    &metric(&|m| match &m.outcome {
                        Some(o) => format!("{} / {}", latency(o.p50_us), latency(o.p99_us)),
                        None => "-".into(),
                    }),
                );
            }
            let _ = writeln!(
                out,
                "-- {title}: server RSS, MB (VmRSS summed over its processes, max while loaded) --"
            );
            render(
                &mut out,
                &header,
                &metric(&|m| format!("{:.1}", m.rss_kib as f64 / 1024.0)),
            );
            let _ = writeln!(
                out,
                "-- {title}: server CPU time per request, us (utime+stime of its processes{}) --",
                if block.0 == Tool::H2load {
                    ", over h2load's measured part"
                } else {
                    ""
                }
            );
            render(
                &mut out,
                &header,
                &metric(&|m| {
                    m.cpu_us_per_request
                        .map_or("-".into(), |us| format!("{us:.1}"))
                }),
            );
            if !notes.is_empty() {
                let _ = writeln!(out, "errors (cells marked !):");
                for n in notes {
                    let _ = writeln!(out, "  {n}");
                }
            }
        }
        self.many_connections(&mut out);
        compressed::table(&mut out, &self.compressed, s.duration_seconds);
        self.h2_summary(&mut out);
        self.idle_table(&mut out);
        self.startup_table(&mut out);
        out
    }

    /// wrk keep-alive at 2,000 connections and more: errors and p99 per
    /// server, and staticd's p99 against the best peer's (the lowest p99
    /// among the peers without errors, or among all peers if every one had
    /// errors).
    fn many_connections(&self, out: &mut String) {
        let blocks: Vec<_> = self
            .blocks()
            .into_iter()
            .filter(|&(t, m, c, proto, _)| {
                t == Tool::Wrk && m == Mode::KeepAlive && c >= 2000 && proto == Proto::Http
            })
            .collect();
        if blocks.is_empty() {
            return;
        }
        let names: Vec<String> = self
            .server_names()
            .into_iter()
            .filter(|n| {
                self.measurements
                    .iter()
                    .any(|m| &m.server == n && blocks.contains(&block_of(m)))
            })
            .collect();
        let _ = writeln!(
            out,
            "\n== wrk, keep-alive, 2,000 connections and more: p99 latency / errors (staticd: xN = its p99 over the best peer's; goal: 0 errors, x1.00 or less) =="
        );
        let mut header = vec!["conns".to_string(), "size".to_string()];
        header.extend(names.iter().cloned());
        header.push("best peer p99".into());
        let mut rows = Vec::new();
        for block in blocks {
            for size in self.sizes(block) {
                // A cell where no response completed has no latency to compare.
                let p99 = |m: &Measurement| {
                    m.outcome
                        .as_ref()
                        .filter(|o| o.requests > 0)
                        .and_then(|o| o.p99_us)
                };
                let peers: Vec<(&Measurement, f64)> = names
                    .iter()
                    .filter(|n| kind_of(n).is_some_and(Kind::is_peer))
                    .filter_map(|n| self.find(block, size, n))
                    .filter_map(|m| Some((m, p99(m)?)))
                    .collect();
                let clean: Vec<_> = peers
                    .iter()
                    .filter(|(m, _)| m.outcome.as_ref().is_some_and(|o| o.error_count() == 0))
                    .copied()
                    .collect();
                let best = if clean.is_empty() { &peers } else { &clean }
                    .iter()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .map(|&(m, us)| (m.server.clone(), us));
                let mut row = vec![block.2.to_string(), label(size)];
                for name in &names {
                    let cell = match self.find(block, size, name) {
                        None => "-".to_string(),
                        Some(m) => match &m.outcome {
                            None => "failed".to_string(),
                            Some(o) if o.requests == 0 => {
                                format!("none done / {}", o.error_count())
                            }
                            Some(o) => {
                                let mut c = format!("{} / {}", latency(o.p99_us), o.error_count());
                                let is_staticd = kind_of(name).is_some_and(Kind::is_staticd);
                                if let (true, Some(us), Some((_, b))) =
                                    (is_staticd, o.p99_us, &best)
                                {
                                    if *b > 0.0 {
                                        let _ = write!(c, " x{:.2}", us / b);
                                    }
                                }
                                c
                            }
                        },
                    };
                    row.push(cell);
                }
                row.push(best.map_or("-".into(), |(n, us)| format!("{n} {}", latency(Some(us)))));
                rows.push(row);
            }
        }
        render(out, &header, &rows);
    }

    fn idle_table(&self, out: &mut String) {
        for proto in PROTOS {
            let records: Vec<&IdleMemory> = self
                .idle_memory
                .iter()
                .filter(|r| match r.proto {
                    Proto::H2 | Proto::H2c => r.proto == proto,
                    _ => proto == if r.https { Proto::Https } else { Proto::Http },
                })
                .collect();
            if records.is_empty() {
                continue;
            }
            let title = match proto {
                Proto::Http => "idle keep-alive connections: server memory each, KiB = (after - before) / connections still open; RSS (and PSS) of the server's processes, kernel socket memory not included; goal for staticd: 1 KiB or less",
                Proto::Https => "idle TLS connections (HTTPS): server memory each, KiB = (after - before) / connections still open, each after a full handshake and one request; RSS (and PSS), kernel socket memory not included; goal for staticd: no more than nginx",
                Proto::H2 => "HTTP/2 over TLS (h2) connections with open streams: server memory each, KiB = (after - before) / connections still open, each with `streams` GETs of a large file in flight, unread (64 KiB windows); RSS (and PSS), kernel socket memory not included; goal for staticd: no more than h2o",
                Proto::H2c => "HTTP/2 in the clear (h2c) connections with open streams: as for h2, without TLS; goal for staticd: no more than h2o",
            };
            let _ = writeln!(out, "\n== {title} ==");
            idle_rows(out, &records);
        }
    }

    /// One line per HTTP/2 cell: staticd against the best peer in
    /// requests/s, and its CPU per request against the best peer's and the
    /// lowest of any peer; then memory per connection with open streams
    /// against h2o's.
    fn h2_summary(&self, out: &mut String) {
        let blocks: Vec<Block> = self
            .blocks()
            .into_iter()
            .filter(|b| b.0 == Tool::H2load)
            .collect();
        let staticd = Kind::Staticd.name();
        let memory: Vec<&IdleMemory> = self
            .idle_memory
            .iter()
            .filter(|r| r.proto.http2())
            .collect();
        if blocks.is_empty() && memory.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n== HTTP/2: staticd against the best peer (goal: x1.00 or more in every cell, with CPU per request no higher; memory per connection with 10 open streams no more than h2o) =="
        );
        let header: Vec<String> = [
            "cell",
            "staticd",
            "best peer",
            "ratio",
            "CPU us/req staticd / best peer",
            "lowest peer CPU",
        ]
        .map(String::from)
        .to_vec();
        let mut rows = Vec::new();
        let us = |m: Option<&Measurement>| {
            m.and_then(|m| m.cpu_us_per_request)
                .map_or("-".into(), |u| format!("{u:.1}"))
        };
        for block in blocks {
            for size in self.sizes(block) {
                let cell = format!(
                    "{} {} x {} {}",
                    if block.3 == Proto::H2 { "h2 " } else { "h2c" },
                    block.2,
                    block.4,
                    label(size)
                );
                let mine = self.find(block, size, staticd);
                let rps = mine
                    .and_then(|m| m.outcome.as_ref())
                    .map(|o| o.requests_per_second);
                let best = self.best_peer(block, size);
                let best_m = best.as_ref().and_then(|(_, n)| self.find(block, size, n));
                let lowest = self
                    .measurements
                    .iter()
                    .filter(|m| block_of(m) == block && m.size == size)
                    .filter(|m| kind_of(&m.server).is_some_and(Kind::is_peer))
                    .filter_map(|m| Some((m.cpu_us_per_request?, m.server.clone())))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
                rows.push(vec![
                    cell,
                    rps.map_or(if mine.is_some() { "failed" } else { "n/a" }.into(), |r| {
                        format!("{r:.0}")
                    }),
                    best.as_ref()
                        .map_or("-".into(), |(r, n)| format!("{n} {r:.0}")),
                    match (rps, &best) {
                        (Some(r), Some((b, _))) if *b > 0.0 => format!("{:.2}", r / b),
                        _ => "-".into(),
                    },
                    format!("{} / {}", us(mine), us(best_m)),
                    lowest.map_or("-".into(), |(u, n)| format!("{n} {u:.1}")),
                ]);
            }
        }
        if !rows.is_empty() {
            render(out, &header, &rows);
        }
        for proto in [Proto::H2, Proto::H2c] {
            let kib = |name: &str| {
                memory
                    .iter()
                    .find(|r| r.proto == proto && r.server == name)
                    .and_then(|r| Some((r.kib_per_connection?, r.streams.unwrap_or(0))))
            };
            if let Some((mine, streams)) = kib(staticd) {
                let h2o = kib(Kind::H2o.name());
                let _ = writeln!(
                    out,
                    "memory per {} connection with {streams} open streams: staticd {mine:.2} KiB, h2o {}{}",
                    if proto == Proto::H2 { "h2" } else { "h2c" },
                    h2o.map_or("-".into(), |(k, _)| format!("{k:.2} KiB")),
                    match h2o {
                        Some((k, _)) if k > 0.0 => format!(" (x{:.2})", mine / k),
                        _ => String::new(),
                    }
                );
            }
        }
    }
}

fn idle_rows(out: &mut String, records: &[&IdleMemory]) {
    let streams = records.iter().any(|r| r.streams.is_some());
    let mut header: Vec<String> = [
        "server",
        "KiB/conn",
        "PSS KiB/conn",
        "open/asked",
        "RSS before MB",
        "RSS after MB",
        "opened in",
    ]
    .map(String::from)
    .to_vec();
    if streams {
        header.insert(4, "streams each".into());
        header.insert(5, "heads in each".into());
        header.insert(6, "KiB sent each".into());
    }
    let mut notes = Vec::new();
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            if let Some(e) = &r.error {
                notes.push(format!("{}: {e}", r.server));
            }
            let mut row = vec![
                r.server.clone(),
                r.kib_per_connection
                    .map_or("-".into(), |k| format!("{k:.2}")),
                r.pss_kib_per_connection
                    .map_or("-".into(), |k| format!("{k:.2}")),
                format!("{}/{}", r.still_open, r.connections),
                format!("{:.1}", r.rss_before_kib as f64 / 1024.0),
                format!("{:.1}", r.rss_after_kib as f64 / 1024.0),
                format!("{:.1} s", r.open_seconds),
            ];
            if streams {
                row.insert(4, r.streams.map_or("-".into(), |n| n.to_string()));
                row.insert(
                    5,
                    match (r.heads, r.answered) {
                        (Some(h), a) if a > 0 => format!("{:.1}", h as f64 / f64::from(a)),
                        _ => "-".into(),
                    },
                );
                row.insert(
                    6,
                    match (r.window_bytes, r.answered) {
                        (Some(b), a) if a > 0 => format!("{:.1}", b as f64 / 1024.0 / f64::from(a)),
                        _ => "-".into(),
                    },
                );
            }
            row
        })
        .collect();
    render(out, &header, &rows);
    for n in notes {
        let _ = writeln!(out, "  error: {n}");
    }
}

impl Report {
    fn startup_table(&self, out: &mut String) {
        if self.startup.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n== process start to first response byte ({} runs each after 10 unmeasured; goal for inetd-spawn: under 1 ms) ==",
            self.settings.startup_runs
        );
        let header: Vec<String> = ["series", "min", "p50", "p99", "max"]
            .map(String::from)
            .to_vec();
        let rows: Vec<Vec<String>> = self
            .startup
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    micros(r.min_us),
                    micros(r.p50_us),
                    micros(r.p99_us),
                    micros(r.max_us),
                ]
            })
            .collect();
        render(out, &header, &rows);
        for r in &self.startup {
            let _ = write!(out, "  {}: {}", r.name, r.what);
            if let Some(e) = &r.error {
                let _ = write!(out, " (ERROR after {} runs: {e})", r.runs);
            }
            out.push('\n');
        }
    }

    pub fn write_json(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Requests/s against file size, one line per server, a panel per block.
    pub fn write_chart(&self, path: &Path) -> Result<(), String> {
        let blocks = self.blocks();
        if blocks.is_empty() {
            return Ok(());
        }
        let cols = if blocks.len() > 1 { 2 } else { 1 };
        let rows = blocks.len().div_ceil(cols);
        let (w, h) = (720u32, 460u32);
        let root = SVGBackend::new(path, (w * cols as u32, h * rows as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let areas = root.split_evenly((rows, cols));
        for (block, area) in blocks.iter().zip(areas.iter()) {
            self.panel(*block, area, &self.block_names(*block))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())
    }

    fn panel(
        &self,
        block: Block,
        area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
        names: &[String],
    ) -> Result<(), Box<dyn std::error::Error + '_>> {
        let series: Vec<(usize, &String, Points)> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let pts = self
                    .sizes(block)
                    .into_iter()
                    .filter_map(|size| {
                        let rps = self
                            .find(block, size, name)?
                            .outcome
                            .as_ref()?
                            .requests_per_second;
                        (rps > 0.0).then_some((size as f64, rps))
                    })
                    .collect();
                (i, name, pts)
            })
            .collect();
        let all = series.iter().flat_map(|(_, _, p)| p.iter().copied());
        let (mut xmin, mut xmax, mut ymin, mut ymax) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for (x, y) in all {
            xmin = xmin.min(x);
            xmax = xmax.max(x);
            ymin = ymin.min(y);
            ymax = ymax.max(y);
        }
        if xmin > xmax {
            return Ok(());
        }
        let mut chart = ChartBuilder::on(area)
            .caption(block_title(block), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (xmin / 2.0..xmax * 2.0).log_scale(),
                (ymin / 20.0..ymax * 2.0).log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_desc("file size")
            .y_desc("requests/s")
            .x_label_formatter(&|v| short_size(*v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        for (i, name, pts) in series {
            if pts.is_empty() {
                continue;
            }
            let color = Palette99::pick(i).to_rgba();
            let width = if kind_of(name) == Some(Kind::Staticd) {
                3
            } else {
                1
            };
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerLeft)
            .draw()?;
        Ok(())
    }
}

/// (file size, requests/s) for one server in one panel.
type Points = Vec<(f64, f64)>;

/// "wrk, keep-alive, 50 connection(s)"; over HTTPS "HTTPS: wrk, ...";
/// "h2 (TLS, ALPN): h2load, 50 connection(s) x 10 stream(s)".
fn block_title((tool, mode, conns, proto, streams): Block) -> String {
    let tool_name = match tool {
        Tool::Wrk => "wrk",
        Tool::Ab => "ab (classic)",
        Tool::Resume => "resumed TLS 1.3 handshakes (harness client)",
        Tool::H2load => "h2load",
    };
    match proto {
        Proto::H2 | Proto::H2c => format!(
            "{}: {tool_name}, {conns} connection(s) x {streams} stream(s)",
            if proto == Proto::H2 {
                "h2 (TLS, ALPN)"
            } else {
                "h2c (prior knowledge)"
            }
        ),
        _ => format!(
            "{}{tool_name}, {}, {conns} connection(s)",
            if proto == Proto::Https { "HTTPS: " } else { "" },
            mode.label()
        ),
    }
}

fn kind_of(name: &str) -> Option<Kind> {
    crate::servers::ALL.into_iter().find(|k| k.name() == name)
}

fn short_size(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.0}MB", v / 1e6),
        v if v >= 1e3 => format!("{:.0}KB", v / 1e3),
        v => format!("{v:.0}B"),
    }
}

fn latency(us: Option<f64>) -> String {
    match us {
        None => "-".into(),
        Some(us) if us < 1_000.0 => format!("{us:.0}us"),
        Some(us) if us < 1_000_000.0 => format!("{:.2}ms", us / 1e3),
        Some(us) => format!("{:.2}s", us / 1e6),
    }
}

/// Microseconds, to a tenth below 100.
pub fn micros(us: Option<f64>) -> String {
    match us {
        None => "-".into(),
        Some(us) if us < 100.0 => format!("{us:.1}us"),
        Some(us) => format!("{us:.0}us"),
    }
}

/// Left-aligned first column, right-aligned others.
fn render(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    let cols = header.len();
    let mut width = vec![0; cols];
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate().take(cols) {
            if i == 0 {
                let _ = write!(line, "{c:<w$}", w = width[i]);
            } else {
                let _ = write!(line, "  {c:>w$}", w = width[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}
