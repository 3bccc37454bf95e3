//! The server under test in either mode, and addresses to reach it.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Standalone,
    Inetd,
}

/// Options for starting `staticd`; `Server::builder(variant, root)` makes one.
#[derive(Clone)]
pub struct Builder {
    mode: Mode,
    /// The matrix cell the server is started for (its mode is `mode`).
    variant: Variant,
    root: PathBuf,
    binds: Vec<String>,
    port: u16,
    log_format: String,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    unprivileged: bool,
    nofile: Option<u64>,
    io_uring: bool,
    tls_files: Option<TlsFiles>,
    tls_client: Option<TlsClient>,
    plain: bool,
}

impl Builder {
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Builder {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Builder {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Standalone only: listen on these addresses (or `unix:PATH`) instead of 127.0.0.1.
    pub fn bind(mut self, addr: &str) -> Builder {
        self.binds.push(addr.to_string());
        self
    }

    /// Standalone only: listen on this port instead of one the kernel picks (a second
    /// server on a port with `--reuse-port`, say).
    pub fn port(mut self, port: u16) -> Builder {
        self.port = port;
        self
    }

    /// `--log-format`; the default here is `off`.
    pub fn log_format(mut self, format: &str) -> Builder {
        self.log_format = format.to_string();
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Builder {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Runs the server as uid/gid 65534 when the tests run as root, so that file
    /// permissions apply to it.
    pub fn unprivileged(mut self) -> Builder {
        self.unprivileged = true;
        self
    }

    /// Standalone only: serve with `--io-uring` (as every standalone server of the
    /// matrix's `uring` cell does).
    pub fn io_uring(mut self) -> Builder {
        self.io_uring = true;
        self
    }

    /// Serves TLS with these files (`--tls-cert`, `--tls-key`); the harness's clients
    /// speak TLS to it, as to the localhost certificate of [`Pki::shared`].
    pub fn tls_files(mut self, files: &TlsFiles) -> Builder {
        self.tls_files = Some(files.clone());
        self
    }

    /// The server speaks TLS by flags the test passes itself (`--tls-dir`, ...); the
    /// harness's clients use `client`. No certificate flags are added.
    pub fn tls_client(mut self, client: TlsClient) -> Builder {
        self.tls_client = Some(client);
        self
    }

    /// Cleartext even in a TLS cell of the matrix: for tests whose point is bytes on a
    /// plain TCP connection.
    pub fn plain(mut self) -> Builder {
        self.plain = true;
        self
    }

    /// The certificate files the server gets: the test's, or in a TLS cell the
    /// harness's localhost ones (unless the test chose its own TLS flags or none).
    fn cert_files(&self) -> Option<TlsFiles> {
        if self.tls_files.is_some() {
            return self.tls_files.clone();
        }
        (self.variant.is_tls() && !self.plain && self.tls_client.is_none())
            .then(|| Pki::shared().localhost().1.clone())
    }

    /// How the harness's clients talk to the server.
    fn client_tls(&self) -> Option<TlsClient> {
        self.tls_client
            .clone()
            .or_else(|| self.cert_files().map(|_| TlsClient::localhost()))
    }

    /// Lowers RLIMIT_NOFILE (soft and hard) of the server to `n`.
    pub fn nofile_limit(mut self, n: u64) -> Builder {
        self.nofile = Some(n);
        self
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(staticd_bin());
        cmd.arg("--root").arg(&self.root);
        match self.mode {
            Mode::Standalone => {
                cmd.arg("--port").arg(self.port.to_string());
                let binds = if self.binds.is_empty() {
                    vec!["127.0.0.1".to_string()]
                } else {
                    self.binds.clone()
                };
                for bind in binds {
                    cmd.arg("--bind").arg(bind);
                }
                if self.uses_io_uring() {
                    cmd.arg("--io-uring");
                }
            }
            Mode::Inetd => {
                cmd.arg("--inetd");
            }
        }
        cmd.arg("--log-format").arg(&self.log_format);
        if let Some(files) = self.cert_files() {
            cmd.args(files.args());
        }
        cmd.args(&self.args);
        for var in CLIENT_ADDRESS_VARS {
            cmd.env_remove(var);
        }
        without_staticd_env(&mut cmd);
        cmd.envs(self.envs.iter().map(|(k, v)| (k, v)));
        if self.unprivileged && rustix::process::geteuid().is_root() {
            cmd.uid(65534).gid(65534);
        }
        if let Some(n) = self.nofile {
            limit_nofile(&mut cmd, n);
        }
        cmd.stderr(Stdio::piped());
        cmd
    }

    /// Whether the server runs `--io-uring`: asked for, or a standalone server of the
    /// `uring` cell.
    fn uses_io_uring(&self) -> bool {
        self.mode == Mode::Standalone && (self.io_uring || self.variant.is_io_uring())
    }

    /// Whether the server will speak HTTP/2: not with `--io-uring` or `--no-http2`.
    fn speaks_h2(&self) -> bool {
        !self.uses_io_uring() && !self.args.iter().any(|a| a == "--no-http2")
    }

    /// Whether the harness's hyper clients speak HTTP/2 to it: in an HTTP/2 cell, to a
    /// server that speaks it.
    fn clients_h2(&self) -> bool {
        self.variant.is_h2() && self.speaks_h2()
    }

    /// Whether the server will speak HTTP/3: standalone on its event loop, with HTTPS
    /// (the harness's certificate or the test's TLS flags), not `--no-http3`.
    fn speaks_h3(&self) -> bool {
        self.mode == Mode::Standalone
            && !self.uses_io_uring()
            && self.client_tls().is_some()
            && !self.args.iter().any(|a| a == "--no-http3")
    }

    /// Whether the harness's clients speak HTTP/3 to it: in the HTTP/3 cell, to a
    /// server that speaks it (else they speak HTTP/1.1, over TLS if it has TLS).
    fn clients_h3(&self) -> bool {
        self.variant.is_h3() && self.speaks_h3()
    }

    pub fn start(self) -> Server {
        match self.mode {
            Mode::Standalone => self.start_standalone(),
            Mode::Inetd => self.start_inetd(),
        }
    }

    fn start_standalone(self) -> Server {
        let expected = self.binds.len().max(1);
        let tls = self.client_tls();
        let h3 = self.clients_h3();
        let mut cmd = self.command();
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        let mut child = ChildGuard::new(cmd.spawn().expect("spawn staticd"));
        let stderr = Lines::default();
        stderr.drain(child.take_stderr().unwrap());

        let listening = |lines: &[String]| {
            lines
                .iter()
                .filter(|l| l.starts_with("staticd: listening on "))
                .count()
        };
        // HTTP/3 starts after the TCP listeners; its clients wait for its line too.
        let quic =
            |lines: &[String]| !h3 || lines.iter().any(|l| l.starts_with("staticd: HTTP/3 on "));
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let ready = stderr.wait_for(Duration::from_millis(50), |l| {
                listening(l) >= expected && quic(l)
            });
            if ready.is_some() {
                break;
            }
            if let Some(status) = child.try_status() {
                // Give the drain thread a moment to pick up the last words.
                thread::sleep(Duration::from_millis(100));
                panic!(
                    "staticd exited ({}) before listening; stderr: {:#?}",
                    describe(status),
                    stderr.snapshot()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "staticd printed no `staticd: listening on` line (or, in the h3 cell, no \
                     `staticd: HTTP/3 on` line) within {IO_TIMEOUT:?}; stderr: {:#?}",
                    stderr.snapshot()
                );
            }
        }
        // Unix sockets are announced as `unix:PATH`; their tests know the path.
        let addrs = stderr
            .snapshot()
            .iter()
            .filter_map(|l| l.strip_prefix("staticd: listening on "))
            .filter(|a| !a.starts_with("unix:"))
            .map(|a| {
                a.trim()
                    .parse::<SocketAddr>()
                    .unwrap_or_else(|e| panic!("bad address in listening line {a:?}: {e}"))
            })
            .collect();
        Server {
            mode: Mode::Standalone,
            addrs,
            h2: self.clients_h2(),
            h3,
            io_uring: self.uses_io_uring(),
            variant: self.variant,
            tls,
            stderr,
            standalone: Some(child),
            inetd: None,
        }
    }

    fn start_inetd(self) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind test listener");
        let tls = self.client_tls();
        let h2 = self.clients_h2();
        let variant = self.variant;
        let addr = listener.local_addr().unwrap();
        let stderr = Lines::default();
        let children: Arc<Mutex<Vec<ChildGuard>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stderr, children, stop) = (stderr.clone(), children.clone(), stop.clone());
            thread::spawn(move || loop {
                let Ok((socket, _)) = listener.accept() else {
                    break;
                };
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                match self.spawn_inetd(socket, &stderr) {
                    Ok(child) => children.lock().unwrap().push(child),
                    Err(e) => stderr.push(format!("harness: cannot spawn staticd --inetd: {e}")),
                }
            })
        };
        Server {
            mode: Mode::Inetd,
            addrs: vec![addr],
            h2,
            h3: false,
            io_uring: false,
            variant,
            tls,
            stderr,
            standalone: None,
            inetd: Some(Acceptor {
                addr,
                stop,
                children,
                thread: Some(thread),
            }),
        }
    }

    /// Hands one accepted socket to a new `staticd --inetd` as stdin and stdout. The
    /// `Command` (holding the parent's copies of the socket) is dropped on return, so the
    /// child owns the connection alone.
    fn spawn_inetd(&self, socket: TcpStream, stderr: &Lines) -> io::Result<ChildGuard> {
        let write_half = socket.try_clone()?;
        let mut cmd = self.command();
        cmd.stdin(Stdio::from(OwnedFd::from(socket)))
            .stdout(Stdio::from(OwnedFd::from(write_half)));
        let mut child = cmd.spawn()?;
        stderr.drain(child.stderr.take().unwrap());
        Ok(ChildGuard::new(child))
    }
}

struct Acceptor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    children: Arc<Mutex<Vec<ChildGuard>>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept().
        let _ = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.children.lock().unwrap().clear();
    }
}

/// A running `staticd` (standalone), or the machinery that starts one per connection
/// (inetd). Dropping it kills every process it started.
pub struct Server {
    pub mode: Mode,
    addrs: Vec<SocketAddr>,
    /// Whether the harness's hyper clients speak HTTP/2 to it (an HTTP/2 cell, and the
    /// server speaks it).
    h2: bool,
    /// Whether the harness's clients speak HTTP/3 to it (the HTTP/3 cell, and the
    /// server speaks it).
    h3: bool,
    /// Whether it runs `--io-uring`.
    io_uring: bool,
    /// The matrix cell it was started for.
    variant: Variant,
    tls: Option<TlsClient>,
    stderr: Lines,
    standalone: Option<ChildGuard>,
    inetd: Option<Acceptor>,
}

impl Server {
    /// A server of `variant`'s cell (a [`Mode`] alone is its `h1` cell).
    pub fn builder(variant: impl Into<Variant>, root: &Path) -> Builder {
        let variant = variant.into();
        Builder {
            mode: variant.mode,
            variant,
            root: root.to_path_buf(),
            binds: Vec::new(),
            port: 0,
            log_format: "off".to_string(),
            args: Vec::new(),
            envs: Vec::new(),
            unprivileged: false,
            nofile: None,
            io_uring: false,
            tls_files: None,
            tls_client: None,
            plain: false,
        }
    }

    pub fn start(variant: impl Into<Variant>, root: &Docroot) -> Server {
        Server::builder(variant, root.path()).start()
    }

    /// The matrix cell it was started for.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Whether it runs `--io-uring` (asked for, or standalone in the `uring` cell).
    pub fn is_io_uring(&self) -> bool {
        self.io_uring
    }

    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Whether the harness speaks TLS to this server.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// How to reach the server (address, TLS), to hand to other threads.
    pub fn connector(&self) -> Connector {
        self.connector_to(self.addr())
    }

    /// [`Server::connector`] for another of its addresses.
    pub fn connector_to(&self, addr: SocketAddr) -> Connector {
        let mut connector = Connector::new(addr, self.tls.clone());
        if self.h2 {
            connector.proto = Proto::Http2;
        }
        if self.h3 {
            connector.proto = Proto::Http3;
        }
        connector
    }

    /// `http://ADDR/path`, or `https://ADDR/path` over TLS.
    pub fn url(&self, path: &str) -> String {
        self.connector().url(path)
    }

    pub fn stderr(&self) -> &Lines {
        &self.stderr
    }

    /// A raw connection (over TLS to a TLS server).
    pub fn connect(&self) -> Conn {
        self.connector().connect()
    }

    /// A raw connection whose source address is `source` (any 127.0.0.0/8 address).
    pub fn connect_from(&self, source: IpAddr) -> Conn {
        self.connector().connect_from(source)
    }

    /// A client connection (over TLS to a TLS server); HTTP/2 in an HTTP/2 cell, HTTP/3
    /// in the HTTP/3 cell.
    pub fn client(&self) -> Client {
        self.connector().client()
    }

    /// A hyper HTTP/1.1 client connection even in an HTTP/2 or HTTP/3 cell: for checks of
    /// what only HTTP/1.1 has (reason phrases, `Connection`, persistence rules). Say why
    /// where it is used.
    pub fn client_http1(&self) -> Client {
        self.connector().client_proto(Proto::Http1)
    }

    /// Whether [`Server::client`] (and so [`Server::get`] and [`Server::exchange`]) speaks
    /// HTTP/2: in an HTTP/2 cell, to a server that speaks it (not `--io-uring`, not
    /// `--no-http2`).
    pub fn is_h2(&self) -> bool {
        self.h2
    }

    /// Whether [`Server::client`] (and so [`Server::get`] and [`Server::exchange`]) speaks
    /// HTTP/3: in the HTTP/3 cell, to a server that speaks it (standalone, HTTPS, not
    /// `--io-uring`, not `--no-http3`).
    pub fn is_h3(&self) -> bool {
        self.h3
    }

    /// Whether [`Server::client`] speaks HTTP/2 or HTTP/3: heads as fields (no reason
    /// phrase, no connection fields), many requests at once on one connection.
    pub fn is_multiplexed(&self) -> bool {
        self.h2 || self.h3
    }

    /// How the access log names the version of a request from [`Server::client`] or
    /// [`Server::exchange`]: `HTTP/2.0` in an HTTP/2 cell, `HTTP/3.0` in the HTTP/3 cell,
    /// else `HTTP/1.1`.
    pub fn log_version(&self) -> &'static str {
        if self.is_h2() {
            "HTTP/2.0"
        } else if self.is_h3() {
            "HTTP/3.0"
        } else {
            "HTTP/1.1"
        }
    }

    /// One request on a fresh hyper connection.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> HResponse {
        self.client().request(method, path, headers)
    }

    pub fn get(&self, path: &str) -> HResponse {
        self.request("GET", path, &[])
    }

    /// A GET with this Authorization value, if any.
    pub fn get_as(&self, path: &str, authorization: Option<&str>) -> HResponse {
        let headers: Vec<(&str, &str)> = authorization
            .map(|a| ("authorization", a))
            .into_iter()
            .collect();
        self.request("GET", path, &headers)
    }

    /// One request, written as HTTP/1.1 text (e.g. by [`request`]), on a fresh
    /// connection: for tests of what a request means rather than of HTTP/1.1's framing.
    /// It goes as those bytes on a raw [`Conn`]; in an HTTP/2 (HTTP/3) cell an HTTP/1.1
    /// request goes over HTTP/2 (HTTP/3) instead ([`to_h2_request`]), and the answer
    /// comes back as a [`Response`] whose `version` is `HTTP/2.0` (`HTTP/3.0`).
    pub fn exchange(&self, raw: impl AsRef<[u8]>) -> Response {
        let raw = raw.as_ref();
        if self.is_multiplexed() {
            if let Some(req) = to_h2_request(raw) {
                return self.client().send(req).to_raw();
            }
        }
        self.connect().roundtrip(raw)
    }

    /// The standalone process. Panics in inetd mode.
    pub fn process(&mut self) -> &mut ChildGuard {
        self.standalone
            .as_mut()
            .expect("only a standalone server has a single process")
    }

    /// Inetd mode: sends `signal` to every per-connection process started so far.
    pub fn signal_inetd(&self, signal: rustix::process::Signal) {
        let acceptor = self.inetd.as_ref().expect("only in inetd mode");
        for child in acceptor.children.lock().unwrap().iter() {
            child.signal(signal);
        }
    }

    /// Inetd mode: waits until `n` per-connection processes have been started and have
    /// exited, and returns their exit statuses in start order.
    pub fn wait_inetd_exits(&self, n: usize) -> Vec<ExitStatus> {
        let acceptor = self.inetd.as_ref().expect("only in inetd mode");
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            {
                let mut children = acceptor.children.lock().unwrap();
                let statuses: Vec<ExitStatus> =
                    children.iter_mut().filter_map(|c| c.try_status()).collect();
                if statuses.len() >= n {
                    return statuses;
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "fewer than {n} staticd --inetd processes exited within {IO_TIMEOUT:?}; stderr: {:#?}",
                    self.stderr.snapshot()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// After a connection ended abnormally: check that the server is still healthy. In
    /// standalone mode the process must still be running and serve a new request; in inetd
    /// mode the connection's process must have exited, and not by a signal.
    pub fn assert_survived(&mut self, probe_path: &str) {
        match self.mode {
            Mode::Standalone => {
                if let Some(status) = self.process().try_status() {
                    panic!("staticd died: {}", describe(status));
                }
                let resp = self.get(probe_path);
                assert_eq!(resp.status, 200, "server no longer serves {probe_path}");
            }
            Mode::Inetd => {
                let statuses = self.wait_inetd_exits(1);
                assert!(
                    statuses[0].signal().is_none(),
                    "staticd --inetd {}",
                    describe(statuses[0])
                );
            }
        }
    }
}

pub fn connect_from(source: IpAddr, dest: SocketAddr) -> TcpStream {
    use rustix::net::{AddressFamily, SocketType};
    let family = if source.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket(family, SocketType::STREAM, None).expect("socket");
    rustix::net::bind(&fd, &SocketAddr::new(source, 0)).expect("bind source address");
    rustix::net::connect(&fd, &dest).expect("connect");
    TcpStream::from(fd)
}

/// Binds 127.0.0.1:0, notes the port and frees it again.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
