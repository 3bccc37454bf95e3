//! The README and docs/ as a reader meets them: the README stays one page, every
//! relative link and anchor in them leads somewhere, and every figure the README quotes
//! is the performance doc's (docs/performance.md holds the one recorded run).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md, ARCHITECTURE.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    for entry in fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages
}

#[test]
fn the_readme_is_one_page() {
    let len = fs::metadata(root().join("README.md")).unwrap().len();
    assert!(len <= 12 * 1024, "README.md is {len} bytes, over 12 KB");
}

/// The targets of a page's Markdown links `[text](target)`, code spans left out.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Inline code may show link syntax without being a link.
        let mut prose = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                prose.push_str(part);
            }
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                targets.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    targets
}

/// The anchors GitHub gives a page's headings: lower case, spaces to hyphens, other
/// punctuation but hyphens and underscores dropped.
fn anchors(text: &str) -> HashSet<String> {
    let mut in_fence = false;
    let mut anchors = HashSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        let slug: String = heading
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                '-' | '_' => Some(c),
                c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        anchors.insert(slug);
    }
    anchors
}

#[test]
fn every_relative_link_and_anchor_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = match file {
                "" => page.clone(),
                _ => page.parent().unwrap().join(file),
            };
            if !dest.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
            } else if !anchor.is_empty()
                && dest.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&dest)).contains(anchor)
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The section of a Markdown page under `heading` (a `## ` line), up to the next one.
fn section<'t>(text: &'t str, heading: &str) -> &'t str {
    let start = text
        .find(&format!("\n## {heading}"))
        .unwrap_or_else(|| panic!("no section {heading:?}"));
    let body = &text[start + 1..];
    let end = body[3..].find("\n## ").map_or(body.len(), |e| e + 3);
    &body[..end]
}

/// Every number in `text` (digits, with thousands commas and a decimal part).
fn numbers(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let joins = (c == ',' || c == '.')
            && !current.is_empty()
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        if c.is_ascii_digit() || joins {
            current.push(c);
        } else if !current.is_empty() {
            found.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        found.push(current);
    }
    found
}

#[test]
fn every_figure_the_readme_quotes_is_the_performance_docs() {
    let readme = read(&root().join("README.md"));
    let perf = read(&root().join("docs/performance.md"));
    let known: HashSet<String> = numbers(&perf).into_iter().collect();
    let mut strays = Vec::new();
    for heading in ["How fast", "HTTP/3"] {
        for n in numbers(section(&readme, heading)) {
            // Port numbers and Alt-Svc's max-age are configuration, not figures.
            if ["8443", "86400", "3"].contains(&n.as_str()) {
                continue;
            }
            if !known.contains(&n) {
                strays.push(n);
            }
        }
    }
    assert!(
        strays.is_empty(),
        "README figures not in docs/performance.md: {strays:?}"
    );
}

/// The README's wrk table, cell by cell: the ratio in the performance doc's row for
/// that cell (the same numbers in the wrong cells would pass the check above).
#[test]
fn the_readmes_table_is_the_performance_docs_cell_by_cell() {
    let readme = read(&root().join("README.md"));
    let perf = read(&root().join("docs/performance.md"));
    let fast = section(&readme, "How fast");
    let table: Vec<&str> = fast
        .split("```")
        .nth(1)
        .expect("a table in the How fast section")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let sizes = ["1 B", "1 KB", "10 KB", "100 KB", "1 MB", "10 MB"];
    let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let perf_rows: Vec<String> = perf.lines().map(words).collect();
    let mut checked = 0;
    for (label, prefix) in [
        ("keep-alive, 50 connections", "keep-alive 50"),
        ("keep-alive, 2,000 connections", "keep-alive 2000"),
        ("Connection: close, 50", "close 50"),
    ] {
        let row = table
            .iter()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no README row {label:?}"));
        let ratios: Vec<&str> = row[label.len()..].split_whitespace().collect();
        assert_eq!(ratios.len(), sizes.len(), "{row}");
        for (size, ratio) in sizes.iter().zip(ratios) {
            let cell = format!("{prefix} {size} ");
            let source = perf_rows
                .iter()
                .find(|r| r.starts_with(&cell))
                .unwrap_or_else(|| panic!("no performance row {cell:?}"));
            let theirs = source.split_whitespace().last().unwrap();
            assert_eq!(
                ratio, theirs,
                "{label}, {size}: README {ratio}, doc {source}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 18);
}
