//! `cargo bench --bench compare [-- --quick]`: staticd side by side with
//! nginx, lighttpd, apache2, h2o, Caddy and static-web-server (whichever
//! are installed) and with a do-nothing "ceiling" server, on loopback,
//! under wrk and ab, over HTTP/2 under h2load and over HTTP/3 under the
//! harness's own client (h3load.rs; oha as a cross-check). Writes
//! target/compare/{table.txt,results.json,chart.svg}. See
//! benches/README.md.

mod ceiling;
mod chart;
mod cli;
mod compressed;
mod docroot;
mod fetch;
mod h2;
// The HTTP/3 client is built on staticd's own QPACK and frames and on
// quinn-proto and quinn-udp, which the crate has with feature http3 (a
// default); without it there is no HTTP/3 to measure anyway.
#[cfg(feature = "http3")]
mod h3load;
mod idle;
mod inetd_cost;
mod load;
mod machine;
mod procstat;
mod programs;
mod reaper;
mod report;
mod resume;
mod script;
mod seed;
mod servers;
mod startup;
mod stop;
mod targets;
mod tls;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use load::{Mode, Run, Tool};
use report::{Measurement, Report, Settings, Skipped};
use servers::{Kind, Proto, Server, Setup};

const USAGE: &str = "\
cargo bench --bench compare [-- OPTIONS]

A full run (45-50 minutes on 2 cores with eight servers; with Caddy and
static-web-server about a quarter more): 1 B, 1 KB, 10 KB, 100 KB, 1 MB
and 10 MB; keep-alive and close at 50 connections, keep-alive at 2,000, and
at 10,000 for 1 KB and 100 KB; 3 s cells (scaled by connections), each run
in 3 interleaved rounds; HTTPS and HTTP/2 cells as below; idle memory and
start-up. The estimate is printed at the start and checked at the end.

  --quick                 reduced matrix: 1 KB, 100 KB, 1 MB; 50 connections;
                          keep-alive and close; 2 s cells; 1 round; no 10,000
                          connections; idle memory and start-up as in a full
                          run (about 3 minutes, plus the HTTPS and h2 parts)
  --rounds N              rounds per cell (default 3; quick 1): in round r
                          every server runs the cell once, in an order that
                          rotates per round and per cell; tables show the
                          median of the rounds and their spread
  --sizes LIST            e.g. 1,1k,28k,1m (default: 1,1k,10k,100k,1m,10m;
                          all: those and 5k,28k,50k,500k)
  --connections LIST      e.g. 1,50,500 (default: 50,2000,10000); 5,000 and
                          more: keep-alive only, and (unless --sizes is given)
                          only 1 KB and 100 KB; 1,000 and more: close only
                          when --connections is given
  --modes LIST            keep-alive,close (default: both)
  --duration SECS         measured seconds per cell at 50 connections (default 3;
                          quick 2); x0.5 below 10 connections, x1.25 up to 1000,
                          x1.5 up to 5000, x2 above (more connections take
                          longer to connect and settle)
  --warmup SECS           warm-up seconds before each run (default 0.5; at
                          least 1 at 5,000 connections and more)
  --idle-connections N    idle keep-alive connections for the memory-per-connection
                          measurement (default 10000; staticd-inetd at most
                          1000, over HTTPS 100;
                          0: skip it)
  --startup-runs N        runs of the inetd start-to-first-byte measurement
                          (default 200; 0: skip it)
  --no-matrix             only the idle-memory and start-up measurements
  --client-threads N      wrk threads (default: number of cores)
  --servers LIST          only these, e.g. staticd,nginx,ceiling
  --ab / --no-ab          ab pass (default: off; --seed-tables has ab's
                          classic tables)
  --ab-connections N      ab concurrency (default 50)
  --ab-duration SECS      ab seconds per cell (default 0.5)
  --out DIR               output directory (default: <target>/compare)

HTTPS (every server given the same ECDSA P-256 certificate, 50 connections):
wrk keep-alive 1 KB and 1 MB, wrk Connection: close 1 KB (a full handshake
per request), resumed handshakes 1 KB (the harness's rustls client), and
idle memory per TLS connection. Sizes not in --sizes and modes not in
--modes are left out (close covers the resumed cell).
  --no-https              no HTTPS servers or cells
  --https-only            only the HTTPS servers and cells (no cleartext
                          cells, no start-up series)

HTTP/2 (h2load, needs nghttp2-client; staticd, staticd-inetd, nginx,
lighttpd, h2o, Caddy and static-web-server, each with an h2 instance on the
HTTPS certificate, ALPN, and an h2c one, prior knowledge, but
static-web-server, which has no h2c): 50 connections with 10 streams each at
1 KB and 1 MB, over TLS and in the clear; then memory per connection with
10 streams open.
  --no-h2                 no HTTP/2 servers or cells
  --h2-only               only the HTTP/2 servers and cells (with
                          --https-only: both parts)
  --h2-streams LIST       streams per connection of the h2load cells, e.g.
                          10,1 (default 10)
  --h2-connections N      connections for the memory-with-open-streams
                          measurement (default 1000; staticd-inetd at most
                          100; 0: skip it)
  --h2-open-streams N     streams each of them holds open (default 10; 0:
                          the connection alone)

HTTP/3 (the harness's own client, h3load: quinn-proto and quinn-udp, one
UDP socket and QUIC endpoint per client thread; staticd's default HTTPS, h3
on the same port over UDP, and Caddy with `protocols h1 h2 h3`; the other
peers have no HTTP/3 here: n/a): 50 connections with 10 streams each and
with 1, at 1 KB and 1 MB; with oha (built with --features http3, on PATH
or at /opt/oha/bin/oha) the first 1 KB cell again on staticd as a
cross-check of the two clients; the kernel's UDP error counters per cell;
then memory per idle QUIC connection (an aioquic client, python3).
  --no-h3                 no HTTP/3 servers or cells
  --h3-only               only the HTTP/3 cells, plus staticd's own (no
                          peers) HTTPS keep-alive (wrk) and h2 (h2load)
                          cells at the same sizes and its idle TLS memory,
                          which issue 30's ratios compare with (about 5
                          minutes in 3 rounds)
  --h3-streams LIST       streams per connection of the h3 cells (default
                          10,1; the oha cross-check takes the first)
  --h3-idle-connections N idle QUIC connections for the memory measurement
                          (default 500; 0: skip it); with --h3-only the
                          idle TLS measurement uses as many unless
                          --idle-connections is given

The inetd cell (with the cleartext matrix): staticd-inetd against eris,
fnord's maintained fork (../shared/bin/eris or on PATH; started for this
cell alone), both under tcpserver, ab -c 50 without keep-alive, 1 KB, in
the run's rounds; its row in the summary asks staticd-inetd for x1.00 or
more of eris's requests/s. Without eris or ab: one skipped line.

Outputs: table.txt (also printed), results.json (every round, per-cell
summaries, the machine) and chart-{http1-keepalive,http1-close,https,h2}.svg.

Other modes, each with its own --help:
  --seed-tables           the classic comparisons, rerun (seed-tables.txt)
  --inetd-cost            CPU, page faults and tcpserver requests/s per start
                          of eris, staticd --inetd (default and
                          --no-default-features builds) and /bin/true
                          (inetd-cost.txt)

Unknown arguments (cargo passes --bench) are ignored.";

struct Options {
    quick: bool,
    sizes: Vec<u64>,
    connections: Vec<u32>,
    modes: Vec<Mode>,
    duration: Duration,
    warmup: Duration,
    /// Rounds per cell, each running every server once.
    rounds: u32,
    client_threads: u32,
    servers: Option<Vec<String>>,
    sizes_given: bool,
    connections_given: bool,
    idle_connections: u32,
    startup_runs: u32,
    matrix: bool,
    ab: bool,
    ab_connections: u32,
    ab_duration: Duration,
    out: PathBuf,
    https: bool,
    https_only: bool,
    h2: bool,
    h2_only: bool,
    h2_streams: Vec<u32>,
    h2_connections: u32,
    h2_open_streams: u32,
    h3: bool,
    h3_only: bool,
    h3_streams: Vec<u32>,
    h3_idle_connections: u32,
    idle_connections_given: bool,
}

impl Options {
    /// Whether the HTTP/1.1 cleartext part runs (its cells, idle memory
    /// and start-up series): unless an `--*-only` flag names another part.
    fn cleartext(&self) -> bool {
        !self.https_only && !self.h2_only && !self.h3_only
    }

    /// Whether the HTTPS (HTTP/1.1 over TLS) part runs (with --h3-only
    /// alone: staticd's instance only, for the ratios).
    fn https_part(&self) -> bool {
        self.https && (self.https_only || self.h3_only || !self.h2_only)
    }

    /// Whether the HTTP/2 part runs (with --h3-only alone: staticd's h2
    /// instance only).
    fn h2_part(&self) -> bool {
        self.h2 && (self.h2_only || self.h3_only || !self.https_only)
    }

    /// Whether the HTTP/3 part runs.
    fn h3_part(&self) -> bool {
        self.h3 && (self.h3_only || (!self.https_only && !self.h2_only))
    }

    /// With --h3-only (and not that part's own --*-only flag): an HTTPS or
    /// HTTP/2 instance is staticd's alone, and h2c has none.
    fn companion_only(&self, proto: Proto) -> bool {
        self.h3_only
            && match proto {
                Proto::Https => !self.https_only,
                Proto::H2 | Proto::H2c => !self.h2_only,
                _ => false,
            }
    }
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut o = Options {
        quick,
        sizes: if quick {
            docroot::QUICK_SIZES.to_vec()
        } else {
            FULL_SIZES.to_vec()
        },
        connections: if quick {
            vec![50]
        } else {
            FULL_CONNECTIONS.to_vec()
        },
        modes: vec![Mode::KeepAlive, Mode::Close],
        duration: Duration::from_secs_f64(if quick { 2.0 } else { 3.0 }),
        warmup: Duration::from_secs_f64(0.5),
        rounds: if quick { 1 } else { 3 },
        client_threads: machine::cores() as u32,
        servers: None,
        sizes_given: false,
        connections_given: false,
        idle_connections: 10_000,
        startup_runs: 200,
        matrix: true,
        ab: false,
        ab_connections: 50,
        ab_duration: Duration::from_secs_f64(0.5),
        out: report::default_out(),
        https: true,
        https_only: false,
        h2: true,
        h2_only: false,
        h2_streams: vec![H2_STREAMS],
        h2_connections: 1000,
        h2_open_streams: 10,
        h3: true,
        h3_only: false,
        h3_streams: H3_STREAMS.to_vec(),
        h3_idle_connections: H3_IDLE_CONNECTIONS,
        idle_connections_given: false,
    };
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (args[i].clone(), None),
        };
        let takes_value = [
            "--sizes",
            "--connections",
            "--concurrency",
            "--modes",
            "--duration",
            "--warmup",
            "--client-threads",
            "--servers",
            "--idle-connections",
            "--startup-runs",
            "--ab-connections",
            "--ab-duration",
            "--out",
            "--h2-connections",
            "--h2-open-streams",
            "--h2-streams",
            "--h3-streams",
            "--h3-idle-connections",
            "--rounds",
        ]
        .contains(&flag.as_str());
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| format!("{flag} needs a value"))?
                }
            }
        } else {
            String::new()
        };
        let secs = |v: &str| -> Result<Duration, String> {
            v.parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0 && *s < 3600.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("{flag}: not a number of seconds: {v}"))
        };
        let list = |v: &str| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        match flag.as_str() {
            "--quick" => {}
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--sizes" => {
                o.sizes = if value == "all" {
                    docroot::ALL_SIZES.to_vec()
                } else {
                    list(&value)
                        .iter()
                        .map(|s| {
                            docroot::parse_size(s)
                                .ok_or_else(|| format!("--sizes: not a size: {s}"))
                        })
                        .collect::<Result<_, _>>()?
                };
                o.sizes.sort_unstable();
                o.sizes.dedup();
                o.sizes_given = true;
            }
            "--idle-connections" => {
                o.idle_connections = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 15_000)
                    .ok_or("--idle-connections: a number, at most 15000")?;
                o.idle_connections_given = true;
            }
            "--startup-runs" => {
                o.startup_runs = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 100_000)
                    .ok_or("--startup-runs: a number, at most 100000")?
            }
            "--no-matrix" => o.matrix = false,
            "--connections" | "--concurrency" => {
                o.connections = list(&value)
                    .iter()
                    .map(|s| s.parse::<u32>().ok().filter(|&n| (1..=10_000).contains(&n)))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("{flag}: not a list of 1..10000: {value}"))?;
                o.connections_given = true;
            }
            "--rounds" => {
                o.rounds = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=99).contains(n))
                    .ok_or("--rounds: a number from 1 to 99")?
            }
            "--h2-streams" => {
                o.h2_streams = list(&value)
                    .iter()
                    .map(|s| s.parse::<u32>().ok().filter(|&n| (1..=500).contains(&n)))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("--h2-streams: not a list of 1..500: {value}"))?;
            }
            "--modes" => {
                o.modes = list(&value)
                    .iter()
                    .map(|m| match m.as_str() {
                        "keep-alive" | "keepalive" => Ok(Mode::KeepAlive),
                        "close" => Ok(Mode::Close),
                        _ => Err(format!("--modes: keep-alive or close, not {m}")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--duration" => o.duration = secs(&value)?,
            "--warmup" => o.warmup = secs(&value)?,
            "--ab-duration" => o.ab_duration = secs(&value)?,
            "--client-threads" => {
                o.client_threads = value
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--client-threads: a positive number")?
            }
            "--ab-connections" => {
                o.ab_connections = value
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--ab-connections: a positive number")?
            }
            "--servers" => {
                let names = list(&value);
                for n in &names {
                    // eris is only in the inetd cell, but may be named.
                    if !servers::ALL
                        .iter()
                        .chain(&INETD_PAIR)
                        .any(|k| k.name() == n)
                    {
                        return Err(format!("--servers: unknown server {n}"));
                    }
                }
                o.servers = Some(names);
            }
            "--ab" => o.ab = true,
            "--no-ab" => o.ab = false,
            "--out" => o.out = PathBuf::from(value),
            "--no-https" => o.https = false,
            "--https-only" => o.https_only = true,
            "--no-h2" => o.h2 = false,
            "--h2-only" => o.h2_only = true,
            "--h2-connections" => {
                o.h2_connections = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 15_000)
                    .ok_or("--h2-connections: a number, at most 15000")?
            }
            "--h2-open-streams" => {
                o.h2_open_streams = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 100)
                    .ok_or("--h2-open-streams: a number, at most 100")?
            }
            "--no-h3" => o.h3 = false,
            "--h3-only" => o.h3_only = true,
            "--h3-streams" => {
                o.h3_streams = list(&value)
                    .iter()
                    .map(|s| s.parse::<u32>().ok().filter(|&n| (1..=100).contains(&n)))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("--h3-streams: not a list of 1..100: {value}"))?;
            }
            "--h3-idle-connections" => {
                o.h3_idle_connections = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 5000)
                    .ok_or("--h3-idle-connections: a number, at most 5000")?
            }
            "--bench" => {}
            other => eprintln!("compare: ignoring argument {other}"),
        }
        i += 1;
    }
    if o.sizes.is_empty()
        || o.connections.is_empty()
        || o.modes.is_empty()
        || o.h2_streams.is_empty()
    {
        return Err("nothing to measure: empty --sizes, --connections or --modes".into());
    }
    if o.https_only && !o.https {
        return Err("--https-only and --no-https: nothing to measure".into());
    }
    if o.h2_only && !o.h2 {
        return Err("--h2-only and --no-h2: nothing to measure".into());
    }
    if o.h3_only && !o.h3 {
        return Err("--h3-only and --no-h3: nothing to measure".into());
    }
    if o.h3_streams.is_empty() {
        return Err("nothing to measure: empty --h3-streams".into());
    }
    // The idle TLS connections are compared with the idle QUIC ones: as
    // many of each.
    if o.h3_only && !o.idle_connections_given {
        o.idle_connections = o.h3_idle_connections;
    }
    // Only the HTTP/3 part: its two sizes (the docroot, the checks).
    if o.h3_only && !o.sizes_given {
        o.sizes = H3_SIZES.to_vec();
    }
    Ok(o)
}

/// One cell of the matrix.
struct Cell {
    tool: Tool,
    size: u64,
    connections: u32,
    mode: Mode,
    duration: Duration,
    warmup: Option<Duration>,
    /// Which instances of the servers it is measured on.
    proto: Proto,
    /// h2load: streams per connection (-m); h3load and oha: streams per
    /// QUIC connection; 1 for the others.
    streams: u32,
    /// Measured on these servers alone (oha's cross-check of h3load:
    /// staticd; the inetd cell: staticd-inetd and eris); None: on every
    /// server that holds it.
    only: Option<&'static [Kind]>,
}

impl Cell {
    /// Whether `server` is measured in this cell.
    fn runs_on(&self, server: &Server) -> bool {
        server.proto == self.proto
            && server.kind.holds(self.connections)
            && self.only.is_none_or(|kinds| kinds.contains(&server.kind))
    }
}

/// The sizes of a full run: a decade apart, so that every round of every
/// cell fits in 45-50 minutes on two cores (the others stay available
/// with --sizes).
const FULL_SIZES: [u64; 6] = [1, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];

/// The connection counts of a full run (1 and 500 with --connections).
const FULL_CONNECTIONS: [u32; 3] = [50, 2000, 10_000];

/// From this many connections on, the default matrix is keep-alive only:
/// a closing client at 2,000 connections measures mostly connection set-up,
/// which the close cells at 50 connections already do. --connections
/// brings them back.
const MANY: u32 = 1000;

/// The HTTPS cells: keep-alive at these sizes, Connection: close and
/// resumed handshakes at 1 KB, all at 50 connections.
const HTTPS_SIZES: [u64; 2] = [1_000, 1_000_000];
const HTTPS_CONNECTIONS: u32 = 50;

/// The HTTP/2 cells: h2load at 50 connections with this many streams each
/// (others with --h2-streams), at these sizes, over TLS and in the clear.
const H2_STREAMS: u32 = 10;
const H2_SIZES: [u64; 2] = [1_000, 1_000_000];
const H2_CONNECTIONS: u32 = 50;
/// h2load's warm-up is part of its run and makes the connections (TLS
/// handshakes too): at least this long, so that a 1 MB cell with 500
/// streams in flight is past its first responses before it is measured.
const H2_WARMUP: Duration = Duration::from_millis(500);
/// The HTTP/3 cells: h3load at 50 connections with these streams each
/// (others with --h3-streams), at these sizes; oha's cross-check at 1 KB
/// with the first.
const H3_STREAMS: [u32; 2] = [10, 1];
const H3_SIZES: [u64; 2] = [1_000, 1_000_000];
const H3_CONNECTIONS: u32 = 50;
/// oha's cross-check: 1 KB, where oha carried 50 connections with 10
/// streams each (18,000 requests/s in the 2026-12-02 run).
const H3_CROSS_CHECK_SIZE: u64 = 1_000;
/// Idle QUIC connections for the memory measurement: each a Python
/// aioquic handshake of several milliseconds, and all must be open within
/// staticd's 15 s idle timeout (`--keepalive-timeout`) on a loaded machine.
const H3_IDLE_CONNECTIONS: u32 = 500;
/// What an oha run costs beyond its warm-up and measured time: starting
/// it, 50 QUIC handshakes, the settle.
const OHA_PER_RUN_MS: u64 = 400;
/// The same for h3load: 50 QUIC handshakes, the connections drained at the
/// end (tens of milliseconds; h3load::DRAIN at most), reading /proc.
const H3LOAD_PER_RUN_MS: u64 = 250;
/// The h3 cells at 1 MB with more than one stream per connection run this
/// many times the cell time: at about 100 MB/s over h3 here (2026-12-02),
/// 50 x 10 responses of 1 MB in flight take about 5 s each, so a 3 s cell
/// would end before the first of them.
const H3_LARGE_SCALE: f64 = 4.0;
/// The memory measurement: the file the streams held open fetch (if the
/// run has it; otherwise its largest file above the client's 64 KiB
/// window).
const H2_MEMORY_SIZE: u64 = 1_000_000;

/// Cells with many connections run longer: connecting them all takes a
/// while, and large responses to all of them take longer still to finish.
fn duration_scale(connections: u32) -> f64 {
    match connections {
        0..10 => 0.5,
        10..=100 => 1.0,
        101..=1000 => 1.25,
        1001..HUGE => 1.5,
        _ => 2.0,
    }
}

/// From this many connections on, cells are keep-alive only (closing
/// 10,000 connections a second would run the client out of ports and
/// measure TIME_WAIT) and, unless --sizes is given, only for HUGE_SIZES.
const HUGE: u32 = 5000;
const HUGE_SIZES: [u64; 2] = [1_000, 100_000];
/// The least warm-up before such a cell: enough for every connection to
/// have been opened once, so that the server's tables have grown.
const HUGE_WARMUP: Duration = Duration::from_secs(1);

/// The file the idle connections and the start-up runs fetch.
const IDLE_SIZE: u64 = 1_000;

/// Longest wait for a server to go quiet after a load.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);

/// One run: `cell` on `server` (its warm-up, the load, the server's CPU
/// time and memory while it runs).
fn measure(
    server: &mut Server,
    cell: &Cell,
    opts: &Options,
    tls: Option<&tls::TlsFiles>,
) -> Measurement {
    let url = server.url(cell.size);
    let mut m = Measurement {
        tool: cell.tool,
        https: cell.proto.tls(),
        proto: cell.proto,
        streams: cell.proto.multiplexed().then_some(cell.streams),
        cpu_window_seconds: None,
        server: server.name().to_string(),
        size: cell.size,
        connections: cell.connections,
        mode: cell.mode,
        cell_seconds: cell.duration.as_secs_f64(),
        outcome: None,
        error: None,
        rss_kib: 0,
        server_cpu_seconds: 0.0,
        cpu_us_per_request: None,
        client_cpu_seconds: 0.0,
        round: 1,
        udp: None,
    };
    if let Some(why) = server.exited() {
        m.error = Some(format!("server {why}"));
        return m;
    }
    // h3load's TLS client: the harness's own, ALPN h3.
    let h3_tls = match (cell.tool, tls) {
        (Tool::H3load, Some(t)) => Some(t.h3_client()),
        (Tool::H3load, None) => {
            m.error = Some("no certificate".into());
            return m;
        }
        _ => None,
    };
    let run = |duration| Run {
        url: &url,
        connections: cell.connections,
        mode: cell.mode,
        duration,
        threads: opts.client_threads,
        streams: cell.streams,
    };
    let pid = server.pid();
    let ticks = procstat::ticks_per_second();
    if cell.tool == Tool::H2load {
        // Its warm-up is part of its run; the server's CPU time is read
        // at the start and end of the measured part.
        let sampler =
            procstat::RssSampler::start(pid, (cell.duration / 4).max(Duration::from_millis(200)));
        let client_before = procstat::children_cpu_seconds();
        let result = load::h2load(
            &run(cell.duration),
            cell.warmup.unwrap_or(H2_WARMUP),
            ticks,
            &|| procstat::cpu_ticks(pid),
        );
        m.rss_kib = sampler.finish();
        m.client_cpu_seconds = procstat::children_cpu_seconds() - client_before;
        match result {
            Ok(r) => {
                m.server_cpu_seconds = r.window_cpu_seconds;
                m.cpu_window_seconds = Some(r.window_seconds);
                let rps = r.outcome.requests_per_second;
                if rps > 0.0 && r.window_seconds > 0.0 {
                    m.cpu_us_per_request =
                        Some(r.window_cpu_seconds / r.window_seconds * 1e6 / rps);
                }
                m.outcome = Some(r.outcome);
            }
            Err(e) => m.error = Some(e),
        }
        server.settle(SETTLE_LIMIT);
        server.reap_connections();
        if let Some(why) = server.exited() {
            m.error = Some(format!("server {why}"));
        }
        return m;
    }
    // The resuming client keeps its tickets from the warm-up on: a fresh
    // store per server and cell, so that no server is offered another's.
    let resuming = match (cell.tool, tls) {
        (Tool::Resume, Some(t)) => Some(t.client(true)),
        (Tool::Resume, None) => {
            m.error = Some("no certificate".into());
            return m;
        }
        _ => None,
    };
    if let Some(w) = cell.warmup {
        let warm = match (&resuming, &h3_tls) {
            (Some(config), _) => resume::run(&url, cell.connections, w, config).map(|_| ()),
            (_, Some(config)) => h3load(&run(w), cell.size, config).map(|_| ()),
            _ if cell.tool == Tool::Oha => load::oha_warm_up(&run(w)),
            _ => load::warm_up(&run(w)),
        };
        server.settle(SETTLE_LIMIT);
        if let Err(e) = warm {
            m.error = Some(format!("warm-up: {e}"));
            return m;
        }
    }
    // The kernel's UDP drops over an HTTP/3 run (system-wide).
    let udp_before = (cell.proto == Proto::H3)
        .then(procstat::UdpCounters::read)
        .flatten();
    let cpu_before = procstat::cpu_ticks(pid);
    let client_before = procstat::children_cpu_seconds();
    // A few samples per cell: each walks /proc, which costs CPU too.
    let every = (cell.duration / 4).max(Duration::from_millis(200));
    let sampler = procstat::RssSampler::start(pid, every);
    let result = match (cell.tool, &resuming, &h3_tls) {
        (Tool::Resume, Some(config), _) => {
            resume::run(&url, cell.connections, cell.duration, config)
        }
        (Tool::H3load, _, Some(config)) => h3load(&run(cell.duration), cell.size, config),
        (Tool::Ab, _, _) => load::ab(&run(cell.duration)),
        (Tool::Oha, _, _) => load::oha(&run(cell.duration)),
        _ => load::wrk(&run(cell.duration)),
    };
    m.rss_kib = sampler.finish();
    let cpu_after = procstat::cpu_ticks(pid);
    m.client_cpu_seconds = procstat::children_cpu_seconds() - client_before;
    m.server_cpu_seconds = cpu_after.saturating_sub(cpu_before) as f64 / ticks;
    if let (Some(before), Some(after)) = (udp_before, procstat::UdpCounters::read()) {
        m.udp = Some(after.since(&before));
    }
    match result {
        Ok(o) => {
            // An in-process client counts its own CPU time.
            if let Some(own) = o.client_cpu_seconds {
                m.client_cpu_seconds = own;
            }
            if o.requests > 0 {
                m.cpu_us_per_request = Some(m.server_cpu_seconds * 1e6 / o.requests as f64);
            }
            m.outcome = Some(o);
        }
        Err(e) => m.error = Some(e),
    }
    // What is left of this load must not spill into the next server's cell.
    server.reap_connections();
    if let Some(why) = server.exited() {
        m.error = Some(format!("server {why}"));
    }
    m
}

/// h3load's run (h3load.rs), or why there is none: the harness was built
/// without feature http3.
fn h3load(
    run: &Run,
    size: u64,
    tls: &std::sync::Arc<rustls::ClientConfig>,
) -> Result<load::Outcome, String> {
    #[cfg(feature = "http3")]
    return h3load::run(run, size, tls);
    #[cfg(not(feature = "http3"))]
    {
        let _ = (run, size, tls);
        Err("the harness was built without feature http3".into())
    }
}

/// What a run costs beyond its warm-up and measured time: starting the
/// client, the settle, reaping, reading /proc. Measured in short runs here
/// (0.1-0.2 s, on a machine shared with builds).
const PER_RUN_MS: u64 = 150;
/// The same for h2load at 100 KB and more: the settle waits for the
/// responses still in flight on 500 streams when it stops.
const H2_LARGE_PER_RUN_MS: u64 = 650;
/// The settle after a warm-up waits for what the server still has to send
/// to the connections the client dropped: about this many bytes a second
/// here (2,000 connections: 1 MB adds about 1 s a run).
const DRAIN_BYTES_PER_SECOND: f64 = 2e9;
/// Closing many connections a second leaves the server and the kernel
/// work after each run: about this much more a run at 1,000 and more.
const MANY_CLOSE_PER_RUN_MS: u64 = 1000;
/// The same at 10,000 connections: connecting and closing them (and the
/// settle after the warm-up) takes about a second more.
const HUGE_PER_RUN_MS: u64 = 1200;

/// How long the rest of the run will take: the matrix (every round of
/// every cell on every server that holds it), the memory measurements,
/// the start-up series and the compression cell.
fn estimate(opts: &Options, cells: &[Cell], running: &[Server]) -> Duration {
    let per_run = |c: &Cell| {
        let extra = if c.connections >= HUGE {
            HUGE_PER_RUN_MS
        } else if c.tool == Tool::H2load && c.size >= 100_000 {
            H2_LARGE_PER_RUN_MS
        } else if c.tool == Tool::H3load {
            H3LOAD_PER_RUN_MS
        } else if c.tool == Tool::Oha {
            OHA_PER_RUN_MS
        } else {
            PER_RUN_MS
        };
        let drain = if matches!(c.tool, Tool::H2load | Tool::Oha | Tool::H3load) {
            Duration::ZERO
        } else {
            let bytes = f64::from(c.connections) * c.size as f64;
            Duration::from_secs_f64(bytes / DRAIN_BYTES_PER_SECOND).min(SETTLE_LIMIT)
        };
        let closing = if c.mode == Mode::Close && c.connections >= MANY {
            MANY_CLOSE_PER_RUN_MS
        } else {
            0
        };
        c.duration + c.warmup.unwrap_or_default() + drain + Duration::from_millis(extra + closing)
    };
    let holding = |c: &Cell| running.iter().filter(|s| c.runs_on(s)).count() as u32;
    let mut estimate: Duration = cells
        .iter()
        .map(|c| per_run(c) * holding(c) * opts.rounds)
        .sum();
    // Opening them one by one (staticd-inetd: a process each), the idle
    // second, RSS readings, settling.
    for s in running.iter().filter(|s| s.proto.http2()) {
        if opts.h2_connections > 0 {
            let (n, each_us) = match (s.kind, s.https()) {
                (Kind::StaticdInetd, true) => {
                    (opts.h2_connections.min(h2::INETD_CONNECTIONS), 60_000)
                }
                (Kind::StaticdInetd, false) => {
                    (opts.h2_connections.min(h2::INETD_CONNECTIONS), 5_000)
                }
                (_, true) => (opts.h2_connections, 1_500),
                (_, false) => (opts.h2_connections, 700),
            };
            estimate += Duration::from_micros(u64::from(n) * each_us) + Duration::from_secs(2);
        }
    }
    if opts.h3_idle_connections > 0 {
        // aioquic: a few milliseconds a handshake, in Python.
        let n = running.iter().filter(|s| s.proto == Proto::H3).count() as u32;
        estimate += (Duration::from_micros(u64::from(opts.h3_idle_connections) * 6000)
            + Duration::from_secs(3))
            * n;
    }
    if opts.idle_connections > 0 {
        for s in running
            .iter()
            .filter(|s| !s.proto.http2() && s.proto != Proto::H3)
        {
            let (n, each_us) = match (s.kind, s.https()) {
                (Kind::StaticdInetd, false) => {
                    (opts.idle_connections.min(idle::INETD_CONNECTIONS), 3000)
                }
                (Kind::StaticdInetd, true) => (
                    opts.idle_connections.min(idle::INETD_TLS_CONNECTIONS),
                    60_000,
                ),
                // A full handshake each.
                (_, true) => (opts.idle_connections, 600),
                _ => (opts.idle_connections, 150),
            };
            estimate += Duration::from_micros(u64::from(n) * each_us) + Duration::from_secs(2);
        }
    }
    // Four series of runs of a few milliseconds each.
    if opts.cleartext() {
        estimate += Duration::from_millis(u64::from(opts.startup_runs) * 8);
    }
    // The inetd cell: staticd-inetd and eris in every round.
    if opts.matrix && opts.cleartext() {
        estimate += (opts.duration + opts.warmup + Duration::from_millis(PER_RUN_MS))
            * INETD_PAIR.len() as u32
            * opts.rounds;
    }
    // The compression cell: one run per cleartext server but the ceiling.
    if opts.matrix && opts.cleartext() {
        let each = opts
            .duration
            .mul_f64(duration_scale(compressed::CONNECTIONS))
            + opts.warmup
            + Duration::from_millis(PER_RUN_MS);
        let n = running.iter().filter(|s| compressed::runs_on(s)).count() as u32;
        estimate += each * n;
    }
    estimate
}

/// What the whole run works with: when it started, the machine's limits,
/// the document root, the copy of staticd the servers run, the
/// certificate.
struct Ground {
    started: Instant,
    started_unix: u64,
    fd_limit: u64,
    /// Whether the ab cells run (asked for, and ab is installed).
    ab: bool,
    /// The binary cargo built, and this harness (which runs the ceiling).
    built: PathBuf,
    harness: PathBuf,
    cores: usize,
    docroot: docroot::Docroot,
    staticd: PathBuf,
    max_connections: u32,
    tls_files: Option<tls::TlsFiles>,
}

impl Ground {
    fn setup<'a>(&'a self, opts: &'a Options) -> Setup<'a> {
        Setup {
            docroot: &self.docroot,
            sizes: &opts.sizes,
            cores: self.cores,
            staticd: &self.staticd,
            harness: &self.harness,
            fd_limit: self.fd_limit,
            max_connections: self.max_connections,
            tls: self.tls_files.as_ref(),
        }
    }
}

/// What is measured: the servers that started, the cells, and the parts
/// skipped (with why).
struct Plan {
    running: Vec<Server>,
    cells: Vec<Cell>,
    skipped: Vec<Skipped>,
    h3: bool,
    estimated: Duration,
}

/// Which instances (server and protocol) to start, and which parts cannot
/// run here.
struct Lineup {
    instances: Vec<(Kind, Proto)>,
    skipped: Vec<Skipped>,
    h3: bool,
    /// oha is installed: the h3 cross-check cell runs.
    oha: bool,
    h2load: bool,
}

/// What was measured, in the order of the run.
struct Measured {
    idle_memory: Vec<idle::IdleMemory>,
    start_up: Vec<startup::Startup>,
    measurements: Vec<Measurement>,
    compressed: Vec<compressed::Compressed>,
    inetd: Option<report::InetdCell>,
    interrupted: bool,
}

/// The run in its three steps: plan what to measure (the servers started,
/// the cells), measure it, report it (table.txt, results.json, charts).
fn run(opts: &Options) -> Result<(), String> {
    let ground = prepare(opts)?;
    let setup = ground.setup(opts);
    let mut ports = servers::Ports::new();
    let mut plan = plan(opts, &ground, &setup, &mut ports)?;
    let measured = measure_all(opts, &ground, &setup, &mut ports, &mut plan);
    report(opts, &ground, plan, measured)
}

/// The tools, the limits, the document root, the copy of staticd and the
/// certificate: everything before the first server starts.
fn prepare(opts: &Options) -> Result<Ground, String> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let fd_limit = machine::raise_fd_limit();
    if let Some(why) = load::not_installed("wrk", "wrk") {
        return Err(why);
    }
    let mut ab = opts.ab;
    if ab {
        if let Some(why) = load::not_installed("ab", "apache2-utils") {
            eprintln!("compare: {why}: no ab pass");
            ab = false;
        }
    }
    // Cargo builds the binary for benches with the bench profile, which is
    // the release profile (LTO, one codegen unit).
    let built = PathBuf::from(env!("CARGO_BIN_EXE_staticd"));
    let harness =
        std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    if let Err(e) = reaper::start(&harness) {
        eprintln!("compare: {e}; servers' workers may outlive a harness killed with SIGKILL");
    }
    let cores = machine::cores();

    println!(
        "compare: writing {} file(s) of random bytes",
        opts.sizes.len()
    );
    let docroot = docroot::Docroot::create(&opts.sizes).map_err(|e| format!("docroot: {e}"))?;
    reaper::remove_later(docroot.scratch());
    let staticd = docroot.keep_copy(&built, "staticd")?;
    let max_connections = max_connections(opts);
    if u64::from(max_connections) + 100 > fd_limit {
        eprintln!(
            "compare: open-file limit {fd_limit} is too low for {max_connections} connections; expect errors"
        );
    }
    let tls_files = if opts.https_part() || opts.h2_part() || opts.h3_part() {
        Some(tls::write_files(&docroot.scratch().join("tls"))?)
    } else {
        None
    };
    Ok(Ground {
        started,
        started_unix,
        fd_limit,
        ab,
        built,
        harness,
        cores,
        docroot,
        staticd,
        max_connections,
        tls_files,
    })
}

/// The most connections any server will hold at once: the largest wrk
/// concurrency (if the matrix runs) or the idle-memory count.
fn max_connections(opts: &Options) -> u32 {
    opts.connections
        .iter()
        .copied()
        .filter(|_| opts.matrix)
        .chain([opts.idle_connections])
        .max()
        .unwrap_or(0)
}

/// Starts the servers and lays out the cells, and says how long the rest
/// will take.
fn plan(
    opts: &Options,
    ground: &Ground,
    setup: &Setup,
    ports: &mut servers::Ports,
) -> Result<Plan, String> {
    println!(
        "compare: starting servers on 127.0.0.1 (staticd: {})",
        ground.built.display()
    );
    let Lineup {
        instances,
        mut skipped,
        h3,
        oha,
        h2load,
    } = lineup(opts, ground.tls_files.as_ref());
    let running = start_servers(opts, instances, setup, ports, &mut skipped)?;
    let cells = plan_cells(opts, ground.ab, (h3, oha), h2load);
    let estimated = ground.started.elapsed() + estimate(opts, &cells, &running);
    println!(
        "compare: {} cell(s) x {} round(s) x {} server(s), plus idle memory and start-up: about {} in all, estimated (started servers stay up, idle, while the others are measured)",
        cells.len(),
        opts.rounds,
        running.len(),
        report::clock(estimated)
    );
    Ok(Plan {
        running,
        cells,
        skipped,
        h3,
        estimated,
    })
}

/// The instances the options ask for, and the parts whose tools are
/// missing (HTTP/3 in a harness built without it, its cross-check
/// without oha, HTTP/2 cells without h2load).
fn lineup(opts: &Options, tls_files: Option<&tls::TlsFiles>) -> Lineup {
    let mut instances: Vec<(Kind, Proto)> = Vec::new();
    if opts.cleartext() {
        instances.extend(servers::ALL.iter().map(|&k| (k, Proto::Http)));
    }
    if let Some(t) = tls_files {
        println!(
            "compare: HTTPS and h2 servers get one certificate: {}",
            t.about
        );
    }
    let mut parts = Vec::new();
    if opts.https_part() {
        parts.push(Proto::Https);
    }
    if opts.h2_part() {
        parts.extend([Proto::H2, Proto::H2c]);
    }
    let mut skipped = Vec::new();
    let h3 = opts.h3_part() && cfg!(feature = "http3");
    if opts.h3_part() && !h3 {
        let reason = "the harness (and staticd) were built without feature http3".to_string();
        println!("skipped: HTTP/3 cells: {reason}");
        skipped.push(Skipped {
            server: "HTTP/3 cells".into(),
            reason,
        });
    }
    let oha = h3 && opts.matrix && load::oha_path().is_some();
    if h3 && opts.matrix && !oha {
        let reason = format!(
            "oha is not installed (not on PATH, not at {}; cargo install oha --features http3 --locked --root /opt/oha)",
            load::OHA_FALLBACK
        );
        println!("skipped: HTTP/3 cross-check with oha: {reason}");
        skipped.push(Skipped {
            server: "HTTP/3 cross-check (oha)".into(),
            reason,
        });
    }
    if h3 {
        parts.push(Proto::H3);
        // The peers without HTTP/3 here: one line each, n/a in the table.
        for &k in servers::ALL.iter().filter(|k| k.is_peer()) {
            if let Err(why) = k.speaks(Proto::H3) {
                if opts
                    .servers
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|n| n == k.name()))
                {
                    skipped.push(Skipped {
                        server: format!("{}{}", k.name(), Proto::H3.suffix()),
                        reason: why.into(),
                    });
                }
            }
        }
    }
    for proto in parts {
        instances.extend(
            servers::ALL
                .iter()
                .filter(|k| k.speaks(proto).is_ok())
                .filter(|&&k| !opts.companion_only(proto) || k == Kind::Staticd)
                .filter(|_| !(opts.companion_only(proto) && proto == Proto::H2c))
                .map(|&k| (k, proto)),
        );
    }
    let h2load = opts.h2_part() && load::available("h2load");
    if opts.h2_part() && !h2load {
        let reason = "h2load is not installed (apt-get install nghttp2-client)".to_string();
        println!("compare: {reason}: no HTTP/2 cells (the memory measurement still runs)");
        skipped.push(Skipped {
            server: "HTTP/2 cells".into(),
            reason,
        });
    }
    Lineup {
        instances,
        skipped,
        h3,
        oha,
        h2load,
    }
}

/// Starts every instance whose server is installed; a peer that is not is
/// skipped with one line. Fails without staticd in the clear.
fn start_servers(
    opts: &Options,
    instances: Vec<(Kind, Proto)>,
    setup: &Setup,
    ports: &mut servers::Ports,
    skipped: &mut Vec<Skipped>,
) -> Result<Vec<Server>, String> {
    let mut running: Vec<Server> = Vec::new();
    // A peer that is not installed is one line, whatever its instances.
    let mut missing: Vec<Kind> = Vec::new();
    for (kind, proto) in instances {
        if let Some(only) = &opts.servers {
            if !only.iter().any(|n| n == kind.name()) {
                continue;
            }
        }
        if missing.contains(&kind) {
            continue;
        }
        if let Some(reason) = kind.missing() {
            eprintln!("skipped: {}: {reason}", kind.name());
            missing.push(kind);
            skipped.push(Skipped {
                server: kind.name().into(),
                reason,
            });
            continue;
        }
        if stop::stopping() {
            return Err("interrupted".into());
        }
        let label = format!("{}{}", kind.name(), proto.suffix());
        match servers::start(kind, setup, ports, proto) {
            Ok(s) => {
                println!(
                    "  {:<22} ready: {} ({}{})",
                    label,
                    s.url(opts.sizes[0]),
                    s.about.version,
                    s.about
                        .tls
                        .as_deref()
                        .map_or(String::new(), |t| format!("; {t}"))
                );
                running.push(s);
            }
            // Without staticd in the clear there is nothing to compare;
            // over HTTPS or HTTP/2 the other parts can still run.
            Err(reason) if kind == Kind::Staticd && proto == Proto::Http => {
                return Err(format!("staticd did not start: {reason}"));
            }
            Err(reason) => {
                println!("  {label:<22} SKIPPED: {reason}");
                skipped.push(Skipped {
                    server: label,
                    reason,
                });
            }
        }
    }
    if running.is_empty() {
        return Err("no server started".into());
    }

    Ok(running)
}

/// The cells of the matrix, part by part, in the order they run.
fn plan_cells(opts: &Options, ab: bool, h3: (bool, bool), h2load: bool) -> Vec<Cell> {
    let mut cells = Vec::new();
    wrk_cells(opts, &mut cells);
    ab_cells(opts, ab, &mut cells);
    https_cells(opts, &mut cells);
    h2_cells(opts, h2load, &mut cells);
    h3_cells(opts, h3, &mut cells);
    cells
}

/// HTTP/1.1 in the clear under wrk: every size, connection count and mode
/// (fewer at many connections).
fn wrk_cells(opts: &Options, cells: &mut Vec<Cell>) {
    for &size in opts
        .sizes
        .iter()
        .filter(|_| opts.matrix && opts.cleartext())
    {
        for &connections in &opts.connections {
            let huge = connections >= HUGE;
            if huge && !opts.sizes_given && !HUGE_SIZES.contains(&size) {
                continue;
            }
            for &mode in &opts.modes {
                let many = connections >= MANY && !opts.connections_given;
                if (huge || many) && mode != Mode::KeepAlive {
                    continue;
                }
                let warmup = if huge {
                    opts.warmup.max(HUGE_WARMUP)
                } else {
                    opts.warmup
                };
                cells.push(Cell {
                    tool: Tool::Wrk,
                    size,
                    connections,
                    mode,
                    duration: opts.duration.mul_f64(duration_scale(connections)),
                    warmup: Some(warmup),
                    proto: Proto::Http,
                    streams: 1,
                    only: None,
                });
            }
        }
    }
}

/// ab in the clear (with --ab): every size and mode.
fn ab_cells(opts: &Options, ab: bool, cells: &mut Vec<Cell>) {
    if ab && opts.matrix && opts.cleartext() {
        for &size in &opts.sizes {
            for &mode in &opts.modes {
                cells.push(Cell {
                    tool: Tool::Ab,
                    size,
                    connections: opts.ab_connections,
                    mode,
                    duration: opts.ab_duration,
                    warmup: None,
                    proto: Proto::Http,
                    streams: 1,
                    only: None,
                });
            }
        }
    }
}

/// HTTPS: keep-alive, full handshakes and resumed ones.
fn https_cells(opts: &Options, cells: &mut Vec<Cell>) {
    if opts.https_part() && opts.matrix {
        let cell = |tool, size, mode| Cell {
            tool,
            size,
            connections: HTTPS_CONNECTIONS,
            mode,
            duration: opts.duration.mul_f64(duration_scale(HTTPS_CONNECTIONS)),
            warmup: Some(opts.warmup),
            proto: Proto::Https,
            streams: 1,
            only: None,
        };
        if opts.modes.contains(&Mode::KeepAlive) {
            for &size in HTTPS_SIZES.iter().filter(|s| opts.sizes.contains(s)) {
                cells.push(cell(Tool::Wrk, size, Mode::KeepAlive));
            }
        }
        // --h3-only compares with staticd's keep-alive cells alone.
        if opts.modes.contains(&Mode::Close)
            && opts.sizes.contains(&IDLE_SIZE)
            && !opts.companion_only(Proto::Https)
        {
            cells.push(cell(Tool::Wrk, IDLE_SIZE, Mode::Close));
            cells.push(cell(Tool::Resume, IDLE_SIZE, Mode::Close));
        }
    }
}

/// h2load over h2 and h2c.
fn h2_cells(opts: &Options, h2load: bool, cells: &mut Vec<Cell>) {
    if h2load && opts.matrix && opts.modes.contains(&Mode::KeepAlive) {
        for proto in [Proto::H2, Proto::H2c] {
            for &m in &opts.h2_streams {
                for &size in H2_SIZES.iter().filter(|s| opts.sizes.contains(s)) {
                    if opts.companion_only(proto) && proto == Proto::H2c {
                        continue;
                    }
                    cells.push(Cell {
                        tool: Tool::H2load,
                        size,
                        connections: H2_CONNECTIONS,
                        mode: Mode::KeepAlive,
                        duration: opts.duration.mul_f64(duration_scale(H2_CONNECTIONS)),
                        warmup: Some(opts.warmup.max(H2_WARMUP)),
                        proto,
                        streams: m,
                        only: None,
                    });
                }
            }
        }
    }
}

/// HTTP/3: h3load in every cell; oha (if installed) in the first 1 KB cell
/// again, on staticd alone, as a cross-check of the two clients' figures.
fn h3_cells(opts: &Options, (h3, oha): (bool, bool), cells: &mut Vec<Cell>) {
    if h3 && opts.matrix && opts.modes.contains(&Mode::KeepAlive) {
        for &p in &opts.h3_streams {
            for &size in H3_SIZES.iter().filter(|s| opts.sizes.contains(s)) {
                // 500 responses of 1 MB in flight at once take seconds
                // each to finish: a cell of the usual length would see
                // hardly any end (see H3_LARGE_SCALE).
                let scale = if size >= 1_000_000 && p > 1 {
                    H3_LARGE_SCALE
                } else {
                    1.0
                };
                cells.push(Cell {
                    tool: Tool::H3load,
                    size,
                    connections: H3_CONNECTIONS,
                    mode: Mode::KeepAlive,
                    duration: opts
                        .duration
                        .mul_f64(duration_scale(H3_CONNECTIONS) * scale),
                    warmup: Some(opts.warmup),
                    proto: Proto::H3,
                    streams: p,
                    only: None,
                });
            }
        }
        if oha && opts.sizes.contains(&H3_CROSS_CHECK_SIZE) {
            cells.push(Cell {
                tool: Tool::Oha,
                size: H3_CROSS_CHECK_SIZE,
                connections: H3_CONNECTIONS,
                mode: Mode::KeepAlive,
                duration: opts.duration.mul_f64(duration_scale(H3_CONNECTIONS)),
                warmup: Some(opts.warmup),
                proto: Proto::H3,
                streams: opts.h3_streams[0],
                only: Some(&[Kind::Staticd]),
            });
        }
    }
}

/// The idle connections and the start-up runs fetch 1 KB if it is there.
fn small_size(opts: &Options) -> u64 {
    if opts.sizes.contains(&IDLE_SIZE) {
        IDLE_SIZE
    } else {
        opts.sizes[0]
    }
}

/// Measures the plan: memory per connection, start-up, the matrix, the
/// compression cell, in that order; an interruption skips what is left.
fn measure_all(
    opts: &Options,
    ground: &Ground,
    setup: &Setup,
    ports: &mut servers::Ports,
    plan: &mut Plan,
) -> Measured {
    let small = small_size(opts);
    let idle_memory = measure_memory(opts, ground.started, setup, ports, &mut plan.running, small);
    let start_up = measure_startup(opts, ground, &plan.running, small);
    let (measurements, interrupted) = measure_matrix(opts, ground, &plan.cells, &mut plan.running);
    let compressed = measure_compressed(opts, ground.started, &mut plan.running, interrupted);
    let inetd = if interrupted {
        None
    } else {
        measure_inetd(opts, ground, setup, ports, plan)
    };
    let interrupted = interrupted || stop::stopping();
    if interrupted {
        println!("compare: interrupted; stopping servers and writing partial results");
    }
    Measured {
        idle_memory,
        start_up,
        measurements,
        compressed,
        inetd,
        interrupted,
    }
}

/// The file the HTTP/2 streams fetch: 1 MB if it is there, or the largest
/// above the client's window.
fn h2_memory_size(opts: &Options) -> Option<u64> {
    if opts.sizes.contains(&H2_MEMORY_SIZE) {
        Some(H2_MEMORY_SIZE)
    } else {
        opts.sizes.iter().copied().filter(|&s| s > 65_535).max()
    }
}

/// Memory per idle connection (HTTP/1.1 and h3) and per HTTP/2 connection
/// with open streams, each server then restarted fresh for the matrix.
fn measure_memory(
    opts: &Options,
    started: Instant,
    setup: &Setup,
    ports: &mut servers::Ports,
    running: &mut [Server],
    small: u64,
) -> Vec<idle::IdleMemory> {
    let h2_memory_size = h2_memory_size(opts);
    let mut idle_memory = Vec::new();
    if opts.idle_connections > 0 && running.iter().any(|s| !s.proto.http2()) {
        println!(
            "compare: idle memory: {} keep-alive connections per server (staticd-inetd at most {}, over HTTPS {}), each served one GET of {}, then idle {} s",
            opts.idle_connections,
            idle::INETD_CONNECTIONS,
            idle::INETD_TLS_CONNECTIONS,
            docroot::label(small),
            idle::IDLE_WAIT.as_secs_f64()
        );
    }
    // Said when the first HTTP/2 instance comes (they come last).
    let mut h2_said = false;
    for server in running.iter_mut() {
        if stop::stopping() {
            break;
        }
        let r = if server.proto == Proto::H3 {
            if opts.h3_idle_connections == 0 {
                continue;
            }
            idle::measure_h3(server, small, opts.h3_idle_connections)
        } else if server.proto.http2() {
            if !h2_said && opts.h2_connections > 0 {
                h2_said = true;
                match h2_memory_size {
                    Some(size) => println!(
                        "compare: HTTP/2 memory: {} connections per server (staticd-inetd at most {}), each with {} GETs of {} in flight, unread, 64 KiB windows, then idle {} s",
                        opts.h2_connections,
                        h2::INETD_CONNECTIONS,
                        opts.h2_open_streams,
                        docroot::label(size),
                        idle::IDLE_WAIT.as_secs_f64()
                    ),
                    None => println!(
                        "compare: HTTP/2 memory: no file above 64 KiB in --sizes, not measured"
                    ),
                }
            }
            match h2_memory_size {
                Some(size) if opts.h2_connections > 0 => {
                    h2::measure(server, size, opts.h2_connections, opts.h2_open_streams)
                }
                _ => continue,
            }
        } else if opts.idle_connections > 0 {
            idle::measure(server, small, opts.idle_connections)
        } else {
            continue;
        };
        show_memory(server, &r, started);
        idle_memory.push(r);
        // The matrix gets a fresh process: 10,000 connections leave
        // memory behind that would show in every RSS column.
        match servers::start(server.kind, setup, ports, server.proto) {
            Ok(fresh) => *server = fresh,
            Err(reason) => println!(
                "  {:<22} not restarted after the idle measurement: {reason}",
                server.label()
            ),
        }
    }

    idle_memory
}

/// One server's memory measurement, as a progress line.
fn show_memory(server: &Server, r: &idle::IdleMemory, started: Instant) {
    println!(
        "  {:<22} {}  ({} of {} open{}; RSS {:.1} -> {:.1} MB; opened in {:.1} s){}  [{}]",
        server.label(),
        r.kib_per_connection
            .map_or("-".into(), |k| format!("{k:+.2} KiB each")),
        r.still_open,
        r.connections,
        r.streams
            .map_or(String::new(), |n| format!(", {n} streams each")),
        r.rss_before_kib as f64 / 1024.0,
        r.rss_after_kib as f64 / 1024.0,
        r.open_seconds,
        r.error
            .as_deref()
            .map_or(String::new(), |e| format!(" ERROR: {e}")),
        report::clock(started.elapsed())
    );
}

/// Process start (inetd-spawn, tcpserver) and connect to first response
/// byte, against /bin/true.
fn measure_startup(
    opts: &Options,
    ground: &Ground,
    running: &[Server],
    small: u64,
) -> Vec<startup::Startup> {
    let mut start_up = Vec::new();
    if opts.startup_runs > 0 && opts.cleartext() && !stop::stopping() {
        let size = small;
        println!(
            "compare: process start to first response byte, {} runs each, GET {}",
            opts.startup_runs,
            docroot::label(size)
        );
        let runs = opts.startup_runs;
        let mut series = vec![startup::inetd_spawn(
            &ground.staticd,
            &ground.docroot.root(),
            size,
            runs,
        )];
        for (kind, name, what) in [
            (
                Kind::StaticdInetd,
                "tcpserver",
                "tcpserver + staticd --inetd: connect to first response byte (accept, fork, exec, serve)",
            ),
            (
                Kind::Staticd,
                "standalone",
                "staticd standalone, new connection: connect to first response byte (no process start)",
            ),
        ] {
            if let Some(s) = running
                .iter()
                .find(|s| s.kind == kind && s.proto == Proto::Http)
            {
                series.push(startup::connect_first_byte(
                    name,
                    what,
                    &s.url(size),
                    size,
                    runs,
                ));
            }
        }
        series.push(startup::bin_true(runs));
        for r in &series {
            println!(
                "  {:<12} min {}  p50 {}  p99 {}{}",
                r.name,
                report::micros(r.min_us),
                report::micros(r.p50_us),
                report::micros(r.p99_us),
                r.error
                    .as_deref()
                    .map_or(String::new(), |e| format!("  ERROR: {e}"))
            );
        }
        start_up = series;
    }

    start_up
}

/// Every round of every cell on every server that holds it; false when
/// interrupted.
fn measure_matrix(
    opts: &Options,
    ground: &Ground,
    cells: &[Cell],
    running: &mut [Server],
) -> (Vec<Measurement>, bool) {
    let started = ground.started;
    let mut measurements = Vec::new();
    let mut interrupted = false;
    let rounds = opts.rounds as usize;
    'cells: for (i, cell) in cells.iter().enumerate() {
        let what = cell_label(cell);
        let holding: Vec<usize> = (0..running.len())
            .filter(|&j| cell.runs_on(&running[j]))
            .collect();
        // Round r runs every server once before round r + 1 starts, so
        // that each server's rounds are spread over the cell's time; who
        // goes first rotates per round and per cell, so drift of the
        // machine hits every server alike.
        for round in 0..rounds {
            let mut line = format!("[{:>3}/{}] ", i + 1, cells.len());
            if rounds > 1 {
                line.push_str(&format!("r{}/{rounds} ", round + 1));
            }
            line.push_str(&what);
            let mut results = Vec::new();
            for k in 0..holding.len() {
                if stop::stopping() {
                    interrupted = true;
                    break 'cells;
                }
                let server = &mut running[holding[(i * rounds + round + k) % holding.len()]];
                let mut m = measure(server, cell, opts, ground.tls_files.as_ref());
                m.round = round as u32 + 1;
                results.push(m);
            }
            // Table order; eris, in no table of the matrix, after the rest.
            results.sort_by_key(|m| {
                servers::ALL
                    .iter()
                    .position(|k| k.name() == m.server)
                    .unwrap_or(servers::ALL.len())
            });
            for m in &results {
                let shown = match &m.outcome {
                    Some(o) if o.error_count() > 0 => {
                        format!("{}!", report::compact(o.requests_per_second))
                    }
                    Some(o) => report::compact(o.requests_per_second),
                    None => "failed".into(),
                };
                line.push_str(&format!("  {} {}", m.server, shown));
            }
            println!("{line}  [{}]", report::clock(started.elapsed()));
            measurements.extend(results);
        }
    }
    (measurements, interrupted)
}

/// A cell in a progress line: "wrk h2 m=10   1 KB c=50   keep-alive".
fn cell_label(cell: &Cell) -> String {
    format!(
        "{:<3}{} {:>6} c={:<4} {:<10}",
        match cell.tool {
            Tool::Wrk => "wrk",
            Tool::Ab => "ab",
            Tool::Resume => "tls-resume",
            Tool::H2load => "h2load",
            Tool::Oha => "oha",
            Tool::H3load => "h3load",
        },
        match (cell.proto, cell.tool) {
            (Proto::Https, Tool::Wrk) => " https".to_string(),
            (Proto::H3, _) => format!(" h3 p={}", cell.streams),
            (Proto::H2 | Proto::H2c, _) => format!(
                " {} m={}",
                if cell.proto == Proto::H2 { "h2" } else { "h2c" },
                cell.streams
            ),
            _ => String::new(),
        },
        docroot::label(cell.size),
        cell.connections,
        cell.mode.label()
    )
}

/// The compression cell on every cleartext server but the ceiling.
fn measure_compressed(
    opts: &Options,
    started: Instant,
    running: &mut [Server],
    interrupted: bool,
) -> Vec<compressed::Compressed> {
    let mut compressed_cells = Vec::new();
    if opts.matrix && opts.cleartext() && !interrupted {
        println!(
            "compare: {} KB JavaScript with Accept-Encoding: {}, wrk keep-alive c={}",
            script::SIZE / 1000,
            compressed::ACCEPT_ENCODING,
            compressed::CONNECTIONS
        );
        for server in running.iter_mut().filter(|s| compressed::runs_on(s)) {
            if stop::stopping() {
                break;
            }
            let duration = opts
                .duration
                .mul_f64(duration_scale(compressed::CONNECTIONS));
            let c = compressed::measure(server, duration, opts.warmup, opts.client_threads);
            println!(
                "  {:<22} {} {}  {} req/s, {} B/response{}  [{}]",
                server.label(),
                c.content_encoding.as_deref().unwrap_or("identity"),
                c.body_bytes.map_or("-".into(), |b| b.to_string()),
                c.requests_per_second.map_or("-".into(), report::compact),
                c.bytes_per_response
                    .map_or("-".into(), |b| format!("{b:.0}")),
                c.error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" ERROR: {e}")),
                report::clock(started.elapsed())
            );
            compressed_cells.push(c);
        }
    }
    compressed_cells
}

/// The inetd cell's servers: staticd --inetd and eris, fnord's maintained
/// fork, both under tcpserver.
const INETD_PAIR: [Kind; 2] = [Kind::StaticdInetd, Kind::Eris];
/// Its clients, as seed table 1 (fnord's shoot-out): ab -c 50.
const INETD_CONNECTIONS: u32 = 50;

/// The inetd cell (with the cleartext matrix): staticd-inetd against eris
/// under tcpserver, ab without keep-alive on the small file, in the run's
/// rounds. eris is started for it alone and stopped after: it is no peer
/// of the matrix. None when it cannot run; a skip line says why (no line
/// when --servers leaves eris out, or staticd-inetd has its own).
fn measure_inetd(
    opts: &Options,
    ground: &Ground,
    setup: &Setup,
    ports: &mut servers::Ports,
    plan: &mut Plan,
) -> Option<report::InetdCell> {
    let named = opts
        .servers
        .as_ref()
        .is_none_or(|only| only.iter().any(|n| n == Kind::Eris.name()));
    let inetd_runs = plan
        .running
        .iter()
        .any(|s| s.kind == Kind::StaticdInetd && s.proto == Proto::Http);
    if !opts.matrix || !opts.cleartext() || !named || !inetd_runs || stop::stopping() {
        return None;
    }
    let started = if let Some(why) = load::not_installed("ab", "apache2-utils") {
        Err(why)
    } else if let Some(why) = Kind::Eris.missing() {
        Err(why)
    } else {
        servers::start(Kind::Eris, setup, ports, Proto::Http)
            .map_err(|why| format!("eris did not start: {why}"))
    };
    let eris = match started {
        Ok(eris) => eris,
        Err(reason) => {
            println!("skipped: inetd cell: {reason}");
            plan.skipped.push(Skipped {
                server: "inetd cell (eris)".into(),
                reason,
            });
            return None;
        }
    };
    let size = small_size(opts);
    println!(
        "compare: inetd cell: staticd-inetd against {}, ab -c {INETD_CONNECTIONS} without keep-alive, {}",
        eris.about.version,
        docroot::label(size)
    );
    let about = eris.about.clone();
    plan.running.push(eris);
    let cell = Cell {
        tool: Tool::Ab,
        size,
        connections: INETD_CONNECTIONS,
        mode: Mode::Close,
        duration: opts.duration,
        warmup: Some(opts.warmup),
        proto: Proto::Http,
        streams: 1,
        only: Some(&INETD_PAIR),
    };
    let (measurements, _) = measure_matrix(opts, ground, &[cell], &mut plan.running);
    // Stopped now: the report's tables are the matrix's servers'.
    plan.running.pop();
    Some(report::InetdCell {
        eris: about,
        summaries: report::summarize(&measurements),
        measurements,
    })
}

/// Stops the servers and writes table.txt, results.json and the charts.
fn report(opts: &Options, ground: &Ground, plan: Plan, measured: Measured) -> Result<(), String> {
    let Plan {
        running,
        skipped,
        h3,
        estimated,
        ..
    } = plan;
    let Measured {
        idle_memory,
        start_up,
        measurements,
        compressed,
        inetd,
        interrupted,
    } = measured;
    let started = ground.started;
    let descriptions = running.iter().map(|s| s.about.clone()).collect();
    // Stop every server before writing (and before the docroot goes).
    drop(running);
    let mut report = Report {
        started_unix: ground.started_unix,
        total_seconds: started.elapsed().as_secs_f64(),
        interrupted,
        host: machine::host(),
        software: machine::software(&std::env::args().skip(1).collect::<Vec<_>>()),
        settings: settings(opts, ground, h3, estimated),
        servers: descriptions,
        skipped,
        summaries: report::summarize(&measurements),
        measurements,
        idle_memory,
        startup: start_up,
        compressed,
        inetd,
        targets: Vec::new(),
        h3_cross_check: Vec::new(),
    };
    report.h3_cross_check = report::cross_check(&report.summaries);
    report.targets = targets::rows(&report);
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let mut table = report.table();
    targets::table(&mut table, &report.targets);
    let table_path = opts.out.join("table.txt");
    std::fs::write(&table_path, &table).map_err(|e| format!("{}: {e}", table_path.display()))?;
    report.write_json(&opts.out.join("results.json"))?;
    let charts = report.write_charts(&opts.out).unwrap_or_else(|e| {
        eprintln!("compare: chart: {e}");
        Vec::new()
    });
    println!("\n{table}");
    let mut written = vec!["table.txt".to_string(), "results.json".to_string()];
    written.extend(charts);
    println!(
        "compare: {} in {} (estimated {}); wrote {}/{{{}}}",
        if interrupted { "interrupted" } else { "done" },
        report::clock(started.elapsed()),
        report::clock(estimated),
        opts.out.display(),
        written.join(",")
    );
    if interrupted {
        return Err("interrupted".into());
    }
    Ok(())
}

/// The run's settings, as results.json records them.
fn settings(opts: &Options, ground: &Ground, h3: bool, estimated: Duration) -> Settings {
    Settings {
        quick: opts.quick,
        sizes: opts.sizes.clone(),
        connections: opts.connections.clone(),
        modes: opts.modes.clone(),
        duration_seconds: opts.duration.as_secs_f64(),
        warmup_seconds: opts.warmup.as_secs_f64(),
        rounds: opts.rounds,
        estimated_seconds: estimated.as_secs_f64(),
        client_threads: opts.client_threads,
        ab: ground.ab,
        ab_connections: opts.ab_connections,
        ab_duration_seconds: opts.ab_duration.as_secs_f64(),
        fd_limit: ground.fd_limit,
        idle_connections: opts.idle_connections,
        startup_runs: opts.startup_runs,
        https: opts.https_part(),
        https_only: opts.https_only,
        h2: opts.h2_part(),
        h2_only: opts.h2_only,
        h2_streams: opts.h2_streams.clone(),
        h2_connections: opts.h2_connections,
        h2_open_streams: opts.h2_open_streams,
        h3,
        h3_only: opts.h3_only,
        h3_streams: opts.h3_streams.clone(),
        h3_idle_connections: opts.h3_idle_connections,
        certificate: ground.tls_files.as_ref().map(|t| t.about.clone()),
    }
}

fn main() {
    // cargo runs a bench with LD_LIBRARY_PATH naming its target and
    // toolchain directories; every program the harness starts would inherit
    // it, and the loader of each dynamically linked one (eris, nginx,
    // staticd built by default) would look for libc in each of them first:
    // 44 failed opens, about 130 us of every start here, which a statically
    // linked program does not pay. No super-server or service manager sets
    // it. Removed while the harness is one thread, before anything starts.
    std::env::remove_var("LD_LIBRARY_PATH");
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(ceiling::FLAG) {
        ceiling::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(reaper::FLAG) {
        reaper::main();
    }
    if args.iter().any(|a| a == seed::FLAG) {
        seed::main(&args);
    }
    if args.iter().any(|a| a == inetd_cost::FLAG) {
        inetd_cost::main(&args);
    }
    let opts = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("compare: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    stop::install_signal_handlers();
    if let Err(e) = run(&opts) {
        eprintln!("compare: {e}");
        std::process::exit(1);
    }
}
