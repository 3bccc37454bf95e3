//! Who a request came from and how: the facts of the connection that
//! carried it (what its listener is for, what TLS agreed on, the client,
//! the two socket addresses, how its responses are encoded). Made once per
//! connection by the transport that accepted it and lent to each of its
//! requests, whichever protocol carries them: HTTP/1.1's [`Session`](crate::session::Session), an
//! HTTP/2 connection's streams, an HTTP/3 connection's, and the CGI
//! exchanges of all three.

use std::net::SocketAddr;

use crate::client_name::ClientName;
use crate::log;

/// Which encoding of the head a `Sent` is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.x: `Sent::wire` holds the head's bytes.
    Http1,
    /// HTTP/2 or HTTP/3: the stream encodes the head as fields
    /// ([`http::fields`](crate::http::fields)).
    Fields,
}

/// What a connection is for, from its listener and what it speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Http,
    /// HTTP over TLS: Strict-Transport-Security with `--hsts`, and CGI's
    /// HTTPS=on.
    Https,
    /// Cleartext HTTP sent to a TLS port: answered with a 400 that says so
    /// (nginx's 497), then closed.
    ClearOnHttpsPort,
    /// A `--redirect-http` port: every request is sent to https on `port`.
    RedirectToHttps {
        port: u16,
    },
}

/// The client's and our socket addresses (CGI's REMOTE_PORT, SERVER_PORT).
pub type Sockets = (Option<SocketAddr>, Option<SocketAddr>);

/// One connection's facts, the same for every request on it.
#[derive(Clone, Copy)]
pub struct Origin {
    pub kind: Kind,
    /// What TLS agreed on, for the log; None in cleartext, and over TCP
    /// until the handshake is over.
    pub tls: Option<log::Tls>,
    /// The client's name for the log: its address (a PROXY header's, when
    /// one named it), `unix:` for a Unix-socket client, or `-`.
    pub client: ClientName,
    /// The socket addresses, once known: an HTTP/2 or HTTP/3 connection
    /// reads them at its start, a PROXY header names the client's; None
    /// for an HTTP/1.1 connection, whose CGI driver asks its descriptor
    /// only when a script runs.
    pub sockets: Option<Sockets>,
    pub protocol: Protocol,
}

impl Origin {
    pub fn new(kind: Kind, client: ClientName, protocol: Protocol) -> Origin {
        Origin {
            kind,
            tls: None,
            client,
            sockets: None,
            protocol,
        }
    }

    /// The same connection carrying HTTP/2 streams from here on (the
    /// prelude found the preface): their encoding, what TLS agreed on,
    /// and the socket addresses each stream's CGI script is told.
    pub fn into_streams(self, tls: Option<log::Tls>, sockets: Sockets) -> Origin {
        Origin {
            tls,
            sockets: Some(sockets),
            protocol: Protocol::Fields,
            ..self
        }
    }

    /// The socket addresses: known already (a PROXY header's, a stream
    /// connection's), else asked of `fd`, the connection's socket, now
    /// that something needs them.
    pub fn sockets_of(&self, fd: std::os::fd::BorrowedFd<'_>) -> Sockets {
        self.sockets.unwrap_or_else(|| crate::sys::socket_addrs(fd))
    }

    /// Whether requests came over TLS (CGI's HTTPS=on).
    pub fn https(&self) -> bool {
        self.kind == Kind::Https
    }
}
