//! Document roots in temp dirs, and file content helpers.

use super::*;

/// `Sun, 06 Nov 1994 08:49:37 GMT`, the RFC 9110 example date, as a file mtime.
pub fn rfc_example_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(784_111_777)
}

/// Waits, up to IO_TIMEOUT, for a file that another process creates to say it got
/// somewhere. Polls every 10 ms: a test that acts on the signal needs it soon.
pub fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} within {IO_TIMEOUT:?}",
            path.display()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// A document root in a fresh temp dir, traversable by every user (mode 0755) so that a
/// server running as nobody can serve it.
pub struct Docroot {
    dir: tempfile::TempDir,
}

impl Default for Docroot {
    fn default() -> Self {
        Self::new()
    }
}

impl Docroot {
    pub fn new() -> Docroot {
        let dir = tempfile::tempdir().expect("create temp docroot");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        Docroot { dir }
    }

    /// A docroot under `parent` (another filesystem than the temporary
    /// directory's).
    pub fn new_in(parent: &Path) -> Docroot {
        let dir = tempfile::tempdir_in(parent).expect("create temp docroot");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        Docroot { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes a file (creating parent directories); mtime set to the RFC example date so
    /// Last-Modified is deterministic and a strong validator.
    pub fn file(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&path, contents).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        set_mtime(&path, rfc_example_time());
        path
    }

    pub fn dir(&self, rel: &str) -> PathBuf {
        let path = self.join(rel);
        fs::create_dir_all(&path).unwrap();
        path
    }

    pub fn symlink(&self, rel: &str, target: impl AsRef<Path>) -> PathBuf {
        let path = self.join(rel);
        std::os::unix::fs::symlink(target, &path).unwrap();
        path
    }

    pub fn fifo(&self, rel: &str) -> PathBuf {
        let path = self.join(rel);
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &path,
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .expect("mkfifo");
        path
    }
}

pub fn set_mtime(path: &Path, when: SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

pub fn http_date(when: SystemTime) -> String {
    httpdate::fmt_http_date(when)
}

/// Deterministic content where every byte depends on its offset and none is zero, so a
/// shifted, truncated or zero-padded body is detected.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 23) as u8).collect()
}

pub fn pattern_byte(offset: u64) -> u8 {
    b'a' + (offset % 23) as u8
}

/// Writes a large file of [`pattern`] content in chunks.
pub fn write_pattern_file(path: &Path, len: u64) {
    let mut file = io::BufWriter::new(fs::File::create(path).unwrap());
    let chunk = pattern(23 * 4096);
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    file.flush().unwrap();
    drop(file);
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
}
