//! The classic comparisons, each with its original method: which servers
//! are its columns, which cells its rows, and what it says about what
//! could not be run. Tables 1 to 3 had nginx, the modern server of their
//! day: Caddy and static-web-server, today's, stand beside it. Tables 4
//! and 4b compare caches (and Hitch) with staticd alone: no web server
//! peer there to stand beside.

use std::net::SocketAddr;
use std::time::Duration;

use super::accelerators;
use super::pool::{Pool, Spec, Target};
use super::table::{Column, Table};
use super::tomcat;
use crate::docroot::{self, label};
use crate::load::{Mode, Tool};
use crate::servers::{Kind, Proto};

/// Every file any table fetches.
pub const SIZES: [u64; 7] = [1, 1_000, 10_000, 28_000, 100_000, 1_000_000, 10_000_000];

/// The durations the tables' cells run, from the one given (`cell`).
pub struct Timing {
    pub cell: Duration,
}

impl Timing {
    /// 10 MB responses to many clients at once: ab counts a request when
    /// its response is complete, and 500 clients sharing the loopback
    /// finish a round of 10 MB responses only every few seconds. Those
    /// cells run longer, so that more than one round completes: 2x the
    /// cell at 5 and 50 clients, 5x (at least 10 s) at 500.
    pub fn ab(&self, size: u64, clients: u32) -> Duration {
        match (size, clients) {
            (s, c) if s >= 10_000_000 && c >= 500 => (self.cell * 5).max(Duration::from_secs(10)),
            (s, _) if s >= 10_000_000 => self.cell * 2,
            _ => self.cell,
        }
    }
}

fn table(id: &'static str, title: &str, method: String, row_header: &str) -> Table {
    Table {
        id,
        title: title.into(),
        method,
        row_header: row_header.into(),
        columns: Vec::new(),
        rows: Vec::new(),
        notes: Vec::new(),
        skipped: Vec::new(),
    }
}

/// The columns for `kinds` (harness servers, in the clear); the skip
/// lines of those that are missing go into the table.
fn harness_columns(pool: &mut Pool, table: &mut Table, kinds: &[Kind]) -> Vec<usize> {
    let mut cols = Vec::new();
    for &k in kinds {
        match pool.harness(k, Proto::Http) {
            Ok(slot) => cols.push(slot),
            Err(line) => table.skipped.push(line),
        }
    }
    cols
}

fn ab_spec(label: String, size: u64, clients: u32, mode: Mode, duration: Duration) -> Spec {
    Spec {
        label,
        tool: Tool::Ab,
        mode,
        size,
        connections: clients,
        duration,
        https: false,
    }
}

/// 1. fnord's shoot-out: requests/s against file size at 50 clients, ab
///    without keep-alive; fnord ran under tcpserver, as staticd --inetd
///    does, and eris (fnord's maintained fork) is fnord's column.
pub const FNORD_SIZES: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];

pub fn fnord(pool: &mut Pool, t: &Timing) -> Table {
    let mut table = table(
        "fnord",
        "Table 1. fnord-style shoot-out: requests per second by file size",
        format!(
            "Method: ab -c 50, no keep-alive, {} s per cell (ab -t), after a {} s wrk warm-up. Original: fnord under tcpserver against AOLserver, Apache, lighttpd and nginx; here eris (fnord's maintained fork, gcc -O2) and staticd --inetd, both under tcpserver (fnord's own deployment), and staticd standalone, and beside nginx (the article's modern server) today's: Caddy and static-web-server.",
            t.cell.as_secs_f64(),
            pool.warmup.as_secs_f64()
        ),
        "size",
    );
    let cols = harness_columns(
        pool,
        &mut table,
        &[
            Kind::StaticdInetd,
            Kind::Eris,
            Kind::Staticd,
            Kind::Apache2,
            Kind::Lighttpd,
            Kind::Nginx,
            Kind::Caddy,
            Kind::Sws,
        ],
    );
    table
        .skipped
        .push("skipped: AOLserver is not packaged in Debian 12".to_string());
    let specs: Vec<Spec> = FNORD_SIZES
        .iter()
        .map(|&s| ab_spec(label(s), s, 50, Mode::Close, t.cell))
        .collect();
    pool.fill(&mut table, &cols, &specs);
    table
}

/// 2. Apache / Tomcat / nginx / lighttpd: ab at 5, 50 and 500 clients for
///    1 B, 28 KB and 10 MB, no keep-alive.
pub const TOMCAT_CLIENTS: [u32; 3] = [5, 50, 500];
pub const TOMCAT_SIZES: [u64; 3] = [1, 28_000, 10_000_000];

/// The measured seconds of table 2 per column.
pub fn tomcat_seconds(t: &Timing) -> Duration {
    TOMCAT_CLIENTS
        .iter()
        .flat_map(|&c| TOMCAT_SIZES.iter().map(move |&s| t.ab(s, c)))
        .sum()
}

pub fn apache_tomcat(pool: &mut Pool, t: &Timing) -> Table {
    let mut table = table(
        "tomcat",
        "Table 2. Apache, Tomcat, nginx and lighttpd: requests per second by concurrency and file size",
        format!(
            "Method: ab -c 5, 50 and 500, no keep-alive, {} s per cell (10 MB: {} s at 5 and 50 clients, {} s at 500, so that whole rounds of 10 MB responses complete; ab counts only completed responses), after a {} s wrk warm-up. Beside nginx, the article's modern server, today's: Caddy and static-web-server.",
            t.cell.as_secs_f64(),
            t.ab(10_000_000, 5).as_secs_f64(),
            t.ab(10_000_000, 500).as_secs_f64(),
            pool.warmup.as_secs_f64()
        ),
        "clients  size",
    );
    let mut cols = harness_columns(pool, &mut table, &[Kind::Apache2]);
    let tomcat_slot = start_tomcat(pool, &mut table);
    cols.extend(tomcat_slot);
    cols.extend(harness_columns(
        pool,
        &mut table,
        &[
            Kind::Nginx,
            Kind::Lighttpd,
            Kind::Caddy,
            Kind::Sws,
            Kind::Staticd,
        ],
    ));
    let specs: Vec<Spec> = TOMCAT_CLIENTS
        .iter()
        .flat_map(|&c| {
            TOMCAT_SIZES.iter().map(move |&s| {
                ab_spec(
                    format!("{c:>7}  {}", label(s)),
                    s,
                    c,
                    Mode::Close,
                    t.ab(s, c),
                )
            })
        })
        .collect();
    pool.fill(&mut table, &cols, &specs);
    if let Some(slot) = tomcat_slot {
        pool.stop(slot);
    }
    table
}

/// Tomcat's column, or its skip line in the table.
fn start_tomcat(pool: &mut Pool, table: &mut Table) -> Option<usize> {
    if let Some(line) = pool.skipped_by_flag(&["tomcat", "tomcat10"]) {
        table.skipped.push(line);
        return None;
    }
    if let Some(why) = tomcat::missing() {
        table.skipped.push(format!("skipped: {why}"));
        return None;
    }
    let dir = pool.setup.docroot.scratch().join("tomcat");
    let probe = docroot::url_path(1_000);
    let started = pool.ports.take().and_then(|port| {
        println!("  tomcat: starting (a JVM: several seconds)");
        let proc = tomcat::start(&dir, &pool.setup.docroot.root(), port, &probe, 1_000)?;
        Ok((proc, port))
    });
    let name = "tomcat".to_string();
    let (about, target) = match started {
        Ok((proc, port)) => {
            let base = format!("http://127.0.0.1:{port}");
            println!("  {name:<26} ready: {base}{probe}");
            (
                format!(
                    "{}; catalina.sh run, CATALINA_BASE {}",
                    tomcat::version(),
                    dir.display()
                ),
                Ok(Target::Own {
                    procs: vec![proc],
                    base,
                }),
            )
        }
        Err(why) => {
            println!("  {name:<26} FAILED to start: {why}");
            (format!("failed to start: {why}"), Err(why))
        }
    };
    Some(pool.add(
        Column {
            name,
            staticd: false,
            about,
        },
        target,
    ))
}

/// 3. Apache against nginx with ab -k (keep-alive) at 100 to 1,500
///    clients, 1 KB, plus staticd, Caddy and static-web-server.
pub const KEEPALIVE_CLIENTS: [u32; 4] = [100, 500, 1_000, 1_500];

pub fn apache_nginx(pool: &mut Pool, t: &Timing) -> Table {
    let mut table = table(
        "ab-keepalive",
        "Table 3. Apache against nginx with keep-alive: requests per second by concurrency (1 KB file)",
        format!(
            "Method: ab -k -c 100, 500, 1000 and 1500, GET of a 1 KB file, {} s per cell, after a {} s wrk warm-up. Beside nginx, the article's modern server, today's: Caddy and static-web-server.",
            t.cell.as_secs_f64(),
            pool.warmup.as_secs_f64()
        ),
        "clients",
    );
    let cols = harness_columns(
        pool,
        &mut table,
        &[
            Kind::Apache2,
            Kind::Nginx,
            Kind::Caddy,
            Kind::Sws,
            Kind::Staticd,
        ],
    );
    let specs: Vec<Spec> = KEEPALIVE_CLIENTS
        .iter()
        .map(|&c| ab_spec(c.to_string(), 1_000, c, Mode::KeepAlive, t.cell))
        .collect();
    pool.fill(&mut table, &cols, &specs);
    table
}

/// 4. Caches in front of a backend, served from the cache, against staticd
///    serving the files itself: wrk at 50 connections, keep-alive and
///    Connection: close, 1 KB and 100 KB.
pub const ACCEL_SIZES: [u64; 2] = [1_000, 100_000];
pub const ACCEL_CONNECTIONS: u32 = 50;

pub fn accel_rows() -> usize {
    2 * ACCEL_SIZES.len()
}

/// The backend the caches fetch from: nginx if it runs, else staticd.
fn backend(pool: &mut Pool) -> Option<(SocketAddr, String)> {
    for kind in [Kind::Nginx, Kind::Staticd] {
        if let Ok(slot) = pool.harness(kind, Proto::Http) {
            if let Some(Target::Server(s)) = pool.target(slot) {
                return Some((s.addr(), kind.name().to_string()));
            }
        }
    }
    None
}

/// Starts one cache (Varnish or Squid) in front of `backend` and waits
/// for a cache hit on every size; its column.
fn cache_column(
    pool: &mut Pool,
    table: &mut Table,
    which: &str,
    backend: Option<&(SocketAddr, String)>,
) -> Option<usize> {
    let (program, package) = match which {
        "varnish" => ("varnishd", "varnish"),
        _ => ("squid", "squid"),
    };
    if let Some(line) = pool.skipped_by_flag(&[which, program]) {
        table.skipped.push(line);
        return None;
    }
    let path = match accelerators::locate(program, package) {
        Ok(p) => p,
        Err(why) => {
            table.skipped.push(format!("skipped: {why}"));
            return None;
        }
    };
    let Some((backend, backend_name)) = backend else {
        table
            .skipped
            .push(format!("skipped: {which}: no backend server started"));
        return None;
    };
    let name = format!("{which} -> {backend_name}");
    let dir = pool.setup.docroot.scratch().join(which);
    let flag = if which == "varnish" { "-V" } else { "-v" };
    let version = crate::servers::version_of(&path, flag);
    let started = pool.ports.take().and_then(|port| {
        let mut proc = if which == "varnish" {
            accelerators::varnish(&path, &dir, port, *backend, false)?
        } else {
            accelerators::squid(&path, &dir, port, *backend)?
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut hits = Vec::new();
        for size in ACCEL_SIZES {
            let hit =
                accelerators::wait_for_hit(&mut proc, addr, &docroot::url_path(size), size, None)?;
            hits.push(format!("{}: {hit}", label(size)));
        }
        Ok((proc, port, hits))
    });
    let (about, target) = match started {
        Ok((proc, port, hits)) => {
            let base = format!("http://127.0.0.1:{port}");
            println!(
                "  {name:<26} ready: {base} (cache hits: {})",
                hits.join("; ")
            );
            table.notes.push(format!(
                "{name}: warmed, and a repeat GET answered from the cache ({})",
                hits.join("; ")
            ));
            (
                format!("{version}; config in {}", dir.display()),
                Ok(Target::Own {
                    procs: vec![proc],
                    base,
                }),
            )
        }
        Err(why) => {
            println!("  {name:<26} FAILED to start: {why}");
            (format!("{version}; failed to start: {why}"), Err(why))
        }
    };
    Some(pool.add(
        Column {
            name,
            staticd: false,
            about,
        },
        target,
    ))
}

pub fn accelerators(pool: &mut Pool, t: &Timing) -> Table {
    let mut table = table(
        "accelerators",
        "Table 4. Accelerators: Varnish and Squid answering from their caches against staticd serving the files itself",
        format!(
            "Method: wrk -c {ACCEL_CONNECTIONS} -t {}, keep-alive and Connection: close, 1 KB and 100 KB, {} s per cell, after a {} s warm-up; each cache warmed and checked to answer from its cache first.",
            pool.threads,
            t.cell.as_secs_f64(),
            pool.warmup.as_secs_f64()
        ),
        "mode  size",
    );
    let backend = backend(pool);
    if let Some((addr, name)) = &backend {
        table.notes.push(format!(
            "backend of both caches: {name} on {addr}; it sees only the warming misses, every measured request is a cache hit"
        ));
    }
    let mut cols = Vec::new();
    for which in ["varnish", "squid"] {
        cols.extend(cache_column(pool, &mut table, which, backend.as_ref()));
    }
    cols.extend(harness_columns(pool, &mut table, &[Kind::Staticd]));
    let specs: Vec<Spec> = [Mode::KeepAlive, Mode::Close]
        .iter()
        .flat_map(|&mode| {
            ACCEL_SIZES.iter().map(move |&size| Spec {
                label: format!("{}  {}", mode.label(), label(size)),
                tool: Tool::Wrk,
                mode,
                size,
                connections: ACCEL_CONNECTIONS,
                duration: t.cell,
                https: false,
            })
        })
        .collect();
    pool.fill(&mut table, &cols, &specs);
    for &c in &cols {
        pool.stop(c);
    }
    table
}

/// 4b. The same over HTTPS: Hitch terminating TLS in front of Varnish (PROXY
///     protocol v2 between them) against staticd's own TLS; wrk keep-alive.
pub fn accelerators_https(pool: &mut Pool, t: &Timing) -> Table {
    let mut table = table(
        "accelerators-https",
        "Table 4b. HTTPS: Hitch -> Varnish (cache hits) against staticd's own TLS",
        format!(
            "Method: wrk -c {ACCEL_CONNECTIONS} -t {} over https, keep-alive, 1 KB and 100 KB, {} s per cell, after a {} s warm-up. Both have the run's ECDSA P-256 certificate; Hitch passes each connection to Varnish with PROXY protocol v2.",
            pool.threads,
            t.cell.as_secs_f64(),
            pool.warmup.as_secs_f64()
        ),
        "size",
    );
    let mut cols = Vec::new();
    cols.extend(hitch_column(pool, &mut table));
    match pool.harness(Kind::Staticd, Proto::Https) {
        Ok(slot) => cols.push(slot),
        Err(line) => table.skipped.push(line),
    }
    let specs: Vec<Spec> = ACCEL_SIZES
        .iter()
        .map(|&size| Spec {
            label: label(size),
            tool: Tool::Wrk,
            mode: Mode::KeepAlive,
            size,
            connections: ACCEL_CONNECTIONS,
            duration: t.cell,
            https: true,
        })
        .collect();
    pool.fill(&mut table, &cols, &specs);
    for &c in &cols {
        pool.stop(c);
    }
    table
}

/// Hitch in front of a Varnish of its own (a PROXY listener), which is in
/// front of the same backend as table 4's.
fn hitch_column(pool: &mut Pool, table: &mut Table) -> Option<usize> {
    for (names, program, package) in [
        (["hitch", "hitch"], "hitch", "hitch"),
        (["varnish", "varnishd"], "varnishd", "varnish"),
    ] {
        if let Some(line) = pool.skipped_by_flag(&names) {
            table.skipped.push(line);
            return None;
        }
        if let Err(why) = accelerators::locate(program, package) {
            table.skipped.push(format!("skipped: {why}"));
            return None;
        }
    }
    let Some(tls) = pool.setup.tls else {
        table.skipped.push("skipped: hitch: no certificate".into());
        return None;
    };
    let Some((backend, backend_name)) = backend(pool) else {
        table
            .skipped
            .push("skipped: hitch: no backend server started".into());
        return None;
    };
    let hitch_bin = accelerators::locate("hitch", "hitch").ok()?;
    let varnishd = accelerators::locate("varnishd", "varnish").ok()?;
    let name = format!("hitch -> varnish -> {backend_name}");
    let scratch = pool.setup.docroot.scratch().to_path_buf();
    let cores = pool.setup.cores;
    let client = tls.client(false);
    let started = (|| {
        let vport = pool.ports.take()?;
        let hport = pool.ports.take()?;
        let mut varnish = accelerators::varnish(
            &varnishd,
            &scratch.join("varnish-proxy"),
            vport,
            backend,
            true,
        )?;
        // Started when its PROXY listener accepts a connection.
        varnish.wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", vport))
                .map(|_| ())
                .map_err(|e| e.to_string())
        })?;
        let mut hitch = accelerators::hitch(
            &hitch_bin,
            &scratch.join("hitch"),
            hport,
            SocketAddr::from(([127, 0, 0, 1], vport)),
            tls,
            cores,
        )?;
        let addr = SocketAddr::from(([127, 0, 0, 1], hport));
        let mut hits = Vec::new();
        for size in ACCEL_SIZES {
            let hit = accelerators::wait_for_hit(
                &mut hitch,
                addr,
                &docroot::url_path(size),
                size,
                Some(&client),
            )?;
            hits.push(format!("{}: {hit}", label(size)));
        }
        Ok::<_, String>((vec![hitch, varnish], hport, hits))
    })();
    let version = format!(
        "{}; {}",
        crate::servers::version_of(&hitch_bin, "--version"),
        crate::servers::version_of(&varnishd, "-V")
    );
    let (about, target) = match started {
        Ok((procs, port, hits)) => {
            let base = format!("https://127.0.0.1:{port}");
            println!(
                "  {name:<26} ready: {base} (cache hits: {})",
                hits.join("; ")
            );
            table.notes.push(format!(
                "{name}: warmed, and a repeat GET over TLS answered from Varnish's cache ({})",
                hits.join("; ")
            ));
            (
                format!("{version}; one hitch worker per core, TLS 1.2 and 1.3"),
                Ok(Target::Own { procs, base }),
            )
        }
        Err(why) => {
            println!("  {name:<26} FAILED to start: {why}");
            (format!("{version}; failed to start: {why}"), Err(why))
        }
    };
    Some(pool.add(
        Column {
            name,
            staticd: false,
            about,
        },
        target,
    ))
}
