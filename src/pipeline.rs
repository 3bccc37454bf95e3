//! The path every request takes, whichever protocol carried it: `answer` decides it (through
//! [`respond`]), `sent` counts the response in the metrics, makes its access-log
//! line and, over HTTP/1.1, encodes its head with what the connection adds
//! (Strict-Transport-Security, Alt-Svc). HTTP/1.1's [`session`](crate::session),
//! [`h2session`](crate::h2session), HTTP/3's streams and CGI's [`exchange`](crate::exchange) all
//! come here; nothing here knows which one called.

use std::ops::Range;
use std::time::SystemTime;

use crate::config::Config;
use crate::http::parse::{self, Method};
use crate::http::response::{self as h1, Chunk, Http1};
use crate::log;
use crate::origin::{Kind, Origin, Protocol};
use crate::pool;
use crate::respond::{self, Answer, Response};
use crate::site::Site;

/// What every stream of one HTTP/2 or HTTP/3 connection is served with.
pub struct Served {
    pub cfg: std::sync::Arc<Config>,
    pub site: std::sync::Arc<Site>,
    /// Who the streams come from, and how: its socket addresses (CGI's
    /// REMOTE_PORT and SERVER_PORT) read once when it opened.
    pub origin: Origin,
}

/// A response and its access-log line. Dropping it writes the line, with
/// the body bytes among the `written` ones: every response that started
/// gets exactly one line however its sending ends (done, client gone,
/// timed out, or the connection dropped at shutdown).
pub struct Sent {
    pub response: Response,
    /// Over HTTP/1.1: the head as bytes, and a small body held in memory
    /// (taken out of `response.body`), to go in the same write; then
    /// `response.body`. Empty over HTTP/2, which encodes the head itself.
    pub wire: Vec<u8>,
    /// Bytes written so far (`wire`, then the body); the transport keeps
    /// it current, as it can be dropped at any await.
    pub written: u64,
    /// Written when this is dropped.
    pub log_line: log::Line,
    /// Where the body lies among the bytes written (as `Response::body_range`
    /// was before a transport took the head): the metrics' byte count.
    body: Range<u64>,
}

impl Sent {
    /// Puts the next pipelined answer behind this one, which has no body
    /// beyond its head.
    pub fn append(&mut self, mut next: Sent) {
        let r = &mut self.response;
        let offset = self.wire.len() as u64;
        self.wire.extend_from_slice(&next.wire);
        std::mem::swap(&mut r.body, &mut next.response.body);
        r.body_len += next.response.body_len;
        r.close = next.response.close;
        self.log_line
            .push(std::mem::take(&mut next.log_line), offset);
        // One range for the batch: exact once all of it went out.
        let end = offset + next.body.end;
        let len = (self.body.end - self.body.start) + (next.body.end - next.body.start);
        self.body = end.saturating_sub(len)..end;
    }
}

impl Sent {
    /// Where the body lies among the bytes written (the metrics' count).
    pub fn body_range(&self) -> Range<u64> {
        self.body.clone()
    }

    /// For a body that follows `wire` without being in `response` (a CGI
    /// script's output): every byte written after `wire` counts as body,
    /// so the transport adds to `written` only the script's own bytes,
    /// not the framing around them.
    pub fn open_body(&mut self) {
        self.body = self.wire.len() as u64..u64::MAX;
        self.log_line.set_body(self.body.clone());
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        self.log_line.emit(self.written);
        crate::metrics::body_bytes(log::body_sent(&self.body, self.written));
        pool::give(&pool::HEADS, std::mem::take(&mut self.wire));
    }
}

/// The answer to a request on a connection of this kind: the one place a
/// parsed request is decided, whichever protocol carried it.
pub fn answer(kind: Kind, site: &Site, request: &parse::Request, stopping: bool) -> Answer {
    match kind {
        Kind::Http | Kind::Https => respond::respond(site, request, stopping),
        Kind::ClearOnHttpsPort => {
            Answer::Send(respond::https_required(request.method == Method::Head))
        }
        Kind::RedirectToHttps { port } => Answer::Send(
            respond::health(site, request, stopping)
                .unwrap_or_else(|| respond::redirect_to_https(request, site, port, stopping)),
        ),
    }
}

/// A decided response ready to go: counted in the metrics, its log line made (written when the
/// [`Sent`] drops), and over HTTP/1.1 its head encoded with what the
/// connection adds (Strict-Transport-Security over HTTPS). Every response goes through here,
/// whoever decided it.
pub fn sent(
    cfg: &Config,
    origin: &Origin,
    request: Option<&parse::Request>,
    mut response: Response,
) -> Sent {
    let Origin { kind, tls, .. } = *origin;
    let status = response.code();
    crate::metrics::request(request, status, origin.https());
    let mut wire = Vec::new();
    if origin.protocol == Protocol::Http1 {
        wire = pool::take(&pool::HEADS);
        encode_http1(
            &mut response,
            hsts(cfg, kind),
            alt_svc(cfg, kind),
            &mut wire,
        );
    }
    // The body ends the bytes written: after `wire`, in which a small
    // body may ride.
    let chunks = Chunk::total(&response.body);
    let end = wire.len() as u64 + chunks;
    let body = end.saturating_sub(response.body_len)..end;
    let trusted = &cfg.trusted_proxies;
    let entry = log::Entry {
        client: crate::proxy::forwarded::client_name(trusted, &origin.client, request),
        request,
        status,
        user: response.user.as_deref(),
        body,
        tls,
    };
    let format = match response.unlogged {
        true => crate::config::LogFormat::Off,
        false => cfg.log_format,
    };
    let log_line = log::format(format, &entry, SystemTime::now);
    Sent {
        body: entry.body,
        response,
        wire,
        written: 0,
        log_line,
    }
}

/// The status logged for a request that got no response because its stream
/// was reset before one was decided: nginx's 499, for a request whose
/// client (here, by the error the reset answered) ended it before any
/// response.
pub const NOT_ANSWERED: u16 = 499;

/// Logs `request`, which was never answered (see [`NOT_ANSWERED`]):
/// no response was made, no byte of one went out.
pub fn unanswered(cfg: &Config, origin: &Origin, request: &parse::Request) {
    let trusted = &cfg.trusted_proxies;
    let entry = log::Entry {
        client: crate::proxy::forwarded::client_name(trusted, &origin.client, Some(request)),
        request: Some(request),
        status: NOT_ANSWERED,
        user: None,
        body: 0..0,
        tls: origin.tls,
    };
    log::format(cfg.log_format, &entry, SystemTime::now).emit(0);
}

/// The head as HTTP/1.1 bytes into `wire`, and a small body held in memory
/// after it, so that both leave in one write.
fn encode_http1(
    response: &mut Response,
    hsts: Option<u64>,
    alt_svc: Option<u16>,
    wire: &mut Vec<u8>,
) {
    let conn = Http1 {
        minor_version: response.minor_version,
        close: response.close,
        hsts,
        alt_svc,
    };
    h1::encode(&response.head, &conn, wire);
    let small = response.body_len <= crate::site::file::SMALL_FILE;
    if small && response.body.iter().all(|c| c.memory().is_some()) {
        for chunk in response.body.drain(..) {
            wire.extend_from_slice(chunk.memory().unwrap_or_default());
        }
    }
}

/// Strict-Transport-Security's max-age for a response on a connection of
/// this kind: with `--hsts`, over HTTPS.
pub fn hsts(cfg: &Config, kind: Kind) -> Option<u64> {
    match kind {
        Kind::Https => cfg.https.as_ref().and_then(|h| h.hsts),
        _ => None,
    }
}

/// The UDP port HTTP/3 answers on, for the Alt-Svc field of a response on
/// a connection of this kind: over HTTPS (TCP), once HTTP/3 is bound.
pub fn alt_svc(cfg: &Config, kind: Kind) -> Option<u16> {
    match kind {
        Kind::Https => cfg.alt_svc_port,
        _ => None,
    }
}
