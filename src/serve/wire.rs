//! A connection's wire: how its bytes travel (as they are, or through TLS),
//! and what a read brought. Every transport and protocol driver reads and
//! writes through it.

use std::os::fd::BorrowedFd;

use super::writer;
use crate::pool;

/// How a connection's bytes travel: as they are, or through TLS.
pub enum Wire {
    Clear,
    #[cfg(feature = "tls")]
    Tls(Box<crate::tls::Connection>),
}

impl Wire {
    /// Where a response goes: `fd` (a socket when `socket`), through TLS
    /// when the connection has it.
    pub fn out<'a>(&'a mut self, fd: BorrowedFd<'a>, socket: bool) -> writer::Out<'a> {
        match self {
            Wire::Clear => writer::Out::fd(fd, socket),
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => writer::Out::Tls { fd, tls },
        }
    }

    /// Reads what `fd` has and appends it to `buf`, decrypted over TLS.
    /// WouldBlock passes through.
    pub fn read(&mut self, fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> std::io::Result<Got> {
        match self {
            Wire::Clear => Ok(if crate::sys::read_append(fd, buf, READ_CHUNK)? == 0 {
                Got::Closed
            } else {
                Got::Bytes
            }),
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => match tls.receive(fd, buf)? {
                crate::tls::Received::Progress => Ok(Got::Bytes),
                crate::tls::Received::Closed => Ok(Got::Closed),
                crate::tls::Received::Cleartext => {
                    *self = Wire::Clear;
                    Ok(Got::Cleartext)
                }
            },
        }
    }

    /// Whether TLS agreed on HTTP/2 by ALPN.
    pub fn alpn_h2(&self) -> bool {
        match self {
            Wire::Clear => false,
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => tls.protocol() == Some(b"h2"),
        }
    }

    /// What TLS agreed on, once its handshake is over (for the log).
    pub fn tls_summary(&self) -> Option<crate::log::Tls> {
        match self {
            Wire::Clear => None,
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => tls.summary(),
        }
    }

    /// Whether the last read emptied the descriptor, as far as TLS can
    /// tell (a cleartext wire reads in the transport's own way: false).
    pub fn drained(&self) -> bool {
        match self {
            Wire::Clear => false,
            #[cfg(feature = "tls")]
            Wire::Tls(tls) => tls.drained(),
        }
    }

    /// Over TLS: queues close_notify and writes what it can without
    /// waiting, before the descriptor closes.
    pub fn close(&mut self, fd: BorrowedFd<'_>) {
        self.close_notify();
        let _ = self.out(fd, true).flush();
    }

    /// Over TLS: queues close_notify, for the next flush.
    pub fn close_notify(&mut self) {
        #[cfg(feature = "tls")]
        if let Wire::Tls(tls) = self {
            tls.close();
        }
    }
}

/// What a read brought.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    /// Bytes for the session (over TLS, possibly none: a handshake step).
    Bytes,
    /// The client closed.
    Closed,
    /// A cleartext request on a TLS port: its bytes are in the buffer, and
    /// the wire is now `Clear`, for the answer `Session::https_required`
    /// gives.
    Cleartext,
}

/// How much is read per call.
pub(crate) const READ_CHUNK: usize = 16 * 1024;

/// Gives a quiet connection's empty `buf` a buffer from the free list for
/// one read; true if it did.
pub(crate) fn lend_read_buffer(buf: &mut Vec<u8>) -> bool {
    let lend = buf.capacity() == 0;
    if lend {
        *buf = pool::take(&pool::READS);
    }
    lend
}

/// After a read into a lent buffer that brought nothing (woken with nothing
/// to read, as a new connection is at first): the buffer goes straight back
/// instead of staying with a connection that may now be quiet for long.
pub(crate) fn return_unused_read_buffer(buf: &mut Vec<u8>, lent: bool, brought: bool) {
    if lent && !brought {
        pool::give(&pool::READS, std::mem::take(buf));
    }
}
