//! HTTP/3 over QUIC (feature `http3`): on with HTTPS, on the HTTPS addresses' port numbers over
//! UDP, as Caddy does. quinn speaks QUIC with the rustls configuration TCP uses
//! ([`tls::Acceptor::quic_config`](crate::tls::Acceptor::quic_config): the same certificates,
//! reloads and ticket keys); h3 speaks HTTP/3 and QPACK over it. Each request stream becomes the
//! same [`parse::Request`](crate::http::parse::Request) an HTTP/1.1 or HTTP/2 request does and is
//! decided by the same [`pipeline::answer`](crate::pipeline::answer)
//! (`request`); nothing about HTTP is decided here.
//!
//! One endpoint per UDP socket, all on one multi-threaded runtime of
//! `--threads` threads: quinn's endpoint task routes datagrams to each
//! connection's task, which does that connection's crypto, so connections
//! spread over the threads without steering packets between sockets.
//!
//! Limits: `--max-connections` and `--max-connections-per-ip` count QUIC connections with TCP's (a
//! connection over either bound is refused at its first packet); `--h2-max-streams` bounds
//! concurrent request streams; `--keepalive-timeout` is the idle timeout; handshakes from
//! unvalidated addresses beyond `RETRY_ABOVE` at once get a Retry
//! (address validation, RFC 9000 §8.1), and quinn itself sends no more than three times what an
//! unvalidated address sent. A graceful stop sends GOAWAY, lets streams in flight finish within
//! `--shutdown-grace` (and the client close a connection once it has them), and closes.

mod cgi;
pub mod frames;
mod quic;
mod request;
mod send;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;

use super::limits::Connections;
use crate::client_name::ClientName;
use crate::complaint::{complain, Complaint};
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

/// HTTP/3's error codes staticd sends (RFC 9114 §8.1), and QPACK's (RFC
/// 9204 §6). Never 0x0: it is not one of them.
pub(super) mod code {
    pub const NO_ERROR: u64 = 0x100;
    pub const FRAME_ERROR: u64 = 0x106;
    pub const EXCESSIVE_LOAD: u64 = 0x107;
    pub const REQUEST_REJECTED: u64 = 0x10b;
    pub const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;

    /// A code as quinn takes it (every code above fits).
    pub fn varint(code: u64) -> quinn::VarInt {
        quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::MAX)
    }
}

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

/// What every HTTP/3 connection of the process shares.
struct Served {
    shared: Shared,
    /// Handshakes in progress from addresses not validated.
    unvalidated: AtomicUsize,
}

/// Serves HTTP/3 on `sockets` in a thread of its own until the stop and
/// its grace are over; the handle to join.
pub(crate) fn start(
    shared: Shared,
    sockets: Vec<UdpSocket>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let threads = shared.cfg.threads.max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("staticd-h3")
        .enable_all()
        .build()?;
    let config = server_config(&shared)?;
    std::thread::Builder::new()
        .name("staticd-h3".to_string())
        .spawn(move || {
            let served = Arc::new(Served {
                shared,
                unvalidated: AtomicUsize::new(0),
            });
            runtime.block_on(serve(served, config, sockets));
            // Tasks still running after the grace end with the runtime.
            runtime.shutdown_timeout(Duration::from_millis(100));
        })
}

/// quinn's server configuration: the TLS of `quic_config`, and the
/// transport limits from the flags.
fn server_config(shared: &Shared) -> io::Result<quinn::ServerConfig> {
    let cfg = &shared.cfg;
    let crypto = shared.tls.quic_config().map_err(io::Error::other)?;
    let crypto = QuicServerConfig::try_from(crypto)
        .map_err(|e| io::Error::other(format!("QUIC's TLS configuration: {e}")))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    let streams = cfg
        .http2
        .map_or(crate::config::H2_MAX_STREAMS, |h| h.max_streams);
    transport.max_concurrent_bidi_streams(streams.into());
    // The client's control stream and QPACK's two, with room for the
    // streams of unknown types a client may open (RFC 9114 §6.2.3).
    transport.max_concurrent_uni_streams(8u32.into());
    let idle = quinn::IdleTimeout::try_from(cfg.keepalive_timeout)
        .unwrap_or_else(|_| quinn::IdleTimeout::from(quinn::VarInt::MAX));
    transport.max_idle_timeout(Some(idle));
    transport.send_window(SEND_WINDOW);
    server.transport_config(Arc::new(transport));
    Ok(server)
}

/// Every endpoint until the stop; then the connections' grace.
async fn serve(served: Arc<Served>, config: quinn::ServerConfig, sockets: Vec<UdpSocket>) {
    let runtime = Arc::new(quinn::TokioRuntime);
    let mut endpoints = Vec::new();
    for socket in sockets {
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(config.clone()),
            socket,
            runtime.clone(),
        );
        match endpoint {
            Ok(endpoint) => endpoints.push(endpoint),
            Err(e) => log::diagnostic(&format!(
                "staticd: HTTP/3: cannot start an endpoint: {}\n",
                describe(&e)
            )),
        }
    }
    served.shared.stop.listening();
    let accepting: Vec<_> = endpoints
        .iter()
        .map(|e| tokio::spawn(accept_loop(e.clone(), Arc::clone(&served))))
        .collect();
    for task in accepting {
        let _ = task.await;
    }
    // Stopping: no new connections; those open have had GOAWAY and finish
    // their streams within the grace.
    for endpoint in &endpoints {
        endpoint.set_server_config(None);
    }
    served.shared.stop.listeners_closed();
    let deadline = served.shared.stop.began() + served.shared.cfg.shutdown_grace;
    for endpoint in &endpoints {
        let _ = tokio::time::timeout_at(deadline.into(), endpoint.wait_idle()).await;
        endpoint.close(code::varint(code::NO_ERROR), b"");
    }
    // The CONNECTION_CLOSE frames go out before the sockets close.
    for endpoint in &endpoints {
        let _ = tokio::time::timeout(Duration::from_millis(100), endpoint.wait_idle()).await;
    }
}

/// Accepts connections on `endpoint` until the stop.
async fn accept_loop(endpoint: quinn::Endpoint, served: Arc<Served>) {
    let stop = &served.shared.stop;
    let Ok(local) = endpoint.local_addr() else {
        return;
    };
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            () = stop.listeners_must_close() => return,
        };
        let Some(incoming) = incoming else {
            return;
        };
        admit(incoming, &served, local);
    }
}

/// A new connection's first packet: refused over the connection bounds,
/// asked for a Retry when handshakes pile up, else served in a task.
fn admit(incoming: quinn::Incoming, served: &Arc<Served>, local: SocketAddr) {
    let shared = &served.shared;
    let peer = incoming.remote_address();
    let ip = peer.ip().to_canonical();
    let Ok(claim) = shared.conns.claim(Some(ip), &shared.cfg) else {
        // Logged and counted as TCP's refusals are (`clients::refuse`).
        let max = shared.conns.max_per_client();
        complain(&ClientName::ip(ip), Complaint::OverPerClient { max });
        incoming.refuse();
        return;
    };
    let validated = incoming.remote_address_validated();
    if !validated && served.unvalidated.load(Ordering::Relaxed) >= RETRY_ABOVE {
        if incoming.may_retry() {
            let _ = incoming.retry();
        } else {
            incoming.refuse();
        }
        return;
    }
    let Ok(slot) = shared.conns.try_take(claim) else {
        incoming.refuse();
        return;
    };
    let local = SocketAddr::new(incoming.local_ip().unwrap_or(local.ip()), local.port());
    let connecting = match incoming.accept() {
        Ok(connecting) => connecting,
        Err(_) => return,
    };
    // Counted now, not in the task: a burst of first packets is admitted
    // before any task runs.
    let pending = Pending::new(served, validated);
    let served = Arc::clone(served);
    tokio::spawn(async move {
        let _slot = slot;
        let client = ClientName::ip(ip);
        request::connection(
            connecting,
            &served,
            pending,
            client,
            (Some(peer), Some(local)),
        )
        .await;
    });
}

/// Counts a handshake from an unvalidated address while it lasts.
struct Pending {
    served: Option<Arc<Served>>,
}

impl Pending {
    fn new(served: &Arc<Served>, validated: bool) -> Pending {
        if validated {
            return Pending { served: None };
        }
        served.unvalidated.fetch_add(1, Ordering::Relaxed);
        Pending {
            served: Some(Arc::clone(served)),
        }
    }

    /// The handshake is over.
    fn done(&mut self) {
        if let Some(served) = self.served.take() {
            served.unvalidated.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.done();
    }
}
