//! URL -> thing on disk: the document root (or a virtual host's directory
//! in it), files and their variants, redirecting symlinks, listings.

pub mod cache;
pub mod compress;
pub mod digest;
pub mod file;
pub mod listing;
pub mod negotiate;
pub mod path;
pub mod redirect;
pub mod root;
pub mod root_files;
pub mod routes;
pub mod vhost;

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::cgi;
use crate::config::Features;
use crate::rules::locks::Locks;
use crate::sys::{self, describe};
use file::FileSet;
use path::SitePath;
pub use root::Tree;

/// A document root: every lookup is relative to the directory its path
/// names when the request comes ([`root::Root`]).
pub struct Site {
    root: root::Root,
    /// The root's absolute path: scripts are run by path.
    root_path: PathBuf,
    /// Index file names, tried in order.
    index: Vec<String>,
    features: Features,
    compression: Option<file::Compression>,
    /// `--auth` areas and their credentials.
    #[cfg(feature = "auth")]
    auth: Option<Box<dyn Guard>>,
    /// `--acme`: HTTP-01 answers, for the `--redirect-http` listener.
    #[cfg(feature = "acme")]
    acme_answers: Option<Box<dyn Http01>>,
}

/// One request's view of what to look up.
pub struct Lookup<'a> {
    pub path: &'a SitePath<'a>,
    pub host: Option<&'a str>,
    pub accept: Option<&'a str>,
    pub accept_encoding: Option<&'a str>,
}

/// Whether `--auth` and the site's `Basic-Auth` let a request through.
pub enum Access<'a> {
    /// No area or lock covers the path.
    Open,
    /// The credentials of this user passed (the access log names it).
    Granted { user: Arc<str> },
    /// 401, naming the area's or the lock's realm.
    Denied { realm: &'a str },
}

/// What decides [`Access`]: the `--auth` areas and the `_headers` locks
/// ([`crate::auth`]), which depend on the site rather than the site on them.
pub trait Guard: Send + Sync {
    /// Whether a request for [`path`] (decoded, from `/`) that meets these
    /// `Basic-Auth` locks, with these credentials (an Authorization
    /// header's value), may go on.
    fn access<'a>(
        &'a self,
        path: &str,
        locks: Locks<'a, '_>,
        authorization: Option<&str>,
    ) -> Access<'a>;
}

/// Where ACME's HTTP-01 challenge answers are read ([`crate::acme`]), for
/// the `--redirect-http` listener.
pub trait Http01: Send + Sync {
    /// The key authorization published for `token`; None when no
    /// validation of it is under way.
    fn answer(&self, token: &str) -> Option<Vec<u8>>;
}

/// What a request path names.
pub enum Resource {
    File(Arc<FileSet>),
    /// A directory asked for without its trailing slash: redirect here.
    AddSlash(String),
    /// A redirecting symlink: 301 to here.
    Redirect(String),
    Listing(listing::Listing),
    /// A CGI script to run.
    Script(ScriptTarget),
}

/// Where a CGI script is and how the request reached it.
pub struct ScriptTarget {
    /// The file to run.
    pub path: PathBuf,
    /// The script's URL path, e.g. `/cgi-bin/a.cgi` (decoded).
    pub script_name: String,
    /// What followed the script in the URL path (decoded); empty if nothing.
    pub path_info: String,
}

#[derive(Debug)]
pub enum SiteError {
    /// The request path is malformed or climbs out of the root.
    BadRequest,
    /// The Host header cannot name a virtual host directory.
    BadHost,
    NotFound,
    Forbidden,
    /// The process is out of file descriptors: a 503, try again later.
    NoDescriptors,
    /// Any other failure: a 500.
    Io,
}

/// The directory a request is served from.
enum HostDir {
    Root,
    /// The virtual host's directory, and its name under the root.
    Vhost(Arc<OwnedFd>, String),
    Redirect(redirect::Target),
}

impl Site {
    /// Opens the root; `index` names the index files a directory request
    /// tries, in order. Fails with a message that names the problem.
    pub fn open(
        root: &Path,
        index: &[impl AsRef<str>],
        features: Features,
    ) -> Result<Site, String> {
        let shown = root.display();
        let failed =
            |e: io::Error| format!("root {shown}: {}{}", describe(&e), sys::descriptor_hint(&e));
        // Absolute, so that what the path names can be asked again later
        // whatever the working directory; symlinks in it are kept, to be
        // followed anew (root::Root).
        let root_path = std::path::absolute(root).map_err(failed)?;
        let tree = root::Root::open(&root_path).map_err(failed)?;
        // Refuse an unreadable root now rather than 403 on every request.
        std::fs::read_dir(root).map_err(failed)?;
        // A directory that can be listed but not entered (mode 0644) would
        // list its names and answer 403 for every file in it.
        rustix::fs::accessat(
            rustix::fs::CWD,
            root,
            rustix::fs::Access::EXEC_OK,
            rustix::fs::AtFlags::EACCESS,
        )
        .map_err(|_| format!("root {shown}: Permission denied (it can be read but not entered: it needs x permission too)"))?;
        if index.is_empty() {
            return Err("index: no file name given".to_string());
        }
        for name in index {
            let name = name.as_ref();
            check_index_name(name).map_err(|why| format!("index {name:?}: {why}"))?;
        }
        let site = Site {
            root: tree,
            root_path,
            index: index.iter().map(|n| n.as_ref().to_string()).collect(),
            compression: features
                .compress
                .filter(|_| compress::AVAILABLE)
                .map(file::Compression::new),
            features,
            #[cfg(feature = "auth")]
            auth: None,
            #[cfg(feature = "acme")]
            acme_answers: None,
        };
        // openat2 arrived in Linux 5.6; without it the root cannot be enforced.
        match sys::open_beneath(site.tree().fd(), b"") {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOSYS.raw_os_error()) => {
                Err("this kernel lacks openat2(2) (Linux 5.6 or later is needed)".to_string())
            }
            _ => Ok(site),
        }
    }

    /// The tree a request is served from: every lookup of its response is
    /// made in it, so that a deploy swapping the root gives no response
    /// mixed from two releases. `now` is the request's one clock reading,
    /// which its lookups share.
    pub fn with_tree<R>(&self, now: Instant, f: impl FnOnce(&Tree) -> R) -> R {
        self.root.with_tree(now, forget_old_tree, f)
    }

    /// The same tree, kept (one Arc clone): for the rare caller that
    /// cannot work inside [`Site::with_tree`].
    pub fn tree(&self) -> Arc<root::Tree> {
        self.root.tree(Instant::now(), forget_old_tree)
    }

    pub fn runs_cgi(&self) -> bool {
        self.features.cgi
    }

    /// `--health-path`, if set.
    pub fn health_path(&self) -> Option<&str> {
        self.features.health_path.as_deref()
    }

    /// The `_headers` and `_redirects` rules of the site a request with
    /// this Host reaches; None when it reaches none (an unknown virtual
    /// host, a bad Host, a site that is a redirect). Err(NoDescriptors):
    /// they are not known yet and cannot be read now (a 503, as for a file
    /// that cannot be opened); never served without them. `now`: the
    /// request's clock reading.
    pub fn root_files(
        &self,
        tree: &Tree,
        host: Option<&str>,
        now: Instant,
    ) -> Result<Option<Arc<root_files::RootFiles>>, SiteError> {
        let key = self.host_key(host);
        if let Some(files) = root_files::cached(key, now) {
            return Ok(Some(files));
        }
        let mut files = self.load_root_files(tree, host, now);
        if matches!(files, Err(SiteError::NoDescriptors)) {
            // As in `resolve`: the open-file cache's descriptors go back.
            cache::clear();
            files = self.load_root_files(tree, host, now);
        }
        if let Ok(Some(files)) = &files {
            root_files::remember(key, files, now);
        }
        files
    }

    fn load_root_files(
        &self,
        tree: &Tree,
        host: Option<&str>,
        now: Instant,
    ) -> Result<Option<Arc<root_files::RootFiles>>, SiteError> {
        let generation = tree.generation();
        let loaded = match self.host_dir(tree, host) {
            Ok(HostDir::Root) => root_files::load(tree.fd(), &self.root_path, "", generation, now),
            Ok(HostDir::Vhost(fd, name)) => {
                let shown = self.root_path.join(&name);
                root_files::load(fd.as_fd(), &shown, &name, generation, now)
            }
            Ok(HostDir::Redirect(_)) => return Ok(None),
            Err(SiteError::NoDescriptors) => return Err(SiteError::NoDescriptors),
            Err(_) => return Ok(None),
        };
        loaded
            .map(Some)
            .map_err(|root_files::Exhausted| SiteError::NoDescriptors)
    }

    /// The site's own page for an error status (`404.html` in its root),
    /// if it has one. `now`: the request's clock reading.
    pub fn error_page(
        &self,
        tree: &Tree,
        host: Option<&str>,
        code: u16,
        now: Instant,
    ) -> Option<Arc<FileSet>> {
        let files = self.root_files(tree, host, now).ok()??;
        if !files.may_have_error_page(code) {
            return None;
        }
        let mut name = [0u8; 8];
        let len = {
            use std::io::Write;
            let mut cursor = std::io::Cursor::new(&mut name[..]);
            write!(cursor, "{code}.html").ok()?;
            cursor.position() as usize
        };
        let path = SitePath {
            rel: std::borrow::Cow::Borrowed(&name[..len]),
            trailing_slash: false,
            query: None,
        };
        let lookup = Lookup {
            path: &path,
            host,
            accept: None,
            accept_encoding: None,
        };
        match self.resolve(tree, &lookup, now) {
            Ok(Resource::File(set)) => Some(set),
            // Out of descriptors, or failing to read: not known to be absent.
            Err(SiteError::NoDescriptors | SiteError::Io) => None,
            _ => {
                files.note_no_error_page(code);
                None
            }
        }
    }

    /// Whether a request for [`path`] (decoded, from `/`) that meets these
    /// `Basic-Auth` locks, with these credentials, may go on. Without a
    /// guard (a build without the feature auth) a lock stays shut.
    pub fn access<'a>(
        &'a self,
        path: &str,
        locks: Locks<'a, '_>,
        authorization: Option<&str>,
    ) -> Access<'a> {
        #[cfg(feature = "auth")]
        if let Some(auth) = &self.auth {
            return auth.access(path, locks, authorization);
        }
        let _ = (path, authorization);
        match locks.iter().next() {
            Some(lock) => Access::Denied {
                realm: lock.realm(),
            },
            None => Access::Open,
        }
    }

    /// Puts paths under `--auth` areas behind these credentials.
    #[cfg(feature = "auth")]
    pub fn with_auth(mut self, auth: impl Guard + 'static) -> Site {
        self.auth = Some(Box::new(auth));
        self
    }

    /// Answers ACME HTTP-01 challenges on the `--redirect-http` port.
    #[cfg(feature = "acme")]
    pub fn with_acme(mut self, answers: impl Http01 + 'static) -> Site {
        self.acme_answers = Some(Box::new(answers));
        self
    }

    /// The key authorization published for an HTTP-01 `token`; None when
    /// no validation of it is under way.
    #[cfg(feature = "acme")]
    pub fn acme_http01(&self, token: &str) -> Option<Vec<u8>> {
        self.acme_answers.as_ref()?.answer(token)
    }

    /// Whether this site answers HTTP-01 challenges at all.
    #[cfg(feature = "acme")]
    pub fn answers_acme(&self) -> bool {
        self.acme_answers.is_some()
    }

    /// What a Host is known by in the per-thread caches.
    fn host_key<'h>(&self, host: Option<&'h str>) -> &'h [u8] {
        if self.features.vhosts {
            host.unwrap_or("").as_bytes()
        } else {
            b""
        }
    }

    /// Resolves a request path, through the open-file cache for files.
    /// `now`: the request's clock reading.
    pub fn resolve(&self, tree: &Tree, q: &Lookup, now: Instant) -> Result<Resource, SiteError> {
        if let Some(set) = cache::get(&self.cache_key(q), now) {
            return Ok(Resource::File(set));
        }
        self.resolve_fresh(tree, q, now)
    }

    /// What the open-file cache knows `q` by.
    fn cache_key<'k>(&self, q: &'k Lookup) -> cache::Key<'k> {
        cache::Key {
            host: self.host_key(q.host),
            rel: &q.path.rel,
            trailing_slash: q.path.trailing_slash,
            pretty: false,
        }
    }

    /// `resolve` once the open-file cache had nothing.
    fn resolve_fresh(&self, tree: &Tree, q: &Lookup, now: Instant) -> Result<Resource, SiteError> {
        let mut resolved = self.resolve_uncached(tree, q);
        if matches!(resolved, Err(SiteError::NoDescriptors)) {
            // The cache's descriptors count against the same limit as the
            // connections: give them back and try once more.
            cache::clear();
            resolved = self.resolve_uncached(tree, q);
        }
        if let Ok(Resource::File(set)) = &resolved {
            cache::put(&self.cache_key(q), Arc::clone(set), now);
        }
        resolved
    }

    fn resolve_uncached(&self, tree: &Tree, q: &Lookup) -> Result<Resource, SiteError> {
        let host_dir = self.host_dir(tree, q.host)?;
        let dir = match &host_dir {
            HostDir::Root => tree.fd(),
            HostDir::Vhost(fd, _) => fd.as_fd(),
            HostDir::Redirect(target) => {
                let p = q.path;
                let location = redirect::location(target, &p.rel, p.trailing_slash, p.query);
                return Ok(Resource::Redirect(location));
            }
        };
        let in_dir = InDir {
            fd: dir,
            host: &host_dir,
        };
        match sys::open_beneath(dir, &q.path.rel) {
            Ok(file) => self.opened(&in_dir, q, file),
            Err(e) => match SiteError::from_io(e) {
                SiteError::NotFound => match self.find_script(&in_dir, q.path)? {
                    Some(script) => Ok(script),
                    None => find_redirect(dir, q.path).ok_or(SiteError::NotFound),
                },
                other => Err(other),
            },
        }
    }

    /// A CGI script named by a file, with PATH_INFO from what follows it.
    /// With CGI on, a `*.cgi` file that cannot be run is refused rather than
    /// shown: its source is not content.
    fn script(
        &self,
        d: &InDir,
        rel: &[u8],
        meta: &Metadata,
        path_info: String,
    ) -> Result<Option<Resource>, SiteError> {
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        if !self.features.cgi || !cgi::is_cgi_name(name) {
            return Ok(None);
        }
        if !cgi::is_runnable(meta) {
            return Err(SiteError::Forbidden);
        }
        let mut path = self.root_path.clone();
        if let HostDir::Vhost(_, name) = d.host {
            path.push(name);
        }
        path.push(std::ffi::OsStr::from_bytes(rel));
        let script_name = format!("/{}", String::from_utf8_lossy(rel));
        Ok(Some(Resource::Script(ScriptTarget {
            path,
            script_name,
            path_info,
        })))
    }

    /// `/a.cgi/x/y` does not open (a.cgi is no directory): look for a script
    /// among the leading components, the rest being PATH_INFO.
    fn find_script(&self, d: &InDir, path: &SitePath) -> Result<Option<Resource>, SiteError> {
        if !self.features.cgi {
            return Ok(None);
        }
        let components: Vec<&[u8]> = path.rel.split(|&b| b == b'/').collect();
        for i in 1..components.len() {
            let rel = components[..i].join(&b'/');
            let Some(last) = components.get(i - 1) else {
                break;
            };
            if !cgi::is_cgi_name(last) {
                continue;
            }
            let Ok(meta) = sys::open_beneath(d.fd, &rel).and_then(|f| f.metadata()) else {
                return Ok(None);
            };
            let mut info = format!("/{}", String::from_utf8_lossy(&components[i..].join(&b'/')));
            if path.trailing_slash {
                info.push('/');
            }
            return self.script(d, &rel, &meta, info);
        }
        Ok(None)
    }

    /// With virtual hosts on, the first of `host:port`, `host`, `default`
    /// that exists under the root; a redirecting symlink redirects the site.
    fn host_dir(&self, tree: &Tree, host: Option<&str>) -> Result<HostDir, SiteError> {
        if !self.features.vhosts {
            return Ok(HostDir::Root);
        }
        let names = vhost::candidates(host).map_err(|_| SiteError::BadHost)?;
        for name in names {
            if let Some(target) = redirect_link(tree.fd(), name.as_bytes()) {
                return Ok(HostDir::Redirect(target));
            }
            match tree.vhost_dir(&name) {
                Ok(fd) => return Ok(HostDir::Vhost(fd, name)),
                Err(e) => match SiteError::from_io(e) {
                    SiteError::NotFound => continue,
                    other => return Err(other),
                },
            }
        }
        Err(SiteError::NotFound)
    }

    fn opened(&self, d: &InDir, q: &Lookup, file: File) -> Result<Resource, SiteError> {
        let dir = d.fd;
        let meta = file.metadata().map_err(SiteError::from_io)?;
        if !meta.is_dir() {
            let info = if q.path.trailing_slash { "/" } else { "" };
            if let Some(script) = self.script(d, &q.path.rel, &meta, info.to_string())? {
                return Ok(script);
            }
            if q.path.trailing_slash {
                // `/file.txt/` names a directory that is not there.
                return Err(SiteError::NotFound);
            }
            return FileSet::discover(dir, &q.path.rel, file, self.compression.as_ref())
                .map(|set| Resource::File(Arc::new(set)));
        }
        if !q.path.trailing_slash {
            return Ok(Resource::AddSlash(q.path.directory_url()));
        }
        let mut rel = q.path.rel.to_vec();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        let dir_len = rel.len();
        // The first index name that exists decides, even when it is a
        // directory (then 404, as for one name): no listing hides it.
        for name in &self.index {
            rel.truncate(dir_len);
            rel.extend_from_slice(name.as_bytes());
            match sys::open_beneath(dir, &rel) {
                Ok(index) => return self.index_file(d, &rel, index),
                Err(e) => match SiteError::from_io(e) {
                    SiteError::NotFound => continue,
                    other => return Err(other),
                },
            }
        }
        if !self.features.listing {
            return Err(SiteError::NotFound);
        }
        let url = q.path.directory_url_without_query();
        rel.truncate(dir_len);
        listing::read(&file, dir, &rel, url)
            .map(Resource::Listing)
            .map_err(SiteError::from_io)
    }

    /// A directory's index file, opened as `index` at `rel`.
    fn index_file(&self, d: &InDir, rel: &[u8], index: File) -> Result<Resource, SiteError> {
        let index_meta = index.metadata().map_err(SiteError::from_io)?;
        if index_meta.is_dir() {
            return Err(SiteError::NotFound);
        }
        if let Some(script) = self.script(d, rel, &index_meta, String::new())? {
            return Ok(script);
        }
        FileSet::discover(d.fd, rel, index, self.compression.as_ref())
            .map(|set| Resource::File(Arc::new(set)))
    }
}

/// This thread moved to a newer tree: its caches hold the old one's lookups.
fn forget_old_tree() {
    cache::clear();
    root_files::forget_local();
}

/// The directory a lookup happens in.
struct InDir<'a> {
    fd: BorrowedFd<'a>,
    host: &'a HostDir,
}

/// After a lookup failed: does a redirecting symlink stand somewhere along
/// the path? Walks the components, reading each as a link.
fn find_redirect(dir: BorrowedFd<'_>, path: &SitePath) -> Option<Resource> {
    let components: Vec<&[u8]> = if path.rel.is_empty() {
        Vec::new()
    } else {
        path.rel.split(|&b| b == b'/').collect()
    };
    for i in 0..components.len() {
        let parent_rel = components[..i].join(&b'/');
        let parent = if i == 0 {
            None
        } else {
            Some(sys::open_dir_beneath(dir, &parent_rel).ok()?)
        };
        let parent_fd = parent.as_ref().map_or(dir, |fd| fd.as_fd());
        if let Some(target) = redirect_link(parent_fd, components[i]) {
            let rest = components[i + 1..].join(&b'/');
            let location = redirect::location(&target, &rest, path.trailing_slash, path.query);
            return Some(Resource::Redirect(location));
        }
    }
    None
}

/// The redirect a symlink `name` in `dir` stands for, if it is one. Only a
/// dangling link redirects: an absolute link to a file that exists is a
/// link out of the root, and is refused like any other.
fn redirect_link(dir: BorrowedFd<'_>, name: &[u8]) -> Option<redirect::Target> {
    let target = sys::read_link(dir, name).ok()?;
    let path = target.strip_prefix(b"=").unwrap_or(&target);
    if path.starts_with(b"/") && Path::new(std::ffi::OsStr::from_bytes(path)).exists() {
        return None;
    }
    redirect::parse_target(&target)
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
            Some(Errno::MFILE | Errno::NFILE) => SiteError::NoDescriptors,
            _ => SiteError::Io,
        }
    }
}

/// Whether `name` can be an index file name: one plain name in the
/// directory, never a path (`--index` is checked with this too).
pub fn check_index_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err("must be a plain file name (no `/`, not `.` or `..`)".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names() {
        assert!(check_index_name("index.html").is_ok());
        assert!(check_index_name(".index").is_ok());
        for bad in ["", ".", "..", "a/b", "/a", "a/", "a\0b"] {
            assert!(check_index_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(b"a.html"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"a.css"), "text/css; charset=utf-8");
        assert_eq!(content_type(b"a.png"), "image/png");
        assert_eq!(content_type(b"a.unknownext"), "application/octet-stream");
        assert_eq!(content_type(b"noext"), "application/octet-stream");
    }
}
