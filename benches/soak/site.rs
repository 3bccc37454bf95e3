//! The document root the driver generates, and every change it makes to
//! it, each recorded as a new version before clients can see it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::check::Soak;

/// Immutable binary files: (URL path, size). Sizes around the 32 KiB
/// in-memory cache limit and up to sendfile-sized.
pub const STATIC: [(&str, usize); 5] = [
    ("/s/a.bin", 100),
    ("/s/b.bin", 5_000),
    ("/s/c.bin", 40_000),
    ("/s/d.bin", 300_000),
    ("/s/e.bin", 2_000_000),
];

/// Mutable text files, replaced atomically (compressible: on-the-fly
/// gzip, br and zstd).
pub const MUTABLE: [(&str, usize); 6] = [
    ("/m/0.txt", 1_500),
    ("/m/1.txt", 9_000),
    ("/m/2.txt", 30_000),
    ("/m/3.txt", 60_000),
    ("/m/4.html", 20_000),
    ("/m/5.json", 12_000),
];

pub const TRUNC: (&str, usize) = ("/t/big.bin", 1_000_000);
pub const CHURN: [(&str, usize); 3] = [
    ("/churn/0.txt", 2_000),
    ("/churn/1.txt", 50_000),
    ("/churn/2.bin", 8_000),
];
pub const PRE: &str = "/pre/app.js";
pub const GOOD: &str = "/good.txt";
pub const LISTED: [&str; 6] = ["l0.txt", "l1.txt", "l2.bin", "sub-a", "sub-b", "l3.css"];
pub const PRIVATE: &str = "/private/p.txt";
pub const HDR: &str = "/hdr/h.txt";
pub const USER: &str = "soak";
pub const PASSWORD: &str = "hunter2-soak";

pub struct Site {
    pub root: PathBuf,
    pub htpasswd: Option<PathBuf>,
}

fn rng_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

const WORDS: [&str; 16] = [
    "static", "file", "server", "soak", "load", "fault", "range", "byte", "version", "reload",
    "signal", "socket", "kernel", "cache", "stream", "header",
];

/// Content of `path` at `version`: a stamp naming both, then filler of
/// `size` bytes in all (text or binary by the name).
pub fn content(path: &str, version: u64, size: usize) -> Vec<u8> {
    let mut out = format!("soak {path} version {version}\n").into_bytes();
    if path.ends_with(".bin") {
        let rest = size.saturating_sub(out.len());
        out.extend(rng_bytes(version * 7919 + path.len() as u64, rest));
    } else {
        let mut x = version.wrapping_add(path.len() as u64 * 31) | 1;
        while out.len() < size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
            out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
        }
        out.truncate(size);
    }
    out
}

impl Site {
    pub fn disk(&self, url: &str) -> PathBuf {
        self.root.join(url.trim_start_matches('/'))
    }

    /// Writes `bytes` to `url` atomically (a hidden temporary name, then
    /// rename), recording the version just before the rename.
    pub fn replace(&self, soak: &Soak, url: &str, bytes: Vec<u8>) -> std::io::Result<()> {
        let path = self.disk(url);
        let dir = path.parent().unwrap();
        let tmp = dir.join(format!(".tmp-{}", soak.version_id()));
        fs::write(&tmp, &bytes)?;
        soak.set(url, Some(bytes), None);
        fs::rename(&tmp, &path)
    }

    pub fn create(
        soak: &Soak,
        root: &Path,
        htpasswd_hash: Option<String>,
    ) -> std::io::Result<Site> {
        let site = Site {
            root: root.to_path_buf(),
            htpasswd: None,
        };
        for d in [
            "s",
            "m",
            "t",
            "churn",
            "pre",
            "list",
            "cgi-bin",
            "private",
            "hdr",
            "list/sub-a",
            "list/sub-b",
        ] {
            fs::create_dir_all(root.join(d))?;
        }
        for (url, size) in STATIC
            .iter()
            .chain(MUTABLE.iter())
            .chain(CHURN.iter())
            .chain([&TRUNC])
        {
            let v = soak.version_id();
            site.replace(soak, url, content(url, v, *size))?;
        }
        let good = b"good\n".to_vec();
        site.replace(soak, GOOD, good)?;
        site.replace(
            soak,
            "/index.html",
            b"<!doctype html><title>soak</title>\n".to_vec(),
        )?;
        site.replace(soak, PRIVATE, content(PRIVATE, 1, 3000))?;
        site.replace(soak, HDR, content(HDR, 1, 700))?;
        // Precompressed sibling: app.js and app.js.gz (immutable).
        let js = content("/pre/app.js", 1, 30_000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&js)?;
        fs::write(site.disk("/pre/app.js.gz"), gz.finish()?)?;
        site.replace(soak, PRE, js)?;
        for name in LISTED.iter().filter(|n| n.contains('.')) {
            fs::write(root.join("list").join(name), format!("listed {name}\n"))?;
        }
        let script = root.join("cgi-bin/echo.cgi");
        fs::write(
            &script,
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nprintf 'cgi ok %s\\n' \"$QUERY_STRING\"\n",
        )?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))?;
        let mut site = site;
        if let Some(hash) = htpasswd_hash {
            let p = root.parent().unwrap().join("htpasswd");
            fs::write(&p, format!("{USER}:{hash}\n"))?;
            site.htpasswd = Some(p);
        }
        site.write_headers(soak)?;
        site.write_redirects(soak)?;
        Ok(site)
    }

    pub fn write_headers(&self, soak: &Soak) -> std::io::Result<()> {
        let v = soak.version_id();
        let value = format!("rev-{v}");
        let text = format!("/hdr/*\n  X-Soak-Rev: {value}\n/*\n  X-Soak: yes\n");
        let tmp = self.root.join(format!(".tmp-{v}"));
        fs::write(&tmp, text)?;
        soak.set("#headers", Some(value.into_bytes()), None);
        fs::rename(&tmp, self.root.join("_headers"))
    }

    pub fn write_redirects(&self, soak: &Soak) -> std::io::Result<()> {
        let v = soak.version_id();
        let target = format!("/target-{v}/");
        let text = format!("/go/*  {target}:splat  302\n");
        let tmp = self.root.join(format!(".tmp-{v}"));
        fs::write(&tmp, text)?;
        soak.set("#redirects", Some(target.into_bytes()), None);
        fs::rename(&tmp, self.root.join("_redirects"))
    }

    /// Replaces every mutable file with a new version.
    pub fn replace_all(&self, soak: &Soak) -> std::io::Result<()> {
        for (url, size) in MUTABLE {
            let v = soak.version_id();
            self.replace(soak, url, content(url, v, size))?;
        }
        Ok(())
    }

    /// Truncates the big file in place to an eighth; returns the old content.
    pub fn truncate(&self, soak: &Soak) -> std::io::Result<()> {
        let old: Arc<Vec<u8>> = soak.current(TRUNC.0).expect("the file exists");
        let cut = old.len() / 8;
        soak.set(TRUNC.0, Some(old[..cut].to_vec()), Some(old.clone()));
        let f = fs::OpenOptions::new()
            .write(true)
            .open(self.disk(TRUNC.0))?;
        f.set_len(cut as u64)
    }

    pub fn restore_truncated(&self, soak: &Soak) -> std::io::Result<()> {
        let v = soak.version_id();
        self.replace(soak, TRUNC.0, content(TRUNC.0, v, TRUNC.1))
    }

    /// Removes the churn directory (its files recorded absent first).
    pub fn remove_churn(&self, soak: &Soak) -> std::io::Result<()> {
        for (url, _) in CHURN {
            soak.set(url, None, None);
        }
        fs::remove_dir_all(self.root.join("churn"))
    }

    /// Makes it again, whole, under a hidden name, then renames it in.
    pub fn recreate_churn(&self, soak: &Soak) -> std::io::Result<()> {
        let tmp = self.root.join(format!(".churn-{}", soak.version_id()));
        fs::create_dir(&tmp)?;
        let mut made = Vec::new();
        for (url, size) in CHURN {
            let v = soak.version_id();
            let bytes = content(url, v, size);
            fs::write(tmp.join(url.rsplit('/').next().unwrap()), &bytes)?;
            made.push((url, bytes));
        }
        for (url, bytes) in made {
            soak.set(url, Some(bytes), None);
        }
        fs::rename(&tmp, self.root.join("churn"))
    }
}
