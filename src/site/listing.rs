//! Generated directory indexes: reading the entries, and rendering them as
//! HTML5 or JSON.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::time::{SystemTime, UNIX_EPOCH};

use super::path::percent_encode_path;

pub struct Entry {
    pub name: Vec<u8>,
    pub is_dir: bool,
    pub size: u64,
    pub modified: SystemTime,
}

pub struct Listing {
    /// The directory's URL path, e.g. `/docs/`.
    pub url_path: String,
    /// Directories first, then files, each sorted by name.
    pub entries: Vec<Entry>,
    /// The newest modification time among the directory and its entries.
    pub modified: SystemTime,
}

/// Reads a directory's visible entries. Hidden names are left out, and so
/// are entries that cannot be inspected (dangling or redirecting symlinks).
pub fn read(dir: &File, url_path: String) -> io::Result<Listing> {
    let mut modified = dir.metadata()?.modified().unwrap_or(UNIX_EPOCH);
    let mut entries = Vec::new();
    for item in rustix::fs::Dir::read_from(dir.as_fd())? {
        let item = item?;
        let name = item.file_name().to_bytes();
        if name.starts_with(b".") {
            continue;
        }
        let Ok(st) =
            rustix::fs::statat(dir.as_fd(), item.file_name(), rustix::fs::AtFlags::empty())
        else {
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
    entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    Ok(Listing {
        url_path,
        entries,
        modified,
    })
}

pub fn html(l: &Listing) -> String {
    let title = escape_html(&l.url_path);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Index of {title}</title>\n</head>\n<body>\n<h1>Index of {title}</h1>\n\
         <table>\n<thead><tr><th>Name</th><th>Size</th><th>Modified</th></tr></thead>\n<tbody>\n"
    );
    if l.url_path != "/" {
        out.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    for e in &l.entries {
        let shown = String::from_utf8_lossy(&e.name);
        let mut href = String::new();
        percent_encode_path(&e.name, &mut href);
        let (slash, size) = if e.is_dir {
            ("/", "-".to_string())
        } else {
            ("", e.size.to_string())
        };
        out.push_str(&format!(
            "<tr><td><a href=\"{}{slash}\">{}{slash}</a></td><td>{size}</td><td>{}</td></tr>\n",
            escape_html(&href),
            escape_html(&shown),
            httpdate::fmt_http_date(e.modified)
        ));
    }
    out.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    out
}

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
        out.push_str(&format!(
            "{{\"name\":{},\"type\":\"{}\",\"size\":{},\"modified\":{modified}}}",
            json_string(&String::from_utf8_lossy(&e.name)),
            if e.is_dir { "directory" } else { "file" },
            e.size
        ));
    }
    out.push_str("]}\n");
    out
}

fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Listing {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(784_111_777);
        Listing {
            url_path: "/d/".into(),
            entries: vec![
                Entry {
                    name: b"sub".to_vec(),
                    is_dir: true,
                    size: 4096,
                    modified: t,
                },
                Entry {
                    name: b"a <b>&\"c\".txt".to_vec(),
                    is_dir: false,
                    size: 12,
                    modified: t,
                },
            ],
            modified: t,
        }
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
        assert!(page.contains("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert!(page.find("sub/").unwrap() < page.find(".txt").unwrap());
    }

    #[test]
    fn json_form() {
        let j = json(&sample());
        assert!(j.starts_with(
            "{\"path\":\"/d/\",\"entries\":[{\"name\":\"sub\",\"type\":\"directory\""
        ));
        assert!(j.contains(
            "\"name\":\"a <b>&\\\"c\\\".txt\",\"type\":\"file\",\"size\":12,\"modified\":784111777"
        ));
    }
}
