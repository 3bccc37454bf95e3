//! Raw HTTP/2 for tests that must send what no well-behaved client would: a frame
//! encoder (RFC 9113 §4 and §6), a hand-made HPACK encoder (RFC 7541: literals and
//! indexed references, no Huffman), a frame reader whose every read has a deadline,
//! and the server-side figures the attack tests bound (RSS, peak RSS).

use super::*;

/// What a client speaking HTTP/2 with prior knowledge sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;

    pub fn name(kind: u8) -> &'static str {
        match kind {
            DATA => "DATA",
            HEADERS => "HEADERS",
            PRIORITY => "PRIORITY",
            RST_STREAM => "RST_STREAM",
            SETTINGS => "SETTINGS",
            PUSH_PROMISE => "PUSH_PROMISE",
            PING => "PING",
            GOAWAY => "GOAWAY",
            WINDOW_UPDATE => "WINDOW_UPDATE",
            CONTINUATION => "CONTINUATION",
            _ => "UNKNOWN",
        }
    }
}

/// Frame flags.
pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
}

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes (RFC 9113 §7).
pub mod code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;

    pub fn name(code: u32) -> &'static str {
        match code {
            NO_ERROR => "NO_ERROR",
            PROTOCOL_ERROR => "PROTOCOL_ERROR",
            INTERNAL_ERROR => "INTERNAL_ERROR",
            FLOW_CONTROL_ERROR => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            STREAM_CLOSED => "STREAM_CLOSED",
            FRAME_SIZE_ERROR => "FRAME_SIZE_ERROR",
            REFUSED_STREAM => "REFUSED_STREAM",
            CANCEL => "CANCEL",
            COMPRESSION_ERROR => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            ENHANCE_YOUR_CALM => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => "UNKNOWN",
        }
    }
}

/// Appends one frame: the 9-byte header (24-bit length, type, flags, 31-bit stream
/// id), then the payload.
pub fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    assert!(len < 1 << 24, "frame payload of {len} bytes");
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + payload.len());
    put_frame(&mut out, kind, flags, stream, payload);
    out
}

pub fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = params
        .iter()
        .flat_map(|(id, value)| id.to_be_bytes().into_iter().chain(value.to_be_bytes()))
        .collect();
    frame(kind::SETTINGS, 0, 0, &payload)
}

pub fn settings_ack() -> Vec<u8> {
    frame(kind::SETTINGS, flag::ACK, 0, &[])
}

/// HEADERS carrying `block` (flags: END_STREAM, END_HEADERS).
pub fn headers(stream: u32, block: &[u8], flags: u8) -> Vec<u8> {
    frame(kind::HEADERS, flags, stream, block)
}

pub fn continuation(stream: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    let flags = if end_headers { flag::END_HEADERS } else { 0 };
    frame(kind::CONTINUATION, flags, stream, block)
}

pub fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    frame(kind::DATA, flags, stream, payload)
}

pub fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(kind::WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

pub fn ping(payload: [u8; 8], ack: bool) -> Vec<u8> {
    let flags = if ack { flag::ACK } else { 0 };
    frame(kind::PING, flags, 0, &payload)
}

pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(kind::RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn goaway(last_stream: u32, code: u32) -> Vec<u8> {
    let mut payload = last_stream.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    frame(kind::GOAWAY, 0, 0, &payload)
}

/// HPACK by hand (see [`super::hpack`]).
pub use super::hpack;

/// One frame as received.
#[derive(Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn is(&self, kind: u8) -> bool {
        self.kind == kind
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The error code of a RST_STREAM or GOAWAY.
    pub fn error_code(&self) -> Option<u32> {
        match self.kind {
            kind::RST_STREAM => self.u32_at(0),
            kind::GOAWAY => self.u32_at(4),
            _ => None,
        }
    }

    /// A GOAWAY's last stream id.
    pub fn last_stream(&self) -> Option<u32> {
        (self.kind == kind::GOAWAY).then(|| self.u32_at(0).map(|v| v & 0x7fff_ffff))?
    }

    /// A GOAWAY's debug data, as text.
    pub fn debug_data(&self) -> String {
        match self.kind {
            kind::GOAWAY => String::from_utf8_lossy(self.payload.get(8..).unwrap_or(&[])).into(),
            _ => String::new(),
        }
    }

    /// A SETTINGS frame's parameters.
    pub fn settings(&self) -> Vec<(u16, u32)> {
        self.payload
            .chunks_exact(6)
            .map(|p| {
                (
                    u16::from_be_bytes([p[0], p[1]]),
                    u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
                )
            })
            .collect()
    }

    /// A HEADERS frame's `:status`, where [`hpack::status`] can read it.
    pub fn status(&self) -> Option<u16> {
        (self.kind == kind::HEADERS).then(|| hpack::status(&self.payload))?
    }
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}(stream {}, flags {:#x}, {} bytes",
            kind::name(self.kind),
            self.stream,
            self.flags,
            self.payload.len()
        )?;
        match self.kind {
            kind::RST_STREAM => write!(f, ", {}", code::name(self.error_code().unwrap_or(!0)))?,
            kind::GOAWAY => write!(
                f,
                ", last {}, {}, {:?}",
                self.last_stream().unwrap_or(0),
                code::name(self.error_code().unwrap_or(!0)),
                self.debug_data()
            )?,
            kind::SETTINGS => write!(f, ", {:?}", self.settings())?,
            kind::HEADERS => match self.status() {
                Some(status) => write!(f, ", :status {status}")?,
                None => write!(
                    f,
                    ", block {:02x?}",
                    &self.payload[..self.payload.len().min(16)]
                )?,
            },
            kind::WINDOW_UPDATE => write!(f, ", +{}", self.u32_at(0).unwrap_or(0))?,
            _ => {}
        }
        write!(f, ")")
    }
}

/// What one wait for the next frame brought.
#[derive(Debug)]
pub enum Next {
    Frame(Frame),
    /// The server closed the connection in order (FIN).
    Closed,
    /// The connection broke (RST from the server, or another error).
    Broken(io::ErrorKind),
    /// Nothing complete arrived before the deadline.
    Timeout,
}

/// A raw HTTP/2 client connection over cleartext TCP, or over TLS (ALPN `h2`) with
/// [`H2Conn::open_with`].
pub struct H2Conn {
    /// The socket (for its options; over TLS, writing to it bypasses TLS).
    pub tcp: TcpStream,
    /// What frames are written to and read from: the socket, or TLS over it.
    io: Stream,
    buf: Vec<u8>,
    /// Bytes of DATA payload received, per stream and in all.
    pub data_received: u64,
}

impl H2Conn {
    /// Connects, and sends the preface and a SETTINGS frame with `params`.
    pub fn open(addr: SocketAddr, params: &[(u16, u32)]) -> H2Conn {
        H2Conn::open_with(&Connector::new(addr, None), params)
    }

    /// [`H2Conn::open`] to the server `connector` reaches: over TLS offering `h2`
    /// when it speaks TLS.
    pub fn open_with(connector: &Connector, params: &[(u16, u32)]) -> H2Conn {
        let tcp = connector.tcp();
        tcp.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let io = match &connector.tls {
            None => Stream::Plain(tcp.try_clone().unwrap()),
            Some(tls) => Stream::tls(tcp.try_clone().unwrap(), &tls.offering_h2()),
        };
        let mut conn = H2Conn {
            tcp,
            io,
            buf: Vec::with_capacity(1 << 16),
            data_received: 0,
        };
        let mut opening = PREFACE.to_vec();
        opening.extend(settings(params));
        conn.send(&opening).expect("send the preface");
        conn
    }

    /// [`H2Conn::open`], then the server's SETTINGS are read and acknowledged:
    /// returns them.
    pub fn handshake(addr: SocketAddr, params: &[(u16, u32)]) -> (H2Conn, Vec<(u16, u32)>) {
        H2Conn::handshake_with(&Connector::new(addr, None), params)
    }

    /// [`H2Conn::handshake`] to the server `connector` reaches (see
    /// [`H2Conn::open_with`]).
    pub fn handshake_with(
        connector: &Connector,
        params: &[(u16, u32)],
    ) -> (H2Conn, Vec<(u16, u32)>) {
        let mut conn = H2Conn::open_with(connector, params);
        let first = match conn.next(Instant::now() + IO_TIMEOUT) {
            Next::Frame(f) if f.is(kind::SETTINGS) && !f.has(flag::ACK) => f,
            other => panic!("expected the server's SETTINGS first, got {other:?}"),
        };
        conn.send(&settings_ack()).expect("send SETTINGS ACK");
        (conn, first.settings())
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes)
    }

    /// Reads the next frame, waiting until `deadline` at most.
    pub fn next(&mut self, deadline: Instant) -> Next {
        loop {
            if let Some(frame) = self.take_frame() {
                if frame.is(kind::DATA) {
                    self.data_received += frame.payload.len() as u64;
                }
                return Next::Frame(frame);
            }
            let now = Instant::now();
            if now >= deadline {
                return Next::Timeout;
            }
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.tcp.set_read_timeout(Some(wait)).unwrap();
            let at = self.buf.len();
            self.buf.resize(at + (1 << 16), 0);
            let got = self.io.read(&mut self.buf[at..]);
            self.buf.truncate(at + *got.as_ref().unwrap_or(&0));
            match got {
                Ok(0) => return Next::Closed,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Next::Broken(e.kind()),
            }
        }
    }

    fn take_frame(&mut self) -> Option<Frame> {
        if self.buf.len() < 9 {
            return None;
        }
        let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
        if self.buf.len() < 9 + len {
            return None;
        }
        let frame = Frame {
            kind: self.buf[3],
            flags: self.buf[4],
            stream: u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]])
                & 0x7fff_ffff,
            payload: self.buf[9..9 + len].to_vec(),
        };
        self.buf.drain(..9 + len);
        Some(frame)
    }

    /// Reads frames until `done` says so, the connection ends or `deadline` passes;
    /// PINGs are answered on the way. Returns every frame read and how reading ended
    /// (`None` when `done` stopped it).
    pub fn read_until(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&[Frame]) -> bool,
    ) -> (Vec<Frame>, Option<Next>) {
        let mut frames = Vec::new();
        loop {
            if done(&frames) {
                return (frames, None);
            }
            match self.next(deadline) {
                Next::Frame(f) => {
                    if f.is(kind::PING) && !f.has(flag::ACK) {
                        let payload: [u8; 8] = f.payload[..8].try_into().unwrap();
                        let _ = self.send(&ping(payload, true));
                    }
                    frames.push(f);
                }
                end => return (frames, Some(end)),
            }
        }
    }

    /// Reads until the server ends the connection (or `deadline`): every frame, and
    /// how it ended.
    pub fn read_to_end(&mut self, deadline: Instant) -> (Vec<Frame>, Next) {
        let (frames, end) = self.read_until(deadline, |_| false);
        (frames, end.unwrap_or(Next::Timeout))
    }

    /// Sets SO_SNDBUF, so that a flood's bytes wait in the client rather than in the
    /// kernel, and what was written tells what the server took.
    pub fn small_send_buffer(&self, bytes: usize) {
        rustix::net::sockopt::set_socket_send_buffer_size(&self.tcp, bytes).expect("set SO_SNDBUF");
    }
}

/// The first GOAWAY among `frames`.
pub fn goaway_of(frames: &[Frame]) -> Option<&Frame> {
    frames.iter().find(|f| f.is(kind::GOAWAY))
}

/// A field of /proc/PID/status in KiB (`VmRSS`, `VmHWM`).
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Resets the peak RSS (`VmHWM`) of `pid` to its current RSS (Linux 4.0+), so that a
/// later `VmHWM` is the peak of what came after.
pub fn reset_peak_rss(pid: u32) {
    let _ = fs::write(format!("/proc/{pid}/clear_refs"), "5");
}
