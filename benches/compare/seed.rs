//! `cargo bench --bench compare -- --seed-tables`: the classic comparisons
//! staticd exists to be the baseline in, each rerun with its original
//! method, with staticd's column and its ratio to the best other server
//! added (issue 15, "The seeds' tables, reproduced"):
//!
//! 1. fnord's shoot-out: ab -c 50 without keep-alive, 1 KB to 1 MB, with
//!    eris (fnord's maintained fork) beside staticd --inetd under tcpserver;
//! 2. Apache / Tomcat / nginx / lighttpd: ab at 5, 50, 500 clients, 1 B,
//!    28 KB, 10 MB;
//! 3. Apache against nginx: ab -k at 100 to 1,500 clients;
//! 4. Varnish and Squid (cache hits) against staticd, and Hitch -> Varnish
//!    against staticd's own TLS.
//!
//! Tables 1 to 3 also have Caddy and static-web-server beside nginx, the
//! articles' modern server; table 4 has no web server peer to add them to.
//!
//! Writes <target>/compare/seed-tables.{txt,json} and seed-fnord.svg. A
//! missing server or tool is one `skipped: ...` line; a server that fails
//! to start fills its cells with `failed: ...`. See benches/README.md,
//! "Seed tables".

mod accelerators;
mod chart;
mod pool;
mod process;
mod table;
mod tables;
mod tomcat;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::machine::Host;
use crate::report::clock;
use crate::servers::Setup;
use crate::{cli, docroot, load, reaper, report, tls};
use pool::Pool;
use table::Table;
use tables::Timing;

/// The flag that runs this mode instead of the comparison.
pub const FLAG: &str = "--seed-tables";

const USAGE: &str = "\
cargo bench --bench compare -- --seed-tables [OPTIONS]

  --seed-duration SECS    measured seconds per cell (default 2; 10 MB cells
                          of table 2 run 2x, and 5x but at least 10 s at 500
                          clients)
  --seed-warmup SECS      wrk warm-up before each cell (default 0.3; 0: none)
  --seed-only LIST        only these tables, e.g. 1,4 (4 includes 4b, HTTPS)
  --seed-skip LIST        treat these servers or tools as missing, e.g.
                          squid,tomcat (names: staticd-inetd, eris, apache2,
                          lighttpd, nginx, caddy, static-web-server, tomcat,
                          varnish, squid, hitch, ab, wrk)
  --out DIR               output directory (default: <target>/compare)

Needs: apt-get install nginx-light lighttpd apache2 caddy tomcat10 varnish
squid hitch wrk apache2-utils ucspi-tcp, cargo install static-web-server
--version 2.44.1 --locked, and eris at ../shared/bin/eris or on PATH
(whatever is missing is skipped).";

struct Options {
    cell: Duration,
    warmup: Duration,
    only: Vec<u8>,
    skip: Vec<String>,
    out: PathBuf,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        cell: Duration::from_secs(2),
        warmup: Duration::from_millis(300),
        only: vec![1, 2, 3, 4],
        skip: Vec::new(),
        out: report::default_out(),
    };
    let mut args = cli::Args::new(args);
    while let Some(flag) = args.next_flag() {
        let list = |v: String| -> Vec<String> {
            v.split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        };
        match flag {
            FLAG | "--bench" => {}
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--seed-duration" => o.cell = cli::seconds(flag, &args.value(flag)?, false)?,
            "--seed-warmup" => o.warmup = cli::seconds(flag, &args.value(flag)?, true)?,
            "--seed-skip" => o.skip = list(args.value(flag)?),
            "--seed-only" => {
                o.only = list(args.value(flag)?)
                    .iter()
                    .map(|t| {
                        t.trim_end_matches('b')
                            .parse()
                            .ok()
                            .filter(|n| (1..=4).contains(n))
                    })
                    .collect::<Option<_>>()
                    .ok_or("--seed-only: a list of table numbers 1 to 4")?;
            }
            "--out" => o.out = PathBuf::from(args.value(flag)?),
            other => eprintln!("compare --seed-tables: ignoring argument {other}"),
        }
    }
    Ok(o)
}

/// Runs the seed mode and exits.
pub fn main(args: &[String]) -> ! {
    cli::run_mode(FLAG, USAGE, parse(args), run)
}

#[derive(Serialize)]
struct Output<'a> {
    started_unix: u64,
    total_seconds: f64,
    interrupted: bool,
    host: Host,
    cell_seconds: f64,
    warmup_seconds: f64,
    client_threads: u32,
    fd_limit: u64,
    /// Tables or whole parts not run: "skipped: ..." lines.
    skipped: &'a [String],
    tables: &'a [Table],
}

/// About how long the tables in `o.only` take with every server there.
fn estimate(o: &Options, t: &Timing) -> Duration {
    let per = |cells: u32, columns: u32| {
        (t.cell + o.warmup + Duration::from_millis(500)) * cells * columns
    };
    let mut e = Duration::from_secs(10); // the harness servers' start-up
    if o.only.contains(&1) {
        e += per(tables::FNORD_SIZES.len() as u32, 8);
    }
    if o.only.contains(&2) {
        let rows = (tables::TOMCAT_CLIENTS.len() * tables::TOMCAT_SIZES.len()) as u32;
        e += (tables::tomcat_seconds(t) + (o.warmup + Duration::from_millis(500)) * rows) * 7;
        e += Duration::from_secs(20); // Tomcat's start
    }
    if o.only.contains(&3) {
        e += per(tables::KEEPALIVE_CLIENTS.len() as u32, 5);
    }
    if o.only.contains(&4) {
        e += per(tables::accel_rows() as u32, 3) + per(tables::ACCEL_SIZES.len() as u32, 2);
        e += Duration::from_secs(10); // the caches' start and warming
    }
    e
}

fn run(o: &Options) -> Result<(), String> {
    let begun = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let fd_limit = crate::machine::raise_fd_limit();
    let timing = Timing { cell: o.cell };
    let mut skipped = Vec::new();
    let skip_tool = |tool: &str, package: &str| {
        if o.skip.iter().any(|s| s == tool) {
            Some(format!("skipped: {tool} (--seed-skip {tool})"))
        } else {
            load::not_installed(tool, package).map(|why| format!("skipped: {why}"))
        }
    };
    let mut only = o.only.clone();
    if let Some(line) = skip_tool("ab", "apache2-utils") {
        skipped.push(format!("{line}: no tables 1 to 3"));
        only.retain(|t| *t == 4);
    }
    if let Some(line) = skip_tool("wrk", "wrk") {
        skipped.push(format!("{line}: no warm-ups, no table 4"));
        only.retain(|t| *t != 4);
    }
    let o = Options {
        only,
        skip: o.skip.clone(),
        out: o.out.clone(),
        ..*o
    };
    // The warm-ups are wrk's: without it, none.
    let warmup = if load::available("wrk") && !o.skip.iter().any(|s| s == "wrk") {
        o.warmup
    } else {
        Duration::ZERO
    };
    println!(
        "compare --seed-tables: tables {:?}, {} s cells; about {} on this machine with every server installed",
        o.only,
        o.cell.as_secs_f64(),
        clock(estimate(&o, &timing))
    );
    for line in &skipped {
        println!("{line}");
    }

    let built = PathBuf::from(env!("CARGO_BIN_EXE_staticd"));
    let harness =
        std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    if let Err(e) = reaper::start(&harness) {
        eprintln!("compare: {e}; servers' workers may outlive a harness killed with SIGKILL");
    }
    let docroot = docroot::Docroot::create(&tables::SIZES).map_err(|e| format!("docroot: {e}"))?;
    reaper::remove_later(docroot.scratch());
    let staticd = docroot.keep_copy(&built, "staticd")?;
    let tls_files = tls::write_files(&docroot.scratch().join("tls"))?;
    let cores = crate::machine::cores();
    let setup = Setup {
        docroot: &docroot,
        sizes: &tables::SIZES,
        cores,
        staticd: &staticd,
        harness: &harness,
        fd_limit,
        max_connections: *tables::KEEPALIVE_CLIENTS.iter().max().unwrap_or(&1500),
        tls: Some(&tls_files),
    };
    println!(
        "compare --seed-tables: starting servers on 127.0.0.1 (staticd: {})",
        built.display()
    );
    let mut pool = Pool::new(setup, o.skip.clone(), warmup, cores as u32);
    pool.begun = begun;
    let mut done: Vec<Table> = Vec::new();
    type Build = fn(&mut Pool, &Timing) -> Table;
    let all: [(u8, Build); 5] = [
        (1, tables::fnord),
        (2, tables::apache_tomcat),
        (3, tables::apache_nginx),
        (4, tables::accelerators),
        (4, tables::accelerators_https),
    ];
    for (n, build) in all {
        if !o.only.contains(&n) || crate::stop::stopping() {
            continue;
        }
        let table = build(&mut pool, &timing);
        println!("\n{}", table.text());
        done.push(table);
    }
    let interrupted = crate::stop::stopping();
    // Stop every server before writing (and before the docroot goes).
    drop(pool);

    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let host = crate::machine::host();
    let mut text = format!(
        "staticd seed tables ({}): {} cores, {}, Linux {}; ran {}{}\n\n",
        crate::servers::version_of(&built, "--version"),
        host.cores,
        host.cpu,
        host.kernel,
        clock(begun.elapsed()),
        if interrupted { ", INTERRUPTED" } else { "" }
    );
    for line in &skipped {
        text.push_str(line);
        text.push('\n');
    }
    for t in &done {
        text.push_str(&t.text());
        text.push('\n');
    }
    let txt = o.out.join("seed-tables.txt");
    std::fs::write(&txt, &text).map_err(|e| format!("{}: {e}", txt.display()))?;
    let output = Output {
        started_unix,
        total_seconds: begun.elapsed().as_secs_f64(),
        interrupted,
        host,
        cell_seconds: o.cell.as_secs_f64(),
        warmup_seconds: warmup.as_secs_f64(),
        client_threads: cores as u32,
        fd_limit,
        skipped: &skipped,
        tables: &done,
    };
    let json = o.out.join("seed-tables.json");
    report::write_json(&json, &output)?;
    let mut wrote = vec![txt, json];
    if let Some(fnord) = done.iter().find(|t| t.id == "fnord") {
        let svg = o.out.join("seed-fnord.svg");
        match chart::write(fnord, &svg) {
            Ok(()) => wrote.push(svg),
            Err(e) => eprintln!("compare --seed-tables: chart: {e}"),
        }
    }
    let wrote: Vec<String> = wrote.iter().map(|p| p.display().to_string()).collect();
    println!(
        "compare --seed-tables: {} in {}; wrote {}",
        if interrupted { "interrupted" } else { "done" },
        clock(begun.elapsed()),
        wrote.join(", ")
    );
    if interrupted {
        return Err("interrupted".into());
    }
    Ok(())
}
