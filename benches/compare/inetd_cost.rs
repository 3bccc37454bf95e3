//! `cargo bench --bench compare -- --inetd-cost`: what one start of a
//! process-per-connection server costs (issue 43). The programs: eris
//! (fnord's maintained fork), staticd --inetd as built by default, staticd
//! built with --no-default-features, and /bin/true, the floor of a fork
//! and exec here; every round runs each of them in turn (A B C D, A B C D,
//! ...), so that drift of the machine reaches them alike:
//!
//! - CPU per start: a fork+exec loop of N runs (after startup.rs's
//!   unmeasured ones), each child given one request (`GET /1000.bin`,
//!   `Connection: close`) on a stdin of its own (the request file, opened
//!   per child) and /dev/null as stdout; the child's user+sys time from
//!   wait4(2)'s rusage, summed, over N;
//! - page faults per start: minor + major, from the same rusage;
//! - requests/s under `tcpserver -RHl0` (servers.rs starts it as the
//!   comparison does) with `ab -c 50` without keep-alive on the same file;
//!   /bin/true serves nothing, so it has none.
//!
//! The table shows each program's median over the rounds with the range,
//! and staticd's ratios to eris against issue 43's targets (CPU per start
//! x1.00 or less, requests/s x1.00 or more). Writes
//! <target>/compare/inetd-cost.{txt,json}. See benches/README.md, "The
//! inetd start cost".

mod output;
mod program;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::docroot::{self, Docroot};
use crate::load::{self, Mode, Run};
use crate::machine;
use crate::report::{self, clock};
use crate::servers::{self, Ports, Proto, Setup};
use crate::{cli, reaper, startup, stop};
use output::Output;
use program::{Column, Program, Round};

/// The flag that runs this mode instead of the comparison.
pub const FLAG: &str = "--inetd-cost";

const USAGE: &str = "\
cargo bench --bench compare -- --inetd-cost [OPTIONS]

What one start of a per-connection server costs: eris (fnord's maintained
fork), staticd --inetd (the default build), staticd built with
--no-default-features, and /bin/true, in rounds alternated between them:
CPU and page faults per start (a fork+exec loop, one request on stdin each)
and requests/s under tcpserver (ab -c 50, no keep-alive), all on a 1 KB file.

  --inetd-runs N          starts per program and round in the fork+exec loop
                          (default 300, after 10 unmeasured)
  --inetd-rounds N        rounds (default 3)
  --inetd-duration SECS   ab's seconds per program and round (default 3)
  --inetd-minimal PATH    the --no-default-features staticd to measure
                          (default: cargo builds it into
                          <target>/inetd-minimal, a no-op once up to date)
  --inetd-also NAME=PATH  one more staticd build to measure, as column
                          \"staticd NAME\" (e.g. a static-pie build; see
                          benches/README.md); may be given again
  --out DIR               output directory (default: <target>/compare)

Needs ucspi-tcp (tcpserver) and apache2-utils (ab) for the requests/s row,
and eris at ../shared/bin/eris or on PATH; whatever is missing is one
skipped: line.";

/// The file every start is asked for.
const SIZE: u64 = 1_000;
/// ab's clients, as seed table 1 (fnord's shoot-out) has them.
const CLIENTS: u32 = 50;
/// Longest wait for a tcpserver to go quiet after its ab run.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);

struct Options {
    runs: u32,
    rounds: u32,
    duration: Duration,
    minimal: Option<PathBuf>,
    /// More staticd builds: a column name's suffix and the binary.
    also: Vec<(String, PathBuf)>,
    out: PathBuf,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        runs: 300,
        rounds: 3,
        duration: Duration::from_secs(3),
        minimal: None,
        also: Vec::new(),
        out: report::default_out(),
    };
    let mut args = cli::Args::new(args);
    while let Some(flag) = args.next_flag() {
        let number = |v: String, most: u32| {
            v.parse::<u32>()
                .ok()
                .filter(|n| (1..=most).contains(n))
                .ok_or_else(|| format!("{flag}: a number from 1 to {most}, not {v}"))
        };
        match flag {
            FLAG | "--bench" => {}
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--inetd-runs" => o.runs = number(args.value(flag)?, 100_000)?,
            "--inetd-rounds" => o.rounds = number(args.value(flag)?, 99)?,
            "--inetd-duration" => o.duration = cli::seconds(flag, &args.value(flag)?, false)?,
            "--inetd-minimal" => o.minimal = Some(PathBuf::from(args.value(flag)?)),
            "--inetd-also" => {
                let v = args.value(flag)?;
                let (name, path) = v
                    .split_once('=')
                    .filter(|(name, path)| !name.is_empty() && !path.is_empty())
                    .ok_or_else(|| format!("{flag}: NAME=PATH, not {v}"))?;
                o.also.push((name.to_string(), PathBuf::from(path)));
            }
            "--out" => o.out = PathBuf::from(args.value(flag)?),
            other => eprintln!("compare --inetd-cost: ignoring argument {other}"),
        }
    }
    Ok(o)
}

/// Runs the mode and exits.
pub fn main(args: &[String]) -> ! {
    cli::run_mode(FLAG, USAGE, parse(args), run)
}

/// What the run works with: the document root (and the copies of staticd
/// in it), the request file.
struct Ground {
    docroot: Docroot,
    harness: PathBuf,
    fd_limit: u64,
    /// The request file every start reads as its stdin.
    request: PathBuf,
}

/// The run in three steps: the document root, the measuring, the outputs.
fn run(o: &Options) -> Result<(), String> {
    let begun = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let ground = prepare()?;
    let mut skipped = Vec::new();
    let columns = measure(o, &ground, &mut skipped, begun)?;
    // Every server stopped; the machine's record read after the load.
    let output = Output {
        started_unix,
        total_seconds: begun.elapsed().as_secs_f64(),
        interrupted: stop::stopping(),
        host: machine::host(),
        software: machine::software(&std::env::args().skip(1).collect::<Vec<_>>()),
        size: SIZE,
        runs_per_round: o.runs,
        rounds: o.rounds,
        ab_clients: CLIENTS,
        ab_seconds: o.duration.as_secs_f64(),
        skipped,
        targets: output::judge(&columns),
        columns,
    };
    write(o, &output, begun)
}

/// The reaper, the document root with the 1 KB file and eris's virtual
/// hosts, and the request file.
fn prepare() -> Result<Ground, String> {
    let fd_limit = machine::raise_fd_limit();
    let harness =
        std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    if let Err(e) = reaper::start(&harness) {
        eprintln!("compare: {e}; servers' workers may outlive a harness killed with SIGKILL");
    }
    let docroot = Docroot::create(&[SIZE]).map_err(|e| format!("docroot: {e}"))?;
    reaper::remove_later(docroot.scratch());
    let request = docroot.scratch().join("request.http");
    std::fs::write(
        &request,
        startup::request(&docroot::url_path(SIZE)).as_bytes(),
    )
    .map_err(|e| format!("{}: {e}", request.display()))?;
    Ok(Ground {
        docroot,
        harness,
        fd_limit,
        request,
    })
}

/// Every round on every program that is there; their columns, with
/// medians and ranges. The tcpserver servers are stopped on return.
fn measure(
    o: &Options,
    g: &Ground,
    skipped: &mut Vec<String>,
    begun: Instant,
) -> Result<Vec<Column>, String> {
    let mut programs = program::programs(o.minimal.as_deref(), &o.also, g, skipped)?;
    let ab = tcpserver_row(g, &mut programs, skipped);
    println!(
        "compare --inetd-cost: {} round(s): {} starts per program each, then ab -c {CLIENTS} -t {} under tcpserver; GET {}",
        o.rounds,
        o.runs,
        o.duration.as_secs_f64(),
        docroot::label(SIZE)
    );
    for round in 1..=o.rounds {
        if stop::stopping() {
            break;
        }
        starts_round(o, g, &mut programs, round, begun);
        if ab {
            tcpserver_round(o, &mut programs, round, begun);
        }
    }
    Ok(programs
        .into_iter()
        .map(|p| program::summarize(p.record))
        .collect())
}

/// inetd-cost.txt (also printed) and inetd-cost.json.
fn write(o: &Options, output: &Output, begun: Instant) -> Result<(), String> {
    let text = output::table(output);
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let txt = o.out.join("inetd-cost.txt");
    std::fs::write(&txt, &text).map_err(|e| format!("{}: {e}", txt.display()))?;
    let json = o.out.join("inetd-cost.json");
    report::write_json(&json, output)?;
    println!("\n{text}");
    println!(
        "compare --inetd-cost: {} in {}; wrote {}, {}",
        if output.interrupted {
            "interrupted"
        } else {
            "done"
        },
        clock(begun.elapsed()),
        txt.display(),
        json.display()
    );
    if output.interrupted {
        return Err("interrupted".into());
    }
    Ok(())
}

/// Starts each program under tcpserver (servers.rs, as the comparison
/// runs staticd-inetd), up for the whole run and idle while the others
/// are measured. False, with a skip line, when ab or tcpserver is missing.
fn tcpserver_row(g: &Ground, programs: &mut [Program], skipped: &mut Vec<String>) -> bool {
    let missing = [("tcpserver", "ucspi-tcp"), ("ab", "apache2-utils")]
        .into_iter()
        .find_map(|(tool, package)| load::not_installed(tool, package));
    if let Some(why) = missing {
        let line = format!("skipped: requests/s under tcpserver: {why}");
        println!("{line}");
        skipped.push(line);
        return false;
    }
    let mut ports = Ports::new();
    for p in programs.iter_mut() {
        let Some(kind) = p.kind else { continue };
        let setup = Setup {
            docroot: &g.docroot,
            sizes: &[SIZE],
            cores: machine::cores(),
            staticd: &p.path,
            harness: &g.harness,
            fd_limit: g.fd_limit,
            max_connections: CLIENTS,
            tls: None,
        };
        p.server = servers::start(kind, &setup, &mut ports, Proto::Http);
        match &p.server {
            Ok(s) => {
                println!("  {:<38} ready: {}", p.name, s.url(SIZE));
                p.record.tcpserver = Some(s.about.command.clone());
            }
            Err(why) => {
                println!("  {:<38} FAILED to start under tcpserver: {why}", p.name);
                p.record
                    .errors
                    .push(format!("tcpserver: failed to start: {why}"));
            }
        }
    }
    true
}

/// One round of the fork+exec loops, every program in turn: a new record
/// of the round for each.
fn starts_round(o: &Options, g: &Ground, programs: &mut [Program], round: u32, begun: Instant) {
    let mut line = format!("  r{round}/{} starts:", o.rounds);
    for p in programs.iter_mut() {
        if stop::stopping() {
            return;
        }
        let mut r = Round {
            round,
            ..Round::default()
        };
        match program::per_start(p, &g.request, o.runs) {
            Ok((cpu, faults)) => {
                r.cpu_us_per_start = Some(cpu);
                r.faults_per_start = Some(faults);
                let _ = write!(line, "  {} {cpu:.0} us, {faults:.0} faults", p.name);
            }
            Err(e) => {
                p.record.errors.push(format!("round {round}, starts: {e}"));
                let _ = write!(line, "  {} failed", p.name);
            }
        }
        p.record.rounds.push(r);
    }
    println!("{line}  [{}]", clock(begun.elapsed()));
}

/// One round of ab under tcpserver, every program that serves in turn,
/// into the round's records.
fn tcpserver_round(o: &Options, programs: &mut [Program], round: u32, begun: Instant) {
    let mut line = format!("  r{round}/{} tcpserver:", o.rounds);
    for p in programs.iter_mut() {
        let Ok(server) = &p.server else { continue };
        if stop::stopping() {
            return;
        }
        let url = server.url(SIZE);
        let run = Run {
            url: &url,
            connections: CLIENTS,
            mode: Mode::Close,
            duration: o.duration,
            threads: 1,
            streams: 1,
        };
        let result = load::ab(&run);
        // Connections still in tcpserver's queue would start processes
        // while the next program is measured.
        server.settle(SETTLE_LIMIT);
        server.reap_connections();
        let r = p.record.rounds.last_mut().filter(|r| r.round == round);
        match (result, r) {
            (Ok(out), Some(r)) => {
                r.requests_per_second = Some(out.requests_per_second);
                r.ab_errors = out.error_count();
                let _ = write!(
                    line,
                    "  {} {}{}",
                    p.name,
                    report::compact(out.requests_per_second),
                    if r.ab_errors > 0 { "!" } else { "" }
                );
            }
            (Err(e), _) => {
                p.record.errors.push(format!("round {round}, ab: {e}"));
                let _ = write!(line, "  {} failed", p.name);
            }
            (Ok(_), None) => {}
        }
    }
    println!("{line}  [{}]", clock(begun.elapsed()));
}
