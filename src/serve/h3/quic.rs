//! h3's QUIC traits over quinn, in place of h3-quinn's, for what h3-quinn cannot do: every byte a
//! client sends on a stream passes through a [`frames::Filter`](crate::serve::h3::frames::Filter)
//! before h3 buffers it (the bound on h3's frames), and a stream dropped unanswered is reset and
//! stopped with an HTTP/3 code, never 0x0 (quinn's when a stream is dropped, and h3-quinn cannot
//! stop a stream while a read is pending on it). Otherwise it does what h3-quinn does.
//!
//! A request stream dropped with nothing of a response sent: RESET_STREAM
//! and STOP_SENDING with H3_REQUEST_REJECTED (nothing was done for it: a
//! head that never completed, a 0-RTT request whose handshake never did).
//! One dropped with a response written and not finished is finished, as
//! quinn would: h3 writes its own 431 so, and staticd resets a response it
//! cuts short itself ([`send`](crate::serve::h3::send)). A request body left unread once a response
//! was written: STOP_SENDING with H3_NO_ERROR (RFC 9114 §4.1.1).

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};

use super::code;
use super::frames::{Filter, Kind, Violation};

type Boxed<T> =
    Pin<Box<dyn Future<Output = Result<T, quinn::ConnectionError>> + std::marker::Send + Sync>>;

/// One QUIC connection as h3 takes it.
pub(super) struct Connection {
    quic: quinn::Connection,
    /// The `SETTINGS_MAX_FIELD_SECTION_SIZE` staticd advertises.
    field_section_max: u64,
    accepting_bidi: Option<Boxed<(quinn::SendStream, quinn::RecvStream)>>,
    accepting_uni: Option<Boxed<quinn::RecvStream>>,
    opener: Opener,
}

impl Connection {
    pub(super) fn new(quic: quinn::Connection, field_section_max: u64) -> Connection {
        Connection {
            opener: Opener::new(quic.clone()),
            quic,
            field_section_max,
            accepting_bidi: None,
            accepting_uni: None,
        }
    }
}

/// Polls the future in `slot`, made by `make` if there is none; it is
/// taken out once it is ready.
fn poll_boxed<T>(
    slot: &mut Option<Boxed<T>>,
    cx: &mut Context<'_>,
    make: impl FnOnce() -> Boxed<T>,
) -> Poll<Result<T, ConnectionErrorIncoming>> {
    let future = slot.get_or_insert_with(make);
    let done = ready!(future.as_mut().poll(cx));
    *slot = None;
    Poll::Ready(done.map_err(connection_error))
}

impl<B: Buf> quic::Connection<B> for Connection {
    type RecvStream = Recv;
    type OpenStreams = Opener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Recv, ConnectionErrorIncoming>> {
        let quic = self.quic.clone();
        let stream = ready!(poll_boxed(&mut self.accepting_uni, cx, || {
            Box::pin(async move { quic.accept_uni().await })
        }))?;
        let filter = Filter::new(Kind::Unidirectional, self.field_section_max);
        Poll::Ready(Ok(Recv::new(
            stream,
            filter,
            code::NO_ERROR,
            self.quic.clone(),
        )))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi<B>, ConnectionErrorIncoming>> {
        let quic = self.quic.clone();
        let (send, recv) = ready!(poll_boxed(&mut self.accepting_bidi, cx, || {
            Box::pin(async move { quic.accept_bi().await })
        }))?;
        let filter = Filter::new(Kind::Request, self.field_section_max);
        Poll::Ready(Ok(Bidi::new(send, recv, filter, self.quic.clone())))
    }

    fn opener(&self) -> Opener {
        Opener::new(self.quic.clone())
    }
}

impl<B: Buf> quic::OpenStreams<B> for Connection {
    type BidiStream = Bidi<B>;
    type SendStream = Send<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi<B>, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_bidi(&mut self.opener, cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Send<B>, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_send(&mut self.opener, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.quic.close(code::varint(code.value()), reason);
    }
}

/// Opens the server's own streams (its control stream, QPACK's).
pub(super) struct Opener {
    quic: quinn::Connection,
    opening_bidi: Option<Boxed<(quinn::SendStream, quinn::RecvStream)>>,
    opening_uni: Option<Boxed<quinn::SendStream>>,
}

impl Opener {
    fn new(quic: quinn::Connection) -> Opener {
        Opener {
            quic,
            opening_bidi: None,
            opening_uni: None,
        }
    }
}

impl<B: Buf> quic::OpenStreams<B> for Opener {
    type BidiStream = Bidi<B>;
    type SendStream = Send<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Bidi<B>, StreamErrorIncoming>> {
        let quic = self.quic.clone();
        let opened = ready!(poll_boxed(&mut self.opening_bidi, cx, || {
            Box::pin(async move { quic.open_bi().await })
        }));
        let (send, recv) =
            opened.map_err(
                |connection_error| StreamErrorIncoming::ConnectionErrorIncoming {
                    connection_error,
                },
            )?;
        // Not used by a server; a response on it would be read as a request's.
        let filter = Filter::new(Kind::Request, u64::MAX);
        Poll::Ready(Ok(Bidi::new(send, recv, filter, self.quic.clone())))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Send<B>, StreamErrorIncoming>> {
        let quic = self.quic.clone();
        let opened = ready!(poll_boxed(&mut self.opening_uni, cx, || {
            Box::pin(async move { quic.open_uni().await })
        }));
        let send =
            opened.map_err(
                |connection_error| StreamErrorIncoming::ConnectionErrorIncoming {
                    connection_error,
                },
            )?;
        Poll::Ready(Ok(Send::new(send)))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.quic.close(code::varint(code.value()), reason);
    }
}

/// What quinn says of a lost connection, as h3 takes it (h3-quinn's mapping).
fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(close) => {
            ConnectionErrorIncoming::ApplicationClose {
                error_code: close.error_code.into_inner(),
            }
        }
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        e => ConnectionErrorIncoming::Undefined(Arc::new(e)),
    }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::ReadError::ConnectionLost(e) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(e),
        },
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::WriteError::ConnectionLost(e) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(e),
        },
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

/// A stream's receiving side, its bytes through a `Filter`.
pub(super) struct Recv {
    stream: quinn::RecvStream,
    filter: Filter,
    /// What quinn handed up and the filter has not yet.
    input: Bytes,
    /// The stream's end was read, or it was stopped.
    done: bool,
    /// The code a stream violation stopped it with (its send side is
    /// reset with it too).
    violated: Option<u64>,
    /// The code it is stopped with if dropped before its end was read.
    unread: u64,
    quic: quinn::Connection,
}

impl Recv {
    /// `unread`: the code it is stopped with if dropped before its end
    /// was read (until its [`Bidi`] says otherwise).
    fn new(
        stream: quinn::RecvStream,
        filter: Filter,
        unread: u64,
        quic: quinn::Connection,
    ) -> Recv {
        Recv {
            stream,
            filter,
            input: Bytes::new(),
            done: false,
            violated: None,
            unread,
            quic,
        }
    }

    /// Stops the stream with `code` unless its end was read.
    fn stop(&mut self, code: u64) {
        if !self.done {
            self.done = true;
            let _ = self.stream.stop(code::varint(code));
        }
    }

    /// Acts on a violation: the stream stopped, or the connection closed.
    fn violation(&mut self, violation: Violation) -> StreamErrorIncoming {
        match violation {
            Violation::Stream(error_code) => {
                self.stop(error_code);
                self.violated = Some(error_code);
                StreamErrorIncoming::StreamTerminated { error_code }
            }
            Violation::Connection(error_code) => {
                self.quic.close(code::varint(error_code), b"");
                StreamErrorIncoming::ConnectionErrorIncoming {
                    connection_error: ConnectionErrorIncoming::ApplicationClose { error_code },
                }
            }
        }
    }
}

impl quic::RecvStream for Recv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        loop {
            match self.filter.next(&mut self.input) {
                Ok(Some(passed)) => return Poll::Ready(Ok(Some(passed))),
                Ok(None) => {}
                Err(violation) => return Poll::Ready(Err(self.violation(violation))),
            }
            if self.done {
                return Poll::Ready(Ok(None));
            }
            // read_chunk is cancel-safe: a fresh future each poll, as
            // quinn's own poll_read does.
            let read = pin!(self.stream.read_chunk(usize::MAX, true)).poll(cx);
            match ready!(read) {
                Ok(Some(chunk)) => self.input = chunk.bytes,
                Ok(None) => {
                    self.done = true;
                    if !self.filter.at_boundary() {
                        // RFC 9114 §7.1: a frame cut short by the stream's end.
                        let cut = Violation::Connection(code::FRAME_ERROR);
                        return Poll::Ready(Err(self.violation(cut)));
                    }
                    return Poll::Ready(Ok(None));
                }
                Err(e) => return Poll::Ready(Err(read_error(e))),
            }
        }
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.stop(error_code);
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }
}

impl Drop for Recv {
    fn drop(&mut self) {
        // Else quinn stops it with 0x0.
        self.stop(self.unread);
    }
}

fn stream_id(id: quinn::StreamId) -> StreamId {
    StreamId::try_from(u64::from(id)).expect("quinn's stream IDs are varints")
}

/// A stream's sending side (h3-quinn's, which knows whether it ended).
pub(super) struct Send<B: Buf> {
    stream: quinn::SendStream,
    writing: Option<WriteBuf<B>>,
    /// Bytes were given to quinn.
    wrote: bool,
    /// Finished or reset.
    ended: bool,
    /// A request stream's: reset if dropped before it ended.
    request: bool,
}

impl<B: Buf> Send<B> {
    fn new(stream: quinn::SendStream) -> Send<B> {
        Send {
            stream,
            writing: None,
            wrote: false,
            ended: false,
            request: false,
        }
    }
}

impl<B: Buf> quic::SendStream<B> for Send<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = &mut self.writing {
            while data.has_remaining() {
                let written = ready!(Pin::new(&mut self.stream).poll_write(cx, data.chunk()))
                    .map_err(write_error)?;
                data.advance(written);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "send_data before the last write was done".to_string(),
                ),
            });
        }
        self.wrote = true;
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.ended = true;
        Poll::Ready(
            self.stream
                .finish()
                .map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))),
        )
    }

    fn reset(&mut self, reset_code: u64) {
        self.ended = true;
        let _ = self.stream.reset(code::varint(reset_code));
    }

    fn send_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }
}

impl<B: Buf> Drop for Send<B> {
    fn drop(&mut self) {
        // Else quinn finishes it: a response that ends with no head.
        if self.request && !self.ended && !self.wrote {
            let _ = self.stream.reset(code::varint(code::REQUEST_REJECTED));
        }
    }
}

/// A request stream: both sides.
pub(super) struct Bidi<B: Buf> {
    send: Send<B>,
    recv: Recv,
}

impl<B: Buf> Bidi<B> {
    fn new(
        send: quinn::SendStream,
        recv: quinn::RecvStream,
        filter: Filter,
        quic: quinn::Connection,
    ) -> Bidi<B> {
        let mut send = Send::new(send);
        send.request = true;
        Bidi {
            send,
            recv: Recv::new(recv, filter, code::REQUEST_REJECTED, quic),
        }
    }
}

impl<B: Buf> quic::BidiStream<B> for Bidi<B> {
    type SendStream = Send<B>;
    type RecvStream = Recv;

    fn split(self) -> (Send<B>, Recv) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::RecvStream for Bidi<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let read = ready!(self.recv.poll_data(cx));
        if let Some(code) = self.recv.violated {
            quic::SendStream::<B>::reset(self, code);
        }
        Poll::Ready(read)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop(error_code);
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for Bidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        // Answered: the rest of the request is not needed (§4.1.1).
        self.recv.unread = code::NO_ERROR;
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.recv.unread = reset_code;
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}
