//! The files every server serves: one per size, random bytes, in a
//! directory that the peers' unprivileged workers can read.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Every size the full matrix covers (1,000-based).
pub const ALL_SIZES: [u64; 10] = [
    1, 1_000, 5_000, 10_000, 28_000, 50_000, 100_000, 500_000, 1_000_000, 10_000_000,
];

/// The sizes of a `--quick` run.
pub const QUICK_SIZES: [u64; 3] = [1_000, 100_000, 1_000_000];

/// The URL path of the file of `size` bytes.
pub fn url_path(size: u64) -> String {
    format!("/{size}.bin")
}

/// "1 B", "28 KB", "10 MB".
pub fn label(size: u64) -> String {
    match size {
        s if s >= 1_000_000 && s % 1_000_000 == 0 => format!("{} MB", s / 1_000_000),
        s if s >= 1_000 && s % 1_000 == 0 => format!("{} KB", s / 1_000),
        s => format!("{s} B"),
    }
}

/// Parses "1", "1b", "28k", "28KB", "10m", "10MB".
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, scale) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1_000),
        'm' => (&t[..t.len() - 1], 1_000_000),
        _ => (t, 1),
    };
    let n: u64 = digits.trim().parse().ok()?;
    (n > 0).then_some(n * scale)
}

/// The directory beside www/ that eris is run from.
const VHOSTS: &str = "vhosts";

/// A temporary document root; removed when dropped.
pub struct Docroot {
    dir: tempfile::TempDir,
}

impl Docroot {
    pub fn create(sizes: &[u64]) -> io::Result<Docroot> {
        let dir = tempfile::Builder::new()
            .prefix("staticd-compare-")
            .tempdir()?;
        // nginx, apache2 and h2o drop to an unprivileged user: everything
        // here must be world-readable.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))?;
        let root = dir.path().join("www");
        fs::create_dir(&root)?;
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755))?;
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for &size in sizes {
            let path = root.join(url_path(size).trim_start_matches('/'));
            let mut file = fs::File::create(&path)?;
            let mut left = size as usize;
            let mut chunk = vec![0u8; 64 * 1024];
            while left > 0 {
                let n = left.min(chunk.len());
                rng.fill(&mut chunk[..n]);
                file.write_all(&chunk[..n])?;
                left -= n;
            }
            file.sync_all()?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644))?;
        }
        crate::script::write(&root)?;
        // eris serves the directory named by the Host header, else
        // `default`, below its current directory: a directory whose
        // `default` is the document root serves every host from it, as the
        // other servers do.
        let vhosts = dir.path().join(VHOSTS);
        fs::create_dir(&vhosts)?;
        fs::set_permissions(&vhosts, fs::Permissions::from_mode(0o755))?;
        std::os::unix::fs::symlink("../www", vhosts.join("default"))?;
        Ok(Docroot { dir })
    }

    /// The directory eris runs in (its `default` virtual host is root()).
    pub fn vhosts(&self) -> PathBuf {
        self.dir.path().join(VHOSTS)
    }

    /// A copy of the program `built` in the scratch directory's bin/, named
    /// `name`: a rebuild during the run cannot replace the binary that
    /// tcpserver keeps starting.
    pub fn keep_copy(&self, built: &Path, name: &str) -> Result<PathBuf, String> {
        let bin = self.scratch().join("bin");
        let copy = bin.join(name);
        fs::create_dir_all(&bin)
            .and_then(|()| fs::copy(built, &copy))
            .map_err(|e| format!("copy {} to {}: {e}", built.display(), copy.display()))?;
        Ok(copy)
    }

    /// The directory served.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("www")
    }

    /// Where servers' configs, pid files and logs go (each in its own subdirectory).
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, size: u64) -> PathBuf {
        self.root().join(url_path(size).trim_start_matches('/'))
    }
}

/// Incompressible filler; no need for a real RNG.
struct XorShift(u64);

impl XorShift {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            let bytes = self.0.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}
