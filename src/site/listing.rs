//! Generated directory indexes: reading the entries, ordering them, and
//! rendering them as HTML5 or JSON.

use std::cmp::Ordering;
use std::ffi::CStr;
use std::fmt::Write;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{SystemTime, UNIX_EPOCH};

use super::path::{percent_decode, percent_encode_path};
use crate::calendar::Utc;
use crate::page::{self, escape_html};
use crate::sys;

pub struct Entry {
    pub name: Vec<u8>,
    pub is_dir: bool,
    pub size: u64,
    pub modified: SystemTime,
}

pub struct Listing {
    /// The directory's URL path, %-encoded, e.g. `/my%20docs/`.
    pub url_path: String,
    /// Directories first, then files, each in `sort` order.
    pub entries: Vec<Entry>,
    pub sort: Sort,
    /// The newest modification time among the directory and its entries.
    pub modified: SystemTime,
}

/// The column a listing is ordered by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    Name,
    Size,
    Date,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    #[default]
    Asc,
    Desc,
}

/// How a listing is ordered, as the query asks: `sort=name|size|date`,
/// `order=asc|desc`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub order: Order,
}

impl Sort {
    /// The order a query string asks for. A missing, unknown or misspelt
    /// value means name or ascending: a listing link is never an error.
    pub fn from_query(query: Option<&str>) -> Sort {
        let query = query.unwrap_or("");
        let key = match param(query, "sort") {
            Some("size") => SortKey::Size,
            Some("date") => SortKey::Date,
            _ => SortKey::Name,
        };
        let order = match param(query, "order") {
            Some("desc") => Order::Desc,
            _ => Order::Asc,
        };
        Sort { key, order }
    }
}

impl SortKey {
    fn as_str(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Size => "size",
            SortKey::Date => "date",
        }
    }
}

impl Order {
    fn as_str(self) -> &'static str {
        match self {
            Order::Asc => "asc",
            Order::Desc => "desc",
        }
    }

    fn flipped(self) -> Order {
        match self {
            Order::Asc => Order::Desc,
            Order::Desc => Order::Asc,
        }
    }
}

/// The first value of `name` in a query string, as sent.
fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Reads a directory's visible entries, by name. `dir` is the directory
/// `rel` (empty, or ending in `/`) beneath the site's [`root`](crate::site::root). Hidden names
/// are left out, and so are entries that could not be served: dangling or
/// redirecting symlinks, symlinks that lead out of the root, whose
/// target's size and date are nobody's business, and the root's
/// `_headers` and `_redirects`, which are configuration.
pub fn read(dir: &File, root: BorrowedFd<'_>, rel: &[u8], url_path: String) -> io::Result<Listing> {
    let mut modified = dir.metadata()?.modified().unwrap_or(UNIX_EPOCH);
    let mut entries = Vec::new();
    for item in rustix::fs::Dir::read_from(dir.as_fd())? {
        let item = item?;
        let name = item.file_name().to_bytes();
        if name.starts_with(b".") || (rel.is_empty() && super::root_files::is_root_file(name)) {
            continue;
        }
        let Some(st) = entry_status(dir, root, rel, item.file_name()) else {
            continue;
        };
        let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
        if kind != rustix::fs::FileType::Directory && kind != rustix::fs::FileType::RegularFile {
            continue;
        }
        let mtime = UNIX_EPOCH + std::time::Duration::from_secs(st.st_mtime.max(0) as u64);
        modified = modified.max(mtime);
        entries.push(Entry {
            name: name.to_vec(),
            is_dir: kind == rustix::fs::FileType::Directory,
            size: st.st_size.max(0) as u64,
            modified: mtime,
        });
    }
    let listing = Listing {
        url_path,
        entries,
        sort: Sort::default(),
        modified,
    };
    Ok(listing.sorted(Sort::default()))
}

/// What the entry `name` of `dir` is, as serving would find it: a symlink
/// is followed only as far as it stays beneath the root. None: not there,
/// or not to be shown.
fn entry_status(
    dir: &File,
    root: BorrowedFd<'_>,
    rel: &[u8],
    name: &CStr,
) -> Option<rustix::fs::Stat> {
    use rustix::fs::{statat, AtFlags, FileType};
    let st = statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
        return Some(st);
    }
    // Rare enough that building the path costs nothing that matters.
    let mut path = rel.to_vec();
    path.extend_from_slice(name.to_bytes());
    sys::stat_beneath(root, &path).ok()
}

impl Listing {
    /// The same listing in another order.
    pub fn sorted(mut self, sort: Sort) -> Listing {
        self.entries.sort_by(|a, b| compare(a, b, sort));
        self.sort = sort;
        self
    }
}

/// Directories before files whatever the order, as nginx's fancyindex and
/// Caddy do; within each, by the key, then by name so that ties are stable.
fn compare(a: &Entry, b: &Entry, sort: Sort) -> Ordering {
    let by_key = || {
        let ord = match sort.key {
            SortKey::Name => a.name.cmp(&b.name),
            // A directory's own size says nothing about what is in it.
            SortKey::Size if a.is_dir => Ordering::Equal,
            SortKey::Size => a.size.cmp(&b.size),
            SortKey::Date => a.modified.cmp(&b.modified),
        };
        match sort.order {
            Order::Asc => ord,
            Order::Desc => ord.reverse(),
        }
    };
    b.is_dir
        .cmp(&a.is_dir)
        .then_with(by_key)
        .then_with(|| a.name.cmp(&b.name))
}

/// The listing as a page for people: a standalone HTML5 document with the
/// shared stylesheet inline. (Writing to a String cannot fail, hence the
/// ignored results of `write!` here and below.)
pub fn html(l: &Listing) -> String {
    let shown = escape_html(&decoded_path(&l.url_path));
    let mut out = String::with_capacity(4096 + l.entries.len() * 256);
    out.push_str(page::PAGE_START);
    let _ = write!(out, "Index of {shown}{}", page::TITLE_END);
    let _ = write!(
        out,
        "<main>\n<h1>Index of {shown}</h1>\n<table>\n<thead><tr>"
    );
    for key in [SortKey::Name, SortKey::Size, SortKey::Date] {
        header_cell(&mut out, l.sort, key);
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    if l.url_path != "/" {
        out.push_str(
            "<tr class=\"dir\"><td class=\"name\"><a href=\"../\">../</a></td>\
             <td class=\"size\"></td><td class=\"date\"></td></tr>\n",
        );
    }
    for e in &l.entries {
        entry_row(&mut out, e);
    }
    out.push_str("</tbody>\n</table>\n");
    summary(&mut out, &l.entries);
    out.push_str("</main>\n");
    out.push_str(page::PAGE_END);
    out
}

/// The URL path as a person reads it: `/my docs/` rather than `/my%20docs/`.
fn decoded_path(url_path: &str) -> String {
    match percent_decode(url_path.as_bytes()) {
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => url_path.to_string(),
    }
}

/// A column heading that links to this listing ordered by its column: the
/// other way round if it is the current order, else ascending. Links, not
/// scripts, so that sorting works in any browser.
fn header_cell(out: &mut String, current: Sort, key: SortKey) {
    let label = match key {
        SortKey::Name => "Name",
        SortKey::Size => "Size",
        SortKey::Date => "Modified (UTC)",
    };
    let active = current.key == key;
    let next = if active {
        current.order.flipped()
    } else {
        Order::Asc
    };
    let (aria, arrow) = match (active, current.order) {
        (false, _) => ("", ""),
        // aria-sort tells a screen reader; the arrow is for the eye.
        (true, Order::Asc) => (
            " aria-sort=\"ascending\"",
            " <span aria-hidden=\"true\">\u{25b2}</span>",
        ),
        (true, Order::Desc) => (
            " aria-sort=\"descending\"",
            " <span aria-hidden=\"true\">\u{25bc}</span>",
        ),
    };
    let _ = write!(
        out,
        "<th class=\"{}\"{aria}><a href=\"?sort={}&amp;order={}\">{label}{arrow}</a></th>",
        key.as_str(),
        key.as_str(),
        next.as_str()
    );
}

fn entry_row(out: &mut String, e: &Entry) {
    let name = escape_html(&String::from_utf8_lossy(&e.name));
    let href = escape_html(&entry_href(e));
    let (class, slash) = if e.is_dir {
        (" class=\"dir\"", "/")
    } else {
        ("", "")
    };
    let _ = write!(
        out,
        "<tr{class}><td class=\"name\"><a href=\"{href}\">{name}{slash}</a></td>"
    );
    if e.is_dir {
        out.push_str("<td class=\"size\">&mdash;</td>");
    } else {
        let unit = if e.size == 1 { "byte" } else { "bytes" };
        let _ = write!(
            out,
            "<td class=\"size\" title=\"{} {unit}\">{}</td>",
            e.size,
            human_size(e.size)
        );
    }
    let t = Utc::of(e.modified);
    let _ = writeln!(
        out,
        "<td class=\"date\"><time datetime=\"{}\">{}</time></td></tr>",
        t.rfc3339(),
        t.minutes()
    );
}

/// An entry's link, relative to the listing. A name with a colon gets a
/// `./` in front, or `a:b` would read as a URL with the scheme `a`.
fn entry_href(e: &Entry) -> String {
    let mut href = String::with_capacity(e.name.len() + 3);
    if e.name.contains(&b':') {
        href.push_str("./");
    }
    percent_encode_path(&e.name, &mut href);
    if e.is_dir {
        href.push('/');
    }
    href
}

/// `2 directories, 3 files`, under the table.
fn summary(out: &mut String, entries: &[Entry]) {
    let dirs = entries.iter().filter(|e| e.is_dir).count();
    let files = entries.len() - dirs;
    let plural = |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
    let _ = writeln!(
        out,
        "<p class=\"note\">{dirs} {}, {files} {}</p>",
        plural(dirs, "directory", "directories"),
        plural(files, "file", "files")
    );
}

/// A size for people: bytes up to 1023, then KiB, MiB, ... with one decimal
/// below 10 and none above (`1.2 KiB`, `12 KiB`, `1023 KiB`, `1.0 MiB`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // u128: ten times the largest u64 does not fit in a u64.
    let n = u128::from(bytes);
    let mut divisor: u128 = 1024;
    let mut unit = 0;
    loop {
        let tenths = (n * 10 + divisor / 2) / divisor;
        if tenths < 100 {
            return format!("{}.{} {}", tenths / 10, tenths % 10, UNITS[unit]);
        }
        let whole = (n + divisor / 2) / divisor;
        // Rounding up to 1024 of a unit makes it one of the next.
        if whole < 1024 || unit == UNITS.len() - 1 {
            return format!("{whole} {}", UNITS[unit]);
        }
        divisor *= 1024;
        unit += 1;
    }
}

/// How a listing writes a file time (UTC, so every reader sees the same).
trait ListingTime {
    fn minutes(&self) -> String;
    fn rfc3339(&self) -> String;
}

impl ListingTime for Utc {
    /// `2026-11-30 18:32`: sorts as text, reads the same everywhere.
    fn minutes(&self) -> String {
        let Utc {
            year,
            month,
            day,
            hour,
            minute,
            ..
        } = self;
        format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}")
    }

    /// `2026-11-30T18:32:05Z`, for the `datetime` attribute.
    fn rfc3339(&self) -> String {
        let Utc {
            year,
            month,
            day,
            hour,
            minute,
            second,
        } = self;
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
    }
}

/// The listing for programs: `{"path":...,"entries":[{"name","type","size","modified"}]}`,
/// `modified` in Unix seconds.
pub fn json(l: &Listing) -> String {
    let mut out = format!("{{\"path\":{},\"entries\":[", json_string(&l.url_path));
    for (i, e) in l.entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let modified = e
            .modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // A directory's st_size is file-system bookkeeping, not content.
        let size = if e.is_dir {
            "null".to_string()
        } else {
            e.size.to_string()
        };
        let _ = write!(
            out,
            "{{\"name\":{},\"type\":\"{}\",\"size\":{size},\"modified\":{modified}}}",
            json_string(&String::from_utf8_lossy(&e.name)),
            if e.is_dir { "directory" } else { "file" },
        );
    }
    out.push_str("]}\n");
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + std::time::Duration::from_secs(secs)
    }

    fn entry(name: &str, is_dir: bool, size: u64, modified: u64) -> Entry {
        Entry {
            name: name.as_bytes().to_vec(),
            is_dir,
            size,
            modified: at(modified),
        }
    }

    fn sample() -> Listing {
        Listing {
            url_path: "/d/".into(),
            entries: vec![
                entry("sub", true, 4096, T),
                entry("a <b>&\"c\".txt", false, 12, T),
            ],
            sort: Sort::default(),
            modified: at(T),
        }
    }

    fn names(l: &Listing) -> Vec<String> {
        l.entries
            .iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect()
    }

    #[test]
    fn html_escapes_names_and_encodes_links() {
        let page = html(&sample());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<a href=\"../\">../</a>"));
        assert!(page.contains("<a href=\"sub/\">sub/</a>"));
        assert!(page.contains(
            "<a href=\"a%20%3Cb%3E&amp;%22c%22.txt\">a &lt;b&gt;&amp;&quot;c&quot;.txt</a>"
        ));
        assert!(page.find("sub/").unwrap() < page.find(".txt").unwrap());
    }

    #[test]
    fn links_survive_awkward_names() {
        let cases = [
            ("with space", "with%20space"),
            ("50%", "50%25"),
            ("a#b?c", "a%23b%3Fc"),
            ("-rf", "-rf"),
            ("naïve.txt", "na%C3%AFve.txt"),
            ("it's", "it&#39;s"),
            ("a:b", "./a:b"),
        ];
        for (name, href) in cases {
            let page = html(&Listing {
                url_path: "/".into(),
                entries: vec![entry(name, false, 1, T)],
                sort: Sort::default(),
                modified: at(T),
            });
            let shown = escape_html(name);
            assert!(
                page.contains(&format!("<a href=\"{href}\">{shown}</a>")),
                "{name}: {page}"
            );
        }
    }

    #[test]
    fn title_and_heading_show_the_decoded_path_escaped() {
        let l = Listing {
            url_path: "/with%20space/%3Cb%3E/".into(),
            ..sample()
        };
        let page = html(&l);
        assert!(page.contains("<title>Index of /with space/&lt;b&gt;/</title>"));
        assert!(page.contains("<h1>Index of /with space/&lt;b&gt;/</h1>"));
    }

    #[test]
    fn html_shows_human_sizes_exact_bytes_and_utc_minutes() {
        let page = html(&sample());
        assert!(page.contains("<td class=\"size\" title=\"12 bytes\">12 B</td>"));
        assert!(
            page.contains("<td class=\"size\">&mdash;</td>"),
            "a directory"
        );
        assert!(page.contains("<time datetime=\"1994-11-06T08:49:37Z\">1994-11-06 08:49</time>"));
        assert!(page.contains("Modified (UTC)"));
        assert!(page.contains("1 directory, 1 file"));
    }

    #[test]
    fn column_headings_link_to_the_other_orders() {
        let page = html(&sample());
        assert!(page.contains(
            "<th class=\"name\" aria-sort=\"ascending\"><a href=\"?sort=name&amp;order=desc\">"
        ));
        assert!(page.contains("<a href=\"?sort=size&amp;order=asc\">Size</a>"));
        let by_size = html(&sample().sorted(Sort {
            key: SortKey::Size,
            order: Order::Asc,
        }));
        assert!(by_size.contains(
            "<a href=\"?sort=size&amp;order=desc\">Size <span aria-hidden=\"true\">\u{25b2}</span></a>"
        ));
        assert!(by_size.contains("<a href=\"?sort=name&amp;order=asc\">Name</a>"));
        assert_ne!(page, by_size, "each order is its own representation");
    }

    #[test]
    fn sizes_for_people() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1229, "1.2 KiB"),
            (10 * 1024 - 52, "9.9 KiB"),
            (10 * 1024 - 51, "10 KiB"),
            (123_456, "121 KiB"),
            (1024 * 1024 - 1, "1.0 MiB"),
            (5 * 1024 * 1024 * 1024, "5.0 GiB"),
            (u64::MAX, "16 EiB"),
        ];
        for (bytes, shown) in cases {
            assert_eq!(human_size(bytes), shown, "{bytes}");
        }
    }

    #[test]
    fn utc_calendar() {
        let t = Utc::of(at(T));
        assert_eq!(t.minutes(), "1994-11-06 08:49");
        assert_eq!(t.rfc3339(), "1994-11-06T08:49:37Z");
        assert_eq!(Utc::of(UNIX_EPOCH).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(Utc::of(at(951_782_399)).rfc3339(), "2000-02-28T23:59:59Z");
        assert_eq!(Utc::of(at(951_868_800)).rfc3339(), "2000-03-01T00:00:00Z");
        assert_eq!(Utc::of(at(1_796_063_520)).minutes(), "2026-11-30 18:32");
        assert_eq!(Utc::of(at(4_107_542_400)).minutes(), "2100-03-01 00:00");
    }

    #[test]
    fn query_parsing_falls_back_to_name_ascending() {
        let sort = |q: &str| Sort::from_query(Some(q));
        let s = |key, order| Sort { key, order };
        assert_eq!(Sort::from_query(None), Sort::default());
        assert_eq!(sort("sort=size&order=desc"), s(SortKey::Size, Order::Desc));
        assert_eq!(sort("order=desc&sort=date"), s(SortKey::Date, Order::Desc));
        assert_eq!(sort("sort=date"), s(SortKey::Date, Order::Asc));
        assert_eq!(sort("sort=SIZE&order=down"), Sort::default());
        assert_eq!(sort("sort=size&sort=date"), s(SortKey::Size, Order::Asc));
        assert_eq!(sort("x=1&sort&order=desc"), s(SortKey::Name, Order::Desc));
        assert_eq!(sort("sort=size%00"), Sort::default());
    }

    fn mixed() -> Listing {
        Listing {
            url_path: "/".into(),
            entries: vec![
                entry("small", false, 1, T + 30),
                entry("zdir", true, 4096, T),
                entry("Big", false, 3000, T + 10),
                entry("adir", true, 64, T + 99),
                entry("mid", false, 200, T + 20),
            ],
            sort: Sort::default(),
            modified: at(T),
        }
    }

    #[test]
    fn sorting_keeps_directories_first() {
        let by = |key, order| names(&mixed().sorted(Sort { key, order }));
        assert_eq!(
            by(SortKey::Name, Order::Asc),
            ["adir", "zdir", "Big", "mid", "small"]
        );
        assert_eq!(
            by(SortKey::Name, Order::Desc),
            ["zdir", "adir", "small", "mid", "Big"]
        );
        // Directories have no meaningful size: they stay by name.
        assert_eq!(
            by(SortKey::Size, Order::Asc),
            ["adir", "zdir", "small", "mid", "Big"]
        );
        assert_eq!(
            by(SortKey::Size, Order::Desc),
            ["adir", "zdir", "Big", "mid", "small"]
        );
        assert_eq!(
            by(SortKey::Date, Order::Desc),
            ["adir", "zdir", "small", "mid", "Big"]
        );
    }

    #[test]
    fn json_form() {
        let j = json(&sample());
        assert!(j.starts_with(
            "{\"path\":\"/d/\",\"entries\":[{\"name\":\"sub\",\"type\":\"directory\",\"size\":null,"
        ));
        assert!(j.contains(
            "\"name\":\"a <b>&\\\"c\\\".txt\",\"type\":\"file\",\"size\":12,\"modified\":784111777"
        ));
    }
}
