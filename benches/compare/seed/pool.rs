//! The servers the seed tables measure, started once and shared between
//! tables (a column is an index into the pool), and the measuring of one
//! table's rows: a different column first in each row, a short wrk
//! warm-up, then the table's own client (ab, or wrk), then a wait until
//! the server is quiet again.

use std::time::{Duration, Instant};

use super::process::Proc;
use super::table::{Column, Row, Table, Value};
use crate::docroot;
use crate::load::{self, Mode, Run, Tool};
use crate::report::clock;
use crate::servers::{self, Kind, Ports, Proto, Server, Setup};

/// Longest wait for a server to go quiet after a cell.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);

/// Tomcat's warm-up per file before its first cell.
const JVM_WARMUP: Duration = Duration::from_secs(2);

/// What a column measures.
pub enum Target {
    /// One of the harness's own servers (servers.rs).
    Server(Server),
    /// Started by the seed mode (Tomcat, a cache, Hitch and its Varnish):
    /// its processes and the `scheme://host:port` it is reached at.
    Own { procs: Vec<Proc>, base: String },
}

impl Target {
    fn url(&self, size: u64) -> String {
        match self {
            Target::Server(s) => s.url(size),
            Target::Own { base, .. } => format!("{base}{}", docroot::url_path(size)),
        }
    }

    fn exited(&mut self) -> Option<String> {
        match self {
            Target::Server(s) => s.exited(),
            Target::Own { procs, .. } => procs.iter_mut().find_map(|p| p.exited()),
        }
    }

    fn settle(&self) {
        match self {
            Target::Server(s) => {
                s.settle(SETTLE_LIMIT);
                s.reap_connections();
            }
            Target::Own { procs, .. } => {
                for p in procs {
                    p.settle(SETTLE_LIMIT);
                }
            }
        }
    }
}

/// A column's server: what it is and whether it runs.
pub struct Slot {
    pub column: Column,
    /// Err: it failed to start (or died), and why; its cells say so.
    pub target: Result<Target, String>,
}

/// One row of a table to measure.
#[derive(Clone)]
pub struct Spec {
    pub label: String,
    pub tool: Tool,
    pub mode: Mode,
    pub size: u64,
    pub connections: u32,
    pub duration: Duration,
    pub https: bool,
}

pub struct Pool<'a> {
    pub slots: Vec<Slot>,
    pub setup: Setup<'a>,
    pub ports: Ports,
    /// Names given to --seed-skip.
    pub skip: Vec<String>,
    /// The harness servers already asked for: (kind, proto, slot or skip line).
    started: Vec<(Kind, Proto, Result<usize, String>)>,
    pub warmup: Duration,
    pub threads: u32,
    pub begun: Instant,
}

/// How to install what a harness server needs, for the skip line.
fn install(kind: Kind) -> String {
    match kind {
        Kind::StaticdInetd => "apt-get install ucspi-tcp".into(),
        _ => kind.program().map_or(String::new(), |p| p.2.to_string()),
    }
}

/// Its column's name: staticd-inetd and eris say how they run.
pub fn column_name(kind: Kind, proto: Proto) -> String {
    match kind {
        Kind::StaticdInetd => "staticd-inetd (tcpserver)".into(),
        Kind::Eris => "eris (tcpserver)".into(),
        _ => format!("{}{}", kind.name(), proto.suffix()),
    }
}

impl<'a> Pool<'a> {
    pub fn new(setup: Setup<'a>, skip: Vec<String>, warmup: Duration, threads: u32) -> Pool<'a> {
        Pool {
            slots: Vec::new(),
            setup,
            ports: Ports::new(),
            skip,
            started: Vec::new(),
            warmup,
            threads,
            begun: Instant::now(),
        }
    }

    /// Whether `name` was given to --seed-skip: its skip line.
    pub fn skipped_by_flag(&self, names: &[&str]) -> Option<String> {
        names
            .iter()
            .find(|n| self.skip.iter().any(|s| s == *n))
            .map(|n| format!("skipped: {n} (--seed-skip {n})"))
    }

    /// The slot of a harness server, started on first use. Err: the line
    /// saying it is skipped (not installed, or --seed-skip). A server that
    /// is there but fails to start gets a slot whose cells say why.
    pub fn harness(&mut self, kind: Kind, proto: Proto) -> Result<usize, String> {
        if let Some((_, _, r)) = self
            .started
            .iter()
            .find(|(k, p, _)| *k == kind && *p == proto)
        {
            return r.clone();
        }
        let r = self.start_harness(kind, proto);
        self.started.push((kind, proto, r.clone()));
        r
    }

    fn start_harness(&mut self, kind: Kind, proto: Proto) -> Result<usize, String> {
        let flag_names: &[&str] = match kind {
            Kind::StaticdInetd => &["staticd-inetd", "tcpserver"],
            Kind::Eris => &["eris", "tcpserver"],
            Kind::Staticd => &[],
            _ => &[kind.name()],
        };
        if let Some(line) = self.skipped_by_flag(flag_names) {
            return Err(line);
        }
        if let Some(why) = kind.missing() {
            return Err(format!("skipped: {why}"));
        }
        if let Err(why) = servers::locate(kind, &self.setup, proto) {
            let hint = match install(kind) {
                h if h.is_empty() => h,
                h => format!(" ({h})"),
            };
            return Err(format!("skipped: {why}{hint}"));
        }
        let name = column_name(kind, proto);
        let target = servers::start(kind, &self.setup, &mut self.ports, proto);
        let about = match &target {
            Ok(s) => {
                println!("  {name:<26} ready: {} ({})", s.url(1_000), s.about.version);
                format!("{}; {}", s.about.version, s.about.command)
            }
            Err(why) => {
                println!("  {name:<26} FAILED to start: {why}");
                format!("failed to start: {why}")
            }
        };
        Ok(self.add(
            Column {
                name,
                staticd: kind.is_staticd(),
                about,
            },
            target.map(Target::Server),
        ))
    }

    /// Adds a column's server (or why it failed to start); its index.
    pub fn add(&mut self, column: Column, target: Result<Target, String>) -> usize {
        if let Ok(t) = &target {
            self.warm_jvm(&column.name, t);
        }
        self.slots.push(Slot { column, target });
        self.slots.len() - 1
    }

    /// A JVM compiles its hot paths only after it has run them a while:
    /// Tomcat gets a longer warm-up (2 s of wrk keep-alive per small file)
    /// before its first cell than the others' per-cell warm-up.
    fn warm_jvm(&self, name: &str, target: &Target) {
        if name != "tomcat" || self.warmup.is_zero() {
            return;
        }
        for size in [1, 28_000] {
            let url = target.url(size);
            let _ = load::warm_up(&Run {
                url: &url,
                connections: 50,
                mode: Mode::KeepAlive,
                duration: JVM_WARMUP,
                threads: self.threads,
                streams: 1,
            });
        }
        target.settle();
    }

    /// The slot's target, if it runs.
    pub fn target(&self, slot: usize) -> Option<&Target> {
        self.slots[slot].target.as_ref().ok()
    }

    /// Stops what `slot` started (the caches, Tomcat) once its table is done.
    pub fn stop(&mut self, slot: usize) {
        if matches!(self.slots[slot].target, Ok(Target::Own { .. })) {
            self.slots[slot].target = Err("stopped".into());
        }
    }

    /// Measures every row of `specs` on `columns` (slot indices) into a
    /// table; rows not reached before an interrupt say so.
    pub fn fill(&mut self, table: &mut Table, columns: &[usize], specs: &[Spec]) {
        table.columns = columns
            .iter()
            .map(|&c| self.slots[c].column.clone())
            .collect();
        let n = columns.len();
        for (i, spec) in specs.iter().enumerate() {
            let mut cells = vec![Value::NotRun; n];
            let mut line = format!("  [{}] {:<18}", table.id, spec.label);
            for k in 0..n {
                if crate::stop::stopping() {
                    break;
                }
                // A different server first in each row: drift spreads evenly.
                let col = (i + k) % n;
                cells[col] = self.measure(columns[col], spec);
            }
            for (col, v) in cells.iter().enumerate() {
                let shown = match v.rps() {
                    Some(r) => crate::report::compact(r),
                    None if matches!(v, Value::NotRun) => "-".into(),
                    None => "failed".into(),
                };
                line.push_str(&format!(
                    "  {} {shown}",
                    self.slots[columns[col]].column.name
                ));
            }
            if !crate::stop::stopping() || cells.iter().any(|c| !matches!(c, Value::NotRun)) {
                println!("{line}  [{}]", clock(self.begun.elapsed()));
            }
            table.rows.push(Row {
                label: spec.label.clone(),
                tool: spec.tool,
                mode: spec.mode,
                https: spec.https,
                size: spec.size,
                connections: spec.connections,
                cell_seconds: spec.duration.as_secs_f64(),
                cells,
                ratios: Vec::new(),
            });
        }
        table.compute_ratios();
    }

    fn measure(&mut self, slot: usize, spec: &Spec) -> Value {
        let (warmup, threads) = (self.warmup, self.threads);
        let target = match &mut self.slots[slot].target {
            Ok(t) => t,
            Err(why) => return Value::Failed(why.clone()),
        };
        if let Some(why) = target.exited() {
            return Value::Failed(format!("server {why}"));
        }
        let url = target.url(spec.size);
        let run = |mode, duration| Run {
            url: &url,
            connections: spec.connections,
            mode,
            duration,
            threads,
            streams: 1,
        };
        if !warmup.is_zero() {
            let warm = load::warm_up(&run(spec.mode, warmup));
            target.settle();
            if let Err(e) = warm {
                return Value::Failed(format!("warm-up: {e}"));
            }
        }
        let result = match spec.tool {
            Tool::Ab => load::ab(&run(spec.mode, spec.duration)),
            _ => load::wrk(&run(spec.mode, spec.duration)),
        };
        target.settle();
        if let Some(why) = target.exited() {
            return Value::Failed(format!("server {why}"));
        }
        Value::from_result(result, spec.size, spec.connections)
    }
}
