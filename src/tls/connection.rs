//! One TLS connection between a descriptor and a [`Session`](crate::session::Session): ciphertext
//! from the descriptor comes out as plaintext in the session's input, and what the session decided
//! goes out as TLS records. rustls does the protocol without I/O; this makes the one read(2) or
//! write(2) it needs at a time, never blocking, so the event loop and inetd mode drive it alike.

use std::io::{self, Read, Write};
use std::num::NonZeroU16;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use rustls::{HandshakeKind, ServerConfig, ServerConnection};

use crate::log::Alpn;
use crate::sys;

/// How much plaintext is sealed into records before they are written: four
/// full records, so that a large body leaves in few system calls while at
/// most this much ciphertext waits per connection.
pub const MAX_SEALED: usize = 64 << 10;
/// How much is read per call.
const READ_CHUNK: usize = 16 << 10;
/// The TLS record type of a handshake message: how every TLS client starts.
const HANDSHAKE: u8 = 0x16;

pub struct Connection {
    tls: ServerConnection,
    /// Nothing received yet: the first bytes tell TLS from cleartext HTTP.
    fresh: bool,
    /// Records are held back on purpose, to leave with the next ones.
    held: bool,
    /// The last read got less than it asked for: the descriptor had no more.
    drained: bool,
}

/// What a read brought.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// Plaintext was appended (possibly none: a handshake step).
    Progress,
    /// The client closed, or said close_notify.
    Closed,
    /// The client speaks cleartext HTTP; its bytes are in the buffer.
    Cleartext,
}

impl Connection {
    pub fn new(config: Arc<ServerConfig>) -> io::Result<Connection> {
        let mut tls = ServerConnection::new(config).map_err(io::Error::other)?;
        // This type bounds what waits to be written (MAX_SEALED) itself.
        tls.set_buffer_limit(None);
        Ok(Connection {
            tls,
            fresh: true,
            held: false,
            drained: false,
        })
    }

    /// Reads what `fd` has and appends the plaintext to `plain`. A TLS
    /// error (garbage, a bad handshake) is an InvalidData error, after
    /// which the alert rustls queued should be flushed before closing.
    pub fn receive(&mut self, fd: BorrowedFd<'_>, plain: &mut Vec<u8>) -> io::Result<Received> {
        if self.fresh {
            return self.receive_first(fd, plain);
        }
        let mut reader = FdReader { fd, short: false };
        let n = self.tls.read_tls(&mut reader)?;
        self.drained = reader.short;
        if n == 0 {
            return Ok(Received::Closed);
        }
        self.process(plain)
    }

    /// The first read goes into `plain` (empty so far) as it is, to look at
    /// before rustls does: a cleartext request stays there to be answered.
    fn receive_first(&mut self, fd: BorrowedFd<'_>, plain: &mut Vec<u8>) -> io::Result<Received> {
        let start = plain.len();
        let n = sys::read_append(fd, plain, READ_CHUNK)?;
        self.drained = n < READ_CHUNK;
        if n == 0 {
            return Ok(Received::Closed);
        }
        self.fresh = false;
        if !opens_tls(plain[start]) {
            return Ok(Received::Cleartext);
        }
        // Moved aside: the plaintext goes where the ciphertext was.
        let ciphertext = plain[start..].to_vec();
        plain.truncate(start);
        self.take(&ciphertext, plain)
    }

    /// `receive` for a transport that reads by itself (io_uring): takes
    /// the `ciphertext` it read (empty: the client closed) and appends the
    /// plaintext to `plain`. A first read that is cleartext HTTP is
    /// appended as it is, as `receive` does.
    pub fn receive_bytes(
        &mut self,
        ciphertext: &[u8],
        plain: &mut Vec<u8>,
    ) -> io::Result<Received> {
        if ciphertext.is_empty() {
            return Ok(Received::Closed);
        }
        if std::mem::replace(&mut self.fresh, false) && !opens_tls(ciphertext[0]) {
            plain.extend_from_slice(ciphertext);
            return Ok(Received::Cleartext);
        }
        self.take(ciphertext, plain)
    }

    /// Gives rustls `ciphertext`, record by record.
    fn take(&mut self, mut ciphertext: &[u8], plain: &mut Vec<u8>) -> io::Result<Received> {
        while !ciphertext.is_empty() {
            // rustls takes nothing more once the client said close_notify.
            if self.tls.read_tls(&mut ciphertext)? == 0 {
                return Ok(Received::Closed);
            }
            if self.process(plain)? == Received::Closed {
                return Ok(Received::Closed);
            }
        }
        Ok(Received::Progress)
    }

    /// Runs what rustls received and moves the plaintext out.
    fn process(&mut self, plain: &mut Vec<u8>) -> io::Result<Received> {
        let handshaking = self.tls.is_handshaking();
        let state = self.tls.process_new_packets().map_err(|e| {
            if handshaking {
                crate::metrics::count(crate::metrics::Event::TlsFailed);
            }
            io::Error::new(io::ErrorKind::InvalidData, e)
        })?;
        if handshaking && !self.tls.is_handshaking() {
            crate::metrics::count(match self.tls.handshake_kind() {
                Some(rustls::HandshakeKind::Resumed) => crate::metrics::Event::TlsResumed,
                _ => crate::metrics::Event::TlsFull,
            });
        }
        let want = state.plaintext_bytes_to_read();
        if want > 0 {
            let start = plain.len();
            plain.resize(start + want, 0);
            let n = self.tls.reader().read(&mut plain[start..]).unwrap_or(0);
            plain.truncate(start + n);
        }
        if state.peer_has_closed() {
            return Ok(Received::Closed);
        }
        // A TLS-ALPN-01 validation ends with the handshake (RFC 8737): no
        // HTTP follows, so the connection need not wait for a request.
        if !self.tls.is_handshaking() && self.tls.alpn_protocol() == Some(super::ACME_TLS_ALPN) {
            return Ok(Received::Closed);
        }
        Ok(Received::Progress)
    }

    /// Whether the last read emptied the descriptor (it got less than it
    /// asked for), so that waiting for readiness is due before the next.
    pub fn drained(&self) -> bool {
        self.drained
    }

    /// Whether records wait to be written.
    pub fn wants_write(&self) -> bool {
        self.tls.wants_write()
    }

    /// Writes what records wait, until none does or `fd` is full
    /// (WouldBlock).
    pub fn flush(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.held = false;
        while self.tls.wants_write() {
            self.tls.write_tls(&mut FdWriter(fd))?;
        }
        Ok(())
    }

    /// Seals the start of `bytes` into records and tries to write them.
    /// Returns how much plaintext was taken; once taken, it leaves with
    /// later `flush` calls if not now. With `more` (more follows at once,
    /// as a body follows its head) the records are held for the next call,
    /// so both leave in one write. Records left over because `fd` was full
    /// go out first: then WouldBlock means nothing was taken.
    pub fn send(&mut self, fd: BorrowedFd<'_>, bytes: &[u8], more: bool) -> io::Result<usize> {
        if !self.held {
            self.flush(fd)?;
        }
        let take = bytes.len().min(MAX_SEALED);
        let n = self.tls.writer().write(&bytes[..take])?;
        self.held = more;
        if !more {
            match self.flush(fd) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => other?,
            }
        }
        Ok(n)
    }

    /// For a transport that writes by itself (io_uring): seals the start
    /// of `bytes` into records, and returns how much it took (at most
    /// MAX_SEALED); `sealed` then hands the records over.
    pub fn seal(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let take = bytes.len().min(MAX_SEALED);
        self.tls.writer().write(&bytes[..take])
    }

    /// Appends every record waiting to be written (sealed data, handshake
    /// messages, alerts) to `out`.
    pub fn sealed(&mut self, out: &mut Vec<u8>) {
        self.held = false;
        while self.tls.wants_write() {
            if self.tls.write_tls(out).is_err() {
                break;
            }
        }
    }

    /// Queues a close_notify alert, for the next `flush`.
    pub fn close(&mut self) {
        self.tls.send_close_notify();
    }

    /// The ALPN protocol agreed on, if any.
    pub fn protocol(&self) -> Option<&[u8]> {
        self.tls.alpn_protocol()
    }

    /// What the handshake agreed on, for the log; None until it is over.
    pub fn summary(&self) -> Option<crate::log::Tls> {
        if self.tls.is_handshaking() {
            return None;
        }
        let resumed = self.tls.handshake_kind() == Some(HandshakeKind::Resumed);
        Some(crate::log::Tls {
            version: u16::from(self.tls.protocol_version()?),
            cipher_suite: (self.tls.negotiated_cipher_suite())
                .and_then(|s| NonZeroU16::new(u16::from(s.suite()))),
            resumed: Some(resumed),
            proto: match self.protocol() {
                Some(b"h2") => Alpn::H2,
                Some(b"http/1.1") => Alpn::Http1,
                // staticd offers only those two.
                _ => Alpn::None,
            },
        })
    }
}

/// Whether a connection's first byte opens a TLS handshake rather than
/// cleartext HTTP (a method's capital letter).
fn opens_tls(first: u8) -> bool {
    first == HANDSHAKE || !first.is_ascii_uppercase()
}

/// Reads from a descriptor, noting a short read.
struct FdReader<'a> {
    fd: BorrowedFd<'a>,
    short: bool,
}

impl Read for FdReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = sys::read(self.fd, buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

/// Writes to a socket or pipe; records go out in one writev(2) when several wait.
struct FdWriter<'a>(BorrowedFd<'a>);

impl Write for FdWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        sys::write(self.0, buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        sys::writev(self.0, bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
