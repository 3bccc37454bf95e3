//! What --inetd-cost writes: inetd-cost.json's record, the ratios of
//! staticd to eris against issue 43's targets, and the table.

use std::fmt::Write as _;

use serde::Serialize;

use super::program::Column;
use super::{CLIENTS, SIZE};
use crate::docroot;
use crate::machine::{Host, Software};
use crate::report::{median, render, Spread};
use crate::targets;

/// staticd's ratio to eris in one row, against its target.
#[derive(Clone, Debug, Serialize)]
pub struct Judged {
    what: String,
    ratio: Option<f64>,
    target: String,
    met: Option<bool>,
}

#[derive(Serialize)]
pub struct Output {
    pub started_unix: u64,
    pub total_seconds: f64,
    pub interrupted: bool,
    pub host: Host,
    pub software: Software,
    pub size: u64,
    pub runs_per_round: u32,
    pub rounds: u32,
    pub ab_clients: u32,
    pub ab_seconds: f64,
    /// Programs not measured: "skipped: ..." lines.
    pub skipped: Vec<String>,
    pub columns: Vec<Column>,
    pub targets: Vec<Judged>,
}

/// Issue 43's targets: each staticd build's CPU per start x1.00 or less
/// of eris's, its requests/s under tcpserver x1.00 or more.
pub fn judge(columns: &[Column]) -> Vec<Judged> {
    let Some(eris) = columns.iter().find(|c| c.name == "eris") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in columns.iter().filter(|c| c.name.starts_with("staticd")) {
        let rows = [
            (
                "CPU per start",
                median(c.cpu_us_per_start),
                median(eris.cpu_us_per_start),
                false,
            ),
            (
                "requests/s under tcpserver",
                median(c.requests_per_second),
                median(eris.requests_per_second),
                true,
            ),
        ];
        for (what, mine, theirs, more_is_better) in rows {
            let ratio = targets::ratio(mine, theirs);
            out.push(Judged {
                what: format!("{} / eris, {what}", c.name),
                ratio,
                target: if more_is_better {
                    ">= x1.00"
                } else {
                    "<= x1.00"
                }
                .into(),
                met: ratio.map(|x| if more_is_better { x >= 1.0 } else { x <= 1.0 }),
            });
        }
    }
    out
}

/// "650 (640–660)": the median and the range of the rounds.
fn spread(s: Option<Spread>) -> String {
    s.map_or("-".into(), |s| {
        format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
    })
}

/// The table as printed and written to inetd-cost.txt.
pub fn table(output: &Output) -> String {
    let mut out = format!(
        "staticd inetd start cost: {}; staticd {}{}\n",
        output.host.describe(),
        output.software.commit(),
        if output.interrupted {
            "; INTERRUPTED"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "{} round(s), each program in turn; median of the rounds (min–max). Per start: {} runs of\n  the program on one request read from stdin (GET {} HTTP/1.1, Connection: close), response\n  to /dev/null, each reaped by wait4(2): its user+sys time and minor+major page faults.\n  Requests/s: tcpserver -RHl0 + ab -c {CLIENTS} -t {} without keep-alive.\n",
        output.rounds,
        output.runs_per_round,
        docroot::url_path(SIZE),
        output.ab_seconds
    );
    let (columns, targets) = (&output.columns, &output.targets);
    let mut header = vec!["measured".to_string()];
    header.extend(columns.iter().map(|c| c.name.clone()));
    let row = |label: &str, f: &dyn Fn(&Column) -> String| -> Vec<String> {
        std::iter::once(label.to_string())
            .chain(columns.iter().map(f))
            .collect()
    };
    let rows = vec![
        row("CPU per start, us", &|c| spread(c.cpu_us_per_start)),
        row("page faults per start", &|c| spread(c.faults_per_start)),
        row("tcpserver + ab, requests/s", &|c| {
            if !c.serves {
                "—".into()
            } else {
                spread(c.requests_per_second)
            }
        }),
    ];
    render(&mut out, &header, &rows);
    if !targets.is_empty() {
        let _ = writeln!(out, "targets (issue 43):");
    }
    for t in targets {
        let _ = writeln!(
            out,
            "  {}: {} (target {}): {}",
            t.what,
            t.ratio.map_or("-".into(), |x| format!("x{x:.2}")),
            t.target,
            match t.met {
                Some(true) => "met",
                Some(false) => "missed",
                None => "n/a",
            }
        );
    }
    for c in columns {
        let _ = writeln!(out, "  {}: {} ({})", c.name, c.version, c.command);
        if let Some(t) = &c.tcpserver {
            let _ = writeln!(out, "    under tcpserver: {t}");
        }
        for e in &c.errors {
            let _ = writeln!(out, "    error: {e}");
        }
    }
    for line in &output.skipped {
        let _ = writeln!(out, "{line}");
    }
    out
}
