//! One UDP socket's QUIC endpoint and every connection on it, driven by
//! one task: datagrams in through quinn-udp (recvmmsg, GRO), handed to
//! quinn-proto's `Endpoint`, which routes them to each connection's
//! [`Connection`]; what the connections have to send
//! out again (sendmsg with GSO); their timers from one ordered set; their
//! scripts' streams through one [`Scripts`]. No task per connection or per
//! stream, no lock: the connections are this task's.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use quinn_proto::{ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, StreamId};
use quinn_udp::{RecvMeta, UdpSockRef, UdpSocketState};
use tokio::io::Interest;

use super::{Shared, RETRY_ABOVE};
use crate::client_name::ClientName;
use crate::complaint::{complain, Complaint};
use crate::h3session::conn::Connection;
use crate::log;
use crate::origin::{Kind, Origin, Protocol};
use crate::pipeline::Served;
use crate::serve::cgi::streams::{FromScript, Scripts, Streams};
use crate::serve::limits::Slot;

/// Datagrams read per recvmmsg(2).
const BATCH: usize = 32;

/// recvmmsg(2) calls per wake-up at most: a flood of datagrams must not
/// keep the loop from answering (and timing out) the connections it has.
const READS_PER_TURN: usize = 8;

/// The largest datagram staticd reads: a full GRO batch of them (quinn-udp
/// reads up to 64 KiB into one buffer when the kernel coalesces).
const READ_SIZE: usize = 64 << 10;

/// What QUIC's TLS reports for the log: always 1.3 and h3.
const QUIC_TLS: Option<log::Tls> = Some(log::Tls {
    version: log::Tls::VERSION_1_3,
    cipher_suite: None,
    resumed: None,
    proto: log::Alpn::H3,
});

/// The length of staticd's connection IDs.
const CID_LEN: usize = 8;

/// Connection IDs that name the worker whose endpoint issued them: their
/// first byte is `worker` modulo `workers` (its high bits random), which is
/// what the program `serve::h3::bind` attaches to the sockets computes, so
/// every datagram of a connection reaches its worker's socket. The other
/// bytes are random (RFC 9000 §5.1: nothing in them ties one ID of a
/// connection to another).
#[derive(Clone, Copy)]
pub(super) struct WorkerCids {
    worker: u8,
    workers: u8,
}

impl WorkerCids {
    pub(super) fn new(worker: usize, workers: usize) -> WorkerCids {
        WorkerCids {
            worker: worker as u8,
            workers: workers.max(1) as u8,
        }
    }

    /// The worker an ID names.
    #[cfg(test)]
    fn worker_of(&self, cid: &[u8]) -> u8 {
        cid[0] % self.workers
    }
}

impl quinn_proto::ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> quinn_proto::ConnectionId {
        let mut random = quinn_proto::RandomConnectionIdGenerator::new(CID_LEN);
        let cid = quinn_proto::ConnectionIdGenerator::generate_cid(&mut random);
        let mut bytes = [0u8; CID_LEN];
        bytes.copy_from_slice(&cid[..CID_LEN]);
        let workers = usize::from(self.workers);
        let high = usize::from(bytes[0]) % (256 / workers);
        bytes[0] = (high * workers + usize::from(self.worker)) as u8;
        quinn_proto::ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

/// One connection and what it holds.
struct Conn {
    session: Connection,
    /// Its place under `--max-connections`; freed with it.
    _slot: Slot,
    /// Counted among handshakes from unvalidated addresses until its
    /// handshake is over.
    unvalidated: bool,
    /// The deadline it is filed under in `Driver::timers`.
    deadline: Option<Instant>,
}

/// A script's stream of one of the connections.
type ScriptId = (ConnectionHandle, StreamId);

/// A connection, as the scripts' streams see it.
struct ConnStreams<'a> {
    session: &'a mut Connection,
}

impl Streams for ConnStreams<'_> {
    type Id = ScriptId;
    fn served(&mut self) -> Arc<Served> {
        Arc::clone(Connection::served(self.session))
    }
    fn take_body(&mut self, (_, id): ScriptId, into: &mut Vec<u8>) -> bool {
        self.session.take_body(id, into)
    }
    fn consumed(&mut self, (_, id): ScriptId, n: usize) {
        self.session.consumed(id, n)
    }
    fn cgi_head(&mut self, (_, id): ScriptId, sent: crate::pipeline::Sent) {
        self.session.cgi_head(id, sent)
    }
    fn cgi_data(&mut self, (_, id): ScriptId, bytes: &[u8]) {
        self.session.cgi_data(id, bytes)
    }
    fn cgi_end(&mut self, (_, id): ScriptId, complete: bool) {
        self.session.cgi_end(id, complete)
    }
    fn cgi_whole(&mut self, (_, id): ScriptId, sent: crate::pipeline::Sent) {
        self.session.cgi_whole(id, sent)
    }
}

/// One socket's endpoint and connections (see the module's comment).
pub(super) struct Driver {
    shared: Arc<Shared>,
    socket: tokio::net::UdpSocket,
    udp: UdpSocketState,
    local: SocketAddr,
    endpoint: Endpoint,
    /// Boxed: a `Conn` is 6.5 KB (quinn-proto's connection inline), and a
    /// map grown by doubling would hold up to as much again unused per
    /// connection.
    conns: HashMap<ConnectionHandle, Box<Conn>>,
    /// Every connection's next deadline, earliest first.
    timers: BTreeSet<(Instant, ConnectionHandle)>,
    /// Connections that did something since they last sent.
    touched: HashSet<ConnectionHandle>,
    /// Those being flushed: a list kept for its capacity.
    touched_now: Vec<ConnectionHandle>,
    scripts: Scripts<ScriptId>,
    /// What the workers share: the count of handshakes in progress from
    /// addresses not validated.
    quic: Arc<super::Quic>,
    config: Arc<quinn_proto::ServerConfig>,
    reads: Vec<Vec<u8>>,
    /// Where datagrams are copied for quinn-proto, which takes each as a
    /// `BytesMut`: pieces split off one allocation, reused once quinn-proto
    /// has let go of every piece (see `Driver::arena_piece`).
    arena: BytesMut,
    out: Vec<u8>,
}

impl Driver {
    pub(super) fn new(
        shared: Arc<Shared>,
        socket: UdpSocket,
        (config, cids, quic): (Arc<quinn_proto::ServerConfig>, WorkerCids, Arc<super::Quic>),
    ) -> io::Result<Driver> {
        socket.set_nonblocking(true)?;
        let udp = UdpSocketState::new(UdpSockRef::from(&socket))?;
        let local = socket.local_addr()?;
        let socket = tokio::net::UdpSocket::from_std(socket)?;
        let mut endpoint_config = EndpointConfig::default();
        endpoint_config.cid_generator(move || Box::new(cids));
        let endpoint = Endpoint::new(
            Arc::new(endpoint_config),
            Some(Arc::clone(&config)),
            !udp.may_fragment(),
            None,
        );
        Ok(Driver {
            shared,
            socket,
            udp,
            local,
            endpoint,
            conns: HashMap::new(),
            timers: BTreeSet::new(),
            touched: HashSet::new(),
            touched_now: Vec::new(),
            scripts: Scripts::new(),
            quic,
            config,
            reads: (0..BATCH).map(|_| vec![0; READ_SIZE]).collect(),
            arena: BytesMut::new(),
            out: Vec::new(),
        })
    }

    /// Serves until the stop and its grace are over.
    pub(super) async fn run(mut self) {
        let stop = self.shared.stop.clone();
        let mut closing = false;
        let mut told = false;
        let mut grace_end: Option<Instant> = None;
        loop {
            self.flush().await;
            if let Some(end) = grace_end {
                if self.conns.is_empty() || Instant::now() >= end {
                    break;
                }
            }
            let next = self.timers.first().map(|&(at, _)| at);
            let next = match (next, grace_end) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ready = self.socket.readable() => {
                    if ready.is_ok() {
                        self.receive();
                    }
                }
                message = self.scripts.next() => self.script_said(message),
                () = sleep => self.tick(Instant::now()),
                () = stop.listeners_must_close(), if !closing => {
                    closing = true;
                    // No new connection from now on; those open carry on.
                    self.endpoint.set_server_config(None);
                }
                () = stop.told(), if !told => {
                    told = true;
                    let by = stop.began() + self.shared.cfg.shutdown_grace;
                    grace_end = Some(by);
                    let now = Instant::now();
                    let handles: Vec<_> = self.conns.keys().copied().collect();
                    for handle in handles {
                        if let Some(conn) = self.conns.get_mut(&handle) {
                            conn.session.stop(now, by);
                        }
                        self.touched.insert(handle);
                    }
                }
            }
        }
        // What is left is closed; the CONNECTION_CLOSE frames go out.
        let now = Instant::now();
        for conn in self.conns.values_mut() {
            conn.session.close_now(now);
        }
        self.touched.extend(self.conns.keys().copied());
        self.flush().await;
    }

    /// Reads every datagram the socket has, and hands each on.
    fn receive(&mut self) {
        let mut metas = [RecvMeta::default(); BATCH];
        for _ in 0..READS_PER_TURN {
            let mut buffers = self.reads.iter_mut();
            let mut slices: [IoSliceMut; BATCH] =
                std::array::from_fn(|_| IoSliceMut::new(buffers.next().expect("BATCH buffers")));
            let udp = &self.udp;
            let got = self.socket.try_io(Interest::READABLE, || {
                udp.recv(UdpSockRef::from(&self.socket), &mut slices, &mut metas)
            });
            let Ok(n) = got else {
                return;
            };
            let now = Instant::now();
            for (i, meta) in metas.iter().take(n).enumerate() {
                // One buffer may hold several datagrams (GRO), `stride`
                // bytes apart.
                let stride = meta.stride.max(1);
                for at in (0..meta.len).step_by(stride) {
                    let end = (at + stride).min(meta.len);
                    let datagram = self.arena_piece(i, at..end);
                    self.datagram(now, meta, datagram);
                }
            }
        }
    }

    /// A copy of `reads[i][range]` as a `BytesMut` of its own, cut from the
    /// arena. Once quinn-proto has dropped every piece of the arena (it
    /// decrypts and parses a datagram, then keeps at most a stream's unread
    /// data), `reserve` takes the same allocation back: no allocation per
    /// datagram. A piece kept longer pins one arena of READ_SIZE, as a
    /// datagram of its own would.
    fn arena_piece(&mut self, i: usize, range: std::ops::Range<usize>) -> BytesMut {
        let bytes = &self.reads[i][range];
        if self.arena.capacity() < bytes.len() {
            self.arena.reserve(READ_SIZE);
        }
        self.arena.extend_from_slice(bytes);
        self.arena.split()
    }

    /// One datagram: to its connection, or a new one, or answered by the
    /// endpoint itself.
    fn datagram(&mut self, now: Instant, meta: &RecvMeta, data: BytesMut) {
        let ecn = meta
            .ecn
            .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
        let mut buf = std::mem::take(&mut self.out);
        buf.clear();
        let event = self
            .endpoint
            .handle(now, meta.addr, meta.dst_ip, ecn, data, &mut buf);
        match event {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.conns.get_mut(&handle) {
                    conn.session.datagram(event, now);
                    self.touched.insert(handle);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.admit(incoming, now, &mut buf),
            Some(DatagramEvent::Response(transmit)) => {
                let _ = self.send_now(&transmit, &buf);
            }
            None => {}
        }
        self.out = buf;
    }

    /// A new connection's first packet: refused over the connection bounds,
    /// asked for a Retry when handshakes from unvalidated addresses pile
    /// up, else accepted.
    fn admit(&mut self, incoming: quinn_proto::Incoming, now: Instant, buf: &mut Vec<u8>) {
        let shared = Arc::clone(&self.shared);
        let peer = incoming.remote_address();
        let ip = peer.ip().to_canonical();
        let Ok(claim) = shared.conns.claim(Some(ip), &shared.cfg) else {
            // Logged and counted as TCP's refusals are (`clients::refuse`).
            let max = shared.conns.max_per_client();
            complain(&ClientName::ip(ip), Complaint::OverPerClient { max });
            let transmit = self.endpoint.refuse(incoming, buf);
            let _ = self.send_now(&transmit, buf);
            return;
        };
        let validated = incoming.remote_address_validated();
        let unvalidated = &self.quic.unvalidated;
        if !validated && unvalidated.load(Ordering::Relaxed) >= RETRY_ABOVE {
            let transmit = match incoming.may_retry() {
                true => self.endpoint.retry(incoming, buf).ok(),
                false => Some(self.endpoint.refuse(incoming, buf)),
            };
            if let Some(transmit) = transmit {
                let _ = self.send_now(&transmit, buf);
            }
            return;
        }
        let Ok(slot) = shared.conns.try_take(claim) else {
            let transmit = self.endpoint.refuse(incoming, buf);
            let _ = self.send_now(&transmit, buf);
            return;
        };
        let local_ip = incoming.local_ip().unwrap_or(self.local.ip());
        let local = SocketAddr::new(local_ip, self.local.port());
        let config = Some(Arc::clone(&self.config));
        let (handle, quic) = match self.endpoint.accept(incoming, now, buf, config) {
            Ok(accepted) => accepted,
            Err(e) => {
                if let Some(transmit) = e.response {
                    let _ = self.send_now(&transmit, buf);
                }
                return;
            }
        };
        let origin = Origin {
            tls: QUIC_TLS,
            sockets: Some((Some(peer), Some(local))),
            ..Origin::new(Kind::Https, ClientName::ip(ip), Protocol::Fields)
        };
        let served = Arc::new(Served {
            cfg: Arc::clone(&shared.cfg),
            site: Arc::clone(&shared.site),
            origin,
        });
        if !validated {
            self.quic.unvalidated.fetch_add(1, Ordering::Relaxed);
        }
        let conn = Conn {
            session: Connection::new(quic, served, now),
            _slot: slot,
            unvalidated: !validated,
            deadline: None,
        };
        self.conns.insert(handle, Box::new(conn));
        self.touched.insert(handle);
    }

    /// Time passed: every connection whose deadline is due.
    fn tick(&mut self, now: Instant) {
        while let Some(&(at, handle)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(conn) = self.conns.get_mut(&handle) {
                conn.deadline = None;
                conn.session.tick(now);
                self.touched.insert(handle);
            }
        }
    }

    /// A script's task said something of its stream.
    fn script_said(&mut self, message: (ScriptId, FromScript)) {
        let ((handle, _), _) = &message;
        let handle = *handle;
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        let mut streams = ConnStreams {
            session: &mut conn.session,
        };
        self.scripts.apply(message, &mut streams);
        self.touched.insert(handle);
    }

    /// For every connection that did something: the endpoint told what it
    /// has to know, its scripts' streams acted on, its datagrams sent, its
    /// deadline filed; a drained one let go.
    async fn flush(&mut self) {
        let mut touched = std::mem::take(&mut self.touched_now);
        while !self.touched.is_empty() {
            touched.extend(self.touched.drain());
            for handle in touched.drain(..) {
                self.settle(handle);
                self.transmit(handle).await;
                self.file(handle);
            }
        }
        self.touched_now = touched;
    }

    /// A connection's events: the endpoint's and its scripts'.
    fn settle(&mut self, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        let now = Instant::now();
        while let Some(event) = conn.session.endpoint_event() {
            if let Some(event) = self.endpoint.handle_event(handle, event) {
                conn.session.datagram(event, now);
            }
        }
        while let Some(event) = conn.session.next_event() {
            let event = event.map_stream(|stream| (handle, stream));
            let mut streams = ConnStreams {
                session: &mut conn.session,
            };
            self.scripts.event(event, &mut streams);
        }
        if conn.unvalidated && !conn.session.quic().is_handshaking() {
            conn.unvalidated = false;
            self.quic.unvalidated.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Files a connection's next deadline once it has sent (sending moves
    /// QUIC's timers: pacing, loss detection), or lets it go once drained.
    fn file(&mut self, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        if let Some(at) = conn.deadline.take() {
            self.timers.remove(&(at, handle));
        }
        if conn.session.is_drained() {
            if conn.unvalidated {
                self.quic.unvalidated.fetch_sub(1, Ordering::Relaxed);
            }
            self.conns.remove(&handle);
            return;
        }
        conn.deadline = conn.session.deadline();
        if let Some(at) = conn.deadline {
            self.timers.insert((at, handle));
        }
    }

    /// Sends what a connection has to send.
    async fn transmit(&mut self, handle: ConnectionHandle) {
        let segments = self.udp.max_gso_segments();
        let mut buf = std::mem::take(&mut self.out);
        while let Some(conn) = self.conns.get_mut(&handle) {
            buf.clear();
            let Some(transmit) = conn.session.transmit(Instant::now(), segments, &mut buf) else {
                break;
            };
            self.send(&transmit, &buf).await;
        }
        self.out = buf;
    }

    /// Sends one transmit, waiting for room in the socket's buffer.
    async fn send(&self, transmit: &quinn_proto::Transmit, buf: &[u8]) {
        loop {
            match self.send_now(transmit, buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.socket.writable().await.is_err() {
                        return;
                    }
                }
                // Lost like any datagram: QUIC sends it again.
                _ => return,
            }
        }
    }

    /// Sends one transmit if the socket takes it now.
    fn send_now(&self, transmit: &quinn_proto::Transmit, buf: &[u8]) -> io::Result<()> {
        let udp_transmit = quinn_udp::Transmit {
            destination: transmit.destination,
            ecn: transmit
                .ecn
                .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
            contents: &buf[..transmit.size],
            segment_size: transmit.segment_size,
            src_ip: transmit.src_ip,
        };
        self.socket.try_io(Interest::WRITABLE, || {
            self.udp
                .try_send(UdpSockRef::from(&self.socket), &udp_transmit)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn_proto::ConnectionIdGenerator;

    #[test]
    fn connection_ids_name_their_worker_and_are_otherwise_random() {
        for workers in [1, 2, 3, 7, 64, 128] {
            for worker in 0..workers {
                let mut cids = WorkerCids::new(worker, workers);
                let ids: Vec<_> = (0..50).map(|_| cids.generate_cid()).collect();
                for id in &ids {
                    assert_eq!(id.len(), CID_LEN);
                    assert_eq!(usize::from(cids.worker_of(id)), worker, "{workers} workers");
                }
                let distinct: HashSet<_> = ids.iter().map(|id| id[..].to_vec()).collect();
                assert_eq!(distinct.len(), ids.len());
            }
        }
    }
}
