//! Request + Resource -> Response: the one place where statuses, headers
//! and body bytes are decided.

use std::cell::Cell;
use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

use crate::cgi::{self, CgiHead};
use crate::http::conditional::{self, Precondition, Validators};
use crate::http::parse::{BodyFraming, Method, ParseError, Request};
use crate::http::range::{self, ByteRange, RangeOutcome};
use crate::http::response::{self, Chunk, HeadBuilder, Persistence, Status};
use crate::page;
use crate::pool;
use crate::site::file::{FileSet, Source};
use crate::site::listing::{self, Listing, Sort};
use crate::site::negotiate;
use crate::site::path::{self, PathError, SitePath};
use crate::site::{Lookup, Resource, ScriptTarget, Site, SiteError};

const ALLOW: &str = "GET, HEAD, OPTIONS";

/// A decided response: the head, then body pieces in order.
pub struct Response {
    pub status: Status,
    pub head: Vec<u8>,
    pub body: Vec<Chunk>,
    /// Body bytes on the wire (for the access log).
    pub body_len: u64,
    /// The server closes the connection after this response.
    pub close: bool,
}

impl Response {
    /// Where the body lies among the bytes the response puts on the wire:
    /// it ends them, after the head (a small body rides in `head`).
    pub fn body_range(&self) -> Range<u64> {
        let chunks: u64 = self.body.iter().map(Chunk::size).sum();
        let end = self.head.len() as u64 + chunks;
        end.saturating_sub(self.body_len)..end
    }
}

/// The head and body buffers go back to this thread's free lists.
impl Drop for Response {
    fn drop(&mut self) {
        pool::give(&pool::HEADS, std::mem::take(&mut self.head));
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
    let reply = Reply {
        persistence: persistence(req, force_close),
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
    };
    // POST means something only to a CGI script.
    let post = matches!(&req.method, Method::Other(m) if m == "POST") && site.runs_cgi();
    match &req.method {
        Method::Get | Method::Head => {}
        Method::Options => return Answer::Send(reply.options()),
        Method::Other(_) if post => {}
        Method::Other(_) => return Answer::Send(reply.not_allowed()),
    }
    match resolve(site, req) {
        Ok(Resource::Script(script)) => {
            if req.framing == BodyFraming::Chunked {
                // CGI/1.1 needs CONTENT_LENGTH before the body arrives.
                return Answer::Send(reply.error(Status::LengthRequired));
            }
            let job = CgiJob {
                request: req.clone().into_owned(),
                script,
                raw_head: Vec::new(),
                force_close,
                https: false,
                sockets: None,
            };
            Answer::Cgi(Box::new(job))
        }
        _ if post => Answer::Send(reply.not_allowed()),
        resolved => Answer::Send(reply.resource(req, resolved)),
    }
}

/// What to do with a request: send a decided response, or run a script
/// whose output decides it.
pub enum Answer {
    Send(Response),
    Cgi(Box<CgiJob>),
}

/// A CGI script to run for a request.
pub struct CgiJob {
    pub request: Request<'static>,
    pub script: ScriptTarget,
    /// The request head as received, for the HTTP_* variables; the session
    /// fills it in.
    pub raw_head: Vec<u8>,
    pub force_close: bool,
    /// The request came over TLS (CGI's HTTPS=on); the session fills it in.
    pub https: bool,
    /// The client's and our socket addresses, when the exchange's
    /// descriptor is not the connection's socket (an HTTP/2 stream's
    /// socket pair); None: ask the descriptor.
    pub sockets: Option<(Option<std::net::SocketAddr>, Option<std::net::SocketAddr>)>,
}

fn persistence(req: &Request, force_close: bool) -> Persistence {
    match (force_close || !req.keep_alive, req.minor_version) {
        (true, _) => Persistence::Close,
        (false, 0) => Persistence::KeepAlive10,
        (false, _) => Persistence::Default11,
    }
}

fn resolve(site: &Site, req: &Request) -> Result<Resource, SiteError> {
    let path = match SitePath::from_target(&req.target) {
        Ok(p) => p,
        Err(PathError::BadRequest) => return Err(SiteError::BadRequest),
        Err(PathError::Hidden) => return Err(SiteError::NotFound),
    };
    let lookup = Lookup {
        path: &path,
        // An absolute-form target names the host itself (RFC 9112 §3.2.2).
        host: path::authority(&req.target).or(req.host.as_deref()),
        accept: req.accept.as_deref(),
        accept_encoding: req.accept_encoding.as_deref(),
    };
    site.resolve(&lookup)
}

impl Reply {
    fn resource(&self, req: &Request, resolved: Result<Resource, SiteError>) -> Response {
        let reply = self;
        match resolved {
            Ok(Resource::File(set)) => reply.file(req, &set),
            Ok(Resource::AddSlash(location) | Resource::Redirect(location)) => {
                let mut h = HeadBuilder::new(Status::MovedPermanently);
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
        let mut h = HeadBuilder::new(Status::MethodNotAllowed);
        h.header("Allow", ALLOW);
        self.short_body(Status::MethodNotAllowed, h)
    }
}

/// How a CGI response body is delimited on the way to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgiFraming {
    /// No body (HEAD, 204, 304).
    Empty,
    /// The script gave a Content-Length.
    Length(u64),
    /// HTTP/1.1 without a length: chunked.
    Chunked,
    /// HTTP/1.0 without a length: the body ends when the connection closes.
    UntilClose,
}

/// The response head for a script's header block (not a local redirect).
pub fn cgi_head(job: &CgiJob, head: &CgiHead) -> (Vec<u8>, CgiFraming, bool) {
    let req = &job.request;
    let no_body = matches!(head.status, 204 | 304);
    let framing = match head.content_length {
        _ if no_body => CgiFraming::Empty,
        Some(n) => CgiFraming::Length(n),
        // An HTTP/2 stream's DATA frames end with the stream: no chunks.
        None if req.minor_version >= 1 && !req.http2 => CgiFraming::Chunked,
        None => CgiFraming::UntilClose,
    };
    let close = job.force_close || !req.keep_alive || framing == CgiFraming::UntilClose;
    let reason = if head.reason.is_empty() {
        standard_reason(head.status)
    } else {
        head.reason.as_str()
    };
    let mut h = HeadBuilder::with_code(head.status, reason);
    if let Some(ct) = &head.content_type {
        h.header("Content-Type", ct);
    }
    if let Some(cgi::Location::Client(url)) = &head.location {
        h.header("Location", url);
    }
    for (name, value) in &head.other {
        h.header(name, value);
    }
    match framing {
        CgiFraming::Length(n) => {
            h.header_u64("Content-Length", n);
        }
        CgiFraming::Chunked => {
            h.header("Transfer-Encoding", "chunked");
        }
        CgiFraming::Empty | CgiFraming::UntilClose => {}
    }
    let framing = if req.method == Method::Head {
        CgiFraming::Empty
    } else {
        framing
    };
    (h.finish(persistence(req, close)), framing, close)
}

/// A response to a CGI request that the script did not produce: the limit
/// was reached (503), it failed (502), it ran too long (504), or it could
/// not start (500, 403).
pub fn cgi_failure(job: &CgiJob, status: Status) -> Response {
    // The request body may be partly unread: the connection closes.
    let req = &job.request;
    Reply {
        persistence: Persistence::Close,
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
    }
    .error(status)
}

fn standard_reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
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
        persistence: Persistence::Close,
        head_only: false,
        errors: ErrorForm::Plain,
    }
    .error(status)
}

/// Answers a cleartext request sent to a TLS port, in cleartext, as nginx's
/// 497 does: the person at the browser learns to type https. (A head that
/// does not even parse gets this too: the port is the mistake to name.)
pub fn https_required(head_only: bool) -> Response {
    const BODY: &str = "400 Bad Request: this port speaks HTTPS; use an https:// URL\n";
    let reply = Reply {
        persistence: Persistence::Close,
        head_only,
        errors: ErrorForm::Plain,
    };
    let mut h = HeadBuilder::new(Status::BadRequest);
    h.header("Content-Type", "text/plain; charset=utf-8");
    h.header_u64("Content-Length", BODY.len() as u64);
    let mut resp = reply.build(Status::BadRequest, h, Vec::new(), 0);
    if !reply.head_only {
        resp.head.extend_from_slice(BODY.as_bytes());
        resp.body_len = BODY.len() as u64;
    }
    resp
}

/// `--redirect-http`: the same host and target on https, 308 so that a
/// POST stays a POST. `port` is the TLS port, left out when it is 443.
pub fn redirect_to_https(req: &Request, port: u16, force_close: bool) -> Response {
    let reply = Reply {
        persistence: persistence(req, force_close),
        head_only: req.method == Method::Head,
        errors: ErrorForm::for_accept(req.accept.as_deref()),
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
    let mut h = HeadBuilder::new(Status::PermanentRedirect);
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
struct Reply {
    persistence: Persistence,
    head_only: bool,
    errors: ErrorForm,
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

impl Reply {
    fn options(&self) -> Response {
        let mut h = HeadBuilder::new(Status::NoContent);
        h.header("Allow", ALLOW);
        self.build(Status::NoContent, h, Vec::new(), 0)
    }

    fn error(&self, status: Status) -> Response {
        self.short_body(status, HeadBuilder::new(status))
    }

    /// A status with its short body: an HTML page for a person (an error,
    /// to a browser), else the text line `<code> <reason>\n`.
    fn short_body(&self, status: Status, mut h: HeadBuilder) -> Response {
        let page = match (self.errors, page::error_page(status)) {
            (ErrorForm::ByAccept { html }, Some(page)) => {
                h.header("Vary", "Accept");
                html.then_some(page)
            }
            _ => None,
        };
        match page {
            Some(page) => self.page(status, h, page),
            None => self.status_line(status, h),
        }
    }

    /// A body that is an HTML page built at compile time.
    fn page(&self, status: Status, mut h: HeadBuilder, page: &'static str) -> Response {
        h.header("Content-Type", "text/html; charset=utf-8");
        h.header_u64("Content-Length", page.len() as u64);
        let mut resp = self.build(status, h, Vec::new(), 0);
        if !self.head_only {
            // Small bodies ride in the same write as the head.
            resp.head.extend_from_slice(page.as_bytes());
            resp.body_len = page.len() as u64;
        }
        resp
    }

    /// The body `<code> <reason>\n`, as text.
    fn status_line(&self, status: Status, mut h: HeadBuilder) -> Response {
        // Three digits, a space, the reason and a newline.
        let body_len = 3 + 1 + status.reason().len() + 1;
        h.header("Content-Type", "text/plain; charset=utf-8");
        h.header_u64("Content-Length", body_len as u64);
        let mut resp = self.build(status, h, Vec::new(), 0);
        if !self.head_only {
            // Small bodies ride in the same write as the head.
            let before = resp.head.len();
            let _ = writeln!(resp.head, "{} {}", status.code(), status.reason());
            debug_assert_eq!(resp.head.len() - before, body_len);
            resp.body_len = body_len as u64;
        }
        resp
    }

    fn file(&self, req: &Request, set: &FileSet) -> Response {
        let f = set.choose(req.accept.as_deref(), req.accept_encoding.as_deref());
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
                h.header_u64("Content-Length", size);
                self.with_body(Status::Ok, h, one_chunk(slice(&f.source, 0, size)), size)
            }
            RangeOutcome::Ranges(ranges) if ranges.len() == 1 => {
                self.one_range(&rep, &f.source, ranges[0], size)
            }
            RangeOutcome::Ranges(ranges) => self.multipart(&rep, &f.source, &ranges, size),
            RangeOutcome::Unsatisfiable => {
                let mut h = HeadBuilder::new(Status::RangeNotSatisfiable);
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
        h.header_u64("Content-Length", r.len());
        let body = one_chunk(slice(source, r.start, r.len()));
        self.with_body(Status::PartialContent, h, body, r.len())
    }

    /// 304 or 412 when the request's preconditions say so (RFC 9110 §13.2.2).
    fn preconditions(&self, req: &Request, rep: &Representation) -> Option<Response> {
        match conditional::evaluate(req, rep.validators) {
            Precondition::Proceed => None,
            Precondition::NotModified => {
                let mut h = HeadBuilder::new(Status::NotModified);
                validator_headers(&mut h, rep.validators);
                if let Some(vary) = rep.vary {
                    h.header("Vary", vary);
                }
                Some(self.build(Status::NotModified, h, Vec::new(), 0))
            }
            Precondition::Failed => Some(self.error(Status::PreconditionFailed)),
        }
    }

    fn file_head(&self, status: Status, rep: &Representation) -> HeadBuilder {
        let mut h = HeadBuilder::new(status);
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
        let mut h = HeadBuilder::new(Status::Ok);
        h.header("Content-Type", content_type);
        validator_headers(&mut h, &v);
        h.header("Vary", "Accept");
        h.header_u64("Content-Length", body.len() as u64);
        let len = body.len() as u64;
        self.with_body(
            Status::Ok,
            h,
            one_chunk(Chunk::Bytes(body.into_bytes())),
            len,
        )
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
        let mut h = HeadBuilder::new(Status::PartialContent);
        h.header(
            "Content-Type",
            &format!("multipart/byteranges; boundary={boundary}"),
        );
        representation_headers(&mut h, rep);
        h.header_u64("Content-Length", total);
        self.with_body(Status::PartialContent, h, body, total)
    }

    /// A response with a body, which HEAD leaves off.
    fn with_body(&self, status: Status, h: HeadBuilder, body: Vec<Chunk>, len: u64) -> Response {
        if self.head_only {
            pool::give(&response::BODIES, body);
            self.build(status, h, Vec::new(), 0)
        } else {
            self.build(status, h, body, len)
        }
    }

    fn build(
        &self,
        status: Status,
        h: HeadBuilder,
        mut body: Vec<Chunk>,
        body_len: u64,
    ) -> Response {
        let mut head = h.finish(self.persistence);
        // A small body already in memory rides in the same write as the
        // head; a large one (compressed on the fly) is sent from where it is.
        let small = body_len <= crate::site::file::SMALL_FILE;
        if small && body.iter().all(|c| !matches!(c, Chunk::File { .. })) {
            for chunk in body.drain(..) {
                match chunk {
                    Chunk::Bytes(bytes) => head.extend_from_slice(&bytes),
                    Chunk::Shared { bytes, offset, len } => {
                        head.extend_from_slice(&bytes[offset..offset + len])
                    }
                    Chunk::File { .. } => {}
                }
            }
        }
        Response {
            status,
            head,
            body,
            body_len,
            close: self.persistence == Persistence::Close,
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
fn representation_headers(h: &mut HeadBuilder, rep: &Representation) {
    if let Some(encoding) = rep.encoding {
        h.header("Content-Encoding", encoding);
    }
    if let Some(vary) = rep.vary {
        h.header("Vary", vary);
    }
    validator_headers(h, rep.validators);
    h.header("Accept-Ranges", "bytes");
}

fn validator_headers(h: &mut HeadBuilder, v: &Validators) {
    h.header_display("Last-Modified", httpdate::HttpDate::from(v.last_modified));
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
