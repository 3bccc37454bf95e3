//! The layer rule of layers.txt, checked on the source text: no file in
//! src/ imports from a layer above its own, and no files import each other
//! in a circle. The same for the bench crates benches/compare and
//! benches/soak, each with a layers.txt of its own.
//!
//! An import is any `crate::` or `super::` path (in main.rs, `staticd::`):
//! in a `use` (groups included, whatever `#[cfg]` stands before it) or
//! written inline. It reaches the file that defines the longest module
//! prefix of the path. Comments and string literals are skipped, so a path
//! named in prose is no import. Test modules count: a test that needs a
//! higher layer is a dependency like any other. A mod.rs naming its own
//! children (`pub use file::FileSet`) is not counted: a directory and the
//! mod.rs that re-exports it are one module, whose files may share items.
//! The crate root is a file like the others: its paths to its own modules
//! (`use load::Run`, `load::wrk()` in a bench's main.rs) are imports.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// A file of a crate, by its path below the crate's directory (`site/mod.rs`).
type File = String;

/// Module path segments below the crate root (`["site", "file"]`).
type Module = Vec<String>;

/// One import: `from` names `to` at `line`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    from: File,
    line: usize,
    to: File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    /// `::`
    Path,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Dollar,
    Other,
}

/// The tokens of Rust source that matter for paths, with their lines;
/// comments, strings, characters and lifetimes are dropped.
fn lex(src: &str) -> Vec<(Tok<'_>, usize)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let ident_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // Skips a string body from the opening quote at `i` with `hashes`
    // (raw when `raw`), counting lines; returns the index after it.
    let skip_string = |mut i: usize, raw: bool, hashes: usize, line: &mut usize| {
        i += 1;
        while i < b.len() {
            match b[i] {
                b'\n' => *line += 1,
                b'\\' if !raw => i += 1,
                b'"' if b[i + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == b'#')
                    .count()
                    == hashes =>
                {
                    return i + 1 + hashes;
                }
                _ => {}
            }
            i += 1;
        }
        i
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(b[i] == b'\n');
                        i += 1;
                    }
                }
            }
            b'"' => i = skip_string(i, false, 0, &mut line),
            b'\'' => {
                // A character ('a', '\n', '\u{1F600}') or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    // Past the escaped character, which may be a quote.
                    i += 3;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    let width = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                    if b.get(i + 1 + width) == Some(&b'\'') {
                        i += 2 + width;
                    } else {
                        i += 1;
                        while i < b.len() && ident_char(b[i]) {
                            i += 1;
                        }
                    }
                }
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && ident_char(b[i]) {
                    i += 1;
                }
            }
            c if ident_char(c) => {
                let start = i;
                while i < b.len() && ident_char(b[i]) {
                    i += 1;
                }
                let word = &src[start..i];
                let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
                match (word, b.get(i + hashes)) {
                    ("r" | "br" | "cr", Some(b'"')) => {
                        i = skip_string(i + hashes, true, hashes, &mut line)
                    }
                    ("b" | "c", Some(b'"')) if hashes == 0 => {
                        i = skip_string(i, false, 0, &mut line)
                    }
                    // b'x': the quote is lexed next, as a character.
                    _ => out.push((Tok::Ident(word), line)),
                }
            }
            _ => {
                let tok = match c {
                    b':' if b.get(i + 1) == Some(&b':') => {
                        i += 1;
                        Tok::Path
                    }
                    b'{' => Tok::Open,
                    b'}' => Tok::Close,
                    b',' => Tok::Comma,
                    b';' => Tok::Semi,
                    b'*' => Tok::Star,
                    b'$' => Tok::Dollar,
                    _ => Tok::Other,
                };
                out.push((tok, line));
                i += 1;
            }
        }
    }
    out
}

/// Every path a `use` tree starting at `toks[*i]` names, each with the line
/// of its last segment; `*i` ends after the tree.
fn use_tree(
    toks: &[(Tok, usize)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(usize, Module)>,
) {
    let mut path = prefix.to_vec();
    let mut line = toks.get(*i).map_or(0, |t| t.1);
    if toks.get(*i).map(|t| t.0) == Some(Tok::Path) {
        *i += 1;
    }
    while let Some(&(tok, at)) = toks.get(*i) {
        match tok {
            Tok::Ident(word) => {
                *i += 1;
                if word != "self" {
                    path.push(word.to_string());
                }
                line = at;
                match toks.get(*i).map(|t| t.0) {
                    Some(Tok::Path) => *i += 1,
                    Some(Tok::Ident("as")) => {
                        *i += 2;
                        break;
                    }
                    _ => break,
                }
            }
            Tok::Open => {
                *i += 1;
                while let Some(&(tok, _)) = toks.get(*i) {
                    match tok {
                        Tok::Close => {
                            *i += 1;
                            return;
                        }
                        Tok::Comma => *i += 1,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
                return;
            }
            Tok::Star => {
                *i += 1;
                line = at;
                break;
            }
            _ => break,
        }
    }
    out.push((line, path));
}

/// The crate paths `src` names, resolved to absolute module paths, for a
/// file whose module is `module`; `root` is how the file names the crate.
fn imports(module: &[String], src: &str, root: &str) -> Vec<(usize, Module)> {
    let toks = lex(src);
    // The crate root names its modules without `crate::`.
    let children: Vec<&str> = if module.is_empty() {
        toks.windows(3)
            .filter_map(|w| match w {
                [(Tok::Ident("mod"), _), (Tok::Ident(name), _), (Tok::Semi, _)] => Some(*name),
                _ => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut paths = Vec::new();
    // Inline modules (`mod tests { ... }`), with the brace depth inside them.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        let here: Module = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(m, _)| m.clone()))
            .collect();
        match toks[i].0 {
            Tok::Open => depth += 1,
            Tok::Close => {
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            Tok::Ident("mod") => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.to_string(), depth + 1));
                }
            }
            Tok::Ident("use") => {
                let mut found = Vec::new();
                i += 1;
                use_tree(&toks, &mut i, &[], &mut found);
                paths.extend(
                    found.into_iter().filter_map(|(line, p)| {
                        Some((line, absolute(&here, &p, root, &children)?))
                    }),
                );
                continue;
            }
            Tok::Ident(word) if word == root || word == "super" || children.contains(&word) => {
                let after_dollar = i > 0 && toks[i - 1].0 == Tok::Dollar;
                let continues = i > 0 && toks[i - 1].0 == Tok::Path;
                if !after_dollar && !continues && toks.get(i + 1).map(|t| t.0) == Some(Tok::Path) {
                    let mut path = vec![word.to_string()];
                    let mut line = toks[i].1;
                    while let (Some((Tok::Path, _)), Some(&(Tok::Ident(next), at))) =
                        (toks.get(i + 1), toks.get(i + 2))
                    {
                        path.push(next.to_string());
                        line = at;
                        i += 2;
                    }
                    if let Some(abs) = absolute(&here, &path, root, &children) {
                        paths.push((line, abs));
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

/// `path` from module `here` as a path from the crate root; None when it
/// does not start at the crate (`std::...`, `self::...`). `children` are
/// the modules the crate root declares, when `here` is the root.
fn absolute(here: &[String], path: &[String], root: &str, children: &[&str]) -> Option<Module> {
    let first = path.first()?;
    if first == root {
        return Some(path[1..].to_vec());
    }
    if here.is_empty() && children.contains(&first.as_str()) {
        return Some(path.to_vec());
    }
    if first != "super" {
        return None;
    }
    let ups = path.iter().take_while(|s| *s == "super").count();
    let base = here.get(..here.len().checked_sub(ups)?)?;
    Some(base.iter().chain(&path[ups..]).cloned().collect())
}

/// The module a file of src/ is: `site/mod.rs` is `site`, `lib.rs` the
/// crate root; main.rs, a crate of its own, is called `main`.
fn module_of(file: &str) -> Module {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    match stem {
        "lib" => Vec::new(),
        _ => stem.split('/').map(str::to_string).collect(),
    }
}

/// What layers.txt calls a file: its module, but `main` and `lib` for the
/// binary and the crate root.
fn layer_path(file: &str) -> Module {
    match file {
        "main.rs" | "lib.rs" => vec![file.trim_end_matches(".rs").to_string()],
        _ => module_of(file),
    }
}

/// Every import between two different files of `sources` (path below
/// the crate's directory -> text). With a lib.rs, main.rs is a crate of
/// its own that names the library `staticd`; without one (a bench), main.rs
/// is the crate root.
fn edges(sources: &BTreeMap<File, String>) -> Vec<Edge> {
    let bin_root = !sources.contains_key("lib.rs");
    let module = |f: &str| match f {
        "main.rs" if bin_root => Vec::new(),
        _ => module_of(f),
    };
    let by_module: BTreeMap<Module, &File> = sources
        .keys()
        .filter(|f| bin_root || *f != "main.rs")
        .map(|f| (module(f), f))
        .collect();
    let mut out = Vec::new();
    for (file, src) in sources {
        let (module, root) = match file.as_str() {
            "main.rs" if !bin_root => (Vec::new(), "staticd"),
            _ => (module(file), "crate"),
        };
        for (line, path) in imports(&module, src, root) {
            let to = (0..=path.len())
                .rev()
                .find_map(|n| by_module.get(&path[..n]))
                .expect("the crate root is a module");
            let edge = Edge {
                from: file.clone(),
                line,
                to: (*to).clone(),
            };
            if edge.to != edge.from && !out.contains(&edge) {
                out.push(edge);
            }
        }
    }
    out
}

/// Every set of files that import each other round a circle (the strongly
/// connected components of more than one file, by Tarjan's algorithm),
/// each as one circle through them: `src/a.rs:3 -> src/b.rs:9 -> src/a.rs`
/// (`dir` is the crate's directory).
fn circles(dir: &str, edges: &[Edge]) -> Vec<(BTreeSet<File>, String)> {
    let mut graph: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for e in edges {
        graph.entry(&e.to).or_default();
        graph
            .entry(&e.from)
            .or_default()
            .entry(&e.to)
            .or_insert(e.line);
    }
    struct Tarjan<'g> {
        graph: &'g BTreeMap<&'g str, BTreeMap<&'g str, usize>>,
        index: BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<BTreeSet<File>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in self.graph[v].keys() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[v].1.min(self.index[w].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on_stack.contains(w) {
                    let low = self.index[v].1.min(self.index[w].0);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut component = BTreeSet::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    component.insert(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph: &graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
        .into_iter()
        .map(|component| {
            let shown = shortest_circle(dir, &graph, &component);
            (component, shown)
        })
        .collect()
}

/// The shortest circle from the first file of `component` back to it,
/// with the line of each import.
fn shortest_circle(
    dir: &str,
    graph: &BTreeMap<&str, BTreeMap<&str, usize>>,
    component: &BTreeSet<File>,
) -> String {
    let start = component.first().unwrap().as_str();
    let mut came_from: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for (&w, &line) in &graph[v] {
            if !component.contains(w) || came_from.contains_key(w) {
                continue;
            }
            came_from.insert(w, (v, line));
            if w == start {
                break 'search;
            }
            queue.push_back(w);
        }
    }
    let mut hops = Vec::new();
    let mut at = start;
    loop {
        let (prev, line) = came_from[at];
        hops.push(format!("{dir}/{prev}:{line}"));
        at = prev;
        if at == start {
            break;
        }
    }
    hops.reverse();
    format!("{} -> {dir}/{start}", hops.join(" -> "))
}

/// layers.txt: one layer per line, lowest first, its entries (module paths
/// below the crate's directory, `http` or `metrics/counters`) before a `#`
/// comment.
struct Layers {
    /// The crate's directory (`src`, `benches/compare`).
    dir: String,
    /// Each layer's entries, and its comment.
    layers: Vec<(Vec<Module>, String)>,
}

impl Layers {
    fn parse(dir: &str, text: &str) -> Result<Layers, String> {
        let mut layers = Vec::new();
        let mut seen = BTreeSet::new();
        for (n, line) in text.lines().enumerate() {
            let (entries, comment) = line.split_once('#').unwrap_or((line, ""));
            if entries.trim().is_empty() {
                continue;
            }
            if comment.trim().is_empty() {
                return Err(format!(
                    "layers.txt:{}: no comment says what the layer is",
                    n + 1
                ));
            }
            let mut modules = Vec::new();
            for entry in entries.split_whitespace() {
                if !seen.insert(entry.to_string()) {
                    return Err(format!("layers.txt:{}: {entry} is in two layers", n + 1));
                }
                modules.push(entry.split('/').map(str::to_string).collect());
            }
            layers.push((modules, comment.trim().to_string()));
        }
        Ok(Layers {
            dir: dir.to_string(),
            layers,
        })
    }

    /// The layer holding `file`: that of the longest entry its module
    /// starts with.
    fn of(&self, file: &str) -> Option<usize> {
        let module = layer_path(file);
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(n, (entries, _))| entries.iter().map(move |e| (n, e)))
            .filter(|(_, e)| module.starts_with(e))
            .max_by_key(|(_, e)| e.len())
            .map(|(n, _)| n)
    }

    fn name(&self, n: usize) -> String {
        let entries: Vec<String> = self.layers[n].0.iter().map(|e| e.join("/")).collect();
        format!("layer {} ({})", n + 1, entries.join(" "))
    }

    /// Every import of a higher layer from a lower one, and every file that
    /// no entry places.
    fn violations(&self, files: &[&str], edges: &[Edge]) -> Vec<String> {
        let mut found: Vec<String> = files
            .iter()
            .filter(|f| self.of(f).is_none())
            .map(|f| format!("{}/{f} is in no layer of its layers.txt", self.dir))
            .collect();
        for e in edges {
            let (Some(from), Some(to)) = (self.of(&e.from), self.of(&e.to)) else {
                continue;
            };
            if to > from {
                found.push(format!(
                    "{dir}/{}:{} imports {dir}/{}: {} imports from {}",
                    e.from,
                    e.line,
                    e.to,
                    self.name(from),
                    self.name(to),
                    dir = self.dir,
                ));
            }
        }
        found
    }
}

/// Every .rs file under `dir`, by its path below `base`, but for run
/// records (`results/`), whose measuring tools are crates of their own.
fn read_sources(base: &Path, dir: &Path, out: &mut BTreeMap<File, String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "results") {
                continue;
            }
            read_sources(base, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            out.insert(rel, fs::read_to_string(&path).unwrap());
        }
    }
}

/// The crates checked, by their directory: staticd and the two bench
/// crates whose files import each other (compare, soak).
const CRATES: [&str; 3] = ["src", "benches/compare", "benches/soak"];

/// A crate's files and its layers.txt (the root's for src/, its own
/// directory's for a bench).
fn the_crate(dir: &str) -> (BTreeMap<File, String>, Layers) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = BTreeMap::new();
    read_sources(&repo.join(dir), &repo.join(dir), &mut sources);
    let layers_txt = match dir {
        "src" => repo.join("layers.txt"),
        _ => repo.join(dir).join("layers.txt"),
    };
    let text =
        fs::read_to_string(&layers_txt).unwrap_or_else(|e| panic!("{}: {e}", layers_txt.display()));
    let layers = Layers::parse(dir, &text).unwrap();
    (sources, layers)
}

#[test]
fn no_import_from_a_higher_layer() {
    let mut found = Vec::new();
    for dir in CRATES {
        let (sources, layers) = the_crate(dir);
        let files: Vec<&str> = sources.keys().map(String::as_str).collect();
        found.extend(layers.violations(&files, &edges(&sources)));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn every_layer_entry_names_files() {
    for dir in CRATES {
        let (sources, layers) = the_crate(dir);
        for (entries, comment) in &layers.layers {
            for entry in entries {
                let named = sources.keys().any(|f| layer_path(f).starts_with(entry));
                assert!(
                    named,
                    "layers.txt of {dir}: {} ({comment}) names no file of {dir}/",
                    entry.join("/")
                );
            }
        }
    }
}

#[test]
fn no_import_circles() {
    let mut found = Vec::new();
    for dir in CRATES {
        let (sources, _) = the_crate(dir);
        found.extend(
            circles(dir, &edges(&sources))
                .into_iter()
                .map(|(files, shown)| {
                    let files: Vec<String> = files.iter().map(|f| format!("{dir}/{f}")).collect();
                    format!(
                        "{} files import each other: {}\n  e.g. {shown}",
                        files.len(),
                        files.join(", ")
                    )
                }),
        );
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

// --- the checker's own tests ------------------------------------------------------------

fn module(s: &str) -> Module {
    s.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn use_groups_cfg_and_inline_paths() {
    let src = r##"
//! Names crate::in_a_comment in prose.
use std::io;
use crate::{a, b::{self, c as d}, e::*};
#[cfg(feature = "x")]
use crate::f::G;
pub(crate) use super::h;
/* crate::in_a_block /* nested */ crate::still_comment */
fn x<'a>(s: &'a str) -> char {
    let _ = "crate::in_a_string";
    let _ = r#"crate::in_a_raw "string""#;
    let _ = b'"';
    let _ = ['\'', '\\'];
    crate::i::j(crate::k::L);
    macro_rules! m { () => { $crate::in_a_macro } }
    '"'
}
"##;
    let found: Vec<(usize, Module)> = imports(&module("x::y"), src, "crate");
    let expected = [
        (4, "a"),
        (4, "b"),
        (4, "b::c"),
        (4, "e"),
        (6, "f::G"),
        (7, "x::h"),
        (14, "i::j"),
        (14, "k::L"),
    ];
    let expected: Vec<(usize, Module)> = expected.iter().map(|&(l, p)| (l, module(p))).collect();
    assert_eq!(found, expected);
}

#[test]
fn super_in_an_inline_module_is_the_file() {
    let src = "mod tests {\n    use super::*;\n    use super::super::z;\n}\nuse super::w;\n";
    assert_eq!(
        imports(&module("x::y"), src, "crate"),
        vec![
            (2, module("x::y")),
            (3, module("x::z")),
            (5, module("x::w"))
        ]
    );
}

fn crate_of(files: &[(&str, &str)]) -> BTreeMap<File, String> {
    files
        .iter()
        .map(|(f, s)| (f.to_string(), s.to_string()))
        .collect()
}

#[test]
fn imports_reach_the_longest_module_that_is_a_file() {
    let sources = crate_of(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod inner;\nuse crate::b::Thing;\n"),
        (
            "a/inner.rs",
            "use super::Outer;\nfn f() { crate::a::inner::g(); }\n",
        ),
        ("b.rs", "pub struct Thing;\n"),
        ("main.rs", "use staticd::a::inner;\n"),
    ]);
    let shown = edge_lines(&sources);
    assert_eq!(
        shown,
        [
            "a/inner.rs:1 a/mod.rs",
            "a/mod.rs:2 b.rs",
            "main.rs:1 a/inner.rs"
        ]
    );
}

#[test]
fn finds_a_circle_and_names_its_files() {
    let sources = crate_of(&[
        ("lib.rs", ""),
        ("a.rs", "use crate::b::X;\n"),
        ("b.rs", "\nfn f() { crate::c::g() }\n"),
        ("c.rs", "use crate::{a::Y, d};\n"),
        ("d.rs", ""),
    ]);
    let found = circles("src", &edges(&sources));
    assert_eq!(found.len(), 1, "{found:?}");
    let (files, shown) = &found[0];
    assert_eq!(files.iter().collect::<Vec<_>>(), ["a.rs", "b.rs", "c.rs"]);
    assert_eq!(shown, "src/a.rs:1 -> src/b.rs:2 -> src/c.rs:1 -> src/a.rs");
}

#[test]
fn finds_an_import_from_a_higher_layer() {
    let layers = Layers::parse(
        "src",
        "# staticd\nlow other # the bottom\n\nhigh main # the top\n",
    )
    .unwrap();
    let sources = crate_of(&[
        ("lib.rs", ""),
        ("low.rs", "use crate::high::X;\n"),
        ("high/mod.rs", "use crate::low::Y;\n"),
        ("high/part.rs", ""),
        ("stray.rs", ""),
    ]);
    let files: Vec<&str> = sources.keys().map(String::as_str).collect();
    let found = layers.violations(&files, &edges(&sources));
    assert_eq!(
        found,
        [
            "src/lib.rs is in no layer of its layers.txt",
            "src/stray.rs is in no layer of its layers.txt",
            "src/low.rs:1 imports src/high/mod.rs: layer 1 (low other) imports from layer 2 (high main)",
        ]
    );
    assert_eq!(layers.of("high/part.rs"), Some(1));
    assert!(Layers::parse("src", "a # one\na # two\n").is_err());
    assert!(Layers::parse("src", "a\n").is_err());
}

#[test]
fn a_bench_root_names_its_modules_without_crate() {
    let sources = crate_of(&[
        (
            "main.rs",
            "mod a;\nmod b;\nuse a::X;\nfn main() { b::f(); std::b::g(); }\npub fn stopping() {}\n",
        ),
        ("a.rs", "pub struct X;\nfn f() { crate::stopping() }\n"),
        ("b.rs", "use std::a;\n"),
    ]);
    let shown = edge_lines(&sources);
    assert_eq!(
        shown,
        ["a.rs:2 main.rs", "main.rs:3 a.rs", "main.rs:4 b.rs"]
    );
    let found = circles("benches/x", &edges(&sources));
    assert_eq!(
        found[0].1,
        "benches/x/a.rs:2 -> benches/x/main.rs:3 -> benches/x/a.rs"
    );
}

/// Each import edge of `sources` as `FROM:LINE TO`, for the tests above.
fn edge_lines(sources: &BTreeMap<File, String>) -> Vec<String> {
    edges(sources)
        .iter()
        .map(|e| format!("{}:{} {}", e.from, e.line, e.to))
        .collect()
}
