//! The end of a run: the access-log check, the growth and latency bounds,
//! the summary on stdout, soak.json and soak.svg.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use plotters::prelude::*;

use crate::args::Args;
use crate::check::{Fault, Soak};
use crate::server::Sample;

/// The bounds, stated once: in the output and in benches/README.md.
pub const RSS_GROWTH_MIB: u64 = 32;
pub const RSS_GROWTH_PCT: u64 = 50;
pub const FD_GROWTH: i64 = 64;
pub const THREAD_GROWTH: u64 = 32;
pub const GOOD_P99_MS: f64 = 100.0;

/// `common` format: `IP - USER [DATE] "REQUEST" STATUS SIZE`.
fn well_formed(line: &str) -> bool {
    let Some(open) = line.find(" [") else {
        return false;
    };
    let Some(close) = line[open..].find("] \"") else {
        return false;
    };
    let rest = &line[open + close + 3..];
    let Some(q) = rest.rfind("\" ") else {
        return false;
    };
    let tail: Vec<&str> = rest[q + 2..].split(' ').collect();
    tail.len() == 2
        && tail[0].len() == 3
        && tail[0].bytes().all(|b| b.is_ascii_digit())
        && (tail[1] == "-" || tail[1].bytes().all(|b| b.is_ascii_digit()))
        && line[..open].split(' ').count() == 3
}

fn ids(line: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while let Some(k) = line[i..].find("id=") {
        let at = i + k;
        if at > 0 && (b[at - 1] == b'?' || b[at - 1] == b'&') {
            let digits: String = line[at + 3..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            if let Ok(n) = digits.parse() {
                out.push(n);
            }
        }
        i = at + 3;
    }
    out
}

fn p99(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let rank = ((xs.len() as f64) * 0.99).ceil() as usize;
    Some(xs[rank.clamp(1, xs.len()) - 1])
}

pub fn finish(
    soak: &Soak,
    a: &Args,
    run: Duration,
    short: bool,
    logs: &[PathBuf],
    stderr: &[String],
    samples: &[(String, Sample)],
) -> bool {
    // 1. Every answered id exactly once in the access logs.
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut lines = 0u64;
    let mut malformed = Vec::new();
    for f in logs {
        let bytes = std::fs::read(f).unwrap_or_default();
        for line in String::from_utf8_lossy(&bytes).lines() {
            lines += 1;
            // A line cut short (by ENOSPC) may end inside an id: "id=1694"
            // of "id=169412" would count 1694 twice. Its ids are not read.
            if !well_formed(line) {
                malformed.push(line.chars().take(160).collect::<String>());
                continue;
            }
            for id in ids(line) {
                *seen.entry(id).or_default() += 1;
            }
        }
    }
    let full: Vec<(Instant, Instant)> = soak
        .windows
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.fault == Fault::DiskFull)
        .map(|w| (w.start, w.end.unwrap_or(w.start)))
        .collect();
    // What staticd said it lost: "staticd: access log: N lines not written: ...".
    let reported_lines: u64 = stderr
        .iter()
        .filter_map(|l| l.split("staticd: access log: ").nth(1))
        .filter_map(|rest| rest.split_once(" lines not written")?.0.parse::<u64>().ok())
        .sum();
    let reported = reported_lines > 0;
    let answered: Vec<(u64, Instant)> = soak
        .answered
        .lock()
        .unwrap()
        .iter()
        .map(|x| (x.id, x.at))
        .collect();
    let (mut once, mut lost_full, mut missing, mut twice) = (0u64, 0u64, Vec::new(), Vec::new());
    for (id, at) in &answered {
        match seen.get(id).copied().unwrap_or(0) {
            1 => once += 1,
            0 if full.iter().any(|(s, e)| {
                *at + Duration::from_secs(2) >= *s && *at <= *e + Duration::from_secs(2)
            }) =>
            {
                lost_full += 1
            }
            0 => missing.push(*id),
            n => twice.push((*id, n)),
        }
    }
    for (id, n) in seen.iter().filter(|(_, n)| **n > 1) {
        if !answered.iter().any(|(a, _)| a == id) {
            twice.push((*id, *n));
        }
    }
    if lost_full > 0 {
        if reported_lines >= lost_full {
            for _ in 0..lost_full {
                soak.explained("DiskFull: access-log line lost while the log disk was full (the server said so)");
            }
        } else {
            soak.unexplained(
                "access-log lines lost silently while the log disk was full",
                format!(
                    "{lost_full} answered requests not in the log; staticd reported {reported_lines} lines not written"
                ),
            );
        }
    }
    if !missing.is_empty() {
        soak.unexplained(
            "answered request missing from the access log",
            format!(
                "{} ids, e.g. {:?}",
                missing.len(),
                &missing[..missing.len().min(10)]
            ),
        );
    }
    if !twice.is_empty() {
        soak.unexplained(
            "request logged more than once",
            format!(
                "{} ids, e.g. {:?}",
                twice.len(),
                &twice[..twice.len().min(10)]
            ),
        );
    }
    if !malformed.is_empty() {
        let cause = if !full.is_empty() && reported {
            "DiskFull: partial access-log line (write cut by ENOSPC, reported)"
        } else {
            "malformed access-log line"
        };
        if cause.starts_with("DiskFull") {
            for _ in &malformed {
                soak.explained(cause);
            }
        } else {
            soak.unexplained(
                cause,
                format!(
                    "{} lines, e.g. {:?}",
                    malformed.len(),
                    &malformed[..malformed.len().min(3)]
                ),
            );
        }
    }

    // 2. Growth after warm-up, per server (the newest process after a
    // rolling restart), against the baseline at the end of warm-up.
    let warm = (run.as_secs_f64() / 6.0).clamp(30.0, 300.0);
    let mut bounds = Vec::new();
    for name in ["plain", "tls"] {
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, s)| s)
            .collect();
        let Some(base) = mine.iter().find(|s| s.t >= warm) else {
            soak.note(format!("{name}: no sample after the {warm:.0} s warm-up"));
            continue;
        };
        let rss_max =
            base.rss_kib + (RSS_GROWTH_MIB * 1024).max(base.rss_kib * RSS_GROWTH_PCT / 100);
        let thr_max = base.threads + THREAD_GROWTH;
        bounds.push(serde_json::json!({
            "server": name, "baseline_t": base.t, "baseline_rss_kib": base.rss_kib, "rss_max_kib": rss_max,
            "baseline_fds": base.fds, "baseline_client_conns": base.client_conns,
            "fd_bound": format!("{} + {FD_GROWTH} + (client connections - {})", base.fds, base.client_conns),
            "baseline_threads": base.threads, "threads_max": thr_max,
        }));
        for s in mine.iter().filter(|s| s.t > base.t) {
            let fd_max = base.fds as i64 + FD_GROWTH + (s.client_conns - base.client_conns).max(0);
            if s.rss_kib > rss_max {
                soak.unexplained(
                    "RSS growth beyond bound",
                    format!(
                        "{name} pid {} at {:.0} s: {} KiB > {rss_max} KiB",
                        s.pid, s.t, s.rss_kib
                    ),
                );
            }
            if s.fds as i64 > fd_max {
                soak.unexplained(
                    "descriptor growth beyond bound",
                    format!(
                        "{name} pid {} at {:.0} s: {} fds > {fd_max}",
                        s.pid, s.t, s.fds
                    ),
                );
            }
            if s.threads > thr_max {
                soak.unexplained(
                    "thread growth beyond bound",
                    format!(
                        "{name} pid {} at {:.0} s: {} threads > {thr_max}",
                        s.pid, s.t, s.threads
                    ),
                );
            }
        }
    }

    // 3. The good client's p99 in every sample window.
    // "Every minute's sample": 60 s windows (the last may be shorter).
    let window = 60.0;
    let _ = short;
    let good = soak.good.lock().unwrap().clone();
    let mut p99s = Vec::new();
    let n_windows = (run.as_secs_f64() / window).ceil() as usize;
    for w in 0..n_windows {
        let (lo, hi) = (w as f64 * window, (w + 1) as f64 * window);
        let xs: Vec<f64> = good
            .iter()
            .filter(|(t, _)| (lo..hi).contains(&soak.secs(*t)))
            .map(|(_, d)| d.as_secs_f64() * 1000.0)
            .collect();
        let n = xs.len();
        let max = xs.iter().copied().fold(0.0, f64::max);
        if let Some(p) = p99(xs) {
            if p >= GOOD_P99_MS {
                soak.unexplained(
                    "good client p99 over 100 ms",
                    format!("window {lo:.0}-{hi:.0} s: p99 {p:.1} ms over {n} requests"),
                );
            }
            p99s.push(serde_json::json!({"from_s": lo, "to_s": hi, "requests": n, "p99_ms": p, "max_ms": max}));
        }
    }

    // 4. The summary.
    let t = soak.tally.lock().unwrap();
    let total: u64 = t.requests.values().sum();
    println!("\n==== soak: {:.1} minutes ====", run.as_secs_f64() / 60.0);
    println!(
        "requests by kind ({total} in all, {:.0}/s):",
        total as f64 / run.as_secs_f64()
    );
    for (k, n) in &t.requests {
        println!("  {n:9}  {k}");
    }
    println!("faults injected:");
    for (k, n) in &t.faults {
        println!("  {n:9}  {k}");
    }
    println!("explained failures and expected drops, by cause:");
    for (k, n) in &t.explained {
        println!("  {n:9}  {k}");
    }
    println!("UNEXPLAINED failures, by cause:");
    if t.unexplained.is_empty() {
        println!("          0");
    }
    for (k, n) in &t.unexplained {
        println!("  {n:9}  {k}");
    }
    for e in &t.examples {
        println!("      {e}");
    }
    println!(
        "access log: {} files, {lines} lines; {} answered ids: {once} exactly once, {} missing, {} more than once, {lost_full} lost while the disk was full (staticd reported {reported_lines} lines not written); {} malformed lines",
        logs.len(),
        answered.len(),
        missing.len(),
        twice.len(),
        malformed.len()
    );
    println!(
        "bounds after a {warm:.0} s warm-up: RSS <= baseline + max({RSS_GROWTH_MIB} MiB, {RSS_GROWTH_PCT}%), descriptors <= baseline + {FD_GROWTH} + growth in the driver's open connections, threads <= baseline + {THREAD_GROWTH}; good client p99 < {GOOD_P99_MS} ms in every {window:.0} s window"
    );
    println!("samples (t, server, pid, RSS MiB, fds, threads, driver connections):");
    let every = if short { 1 } else { 6 };
    for (i, (name, s)) in samples.iter().enumerate() {
        if (i / 2) % every == 0 || i + 2 >= samples.len() {
            println!(
                "  {:7.0} s  {name:5}  {:7}  {:7.1}  {:4}  {:3}  {:3}",
                s.t,
                s.pid,
                s.rss_kib as f64 / 1024.0,
                s.fds,
                s.threads,
                s.client_conns
            );
        }
    }
    let worst = p99s
        .iter()
        .filter_map(|x| x["p99_ms"].as_f64())
        .fold(0.0, f64::max);
    println!(
        "good client: {} requests, worst {window:.0} s-window p99 {worst:.1} ms",
        good.len()
    );
    let ok = t.unexplained.is_empty();
    println!("RESULT: {}", if ok { "PASS" } else { "FAIL" });

    // 5. JSON and SVG.
    let json = serde_json::json!({
        "minutes": run.as_secs_f64() / 60.0,
        "pass": ok,
        "requests": t.requests,
        "requests_total": total,
        "faults": t.faults,
        "explained": t.explained,
        "unexplained": t.unexplained,
        "unexplained_examples": t.examples,
        "notes": t.notes,
        "access_log": {"files": logs.len(), "lines": lines, "answered": answered.len(), "exactly_once": once,
            "missing": missing.len(), "more_than_once": twice.len(), "lost_while_disk_full": lost_full,
            "malformed": malformed.len(), "server_reported_lines_not_written": reported_lines},
        "bounds": {"rss_growth_mib": RSS_GROWTH_MIB, "rss_growth_pct": RSS_GROWTH_PCT, "fd_growth": FD_GROWTH,
            "thread_growth": THREAD_GROWTH, "good_p99_ms": GOOD_P99_MS, "warm_up_s": warm, "baselines": bounds},
        "good_client_windows": p99s,
        "samples": samples.iter().map(|(n, s)| serde_json::json!({"server": n, "t": s.t, "pid": s.pid, "rss_kib": s.rss_kib, "fds": s.fds, "threads": s.threads, "client_conns": s.client_conns})).collect::<Vec<_>>(),
    });
    let jpath = a.out.join("soak.json");
    if let Err(e) = std::fs::write(&jpath, serde_json::to_string_pretty(&json).unwrap()) {
        eprintln!("soak: {}: {e}", jpath.display());
    }
    let spath = a.out.join("soak.svg");
    if let Err(e) = svg(&spath, samples, run) {
        eprintln!("soak: {}: {e}", spath.display());
    }
    println!("soak: wrote {} and {}", jpath.display(), spath.display());
    ok
}

fn svg(
    path: &std::path::Path,
    samples: &[(String, Sample)],
    run: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(280);
    let minutes = run.as_secs_f64() / 60.0;
    let series = |name: &str, f: &dyn Fn(&Sample) -> f64| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, s)| (s.t / 60.0, f(s)))
            .collect()
    };
    type Metric<'a> = &'a dyn Fn(&Sample) -> f64;
    let panels: [(&str, Metric, _); 2] = [
        ("RSS (MiB)", &|s: &Sample| s.rss_kib as f64 / 1024.0, top),
        ("open descriptors", &|s: &Sample| s.fds as f64, bottom),
    ];
    for (label, f, area) in panels {
        let ymax = samples.iter().map(|(_, s)| f(s)).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("staticd soak: {label}"), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..minutes.max(0.1), 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("minutes")
            .y_desc(label)
            .light_line_style(WHITE)
            .draw()?;
        for (name, colour) in [("plain", BLUE), ("tls", RED)] {
            let pts = series(name, f);
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))?
                .label(format!(
                    "{name} (HTTP{})",
                    if name == "tls" { "S" } else { "" }
                ))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 2, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[allow(dead_code)]
fn _unused(_: BTreeMap<u8, u8>) {}
