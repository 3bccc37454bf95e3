//! The charts: one SVG per protocol part (HTTP/1.1 keep-alive, HTTP/1.1
//! close, HTTPS, HTTP/2), requests/s (median of the rounds, whiskers from
//! the slowest to the fastest round) against file size, sized for a README
//! (800 px wide). staticd is drawn last, thicker and labelled at its line;
//! the peers in muted colours with a legend beside the plot, so that it
//! covers no line; the ceiling dashed.

use std::error::Error;
use std::path::Path;

use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::load::{Mode, Tool};
use crate::report::{kind_of, short_size, Block, Report};
use crate::servers::{Kind, Proto};

const WIDTH: u32 = 800;
const TITLE_HEIGHT: u32 = 40;
const PANEL_HEIGHT: u32 = 470;
const LEGEND_WIDTH: u32 = 150;
const FONT: &str = "sans-serif";
/// About how wide and high "staticd" is in bold 17 px, and how far from
/// its point it is written, in pixels.
const LABEL_WIDTH: f64 = 74.0;
const LABEL_HEIGHT: f64 = 17.0;
const LABEL_GAP: f64 = 8.0;

/// One chart file and the blocks it draws, a panel each.
struct Part {
    file: &'static str,
    title: &'static str,
    blocks: Vec<Block>,
}

/// Every file a run may write, so that those of parts not run this time
/// (or the single chart.svg of older harnesses) do not stay behind.
const FILES: [&str; 5] = [
    "chart-http1-keepalive.svg",
    "chart-http1-close.svg",
    "chart-https.svg",
    "chart-h2.svg",
    "chart.svg",
];

/// One server's line: (size, median, slowest round, fastest round).
struct Line {
    name: String,
    kind: Option<Kind>,
    points: Vec<(f64, f64, f64, f64)>,
}

impl Report {
    /// Writes the charts that have data into `dir`; returns their names.
    pub fn write_charts(&self, dir: &Path) -> Result<Vec<String>, String> {
        for name in FILES {
            let _ = std::fs::remove_file(dir.join(name));
        }
        let mut written = Vec::new();
        for part in self.parts() {
            if part.blocks.is_empty() {
                continue;
            }
            self.chart(&dir.join(part.file), &part)
                .map_err(|e| format!("{}: {e}", part.file))?;
            written.push(part.file.to_string());
        }
        Ok(written)
    }

    fn parts(&self) -> Vec<Part> {
        let keep_alive = self.chart_block(Tool::Wrk, Mode::KeepAlive, Proto::Http);
        let close = self.chart_block(Tool::Wrk, Mode::Close, Proto::Http);
        let https = self
            .chart_block(Tool::Wrk, Mode::KeepAlive, Proto::Https)
            .or_else(|| self.chart_block(Tool::Wrk, Mode::Close, Proto::Https));
        let h2 = [Proto::H2, Proto::H2c]
            .into_iter()
            .filter_map(|p| self.chart_block(Tool::H2load, Mode::KeepAlive, p))
            .collect();
        vec![
            Part {
                file: FILES[0],
                title: "HTTP/1.1 keep-alive: requests/s by file size",
                blocks: keep_alive.into_iter().collect(),
            },
            Part {
                file: FILES[1],
                title: "HTTP/1.1 Connection: close (a connection per request): requests/s",
                blocks: close.into_iter().collect(),
            },
            Part {
                file: FILES[2],
                title: "HTTPS (HTTP/1.1 over TLS): requests/s by file size",
                blocks: https.into_iter().collect(),
            },
            Part {
                file: FILES[3],
                title: "HTTP/2: requests/s by file size",
                blocks: h2,
            },
        ]
    }

    /// The block a chart shows for a part: 50 connections if measured
    /// (the main cell), else the one with the most sizes.
    fn chart_block(&self, tool: Tool, mode: Mode, proto: Proto) -> Option<Block> {
        self.blocks()
            .into_iter()
            .filter(|b| b.0 == tool && b.1 == mode && b.3 == proto)
            .max_by_key(|&b| (b.2 == 50, self.sizes(b).len(), b.4, std::cmp::Reverse(b.2)))
    }

    fn chart(&self, path: &Path, part: &Part) -> Result<(), String> {
        let height = TITLE_HEIGHT + PANEL_HEIGHT * part.blocks.len() as u32;
        let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let body = root
            .titled(part.title, (FONT, 21).into_font().style(FontStyle::Bold))
            .map_err(|e| e.to_string())?;
        let panels = body.split_evenly((part.blocks.len(), 1));
        for (block, area) in part.blocks.iter().zip(panels.iter()) {
            self.panel(*block, area).map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())
    }

    fn lines(&self, block: Block) -> Vec<Line> {
        self.block_names(block)
            .into_iter()
            .map(|name| {
                let points = self
                    .sizes(block)
                    .into_iter()
                    .filter_map(|size| {
                        let rps = self.find(block, size, &name)?.requests_per_second?;
                        (rps.median > 0.0).then_some((size as f64, rps.median, rps.min, rps.max))
                    })
                    .collect();
                Line {
                    kind: kind_of(&name),
                    name,
                    points,
                }
            })
            .filter(|l| !l.points.is_empty())
            .collect()
    }

    fn panel<'a>(
        &self,
        block: Block,
        area: &DrawingArea<SVGBackend<'a>, Shift>,
    ) -> Result<(), Box<dyn Error + 'a>> {
        let mut lines = self.lines(block);
        let rounds = self
            .summaries
            .iter()
            .filter(|s| s.block() == block)
            .map(|s| s.rounds)
            .max()
            .unwrap_or(1);
        let secs = self
            .measurements
            .iter()
            .find(|m| (m.tool, m.mode, m.connections) == (block.0, block.1, block.2))
            .map_or(0.0, |m| m.cell_seconds);
        let subtitle = format!(
            "{}, {secs:.1} s cells, {}",
            cell_name(block),
            if rounds > 1 {
                format!("median of {rounds} rounds (whiskers: slowest to fastest)")
            } else {
                "1 round".to_string()
            }
        );
        let area = area.titled(&subtitle, (FONT, 15))?;
        let (plot, legend) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
        if lines.is_empty() {
            return Ok(());
        }
        let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let (xmin, xmax) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
        // A round that completed nothing (0 req/s) has no place on a log
        // scale: its whisker runs to the bottom of the axis.
        let ys = lines.iter().flat_map(|l| {
            l.points
                .iter()
                .flat_map(|p| [p.1, p.2, p.3])
                .filter(|&y| y > 0.0)
        });
        let (ymin, ymax) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
        let (xmin, xmax) = (xmin / 2.0, xmax * 2.0);
        let mut chart = ChartBuilder::on(&plot);
        chart
            .margin_left(8)
            .margin_right(16)
            .margin_top(8)
            .margin_bottom(4)
            .x_label_area_size(44)
            .y_label_area_size(64);
        // Requests/s spans decades when the sizes do: a log scale keeps the
        // large files' lines off the floor. Within one decade, linear from 0.
        if ymax / ymin > 8.0 {
            let floor = ymin / 2.0;
            for l in &mut lines {
                for p in &mut l.points {
                    p.2 = p.2.max(floor);
                }
            }
            let mut c = chart
                .build_cartesian_2d((xmin..xmax).log_scale(), (floor..ymax * 2.0).log_scale())?;
            draw(&mut c, &lines, rounds > 1)?;
        } else {
            let mut c = chart.build_cartesian_2d((xmin..xmax).log_scale(), 0.0..ymax * 1.15)?;
            draw(&mut c, &lines, rounds > 1)?;
        }
        draw_legend(&legend, &lines)?;
        Ok(())
    }
}

/// "wrk, keep-alive, 50 connections"; "h2 (TLS): h2load, 50 connections x
/// 10 streams".
fn cell_name((tool, mode, conns, proto, streams): Block) -> String {
    let tool = match tool {
        Tool::Wrk => "wrk",
        Tool::Ab => "ab",
        Tool::Resume => "resumed handshakes",
        Tool::H2load => "h2load",
        Tool::Oha => "oha",
        Tool::H3load => "h3load",
    };
    match proto {
        Proto::H2 => format!("h2 (TLS): {tool}, {conns} connections x {streams} streams"),
        Proto::H2c => format!("h2c (cleartext): {tool}, {conns} connections x {streams} streams"),
        _ => format!("{tool}, {}, {conns} connections", mode.label()),
    }
}

/// A colour per server: staticd strong, the others muted and apart.
fn colour(kind: Option<Kind>) -> RGBColor {
    match kind {
        Some(Kind::Staticd) => RGBColor(214, 39, 40),
        Some(Kind::StaticdUring) => RGBColor(230, 145, 56),
        Some(Kind::StaticdInetd) => RGBColor(196, 120, 170),
        Some(Kind::Nginx) => RGBColor(76, 114, 176),
        Some(Kind::Lighttpd) => RGBColor(85, 160, 100),
        Some(Kind::Apache2) => RGBColor(129, 114, 178),
        Some(Kind::H2o) => RGBColor(150, 120, 80),
        Some(Kind::Caddy) => RGBColor(23, 160, 175),
        Some(Kind::Sws) => RGBColor(170, 170, 40),
        // Not in the matrix's charts: the inetd cell and seed table 1 only.
        Some(Kind::Eris) => RGBColor(120, 90, 60),
        Some(Kind::Ceiling) | None => RGBColor(110, 110, 110),
    }
}

fn is_staticd(l: &Line) -> bool {
    l.kind == Some(Kind::Staticd)
}

fn is_ceiling(l: &Line) -> bool {
    l.kind == Some(Kind::Ceiling)
}

type Chart<'a, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, Y>>;

fn draw<'a, Y>(
    chart: &mut Chart<'a, Y>,
    lines: &[Line],
    whiskers: bool,
) -> Result<(), Box<dyn Error + 'a>>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    // On a log scale plotters labels the powers of ten and draws light
    // lines at 2 to 9 times them: labels there would crowd each other.
    chart
        .configure_mesh()
        .x_desc("file size")
        .y_desc("requests/s")
        .x_label_formatter(&|v| short_size(*v))
        .y_label_formatter(&|v| short_count(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()?;
    // The ceiling first, then the others, staticd last: on top.
    let mut order: Vec<&Line> = lines.iter().collect();
    order.sort_by_key(|l| (!is_ceiling(l), is_staticd(l)));
    for line in order {
        let c = colour(line.kind);
        let width = if is_staticd(line) { 4 } else { 2 };
        let pts: Vec<(f64, f64)> = line.points.iter().map(|p| (p.0, p.1)).collect();
        if is_ceiling(line) {
            chart.draw_series(DashedLineSeries::new(
                pts.clone(),
                8,
                6,
                c.stroke_width(width),
            ))?;
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(width)))?;
        }
        if whiskers {
            chart.draw_series(line.points.iter().map(|&(x, _, lo, hi)| {
                PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(width.min(3)))
            }))?;
        }
        let r = if is_staticd(line) { 5 } else { 3 };
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, r, c.filled())))?;
    }
    if let Some(staticd) = lines.iter().find(|l| is_staticd(l)) {
        label_line(chart, staticd, lines)?;
    }
    Ok(())
}

/// Writes staticd's name beside its line, above or below one of its
/// points (centred on an inner point, starting at the first, ending at
/// the last): of those places inside the plot that its own line does not
/// run through, the one farthest from every other line and whisker.
fn label_line<'a, Y>(
    chart: &mut Chart<'a, Y>,
    line: &Line,
    lines: &[Line],
) -> Result<(), Box<dyn Error + 'a>>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let px = |x: f64, y: f64| {
        let (a, b) = chart.backend_coord(&(x, y));
        (f64::from(a), f64::from(b))
    };
    let own: Vec<(f64, f64)> = line.points.iter().map(|p| px(p.0, p.1)).collect();
    let others: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .filter(|l| !is_staticd(l))
        .map(|l| l.points.iter().map(|p| px(p.0, p.1)).collect())
        .collect();
    // (x, top, bottom) of every other whisker.
    let whiskers: Vec<(f64, f64, f64)> = lines
        .iter()
        .filter(|l| !is_staticd(l))
        .flat_map(|l| l.points.iter())
        .map(|p| {
            let (x, bottom) = px(p.0, p.2);
            (x, px(p.0, p.3).1, bottom)
        })
        .collect();
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let n = line.points.len();
    // Where the text could go: beside a point (above its fastest round or
    // below its slowest), or over or under the middle of a segment, far
    // enough from the segment for its slope.
    let mut spots: Vec<Spot> = Vec::new();
    for (i, &(x, _, lo, hi)) in line.points.iter().enumerate() {
        let (cx, cy) = own[i];
        let (left, right, h) = match i {
            0 if n > 1 => (cx, cx + LABEL_WIDTH, HPos::Left),
            i if i + 1 == n && n > 1 => (cx - LABEL_WIDTH, cx, HPos::Right),
            _ => (cx - LABEL_WIDTH / 2.0, cx + LABEL_WIDTH / 2.0, HPos::Center),
        };
        let inner = i > 0 && i + 1 < n;
        let y = px(x, hi).1 - LABEL_GAP;
        spots.push(Spot::new(
            i,
            (0.0, y - cy),
            h,
            VPos::Bottom,
            (left, right),
            inner,
        ));
        let y = px(x, lo).1 + LABEL_GAP;
        spots.push(Spot::new(
            i,
            (0.0, y - cy),
            h,
            VPos::Top,
            (left, right),
            inner,
        ));
    }
    for (i, w) in own.windows(2).enumerate() {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x1 - x0 < LABEL_WIDTH + 20.0 {
            continue;
        }
        let (mx, my) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
        let off = LABEL_GAP + ((y1 - y0) / (x1 - x0)).abs() * LABEL_WIDTH / 2.0;
        let across = (mx - LABEL_WIDTH / 2.0, mx + LABEL_WIDTH / 2.0);
        for (dy, v) in [(-off, VPos::Bottom), (off, VPos::Top)] {
            spots.push(Spot::new(
                i,
                (mx - x0, my + dy - y0),
                HPos::Center,
                v,
                across,
                true,
            ));
        }
    }
    let mut best: Option<(f64, &Spot)> = None;
    for spot in &spots {
        let (left, right, top, bottom) = spot.area(own[spot.point]);
        let inside = left >= f64::from(xs.start)
            && right <= f64::from(xs.end)
            && top >= f64::from(ys.start)
            && bottom <= f64::from(ys.end);
        if !inside || clearance(&own, (left, right, top, bottom)) < 3.0 {
            continue;
        }
        let mut room = others
            .iter()
            .map(|o| clearance(o, (left, right, top, bottom)))
            .fold(f64::INFINITY, f64::min);
        for &(wx, wtop, wbottom) in &whiskers {
            if (left..=right).contains(&wx) {
                room = room.min(gap((wtop, wbottom), (top, bottom)));
            }
        }
        // Clear by 30 px is clear enough; then away from the ends, which
        // crowd the axes.
        let score = room.min(30.0) + if spot.inner { 1.0 } else { 0.0 };
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, spot));
        }
    }
    // Nowhere clear of its own line (a zigzag): below the first point.
    let fallback = Spot::new(
        0,
        (0.0, LABEL_GAP),
        HPos::Center,
        VPos::Top,
        (0.0, 0.0),
        false,
    );
    let spot = best.map_or(&fallback, |(_, s)| s);
    let (x, y, _, _) = line.points[spot.point];
    let c = colour(line.kind);
    let style = TextStyle::from((FONT, 17).into_font().style(FontStyle::Bold))
        .color(&c)
        .pos(Pos::new(spot.h, spot.v));
    chart.draw_series(std::iter::once(
        EmptyElement::at((x, y))
            + Text::new(
                line.name.clone(),
                (spot.offset.0 as i32, spot.offset.1 as i32),
                style,
            ),
    ))?;
    Ok(())
}

/// A place for staticd's name: a pixel offset from one of its points, how
/// the text hangs from it, and the text's horizontal extent relative to
/// that point.
struct Spot {
    point: usize,
    offset: (f64, f64),
    h: HPos,
    v: VPos,
    across: (f64, f64),
    inner: bool,
}

impl Spot {
    /// `across`: the text's left and right edges in absolute pixels.
    fn new(
        point: usize,
        offset: (f64, f64),
        h: HPos,
        v: VPos,
        across: (f64, f64),
        inner: bool,
    ) -> Spot {
        Spot {
            point,
            offset,
            h,
            v,
            across,
            inner,
        }
    }

    /// (left, right, top, bottom) in pixels, given the point's position.
    fn area(&self, (_, py): (f64, f64)) -> (f64, f64, f64, f64) {
        let y = py + self.offset.1;
        let (top, bottom) = match self.v {
            VPos::Bottom => (y - LABEL_HEIGHT, y),
            _ => (y, y + LABEL_HEIGHT),
        };
        (self.across.0, self.across.1, top, bottom)
    }
}

/// How far, in pixels, a polyline stays from a box (left, right, top,
/// bottom) over the box's width: 0 if it runs through it.
fn clearance(poly: &[(f64, f64)], (left, right, top, bottom): (f64, f64, f64, f64)) -> f64 {
    let mut least = f64::INFINITY;
    let mut x = left;
    while x <= right {
        if let Some(y) = poly.windows(2).find_map(|w| {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            ((x0..=x1).contains(&x) && x1 > x0).then(|| y0 + (y1 - y0) * (x - x0) / (x1 - x0))
        }) {
            least = least.min(gap((y, y), (top, bottom)));
        }
        x += 2.0;
    }
    for &(px, py) in poly {
        if (left..=right).contains(&px) {
            least = least.min(gap((py, py), (top, bottom)));
        }
    }
    least
}

/// The vertical distance between two spans (top, bottom); 0 if they overlap.
fn gap((a0, a1): (f64, f64), (b0, b1): (f64, f64)) -> f64 {
    if a1 < b0 {
        b0 - a1
    } else if b1 < a0 {
        a0 - b1
    } else {
        0.0
    }
}

/// The legend, in the strip right of the plot: a line sample and the name
/// of each server, in table order.
fn draw_legend<'a>(
    area: &DrawingArea<SVGBackend<'a>, Shift>,
    lines: &[Line],
) -> Result<(), Box<dyn Error + 'a>> {
    let mut y = 20;
    for line in lines {
        let c = colour(line.kind);
        let width = if is_staticd(line) { 4 } else { 2 };
        let sample = [(4, y), (30, y)];
        if is_ceiling(line) {
            area.draw(&DashedPathElement::new(sample, 6, 4, c.stroke_width(width)))?;
        } else {
            area.draw(&PathElement::new(sample.to_vec(), c.stroke_width(width)))?;
        }
        let font = if is_staticd(line) {
            (FONT, 15).into_font().style(FontStyle::Bold)
        } else {
            (FONT, 15).into_font()
        };
        let style = TextStyle::from(font)
            .color(&RGBColor(40, 40, 40))
            .pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(line.name.clone(), (38, y), style))?;
        y += 24;
    }
    Ok(())
}

/// "80k", "2.5k", "1k", "172".
fn short_count(v: f64) -> String {
    let (n, unit) = match v {
        v if v >= 1e6 => (v / 1e6, "M"),
        v if v >= 1e3 => (v / 1e3, "k"),
        v => (v, ""),
    };
    let n = format!("{n:.1}");
    format!("{}{unit}", n.trim_end_matches(".0"))
}
