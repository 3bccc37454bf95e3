//! What a run produced: the records (every round), their per-cell
//! summaries (median and spread of the rounds), the text table and
//! results.json. The charts are in chart.rs; the summary of the targets,
//! judged on these summaries, in targets.rs.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::compressed::{self, Compressed};
use crate::docroot::label;
use crate::idle::IdleMemory;
use crate::load::{Mode, Outcome, Tool};
use crate::machine::{Host, Software};
use crate::procstat::UdpCounters;
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
    /// CPU used by the load client (it shares the machine): a child
    /// process's from /proc, h3load's its own threads'.
    pub client_cpu_seconds: f64,
    /// Which round of the cell, from 1.
    pub round: u32,
    /// HTTP/3 cells: how much the kernel's UDP error counters rose over
    /// the measured run (system-wide, as `nstat` reads them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounters>,
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
    /// Rounds per cell: each runs every server once.
    pub rounds: u32,
    /// What the harness estimated at the start for the whole run.
    pub estimated_seconds: f64,
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
    /// Streams per connection of the h2load cells.
    pub h2_streams: Vec<u32>,
    /// Connections for the memory-with-open-streams measurement.
    pub h2_connections: u32,
    /// Streams each of them holds open (at most; fewer if a server allows
    /// fewer at once).
    pub h2_open_streams: u32,
    /// HTTP/3 servers and cells (oha) were run, and only those (with the
    /// HTTPS and h2 cells of staticd they are compared with).
    pub h3: bool,
    pub h3_only: bool,
    /// Streams per connection of the oha cells (-p).
    pub h3_streams: Vec<u32>,
    /// Connections for the idle HTTP/3 memory measurement.
    pub h3_idle_connections: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub total_seconds: f64,
    pub interrupted: bool,
    pub host: Host,
    pub software: Software,
    pub settings: Settings,
    pub servers: Vec<Description>,
    pub skipped: Vec<Skipped>,
    /// One per (cell, server): the median and range of its rounds.
    pub summaries: Vec<Summary>,
    /// One per (cell, server, round).
    pub measurements: Vec<Measurement>,
    /// Memory per idle keep-alive connection, one record per server.
    pub idle_memory: Vec<IdleMemory>,
    /// Process start (or connect) to first response byte, one record per series.
    pub startup: Vec<Startup>,
    /// The compression cell, one record per server.
    pub compressed: Vec<Compressed>,
    /// The inetd cell: staticd-inetd against eris (None: not run).
    pub inetd: Option<InetdCell>,
    /// The summary the table ends with: staticd against the best peer in
    /// every cell, met or missed against the targets (targets.rs).
    pub targets: Vec<Target>,
    /// HTTP/3's cross-check: staticd's cell measured under both h3load
    /// and oha in this run (none without oha).
    pub h3_cross_check: Vec<CrossCheck>,
}

/// The inetd cell: staticd-inetd and eris, fnord's maintained fork, both
/// under tcpserver, ab -c 50 without keep-alive on the small file, in the
/// run's rounds. Kept apart from the matrix (`summaries`), whose tables
/// and targets are staticd's against the six peers.
#[derive(Clone, Debug, Serialize)]
pub struct InetdCell {
    /// How eris ran (staticd-inetd's is in `servers`).
    pub eris: Description,
    /// One per server: the median and range of its rounds.
    pub summaries: Vec<Summary>,
    /// One per server and round.
    pub measurements: Vec<Measurement>,
}

impl InetdCell {
    /// The summary of `kind`'s rounds, if it ran.
    pub(crate) fn of(&self, kind: Kind) -> Option<&Summary> {
        self.summaries.iter().find(|m| m.server == kind.name())
    }

    /// Its table: a row per server, as the matrix's blocks show them.
    fn table(&self, out: &mut String) {
        let Some(first) = self.measurements.first() else {
            return;
        };
        let _ = writeln!(
            out,
            "\n== inetd: staticd-inetd against eris (fnord's maintained fork), both under tcpserver; {}, {:.2} s cells, {}: requests/s ==",
            block_title(first.block()),
            first.cell_seconds,
            label(first.size)
        );
        let header: Vec<String> = [
            "server",
            "requests/s",
            "spread",
            "p50/p99 ms",
            "CPU us/req",
            "errors",
        ]
        .map(String::from)
        .to_vec();
        let rows: Vec<Vec<String>> = self
            .summaries
            .iter()
            .map(|m| {
                vec![
                    m.server.clone(),
                    m.rps().map_or("failed".into(), |r| format!("{r:.0}")),
                    m.requests_per_second
                        .map_or(String::new(), |r| percent(&r, m.measured)),
                    format!("{}/{}", ms(median(m.p50_us)), ms(median(m.p99_us))),
                    tenths(median(m.cpu_us_per_request)),
                    m.errors.to_string(),
                ]
            })
            .collect();
        render(out, &header, &rows);
        let _ = writeln!(out, "  eris: {}; {}", self.eris.version, self.eris.command);
        for m in self.measurements.iter().filter(|m| m.error.is_some()) {
            let _ = writeln!(
                out,
                "  {} round {}: {}",
                m.server,
                m.round,
                m.error.as_deref().unwrap_or_default()
            );
        }
    }
}

/// One HTTP/3 cell on staticd under the two clients (`cross_check`).
#[derive(Clone, Debug, Serialize)]
pub struct CrossCheck {
    pub server: String,
    pub size: u64,
    pub connections: u32,
    pub streams: u32,
    pub h3load: ClientFigures,
    pub oha: ClientFigures,
}

/// What one client measured in a cell: medians of the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct ClientFigures {
    pub requests_per_second: Option<f64>,
    pub server_cpu_us_per_request: Option<f64>,
    pub client_cpu_us_per_request: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Errors of every kind, summed over the rounds.
    pub errors: u64,
    pub rounds: u32,
}

impl ClientFigures {
    fn of(m: &Summary) -> ClientFigures {
        ClientFigures {
            requests_per_second: m.rps(),
            server_cpu_us_per_request: median(m.cpu_us_per_request),
            client_cpu_us_per_request: median(m.client_cpu_us_per_request),
            p50_us: median(m.p50_us),
            p99_us: median(m.p99_us),
            errors: m.errors,
            rounds: m.measured,
        }
    }
}

/// The cells measured under oha (the cross-check) beside the same cell
/// under h3load: same server, size, connections and streams.
pub fn cross_check(summaries: &[Summary]) -> Vec<CrossCheck> {
    summaries
        .iter()
        .filter(|o| o.tool == Tool::Oha && o.proto == Proto::H3)
        .filter_map(|o| {
            let mine = summaries.iter().find(|h| {
                h.tool == Tool::H3load
                    && h.proto == Proto::H3
                    && h.server == o.server
                    && h.size == o.size
                    && h.connections == o.connections
                    && h.streams == o.streams
            })?;
            Some(CrossCheck {
                server: o.server.clone(),
                size: o.size,
                connections: o.connections,
                streams: o.streams.unwrap_or(1),
                h3load: ClientFigures::of(mine),
                oha: ClientFigures::of(o),
            })
        })
        .collect()
}

/// One row of the summary (targets.rs judges the cells).
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// "HTTP/1.1 keep-alive c=50 1 KB", "HTTPS close c=50 1 KB (full
    /// handshakes)", "p99 keep-alive c=2000 1 KB", "inetd start",
    /// "idle keep-alive memory".
    pub cell: String,
    /// staticd's figure, as shown.
    pub staticd: String,
    /// The best peer and its figure, as shown.
    pub best_peer: Option<String>,
    /// staticd's over the best peer's (requests/s, or p99: lower is
    /// better there).
    pub ratio: Option<f64>,
    /// Server CPU per request, staticd's and the best peer's (us).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<(Option<f64>, Option<f64>)>,
    /// Server and load client CPU per request, staticd's and the best
    /// peer's (us; wrk and ab cells): shown beside the server's own, not
    /// judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub with_client_cpu_us_per_request: Option<(Option<f64>, Option<f64>)>,
    /// The target, in words; "-" for none.
    pub target: String,
    /// None: the cell has no target, or it could not be judged (staticd
    /// or every peer failed in it).
    pub met: Option<bool>,
}

/// The median and the range of one quantity over a cell's rounds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// None without values. The median of an even number of rounds is
    /// the mean of the middle two.
    pub(crate) fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// How far the farthest round is from the median, in percent of it:
    /// every round lies within ± this.
    pub fn percent(&self) -> Option<f64> {
        (self.median > 0.0)
            .then(|| (self.max - self.median).max(self.median - self.min) / self.median * 100.0)
    }
}

/// One server in one cell over all its rounds: what the tables show.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub tool: Tool,
    pub https: bool,
    #[serde(skip_serializing_if = "Proto::is_http1")]
    pub proto: Proto,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    pub server: String,
    pub size: u64,
    pub connections: u32,
    pub mode: Mode,
    /// Rounds run, and how many of them the client reported on.
    pub rounds: u32,
    pub measured: u32,
    pub requests_per_second: Option<Spread>,
    /// Over the rounds that completed a response.
    pub p50_us: Option<Spread>,
    pub p99_us: Option<Spread>,
    /// h2load's mean and standard deviation of the time per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_us: Option<Spread>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sd_us: Option<Spread>,
    pub cpu_us_per_request: Option<Spread>,
    /// The load client's CPU per request, over the rounds that completed
    /// some (it shares the machine with the server).
    pub client_cpu_us_per_request: Option<Spread>,
    /// Server and load client together per request, where both are
    /// measured over the same stretch (wrk and ab, which run as child
    /// processes): on loopback, the kernel's TCP work for a response lands
    /// on whichever of the two makes the segments leave (the sender's
    /// write, or the receiver's acknowledgement releasing queued bytes), so
    /// the server's share alone depends on how much it lets the kernel
    /// queue. See docs/performance.md, "Large files: whose CPU".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_and_client_cpu_us_per_request: Option<Spread>,
    /// Bytes the client read per second, parts of responses it did not
    /// finish too (wrk's Transfer/sec): with many connections and large
    /// files, a server that shares its rate fairly finishes fewer
    /// responses within a cell than one that serves some connections first,
    /// at the same throughput.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_second: Option<Spread>,
    pub rss_kib: Option<Spread>,
    /// HTTP/3 cells: the kernel's UDP error counters' rise, summed over
    /// the rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounters>,
    /// Completed requests, and errors of every kind, summed over the rounds.
    pub requests: u64,
    pub errors: u64,
    /// The resuming client: handshakes made in full, summed.
    pub not_resumed: u64,
}

/// A summary per (cell, server), in the order the measurements came.
pub fn summarize(measurements: &[Measurement]) -> Vec<Summary> {
    let mut out: Vec<Summary> = Vec::new();
    for m in measurements {
        if out
            .iter()
            .any(|s| s.block() == m.block() && s.size == m.size && s.server == m.server)
        {
            continue;
        }
        let rounds: Vec<&Measurement> = measurements
            .iter()
            .filter(|r| r.block() == m.block() && r.size == m.size && r.server == m.server)
            .collect();
        let outcomes: Vec<_> = rounds.iter().filter_map(|r| r.outcome.as_ref()).collect();
        let done: Vec<_> = outcomes.iter().filter(|o| o.requests > 0).collect();
        out.push(Summary {
            tool: m.tool,
            https: m.https,
            proto: m.proto,
            streams: m.streams,
            server: m.server.clone(),
            size: m.size,
            connections: m.connections,
            mode: m.mode,
            rounds: rounds.len() as u32,
            measured: outcomes.len() as u32,
            requests_per_second: Spread::of(outcomes.iter().map(|o| o.requests_per_second)),
            p50_us: Spread::of(done.iter().filter_map(|o| o.p50_us)),
            p99_us: Spread::of(done.iter().filter_map(|o| o.p99_us)),
            mean_us: Spread::of(done.iter().filter_map(|o| o.mean_us)),
            sd_us: Spread::of(done.iter().filter_map(|o| o.sd_us)),
            cpu_us_per_request: Spread::of(rounds.iter().filter_map(|r| r.cpu_us_per_request)),
            client_cpu_us_per_request: Spread::of(rounds.iter().filter_map(|r| {
                let n = r.outcome.as_ref()?.requests;
                (n > 0).then(|| r.client_cpu_seconds * 1e6 / n as f64)
            })),
            server_and_client_cpu_us_per_request: match m.tool {
                Tool::Wrk | Tool::Ab => Spread::of(rounds.iter().filter_map(|r| {
                    let n = r.outcome.as_ref()?.requests;
                    (n > 0).then(|| (r.server_cpu_seconds + r.client_cpu_seconds) * 1e6 / n as f64)
                })),
                _ => None,
            },
            bytes_per_second: Spread::of(outcomes.iter().filter_map(|o| o.bytes_per_second)),
            udp: rounds.iter().filter_map(|r| r.udp).reduce(|mut a, b| {
                a.add(&b);
                a
            }),
            rss_kib: Spread::of(
                rounds
                    .iter()
                    .filter(|r| r.outcome.is_some())
                    .map(|r| r.rss_kib as f64),
            ),
            requests: outcomes.iter().map(|o| o.requests).sum(),
            errors: outcomes.iter().map(|o| o.error_count()).sum(),
            not_resumed: outcomes.iter().map(|o| o.not_resumed).sum(),
        });
    }
    out
}

/// A table of the report: the cells of one client, mode, connection count,
/// protocol and (HTTP/2) streams per connection.
pub(crate) type Block = (Tool, Mode, u32, Proto, u32);

/// The instance a record is of (`proto` says only which HTTP/2 one).
fn instance(proto: Proto, https: bool) -> Proto {
    match (proto, https) {
        (Proto::H2 | Proto::H2c | Proto::H3, _) => proto,
        (_, true) => Proto::Https,
        (_, false) => Proto::Http,
    }
}

impl Measurement {
    fn block(&self) -> Block {
        (
            self.tool,
            self.mode,
            self.connections,
            instance(self.proto, self.https),
            self.streams.unwrap_or(1),
        )
    }
}

impl Summary {
    pub(crate) fn block(&self) -> Block {
        (
            self.tool,
            self.mode,
            self.connections,
            instance(self.proto, self.https),
            self.streams.unwrap_or(1),
        )
    }

    /// The median requests/s, if any round was measured.
    pub(crate) fn rps(&self) -> Option<f64> {
        self.requests_per_second.map(|s| s.median)
    }
}

impl Report {
    /// The blocks that have results, in table order: the cleartext ones,
    /// the HTTPS ones, then h2 and h2c (more streams first).
    pub(crate) fn blocks(&self) -> Vec<Block> {
        let mut out: Vec<Block> = Vec::new();
        for proto in PROTOS {
            for tool in [
                Tool::Wrk,
                Tool::Ab,
                Tool::Resume,
                Tool::H2load,
                Tool::H3load,
                Tool::Oha,
            ] {
                for &mode in &[Mode::KeepAlive, Mode::Close] {
                    let mut keys: Vec<(u32, u32)> = self
                        .summaries
                        .iter()
                        .map(Summary::block)
                        .filter(|b| b.0 == tool && b.1 == mode && b.3 == proto)
                        .map(|b| (b.2, b.4))
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
    pub(crate) fn block_names(&self, block: Block) -> Vec<String> {
        self.server_names()
            .into_iter()
            .filter(|n| match block.3 {
                Proto::Http => true,
                Proto::Https | Proto::H3 => self
                    .summaries
                    .iter()
                    .any(|m| m.block() == block && &m.server == n),
                Proto::H2 | Proto::H2c => self
                    .summaries
                    .iter()
                    .any(|m| m.block().3.http2() && &m.server == n),
            })
            .collect()
    }

    pub(crate) fn find(&self, block: Block, size: u64, server: &str) -> Option<&Summary> {
        self.summaries
            .iter()
            .find(|m| m.block() == block && m.size == size && m.server == server)
    }

    /// The rounds of one server in one cell, in order.
    fn rounds_of<'a>(
        &'a self,
        block: Block,
        size: u64,
        server: &'a str,
    ) -> impl Iterator<Item = &'a Measurement> + 'a {
        self.measurements
            .iter()
            .filter(move |m| m.block() == block && m.size == size && m.server == server)
    }

    pub(crate) fn sizes(&self, block: Block) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .summaries
            .iter()
            .filter(|m| m.block() == block)
            .map(|m| m.size)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// The peers' summaries of one cell (not staticd's, not the ceiling's).
    fn peers_in(&self, block: Block, size: u64) -> impl Iterator<Item = &Summary> {
        self.summaries
            .iter()
            .filter(move |m| m.block() == block && m.size == size)
            .filter(|m| kind_of(&m.server).is_some_and(Kind::is_peer))
    }

    /// The best median requests/s among the peers (not staticd, not the
    /// ceiling). In the resumed-handshake cells, among the peers that
    /// resumed every handshake in every round, if any did: a peer that made
    /// some in full (it sends no new ticket on a resumed handshake, and the
    /// client uses each ticket once) measured something else.
    pub(crate) fn best_peer(&self, block: Block, size: u64) -> Option<(f64, String)> {
        let peers: Vec<(&Summary, f64)> = self
            .peers_in(block, size)
            .filter_map(|m| Some((m, m.rps()?)))
            .collect();
        let some_resumed_all = peers.iter().any(|(m, _)| m.not_resumed == 0);
        peers
            .into_iter()
            .filter(|(m, _)| block.0 != Tool::Resume || !some_resumed_all || m.not_resumed == 0)
            .map(|(m, rps)| (rps, m.server.clone()))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The lowest median p99 among the peers without errors in the cell,
    /// or among all peers if every one had errors: (peer, p99 in us). A
    /// cell where no response completed has no latency to compare (the
    /// median is over the rounds that completed one).
    pub(crate) fn best_peer_p99(&self, block: Block, size: u64) -> Option<(String, f64)> {
        let peers: Vec<(&Summary, f64)> = self
            .peers_in(block, size)
            .filter_map(|m| Some((m, median(m.p99_us)?)))
            .collect();
        let clean: Vec<_> = peers
            .iter()
            .filter(|(m, _)| m.errors == 0)
            .copied()
            .collect();
        if clean.is_empty() { &peers } else { &clean }
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|&(m, us)| (m.server.clone(), us))
    }

    /// table.txt but its last table, the summary (targets::table).
    pub fn table(&self) -> String {
        let mut out = String::new();
        let s = &self.settings;
        self.machine(&mut out);
        let _ = writeln!(
            out,
            "cells: {:.2} s at 50 connections (scaled by connections), each run after a {:.2} s\n  warm-up; wrk with {} thread(s); load client and servers share the machine{}",
            s.duration_seconds,
            s.warmup_seconds,
            s.client_threads,
            if self.interrupted { "; INTERRUPTED: partial results" } else { "" }
        );
        if s.rounds > 1 {
            let _ = writeln!(
                out,
                "rounds: {} per cell, interleaved (every server once per round, the order rotated);\n  every number is the median of the rounds, ratios are of medians; the ± rows: every\n  round lies within that much of the median",
                s.rounds
            );
        } else {
            let _ = writeln!(out, "rounds: 1 per cell (no spread to show)");
        }
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
                    match d.proto {
                        Proto::H2 | Proto::H3 => d.proto.suffix(),
                        _ => Proto::Https.suffix(),
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
                .find(|m| m.block() == block)
                .map_or(0.0, |m| m.cell_seconds);
            let rounds = self
                .summaries
                .iter()
                .filter(|m| m.block() == block)
                .map(|m| m.rounds)
                .max()
                .unwrap_or(0);
            let mut notes = Vec::new();

            let mut rows = Vec::new();
            let absent = if block.3.http2() { "n/a" } else { "-" };
            for &size in &sizes {
                let best = self.best_peer(block, size);
                let mut row = vec![label(size)];
                let mut spread = vec![String::new()];
                for name in &names {
                    for r in self.rounds_of(block, size, name) {
                        let why = match &r.outcome {
                            None => r.error.clone().unwrap_or_else(|| "failed".into()),
                            Some(o) if o.error_count() > 0 => o.describe_errors(),
                            Some(_) => continue,
                        };
                        let round = if rounds > 1 {
                            format!(" round {}", r.round)
                        } else {
                            String::new()
                        };
                        notes.push(format!("{name} {}{round}: {why}", label(size)));
                    }
                    let Some(m) = self.find(block, size, name) else {
                        row.push(absent.to_string());
                        spread.push(String::new());
                        continue;
                    };
                    let Some(rps) = m.requests_per_second else {
                        row.push("failed".to_string());
                        spread.push(String::new());
                        continue;
                    };
                    let mut c = format!("{:.0}", rps.median);
                    let is_staticd = kind_of(name).is_some_and(Kind::is_staticd);
                    if let (true, Some((b, _))) = (is_staticd, &best) {
                        if *b > 0.0 {
                            let _ = write!(c, " x{:.2}", rps.median / b);
                        }
                    }
                    if m.errors > 0 {
                        c.push('!');
                    }
                    row.push(c);
                    spread.push(percent(&rps, m.measured));
                }
                let best_name = best.map_or("-".to_string(), |(_, n)| n);
                row.push(best_name);
                rows.push(row);
                if rounds > 1 {
                    rows.push(spread);
                }
            }
            let mut header = vec!["size".to_string()];
            header.extend(names.iter().cloned());
            header.push("best peer".into());
            let _ = writeln!(
                out,
                "\n== {title}, {secs:.2} s cells{}: requests/s (staticd: xN = ratio to the best peer) ==",
                if rounds > 1 {
                    format!(", median of {rounds} rounds")
                } else {
                    String::new()
                }
            );
            render(&mut out, &header, &rows);

            let metric = |f: &dyn Fn(&Summary) -> String| -> Vec<Vec<String>> {
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
            // One table of the block: its heading, then `f` of every cell.
            let section = |out: &mut String, heading: &str, f: &dyn Fn(&Summary) -> String| {
                let _ = writeln!(out, "-- {title}: {heading} --");
                render(out, &header, &metric(f));
            };

            if block.0 == Tool::H2load {
                section(
                    &mut out,
                    "time per request, mean/sd, ms (h2load has no percentiles)",
                    &|m| format!("{}/{}", ms(median(m.mean_us)), ms(median(m.sd_us))),
                );
            } else {
                section(&mut out, "latency p50/p99, ms", &|m| {
                    format!("{}/{}", ms(median(m.p50_us)), ms(median(m.p99_us)))
                });
            }
            section(
                &mut out,
                "server RSS, MB (VmRSS summed over its processes, max while loaded)",
                &|m| median(m.rss_kib).map_or("-".into(), |k| format!("{:.1}", k / 1024.0)),
            );
            section(
                &mut out,
                &format!(
                    "server CPU time per request, us (utime+stime of its processes{})",
                    if block.0 == Tool::H2load {
                        ", over h2load's measured part"
                    } else {
                        ""
                    }
                ),
                &|m| tenths(median(m.cpu_us_per_request)),
            );
            if block.3 == Proto::H3 {
                section(
                    &mut out,
                    &format!(
                        "load client CPU time per request, us ({})",
                        if block.0 == Tool::H3load {
                            "h3load's own threads, getrusage"
                        } else {
                            "oha's process"
                        }
                    ),
                    &|m| tenths(median(m.client_cpu_us_per_request)),
                );
                self.h3_notes(&mut out, block, &sizes, &names);
            }
            if block.0 == Tool::Wrk {
                section(
                    &mut out,
                    "throughput, MB/s (bytes read, unfinished responses too: at many connections a fair server finishes fewer large responses in a cell at the same rate)",
                    &|m| median(m.bytes_per_second).map_or("-".into(), |b| format!("{:.0}", b / 1e6)),
                );
            }
            if matches!(block.0, Tool::Wrk | Tool::Ab) {
                section(
                    &mut out,
                    "server + load client CPU time per request, us (the machine's cost of a response: on loopback the kernel's TCP work lands on either)",
                    &|m| tenths(median(m.server_and_client_cpu_us_per_request)),
                );
            }
            if !notes.is_empty() {
                let _ = writeln!(out, "errors (cells marked !):");
                for n in notes {
                    let _ = writeln!(out, "  {n}");
                }
            }
        }
        self.many_connections(&mut out);
        compressed::table(&mut out, &self.compressed, s.duration_seconds);
        self.h3_cross_check_table(&mut out);
        self.h2_summary(&mut out);
        self.idle_table(&mut out);
        self.startup_table(&mut out);
        if let Some(inetd) = &self.inetd {
            inetd.table(&mut out);
        }
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
                self.summaries
                    .iter()
                    .any(|m| &m.server == n && blocks.contains(&m.block()))
            })
            .collect();
        let _ = writeln!(
            out,
            "\n== wrk, keep-alive, 2,000 connections and more: p99 latency (median of the rounds) / errors (all rounds) (staticd: xN = its p99 over the best peer's; goal: 0 errors, x1.00 or less) =="
        );
        let mut header = vec!["conns".to_string(), "size".to_string()];
        header.extend(names.iter().cloned());
        header.push("best peer p99".into());
        let mut rows = Vec::new();
        for block in blocks {
            for size in self.sizes(block) {
                let p99 = |m: &Summary| median(m.p99_us);
                let best = self.best_peer_p99(block, size);
                let mut row = vec![block.2.to_string(), label(size)];
                for name in &names {
                    let cell = match self.find(block, size, name) {
                        None => "-".to_string(),
                        Some(m) if m.measured == 0 => "failed".to_string(),
                        Some(m) => match p99(m) {
                            None => format!("none done / {}", m.errors),
                            Some(us) => {
                                let mut c = format!("{} / {}", latency(Some(us)), m.errors);
                                let is_staticd = kind_of(name).is_some_and(Kind::is_staticd);
                                if let (true, Some((_, b))) = (is_staticd, &best) {
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
                    Proto::H2 | Proto::H2c | Proto::H3 => r.proto == proto,
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
                Proto::H3 => "idle HTTP/3 connections (QUIC): server memory each, KiB = (after - before) / connections still open, each after a handshake (aioquic) and one GET over h3; RSS (and PSS), kernel socket memory not included; goal for staticd: no more than 2x its idle TLS connection",
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
        let us = |m: Option<&Summary>| tenths(m.and_then(|m| median(m.cpu_us_per_request)));
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
                let rps = mine.and_then(Summary::rps);
                let best = self.best_peer(block, size);
                let best_m = best.as_ref().and_then(|(_, n)| self.find(block, size, n));
                let lowest = self
                    .peers_in(block, size)
                    .filter_map(|m| Some((median(m.cpu_us_per_request)?, m.server.clone())))
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

impl Report {
    /// An h3 block's notes: the kernel's UDP error counters over each
    /// server's runs, and (h3load) what its sockets carried.
    fn h3_notes(&self, out: &mut String, block: Block, sizes: &[u64], names: &[String]) {
        let _ = writeln!(
            out,
            "notes: UDP error counters (/proc/net/snmp and snmp6, as nstat names them; system-wide, so anything else on the machine counts too), their rise over the measured runs, summed over the rounds:"
        );
        for &size in sizes {
            for name in names {
                if let Some(udp) = self.find(block, size, name).and_then(|m| m.udp) {
                    let _ = writeln!(out, "  {name} {}: {}", label(size), udp.describe());
                }
            }
        }
        if block.0 != Tool::H3load {
            return;
        }
        let _ = writeln!(
            out,
            "notes: h3load's UDP sockets (all rounds): datagrams in and out, their mean size (in: and the largest), datagrams per system call (GRO in, GSO out), sends that waited for room, the socket buffers granted (getsockopt: twice the usable size):"
        );
        for &size in sizes {
            for name in names {
                let mut d = crate::load::Datagrams::default();
                for r in self.rounds_of(block, size, name) {
                    if let Some(o) = r.outcome.as_ref().and_then(|o| o.datagrams) {
                        d.add(&o);
                    }
                }
                if d.received == 0 && d.sent == 0 {
                    continue;
                }
                let mean = |bytes: u64, n: u64| bytes.checked_div(n).unwrap_or(0);
                let per = |n: u64, calls: u64| {
                    if calls > 0 {
                        n as f64 / calls as f64
                    } else {
                        0.0
                    }
                };
                let _ = writeln!(
                    out,
                    "  {name} {}: in {} datagrams of {} B (at most {} B), {:.1} per recvmmsg; out {} of {} B, {:.1} per sendmsg; {} waited; SO_RCVBUF {} KiB, SO_SNDBUF {} KiB",
                    label(size),
                    d.received,
                    mean(d.received_bytes, d.received),
                    d.largest_received,
                    per(d.received, d.recv_calls),
                    d.sent,
                    mean(d.sent_bytes, d.sent),
                    per(d.sent, d.send_calls),
                    d.send_blocked,
                    d.rcvbuf >> 10,
                    d.sndbuf >> 10
                );
            }
        }
    }

    /// The cross-check: staticd's cell under oha beside the same cell
    /// under h3load, the ratios of the two.
    fn h3_cross_check_table(&self, out: &mut String) {
        if self.h3_cross_check.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n== HTTP/3 cross-check: the same cell under h3load (the h3 cells' client) and oha (the client before it), in this run; oha's figures check h3load's, they are not the cell's =="
        );
        let header: Vec<String> = [
            "cell",
            "client",
            "req/s",
            "server CPU us/req",
            "client CPU us/req",
            "p50/p99 ms",
            "errors",
        ]
        .map(String::from)
        .to_vec();
        let mut rows = Vec::new();
        for c in &self.h3_cross_check {
            let cell = format!(
                "{} {} c={} x {}",
                c.server,
                label(c.size),
                c.connections,
                c.streams
            );
            for (client, f) in [("h3load", &c.h3load), ("oha", &c.oha)] {
                rows.push(vec![
                    cell.clone(),
                    client.to_string(),
                    f.requests_per_second
                        .map_or("-".into(), |r| format!("{r:.0}")),
                    tenths(f.server_cpu_us_per_request),
                    tenths(f.client_cpu_us_per_request),
                    format!("{}/{}", ms(f.p50_us), ms(f.p99_us)),
                    f.errors.to_string(),
                ]);
            }
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => format!("x{:.2}", a / b),
                _ => "-".into(),
            };
            rows.push(vec![
                cell,
                "h3load / oha".into(),
                ratio(c.h3load.requests_per_second, c.oha.requests_per_second),
                ratio(
                    c.h3load.server_cpu_us_per_request,
                    c.oha.server_cpu_us_per_request,
                ),
                ratio(
                    c.h3load.client_cpu_us_per_request,
                    c.oha.client_cpu_us_per_request,
                ),
                String::new(),
                String::new(),
            ]);
        }
        render(out, &header, &rows);
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
    /// The first lines of the table: what a reader needs to reproduce it.
    fn machine(&self, out: &mut String) {
        let _ = writeln!(out, "staticd comparison: {}", self.host.describe());
        let sw = &self.software;
        let _ = writeln!(
            out,
            "staticd {}; run as:\n  {}",
            sw.commit(),
            sw.command_line
        );
        let _ = writeln!(out, "versions:");
        let mut seen: Vec<&str> = Vec::new();
        for d in &self.servers {
            if !seen.contains(&d.name.as_str()) {
                seen.push(&d.name);
                let _ = writeln!(out, "  {:<14} {}", d.name, d.version);
            }
        }
        for t in &sw.tools {
            // wrk follows its version with a copyright.
            let v = t.version.split(" Copyright").next().unwrap_or(&t.version);
            let _ = writeln!(out, "  {:<14} {v}", t.name);
        }
    }

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
        write_json(path, self)
    }
}

/// "wrk, keep-alive, 50 connection(s)"; over HTTPS "HTTPS: wrk, ...";
/// "h2 (TLS, ALPN): h2load, 50 connection(s) x 10 stream(s)".
pub(crate) fn block_title((tool, mode, conns, proto, streams): Block) -> String {
    let tool_name = match tool {
        Tool::Wrk => "wrk",
        Tool::Ab => "ab (classic)",
        Tool::Resume => "resumed TLS 1.3 handshakes (harness client)",
        Tool::H2load => "h2load",
        Tool::H3load => "h3load (the harness's client)",
        Tool::Oha => "oha, cross-check of h3load",
    };
    match proto {
        Proto::H3 => {
            format!("h3 (QUIC, UDP): {tool_name}, {conns} connection(s) x {streams} stream(s)")
        }
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

/// `value` as pretty JSON at `path`: results.json, and the modes' own.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// Where the harness writes by default: <target>/compare (the target
/// directory is the parent of CARGO_TARGET_TMPDIR).
pub fn default_out() -> std::path::PathBuf {
    target_dir().join("compare")
}

/// The target directory the bench was built in.
pub fn target_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map_or_else(|| "target".into(), Path::to_path_buf)
}

/// The median of a spread, if there is one.
pub(crate) fn median(s: Option<Spread>) -> Option<f64> {
    s.map(|s| s.median)
}

/// "±3%" (the farthest of `measured` rounds from their median); blank
/// with fewer than two rounds to compare.
fn percent(s: &Spread, measured: u32) -> String {
    match s.percent() {
        Some(p) if measured > 1 && p < 9.5 => format!("±{p:.1}%"),
        Some(p) if measured > 1 => format!("±{p:.0}%"),
        _ => String::new(),
    }
}

pub(crate) fn kind_of(name: &str) -> Option<Kind> {
    crate::servers::ALL.into_iter().find(|k| k.name() == name)
}

pub(crate) fn short_size(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.0}MB", v / 1e6),
        v if v >= 1e3 => format!("{:.0}KB", v / 1e3),
        v => format!("{v:.0}B"),
    }
}

/// Milliseconds to three significant digits or so, without the unit
/// (the table's title has it): "0.35", "9.19", "80.6", "562".
fn ms(us: Option<f64>) -> String {
    match us.map(|us| us / 1e3) {
        None => "-".into(),
        Some(ms) if ms < 10.0 => format!("{ms:.2}"),
        Some(ms) if ms < 100.0 => format!("{ms:.1}"),
        Some(ms) => format!("{ms:.0}"),
    }
}

pub(crate) fn latency(us: Option<f64>) -> String {
    match us {
        None => "-".into(),
        Some(us) if us < 1_000.0 => format!("{us:.0}us"),
        Some(us) if us < 1_000_000.0 => format!("{:.2}ms", us / 1e3),
        Some(us) => format!("{:.2}s", us / 1e6),
    }
}

/// A figure to a tenth (CPU microseconds per request in the tables), "-"
/// when unknown.
pub(crate) fn tenths(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
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
pub(crate) fn render(out: &mut String, header: &[String], rows: &[Vec<String>]) {
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

/// Requests/s in a progress line: 123.4k, or 987.
pub fn compact(rps: f64) -> String {
    if rps >= 10_000.0 {
        format!("{:.1}k", rps / 1000.0)
    } else {
        format!("{rps:.0}")
    }
}

/// Elapsed time in a progress line: 12:05.
pub fn clock(d: std::time::Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}
