//! A client byte stream to the server under test: plain TCP, or TLS (rustls) over TCP.
//!
//! Over TLS a write never waits for the handshake: it hands the bytes to rustls (which
//! keeps them until the handshake is done), then writes whatever TLS records are ready
//! (at first the ClientHello). Reads drive the handshake, and send what waited for it.
//! [`Stream::handshake`] completes it explicitly. A close without `close_notify` reads
//! as the end of the stream, as it does over TCP.

use super::*;

use rustls::ClientConnection;

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

pub struct TlsStream {
    pub conn: ClientConnection,
    pub sock: TcpStream,
    /// How the server ended the stream, once it has: `Some(true)` with `close_notify`.
    pub close_notify: Option<bool>,
}

impl Stream {
    /// A TLS client on `sock` (nothing is sent yet).
    pub fn tls(sock: TcpStream, client: &TlsClient) -> Stream {
        Stream::Tls(Box::new(TlsStream {
            conn: client.connection(),
            sock,
            close_notify: None,
        }))
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }

    /// The TLS connection, if this is one.
    pub fn tls_conn(&self) -> Option<&ClientConnection> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => Some(&t.conn),
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// Over TLS, once the server has ended the stream: whether it sent `close_notify`
    /// first (without it, a client cannot tell a close-delimited body from a cut one).
    pub fn ended_with_close_notify(&self) -> Option<bool> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => t.close_notify,
        }
    }

    /// Completes the TLS handshake (a no-op on plain TCP), bounded by the socket's
    /// read timeout.
    pub fn handshake(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.handshake(),
        }
    }

    /// Sends TLS `close_notify` (nothing on plain TCP).
    pub fn close_notify(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => {
                t.conn.send_close_notify();
                t.flush_tls()
            }
        }
    }

    /// Turns `bytes` into what goes on the wire for them: themselves, or TLS records
    /// (after completing the handshake). For writing from another thread on a clone of
    /// [`Stream::tcp`] while this one reads: rustls's read and write directions are
    /// independent once the handshake is done.
    pub fn seal(&mut self, bytes: &[u8]) -> io::Result<Vec<u8>> {
        match self {
            Stream::Plain(_) => Ok(bytes.to_vec()),
            Stream::Tls(t) => {
                t.handshake()?;
                t.flush_tls()?;
                t.conn.writer().write_all(bytes)?;
                let mut wire = Vec::new();
                while t.conn.wants_write() {
                    t.conn.write_tls(&mut wire)?;
                }
                Ok(wire)
            }
        }
    }
}

impl TlsStream {
    fn flush_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }

    /// Reads TLS records and processes them; `Ok(0)` at the end of the stream.
    fn read_records(&mut self) -> io::Result<usize> {
        self.flush_tls()?;
        let n = loop {
            match self.conn.read_tls(&mut self.sock) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        if let Err(e) = self.conn.process_new_packets() {
            // Our alert, if rustls has one to send.
            let _ = self.flush_tls();
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(n)
    }

    fn handshake(&mut self) -> io::Result<()> {
        while self.conn.is_handshaking() {
            if self.read_records()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
        }
        self.flush_tls()
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Stream::Plain(s) => return s.read(buf),
            Stream::Tls(t) => t,
        };
        loop {
            match t.conn.reader().read(buf) {
                Ok(0) if !buf.is_empty() => {
                    t.close_notify = Some(true);
                    return Ok(0);
                }
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without close_notify: the end, as over TCP.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    t.close_notify = Some(false);
                    return Ok(0);
                }
                Err(e) => return Err(e),
            }
            t.read_records()?;
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => {
                let n = t.conn.writer().write(buf)?;
                t.flush_tls()?;
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush_tls(),
        }
    }
}

/// How to reach a server: its address, and TLS settings when it speaks TLS. Cheap to
/// clone into threads.
#[derive(Clone)]
pub struct Connector {
    pub addr: SocketAddr,
    pub tls: Option<TlsClient>,
    /// What [`Connector::client`] speaks: HTTP/1.1 unless set (as [`Server::connector`]
    /// sets it in an HTTP/2 or HTTP/3 cell).
    pub proto: Proto,
}

impl Connector {
    pub fn new(addr: SocketAddr, tls: Option<TlsClient>) -> Connector {
        Connector {
            addr,
            tls,
            proto: Proto::Http1,
        }
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A TCP connection, nothing sent.
    pub fn tcp(&self) -> TcpStream {
        TcpStream::connect_timeout(&self.addr, IO_TIMEOUT).expect("connect")
    }

    /// `tcp` as this server's kind of stream (nothing sent yet).
    pub fn wrap(&self, tcp: TcpStream) -> Stream {
        match &self.tls {
            None => Stream::Plain(tcp),
            Some(client) => Stream::tls(tcp, client),
        }
    }

    pub fn stream(&self) -> Stream {
        self.wrap(self.tcp())
    }

    /// A raw [`Conn`] (over TLS when the server speaks it).
    pub fn connect(&self) -> Conn {
        Conn::from_stream(self.stream())
    }

    pub fn connect_from(&self, source: IpAddr) -> Conn {
        Conn::from_stream(self.wrap(connect_from(source, self.addr)))
    }

    /// A client connection speaking `proto`: HTTP/2 (HTTP/3) for a server of an HTTP/2
    /// (HTTP/3) cell that speaks it, else HTTP/1.1.
    pub fn client(&self) -> Client {
        self.client_proto(self.proto)
    }

    /// A client connection speaking `proto`, whatever the cell. HTTP/3 goes over QUIC
    /// to the same address (port number) over UDP, and needs TLS.
    pub fn client_proto(&self, proto: Proto) -> Client {
        if proto == Proto::Http3 {
            let tls = self.tls.as_ref().expect("HTTP/3 needs a TLS server");
            return Client::connect_h3(self.addr, tls);
        }
        Client::connect_proto(self.tcp(), self.tls.as_ref(), proto)
    }

    /// `http://ADDR/path`, or `https://` over TLS.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.is_tls() { "https" } else { "http" };
        format!("{scheme}://{}{}", self.addr, path)
    }
}
