//! Netlify's and Cloudflare Pages' routing over a site's files, as
//! Cloudflare documents it ("Serving Pages"): pretty URLs (`/about` from
//! `about.html`, `/about/` redirected to `/about`), with `--pretty-urls
//! redirect` also Cloudflare's redirects of `/about.html` and
//! `/about/index.html`; the nearest `404.html`; the single-page-app
//! fallback (`--spa`).
//!
//! Each function looks in the site directory it is given (`in_site_dir`):
//! the root, or a virtual host's directory. What respond.rs makes of the
//! answers (which `_headers` apply, the redirect status) is decided there.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Instant;

use super::file::FileSet;
use super::path::SitePath;
use super::{cache, HostDir, Lookup, Resource, Site, SiteError, Tree};
use crate::config::PrettyUrls;
use crate::pool;
use crate::sys;

const HTML: &[u8] = b".html";
/// The deepest directory below the root whose `404.html` a miss looks
/// for: a miss costs at most this many lookups (`openat2`) more, however
/// deep the path a client makes up.
const NEAREST_404_DEPTH: usize = 4;

/// What a request's path names, as `resolve_request` found it.
pub enum Routed {
    Found(Resource),
    /// The file of its pretty URL, remembered by the open-file cache.
    Pretty(Arc<FileSet>),
}

/// What a path that names nothing is as a pretty URL.
pub enum Pretty {
    /// `/about`: `about.html`, served under the URL asked for.
    Serve(Arc<FileSet>),
    /// `/about/`: redirect to `/about`.
    DropSlash,
}

/// Where `--pretty-urls redirect` sends a request for an `.html` file: the
/// first `keep` bytes of its path, as a directory when `slash`.
pub struct HtmlRedirect {
    pub keep: usize,
    pub slash: bool,
}

impl Site {
    /// `resolve` for the path a request asks for: what the open-file
    /// cache has for it, else for its pretty URL (found before), else a
    /// fresh lookup. A warm pretty URL is one cache hit, as a file is.
    /// `now`: the request's clock reading.
    pub fn resolve_request(
        &self,
        tree: &Tree,
        q: &Lookup,
        now: Instant,
    ) -> Result<Routed, SiteError> {
        if let Some(set) = cache::find(&self.cache_key(q), now) {
            return Ok(Routed::Found(Resource::File(set)));
        }
        if self.pretty_applies(q.path) && !q.path.trailing_slash {
            if let Some(set) = cache::find(&self.pretty_key(q), now) {
                return Ok(Routed::Pretty(set));
            }
        }
        cache::missed();
        self.resolve_fresh(tree, q, now).map(Routed::Found)
    }

    /// After `q` named nothing: `about.html` for `/about` (or a redirect
    /// for `/about/`) when that is a file and nothing named `about` exists.
    /// `now`: the request's clock reading.
    pub fn pretty(
        &self,
        tree: &Tree,
        q: &Lookup,
        now: Instant,
    ) -> Result<Option<Pretty>, SiteError> {
        if !self.pretty_applies(q.path) {
            return Ok(None);
        }
        let mut name = pool::take(&pool::HEADS);
        name.extend_from_slice(&q.path.rel);
        name.extend_from_slice(HTML);
        let found = self.in_site_dir(tree, q.host, |dir| {
            let Some(file) = html_twin(dir, &q.path.rel, &name)? else {
                return Ok(None);
            };
            if q.path.trailing_slash {
                return Ok(Some(Pretty::DropSlash));
            }
            let set = FileSet::discover(dir, &name, file, self.compression.as_ref())?;
            Ok(Some(Pretty::Serve(Arc::new(set))))
        });
        pool::give(&pool::HEADS, name);
        let found = found?.flatten();
        if let Some(Pretty::Serve(set)) = &found {
            cache::put(&self.pretty_key(q), Arc::clone(set), now);
        }
        Ok(found)
    }

    /// `--pretty-urls redirect`, for a path that named a file: the pretty
    /// URL to send the client to instead, if the file has one.
    /// `about/index.html` (the first `--index` name) goes to `about/`;
    /// `about.html` to `about`, unless something named `about` exists.
    pub fn html_redirect(
        &self,
        tree: &Tree,
        q: &Lookup,
    ) -> Result<Option<HtmlRedirect>, SiteError> {
        let path = q.path;
        if self.features.routes.pretty_urls != PrettyUrls::Redirect || path.trailing_slash {
            return Ok(None);
        }
        let rel = &path.rel[..];
        let name_at = rel.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let index = self.index.first().map(String::as_bytes);
        if index == Some(&rel[name_at..]) {
            let keep = name_at.saturating_sub(1);
            return Ok(Some(HtmlRedirect { keep, slash: true }));
        }
        let Some(stem) = rel.strip_suffix(HTML).filter(|s| s.len() > name_at) else {
            return Ok(None);
        };
        let free = self.in_site_dir(tree, q.host, |dir| Ok(!sys::exists_beneath(dir, stem)))?;
        Ok(free.filter(|&free| free).map(|_| HtmlRedirect {
            keep: stem.len(),
            slash: false,
        }))
    }

    /// The `404.html` of the nearest directory above `url` (decoded, from
    /// `/`) that has one, below the root; None: look at the root's.
    /// `now`: the request's clock reading.
    pub fn nearest_error_page(
        &self,
        tree: &Tree,
        host: Option<&str>,
        url: &[u8],
        now: Instant,
    ) -> Option<Arc<FileSet>> {
        if !self.features.routes.nearest_404 {
            return None;
        }
        let start = nearest_404_start(url.strip_prefix(b"/")?)?;
        let mut name = pool::take(&pool::HEADS);
        let found = self.in_site_dir(tree, host, |dir| {
            Ok(self.nearest_404_in(tree, dir, host, start, &mut name, now))
        });
        pool::give(&pool::HEADS, name);
        found.ok().flatten().flatten()
    }

    /// `--spa`: the page a path that names nothing gets, the root's index
    /// file (not a script or a listing). `now`: the request's clock reading.
    pub fn spa_page(&self, tree: &Tree, host: Option<&str>, now: Instant) -> Option<Arc<FileSet>> {
        if !self.features.routes.spa {
            return None;
        }
        let root = SitePath {
            rel: std::borrow::Cow::Borrowed(b""),
            trailing_slash: true,
            query: None,
        };
        match self.resolve(tree, &quiet_lookup(&root, host), now) {
            Ok(Resource::File(set)) => Some(set),
            _ => None,
        }
    }

    /// The first `--index` name, as the URL path `_headers` match for the
    /// page `--spa` serves (`/index.html`).
    pub fn first_index(&self) -> &str {
        self.index.first().map_or("", String::as_str)
    }

    /// The `404.html` of `parent` or the nearest directory above it, in
    /// the site directory `dir`: from the open-file cache, or when it is
    /// there; an absent one costs one `openat2`. `name` is scratch.
    fn nearest_404_in(
        &self,
        tree: &Tree,
        dir: BorrowedFd<'_>,
        host: Option<&str>,
        mut parent: &[u8],
        name: &mut Vec<u8>,
        now: Instant,
    ) -> Option<Arc<FileSet>> {
        while !parent.is_empty() {
            name.clear();
            name.extend_from_slice(parent);
            name.extend_from_slice(b"/404.html");
            let path = SitePath {
                rel: std::borrow::Cow::Borrowed(name),
                trailing_slash: false,
                query: None,
            };
            let q = quiet_lookup(&path, host);
            if let Some(set) = cache::find(&self.cache_key(&q), now) {
                return Some(set);
            }
            if sys::open_beneath(dir, name).is_ok() {
                if let Ok(Resource::File(set)) = self.resolve(tree, &q, now) {
                    return Some(set);
                }
            }
            parent = &parent[..parent.iter().rposition(|&b| b == b'/').unwrap_or(0)];
        }
        None
    }

    fn pretty_applies(&self, path: &SitePath) -> bool {
        self.features.routes.pretty_urls != PrettyUrls::Off
            && !path.rel.is_empty()
            && !path.rel.ends_with(HTML)
    }

    fn pretty_key<'k>(&self, q: &'k Lookup) -> cache::Key<'k> {
        cache::Key {
            host: self.host_key(q.host),
            rel: &q.path.rel,
            trailing_slash: false,
            pretty: true,
        }
    }

    /// `f` in the directory of the site `host` reaches; None when that
    /// site is a redirect (a symlinked virtual host).
    fn in_site_dir<T>(
        &self,
        tree: &Tree,
        host: Option<&str>,
        f: impl FnOnce(BorrowedFd<'_>) -> Result<T, SiteError>,
    ) -> Result<Option<T>, SiteError> {
        match self.host_dir(tree, host)? {
            HostDir::Root => f(tree.fd()).map(Some),
            HostDir::Vhost(fd, _) => f(fd.as_fd()).map(Some),
            HostDir::Redirect(_) => Ok(None),
        }
    }
}

/// A lookup for a page staticd chooses itself: no negotiation by the
/// request's Accept (an error page is sent as it is).
fn quiet_lookup<'a>(path: &'a SitePath<'a>, host: Option<&'a str>) -> Lookup<'a> {
    Lookup {
        path,
        host,
        accept: None,
        accept_encoding: None,
    }
}

/// `rel.html` (`name`) opened, when it is a regular file and nothing is
/// named `rel` (a directory, a file, a redirecting symlink: each wins).
fn html_twin(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    name: &[u8],
) -> Result<Option<std::fs::File>, SiteError> {
    let file = match sys::open_beneath(dir, name) {
        Ok(file) => file,
        Err(e) => {
            return match SiteError::from_io(e) {
                SiteError::NotFound => Ok(None),
                other => Err(other),
            }
        }
    };
    let meta = file.metadata().map_err(SiteError::from_io)?;
    if !meta.is_file() || sys::exists_beneath(dir, rel) {
        return Ok(None);
    }
    Ok(Some(file))
}

/// The deepest directory of `rel` (decoded, without its leading `/`) whose `404.html` a miss looks
/// at: the path's own directory, cut to
/// [`NEAREST_404_DEPTH`] components. None: the path is in
/// the root.
fn nearest_404_start(rel: &[u8]) -> Option<&[u8]> {
    let dir = &rel[..rel.iter().rposition(|&b| b == b'/')?];
    let cut = dir
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'/')
        .nth(NEAREST_404_DEPTH - 1)
        .map_or(dir.len(), |(i, _)| i);
    Some(&dir[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_the_nearest_404_is_looked_for_first() {
        assert_eq!(nearest_404_start(b"x"), None);
        assert_eq!(nearest_404_start(b"blog/x"), Some(&b"blog"[..]));
        // `/blog/x/` is decoded as `blog/x` with a trailing slash, which
        // url_path puts back: its own directory comes first.
        assert_eq!(nearest_404_start(b"blog/x/"), Some(&b"blog/x"[..]));
        assert_eq!(nearest_404_start(b"a/b/c/d/e/f/g"), Some(&b"a/b/c/d"[..]));
    }
}
