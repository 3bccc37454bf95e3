//! h3load: the harness's own HTTP/3 load client, for the h3 cells
//! (`Tool::H3load`), as resume.rs is its own TLS client for the resumed
//! handshakes.
//!
//! Why not oha, which measured the h3 cells before: its HTTP/3 client
//! (hyperium h3 over quinn's async layer) spent 1.25-1.5x the server's CPU
//! per request, with a quinn endpoint and a UDP socket per connection,
//! 1472-byte datagrams and the kernel's default socket buffers; on a
//! 2-core machine shared by client and server, the cells measured the
//! client as much as the server. oha also waits, after its last request,
//! for the server to close each connection: quic-go (Caddy) keeps an idle
//! connection open until its 30 s idle timeout, so oha never finished a
//! run against Caddy within the harness's limits (benches/README.md). oha
//! stays as a cross-check in one cell (`Tool::Oha`).
//!
//! What it is: quinn-proto (QUIC without I/O, the crate staticd's own
//! HTTP/3 is built on) driven by this file, with quinn-udp's system calls
//! (recvmmsg with GRO in, sendmsg with GSO out), not quinn's async layer.
//! `Run::threads` threads, each owning one UDP socket (4 MiB buffers) and
//! one `quinn_proto::Endpoint` holding its share of `Run::connections`;
//! each connection keeps `Run::streams` requests in flight. A request is
//! encoded once: a HEADERS frame whose field section uses QPACK's static
//! table (`:method GET`, `:scheme https`, `:authority` and `:path` as
//! literals with static names: no dynamic table, no Huffman), written
//! with staticd's own `h3session::qpack` and `h3session::frames`. Each
//! connection opens its control stream with an empty SETTINGS (QPACK's
//! dynamic table stays at capacity 0, so it opens no QPACK streams, as
//! RFC 9204 §4.2 allows); the server's control stream is read for GOAWAY,
//! its QPACK streams and any others are read and dropped. Responses are
//! read with `frames::RequestReader` (HEADERS, then DATA) and the status
//! decoded with `qpack::decode`; a response counts when its stream ends
//! with status 2xx and exactly the file's length of body (or any 3xx), a
//! 4xx or 5xx is non-2xx/3xx, and a reset stream, a short or malformed
//! response or a request lost with its connection is a failed request.
//! Latency is from the request's stream opened to its response's end, p50
//! and p99 of every counted response.
//!
//! Time: the run starts when the first connection is made (the
//! handshakes are in it, as oha's `summary.total` has them) and ends at
//! `Run::duration`: then every connection is closed (H3_NO_ERROR) and the
//! requests in flight are abandoned, not counted, as wrk's at SIGINT and
//! oha's "aborted due to deadline". quinn-proto keeps each closed
//! connection a few round trips to answer stray packets with its close;
//! the threads wait for that at most `DRAIN`. Every wait in the loop has
//! a deadline: nothing here can hang past `duration + DRAIN`. It talks to
//! the address in the URL only (the harness's servers are on loopback).

use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint,
    EndpointConfig, Event, MtuDiscoveryConfig, ReadError, StreamEvent, StreamId, TransportConfig,
    VarInt,
};
use quinn_udp::{RecvMeta, UdpSockRef, UdpSocketState};
use staticd::h3session::frames::{
    self, code, frame, Control, ControlReader, Event as Frame, FrameHeader, RequestReader,
};
use staticd::h3session::qpack;

use crate::load::{Datagrams, Outcome, Run};

/// UDP socket buffers asked for, each way (as staticd's own sockets ask):
/// a burst of hundreds of full-size datagrams, or dozens of 64 KB GRO
/// batches, before the kernel drops any. Linux caps them at
/// net.core.rmem_max / wmem_max (4 MiB on the development machine).
const SOCKET_BUFFER: usize = 4 << 20;

/// Datagrams (or GRO batches) read per recvmmsg(2), and the size of each
/// buffer: a GRO batch, or one datagram, is at most 64 KiB.
const BATCH: usize = 32;
const READ_SIZE: usize = 64 << 10;

/// recvmmsg(2) calls in a row before the connections are served: the
/// responses read must be answered (ACKs, new requests) while the socket
/// still has more.
const READS_PER_TURN: usize = 4;

/// The largest UDP payload QUIC allows (RFC 9000 §18.2), which this
/// client advertises as its `max_udp_payload_size` transport parameter
/// (quinn-proto's default advertises 1472) and lets its own path MTU
/// discovery search up to: a server allowing large datagrams on loopback
/// (MTU 65536) may then send up to about 64 KB in one, and GSO batches of
/// them. How large the server's datagrams were shows in
/// `Datagrams::received_bytes` over `received`.
const MAX_UDP_PAYLOAD: u16 = 65_527;

/// Flow control of what the client receives. Per stream: 2 MiB, more than
/// a whole 1 MB response with its frame headers, so a response never
/// waits for a MAX_STREAM_DATA (quinn-proto's default is 1.25 MB, just
/// enough). Per connection: unlimited (quinn-proto's default too): the
/// client reads everything as it comes, so nothing piles up, and 10
/// streams of 1 MB must not wait on a connection-wide window either.
const STREAM_WINDOW: u32 = 2 << 20;

/// QUIC's idle timeout: a server that stops answering ends the connection
/// (and its requests, counted as failed) this long after its last packet.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the threads wait, after closing their connections at the end
/// of the run, for quinn-proto to drain them (3 probe timeouts: tens of
/// milliseconds on loopback).
pub const DRAIN: Duration = Duration::from_secs(1);

/// The largest response head read (a HEADERS frame's payload).
const SECTION_MAX: u64 = 64 << 10;

/// A connection lost before its handshake completed is made again after
/// this long (one lost later at once), so that a server refusing
/// connections does not turn the loop into a busy one.
const RECONNECT_AFTER: Duration = Duration::from_millis(100);

/// The most bytes one GSO send may carry: Linux refuses (EINVAL) a UDP
/// GSO batch over 64 KiB with its headers, and quinn-udp then turns GSO
/// off for the socket. quinn-proto fills `max_datagrams` whole datagrams
/// of the path's MTU, so with large datagrams the batch is cut to fit.
const GSO_MAX_BYTES: usize = 65_000;

/// How long a send waits for room in the socket's buffer, a few times,
/// before the datagram is left to QUIC's loss recovery.
const SEND_WAIT: Duration = Duration::from_millis(20);

/// The longest the loop sleeps, so that a stop (SIGINT) is seen.
const TICK: Duration = Duration::from_millis(100);

/// The probe's limit for one GET, handshake included.
const PROBE_LIMIT: Duration = Duration::from_secs(10);

/// H3_NO_ERROR: how the client closes its connections.
const NO_ERROR: u64 = code::NO_ERROR;

/// What a run is pointed at: the URL's address, its authority and path.
struct Target {
    addr: SocketAddr,
    authority: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let (addr, authority, path) = crate::fetch::https_parts(url)?;
        Ok(Target {
            addr,
            authority: authority.to_string(),
            path: if path.is_empty() { "/" } else { path }.to_string(),
        })
    }
}

/// A GET of `path` as a HEADERS frame: a QPACK field section that needs
/// no dynamic table (Required Insert Count 0), `:method GET` and `:scheme
/// https` by their static indexes, `:authority` and `:path` as literals
/// with static names.
fn request_frame(authority: &str, path: &str) -> Vec<u8> {
    let mut section = Vec::new();
    qpack::Encoder::start(&mut section);
    qpack::Encoder::field(&mut section, b":method", b"GET");
    qpack::Encoder::field(&mut section, b":scheme", b"https");
    qpack::Encoder::field(&mut section, b":authority", authority.as_bytes());
    qpack::Encoder::field(&mut section, b":path", path.as_bytes());
    let mut out = FrameHeader::new(frame::HEADERS, section.len() as u64)
        .bytes()
        .to_vec();
    out.extend_from_slice(&section);
    out
}

/// The client's control stream: its type, then an empty SETTINGS (every
/// setting at its default: QPACK without a dynamic table, no limit on
/// the size of a response head).
fn control_preface() -> Vec<u8> {
    let mut out = vec![frames::stream::CONTROL as u8];
    out.extend_from_slice(FrameHeader::new(frame::SETTINGS, 0).bytes());
    out
}

/// quinn-proto's client configuration: the harness's TLS client with ALPN
/// h3 (tls::TlsFiles::h3_client), large datagrams accepted, generous
/// receive windows (see the constants).
fn quic_config(tls: &Arc<rustls::ClientConfig>) -> Result<ClientConfig, String> {
    let crypto = QuicClientConfig::try_from(Arc::clone(tls))
        .map_err(|e| format!("QUIC's TLS configuration: {e}"))?;
    let mut config = ClientConfig::new(Arc::new(crypto));
    let mut transport = TransportConfig::default();
    transport
        .stream_receive_window(STREAM_WINDOW.into())
        .receive_window(VarInt::MAX)
        // The server opens no request streams; its control stream, QPACK's
        // two and a few of types unknown (RFC 9114 §6.2.3) are welcome.
        .max_concurrent_bidi_streams(0u32.into())
        .max_concurrent_uni_streams(16u32.into())
        .max_idle_timeout(Some(
            IDLE_TIMEOUT
                .try_into()
                .expect("10 s is a valid idle timeout"),
        ))
        .keep_alive_interval(None);
    let mut mtu = MtuDiscoveryConfig::default();
    mtu.upper_bound(MAX_UDP_PAYLOAD);
    transport.mtu_discovery_config(Some(mtu));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// What every thread of a run shares.
struct Plan {
    target: Target,
    quic: ClientConfig,
    request: Vec<u8>,
    control: Vec<u8>,
    /// The file's length: a 2xx response's body must be exactly this.
    size: u64,
    streams: u32,
    start: Instant,
    /// When new requests stop and the connections are closed.
    deadline: Instant,
    /// The probe: stop after this many responses, and keep their bodies.
    limit: Option<u64>,
}

impl Plan {
    /// GETs of `url` (a file `size` long) with `tls`, `streams` at a time
    /// on each connection, from now until `for_` has passed (or `limit`
    /// responses came).
    fn new(
        url: &str,
        size: u64,
        tls: &Arc<rustls::ClientConfig>,
        streams: u32,
        (for_, limit): (Duration, Option<u64>),
    ) -> Result<Plan, String> {
        let target = Target::parse(url)?;
        let start = Instant::now();
        Ok(Plan {
            request: request_frame(&target.authority, &target.path),
            control: control_preface(),
            quic: quic_config(tls)?,
            target,
            size,
            streams,
            start,
            deadline: start + for_,
            limit,
        })
    }
}

/// Runs the load for `run.duration` against `run.url` (an https URL of a
/// file `size` bytes long, whose server speaks HTTP/3 on the same port
/// over UDP), with `tls` (ALPN h3). Fails only if a socket could not be
/// set up or the URL is not one; everything that goes wrong afterwards is
/// counted in the outcome.
pub fn run(run: &Run, size: u64, tls: &Arc<rustls::ClientConfig>) -> Result<Outcome, String> {
    let connections = run.connections.max(1);
    let threads = run.threads.clamp(1, connections);
    let streams = run.streams.max(1);
    let plan = Plan::new(run.url, size, tls, streams, (run.duration, None))?;
    let tallies = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                // Connections spread as evenly as they go.
                let share = connections / threads + u32::from(i < connections % threads);
                let plan = &plan;
                scope.spawn(move || Worker::new(plan, share).map(Worker::run))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect::<Result<Vec<Tally>, String>>()
    })?;
    let mut all = Tally::default();
    for t in tallies {
        all.add(t);
    }
    Ok(all.outcome(plan.start))
}

/// One GET of `url` on a connection of its own: Ok if the answer was a 200
/// whose body is `expected` byte for byte (a file `size` long, when
/// `expected` is None).
pub fn probe(
    url: &str,
    size: u64,
    expected: Option<&[u8]>,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(), String> {
    let plan = Plan::new(url, size, tls, 1, (PROBE_LIMIT, Some(1)))?;
    let t = Worker::new(&plan, 1)?.run();
    let what = |t: &Tally| {
        t.first_error
            .clone()
            .unwrap_or_else(|| "no response".to_string())
    };
    match (t.status, &t.body) {
        (Some(200), Some(body)) => match expected {
            Some(want) if body[..] != want[..] => Err(format!(
                "h3load: {} body bytes, not the file's {}{}",
                body.len(),
                want.len(),
                if body.len() == want.len() {
                    " (same length, other bytes)"
                } else {
                    ""
                }
            )),
            _ if body.len() as u64 != size => {
                Err(format!("h3load: {} body bytes, want {size}", body.len()))
            }
            _ => Ok(()),
        },
        (Some(status), _) => Err(format!("h3load: status {status} ({})", what(&t))),
        (None, _) => Err(format!(
            "h3load: {} (in {:.1} s)",
            what(&t),
            plan.start.elapsed().as_secs_f64()
        )),
    }
}

/// What one thread counted.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    /// Responses counted (whole, any status), and those not 2xx/3xx.
    responses: u64,
    non_2xx: u64,
    /// Reset, short, malformed, or lost with their connection.
    failed: u64,
    /// Connections lost before their handshake completed, lost after it,
    /// and lost to QUIC's idle timeout.
    connect: u64,
    lost: u64,
    timeout: u64,
    body_bytes: u64,
    datagrams: Datagrams,
    cpu_seconds: f64,
    /// When the thread stopped counting (the deadline, or a stop).
    ended: Option<Instant>,
    first_error: Option<String>,
    /// The probe's response.
    status: Option<u16>,
    body: Option<Vec<u8>>,
}

impl Tally {
    fn add(&mut self, t: Tally) {
        self.latencies_us.extend(t.latencies_us);
        self.responses += t.responses;
        self.non_2xx += t.non_2xx;
        self.failed += t.failed;
        self.connect += t.connect;
        self.lost += t.lost;
        self.timeout += t.timeout;
        self.body_bytes += t.body_bytes;
        self.datagrams.add(&t.datagrams);
        self.cpu_seconds += t.cpu_seconds;
        self.ended = self.ended.max(t.ended);
        if self.first_error.is_none() {
            self.first_error = t.first_error;
        }
    }

    fn error(&mut self, what: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }

    fn outcome(mut self, start: Instant) -> Outcome {
        let seconds = self
            .ended
            .map_or(0.0, |end| (end - start).as_secs_f64())
            .max(1e-6);
        self.latencies_us.sort_unstable();
        let pick = |q: f64| {
            let n = self.latencies_us.len();
            (n > 0).then(|| f64::from(self.latencies_us[((n as f64 * q) as usize).min(n - 1)]))
        };
        let mut o = Outcome {
            requests: self.responses,
            seconds,
            requests_per_second: self.responses as f64 / seconds,
            bytes_per_second: Some(self.body_bytes as f64 / seconds),
            p50_us: pick(0.50),
            p99_us: pick(0.99),
            non_2xx: self.non_2xx,
            failed: self.failed,
            negotiated: Some("h3".into()),
            client_cpu_seconds: Some(self.cpu_seconds),
            datagrams: Some(self.datagrams),
            ..Outcome::default()
        };
        o.socket_errors.connect = self.connect;
        o.socket_errors.read = self.lost;
        o.socket_errors.timeout = self.timeout;
        o
    }
}

/// One request in flight.
struct Request {
    started: Instant,
    reader: RequestReader,
    /// Bytes of the request frame written so far (all of it, but when the
    /// stream had no room yet).
    written: usize,
    status: Option<u16>,
    body: u64,
    /// The probe keeps the body.
    kept: Option<Vec<u8>>,
}

/// A stream the server opened: its type not yet whole, its control
/// stream, or one whose bytes are dropped (QPACK's, unknown types).
enum Uni {
    Type(Vec<u8>),
    Control(ControlReader),
    Ignored,
}

/// One QUIC connection and its requests.
struct Conn {
    handle: ConnectionHandle,
    quic: Connection,
    requests: HashMap<StreamId, Request>,
    uni: HashMap<StreamId, Uni>,
    connected: bool,
    /// The server sent GOAWAY: no new requests here; closed once the ones
    /// in flight are done, and made again.
    going_away: bool,
    /// Lost (or closed by the client): it only drains from now on.
    ended: bool,
}

/// One thread: its socket, endpoint and connections.
struct Worker<'a> {
    plan: &'a Plan,
    socket: UdpSocket,
    udp: UdpSocketState,
    endpoint: Endpoint,
    conns: Vec<Conn>,
    by_handle: HashMap<ConnectionHandle, usize>,
    /// Connections with something new to handle since they were served.
    touched: Vec<bool>,
    /// When connections lost are to be made again.
    reconnect: Vec<Instant>,
    reads: Vec<Vec<u8>>,
    out: Vec<u8>,
    /// Buffers for response heads, reused.
    sections: Vec<Vec<u8>>,
    tally: Tally,
    /// Requests opened (the probe stops at its limit).
    opened: u64,
    closing: bool,
}

impl<'a> Worker<'a> {
    fn new(plan: &'a Plan, connections: u32) -> Result<Worker<'a>, String> {
        let bind: SocketAddr = match plan.target.addr {
            SocketAddr::V4(_) => "127.0.0.1:0",
            SocketAddr::V6(_) => "[::1]:0",
        }
        .parse()
        .expect("a socket address");
        let socket = UdpSocket::bind(bind).map_err(|e| format!("h3load: UDP socket: {e}"))?;
        socket
            .set_nonblocking(true)
            .map_err(|e| format!("h3load: UDP socket: {e}"))?;
        let udp = UdpSocketState::new(UdpSockRef::from(&socket))
            .map_err(|e| format!("h3load: UDP socket: {e}"))?;
        // Best effort: the kernel caps them silently.
        let _ = udp.set_recv_buffer_size(UdpSockRef::from(&socket), SOCKET_BUFFER);
        let _ = udp.set_send_buffer_size(UdpSockRef::from(&socket), SOCKET_BUFFER);
        let mut tally = Tally::default();
        tally.datagrams.rcvbuf =
            udp.recv_buffer_size(UdpSockRef::from(&socket)).unwrap_or(0) as u64;
        tally.datagrams.sndbuf =
            udp.send_buffer_size(UdpSockRef::from(&socket)).unwrap_or(0) as u64;
        let mut endpoint_config = EndpointConfig::default();
        endpoint_config
            .max_udp_payload_size(MAX_UDP_PAYLOAD)
            .map_err(|e| format!("h3load: {e}"))?;
        let endpoint = Endpoint::new(Arc::new(endpoint_config), None, !udp.may_fragment(), None);
        let mut worker = Worker {
            plan,
            socket,
            udp,
            endpoint,
            conns: Vec::new(),
            by_handle: HashMap::new(),
            touched: Vec::new(),
            reconnect: vec![plan.start; connections as usize],
            reads: (0..BATCH).map(|_| vec![0; READ_SIZE]).collect(),
            out: Vec::new(),
            sections: Vec::new(),
            tally,
            opened: 0,
            closing: false,
        };
        if plan.limit.is_some() {
            worker.tally.body = Some(Vec::new());
        }
        Ok(worker)
    }

    fn run(mut self) -> Tally {
        let cpu_before = thread_cpu_seconds();
        let hard_end = self.plan.deadline + DRAIN;
        loop {
            let now = Instant::now();
            if !self.closing
                && (now >= self.plan.deadline || crate::stop::stopping() || self.done())
            {
                self.close_all(now);
            }
            if self.closing && (now >= hard_end || self.conns.iter().all(|c| c.quic.is_drained())) {
                break;
            }
            if !self.closing {
                self.connect_due(now);
            }
            for (conn, touched) in self.conns.iter_mut().zip(&mut self.touched) {
                if conn.quic.poll_timeout().is_some_and(|at| at <= now) {
                    conn.quic.handle_timeout(now);
                    *touched = true;
                }
            }
            for i in 0..self.conns.len() {
                if std::mem::take(&mut self.touched[i]) {
                    self.serve(i, now);
                }
            }
            let wake = self.next_wake(hard_end);
            self.receive(wake.saturating_duration_since(Instant::now()).min(TICK));
        }
        self.tally.cpu_seconds = thread_cpu_seconds() - cpu_before;
        self.tally
    }

    /// The probe has its answer (or its request failed).
    fn done(&self) -> bool {
        self.plan.limit.is_some_and(|limit| {
            self.tally.responses + self.tally.failed >= limit
                || (self.tally.connect > 0 && self.opened == 0)
        })
    }

    /// Makes the connections whose time has come (all of them at the
    /// start; lost ones again).
    fn connect_due(&mut self, now: Instant) {
        while let Some(pos) = self.reconnect.iter().position(|&at| at <= now) {
            self.reconnect.swap_remove(pos);
            let made = self.endpoint.connect(
                now,
                self.plan.quic.clone(),
                self.plan.target.addr,
                crate::tls::SERVER_NAME,
            );
            let (handle, quic) = match made {
                Ok(c) => c,
                Err(e) => {
                    self.tally.connect += 1;
                    self.tally.error(|| format!("connect: {e}"));
                    self.reconnect.push(now + RECONNECT_AFTER);
                    continue;
                }
            };
            let conn = Conn {
                handle,
                quic,
                requests: HashMap::new(),
                uni: HashMap::new(),
                connected: false,
                going_away: false,
                ended: false,
            };
            // A drained connection's place is taken; else a new one.
            let i = match self.conns.iter().position(|c| c.quic.is_drained()) {
                Some(i) => {
                    // Its handle may be the new connection's already.
                    let old = self.conns[i].handle;
                    if self.by_handle.get(&old) == Some(&i) {
                        self.by_handle.remove(&old);
                    }
                    self.conns[i] = conn;
                    i
                }
                None => {
                    self.conns.push(conn);
                    self.touched.push(false);
                    self.conns.len() - 1
                }
            };
            self.by_handle.insert(handle, i);
            self.touched[i] = true;
        }
    }

    /// The end of the run: every connection closed, the requests in flight
    /// abandoned (not counted, not errors).
    fn close_all(&mut self, now: Instant) {
        self.closing = true;
        self.tally.ended = Some(now.min(self.plan.deadline));
        for (conn, touched) in self.conns.iter_mut().zip(&mut self.touched) {
            if !conn.ended {
                conn.ended = true;
                conn.quic.close(
                    now,
                    VarInt::from_u64(NO_ERROR).expect("a varint"),
                    Bytes::new(),
                );
                *touched = true;
            }
            conn.requests.clear();
        }
    }

    /// When the loop must run next: the earliest timer of a connection, a
    /// connection to make again, the deadline, the end of the drain.
    fn next_wake(&mut self, hard_end: Instant) -> Instant {
        let mut wake = if self.closing {
            hard_end
        } else {
            self.plan.deadline
        };
        for conn in &mut self.conns {
            if let Some(at) = conn.quic.poll_timeout() {
                wake = wake.min(at);
            }
        }
        if !self.closing {
            for &at in &self.reconnect {
                wake = wake.min(at);
            }
        }
        wake
    }

    /// Handles what connection `i` has: its events for the endpoint, its
    /// streams and state; then opens requests and sends.
    fn serve(&mut self, i: usize, now: Instant) {
        let conn = &mut self.conns[i];
        while let Some(event) = conn.quic.poll_endpoint_events() {
            if let Some(event) = self.endpoint.handle_event(conn.handle, event) {
                conn.quic.handle_event(event);
            }
        }
        while let Some(event) = conn.quic.poll() {
            match event {
                Event::Connected => {
                    conn.connected = true;
                    if let Some(id) = conn.quic.streams().open(Dir::Uni) {
                        // A few bytes into a new stream: QUIC takes them.
                        let _ = conn.quic.send_stream(id).write(&self.plan.control);
                    }
                }
                Event::ConnectionLost { reason } => {
                    let again = lost(conn, reason, &mut self.tally, self.closing);
                    if again {
                        let after = if conn.connected {
                            Duration::ZERO
                        } else {
                            RECONNECT_AFTER
                        };
                        self.reconnect.push(now + after);
                    }
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    while let Some(id) = conn.quic.streams().accept(Dir::Uni) {
                        conn.uni.insert(id, Uni::Type(Vec::new()));
                        read_uni(conn, id, &mut self.tally);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) if !conn.ended => {
                    if id.dir() == Dir::Uni {
                        read_uni(conn, id, &mut self.tally);
                    } else {
                        read_response(
                            conn,
                            id,
                            now,
                            self.plan,
                            &mut self.tally,
                            &mut self.sections,
                        );
                    }
                }
                Event::Stream(StreamEvent::Writable { id }) => {
                    if let Some(r) = conn.requests.get_mut(&id) {
                        write_request(&mut conn.quic, id, r, &self.plan.request);
                    }
                }
                _ => {}
            }
        }
        if !self.closing && conn.connected && !conn.ended {
            if conn.going_away {
                if conn.requests.is_empty() {
                    // Made again at once: a GOAWAY is no error.
                    conn.ended = true;
                    conn.quic.close(
                        now,
                        VarInt::from_u64(NO_ERROR).expect("a varint"),
                        Bytes::new(),
                    );
                    self.reconnect.push(now);
                }
            } else {
                while conn.requests.len() < self.plan.streams as usize
                    && self.plan.limit.is_none_or(|limit| self.opened < limit)
                {
                    let Some(id) = conn.quic.streams().open(Dir::Bi) else {
                        // At the server's stream limit: StreamEvent::Available.
                        break;
                    };
                    let reader =
                        RequestReader::new(SECTION_MAX, self.sections.pop().unwrap_or_default());
                    let mut r = Request {
                        started: now,
                        reader,
                        written: 0,
                        status: None,
                        body: 0,
                        kept: self.plan.limit.map(|_| Vec::new()),
                    };
                    write_request(&mut conn.quic, id, &mut r, &self.plan.request);
                    conn.requests.insert(id, r);
                    self.opened += 1;
                }
            }
        }
        self.transmit(i, now);
    }

    /// Sends what connection `i` has to send, in GSO batches.
    fn transmit(&mut self, i: usize, now: Instant) {
        let conn = &mut self.conns[i];
        let mtu = usize::from(conn.quic.current_mtu()).max(1);
        let segments = self.udp.max_gso_segments().min(GSO_MAX_BYTES / mtu).max(1);
        loop {
            self.out.clear();
            let Some(t) = conn.quic.poll_transmit(now, segments, &mut self.out) else {
                break;
            };
            send(
                &self.socket,
                &self.udp,
                &t,
                &self.out,
                &mut self.tally.datagrams,
            );
        }
    }

    /// Waits up to `wait` for datagrams, then reads what the socket has
    /// (a few recvmmsg calls at most) and hands each to the endpoint.
    fn receive(&mut self, wait: Duration) {
        if !wait_for(&self.socket, libc::POLLIN, wait) {
            return;
        }
        let mut metas = [RecvMeta::default(); BATCH];
        for _ in 0..READS_PER_TURN {
            let got = {
                let mut buffers = self.reads.iter_mut();
                let mut slices: [IoSliceMut; BATCH] = std::array::from_fn(|_| {
                    IoSliceMut::new(buffers.next().expect("BATCH buffers"))
                });
                self.udp
                    .recv(UdpSockRef::from(&self.socket), &mut slices, &mut metas)
            };
            let Ok(n) = got else {
                // WouldBlock: nothing more now.
                return;
            };
            self.tally.datagrams.recv_calls += 1;
            let now = Instant::now();
            for (k, meta) in metas.iter().take(n).enumerate() {
                // One buffer may hold several datagrams (GRO), `stride`
                // bytes apart.
                let mut data = BytesMut::from(&self.reads[k][..meta.len]);
                let stride = meta.stride.max(1);
                while !data.is_empty() {
                    let datagram = data.split_to(stride.min(data.len()));
                    let d = &mut self.tally.datagrams;
                    d.received += 1;
                    d.received_bytes += datagram.len() as u64;
                    d.largest_received = d.largest_received.max(datagram.len() as u64);
                    self.datagram(now, meta, datagram);
                }
            }
            if n < BATCH {
                return;
            }
        }
    }

    /// One datagram: to its connection, or answered by the endpoint.
    fn datagram(&mut self, now: Instant, meta: &RecvMeta, data: BytesMut) {
        let ecn = meta
            .ecn
            .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
        self.out.clear();
        match self
            .endpoint
            .handle(now, meta.addr, meta.dst_ip, ecn, data, &mut self.out)
        {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(&i) = self.by_handle.get(&handle) {
                    self.conns[i].quic.handle_event(event);
                    self.touched[i] = true;
                }
            }
            Some(DatagramEvent::Response(t)) => {
                send(
                    &self.socket,
                    &self.udp,
                    &t,
                    &self.out,
                    &mut self.tally.datagrams,
                );
            }
            // A client endpoint (no server configuration) accepts none.
            Some(DatagramEvent::NewConnection(incoming)) => self.endpoint.ignore(incoming),
            None => {}
        }
    }
}

/// A connection ended: by the client (at the end, or after a GOAWAY), by
/// the server, or by QUIC's idle timeout. The requests in flight on it
/// failed, unless the client closed it. Whether to make it again (not if
/// the client closed it: that is the end of the run, or a GOAWAY, after
/// which it was made again already).
fn lost(conn: &mut Conn, reason: ConnectionError, tally: &mut Tally, closing: bool) -> bool {
    let ours = conn.ended || closing;
    conn.ended = true;
    if ours {
        conn.requests.clear();
        return false;
    }
    let in_flight = conn.requests.len() as u64;
    conn.requests.clear();
    tally.failed += in_flight;
    match &reason {
        _ if !conn.connected => tally.connect += 1,
        ConnectionError::TimedOut => tally.timeout += 1,
        // The server closed it with no error and nothing in flight (its
        // keep-alive timeout): no error.
        ConnectionError::ApplicationClosed(c)
            if c.error_code.into_inner() == NO_ERROR && in_flight == 0 =>
        {
            return true;
        }
        _ => tally.lost += 1,
    }
    tally.error(|| {
        format!(
            "connection {}: {reason} ({in_flight} requests in flight)",
            if conn.connected {
                "lost"
            } else {
                "failed in its handshake"
            }
        )
    });
    true
}

/// Writes what is left of a request frame and ends the stream once it is
/// all written.
fn write_request(quic: &mut Connection, id: StreamId, r: &mut Request, frame: &[u8]) {
    let mut send = quic.send_stream(id);
    if r.written < frame.len() {
        if let Ok(n) = send.write(&frame[r.written..]) {
            r.written += n;
        }
        if r.written == frame.len() {
            let _ = send.finish();
        }
    }
}

/// Reads what a response stream has: its head, its body's length, its
/// end; a response that ended is counted and its stream forgotten.
fn read_response(
    conn: &mut Conn,
    id: StreamId,
    now: Instant,
    plan: &Plan,
    tally: &mut Tally,
    sections: &mut Vec<Vec<u8>>,
) {
    let Some(r) = conn.requests.get_mut(&id) else {
        return;
    };
    let mut recv = conn.quic.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else {
        return;
    };
    let mut end: Option<Result<(), String>> = None;
    loop {
        match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => {
                if let Err(e) = take(r, &chunk.bytes) {
                    end = Some(Err(e));
                    break;
                }
            }
            Ok(None) => {
                end = Some(match r.reader.end() {
                    Ok(()) => Ok(()),
                    Err(v) => Err(format!(
                        "response ended inside a frame or before its head: {v:?}"
                    )),
                });
                break;
            }
            Err(ReadError::Reset(code)) => {
                end = Some(Err(format!("stream reset by the server, code {code}")));
                break;
            }
            Err(ReadError::Blocked) => break,
        }
    }
    let _ = chunks.finalize();
    let Some(end) = end else {
        return;
    };
    let Some(r) = conn.requests.remove(&id) else {
        return;
    };
    if end.is_err() {
        // Nothing more of it is wanted (a reset stream ignores this).
        let _ = conn
            .quic
            .recv_stream(id)
            .stop(VarInt::from_u64(code::REQUEST_CANCELLED).expect("a varint"));
    }
    count(r, end, now, plan, tally, sections);
}

/// Hands a piece of a response stream to its reader: the head's status,
/// the body's bytes.
fn take(r: &mut Request, piece: &[u8]) -> Result<(), String> {
    let mut at = 0;
    loop {
        let (next, event) = r
            .reader
            .read(piece, at)
            .map_err(|v| format!("malformed response: {v:?}"))?;
        at = next;
        match event {
            None => return Ok(()),
            // The head; a HEADERS frame after it is trailers, which say
            // nothing here. (RequestReader reads a request's order: an
            // interim 1xx head, which no server here sends, would make the
            // final head trailers and its DATA a malformed response.)
            Some(Frame::Headers | Frame::Trailers) => {
                if r.status.is_none_or(|s| s < 200) {
                    r.status = Some(status_of(r.reader.section())?);
                }
            }
            Some(Frame::Data(range)) => {
                r.body += range.len() as u64;
                if let Some(kept) = &mut r.kept {
                    kept.extend_from_slice(&piece[range]);
                }
            }
        }
    }
}

/// A response head's `:status` (the first field of a head, RFC 9114
/// §4.3: the decoding stops there, the other fields are not wanted).
fn status_of(section: &[u8]) -> Result<u16, String> {
    let mut status = None;
    let read = qpack::decode(section, |name, value| {
        if name == b":status" {
            status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            return Err(());
        }
        Ok(())
    });
    match (read, status) {
        (_, Some(s)) => Ok(s),
        (Err(qpack::Stop::Qpack(e)), None) => Err(format!("response head: QPACK {e:?}")),
        _ => Err("response head without :status".into()),
    }
}

/// A response that ended (or failed): counted if the run still counts.
fn count(
    r: Request,
    end: Result<(), String>,
    now: Instant,
    plan: &Plan,
    tally: &mut Tally,
    sections: &mut Vec<Vec<u8>>,
) {
    sections.push(r.reader.into_buffer());
    if now >= plan.deadline {
        return;
    }
    if plan.limit.is_some() {
        tally.status = r.status;
        tally.body = r.kept;
    }
    let bad = match (end, r.status) {
        (Err(e), _) => Some(e),
        (Ok(()), None) => Some("response without a head".into()),
        (Ok(()), Some(s)) if (200..300).contains(&s) && r.body != plan.size => Some(format!(
            "status {s} with {} body bytes, want {}",
            r.body, plan.size
        )),
        (Ok(()), Some(_)) => None,
    };
    if let Some(e) = bad {
        tally.failed += 1;
        tally.error(|| e);
        return;
    }
    let status = r.status.unwrap_or(0);
    tally.responses += 1;
    tally.body_bytes += r.body;
    if !(200..400).contains(&status) {
        tally.non_2xx += 1;
        tally.error(|| format!("status {status}"));
    }
    let us = (now - r.started).as_micros();
    tally
        .latencies_us
        .push(u32::try_from(us).unwrap_or(u32::MAX));
}

/// Reads a stream the server opened: its type first, then the control
/// stream's frames (GOAWAY stops new requests), the rest dropped.
fn read_uni(conn: &mut Conn, id: StreamId, tally: &mut Tally) {
    let Some(state) = conn.uni.get_mut(&id) else {
        return;
    };
    let mut recv = conn.quic.recv_stream(id);
    let Ok(mut chunks) = recv.read(true) else {
        return;
    };
    let mut going_away = false;
    let mut finished = false;
    loop {
        let chunk = match chunks.next(usize::MAX) {
            Ok(Some(chunk)) => chunk,
            Ok(None) | Err(ReadError::Reset(_)) => {
                finished = true;
                break;
            }
            Err(ReadError::Blocked) => break,
        };
        // The stream's type first (a varint, perhaps split across
        // pieces); then what follows it.
        let rest = match state {
            Uni::Type(held) => {
                held.extend_from_slice(&chunk.bytes);
                let Some((ty, n)) = frames::varint(held) else {
                    continue;
                };
                let rest = held.split_off(n);
                *state = if ty == frames::stream::CONTROL {
                    Uni::Control(ControlReader::default())
                } else {
                    Uni::Ignored
                };
                Some(rest)
            }
            _ => None,
        };
        let piece = rest.as_deref().unwrap_or(&chunk.bytes[..]);
        if let Uni::Control(reader) = state {
            let said = reader.read(piece, |c| going_away |= matches!(c, Control::Goaway(_)));
            if let Err(v) = said {
                tally.error(|| format!("the server's control stream: {v:?}"));
                *state = Uni::Ignored;
            }
        }
    }
    let _ = chunks.finalize();
    if finished {
        conn.uni.remove(&id);
    }
    if going_away {
        conn.going_away = true;
    }
}

/// Sends one transmit (a GSO batch), waiting a little for room in the
/// socket's buffer; a datagram that still does not fit is lost, as any
/// datagram may be, and QUIC sends its frames again.
fn send(
    socket: &UdpSocket,
    udp: &UdpSocketState,
    t: &quinn_proto::Transmit,
    buf: &[u8],
    stats: &mut Datagrams,
) {
    let transmit = quinn_udp::Transmit {
        destination: t.destination,
        ecn: t
            .ecn
            .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
        contents: &buf[..t.size],
        segment_size: t.segment_size,
        src_ip: t.src_ip,
    };
    for _ in 0..3 {
        match udp.try_send(UdpSockRef::from(socket), &transmit) {
            Ok(()) => {
                stats.send_calls += 1;
                stats.sent += t.segment_size.map_or(1, |s| t.size.div_ceil(s)) as u64;
                stats.sent_bytes += t.size as u64;
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                stats.send_blocked += 1;
                wait_for(socket, libc::POLLOUT, SEND_WAIT);
            }
            Err(_) => return,
        }
    }
}

/// Waits up to `wait` for the socket to be readable or writable
/// (`events`); whether it is. A zero wait only asks.
fn wait_for(socket: &UdpSocket, events: libc::c_short, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events,
        revents: 0,
    };
    let timeout = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let n = unsafe { libc::ppoll(&mut fd, 1, &timeout, std::ptr::null()) };
    n > 0
}

/// This thread's CPU time so far, user and system (getrusage(2),
/// RUSAGE_THREAD).
fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0.0;
    }
    crate::procstat::cpu_seconds(&usage)
}
