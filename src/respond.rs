//! Request + Resource -> Response: the one place where statuses, headers
//! and body bytes are decided.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::cgi::{self, CgiHead};
use crate::http::conditional::{self, Precondition, Validators};
use crate::http::head::{Framing, Head};
use crate::http::parse::{BodyFraming, Method, ParseError, Request};
use crate::http::range::{self, ByteRange, RangeOutcome};
use crate::http::response::{self, Chunk};
use crate::http::status::Status;
use crate::page;
use crate::pool;
use crate::rules::locks::Locks;
use crate::rules::redirects::Match as RuleMatch;
use crate::site::file::{FileSet, Sent, Source, Variant};
use crate::site::listing::{self, Listing, Sort};
use crate::site::negotiate;
use crate::site::path::{self, PathError, PathUrl, SitePath};
use crate::site::root_files::{self, RootFiles};
use crate::site::routes::{Pretty, Routed};
use crate::site::{Access, Lookup, Resource, ScriptTarget, Site, SiteError, Tree};

const ALLOW: &str = "GET, HEAD, OPTIONS";

/// A decided response: the structured head, then body pieces in order.
/// Each protocol encodes it (HTTP/1.1 bytes, HTTP/2 fields).
pub struct Response {
    pub head: Head,
    pub body: Vec<Chunk>,
    /// Body bytes on the wire (for the access log).
    pub body_len: u64,
    /// The `--auth` user whose credentials passed (for the access log).
    pub user: Option<Arc<str>>,
    /// The server closes the connection after this response.
    pub close: bool,
    /// The request's HTTP/1 minor version, for the HTTP/1.1 encoding of
    /// persistence and open-ended bodies (1 when unknown).
    pub minor_version: u8,
    /// Left out of the access log: `--health-path` answers, which a
    /// balancer asks for every few seconds (see `health`).
    pub unlogged: bool,
}

impl Response {
    pub fn code(&self) -> u16 {
        self.head.code()
    }
}

/// The body list goes back to this thread's free list (the head returns
/// its own buffers).
impl Drop for Response {
    fn drop(&mut self) {
        pool::give(&response::BODIES, std::mem::take(&mut self.body));
    }
}

/// A body of one chunk, in a list from the free list.
fn one_chunk(chunk: Chunk) -> Vec<Chunk> {
    let mut body = pool::take(&response::BODIES);
    body.push(chunk);
    body
}

/// Part of a variant's bytes as a body chunk.
fn slice(source: &Source, offset: u64, len: u64) -> Chunk {
    match source {
        Source::File(file) => Chunk::File {
            file: Arc::clone(file),
            offset,
            len,
        },
        Source::Memory(bytes) => Chunk::Shared {
            bytes: Arc::clone(bytes),
            offset: offset as usize,
            len: len as usize,
        },
    }
}

/// Answers a request whose head parsed. `force_close` makes the response
/// the last on its connection (the server is shutting down).
pub fn respond(site: &Site, req: &Request, force_close: bool) -> Answer {
    if let Some(response) = health(site, req, force_close) {
        return Answer::Send(response);
    }
    // An absolute-form target names the host itself (RFC 9112 §3.2.2).
    let host = path::authority(&req.target).or(req.host.as_deref());
    // One tree for the whole response: a deploy that swaps the root
    // meanwhile gives no response mixed from two releases. One clock
    // reading for its lookups: each is a vDSO call, a few percent of a
    // small response's cost when every lookup made its own.
    let now = Instant::now();
    site.with_tree(now, |tree| {
        respond_in(site, tree, host, req, force_close, now)
    })
}

/// [`respond`], every lookup in `tree`.
fn respond_in(
    site: &Site,
    tree: &Tree,
    host: Option<&str>,
    req: &Request,
    force_close: bool,
    now: Instant,
) -> Answer {
    // Out of descriptors before the site's rules were ever read: a 503
    // (below), as for a file that cannot be opened, never an answer
    // without its `_headers` and `_redirects`.
    let (files, exhausted) = match site.root_files(tree, host, now) {
        Ok(files) => (files, false),
        Err(_) => (None, true),
    };
    // The decoded path is written into a pooled buffer: no allocation.
    let mut scratch = pool::take(&pool::HEADS);
    let parsed = SitePath::from_target(&req.target);
    let url_path = parsed.as_ref().ok().map(|p| url_path(p, &mut scratch));
    let ctx = SiteCtx {
        site,
        tree,
        host,
        files: files.as_ref(),
        path: url_path,
        now,
    };
    let reply = Reply {
        persistence: Persistence::of(req, force_close),
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
        site: Some(ctx),
    };
    let answer = match parsed {
        // `OPTIONS *` asks about the server, not a path (RFC 9110 §9.3.7).
        _ if req.method == Method::Options && req.target == "*" => Answer::Send(reply.options()),
        _ if exhausted => Answer::Send(reply.error(Status::ServiceUnavailable)),
        Ok(path) => reply.request(&ctx, req, &path, force_close),
        Err(PathError::BadRequest) => Answer::Send(reply.error(Status::BadRequest)),
        Err(PathError::Hidden) => Answer::Send(reply.error(Status::NotFound)),
    };
    pool::give(&pool::HEADS, scratch);
    answer
}

/// Set once a graceful stop begins (SIGTERM, SIGINT): from then on the
/// health path says 503, so a balancer stops sending new clients here
/// while the responses in flight finish. Process-wide, as the stop is.
static DRAINING: AtomicBool = AtomicBool::new(false);

/// A graceful stop began: `--health-path` answers 503 from now on.
pub fn draining_begins() {
    DRAINING.store(true, Ordering::Relaxed);
}

/// `--health-path`: 200 `ok` while serving, 503 `stopping` once a stop
/// began. Decided before anything else, so that no `--auth` area,
/// `_redirects` rule, virtual host or file can shadow it, and never cached.
/// Not logged: a balancer asks every few seconds, and a line per probe
/// would bury the requests (the metrics still count them). Other methods
/// than GET and HEAD go on like any path's. Also answered on a
/// `--redirect-http` port (pipeline::answer), where probes that cannot
/// speak TLS to a certificate chosen by SNI come in cleartext.
pub fn health(site: &Site, req: &Request, force_close: bool) -> Option<Response> {
    let wanted = site.health_path()?;
    let path = req.target.split_once('?').map_or(&*req.target, |(p, _)| p);
    if path != wanted || !matches!(req.method, Method::Get | Method::Head) {
        return None;
    }
    let reply = Reply {
        persistence: Persistence::of(req, force_close),
        head_only: req.method == Method::Head,
        errors: ErrorForm::Plain,
        site: None,
    };
    let (status, body): (_, &'static str) = match DRAINING.load(Ordering::Relaxed) {
        false => (Status::Ok, "ok\n"),
        true => (Status::ServiceUnavailable, "stopping\n"),
    };
    let mut h = Head::new(status);
    h.header("Cache-Control", "no-store");
    let mut response = reply.small_body(
        h,
        "text/plain; charset=utf-8",
        Chunk::Static(body.as_bytes()),
    );
    response.unlogged = true;
    Some(response)
}

/// What the site has at `path`.
fn lookup(ctx: &SiteCtx, req: &Request, path: &SitePath) -> Result<Resource, SiteError> {
    ctx.site
        .resolve(ctx.tree, &lookup_of(ctx, req, path), ctx.now)
}

/// The request's lookup of `path`.
fn lookup_of<'a>(ctx: &SiteCtx<'a>, req: &'a Request, path: &'a SitePath<'a>) -> Lookup<'a> {
    Lookup {
        path,
        host: ctx.host,
        accept: req.accept.as_deref(),
        accept_encoding: req.accept_encoding.as_deref(),
    }
}

/// `/` and the decoded path (with its trailing slash), as `_headers`,
/// `_redirects` and `--auth` prefixes are written.
fn url_path<'s>(path: &SitePath, scratch: &'s mut Vec<u8>) -> &'s [u8] {
    scratch.clear();
    scratch.push(b'/');
    scratch.extend_from_slice(&path.rel);
    if path.trailing_slash && !path.rel.is_empty() {
        scratch.push(b'/');
    }
    scratch
}

impl Reply<'_> {
    /// A request whose path is sound: access, method, `_redirects`, then
    /// what the path names.
    fn request(&self, ctx: &SiteCtx, req: &Request, path: &SitePath, force_close: bool) -> Answer {
        if root_files::is_root_file(&path.rel) {
            // Configuration, never content.
            return Answer::Send(self.error(Status::NotFound));
        }
        let user = match self.access(ctx, req, ctx.path) {
            Ok(user) => user,
            Err(denied) => return Answer::Send(*denied),
        };
        let mut answer = self.permitted(ctx, req, path, force_close);
        match &mut answer {
            Answer::Send(response) => response.user = user,
            Answer::Cgi(job) => job.user = user,
        }
        answer
    }

    /// A request `--auth` lets through: method, `_redirects`, then what
    /// the path names.
    fn permitted(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        path: &SitePath,
        force_close: bool,
    ) -> Answer {
        let site = ctx.site;
        // POST means something only to a CGI script.
        let post = matches!(&req.method, Method::Other(m) if m == "POST") && site.runs_cgi();
        match &req.method {
            Method::Get | Method::Head => {}
            Method::Options => return Answer::Send(self.options()),
            Method::Other(_) if post => {}
            Method::Other(_) => return Answer::Send(self.not_allowed()),
        }
        let rule = match (ctx.files, ctx.path) {
            (Some(files), Some(url)) => files.redirects.first_match(url),
            _ => None,
        };
        // A rule applies when nothing is at the path, or when it is forced
        // (Netlify's shadowing): symlink redirects are files, so they win
        // over unforced rules.
        if let Some(rule) = rule.as_ref().filter(|r| r.force()) {
            return self.redirect_rule(ctx, req, path, rule, post, force_close);
        }
        let q = lookup_of(ctx, req, path);
        let resolved = match site.resolve_request(ctx.tree, &q, ctx.now) {
            Ok(Routed::Pretty(set)) => return self.pretty_page(ctx, req, set, post, force_close),
            Ok(Routed::Found(resource)) => Ok(resource),
            Err(e) => Err(e),
        };
        match (resolved, rule) {
            (Err(SiteError::NotFound), rule) => {
                self.missing(ctx, req, path, rule.as_ref(), post, force_close)
            }
            (Ok(Resource::File(set)), _) if !post => match site.html_redirect(ctx.tree, &q) {
                Ok(Some(to)) => Answer::Send(self.moved_to(PathUrl {
                    rel: &path.rel[..to.keep],
                    slash: to.slash,
                    query: path.query,
                })),
                Ok(None) => self.resolved(ctx, req, Ok(Resource::File(set)), post, force_close),
                Err(e) => self.resolved(ctx, req, Err(e), post, force_close),
            },
            (resolved, _) => self.resolved(ctx, req, resolved, post, force_close),
        }
    }

    /// A path that names nothing: its pretty URL, else the `_redirects`
    /// rule that matched, else `--spa`'s page, else a 404.
    fn missing(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        path: &SitePath,
        rule: Option<&RuleMatch>,
        post: bool,
        force_close: bool,
    ) -> Answer {
        let site = ctx.site;
        match site.pretty(ctx.tree, &lookup_of(ctx, req, path), ctx.now) {
            Ok(Some(Pretty::Serve(set))) => {
                return self.pretty_page(ctx, req, set, post, force_close)
            }
            // The file's one URL is without the slash (both hosts).
            Ok(Some(Pretty::DropSlash)) => {
                return Answer::Send(self.moved_to(PathUrl {
                    rel: &path.rel,
                    slash: false,
                    query: path.query,
                }))
            }
            Ok(None) => {}
            Err(e) => return self.resolved(ctx, req, Err(e), post, force_close),
        }
        if let Some(rule) = rule {
            return self.redirect_rule(ctx, req, path, rule, post, force_close);
        }
        let Some(page) = site.spa_page(ctx.tree, ctx.host, ctx.now) else {
            return self.resolved(ctx, req, Err(SiteError::NotFound), post, force_close);
        };
        let url = [&b"/"[..], site.first_index().as_bytes()];
        self.file_served_as(ctx, req, url, page, post, force_close)
    }

    /// `/about` served from `about.html`: a rewrite, with the `_headers` of
    /// the file served (`/about.html`), as for a `_redirects` 200.
    fn pretty_page(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        set: Arc<FileSet>,
        post: bool,
        force_close: bool,
    ) -> Answer {
        let url = [ctx.path.unwrap_or(b"/"), &b".html"[..]];
        self.file_served_as(ctx, req, url, set, post, force_close)
    }

    /// [`Reply::served_as`] for a file, its URL path written from `parts`
    /// into a pooled buffer (no allocation).
    fn file_served_as(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        parts: [&[u8]; 2],
        set: Arc<FileSet>,
        post: bool,
        force_close: bool,
    ) -> Answer {
        let mut url = pool::take(&pool::HEADS);
        for part in parts {
            url.extend_from_slice(part);
        }
        let answer = self.served_as(ctx, req, &url, Ok(Resource::File(set)), post, force_close);
        pool::give(&pool::HEADS, url);
        answer
    }

    /// What the site serves for a request from another URL path than the
    /// one asked for (`url`: a pretty URL's file, `--spa`'s page): that
    /// URL's `--auth` areas and `_headers` apply, as for a rewrite.
    fn served_as(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        url: &[u8],
        resolved: Result<Resource, SiteError>,
        post: bool,
        force_close: bool,
    ) -> Answer {
        if let Err(denied) = self.access(ctx, req, Some(url)) {
            return Answer::Send(*denied);
        }
        self.rewritten(ctx, req, url, resolved, post, force_close)
    }

    /// A redirect to a pretty URL (308, as Cloudflare Pages answers): the
    /// site's `_headers` apply as to any redirect.
    fn moved_to(&self, location: PathUrl) -> Response {
        let mut h = Head::new(Status::PermanentRedirect);
        h.header_display("Location", location);
        self.short_body(Status::PermanentRedirect, h)
    }

    /// Whether `--auth` and the site's `Basic-Auth` let the request for
    /// `url` through: the user whose credentials passed (None: nothing
    /// covers it), or the 401 (boxed: a refusal is rare, and the usual
    /// result stays small).
    fn access(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        url: Option<&[u8]>,
    ) -> Result<Option<Arc<str>>, Box<Response>> {
        let site = ctx.site;
        // A path that cannot be read is refused elsewhere; "/" stands in
        // so that an area at the root still covers it. A path that is not
        // UTF-8 is read lossily: it stays under the same prefixes.
        let url = url.unwrap_or(b"/");
        let locks = match ctx.files {
            Some(files) => files.headers.locks(ctx.host, url),
            None => Locks::none(),
        };
        let text = String::from_utf8_lossy(url);
        match site.access(&text, locks, req.authorization.as_deref()) {
            Access::Open => Ok(None),
            Access::Granted { user } => Ok(Some(user)),
            Access::Denied { realm } => {
                let mut h = Head::new(Status::Unauthorized);
                h.header_display(
                    "WWW-Authenticate",
                    format_args!("Basic realm=\"{realm}\", charset=\"UTF-8\""),
                );
                Err(Box::new(self.short_body(Status::Unauthorized, h)))
            }
        }
    }

    /// A `_redirects` rule that matched: a redirect, or the target's content
    /// under the requested URL (200), or as the page of a 404.
    fn redirect_rule(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        path: &SitePath,
        rule: &RuleMatch,
        post: bool,
        force_close: bool,
    ) -> Answer {
        let status = match rule.status() {
            301 => Status::MovedPermanently,
            302 => Status::Found,
            303 => Status::SeeOther,
            307 => Status::TemporaryRedirect,
            308 => Status::PermanentRedirect,
            200 | 404 => return self.rewrite(ctx, req, rule, post, force_close),
            // The parser admits no other status.
            _ => return Answer::Send(self.error(Status::InternalServerError)),
        };
        let mut h = Head::new(status);
        h.header("Location", &rule.target(path.query));
        Answer::Send(self.short_body(status, h))
    }

    /// A 200 or 404 rule: the target goes through the same path checks
    /// and `--auth` areas as a URL, so a rewrite never leaves the root.
    fn rewrite(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        rule: &RuleMatch,
        post: bool,
        force_close: bool,
    ) -> Answer {
        let target = rule.target(None);
        let Ok(path) = SitePath::from_target(&target) else {
            return Answer::Send(self.error(Status::NotFound));
        };
        let mut scratch = Vec::new();
        let url = url_path(&path, &mut scratch);
        if let Err(denied) = self.access(ctx, req, Some(url)) {
            return Answer::Send(*denied);
        }
        let resolved = lookup(ctx, req, &path);
        if rule.status() == 404 {
            return Answer::Send(match resolved {
                Ok(Resource::File(set)) => self.page_file(Head::new(Status::NotFound), &set),
                _ => self.error(Status::NotFound),
            });
        }
        self.rewritten(ctx, req, url, resolved, post, force_close)
    }

    /// The answer for what a rewrite to `url` resolved to.
    fn rewritten(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        url: &[u8],
        resolved: Result<Resource, SiteError>,
        post: bool,
        force_close: bool,
    ) -> Answer {
        // The `_headers` of the file served, not of the URL asked for: with
        // the usual single-page app (`/* /index.html 200`, `/assets/*`
        // immutable for a year), a missing /assets/app.js would otherwise
        // be the HTML page cached as that script for a year, by browsers
        // and CDNs. (root_files warns of the overlap when it loads them.)
        let served = SiteCtx {
            path: Some(url),
            ..*ctx
        };
        let reply = Reply {
            site: Some(served),
            ..*self
        };
        reply.resolved(&served, req, resolved, post, force_close)
    }

    /// The answer for what a path resolved to.
    fn resolved(
        &self,
        ctx: &SiteCtx,
        req: &Request,
        resolved: Result<Resource, SiteError>,
        post: bool,
        force_close: bool,
    ) -> Answer {
        match resolved {
            Ok(Resource::Script(script)) => {
                if req.framing == BodyFraming::Chunked {
                    // CGI/1.1 needs CONTENT_LENGTH before the body arrives.
                    return Answer::Send(self.error(Status::LengthRequired));
                }
                let job = CgiJob {
                    request: req.clone().into_owned(),
                    script,
                    force_close,
                    site_headers: ctx.owned_headers(),
                    user: None,
                };
                Answer::Cgi(Box::new(job))
            }
            _ if post => Answer::Send(self.not_allowed()),
            Ok(Resource::File(set)) if Some(set.url()) != ctx.path => {
                // An index file, reached through its directory's URL: a
                // password that protects the file by its own URL holds.
                match self.access(ctx, req, Some(set.url())) {
                    Ok(_) => Answer::Send(self.resource(req, Ok(Resource::File(set)))),
                    Err(denied) => Answer::Send(*denied),
                }
            }
            resolved => Answer::Send(self.resource(req, resolved)),
        }
    }
}

/// What to do with a request: send a decided response, or run a script
/// whose output decides it.
pub enum Answer {
    Send(Response),
    Cgi(Box<CgiJob>),
}

/// A CGI script to run for a request: what respond decided. Its request
/// owns its fields (the script's HTTP_* variables); who connected, and how
/// (TLS, addresses), is the exchange's `Context`.
pub struct CgiJob {
    pub request: Request<'static>,
    pub script: ScriptTarget,
    pub force_close: bool,
    /// The site's `_headers` and what they match on, for the script's
    /// response like any other.
    pub site_headers: Option<SiteHeaders>,
    /// The `--auth` user whose credentials passed (for the access log).
    pub user: Option<Arc<str>>,
}

/// What `_headers` needs to add its fields to a response decided later.
pub struct SiteHeaders {
    files: Arc<RootFiles>,
    host: Option<String>,
    path: Vec<u8>,
}

/// Whether the connection goes on after a response, and the request's
/// version, which says how HTTP/1.1 tells the client so.
#[derive(Clone, Copy)]
struct Persistence {
    close: bool,
    minor_version: u8,
}

impl Persistence {
    fn of(req: &Request, force_close: bool) -> Persistence {
        Persistence {
            close: force_close || !req.keep_alive,
            minor_version: req.minor_version,
        }
    }

    /// The last response on its connection, to a request of unknown version.
    const CLOSE: Persistence = Persistence {
        close: true,
        minor_version: 1,
    };
}

impl Reply<'_> {
    fn resource(&self, req: &Request, resolved: Result<Resource, SiteError>) -> Response {
        let reply = self;
        match resolved {
            Ok(Resource::File(set)) => reply.file(req, &set),
            Ok(Resource::AddSlash(location) | Resource::Redirect(location)) => {
                let mut h = Head::new(Status::MovedPermanently);
                h.header("Location", &location);
                reply.short_body(Status::MovedPermanently, h)
            }
            Ok(Resource::Listing(l)) => reply.listing(req, l),
            Ok(Resource::Script(_)) => reply.error(Status::InternalServerError),
            Err(SiteError::BadHost | SiteError::BadRequest) => reply.error(Status::BadRequest),
            Err(SiteError::NotFound) => reply.error(Status::NotFound),
            Err(SiteError::Forbidden) => reply.error(Status::Forbidden),
            Err(SiteError::NoDescriptors) => reply.error(Status::ServiceUnavailable),
            Err(SiteError::Io) => reply.error(Status::InternalServerError),
        }
    }

    fn not_allowed(&self) -> Response {
        let mut h = Head::new(Status::MethodNotAllowed);
        h.header("Allow", ALLOW);
        self.short_body(Status::MethodNotAllowed, h)
    }
}

/// The response for a script's header block (not a local redirect): its
/// head, and whether the script's body follows it (not for HEAD, 204 or
/// 304). The body's framing is the head's: its Content-Length, else
/// open-ended (chunked in HTTP/1.1, until the close in HTTP/1.0, the
/// stream's end in HTTP/2).
pub fn cgi_head(job: &CgiJob, head: &CgiHead) -> (Response, bool) {
    let req = &job.request;
    let no_body = matches!(head.status, 204 | 304);
    let mut h = Head::with_code(head.status, &head.reason);
    h.framing = match head.content_length {
        _ if no_body => Framing::Empty,
        Some(n) => Framing::Length(n),
        None => Framing::Open,
    };
    if let Some(ct) = &head.content_type {
        h.header("Content-Type", ct);
    }
    if let Some(cgi::Location::Client(url)) = &head.location {
        h.header("Location", url);
    }
    for (name, value) in &head.other {
        h.header(name, value);
    }
    if let Some(sh) = &job.site_headers {
        add_site_headers(&sh.files, sh.host.as_deref(), &sh.path, head.status, &mut h);
    }
    // An open-ended body in HTTP/1.0 ends with the connection.
    let until_close = h.framing == Framing::Open && req.minor_version == 0;
    let persistence = Persistence::of(req, job.force_close || until_close);
    let body_follows = !no_body && req.method != Method::Head;
    let response = Response {
        head: h,
        body: pool::take(&response::BODIES),
        body_len: 0,
        user: job.user.clone(),
        close: persistence.close,
        minor_version: persistence.minor_version,
        unlogged: false,
    };
    (response, body_follows)
}

/// A response to a CGI request that the script did not produce: the limit
/// was reached (503), it failed (502), it ran too long (504), or it could
/// not start (500, 403).
pub fn cgi_failure(job: &CgiJob, site: &Site, status: Status) -> Response {
    // The request body may be partly unread: the connection closes.
    let req = &job.request;
    let headers = job.site_headers.as_ref();
    let tree = site.tree();
    let ctx = SiteCtx {
        site,
        tree: &tree,
        host: path::authority(&req.target).or(req.host.as_deref()),
        files: headers.map(|h| &h.files),
        path: headers.map(|h| &h.path[..]),
        now: Instant::now(),
    };
    let mut response = Reply {
        persistence: Persistence::CLOSE,
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
        site: Some(ctx),
    }
    .error(status);
    response.user = job.user.clone();
    response
}

/// Answers a request head that could not be parsed; the connection closes,
/// since where the next request would start is unknown.
pub fn refuse(err: ParseError) -> Response {
    let status = match err {
        ParseError::Malformed => Status::BadRequest,
        ParseError::UnknownCoding => Status::NotImplemented,
        ParseError::TargetTooLong => Status::UriTooLong,
        ParseError::HeadTooLarge => Status::HeaderFieldsTooLarge,
        ParseError::UnsupportedVersion => Status::VersionNotSupported,
    };
    Reply {
        persistence: Persistence::CLOSE,
        head_only: false,
        errors: ErrorForm::Plain,
        site: None,
    }
    .error(status)
}

/// Answers a cleartext request sent to a TLS port, in cleartext, as nginx's
/// 497 does: the person at the browser learns to type https. (A head that
/// does not even parse gets this too: the port is the mistake to name.)
pub fn https_required(head_only: bool) -> Response {
    const BODY: &str = "400 Bad Request: this port speaks HTTPS; use an https:// URL\n";
    let reply = Reply {
        persistence: Persistence::CLOSE,
        head_only,
        errors: ErrorForm::Plain,
        site: None,
    };
    reply.bytes(
        Status::BadRequest,
        "text/plain; charset=utf-8",
        Chunk::Static(BODY.as_bytes()),
    )
}

/// `--redirect-http` with `--acme`: the key authorization of an HTTP-01
/// challenge under way (RFC 8555 8.3), or a 404 for a token there is none
/// for. None: not a challenge path, so the redirect goes on.
#[cfg(feature = "acme")]
fn acme_http01(req: &Request, site: &Site, force_close: bool) -> Option<Response> {
    let token = req.target.strip_prefix("/.well-known/acme-challenge/")?;
    if !site.answers_acme() {
        return None;
    }
    let reply = Reply {
        persistence: Persistence::of(req, force_close),
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
        site: None,
    };
    Some(match site.acme_http01(token) {
        Some(answer) => reply.bytes(Status::Ok, "application/octet-stream", Chunk::Bytes(answer)),
        None => reply.error(Status::NotFound),
    })
}

/// `--redirect-http`: the same host and target on https, 308 so that a
/// POST stays a POST. `port` is the TLS port, left out when it is 443.
/// With `--acme`, HTTP-01 challenges are answered here instead.
pub fn redirect_to_https(req: &Request, site: &Site, port: u16, force_close: bool) -> Response {
    #[cfg(feature = "acme")]
    if let Some(answer) = acme_http01(req, site, force_close) {
        return answer;
    }
    #[cfg(not(feature = "acme"))]
    let _ = site;
    let reply = Reply {
        persistence: Persistence::of(req, force_close),
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
        site: None,
    };
    let Some(host) = req.host.as_deref().and_then(host_without_port) else {
        // No name to send the client to (HTTP/1.0 without Host).
        return reply.error(Status::BadRequest);
    };
    // The origin-form target as it came; anything else (`*`, an
    // absolute-form URL) goes to the site's root.
    let target = if req.target.starts_with('/') {
        &req.target[..]
    } else {
        "/"
    };
    let mut h = Head::new(Status::PermanentRedirect);
    if port == 443 {
        h.header_display("Location", format_args!("https://{host}{target}"));
    } else {
        h.header_display("Location", format_args!("https://{host}:{port}{target}"));
    }
    reply.short_body(Status::PermanentRedirect, h)
}

/// The host part of a Host value (`example.org`, `[::1]`), if it is one that
/// can go into a URL as it is.
fn host_without_port(value: &str) -> Option<&str> {
    let host = match value.strip_prefix('[') {
        Some(rest) => &value[..rest.find(']')? + 2],
        None => value.split(':').next()?,
    };
    let fits = |b: u8| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b);
    (!host.is_empty() && host.bytes().all(fits)).then_some(host)
}

/// How to finish a response to one request.
#[derive(Clone, Copy)]
struct Reply<'a> {
    persistence: Persistence,
    head_only: bool,
    errors: ErrorForm,
    /// The site the request reached, for its error pages and `_headers`;
    /// None for answers given before any site is known.
    site: Option<SiteCtx<'a>>,
}

/// The site a request reached, and what of it shapes every response.
#[derive(Clone, Copy)]
struct SiteCtx<'a> {
    site: &'a Site,
    /// The tree of the root this response is made from (`Site::tree`).
    tree: &'a Tree,
    host: Option<&'a str>,
    files: Option<&'a Arc<RootFiles>>,
    /// The decoded request path `_headers` patterns match; None when the
    /// target is not a path.
    path: Option<&'a [u8]>,
    /// The request's clock reading: every lookup of the site (the
    /// open-file cache's, the root files') is fresh or stale by it.
    now: Instant,
}

impl SiteCtx<'_> {
    /// The `_headers` fields for this request's path, added to a head.
    fn add_headers(&self, h: &mut Head) {
        if let (Some(files), Some(path)) = (self.files, self.path) {
            add_site_headers(files, self.host, path, h.code(), h);
        }
    }

    /// The same, kept for a response that a CGI script decides.
    fn owned_headers(&self) -> Option<SiteHeaders> {
        let (files, path) = (self.files?, self.path?);
        if files.headers.is_empty() {
            return None;
        }
        Some(SiteHeaders {
            files: Arc::clone(files),
            host: self.host.map(str::to_string),
            path: path.to_vec(),
        })
    }
}

/// Adds the `_headers` fields for `path` to a head: they replace staticd's
/// own of the same name, except Vary, which is joined. A 304 leaves out the
/// representation's own metadata (RFC 9110 §15.4.5).
fn add_site_headers(files: &RootFiles, host: Option<&str>, path: &[u8], status: u16, h: &mut Head) {
    let applied = files.headers.matching(host, path);
    for (name, value) in applied.iter() {
        let is = |names: &[&str]| names.iter().any(|m| m.eq_ignore_ascii_case(name));
        if status == 304 && is(&["Content-Type", "Content-Language"]) {
            continue;
        }
        // A lifetime meant for the files under a pattern (`/assets/*
        // Cache-Control: max-age=31536000, immutable`) would pin the 404
        // of a file not deployed yet in browsers and caches for as long:
        // errors keep their own, as nginx's add_header does.
        if status >= 400 && is(&["Cache-Control", "Expires"]) {
            continue;
        }
        if name.eq_ignore_ascii_case("Vary") {
            h.append_to_list(name, value);
        } else {
            h.remove(name);
            h.header_display(name, value);
        }
    }
}

/// The form an error body takes.
#[derive(Clone, Copy)]
enum ErrorForm {
    /// The request could not be parsed, so nothing is known of what the
    /// client accepts: the status line as text.
    Plain,
    /// Chosen by the request's Accept, so the response varies with it.
    ByAccept { html: bool },
}

impl ErrorForm {
    /// An HTML page only for a client that lists text/html itself, as
    /// browsers do; curl's `*/*` keeps the one-line text.
    fn for_accept(accept: Option<&str>) -> ErrorForm {
        ErrorForm::ByAccept {
            html: negotiate::lists_html(accept),
        }
    }
}

impl Reply<'_> {
    fn options(&self) -> Response {
        let mut h = Head::new(Status::NoContent);
        h.header("Allow", ALLOW);
        self.build(h, pool::take(&response::BODIES), 0)
    }

    fn error(&self, status: Status) -> Response {
        self.short_body(status, Head::new(status))
    }

    /// A status with its short body: an HTML page for a person (an error,
    /// to a browser), else the text line `<code> <reason>\n`.
    fn short_body(&self, status: Status, mut h: Head) -> Response {
        if let Some(set) = self.site_error_page(status) {
            return self.page_file(h, &set);
        }
        let page = match (self.errors, page::error_page(status)) {
            (ErrorForm::ByAccept { html }, Some(page)) => {
                h.header("Vary", "Accept");
                html.then_some(page)
            }
            _ => None,
        };
        match page {
            Some(page) => self.small_body(
                h,
                "text/html; charset=utf-8",
                Chunk::Static(page.as_bytes()),
            ),
            None => {
                let line = Chunk::Static(status.line().as_bytes());
                self.small_body(h, "text/plain; charset=utf-8", line)
            }
        }
    }

    /// The site's own page for an error status, if it has one.
    fn site_error_page(&self, status: Status) -> Option<Arc<FileSet>> {
        let ctx = self.site.as_ref()?;
        if status.code() < 400 {
            return None;
        }
        // Cloudflare's nearest 404.html: the path's directory, then up.
        let nearest = match (status.code(), ctx.path) {
            (404, Some(url)) => ctx
                .site
                .nearest_error_page(ctx.tree, ctx.host, url, ctx.now),
            _ => None,
        };
        nearest.or_else(|| {
            ctx.site
                .error_page(ctx.tree, ctx.host, status.code(), ctx.now)
        })
    }

    /// A file of the site as the body of an error (or `_redirects` 404)
    /// response: all of it, whatever the request's Range or conditionals
    /// (they are about the resource asked for, not this page).
    fn page_file(&self, mut h: Head, set: &FileSet) -> Response {
        let f = &set.original;
        h.header("Content-Type", &f.content_type);
        h.length(f.len);
        self.with_body(h, one_chunk(slice(&f.source, 0, f.len)), f.len)
    }

    /// A short body of `content_type` with only the usual fields.
    fn bytes(&self, status: Status, content_type: &str, body: Chunk) -> Response {
        self.small_body(Head::new(status), content_type, body)
    }

    /// A short body held in memory.
    fn small_body(&self, mut h: Head, content_type: &str, body: Chunk) -> Response {
        let len = body.size();
        h.header("Content-Type", content_type);
        h.length(len);
        self.with_body(h, one_chunk(body), len)
    }

    fn file(&self, req: &Request, set: &FileSet) -> Response {
        // A HEAD or a Range request never waits for a file to be
        // compressed: it gets a compressed variant only from the cache.
        let sent = match self.head_only || req.range.is_some() {
            true => Sent::Part,
            false => Sent::Whole,
        };
        let f = set.choose(req.accept.as_deref(), req.accept_encoding.as_deref(), sent);
        let mut resp = self.variant(req, set, &f);
        if f.stands_in() {
            // After `_headers`' Cache-Control, which it must not weaken: a
            // cache may keep the file as it is, but asks again before it
            // uses it, and then gets the compressed variant once made.
            resp.head.append_to_list("Cache-Control", "no-cache");
        }
        resp
    }

    /// The response of `f`, a variant of `set`.
    fn variant(&self, req: &Request, set: &FileSet, f: &Variant) -> Response {
        let size = f.len;
        let v = &f.validators;
        let rep = Representation {
            content_type: &f.content_type,
            encoding: f.encoding,
            vary: set.vary,
            validators: v,
        };
        if let Some(resp) = self.preconditions(req, &rep) {
            return resp;
        }
        let range = match &req.range {
            Some(r) if conditional::if_range_holds(req.if_range.as_deref(), v) => Some(r),
            _ => None,
        };
        // One range, the usual case, is decided without building a list.
        if let Some(r) = range.and_then(|r| range::single(r, size)) {
            return self.one_range(&rep, &f.source, r, size);
        }
        match range.map_or(RangeOutcome::Whole, |r| range::evaluate(r, size)) {
            RangeOutcome::Whole => {
                let mut h = self.file_head(Status::Ok, &rep);
                h.length(size);
                self.with_body(h, one_chunk(slice(&f.source, 0, size)), size)
            }
            RangeOutcome::Ranges(ranges) if ranges.len() == 1 => {
                self.one_range(&rep, &f.source, ranges[0], size)
            }
            RangeOutcome::Ranges(ranges) => self.multipart(&rep, &f.source, &ranges, size),
            RangeOutcome::Unsatisfiable => {
                let mut h = Head::new(Status::RangeNotSatisfiable);
                h.header_display("Content-Range", format_args!("bytes */{size}"));
                self.short_body(Status::RangeNotSatisfiable, h)
            }
        }
    }

    /// 206 with one range of the representation.
    fn one_range(
        &self,
        rep: &Representation,
        source: &Source,
        r: ByteRange,
        size: u64,
    ) -> Response {
        let mut h = self.file_head(Status::PartialContent, rep);
        h.header_display("Content-Range", ContentRange(r, size));
        h.length(r.len());
        let body = one_chunk(slice(source, r.start, r.len()));
        self.with_body(h, body, r.len())
    }

    /// 304 or 412 when the request's preconditions say so (RFC 9110 §13.2.2).
    fn preconditions(&self, req: &Request, rep: &Representation) -> Option<Response> {
        match conditional::evaluate(req, rep.validators) {
            Precondition::Proceed => None,
            Precondition::NotModified => {
                let mut h = Head::new(Status::NotModified);
                validator_headers(&mut h, rep.validators);
                if let Some(vary) = rep.vary {
                    h.header("Vary", vary);
                }
                Some(self.build(h, pool::take(&response::BODIES), 0))
            }
            Precondition::Failed => Some(self.error(Status::PreconditionFailed)),
        }
    }

    fn file_head(&self, status: Status, rep: &Representation) -> Head {
        let mut h = Head::new(status);
        h.header("Content-Type", rep.content_type);
        representation_headers(&mut h, rep);
        h
    }

    /// A generated directory index, as HTML or (when asked for) JSON, in
    /// the order the query asks for.
    fn listing(&self, req: &Request, l: Listing) -> Response {
        let query = req.target.split_once('?').map(|(_, q)| q);
        let l = l.sorted(Sort::from_query(query));
        let (body, content_type) = if negotiate::prefers_json(req.accept.as_deref()) {
            (listing::json(&l), "application/json")
        } else {
            (listing::html(&l), "text/html; charset=utf-8")
        };
        // Both renderings vary with Accept. The ETag is over the bytes sent,
        // so each order (its own URL, its own body) has its own ETag, and
        // one that comes out the same is the same representation.
        let v = Validators::for_bytes(body.as_bytes(), l.modified);
        let rep = Representation {
            content_type,
            encoding: None,
            vary: Some("Accept"),
            validators: &v,
        };
        if let Some(resp) = self.preconditions(req, &rep) {
            return resp;
        }
        let mut h = Head::new(Status::Ok);
        h.header("Content-Type", content_type);
        validator_headers(&mut h, &v);
        h.header("Vary", "Accept");
        let len = body.len() as u64;
        h.length(len);
        self.with_body(h, one_chunk(Chunk::Bytes(body.into_bytes())), len)
    }

    /// multipart/byteranges (RFC 9110 §14.6): each part names its range.
    fn multipart(
        &self,
        rep: &Representation,
        source: &Source,
        ranges: &[ByteRange],
        size: u64,
    ) -> Response {
        let boundary = boundary(&rep.validators.etag);
        let content_type = rep.content_type;
        let mut body = Vec::with_capacity(ranges.len() * 2 + 1);
        let mut total = 0u64;
        for (i, r) in ranges.iter().enumerate() {
            let part_head = format!(
                "{}--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: {}\r\n\r\n",
                if i == 0 { "" } else { "\r\n" },
                ContentRange(*r, size)
            );
            total += part_head.len() as u64 + r.len();
            body.push(Chunk::Bytes(part_head.into_bytes()));
            body.push(slice(source, r.start, r.len()));
        }
        let end = format!("\r\n--{boundary}--\r\n");
        total += end.len() as u64;
        body.push(Chunk::Bytes(end.into_bytes()));
        let mut h = Head::new(Status::PartialContent);
        h.header(
            "Content-Type",
            &format!("multipart/byteranges; boundary={boundary}"),
        );
        representation_headers(&mut h, rep);
        h.length(total);
        self.with_body(h, body, total)
    }

    /// A response with a body, which HEAD leaves off.
    fn with_body(&self, h: Head, mut body: Vec<Chunk>, len: u64) -> Response {
        if self.head_only {
            body.clear();
            self.build(h, body, 0)
        } else {
            self.build(h, body, len)
        }
    }

    /// The response, with the site's `_headers` fields added.
    fn build(&self, mut h: Head, body: Vec<Chunk>, body_len: u64) -> Response {
        if let Some(ctx) = &self.site {
            ctx.add_headers(&mut h);
        }
        Response {
            head: h,
            body,
            body_len,
            user: None,
            close: self.persistence.close,
            minor_version: self.persistence.minor_version,
            unlogged: false,
        }
    }
}

/// What is known of the representation being sent, beyond its bytes.
struct Representation<'a> {
    content_type: &'a str,
    encoding: Option<&'static str>,
    vary: Option<&'static str>,
    validators: &'a Validators,
}

/// Headers every 200/206 of a file carries, whatever its Content-Type.
fn representation_headers(h: &mut Head, rep: &Representation) {
    if let Some(encoding) = rep.encoding {
        h.header("Content-Encoding", encoding);
    }
    if let Some(vary) = rep.vary {
        h.header("Vary", vary);
    }
    validator_headers(h, rep.validators);
    h.header("Accept-Ranges", "bytes");
}

fn validator_headers(h: &mut Head, v: &Validators) {
    if let Some(date) = &v.last_modified {
        h.header("Last-Modified", date.text());
    }
    h.header("ETag", &v.etag);
}

/// A Content-Range value, `bytes START-END/SIZE`.
struct ContentRange(ByteRange, u64);

impl std::fmt::Display for ContentRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bytes {}-{}/{}", self.0.start, self.0.end, self.1)
    }
}

/// A multipart boundary unlikely to occur in the file: derived from the
/// representation's ETag and a per-thread counter, never from its content.
fn boundary(etag: &str) -> String {
    thread_local! {
        static COUNTER: Cell<u64> = const { Cell::new(0) };
    }
    let n = COUNTER.with(|c| {
        c.set(c.get().wrapping_add(1));
        c.get()
    });
    // The ETag, mixed with the counter and the process id.
    let hash = conditional::fnv1a(
        u64::from(std::process::id()),
        etag.bytes().chain(n.to_le_bytes()),
    );
    format!("staticd-{hash:016x}")
}

/// Decisions read off the structured head, before any encoding.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Features;
    use crate::http::parse::{self, Parsed};

    fn site() -> (tempfile::TempDir, Site) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "0123456789").unwrap();
        let site = Site::open(dir.path(), &["index.html"], Features::default()).unwrap();
        (dir, site)
    }

    fn answer(site: &Site, raw: &str) -> Response {
        let Parsed::Complete { request, .. } = parse::parse(raw.as_bytes()) else {
            panic!("{raw:?} parses");
        };
        match respond(site, &request, false) {
            Answer::Send(response) => response,
            Answer::Cgi(_) => panic!("no scripts"),
        }
    }

    fn body(r: &Response) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in &r.body {
            out.extend_from_slice(chunk.memory().expect("held in memory"));
        }
        out
    }

    #[test]
    fn a_file_its_head_and_its_conditional() {
        let (_dir, site) = site();
        let ok = answer(&site, "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(ok.code(), 200);
        assert_eq!(ok.head.framing, Framing::Length(10));
        assert_eq!(
            ok.head.get("Content-Type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(body(&ok), b"0123456789");
        assert!(!ok.close);
        let etag = ok.head.get("ETag").unwrap().to_string();
        let head = answer(&site, "HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(head.head.framing, Framing::Length(10));
        assert!(head.body.is_empty() && head.body_len == 0);
        let raw = format!("GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\n");
        let not_modified = answer(&site, &raw);
        assert_eq!(not_modified.code(), 304);
        assert_eq!(not_modified.head.framing, Framing::Empty);
        assert_eq!(not_modified.head.get("ETag"), Some(etag.as_str()));
        assert_eq!(not_modified.head.get("Content-Type"), None);
    }

    #[test]
    fn a_range_and_one_that_cannot_be_satisfied() {
        let (_dir, site) = site();
        let part = answer(
            &site,
            "GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=2-4\r\n\r\n",
        );
        assert_eq!(part.code(), 206);
        assert_eq!(part.head.get("Content-Range"), Some("bytes 2-4/10"));
        assert_eq!(part.head.framing, Framing::Length(3));
        assert_eq!(body(&part), b"234");
        let raw = "GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=20-\r\n\r\n";
        let none = answer(&site, raw);
        assert_eq!(none.code(), 416);
        assert_eq!(none.head.get("Content-Range"), Some("bytes */10"));
    }

    #[test]
    fn errors_and_options() {
        let (_dir, site) = site();
        let missing = answer(&site, "GET /nope HTTP/1.0\r\n\r\n");
        assert_eq!(missing.code(), 404);
        assert_eq!(body(&missing), b"404 Not Found\n");
        // HTTP/1.0 without keep-alive: the last response on its connection.
        assert!(missing.close && missing.minor_version == 0);
        let html = answer(
            &site,
            "GET /nope HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n\r\n",
        );
        assert_eq!(
            html.head.get("Content-Type"),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(html.head.get("Vary"), Some("Accept"));
        let options = answer(&site, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(options.code(), 204);
        assert_eq!(options.head.get("Allow"), Some(ALLOW));
        assert_eq!(options.head.framing, Framing::Empty);
        let post = answer(
            &site,
            "POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(post.code(), 405);
        let refused = refuse(ParseError::TargetTooLong);
        assert_eq!((refused.code(), refused.close), (414, true));
    }
}
