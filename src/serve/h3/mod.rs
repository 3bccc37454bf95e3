//! HTTP/3 over QUIC (feature `http3`): on with HTTPS, on the HTTPS addresses' port numbers over
//! UDP, as Caddy does. QUIC is quinn-proto's state machine with the rustls configuration TCP uses
//! ([`tls::Acceptor::quic_config`](crate::tls::Acceptor::quic_config): the same certificates,
//! reloads and ticket keys); HTTP/3 and its QPACK are [`h3session`](crate::h3session)'s, sans-IO
//! like HTTP/2's session. Each request stream becomes the same
//! [`parse::Request`](crate::http::parse::Request) an HTTP/1.1 or HTTP/2 request does and is
//! decided by the same [`pipeline::answer`](crate::pipeline::answer); nothing about HTTP is
//! decided here: this moves datagrams (`endpoint`).
//!
//! One task per UDP socket drives that socket's endpoint and all its connections, on one
//! current-thread runtime in a thread of its own (issue 42 moves them onto the workers' loops).
//!
//! Limits: `--max-connections` and `--max-connections-per-ip` count QUIC connections with TCP's (a
//! connection over either bound is refused at its first packet); `--h2-max-streams` bounds
//! concurrent request streams; `--keepalive-timeout` is the idle timeout; handshakes from
//! unvalidated addresses beyond `RETRY_ABOVE` at once get a Retry
//! (address validation, RFC 9000 §8.1), and quinn-proto itself sends no more than three times
//! what an unvalidated address sent. A graceful stop sends GOAWAY, lets streams in flight finish
//! within `--shutdown-grace` (until the client has acknowledged them), and closes.

mod endpoint;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use quinn_proto::crypto::rustls::QuicServerConfig;

use super::limits::Connections;
use crate::config::Config;
use crate::log;
use crate::site::Site;
use crate::sys::describe;

/// Handshakes in progress from addresses not yet validated above which new
/// ones are asked to prove their address first (a Retry: one more round
/// trip for them, none for the rest).
const RETRY_ABOVE: usize = 64;

/// The UDP socket buffers asked for: a burst of a few hundred full-size
/// datagrams in either direction, as quic-go and h2o ask for. Linux caps
/// them at net.core.rmem_max / wmem_max (said once at start-up).
const SOCKET_BUFFER: usize = 4 << 20;

/// Bytes quinn holds per connection, unsent or sent and not yet
/// acknowledged. Its default (10 MB) let 50 connections fetching 1 MB
/// files hold 600-770 MB (the HTTP/3 run of 2026-12-02); 1 MiB still
/// fills a path of 20 MB/s at 50 ms round trips, as the TCP path's
/// unsent-bytes bound does its share.
const SEND_WINDOW: u64 = 1 << 20;

/// Binds a UDP socket on each address, the TCP listeners' ones. An address
/// that cannot be bound is left out with a warning: HTTP/3 is an addition
/// HTTPS works without, so it never stops start-up.
pub fn bind(addrs: &[SocketAddr]) -> Vec<UdpSocket> {
    let mut sockets = Vec::new();
    let mut capped = None;
    for &addr in addrs {
        match bind_one(addr) {
            Ok((socket, got)) => {
                if got < SOCKET_BUFFER {
                    capped = Some(got);
                }
                sockets.push(socket);
            }
            Err(e) => eprintln!(
                "staticd: warning: no HTTP/3 on {addr}: cannot bind UDP: {}",
                describe(&e)
            ),
        }
    }
    if let Some(got) = capped {
        eprintln!(
            "staticd: warning: the kernel caps HTTP/3's UDP socket buffers at {} KiB \
             (asked for {} KiB): raise net.core.rmem_max and net.core.wmem_max for \
             fast uploads and downloads",
            got >> 10,
            SOCKET_BUFFER >> 10
        );
    }
    sockets
}

/// One UDP socket on `addr` (IPv6 only for an IPv6 address, as TCP's
/// listeners are, so that `0.0.0.0` and `[::]` both bind), with the socket
/// buffers asked for; and the smaller buffer the kernel granted.
fn bind_one(addr: SocketAddr) -> io::Result<(UdpSocket, usize)> {
    use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(family, SocketType::DGRAM, SocketFlags::CLOEXEC, None)?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rustix::net::bind(&fd, &addr)?;
    // Best effort: the kernel halves nothing and caps silently.
    let _ = sockopt::set_socket_recv_buffer_size(&fd, SOCKET_BUFFER);
    let _ = sockopt::set_socket_send_buffer_size(&fd, SOCKET_BUFFER);
    // Linux reports twice what it grants (its bookkeeping), so halve.
    let recv = sockopt::socket_recv_buffer_size(&fd).unwrap_or(0) / 2;
    let send = sockopt::socket_send_buffer_size(&fd).unwrap_or(0) / 2;
    Ok((UdpSocket::from(fd), recv.min(send)))
}

/// What HTTP/3 is served with: what every connection of the process
/// shares (the transport frame's, [`workers::Shared`](crate::serve::workers::Shared)), and the TLS
/// configuration its handshakes start from.
pub(crate) struct Shared {
    pub(crate) cfg: Arc<Config>,
    pub(crate) site: Arc<Site>,
    pub(crate) stop: crate::serve::stop::Stop,
    pub(crate) conns: Arc<Connections>,
    pub(crate) tls: Arc<crate::tls::Acceptor>,
}

/// Serves HTTP/3 on `sockets` in a thread of its own until the stop and
/// its grace are over; the handle to join.
pub(crate) fn start(
    shared: Shared,
    sockets: Vec<UdpSocket>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = Arc::new(server_config(&shared)?);
    let shared = Arc::new(shared);
    std::thread::Builder::new()
        .name("staticd-h3".to_string())
        .spawn(move || {
            runtime.block_on(async move {
                // Its sockets count as one listener group: the stop waits
                // for them to stop taking new connections.
                shared.stop.listening();
                let mut tasks = Vec::new();
                for socket in sockets {
                    let config = Arc::clone(&config);
                    match endpoint::Driver::new(Arc::clone(&shared), socket, config) {
                        Ok(driver) => tasks.push(tokio::spawn(driver.run())),
                        Err(e) => log::diagnostic(&format!(
                            "staticd: HTTP/3: cannot start an endpoint: {}\n",
                            describe(&e)
                        )),
                    }
                }
                let closed = tokio::spawn(async move {
                    shared.stop.listeners_must_close().await;
                    shared.stop.listeners_closed();
                });
                for task in tasks {
                    let _ = task.await;
                }
                let _ = closed.await;
            });
        })
}

/// quinn-proto's server configuration: the TLS of `quic_config`, and the
/// transport limits from the flags.
fn server_config(shared: &Shared) -> io::Result<quinn_proto::ServerConfig> {
    let cfg = &shared.cfg;
    let crypto = shared.tls.quic_config().map_err(io::Error::other)?;
    let crypto = QuicServerConfig::try_from(crypto)
        .map_err(|e| io::Error::other(format!("QUIC's TLS configuration: {e}")))?;
    let mut server = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn_proto::TransportConfig::default();
    let streams = cfg
        .http2
        .map_or(crate::config::H2_MAX_STREAMS, |h| h.max_streams);
    transport.max_concurrent_bidi_streams(streams.into());
    // The client's control stream and QPACK's two, with room for the
    // streams of unknown types a client may open (RFC 9114 §6.2.3).
    transport.max_concurrent_uni_streams(8u32.into());
    let idle = quinn_proto::IdleTimeout::try_from(cfg.keepalive_timeout)
        .unwrap_or_else(|_| quinn_proto::IdleTimeout::from(quinn_proto::VarInt::MAX));
    transport.max_idle_timeout(Some(idle));
    transport.send_window(SEND_WINDOW);
    server.transport_config(Arc::new(transport));
    Ok(server)
}
