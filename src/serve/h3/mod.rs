//! HTTP/3 over QUIC (feature `http3`): on with HTTPS, on the HTTPS addresses' port numbers over
//! UDP, as Caddy does. QUIC is quinn-proto's state machine with the rustls configuration TCP uses
//! ([`tls::Acceptor::quic_config`](crate::tls::Acceptor::quic_config): the same certificates,
//! reloads and ticket keys); HTTP/3 and its QPACK are [`h3session`](crate::h3session)'s, sans-IO
//! like HTTP/2's session. Each request stream becomes the same
//! [`parse::Request`](crate::http::parse::Request) an HTTP/1.1 or HTTP/2 request does and is
//! decided by the same [`pipeline::answer`](crate::pipeline::answer); nothing about HTTP is
//! decided here: this moves datagrams (`endpoint`).
//!
//! Each worker thread has a UDP socket of its own on each address (SO_REUSEPORT), and one
//! task on its own loop drives that socket's endpoint and all its connections, as the worker
//! serves its TCP connections: no runtime, thread or lock of HTTP/3's own. A connection's
//! IDs name its worker, and a program attached to the sockets steers each datagram by them,
//! so a connection stays on its worker when the client's address changes.
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
use std::os::fd::AsFd;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};

use quinn_proto::crypto::rustls::QuicServerConfig;

use super::limits::Connections;
use crate::config::Config;
use crate::log;
use crate::site::Site;
use crate::sys::{self, describe};

/// Handshakes in progress from addresses not yet validated above which new
/// ones are asked to prove their address first (a Retry: one more round
/// trip for them, none for the rest).
const RETRY_ABOVE: usize = 64;

/// The UDP socket buffers asked for: a burst of a few hundred full-size
/// datagrams in either direction, as quic-go and h2o ask for. Linux caps
/// them at net.core.rmem_max / wmem_max (said once at start-up).
const SOCKET_BUFFER: usize = 4 << 20;

/// Bytes quinn-proto holds per connection, unsent or sent and not yet
/// acknowledged. Its default (10 MB) let 50 connections fetching 1 MB
/// files hold 600-770 MB (the HTTP/3 run of 2026-12-02); 1 MiB still
/// fills a path of 100 Mbit/s at 50 ms round trips (measured: 94 Mbit/s,
/// results/2026-12-05-h3-b), and caps one connection near 130 Mbit/s
/// there (a longer path or a faster one needs more connections), as the
/// TCP path's unsent-bytes bound does its share. It bounds what a sending
/// connection holds: 1 MiB, and a staged block of 64 KiB.
const SEND_WINDOW: u64 = 1 << 20;

/// Binds `workers` UDP sockets on each address (the TCP listeners'), one
/// per worker, sharing it through SO_REUSEPORT, with a program that steers
/// each datagram to the socket whose endpoint owns its connection
/// ([`sys::steer_quic_by_connection_id`]); the sockets by worker. An
/// address that cannot be bound is left out with a warning: HTTP/3 is an
/// addition HTTPS works without, so it never stops start-up.
pub fn bind(addrs: &[SocketAddr], workers: usize) -> Vec<Vec<UdpSocket>> {
    let workers = workers.clamp(1, MAX_WORKERS);
    let mut groups: Vec<Vec<UdpSocket>> = (0..workers).map(|_| Vec::new()).collect();
    let mut capped = None;
    for &addr in addrs {
        match bind_group(addr, workers) {
            Ok((sockets, got)) => {
                if got < SOCKET_BUFFER {
                    capped = Some(got);
                }
                for (group, socket) in groups.iter_mut().zip(sockets) {
                    group.push(socket);
                }
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
    match groups[0].is_empty() {
        true => Vec::new(),
        false => groups,
    }
}

/// Connection IDs name their worker in their first byte (see
/// [`endpoint::WorkerCids`]): at most this many workers serve HTTP/3 (the
/// rest of a larger `--threads` serve TCP only).
const MAX_WORKERS: usize = 128;

/// `workers` sockets sharing `addr`, steered by connection ID, and the
/// smallest buffer the kernel granted.
fn bind_group(addr: SocketAddr, workers: usize) -> io::Result<(Vec<UdpSocket>, usize)> {
    // A plain bind first: another process's sockets on the port (another
    // staticd's, sharing it through SO_REUSEPORT as these do) fail it,
    // rather than take a share of this one's datagrams.
    drop(bind_one(addr, false)?);
    let (first, mut granted) = bind_one(addr, true)?;
    let addr = first.local_addr()?;
    if workers > 1 {
        if let Err(e) = sys::steer_quic_by_connection_id(first.as_fd(), workers as u32) {
            eprintln!(
                "staticd: warning: HTTP/3 on {addr}: cannot steer datagrams by connection \
                 ID ({}): a client whose address changes loses its connection",
                describe(&e)
            );
        }
    }
    let mut sockets = vec![first];
    for _ in 1..workers {
        let (socket, got) = bind_one(addr, true)?;
        granted = granted.min(got);
        sockets.push(socket);
    }
    Ok((sockets, granted))
}

/// One UDP socket on `addr` (IPv6 only for an IPv6 address, as TCP's
/// listeners are, so that `0.0.0.0` and `[::]` both bind), with the socket
/// buffers asked for; and the smaller buffer the kernel granted.
fn bind_one(addr: SocketAddr, reuse_port: bool) -> io::Result<(UdpSocket, usize)> {
    use rustix::net::{sockopt, AddressFamily, SocketFlags, SocketType};
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(family, SocketType::DGRAM, SocketFlags::CLOEXEC, None)?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    if reuse_port {
        sockopt::set_socket_reuseport(&fd, true)?;
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

/// What the workers' HTTP/3 shares: their sockets until each takes its
/// own, one QUIC configuration (one TLS session cache: a ticket one worker
/// issued resumes, with 0-RTT, on another), and the count of handshakes
/// from addresses not yet validated (the Retry threshold is the process's).
pub struct Quic {
    sockets: Mutex<Vec<Vec<UdpSocket>>>,
    config: OnceLock<Option<Arc<quinn_proto::ServerConfig>>>,
    unvalidated: AtomicUsize,
}

impl Quic {
    /// `sockets` by worker, as [`bind`] returns them.
    pub fn new(sockets: Vec<Vec<UdpSocket>>) -> Quic {
        Quic {
            sockets: Mutex::new(sockets),
            config: OnceLock::new(),
            unvalidated: AtomicUsize::new(0),
        }
    }

    /// The addresses HTTP/3 is served on (worker 0's sockets': every
    /// worker has one on each).
    pub fn addrs(&self) -> Vec<SocketAddr> {
        let sockets = self.sockets.lock().unwrap_or_else(|p| p.into_inner());
        let first = sockets.first().into_iter().flatten();
        first.filter_map(|s| s.local_addr().ok()).collect()
    }

    /// Worker `worker`'s sockets (once), and how many workers have some.
    fn take(&self, worker: usize) -> (Vec<UdpSocket>, usize) {
        let mut sockets = self.sockets.lock().unwrap_or_else(|p| p.into_inner());
        let workers = sockets.len();
        let mine = sockets.get_mut(worker).map(std::mem::take);
        (mine.unwrap_or_default(), workers)
    }
}

/// No sockets: no HTTP/3 (inetd mode, or without HTTPS).
impl Default for Quic {
    fn default() -> Quic {
        Quic::new(Vec::new())
    }
}

/// Serves HTTP/3 on worker `worker`'s sockets (one per address) from this
/// worker's runtime until the stop and its grace are over: one task per
/// socket; the tasks, for the worker to wait for at its end.
pub(crate) fn serve_on_worker(
    shared: Shared,
    quic: &Arc<Quic>,
    worker: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (sockets, workers) = quic.take(worker);
    if sockets.is_empty() || worker >= MAX_WORKERS {
        return Vec::new();
    }
    let config = quic.config.get_or_init(|| match server_config(&shared) {
        Ok(config) => Some(Arc::new(config)),
        Err(e) => {
            log::diagnostic(&format!("staticd: no HTTP/3: {}\n", describe(&e)));
            None
        }
    });
    let Some(config) = config else {
        return Vec::new();
    };
    let shared = Arc::new(shared);
    let cids = endpoint::WorkerCids::new(worker, workers.clamp(1, MAX_WORKERS));
    let mut tasks = Vec::new();
    for socket in sockets {
        let parts = (Arc::clone(config), cids, Arc::clone(quic));
        match endpoint::Driver::new(Arc::clone(&shared), socket, parts) {
            Ok(driver) => tasks.push(tokio::spawn(driver.run())),
            Err(e) => log::diagnostic(&format!(
                "staticd: HTTP/3: cannot start an endpoint: {}\n",
                describe(&e)
            )),
        }
    }
    tasks
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
    transport.max_concurrent_bidi_streams(cfg.h3_max_streams.into());
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
