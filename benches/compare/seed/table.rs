//! One seed table: rows as the article had them (sizes, or concurrency and
//! size), a column of requests/s per server, and for each staticd column
//! its ratio to the best other column of the row. Printed as text and
//! written as JSON.

use serde::Serialize;

use crate::load::{Mode, Outcome, Tool};

/// A column: one server (or a cache in front of one).
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    pub name: String,
    /// One of staticd's: it gets a ratio column; the others are what the
    /// ratio is taken against.
    pub staticd: bool,
    /// Version and how it ran (or why it failed to start).
    pub about: String,
}

/// What one cell measured.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// The load client's requests/s, with its errors (if any).
    Measured {
        requests_per_second: f64,
        /// Completed responses.
        requests: u64,
        errors: u64,
        #[serde(skip_serializing_if = "String::is_empty")]
        error_kinds: String,
        /// Fewer responses completed than there were clients (a round of
        /// 10 MB responses to 500 clients outlasts the cell):
        /// requests_per_second is then the bytes ab received, partial
        /// responses included, per second, over the file's size.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        estimated_from_bytes: bool,
    },
    /// The server failed to start, died, or the client failed.
    Failed(String),
    /// Not run (interrupted).
    NotRun,
}

impl Value {
    /// What a load client's run says; for ab, when fewer than `clients`
    /// responses completed, requests/s from the bytes it received.
    pub fn from_result(r: Result<Outcome, String>, size: u64, clients: u32) -> Value {
        let bytes = match &r {
            Ok(o) if o.requests >= u64::from(clients) => None,
            Ok(o) => o.bytes_per_second,
            Err(text) => ab_bytes_per_second(text),
        };
        if let Some(bps) = bytes.filter(|b| *b > 0.0 && size > 0) {
            let o = r.unwrap_or_default();
            return Value::Measured {
                requests_per_second: bps / size as f64,
                requests: o.requests,
                errors: o.error_count(),
                error_kinds: o.describe_errors(),
                estimated_from_bytes: true,
            };
        }
        match r {
            Ok(o) => Value::Measured {
                requests_per_second: o.requests_per_second,
                requests: o.requests,
                errors: o.error_count(),
                error_kinds: o.describe_errors(),
                estimated_from_bytes: false,
            },
            Err(e) => Value::Failed(e),
        }
    }

    pub fn rps(&self) -> Option<f64> {
        match self {
            Value::Measured {
                requests_per_second,
                requests,
                estimated_from_bytes,
                ..
            } if *requests > 0 || *estimated_from_bytes => Some(*requests_per_second),
            _ => None,
        }
    }

    fn estimated(&self) -> bool {
        matches!(
            self,
            Value::Measured {
                estimated_from_bytes: true,
                ..
            }
        )
    }

    /// "12345", "12345!" (with errors), "failed: reason" (cut short).
    fn text(&self) -> String {
        match self {
            Value::Measured {
                requests_per_second,
                errors,
                estimated_from_bytes,
                ..
            } => format!(
                "{}{requests_per_second:.0}{}",
                if *estimated_from_bytes { "~" } else { "" },
                if *errors > 0 { "!" } else { "" }
            ),
            Value::Failed(why) => {
                // The first clause; the whole reason is in the column's
                // line under the table and in the JSON.
                let first = why.lines().next().unwrap_or("");
                let first = first.split(';').next().unwrap_or("").trim();
                let short: String = first.chars().take(34).collect();
                let cut = if short.len() < first.len() { "..." } else { "" };
                format!("failed: {short}{cut}")
            }
            Value::NotRun => "-".into(),
        }
    }
}

/// A row: one cell per column, in column order.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub label: String,
    pub tool: Tool,
    pub mode: Mode,
    pub https: bool,
    pub size: u64,
    pub connections: u32,
    pub cell_seconds: f64,
    pub cells: Vec<Value>,
    /// For each staticd column (in column order): its requests/s over the
    /// best other column's in this row.
    pub ratios: Vec<Option<f64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Table {
    /// Short name: fnord, tomcat, ab-keepalive, accelerators, accelerators-https.
    pub id: &'static str,
    pub title: String,
    /// The method, as the article ran it and as rerun here.
    pub method: String,
    /// Header of the row-label column ("size", "clients  size").
    pub row_header: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    /// What a reader needs: the backend used, cache-hit checks, caps.
    pub notes: Vec<String>,
    /// One line per server or tool that is missing: "skipped: ...".
    pub skipped: Vec<String>,
}

impl Table {
    /// Fills every row's ratio columns.
    pub fn compute_ratios(&mut self) {
        let staticd: Vec<bool> = self.columns.iter().map(|c| c.staticd).collect();
        for row in &mut self.rows {
            let best = row
                .cells
                .iter()
                .zip(&staticd)
                .filter(|(_, s)| !**s)
                .filter_map(|(v, _)| v.rps())
                .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
            row.ratios = row
                .cells
                .iter()
                .zip(&staticd)
                .filter(|(_, s)| **s)
                .map(|(v, _)| Some(v.rps()? / best.filter(|b| *b > 0.0)?))
                .collect();
        }
    }

    /// The table as text: title, method, header, rows, notes, skips.
    pub fn text(&self) -> String {
        let ratio_names: Vec<String> = self
            .columns
            .iter()
            .filter(|c| c.staticd)
            .map(|c| format!("{} / best", c.name))
            .collect();
        let mut header = vec![self.row_header.clone()];
        header.extend(self.columns.iter().map(|c| c.name.clone()));
        header.extend(ratio_names);
        let mut lines: Vec<Vec<String>> = vec![header];
        for row in &self.rows {
            let mut line = vec![row.label.clone()];
            line.extend(row.cells.iter().map(Value::text));
            line.extend(
                row.ratios
                    .iter()
                    .map(|r| r.map_or("-".into(), |r| format!("{r:.2}x"))),
            );
            lines.push(line);
        }
        let n = lines[0].len();
        let widths: Vec<usize> = (0..n)
            .map(|i| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = format!("{}\n{}\n\n", self.title, self.method);
        for line in &lines {
            let mut text = String::new();
            for (i, cell) in line.iter().enumerate() {
                if i == 0 {
                    text.push_str(&format!("{cell:<w$}", w = widths[i]));
                } else {
                    text.push_str(&format!("  {cell:>w$}", w = widths[i]));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        if self.rows.iter().any(|r| {
            r.cells
                .iter()
                .any(|c| matches!(c, Value::Measured { errors, .. } if *errors > 0))
        }) {
            out.push_str("! the client counted errors in this cell (see seed-tables.json)\n");
        }
        if self
            .rows
            .iter()
            .any(|r| r.cells.iter().any(Value::estimated))
        {
            out.push_str("~ fewer responses completed than there were clients: requests/s estimated from the bytes ab received (partial responses included) over the file size\n");
        }
        for note in &self.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        for col in &self.columns {
            out.push_str(&format!("  {}: {}\n", col.name, col.about));
        }
        for s in &self.skipped {
            out.push_str(&format!("{s}\n"));
        }
        out
    }
}

/// ab's "Total transferred" over its "Time taken for tests", from output
/// it printed without a "Requests per second" (no response completed),
/// which load::ab returns as an error carrying the output.
fn ab_bytes_per_second(text: &str) -> Option<f64> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            l.trim()
                .strip_prefix(name)?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
    };
    let bytes = field("Total transferred:")?;
    let seconds = field("Time taken for tests:").filter(|s| *s > 0.0)?;
    Some(bytes / seconds)
}
