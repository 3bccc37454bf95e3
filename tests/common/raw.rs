//! Raw HTTP/1.x over TCP: exact bytes out, a strict response reader in.

use super::*;

/// A parsed HTTP/1.x response, exactly as received.
#[derive(Debug, Clone)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length")
            .map(|v| v.trim().parse().expect("numeric Content-Length"))
    }

    /// Whether a comma-separated header (e.g. `Connection`) has `token`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Whether this came over HTTP/2 ([`Server::exchange`] in an HTTP/2 cell): no
    /// reason phrase (hyper's canonical one stands in), no connection fields.
    pub fn is_h2(&self) -> bool {
        self.version == "HTTP/2.0"
    }

    /// Whether this came over HTTP/3 ([`Server::exchange`] in the HTTP/3 cell).
    pub fn is_h3(&self) -> bool {
        self.version == "HTTP/3.0"
    }

    /// Over HTTP/2 or HTTP/3, which carry a head as fields: no reason phrase (the
    /// canonical one stands in), no connection fields, no chunked coding.
    pub fn is_multiplexed(&self) -> bool {
        self.is_h2() || self.is_h3()
    }
}

/// A raw client connection with a read buffer; every read times out after [`IO_TIMEOUT`].
/// Plain TCP, or TLS when made by [`Server::connect`] for a TLS server (see [`Stream`]).
pub struct Conn {
    stream: Stream,
    buf: Vec<u8>,
}

/// How a read from the peer ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Orderly close (FIN; over TLS also a close with or without `close_notify`).
    Eof,
    /// Connection reset (RST).
    Reset,
}

impl Conn {
    /// Plain TCP on `stream`, whatever the server speaks.
    pub fn new(stream: TcpStream) -> Conn {
        Conn::from_stream(Stream::Plain(stream))
    }

    pub fn from_stream(stream: Stream) -> Conn {
        stream.tcp().set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.tcp().set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    /// The TCP socket (underneath TLS, if any).
    pub fn stream(&self) -> &TcpStream {
        self.stream.tcp()
    }

    /// The TLS connection, for its negotiated version, ALPN, certificates.
    pub fn tls(&self) -> Option<&rustls::ClientConnection> {
        self.stream.tls_conn()
    }

    /// Over TLS, once the server has closed: whether it sent `close_notify` first.
    pub fn ended_with_close_notify(&self) -> Option<bool> {
        self.stream.ended_with_close_notify()
    }

    /// Completes the TLS handshake now (a no-op on plain TCP).
    pub fn handshake(&mut self) -> io::Result<()> {
        self.stream.handshake()
    }

    /// Sends (over TLS after completing the handshake).
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.stream.handshake().expect("TLS handshake");
        self.stream.write_all(bytes.as_ref()).expect("send request");
    }

    /// Sends (over TLS after completing the handshake), reporting failure.
    pub fn try_send(&mut self, bytes: impl AsRef<[u8]>) -> io::Result<()> {
        self.stream.handshake()?;
        self.stream.write_all(bytes.as_ref())
    }

    /// Sends, tolerating that the server may already have closed (it may answer early).
    /// Over TLS it does not wait for the handshake: the bytes leave once a read has
    /// completed it.
    pub fn send_lossy(&mut self, bytes: impl AsRef<[u8]>) {
        let _ = self.stream.write_all(bytes.as_ref());
    }

    /// Sends `bytes` from another thread while this one goes on reading (a client that
    /// writes a long pipeline without reading first).
    pub fn send_in_background(&mut self, bytes: impl AsRef<[u8]>) -> JoinHandle<()> {
        let wire = self.stream.seal(bytes.as_ref()).expect("TLS handshake");
        let mut writer = self.stream.tcp().try_clone().unwrap();
        thread::spawn(move || writer.write_all(&wire).expect("send in background"))
    }

    /// Waits (up to [`IO_TIMEOUT`]) until the server has read everything sent on this
    /// connection so far: its end holds no unread bytes. A server that has not yet read
    /// half a head takes the connection for an idle one; a fixed pause for the bytes
    /// to arrive was too short on a loaded machine.
    pub fn wait_read_by_server(&self) {
        wait_all_read_by_server(std::slice::from_ref(self));
    }

    /// Sends TLS close_notify (nothing on plain TCP).
    pub fn close_notify(&mut self) {
        let _ = self.stream.close_notify();
    }

    /// Whether the server has ended the connection, without blocking; whatever it sent
    /// meanwhile is kept (see [`Conn::take_buffered`]).
    pub fn poll_closed(&mut self) -> bool {
        self.stream.tcp().set_nonblocking(true).unwrap();
        let mut chunk = [0u8; 16 * 1024];
        let closed = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break true,
            }
        };
        self.stream.tcp().set_nonblocking(false).unwrap();
        closed
    }

    /// Waits (polling) until the server ends the connection, at most until `deadline`.
    pub fn wait_closed(&mut self, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            if self.poll_closed() {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The bytes received and not yet consumed, left in place (a later
    /// [`Conn::read_response`] still parses them).
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes received and not yet consumed.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// `read(2)`, retried when a signal interrupts it (a socket with a receive timeout
    /// is not restarted automatically).
    fn read_retrying(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    /// Reads more bytes into the buffer; `Err` when the connection ended.
    fn fill(&mut self) -> Result<usize, Ended> {
        let mut chunk = [0u8; 64 * 1024];
        match self.read_retrying(&mut chunk) {
            Ok(0) => Err(Ended::Eof),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Err(Ended::Reset),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                panic!(
                    "timed out after {IO_TIMEOUT:?} waiting for the server; got so far: {:?}",
                    String::from_utf8_lossy(&self.buf)
                )
            }
            Err(e) => panic!("read error: {e}"),
        }
    }

    /// Reads one response head (status line and fields), leaving the body unread.
    pub fn read_head(&mut self) -> Response {
        let end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos;
            }
            if let Err(ended) = self.fill() {
                panic!(
                    "connection ended ({ended:?}) before a complete response head; got: {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
            }
        };
        let head: Vec<u8> = self.buf.drain(..end + 4).collect();
        parse_head(&head[..end])
    }

    /// Reads exactly `n` more bytes (of a body whose head was read).
    pub fn take_exact(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            if let Err(ended) = self.fill() {
                panic!(
                    "connection ended ({ended:?}) after {} of {n} body bytes",
                    self.buf.len()
                );
            }
        }
        self.buf.drain(..n).collect()
    }

    fn take_line(&mut self) -> Vec<u8> {
        loop {
            if let Some(pos) = find(&self.buf, b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..pos + 2).collect();
                return line[..pos].to_vec();
            }
            if let Err(ended) = self.fill() {
                panic!("connection ended ({ended:?}) inside a chunked body");
            }
        }
    }

    fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line = String::from_utf8(self.take_line()).expect("chunk size line");
            let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
                .expect("hex chunk size");
            if size == 0 {
                while !self.take_line().is_empty() {}
                return body;
            }
            body.extend(self.take_exact(size));
            assert_eq!(self.take_exact(2), b"\r\n", "chunk not followed by CRLF");
        }
    }

    /// Reads a whole response to a request with the given method.
    pub fn read_response_to(&mut self, method: &str) -> Response {
        let mut resp = self.read_head();
        let bodiless = method == "HEAD"
            || resp.status == 204
            || resp.status == 304
            || (100..200).contains(&resp.status);
        if bodiless {
            return resp;
        }
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        resp.body = if chunked {
            self.read_chunked()
        } else if let Some(len) = resp.content_length() {
            self.take_exact(len as usize)
        } else {
            self.read_to_end().0
        };
        resp
    }

    /// Reads a whole response to a GET (or any method whose response has a body).
    pub fn read_response(&mut self) -> Response {
        self.read_response_to("GET")
    }

    /// Sends `request` and reads the response to it.
    pub fn roundtrip(&mut self, request: impl AsRef<[u8]>) -> Response {
        let request = request.as_ref();
        let method = String::from_utf8_lossy(request)
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        self.send(request);
        self.read_response_to(&method)
    }

    /// Reads until the server closes; returns the bytes (including anything buffered) and
    /// how the connection ended. Panics if the server keeps it open past [`IO_TIMEOUT`].
    pub fn read_to_end(&mut self) -> (Vec<u8>, Ended) {
        let ended = loop {
            if let Err(ended) = self.fill() {
                break ended;
            }
        };
        (std::mem::take(&mut self.buf), ended)
    }

    /// Reads and discards up to `n` bytes (the body of a large response) without waiting
    /// for the connection to end; returns how many arrived before it ended.
    pub fn skip_up_to(&mut self, n: u64) -> u64 {
        let buffered = (self.buf.len() as u64).min(n);
        self.buf.drain(..buffered as usize);
        let mut got = buffered;
        let mut chunk = vec![0u8; 256 * 1024];
        while got < n {
            let want = (n - got).min(chunk.len() as u64) as usize;
            match self.read_retrying(&mut chunk[..want]) {
                Ok(0) => break,
                Ok(k) => got += k as u64,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("{e} after {got} of {n} bytes (timeout {IO_TIMEOUT:?})"),
            }
        }
        got
    }

    /// One read of at most `max` bytes (those already buffered first), discarded: a
    /// client that takes what has arrived now and then, as slow readers do. Returns how
    /// many; 0 once the connection has ended.
    pub fn read_once(&mut self, max: usize) -> usize {
        if !self.buf.is_empty() {
            let n = self.buf.len().min(max);
            self.buf.drain(..n);
            return n;
        }
        let mut chunk = vec![0u8; max];
        match self.read_retrying(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            Err(e) => panic!("{e} (timeout is {IO_TIMEOUT:?})"),
        }
    }

    /// Like [`Conn::read_to_end`] but counts bytes instead of keeping them, for large
    /// bodies.
    pub fn count_to_end(&mut self) -> (u64, Ended) {
        let mut total = std::mem::take(&mut self.buf).len() as u64;
        let mut chunk = vec![0u8; 256 * 1024];
        loop {
            match self.read_retrying(&mut chunk) {
                Ok(0) => return (total, Ended::Eof),
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return (total, Ended::Reset)
                }
                Err(e) => panic!("after {total} bytes: {e} (timeout is {IO_TIMEOUT:?})"),
            }
        }
    }

    /// Asserts that the server closes the connection without sending anything more.
    pub fn assert_closed(&mut self) {
        let (rest, _) = self.read_to_end();
        assert!(
            rest.is_empty(),
            "expected the server to close; it sent more: {:?}",
            String::from_utf8_lossy(&rest)
        );
    }
}

/// The head lines (status line first) of the response to `GET target` with
/// `Connection: close`, read as raw bytes on a fresh HTTP/1.1 connection whatever
/// the cell: for checks of the bytes of a head. Every line break in it is
/// checked to be CRLF, so no bare CR or LF slipped into a field.
pub fn raw_head_lines(server: &Server, target: &str) -> Vec<String> {
    let mut conn = server.connect();
    conn.send(request("GET", target, &["Connection: close"]));
    let (bytes, _) = conn.read_to_end();
    let end = find(&bytes, b"\r\n\r\n").expect("a complete response head");
    let text = String::from_utf8_lossy(&bytes[..end]).replace("\r\n", "\u{0}");
    assert!(
        !text.contains(['\r', '\n']),
        "bare CR or LF inside the response head: {text:?}"
    );
    text.split('\u{0}').map(str::to_string).collect()
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

fn parse_head(head: &[u8]) -> Response {
    let text = std::str::from_utf8(head).expect("response head is not UTF-8");
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default().to_string();
    assert!(
        version == "HTTP/1.1" || version == "HTTP/1.0",
        "bad status line {status_line:?}"
    );
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let reason = parts.next().unwrap_or_default().to_string();
    let headers = lines
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("bad header line {line:?}"));
            assert!(
                !name.is_empty() && !name.contains(' '),
                "bad header name in {line:?}"
            );
            (name.to_string(), value.trim().to_string())
        })
        .collect();
    Response {
        version,
        status,
        reason,
        headers,
        body: Vec::new(),
    }
}

/// A minimal request with a Host header and any extra header lines.
pub fn request(method: &str, target: &str, extra: &[&str]) -> String {
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: test\r\n");
    for line in extra {
        req.push_str(line);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req
}

/// Checks the contract's error-response shape: `<code> <reason>\n` body, text/plain with
/// charset, matching Content-Length, Date and Server.
pub fn assert_error(resp: &Response, code: u16) {
    assert_eq!(resp.status, code, "status; response: {resp:#?}");
    if resp.is_multiplexed() {
        assert_error_body_h2(&resp.body_str(), code);
    } else {
        let expected = format!("{} {}\n", code, resp.reason);
        assert!(!resp.reason.is_empty(), "empty reason phrase");
        assert_eq!(resp.body_str(), expected, "error body");
    }
    assert_eq!(
        resp.content_length(),
        Some(resp.body.len() as u64),
        "error Content-Length"
    );
    assert_eq!(
        resp.header("content-type").map(str::to_ascii_lowercase),
        Some("text/plain; charset=utf-8".to_string()),
        "error Content-Type"
    );
    assert_common_headers(resp);
}

/// Date (a valid IMF-fixdate) and `Server: staticd`, on every response.
pub fn assert_common_headers(resp: &Response) {
    let date = resp.header("date").expect("Date header");
    httpdate::parse_http_date(date).unwrap_or_else(|_| panic!("unparseable Date {date:?}"));
    assert_eq!(resp.header("server"), Some("staticd"), "Server header");
}

/// Parses consecutive complete responses (to requests with the given methods) from bytes
/// captured elsewhere, e.g. the stdout of `staticd --inetd` on a pipe.
pub fn parse_responses(mut bytes: &[u8], methods: &[&str]) -> Vec<Response> {
    let mut responses = Vec::new();
    for method in methods {
        let end = find(bytes, b"\r\n\r\n").unwrap_or_else(|| {
            panic!(
                "no complete response head in {:?}",
                String::from_utf8_lossy(bytes)
            )
        });
        let mut resp = parse_head(&bytes[..end]);
        bytes = &bytes[end + 4..];
        let bodiless = *method == "HEAD" || resp.status == 204 || resp.status == 304;
        if !bodiless {
            let len = resp.content_length().expect("Content-Length") as usize;
            assert!(bytes.len() >= len, "body cut short");
            resp.body = bytes[..len].to_vec();
            bytes = &bytes[len..];
        }
        responses.push(resp);
    }
    assert!(
        bytes.is_empty(),
        "unexpected bytes after the responses: {:?}",
        String::from_utf8_lossy(bytes)
    );
    responses
}

/// Waits (up to [`IO_TIMEOUT`]) until nothing listens on `addr` (an IPv4 address):
/// the event a stop's first step is seen by, where a fixed pause was too short on
/// a loaded machine. Nothing connects to find out (a connection made while the
/// listener is still there would be one more client).
pub fn wait_listener_closed(addr: SocketAddr) {
    // Looked at every 5 ms, not `eventually`'s 100: what a test does next
    // (a request in a stop's last call) has a deadline of its own.
    let deadline = Instant::now() + IO_TIMEOUT;
    while listening_on(addr) {
        assert!(
            Instant::now() < deadline,
            "still listening on {addr} after {IO_TIMEOUT:?}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a socket listens on `addr` (an IPv4 address). The kernel lists
/// listening sockets first in /proc/net/tcp, so this reads only that part:
/// the whole table, with the thousands of connections other test binaries
/// leave in TIME_WAIT, once took more than a second to read, and a stop's
/// last call (1 s) was over before a test saw its listener close.
fn listening_on(addr: SocketAddr) -> bool {
    let local = proc_net_addr(addr);
    let table = fs::File::open("/proc/net/tcp").expect("open /proc/net/tcp");
    for line in BufReader::new(table).lines().skip(1) {
        let line = line.expect("read /proc/net/tcp");
        let fields: Vec<&str> = line.split_whitespace().collect();
        match (fields.get(1), fields.get(3)) {
            (Some(_), Some(&state)) if state != "0A" => return false,
            (Some(&at), Some(_)) if at == local => return true,
            _ => {}
        }
    }
    false
}

/// How many sockets listening on `addr` (an IPv4 address) process `pid` holds: those
/// of /proc/net/tcp in state LISTEN whose inode is one of its descriptors'. 0 once it
/// exited. With `--reuse-port` several processes listen on one address; this tells
/// theirs apart.
pub fn listeners_of(pid: u32, addr: SocketAddr) -> usize {
    let listening: Vec<String> = tcp_sockets(addr)
        .into_iter()
        .filter(|fields| fields[3] == "0A" && fields.len() > 9)
        .map(|fields| format!("socket:[{}]", fields[9]))
        .collect();
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| listening.iter().any(|l| target.as_os_str() == l.as_str()))
        .count()
}

/// Waits (up to [`IO_TIMEOUT`]) until the server listening on `addr` (an IPv4
/// address) has accepted every connection made to it: no listening socket
/// there has one waiting in its accept queue (for a listening socket,
/// /proc/net/tcp's `rx_queue` is that queue's length), and none is held by
/// the kernel before it (SYN_RECV: staticd's listeners defer a connection
/// until its first bytes, or a second without any, sys::DEFER_ACCEPT_SECS).
/// What a test that opened connections waits for before it asks how the
/// server took them.
pub fn wait_accepted(addr: SocketAddr) {
    let waiting = || -> u64 {
        let rows = tcp_sockets(addr);
        let queued: u64 = rows
            .iter()
            .filter(|fields| fields[3] == "0A")
            .filter_map(|fields| fields[4].split_once(':'))
            .filter_map(|(_, rx)| u64::from_str_radix(rx, 16).ok())
            .sum();
        let deferred = rows.iter().filter(|fields| fields[3] == "03").count();
        queued + deferred as u64
    };
    let accepted = eventually(IO_TIMEOUT, || (waiting() == 0).then_some(()));
    assert!(
        accepted.is_some(),
        "{} connections to {addr} still not accepted after {IO_TIMEOUT:?}",
        waiting()
    );
}

/// [`Conn::wait_read_by_server`] for every one of `conns` at once: one
/// reading of /proc/net/tcp a turn (a long table on a busy machine takes
/// tens of milliseconds to read in a debug build, too long to pay per
/// connection in a test whose server has a deadline running).
pub fn wait_all_read_by_server(conns: &[Conn]) {
    let pairs: Vec<(SocketAddr, SocketAddr)> = conns
        .iter()
        .map(|c| {
            let tcp = c.stream.tcp();
            (tcp.peer_addr().unwrap(), tcp.local_addr().unwrap())
        })
        .collect();
    let unread = || -> Vec<(SocketAddr, Option<u64>)> {
        let rows = tcp_rows();
        pairs
            .iter()
            .map(|&(server, client)| (client, unread_bytes(&rows, server, client)))
            .filter(|&(_, unread)| unread != Some(0))
            .collect()
    };
    let read = eventually(IO_TIMEOUT, || unread().is_empty().then_some(()));
    assert!(
        read.is_some(),
        "the server did not read what was sent within {IO_TIMEOUT:?} (client, bytes unread): {:?}",
        unread()
    );
}

/// The bytes waiting to be read on the IPv4 TCP socket `local` connected to `remote`
/// among `rows` (see [`tcp_rows`]), or None if there is no such socket.
fn unread_bytes(rows: &[Vec<String>], local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let (local, remote) = (proc_net_addr(local), proc_net_addr(remote));
    rows.iter().find_map(|fields| {
        if fields[1] != local || fields[2] != remote {
            return None;
        }
        let (_, rx) = fields[4].split_once(':')?;
        u64::from_str_radix(rx, 16).ok()
    })
}

/// The rows of /proc/net/tcp (IPv4 TCP sockets: local and remote address, state,
/// `tx_queue:rx_queue`, ...) for the sockets whose local address is `local`.
fn tcp_sockets(local: SocketAddr) -> Vec<Vec<String>> {
    let local = proc_net_addr(local);
    tcp_rows()
        .into_iter()
        .filter(|fields| fields[1] == local)
        .collect()
}

/// Every row of /proc/net/tcp, split into its fields.
fn tcp_rows() -> Vec<Vec<String>> {
    let table = fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    table
        .lines()
        .skip(1)
        .map(|line| {
            line.split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|fields| fields.len() > 4)
        .collect()
}

/// An address as /proc/net/tcp writes it: the u32 the kernel holds (network
/// order) and the port, in hex.
fn proc_net_addr(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(a.ip().octets()),
            a.port()
        ),
        SocketAddr::V6(_) => panic!("/proc/net/tcp lists IPv4 sockets only, not {addr}"),
    }
}
