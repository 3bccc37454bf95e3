//! One HTTP/2 stream: its request decided by `session::answer` like any
//! other, and the answer sent as HEADERS and DATA (see `send`); a CGI
//! script's through the CGI exchange every connection drives (see `cgi`).

use std::sync::Arc;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;

use super::send::send;
use super::{Open, Served};
use crate::http::h2 as fields;
use crate::http::parse::BodyFraming;
use crate::respond::{self, Answer};
use crate::session::{self, Protocol};

/// Decides `request` and starts its answer.
pub(super) fn start(
    request: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    served: &Arc<Served>,
    stopping: bool,
    open: Open,
) {
    let (parts, body) = request.into_parts();
    let (cfg, kind, client) = (&served.cfg, served.kind, &*served.client);
    let sent = match fields::request(&parts.method, &parts.uri, &parts.headers) {
        Ok(mut request) => {
            if !body.is_end_stream() && request.framing == BodyFraming::None {
                // A body of unannounced length: what HTTP/1.1 says with
                // chunked coding (the CGI exchange reads it so).
                request.framing = BodyFraming::Chunked;
            }
            match session::answer(kind, &served.site, &request, stopping) {
                Answer::Send(response) => {
                    session::sent(cfg, kind, client, Some(&request), response, Protocol::Http2)
                }
                Answer::Cgi(mut job) => {
                    job.raw_head = fields::request_head(&request, &parts.headers);
                    job.https = kind == session::Kind::Https;
                    job.sockets = Some(served.sockets);
                    let served = Arc::clone(served);
                    tokio::spawn(super::cgi::run(job, body, respond, served, open));
                    return;
                }
            }
        }
        Err(e) => {
            let refusal = respond::refuse(e);
            session::sent(cfg, kind, client, None, refusal, Protocol::Http2)
        }
    };
    drop(body);
    send(sent, respond, served, open);
}
