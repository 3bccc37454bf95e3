//! URL -> thing on disk.

pub mod path;

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use crate::sys;
use path::SitePath;

/// A document root, held open so that every lookup is relative to it.
pub struct Site {
    root: OwnedFd,
    index: String,
}

/// What a request path names.
pub enum Resource {
    File(OpenFile),
    /// A directory asked for without its trailing slash: redirect here.
    AddSlash(String),
}

/// An open regular file with what the response needs to know of it.
pub struct OpenFile {
    pub file: File,
    pub meta: Metadata,
    /// The name the Content-Type is guessed from (the index file's, for a directory).
    pub content_type: String,
}

#[derive(Debug)]
pub enum SiteError {
    NotFound,
    Forbidden,
    /// Any other failure: a 500.
    Io,
}

impl Site {
    /// Opens the root. Fails with a message that names the problem.
    pub fn open(root: &Path, index: &str) -> Result<Site, String> {
        let shown = root.display();
        let fd = sys::open_dir(root).map_err(|e| format!("root {shown}: {}", describe(&e)))?;
        // Refuse an unreadable root now rather than 403 on every request.
        std::fs::read_dir(root).map_err(|e| format!("root {shown}: {}", describe(&e)))?;
        if index.is_empty() || index.contains('/') || index == "." || index == ".." {
            return Err(format!("index {index:?}: must be a plain file name"));
        }
        let site = Site {
            root: fd,
            index: index.to_string(),
        };
        // openat2 arrived in Linux 5.6; without it the root cannot be enforced.
        match sys::open_beneath(site.root.as_fd(), b"") {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSYS.raw_os_error()) => {
                Err("this kernel lacks openat2(2) (Linux 5.6 or later is needed)".to_string())
            }
            _ => Ok(site),
        }
    }

    pub fn resolve(&self, path: &SitePath) -> Result<Resource, SiteError> {
        let file = sys::open_beneath(self.root.as_fd(), &path.rel).map_err(SiteError::from_io)?;
        let meta = file.metadata().map_err(SiteError::from_io)?;
        if meta.is_dir() {
            if !path.trailing_slash {
                return Ok(Resource::AddSlash(path.directory_url()));
            }
            return self.index_of(path);
        }
        regular(file, meta, &path.rel)
    }

    fn index_of(&self, dir: &SitePath) -> Result<Resource, SiteError> {
        let mut rel = dir.rel.clone();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(self.index.as_bytes());
        let file = sys::open_beneath(self.root.as_fd(), &rel).map_err(SiteError::from_io)?;
        let meta = file.metadata().map_err(SiteError::from_io)?;
        if meta.is_dir() {
            return Err(SiteError::NotFound);
        }
        regular(file, meta, &rel)
    }
}

fn regular(file: File, meta: Metadata, name: &[u8]) -> Result<Resource, SiteError> {
    let ft = meta.file_type();
    if !ft.is_file() {
        // FIFOs, sockets and devices are never content.
        let special = ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device();
        return Err(if special {
            SiteError::Forbidden
        } else {
            SiteError::NotFound
        });
    }
    Ok(Resource::File(OpenFile {
        file,
        meta,
        content_type: content_type(name),
    }))
}

/// Content-Type by extension; text gets an explicit UTF-8 charset.
pub fn content_type(name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    let mime = mime_guess::from_path(name.as_ref())
        .first_raw()
        .unwrap_or("application/octet-stream");
    let textual =
        mime.starts_with("text/") || mime == "application/javascript" || mime == "image/svg+xml";
    if textual {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    }
}

impl SiteError {
    fn from_io(e: io::Error) -> SiteError {
        use rustix::io::Errno;
        let code = e.raw_os_error().map(Errno::from_raw_os_error);
        match code {
            // EXDEV: RESOLVE_BENEATH refused a path leading out of the root.
            Some(Errno::NOENT | Errno::NOTDIR | Errno::LOOP | Errno::XDEV | Errno::NAMETOOLONG) => {
                SiteError::NotFound
            }
            Some(Errno::ACCESS | Errno::PERM) => SiteError::Forbidden,
            _ => SiteError::Io,
        }
    }
}

/// An I/O error as a short phrase without Rust's "(os error N)" suffix.
pub fn describe(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(content_type(b"a.html"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"a.css"), "text/css; charset=utf-8");
        assert_eq!(content_type(b"a.png"), "image/png");
        assert_eq!(content_type(b"a.unknownext"), "application/octet-stream");
        assert_eq!(content_type(b"noext"), "application/octet-stream");
    }
}
