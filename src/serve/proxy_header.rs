//! `--proxy-protocol`: taking the PROXY header off a new connection before
//! anything else reads it (TLS included), and not a byte more: what
//! follows is the request's, or the TLS handshake's.
//!
//! On a socket the reader peeks, parses, then takes exactly the header's
//! bytes (or, while it is incomplete, the bytes peeked, which all belong to
//! it). On a pipe (inetd mode started by hand) it reads no more than the
//! parser says still belongs to the header.

use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use crate::client_name::ClientName;
use crate::origin::Sockets;
use crate::pool;
use crate::proxy::header::{self, Parsed};
use crate::session::Session;
use crate::sys;

/// Reads one header in non-blocking steps; the transport waits between them.
pub(crate) struct HeaderReader {
    /// The header's bytes taken so far (a read buffer from the free list).
    taken: Vec<u8>,
    socket: bool,
}

impl HeaderReader {
    /// [`socket`](crate::serve::socket): the descriptor is a socket (peeking works); else a pipe.
    pub(crate) fn new(socket: bool) -> HeaderReader {
        let mut taken = pool::take(&pool::READS);
        taken.clear();
        HeaderReader { taken, socket }
    }

    /// Reads what is there. Ok(None): part of the header came, wait for
    /// more. Ok(Some(source)): the header is complete and taken; `source` is
    /// the client it names (None for a LOCAL or UNKNOWN header: the
    /// connection's own address stands). WouldBlock passes through; a
    /// closed connection or an invalid header is an error.
    pub(crate) fn advance(&mut self, fd: BorrowedFd<'_>) -> io::Result<Option<Option<SocketAddr>>> {
        let have = self.taken.len();
        let want = match header::parse(&self.taken) {
            Parsed::Incomplete { needed } if !self.socket => needed,
            _ => header::MAX_LEN - have,
        };
        self.taken.resize(have + want, 0);
        let read = match self.socket {
            true => sys::peek(fd, &mut self.taken[have..]),
            false => sys::read(fd, &mut self.taken[have..]),
        };
        self.taken.truncate(have + *read.as_ref().unwrap_or(&0));
        if read? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let parsed = header::parse(&self.taken);
        let (end, outcome) = match parsed {
            // Every byte seen is the header's: take them.
            Parsed::Incomplete { .. } => (self.taken.len(), None),
            Parsed::Header { len, source, .. } => (len, Some(Some(source))),
            Parsed::Local { len } => (len, Some(None)),
            Parsed::Invalid => return Err(io::ErrorKind::InvalidData.into()),
        };
        if self.socket {
            self.take_peeked(fd, have, end)?;
        }
        Ok(outcome)
    }

    /// Takes off the socket the bytes `have..end` that were only peeked:
    /// they are queued, so the reads return them at once.
    fn take_peeked(&mut self, fd: BorrowedFd<'_>, have: usize, end: usize) -> io::Result<()> {
        let mut at = have;
        while at < end {
            match sys::read(fd, &mut self.taken[at..end]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.taken.truncate(end);
        Ok(())
    }
}

impl Drop for HeaderReader {
    fn drop(&mut self) {
        pool::give(&pool::READS, std::mem::take(&mut self.taken));
    }
}

/// For a transport that reads by itself (io_uring), sans-IO: what the
/// bytes read so far hold. Ok(None): part of a header, read more.
/// Ok(Some((len, source))): a header of `len` bytes, naming `source` (None
/// for LOCAL or UNKNOWN); what follows it is the connection's. An invalid
/// header is an InvalidData error.
#[cfg(any(feature = "uring", test))]
pub(crate) fn parse_read(bytes: &[u8]) -> io::Result<Option<(usize, Option<SocketAddr>)>> {
    match header::parse(bytes) {
        Parsed::Incomplete { .. } => Ok(None),
        Parsed::Header { len, source, .. } => Ok(Some((len, Some(source)))),
        Parsed::Local { len } => Ok(Some((len, None))),
        Parsed::Invalid => Err(io::ErrorKind::InvalidData.into()),
    }
}

/// Blocking: the header from `fd` within `timeout` (inetd mode).
pub(crate) fn read_blocking(
    fd: BorrowedFd<'_>,
    timeout: Duration,
) -> io::Result<Option<SocketAddr>> {
    let deadline = Instant::now() + timeout;
    let mut reader = HeaderReader::new(sys::is_socket(fd));
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if !sys::wait(fd, false, left)? {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match reader.advance(fd) {
            Ok(Some(source)) => return Ok(source),
            Ok(None) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The client's and our addresses for CGI (REMOTE_PORT, SERVER_NAME
/// without Host): the header's client instead of the socket's peer.
fn sockets(fd: BorrowedFd<'_>, source: SocketAddr) -> Sockets {
    (Some(source), sys::local_addr(fd))
}

/// After the header: the session names the client it gave, and the
/// addresses a CGI script is told (`sockets`).
pub(crate) fn name_client(session: &mut Session, fd: BorrowedFd<'_>, source: Option<SocketAddr>) {
    if let Some(source) = source {
        let client = ClientName::ip(source.ip().to_canonical());
        session.set_client(client, sockets(fd, source));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    const V1: &[u8] = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n";

    #[test]
    fn takes_the_header_and_leaves_the_request() {
        // Peeking, and reading as from a pipe (a socket reads the same).
        for socket in [true, false] {
            let (mut client, server) = UnixStream::pair().unwrap();
            client.write_all(V1).unwrap();
            client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
            let mut reader = HeaderReader::new(socket);
            let source = loop {
                if let Some(source) = reader.advance(server.as_fd()).unwrap() {
                    break source;
                }
            };
            assert_eq!(source, Some("192.0.2.1:56324".parse().unwrap()));
            let mut rest = [0u8; 64];
            let n = sys::read(server.as_fd(), &mut rest).unwrap();
            assert_eq!(&rest[..n], b"GET / HTTP/1.1\r\n", "socket: {socket}");
        }
    }

    #[test]
    fn bytes_read_past_the_header_are_the_connection_s() {
        let mut read = V1.to_vec();
        read.extend_from_slice(b"\x16\x03\x01");
        let source = Some("192.0.2.1:56324".parse().unwrap());
        assert_eq!(parse_read(&read).unwrap(), Some((V1.len(), source)));
        assert_eq!(parse_read(&V1[..20]).unwrap(), None);
        let e = parse_read(b"GET / HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_header_in_pieces() {
        let (mut client, server) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            for piece in V1.chunks(7) {
                client.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            client.write_all(b"X").unwrap();
            client
        });
        let source = read_blocking(server.as_fd(), Duration::from_secs(5)).unwrap();
        assert_eq!(source, Some("192.0.2.1:56324".parse().unwrap()));
        let _client = writer.join().unwrap();
        let mut rest = [0u8; 8];
        assert_eq!(sys::read(server.as_fd(), &mut rest).unwrap(), 1);
    }

    #[test]
    fn garbage_silence_and_eof_fail() {
        let (mut client, server) = UnixStream::pair().unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let e = read_blocking(server.as_fd(), Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);

        let (mut client, server) = UnixStream::pair().unwrap();
        client.write_all(b"PROXY TCP4").unwrap();
        let e = read_blocking(server.as_fd(), Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(client);
        let e = read_blocking(server.as_fd(), Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
