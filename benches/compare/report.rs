//! What a run produced: the records, the text table, results.json and the
//! SVG chart.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use crate::docroot::label;
use crate::load::{Mode, Outcome, Tool};
use crate::servers::{Description, Kind};

/// One server in one cell.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub tool: Tool,
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
    /// utime + stime of the server's processes over the cell.
    pub server_cpu_seconds: f64,
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
}

impl Report {
    /// The (tool, mode, connections) blocks that have results, in table order.
    fn blocks(&self) -> Vec<(Tool, Mode, u32)> {
        let mut out: Vec<(Tool, Mode, u32)> = Vec::new();
        for tool in [Tool::Wrk, Tool::Ab] {
            for &mode in &[Mode::KeepAlive, Mode::Close] {
                let mut conns: Vec<u32> = self
                    .measurements
                    .iter()
                    .filter(|m| m.tool == tool && m.mode == mode)
                    .map(|m| m.connections)
                    .collect();
                conns.sort_unstable();
                conns.dedup();
                out.extend(conns.into_iter().map(|c| (tool, mode, c)));
            }
        }
        out
    }

    fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }

    fn find(&self, block: (Tool, Mode, u32), size: u64, server: &str) -> Option<&Measurement> {
        self.measurements.iter().find(|m| {
            (m.tool, m.mode, m.connections) == block && m.size == size && m.server == server
        })
    }

    fn sizes(&self, block: (Tool, Mode, u32)) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .measurements
            .iter()
            .filter(|m| (m.tool, m.mode, m.connections) == block)
            .map(|m| m.size)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// The best requests/s among the peers (not staticd, not the ceiling).
    fn best_peer(&self, block: (Tool, Mode, u32), size: u64) -> Option<(f64, String)> {
        self.measurements
            .iter()
            .filter(|m| (m.tool, m.mode, m.connections) == block && m.size == size)
            .filter(|m| kind_of(&m.server).is_some_and(Kind::is_peer))
            .filter_map(|m| Some((m.outcome.as_ref()?.requests_per_second, m.server.clone())))
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
        let names = self.server_names();
        for block in self.blocks() {
            let (tool, mode, conns) = block;
            let tool_name = match tool {
                Tool::Wrk => "wrk",
                Tool::Ab => "ab (classic)",
            };
            let title = format!("{tool_name}, {}, {conns} connection(s)", mode.label());
            let sizes = self.sizes(block);
            let secs = self
                .measurements
                .iter()
                .find(|m| (m.tool, m.mode, m.connections) == block)
                .map_or(0.0, |m| m.cell_seconds);
            let mut notes = Vec::new();

            let mut rows = Vec::new();
            for &size in &sizes {
                let best = self.best_peer(block, size);
                let mut row = vec![label(size)];
                for name in &names {
                    let cell = match self.find(block, size, name) {
                        None => "-".to_string(),
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
                            row.push(self.find(block, size, name).map_or("-".into(), f));
                        }
                        row
                    })
                    .collect()
            };
            let header: Vec<String> = std::iter::once("size".to_string())
                .chain(names.iter().cloned())
                .collect();

            let _ = writeln!(out, "-- {title}: latency p50 / p99 --");
            render(
                &mut out,
                &header,
                &metric(&|m| match &m.outcome {
                    Some(o) => format!("{} / {}", latency(o.p50_us), latency(o.p99_us)),
                    None => "-".into(),
                }),
            );
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
                "-- {title}: server CPU time per request, us (utime+stime of its processes) --"
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
        out
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
        let names = self.server_names();
        for (block, area) in blocks.iter().zip(areas.iter()) {
            self.panel(*block, area, &names)
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())
    }

    fn panel(
        &self,
        block: (Tool, Mode, u32),
        area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
        names: &[String],
    ) -> Result<(), Box<dyn std::error::Error + '_>> {
        let (tool, mode, conns) = block;
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
        let tool_name = match tool {
            Tool::Wrk => "wrk",
            Tool::Ab => "ab",
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{tool_name}, {}, {conns} connection(s)", mode.label()),
                ("sans-serif", 18),
            )
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
