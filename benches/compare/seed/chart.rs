//! Table 1 as fnord's page drew it: requests/s against file size, a line
//! per server, both axes logarithmic, staticd's lines drawn thicker.

use std::path::Path;

use plotters::prelude::*;

use super::table::Table;

pub fn write(table: &Table, path: &Path) -> Result<(), String> {
    draw(table, path).map_err(|e| e.to_string())
}

/// (column index, name, staticd's, (size, requests/s) points).
type Series<'a> = (usize, &'a str, bool, Vec<(f64, f64)>);

fn draw<'a>(table: &'a Table, path: &'a Path) -> Result<(), Box<dyn std::error::Error + 'a>> {
    let series: Vec<Series> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let pts = table
                .rows
                .iter()
                .filter_map(|r| Some((r.size as f64, r.cells.get(i)?.rps()?)))
                .collect();
            (i, c.name.as_str(), c.staticd, pts)
        })
        .collect();
    let points = || series.iter().flat_map(|s| s.3.iter().copied());
    let (Some(xmin), Some(xmax)) = (
        points().map(|p| p.0).reduce(f64::min),
        points().map(|p| p.0).reduce(f64::max),
    ) else {
        return Ok(());
    };
    let ymin = points().map(|p| p.1).fold(f64::MAX, f64::min);
    let ymax = points().map(|p| p.1).fold(0.0, f64::max);
    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "fnord-style shoot-out: ab -c 50, no keep-alive",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (xmin / 2.0..xmax * 2.0).log_scale(),
            (ymin / 4.0..ymax * 2.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("file size")
        .y_desc("requests/s")
        .x_label_formatter(&|v| crate::docroot::label(v.round() as u64))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for (i, name, staticd, pts) in series {
        if pts.is_empty() {
            continue;
        }
        let color = Palette99::pick(i).to_rgba();
        let width = if staticd { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))?
            .label(name)
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
    root.present()?;
    Ok(())
}
