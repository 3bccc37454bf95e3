//! Sending a decided response on an HTTP/3 stream: its head as the fields
//! HTTP/2 would send, its body as DATA frames measured against
//! `--send-timeout` and `--min-rate`.

use std::io;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use h3::error::Code;
use h3::server::RequestStream;

use crate::config::Config;
use crate::http::fields::ResponseFields;
use crate::http::response::Chunk;
use crate::origin::Kind;
use crate::pace::Pace;
use crate::pipeline::{self, Sent};

/// A request stream as h3 gives it.
pub(super) type Stream = RequestStream<super::quic::Bidi<Bytes>, Bytes>;

/// How much of a file one DATA frame carries: a few QUIC packets' worth,
/// read with one pread(2).
const FILE_BLOCK: usize = 64 << 10;

/// The head as h3 takes it: the fields HTTP/2 would send, `:status` as
/// the status. None: a status HTTP/3 cannot carry (a script's).
pub(super) fn response_head(sent: &Sent, hsts: Option<u64>) -> Option<http::Response<()>> {
    let head = &sent.response.head;
    let extra = ResponseFields::new(head, hsts, None)?;
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(head.code()).ok()?;
    let headers = response.headers_mut();
    for (name, value) in extra.fields(head) {
        if name.first() == Some(&b':') {
            continue;
        }
        let name = http::HeaderName::from_bytes(name).ok()?;
        let value = http::HeaderValue::from_bytes(value).ok()?;
        headers.append(name, value);
    }
    Some(response)
}

/// Sends a decided response: its head, then its body; `sent.written`
/// counts the body as it goes, and dropping `sent` writes the log line.
pub(super) async fn send(cfg: &Config, client: &str, stream: &mut Stream, mut sent: Sent) {
    let hsts = pipeline::hsts(cfg, Kind::Https);
    let Some(head) = response_head(&sent, hsts) else {
        stream.stop_stream(Code::H3_INTERNAL_ERROR);
        return;
    };
    if stream.send_response(head).await.is_err() {
        return;
    }
    let body = std::mem::take(&mut sent.response.body);
    let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
    for chunk in body {
        if let Err(e) = send_chunk(stream, chunk, &mut sent, &mut pace).await {
            crate::serve::pacing::response_failed(&e, &pace, client, cfg);
            stream.stop_stream(Code::H3_REQUEST_CANCELLED);
            return;
        }
    }
    let _ = stream.finish().await;
}

/// One body chunk as DATA frames: memory as it is held (no copy), a file
/// by blocks read into buffers quinn then owns.
async fn send_chunk(
    stream: &mut Stream,
    chunk: Chunk,
    sent: &mut Sent,
    pace: &mut Pace,
) -> io::Result<()> {
    match chunk {
        Chunk::Bytes(bytes) => send_data(stream, Bytes::from(bytes), sent, pace).await,
        Chunk::Static(bytes) => send_data(stream, Bytes::from_static(bytes), sent, pace).await,
        Chunk::Shared { bytes, offset, len } => {
            let bytes = Bytes::from_owner(bytes).slice(offset..offset + len);
            send_data(stream, bytes, sent, pace).await
        }
        Chunk::File { file, offset, len } => {
            let mut at = offset;
            let end = offset + len;
            while at < end {
                let want = (end - at).min(FILE_BLOCK as u64) as usize;
                let mut block = BytesMut::zeroed(want);
                let n = file.read_at(&mut block, at)?;
                if n == 0 {
                    // The file shrank under us: the body cannot be whole.
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                block.truncate(n);
                send_data(stream, block.freeze(), sent, pace).await?;
                at += n as u64;
            }
            Ok(())
        }
    }
}

/// One DATA frame, given up on at the pace's deadline: the client's flow
/// control takes bytes only as its application reads them, so a client
/// that stops reading stops the stream here (`TimedOut`).
pub(super) async fn send_data(
    stream: &mut Stream,
    bytes: Bytes,
    sent: &mut Sent,
    pace: &mut Pace,
) -> io::Result<()> {
    let n = bytes.remaining() as u64;
    match tokio::time::timeout_at(pace.deadline().into(), stream.send_data(bytes)).await {
        Ok(Ok(())) => {
            sent.written += n;
            pace.progress(Instant::now(), n);
            Ok(())
        }
        Ok(Err(e)) => Err(io::Error::new(io::ErrorKind::ConnectionReset, e)),
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}
