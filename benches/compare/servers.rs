//! The servers compared: how each is found, configured, started, checked
//! and stopped. Every config is written here, into a temporary directory;
//! benches/README.md says why each setting is what it is.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use serde::Serialize;

use crate::docroot::{self, Docroot};
use crate::fetch::Fetched;
use crate::procstat;
use crate::programs::which;
use crate::reaper;
use crate::tls::{self, TlsFiles};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Staticd,
    StaticdUring,
    StaticdInetd,
    Nginx,
    Lighttpd,
    Apache2,
    H2o,
    Caddy,
    /// static-web-server (Rust, hyper and tokio).
    Sws,
    Ceiling,
    /// eris, the maintained fork of fnord, under tcpserver: staticd-inetd's
    /// peer, measured in the inetd cell and seed table 1, not the matrix.
    Eris,
}

/// The matrix's servers in table order: staticd first, the peers, the
/// ceiling last. Not eris: it is only staticd-inetd's peer.
pub const ALL: [Kind; 10] = [
    Kind::Staticd,
    Kind::StaticdUring,
    Kind::StaticdInetd,
    Kind::Nginx,
    Kind::Lighttpd,
    Kind::Apache2,
    Kind::H2o,
    Kind::Caddy,
    Kind::Sws,
    Kind::Ceiling,
];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Staticd => "staticd",
            Kind::StaticdUring => "staticd-uring",
            Kind::StaticdInetd => "staticd-inetd",
            Kind::Nginx => "nginx",
            Kind::Lighttpd => "lighttpd",
            Kind::Apache2 => "apache2",
            Kind::H2o => "h2o",
            Kind::Caddy => "caddy",
            Kind::Sws => "static-web-server",
            Kind::Ceiling => "ceiling",
            Kind::Eris => "eris",
        }
    }

    /// Another project's server: what staticd's ratio is taken against.
    pub fn is_peer(self) -> bool {
        matches!(
            self,
            Kind::Nginx | Kind::Lighttpd | Kind::Apache2 | Kind::H2o | Kind::Caddy | Kind::Sws
        )
    }

    /// A peer's program, the flag that prints its version, and how to
    /// install it (for the skip line when it is missing).
    pub fn program(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Kind::Nginx => Some(("nginx", "-v", "apt-get install nginx-light")),
            Kind::Lighttpd => Some(("lighttpd", "-v", "apt-get install lighttpd")),
            Kind::Apache2 => Some(("apache2", "-v", "apt-get install apache2")),
            Kind::H2o => Some(("h2o", "--version", "apt-get install h2o")),
            Kind::Caddy => Some(("caddy", "version", "apt-get install caddy")),
            Kind::Sws => Some((
                "static-web-server",
                "--version",
                "cargo install static-web-server --version 2.44.1 --locked",
            )),
            _ => None,
        }
    }

    /// Why a peer cannot run here at all (its program is not installed),
    /// whatever the protocol: the run says so once, not per instance.
    pub fn missing(self) -> Option<String> {
        if self == Kind::Eris {
            return eris_path().is_none().then(|| {
                format!(
                    "eris is not installed (not at {}, not on PATH; its source and build command are in ../shared/tools/eris/)",
                    Path::new(ERIS_BUILT).display()
                )
            });
        }
        let (program, _, install) = self.program()?;
        which(program)
            .is_none()
            .then(|| format!("{program} is not installed ({install})"))
    }

    pub fn is_staticd(self) -> bool {
        matches!(
            self,
            Kind::Staticd | Kind::StaticdUring | Kind::StaticdInetd
        )
    }

    /// Run under tcpserver: a process per connection.
    pub fn per_connection(self) -> bool {
        matches!(self, Kind::StaticdInetd | Kind::Eris)
    }

    /// Whether it can hold `connections` open at once. A process per
    /// connection: 10,000 of them would measure fork(2) and the machine's
    /// process limits, not a web server.
    pub fn holds(self, connections: u32) -> bool {
        !self.per_connection() || connections <= INETD_MAX_CONNECTIONS
    }

    /// Whether the harness runs it over HTTPS too. Not staticd-uring
    /// (staticd refuses TLS with --io-uring), not the ceiling (which has
    /// no TLS: a ceiling for HTTPS would be mostly rustls's own cost), not
    /// eris (no TLS of its own).
    pub fn speaks_tls(self) -> bool {
        !matches!(self, Kind::StaticdUring | Kind::Ceiling | Kind::Eris)
    }

    /// Whether the harness starts an instance of it for `proto`; Err says
    /// why not (its HTTP/2 cells are then n/a, not failures).
    pub fn speaks(self, proto: Proto) -> Result<(), &'static str> {
        match proto {
            Proto::Http => Ok(()),
            Proto::Https if self.speaks_tls() => Ok(()),
            Proto::Https => Err("not run over HTTPS"),
            // Its cleartext listener is HTTP/1.1 only (h2load's prior-
            // knowledge preface fails there); HTTP/2 needs --http2, TLS.
            Proto::H2c if self == Kind::Sws => Err("static-web-server has no h2c"),
            Proto::H2 | Proto::H2c => match self {
                Kind::StaticdUring => Err("--io-uring serves HTTP/1.1 only"),
                Kind::Apache2 => Err("not one of issue 11's HTTP/2 peers"),
                Kind::Ceiling | Kind::Eris => Err("HTTP/1.1 only"),
                _ => Ok(()),
            },
            // Issue 30's peers for HTTP/3: Caddy (`protocols h1 h2 h3`)
            // and staticd's default HTTPS (h3 on the same port over UDP).
            Proto::H3 => match self {
                Kind::Staticd | Kind::Caddy => Ok(()),
                Kind::StaticdUring => Err("--io-uring serves HTTP/1.1 only"),
                Kind::StaticdInetd => Err("inetd mode cannot carry QUIC"),
                Kind::Nginx => Err("n/a: Debian 12's nginx-light has no HTTP/3 module"),
                Kind::H2o => Err("n/a: Debian 12's h2o 2.2.5 has no HTTP/3"),
                Kind::Lighttpd => Err("n/a: lighttpd has no HTTP/3"),
                Kind::Apache2 => Err("n/a: apache2 has no HTTP/3"),
                Kind::Sws => Err("n/a: static-web-server has no HTTP/3"),
                Kind::Ceiling | Kind::Eris => Err("HTTP/1.1 only"),
            },
        }
    }
}

/// What an instance of a server speaks on its port. A server has one
/// instance (its own process and port) per protocol it is measured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// HTTP/1.1 in the clear.
    Http,
    /// HTTP/1.1 over TLS (no ALPN: wrk offers none).
    Https,
    /// HTTP/2 over TLS, chosen by ALPN.
    H2,
    /// HTTP/2 in the clear, with prior knowledge.
    H2c,
    /// HTTP/3 over QUIC, on the instance's port number over UDP (its TCP
    /// side serves HTTPS, which the harness checks the files over).
    H3,
}

/// Every protocol, in table order.
pub const PROTOS: [Proto; 5] = [Proto::Http, Proto::Https, Proto::H2, Proto::H2c, Proto::H3];

impl Proto {
    /// Over TLS.
    pub fn tls(self) -> bool {
        matches!(self, Proto::Https | Proto::H2 | Proto::H3)
    }

    pub fn http2(self) -> bool {
        matches!(self, Proto::H2 | Proto::H2c)
    }

    /// HTTP/2 or HTTP/3: streams per connection are part of a cell.
    pub fn multiplexed(self) -> bool {
        matches!(self, Proto::H2 | Proto::H2c | Proto::H3)
    }

    /// For serde: the HTTP/1.1 records keep the fields they had (`https`
    /// says which of the two).
    pub fn is_http1(&self) -> bool {
        matches!(self, Proto::Http | Proto::Https)
    }

    /// What follows a server's name in labels: "", " (https)", " (h2)".
    pub fn suffix(self) -> &'static str {
        match self {
            Proto::Http => "",
            Proto::Https => " (https)",
            Proto::H2 => " (h2)",
            Proto::H2c => " (h2c)",
            Proto::H3 => " (h3)",
        }
    }

    /// The name of the instance's scratch directory after the server's.
    fn dir_suffix(self) -> &'static str {
        match self {
            Proto::Http => "",
            Proto::Https => "-https",
            Proto::H2 => "-h2",
            Proto::H2c => "-h2c",
            Proto::H3 => "-h3",
        }
    }
}

/// Where the project's shared tools put eris, built from its source
/// (../shared/tools/eris/README.md): beside the repository.
const ERIS_BUILT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/bin/eris");

/// eris: the shared build, else on PATH.
pub fn eris_path() -> Option<PathBuf> {
    // Without the `..`, for the tables' command lines.
    if let Some(built) = fs::canonicalize(ERIS_BUILT).ok().filter(|p| p.is_file()) {
        return Some(built);
    }
    which("eris")
}

/// eris's version: `eris -v` prints "eris/" and the first line of its
/// CHANGES (a tab between).
pub fn eris_version(eris: &Path) -> String {
    version_of(eris, "-v")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The most connections staticd-inetd is measured with (tcpserver `-c`).
pub const INETD_MAX_CONNECTIONS: u32 = 2000;

/// What every server is started with.
pub struct Setup<'a> {
    pub docroot: &'a Docroot,
    pub sizes: &'a [u64],
    pub cores: usize,
    pub staticd: &'a Path,
    /// This executable, which runs the ceiling when given its flag.
    pub harness: &'a Path,
    /// The open-file limit the servers inherit (soft = hard).
    pub fd_limit: u64,
    /// The most connections any server will be asked to hold at once in
    /// this run (the largest wrk concurrency, the idle-memory count).
    pub max_connections: u32,
    /// The certificate and key the HTTPS servers get (None: no HTTPS).
    pub tls: Option<&'a TlsFiles>,
}

impl Setup<'_> {
    /// A connection limit for the peers' configs: well above the most
    /// this run opens, within what the descriptor limit allows.
    fn connection_cap(&self) -> u64 {
        (u64::from(self.max_connections) + 2000)
            .max(10_000)
            .min(self.fd_limit.saturating_sub(100).max(1024))
    }
}

/// For results.json: what ran and how.
#[derive(Clone, Debug, Serialize)]
pub struct Description {
    pub name: String,
    /// Listening with TLS: the HTTPS (or h2) instance of the server.
    pub https: bool,
    /// HTTP/2 instances only: h2 (over TLS) or h2c.
    #[serde(skip_serializing_if = "Proto::is_http1")]
    pub proto: Proto,
    /// What the harness's TLS client negotiated with it (version, cipher
    /// suite, key exchange; for h2, the ALPN protocol); wrk's OpenSSL
    /// offers the same first.
    pub tls: Option<String>,
    pub version: String,
    pub command: String,
    pub config: Option<String>,
}

/// A started server; stopped (its whole process group) when dropped.
pub struct Server {
    pub kind: Kind,
    pub proto: Proto,
    pub about: Description,
    /// (size, port): the ceiling has a port per size, the others one port.
    ports: Vec<(u64, u16)>,
    child: Child,
    dir: PathBuf,
    /// Over TLS: a client that trusts its certificate (no resumption; for
    /// h2, offering ALPN h2 only).
    tls_client: Option<Arc<ClientConfig>>,
}

impl Server {
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether this instance speaks TLS (HTTPS or h2).
    pub fn https(&self) -> bool {
        self.proto.tls()
    }

    /// For HTTPS: a client config that trusts the server's certificate.
    pub fn tls_client(&self) -> Option<&Arc<ClientConfig>> {
        self.tls_client.as_ref()
    }

    /// "nginx", "nginx (https)", "nginx (h2)" or "nginx (h2c)".
    pub fn label(&self) -> String {
        format!("{}{}", self.name(), self.proto.suffix())
    }

    /// The (first) address it listens on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports.first().map_or(0, |&(_, p)| p)))
    }

    pub fn url(&self, size: u64) -> String {
        let port = self
            .ports
            .iter()
            .find(|&&(s, _)| s == size || s == 0)
            .map_or(0, |&(_, p)| p);
        let scheme = if self.https() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{port}{}", docroot::url_path(size))
    }

    /// The process whose tree is measured.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Ends what is left of the last load: tcpserver's per-connection
    /// processes (staticd's, eris's), which would otherwise go on starting up (a few
    /// milliseconds of CPU each) for connections the client has dropped,
    /// and burn CPU while the next server is measured. Other servers keep
    /// no per-connection processes.
    pub fn reap_connections(&self) {
        if !self.kind.per_connection() {
            return;
        }
        let root = self.pid();
        for pid in procstat::tree(root).into_iter().filter(|&p| p != root) {
            // SAFETY: kill(2) on a descendant of a process we started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    /// Waits, at most `limit`, until the server uses no more CPU: the
    /// connections of the last load are all closed. For staticd-inetd,
    /// connections still in the listen queue get accepted (and forked)
    /// after the client has gone, so those are reaped until none come.
    pub fn settle(&self, limit: Duration) {
        let root = self.pid();
        let deadline = Instant::now() + limit;
        let mut before = procstat::cpu_ticks(root);
        loop {
            self.reap_connections();
            if Instant::now() >= deadline {
                return;
            }
            thread::sleep(Duration::from_millis(25));
            let now = procstat::cpu_ticks(root);
            if now == before {
                return;
            }
            before = now;
        }
    }

    /// None while running; otherwise why it is not.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!("exited ({status}){}", self.logs())),
            Err(e) => Some(format!("cannot wait: {e}")),
        }
    }

    /// The tail of what the server wrote to its error log and stderr.
    fn logs(&self) -> String {
        let mut out = String::new();
        for name in ["stderr.log", "error.log"] {
            let Ok(text) = fs::read_to_string(self.dir.join(name)) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            for line in &lines[lines.len().saturating_sub(5)..] {
                let _ = write!(out, "\n      {name}: {line}");
            }
        }
        out
    }

    fn stop(&mut self) {
        let group = self.child.id() as libc::pid_t;
        // SAFETY: signalling the process group this harness created.
        unsafe { libc::kill(-group, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of the group (tcpserver's children, workers
        // that ignored SIGTERM) goes too.
        // SAFETY: as above; ESRCH when the group is already gone.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
        reaper::forget(self.child.id());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Hands out free loopback ports outside the kernel's ephemeral range, so
/// that the clients' own connections never take one first.
pub struct Ports {
    next: u16,
    end: u16,
}

impl Ports {
    pub fn new() -> Ports {
        let (lo, hi) = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| {
                let mut it = s.split_whitespace().map(|n| n.parse::<u16>().ok());
                Some((it.next()??, it.next()??))
            })
            .unwrap_or((32768, 60999));
        let (start, end) = if hi < 64_000 {
            (hi + 1, 65_535)
        } else {
            (lo.saturating_sub(4000).max(1024), lo)
        };
        // Spread concurrent harness runs apart.
        let offset = (std::process::id() % 256) as u16 * 8;
        let next = if start.saturating_add(offset) < end.saturating_sub(64) {
            start + offset
        } else {
            start
        };
        Ports { next, end }
    }

    pub fn take(&mut self) -> Result<u16, String> {
        while self.next < self.end {
            let port = self.next;
            self.next += 1;
            // Free over UDP too: the h3 instances listen on both.
            if TcpListener::bind(("127.0.0.1", port)).is_ok()
                && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok()
            {
                return Ok(port);
            }
        }
        Err("no free port left".into())
    }
}

/// The versions of the peers installed here, for the machine record
/// (whether or not this run started them).
pub fn peer_versions() -> Vec<(&'static str, String)> {
    ALL.iter()
        .filter_map(|&k| Some((k.name(), peer_version(k, &which(k.program()?.0)?))))
        .collect()
}

/// A peer's version as its flag prints it; Caddy's ("2.6.2") and
/// static-web-server's ("Version:      2.44.1") with the name put first.
fn peer_version(kind: Kind, program: &Path) -> String {
    let flag = kind.program().map_or("--version", |p| p.1);
    let v = version_of(program, flag);
    match kind {
        Kind::Caddy | Kind::Sws => {
            let number = v.trim_start_matches("Version:").trim();
            format!("{} {number}", kind.name())
        }
        _ => v,
    }
}

/// The first line a program prints about its version (on stdout or stderr).
pub fn version_of(program: &Path, arg: &str) -> String {
    let out = Command::new(program).arg(arg).stdin(Stdio::null()).output();
    let Ok(out) = out else {
        return "unknown".into();
    };
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

const APACHE_MODULES: &str = "/usr/lib/apache2/modules";

/// The TLS 1.2 suites every OpenSSL-based peer is given: ECDHE-ECDSA with
/// an AEAD only, as staticd (rustls) has. TLS 1.3's suites are OpenSSL's
/// default three, all AEAD, as rustls's.
const TLS12_CIPHERS: &str =
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256";

const LIGHTTPD_MODULES: &str = "/usr/lib/lighttpd";

/// The program a kind needs, or why it cannot run here.
pub fn locate(kind: Kind, setup: &Setup, proto: Proto) -> Result<PathBuf, String> {
    let need = |p: &str| which(p).ok_or_else(|| format!("{p} is not installed"));
    kind.speaks(proto)?;
    if proto.tls() {
        let module = match kind {
            Kind::Lighttpd => Some(Path::new(LIGHTTPD_MODULES).join("mod_openssl.so")),
            Kind::Apache2 => Some(Path::new(APACHE_MODULES).join("mod_ssl.so")),
            _ => None,
        };
        if let Some(m) = module.filter(|m| !m.is_file()) {
            return Err(format!(
                "{} is missing{}",
                m.display(),
                if kind == Kind::Lighttpd {
                    " (apt-get install lighttpd-mod-openssl)"
                } else {
                    ""
                }
            ));
        }
    }
    match kind {
        Kind::Staticd => Ok(setup.staticd.to_path_buf()),
        Kind::StaticdUring => {
            let help = Command::new(setup.staticd)
                .arg("--help")
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", setup.staticd.display()))?;
            if String::from_utf8_lossy(&help.stdout).contains("--io-uring") {
                Ok(setup.staticd.to_path_buf())
            } else {
                Err("staticd built without --features uring (no --io-uring in --help)".into())
            }
        }
        Kind::StaticdInetd => need("tcpserver").map(|_| setup.staticd.to_path_buf()),
        Kind::Eris => {
            need("tcpserver")?;
            eris_path().ok_or_else(|| Kind::Eris.missing().unwrap_or_default())
        }
        Kind::Nginx => need("nginx"),
        Kind::Lighttpd => need("lighttpd"),
        Kind::Apache2 => {
            let p = need("apache2")?;
            let mpm = Path::new(APACHE_MODULES).join("mod_mpm_event.so");
            if mpm.is_file() {
                Ok(p)
            } else {
                Err(format!("{} is missing", mpm.display()))
            }
        }
        Kind::H2o => need("h2o"),
        Kind::Caddy | Kind::Sws => match kind.missing() {
            Some(why) => Err(why),
            None => need(kind.program().map_or("", |p| p.0)),
        },
        Kind::Ceiling => Ok(setup.harness.to_path_buf()),
    }
}

/// Starts one server's instance for `proto`, waits until it answers and
/// checks that it serves every file whole and correct (over HTTP/2 for the
/// h2 and h2c instances). Err says why it is skipped.
pub fn start(kind: Kind, setup: &Setup, ports: &mut Ports, proto: Proto) -> Result<Server, String> {
    let tls = if proto.tls() {
        Some(setup.tls.ok_or("no certificate")?)
    } else {
        None
    };
    let h2 = proto.http2();
    let program = locate(kind, setup, proto)?;
    let dir = setup
        .docroot
        .scratch()
        .join(format!("{}{}", kind.name(), proto.dir_suffix()));
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let port = ports.take()?;
    let root = setup.docroot.root();
    let cores = setup.cores;
    let mut server_ports = vec![(0, port)];
    let (mut cmd, config, version) = match kind {
        Kind::Staticd | Kind::StaticdUring => {
            let mut c = Command::new(&program);
            c.arg("--root").arg(&root).args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                // Otherwise the defaults, as docs/performance.md asks of a
                // comparison: the load clients connect from 127.0.0.1,
                // which the per-address bound does not count.
                "--log-format",
                "off",
            ]);
            if let Some(t) = tls {
                c.arg("--tls-cert")
                    .arg(&t.cert)
                    .arg("--tls-key")
                    .arg(&t.key);
            }
            let mut version = version_of(&program, "--version");
            if kind == Kind::StaticdUring {
                c.arg("--io-uring");
                version.push_str(" with --io-uring");
            }
            (c, None, version)
        }
        Kind::StaticdInetd => {
            let mut c = tcpserver(port, &program)?;
            c.args(["--inetd", "--root"])
                .arg(&root)
                .args(["--log-format", "off"]);
            if let Some(t) = tls {
                // Every connection is a new process: without a shared
                // ticket key no session could be resumed.
                c.arg("--tls-cert")
                    .arg(&t.cert)
                    .arg("--tls-key")
                    .arg(&t.key)
                    .arg("--tls-ticket-key")
                    .arg(&t.ticket_key);
            }
            (
                c,
                None,
                format!(
                    "{} under ucspi-tcp tcpserver",
                    version_of(&program, "--version")
                ),
            )
        }
        // As fnord is run: from the directory of its virtual hosts, whose
        // `default` is the document root. It logs a line per request to
        // stderr (it has no switch for that), which goes to stderr.log.
        Kind::Eris => (
            tcpserver(port, &program)?,
            None,
            format!("{} under ucspi-tcp tcpserver", eris_version(&program)),
        ),
        Kind::Nginx => {
            let conf = nginx_conf(&dir, &root, port, cores, setup, tls, h2);
            let path = write_config(&dir, "nginx.conf", &conf)?;
            let mut c = Command::new(&program);
            c.arg("-p")
                .arg(&dir)
                .arg("-e")
                .arg(dir.join("error.log"))
                .arg("-c")
                .arg(&path);
            (c, Some(conf), peer_version(kind, &program))
        }
        Kind::Lighttpd => {
            let conf = lighttpd_conf(&dir, &root, port, cores, setup, tls, h2);
            let path = write_config(&dir, "lighttpd.conf", &conf)?;
            let mut c = Command::new(&program);
            c.arg("-D").arg("-f").arg(&path);
            (c, Some(conf), peer_version(kind, &program))
        }
        Kind::Apache2 => {
            let conf = apache_conf(&dir, &root, port, cores, setup, tls);
            let path = write_config(&dir, "apache2.conf", &conf)?;
            // A restarted apache2 refuses to start while its old pid file
            // names a process that exists (the pid may have been reused).
            let _ = fs::remove_file(dir.join("apache2.pid"));
            let mut c = Command::new(&program);
            c.arg("-d")
                .arg(&dir)
                .arg("-f")
                .arg(&path)
                .arg("-DFOREGROUND");
            (c, Some(conf), peer_version(kind, &program))
        }
        Kind::H2o => {
            // Run as root, h2o switches to nobody before it opens its logs.
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o777))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            let conf = h2o_conf(&dir, &root, port, cores, setup, tls);
            let path = write_config(&dir, "h2o.conf", &conf)?;
            let mut c = Command::new(&program);
            c.arg("-c").arg(&path);
            (c, Some(conf), peer_version(kind, &program))
        }
        Kind::Caddy => {
            let conf = caddyfile(&root, port, tls, proto);
            let path = write_config(&dir, "Caddyfile", &conf)?;
            let mut c = Command::new(&program);
            c.arg("run")
                .arg("--config")
                .arg(&path)
                .args(["--adapter", "caddyfile"]);
            // Caddy 2.6 keeps autosave.json under XDG_CONFIG_HOME and its
            // storage (a local CA it provisions whether used or not) under
            // XDG_DATA_HOME, else under HOME: all in the instance's
            // scratch directory, never the user's. GOMAXPROCS unset: the
            // Go runtime runs on every core, as the others have a worker
            // per core.
            let home = dir.join("home");
            c.env("HOME", &home)
                .env("XDG_CONFIG_HOME", home.join("config"))
                .env("XDG_DATA_HOME", home.join("data"))
                .env_remove("GOMAXPROCS");
            (c, Some(conf), peer_version(kind, &program))
        }
        Kind::Sws => {
            let mut c = Command::new(&program);
            c.arg("--root")
                .arg(&root)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args([
                    // Its default, said: one worker thread per core, as
                    // the others have a worker per core.
                    "--threads-multiplier",
                    "1",
                    "--log-level",
                    "error",
                    // On by default: a Cache-Control header on every
                    // response that no other server sends.
                    "--cache-control-headers",
                    "false",
                    // Off by default, but turned on with --http2 unless
                    // given: HSTS and two more headers on every response.
                    "--security-headers",
                    "false",
                ]);
            if let Some(t) = tls {
                // Its only TLS: --http2 offers h2 and http/1.1 by ALPN,
                // and a client that offers none (wrk, the harness's
                // HTTPS client) gets HTTP/1.1; so the HTTPS and the h2
                // instance have the same flags.
                c.args(["--http2", "true", "--http2-tls-cert"])
                    .arg(&t.cert)
                    .arg("--http2-tls-key")
                    .arg(&t.key);
            }
            // Its current directory (the instance's scratch directory) has
            // no sws.toml or config.toml to read, and no SERVER_* variable
            // of the harness's environment reaches it.
            for (name, _) in std::env::vars_os() {
                if name.to_string_lossy().starts_with("SERVER_") {
                    c.env_remove(name);
                }
            }
            (
                c,
                None,
                format!(
                    "{}; no sendfile (hyper writes what tokio read)",
                    peer_version(kind, &program)
                ),
            )
        }
        Kind::Ceiling => {
            server_ports = vec![(setup.sizes[0], port)];
            for &size in &setup.sizes[1..] {
                server_ports.push((size, ports.take()?));
            }
            let spec: Vec<String> = server_ports
                .iter()
                .map(|(s, p)| format!("{p}:{s}"))
                .collect();
            let mut c = Command::new(&program);
            c.arg(crate::ceiling::FLAG)
                .arg(cores.to_string())
                .arg(spec.join(","));
            (
                c,
                None,
                "canned responses (benches/compare/ceiling.rs)".to_string(),
            )
        }
    };
    let stderr = fs::File::create(dir.join("stderr.log")).map_err(|e| e.to_string())?;
    let stdout = stderr.try_clone().map_err(|e| e.to_string())?;
    let cwd = if kind == Kind::Eris {
        setup.docroot.vhosts()
    } else {
        dir.clone()
    };
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .current_dir(cwd)
        .process_group(0);
    reaper::die_with_parent(&mut cmd);
    let command = describe_command(&cmd);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    reaper::watch(child.id());
    let mut server = Server {
        kind,
        proto,
        about: Description {
            name: kind.name().to_string(),
            https: proto.tls(),
            proto,
            tls: None,
            version,
            command,
            config,
        },
        ports: server_ports,
        child,
        dir,
        tls_client: tls.map(|t| if h2 { t.h2_client() } else { t.client(false) }),
    };
    wait_ready(&mut server, setup.sizes[0]).map_err(|why| {
        if kind == Kind::StaticdUring && why.contains("--features uring") {
            format!("staticd built without --features uring ({why})")
        } else {
            why
        }
    })?;
    for &size in setup.sizes {
        let expected = if kind == Kind::Ceiling {
            None
        } else {
            Some(setup.docroot.file(size))
        };
        check_file(
            &server.url(size),
            proto,
            server.tls_client.as_ref(),
            size,
            expected.as_deref(),
        )
        .map_err(|e| format!("serves {} wrongly: {e}", docroot::label(size)))?;
        if proto == Proto::H3 {
            // Over HTTP/3 itself: the h3 cells' client's own GET, status
            // and the file byte for byte.
            h3_probe(&server.url(size), size, expected.as_deref(), tls)
                .map_err(|e| format!("HTTP/3, {}: {e}", docroot::label(size)))?;
        }
    }
    if proto == Proto::H3 {
        if let Some(config) = server.tls_client.clone() {
            let addr: SocketAddr = format!("127.0.0.1:{port}")
                .parse()
                .map_err(|e| format!("{e}"))?;
            let probe = tls::connect(&addr, &config, Duration::from_secs(5))
                .map_err(|e| format!("TLS handshake: {e}"))?;
            server.about.tls = Some(format!(
                "{}; h3 over QUIC (TLS 1.3, ALPN h3) by h3load",
                tls::negotiated(&probe)
            ));
        }
    } else if h2 {
        // What the harness's client negotiated: TLS and ALPN, or h2c.
        let (_, negotiated) =
            crate::fetch::get(&server.url(setup.sizes[0]), server.tls_client.as_ref())
                .map_err(|e| format!("HTTP/2: {e}"))?;
        server.about.tls = Some(negotiated);
    } else if let Some(config) = server.tls_client.clone() {
        let addr: SocketAddr = format!("127.0.0.1:{port}")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let probe = tls::connect(&addr, &config, Duration::from_secs(5))
            .map_err(|e| format!("TLS handshake: {e}"))?;
        server.about.tls = Some(tls::negotiated(&probe));
    }
    Ok(server)
}

/// One GET over HTTP/3 with h3load (a QUIC connection of its own): Ok if
/// the answer was a 200 with the file's bytes.
fn h3_probe(
    url: &str,
    size: u64,
    expected: Option<&Path>,
    tls: Option<&TlsFiles>,
) -> Result<(), String> {
    let tls = tls.ok_or("no certificate")?;
    let want = expected
        .map(fs::read)
        .transpose()
        .map_err(|e| e.to_string())?;
    #[cfg(feature = "http3")]
    return crate::h3load::probe(url, size, want.as_deref(), &tls.h3_client());
    #[cfg(not(feature = "http3"))]
    {
        let _ = (url, size, want, tls);
        Err("the harness was built without feature http3".into())
    }
}

/// `tcpserver -RHl0 -b 4096 -c 10000 127.0.0.1 PORT program`: no ident or
/// DNS lookups; a backlog of 4096 as the other servers have (tcpserver's
/// default, 20, would turn 500 connections into SYN retries); room for the
/// most connections a process-per-connection server is measured with.
fn tcpserver(port: u16, program: &Path) -> Result<Command, String> {
    let mut c = Command::new(which("tcpserver").ok_or("tcpserver is not installed")?);
    c.args([
        "-RHl0",
        "-b",
        "4096",
        "-c",
        "10000",
        "127.0.0.1",
        &port.to_string(),
    ])
    .arg(program);
    Ok(c)
}

fn write_config(dir: &Path, name: &str, text: &str) -> Result<PathBuf, String> {
    let path = dir.join(name);
    fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

pub fn describe_command(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().to_string();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Waits until the server answers a GET (over HTTP/1.1), or for an HTTP/2
/// instance until it accepts a connection: a server that cannot speak
/// HTTP/2 fails the check that follows at once rather than here after 15 s
/// of retries.
fn wait_ready(server: &mut Server, size: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let url = server.url(size);
    let client = server.tls_client.clone();
    let h2 = server.proto.http2();
    let addr = server.addr();
    loop {
        if let Some(why) = server.exited() {
            return Err(why);
        }
        let answer = if h2 {
            TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map(|_| ())
        } else {
            get(&url, client.as_ref()).map(|_| ())
        };
        match answer {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("not answering after 15 s: {e}{}", server.logs()));
            }
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// One GET over its own connection (over TLS with `tls`), read until the
/// server closes it.
fn get(url: &str, tls: Option<&Arc<ClientConfig>>) -> io::Result<Fetched> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr: SocketAddr = authority
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad address"))?;
    let (status, head, body) = exchange(
        addr,
        path,
        tls,
        Duration::from_secs(2),
        Duration::from_secs(10),
    )?;
    let content_length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    });
    Ok(Fetched {
        status,
        content_length,
        body,
    })
}

/// One GET of `path` on its own connection to `addr` (over TLS with
/// `tls`), `Connection: close`, read until the server closes it: the
/// status, the head and the body. `connect` bounds the TCP connect, `read`
/// each read (and the TLS handshake).
pub fn exchange(
    addr: SocketAddr,
    path: &str,
    tls: Option<&Arc<ClientConfig>>,
    connect: Duration,
    read: Duration,
) -> io::Result<(u16, String, Vec<u8>)> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut raw = Vec::new();
    match tls {
        None => {
            let mut s = TcpStream::connect_timeout(&addr, connect)?;
            s.set_read_timeout(Some(read))?;
            s.write_all(request.as_bytes())?;
            s.read_to_end(&mut raw)?;
        }
        Some(config) => {
            let mut s = tls::connect(&addr, config, read)?;
            s.write_all(request.as_bytes())?;
            s.flush()?;
            tls::read_to_close(&mut s, &mut raw)?;
        }
    }
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no response head"))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    Ok((status, head, raw.split_off(end + 4)))
}

fn check_file(
    url: &str,
    proto: Proto,
    tls: Option<&Arc<ClientConfig>>,
    size: u64,
    expected: Option<&Path>,
) -> Result<(), String> {
    let got = if proto.http2() {
        crate::fetch::get(url, tls).map(|(f, _)| f)
    } else {
        get(url, tls)
    }
    .map_err(|e| e.to_string())?;
    if got.status != 200 {
        return Err(format!("status {}", got.status));
    }
    if got.content_length != Some(size) {
        return Err(format!(
            "Content-Length {:?}, want {size}",
            got.content_length
        ));
    }
    if got.body.len() as u64 != size {
        return Err(format!("{} body bytes, want {size}", got.body.len()));
    }
    if let Some(path) = expected {
        let want = fs::read(path).map_err(|e| e.to_string())?;
        if got.body != want {
            return Err("body differs from the file".into());
        }
    }
    Ok(())
}

/// nginx: one worker per core, each with its own SO_REUSEPORT listener
/// (as staticd has), sendfile, open_file_cache, no access log, keep-alive
/// without a request limit. Over HTTPS: TLS 1.2 and 1.3, AEAD suites, the
/// shared session cache (tickets stay on, as by default). With `h2`, the
/// listener's `http2` parameter (nginx 1.22 has no `http2 on;`): h2 by ALPN
/// with `ssl`, h2c with prior knowledge (and nothing else) without;
/// `keepalive_requests` and `keepalive_timeout` apply to HTTP/2 connections
/// too, and its other HTTP/2 settings stay at their defaults (128
/// concurrent streams, as staticd).
fn nginx_conf(
    dir: &Path,
    root: &Path,
    port: u16,
    cores: usize,
    setup: &Setup,
    tls: Option<&TlsFiles>,
    h2: bool,
) -> String {
    let d = dir.display();
    let r = root.display();
    let fds = setup.fd_limit;
    let conns = setup.connection_cap();
    let (ssl, ssl_conf) = match tls {
        None => ("", String::new()),
        Some(t) => (
            " ssl",
            format!(
                r#"
        ssl_certificate {};
        ssl_certificate_key {};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers {TLS12_CIPHERS};
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 1h;"#,
                t.cert.display(),
                t.key.display()
            ),
        ),
    };
    let http2 = if h2 { " http2" } else { "" };
    let script = crate::script::PATH;
    format!(
        r#"# Written by benches/compare (staticd's comparison harness).
daemon off;
master_process on;
worker_processes {cores};
worker_rlimit_nofile {fds};
pid {d}/nginx.pid;
error_log {d}/error.log warn;

events {{
    worker_connections {conns};
}}

http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 60s;
    keepalive_requests 1000000000;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    open_file_cache_errors on;
    server_tokens off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;

    server {{
        listen 127.0.0.1:{port}{ssl}{http2} reuseport backlog=4096;
        server_name localhost;
        root {r};{ssl_conf}

        # The compression cell's script: compressed on every request.
        location = {script} {{
            gzip on;
            gzip_static on;
            gzip_types application/javascript text/javascript;
        }}
    }}
}}
"#
    )
}

/// lighttpd: one worker process per core (server.max-worker), sendfile,
/// the stat cache, no access log (mod_accesslog not loaded), as many
/// keep-alive requests as it allows (65535). Over HTTPS: mod_openssl, TLS
/// 1.2 and 1.3, AEAD suites; its session tickets are on by default. With
/// `h2`: `server.h2proto` (h2 by ALPN) and in the clear `server.h2c` (which
/// takes the prior-knowledge preface too). lighttpd 1.4 allows 8 concurrent
/// streams per connection, which no setting changes.
fn lighttpd_conf(
    dir: &Path,
    root: &Path,
    port: u16,
    cores: usize,
    setup: &Setup,
    tls: Option<&TlsFiles>,
    h2: bool,
) -> String {
    let d = dir.display();
    let r = root.display();
    let ssl = tls.map_or(String::new(), |t| {
        format!(
            r#"server.modules = ( "mod_openssl" )
ssl.engine = "enable"
ssl.pemfile = "{}"
ssl.privkey = "{}"
ssl.openssl.ssl-conf-cmd = ( "MinProtocol" => "TLSv1.2", "CipherString" => "{TLS12_CIPHERS}" )
"#,
            t.cert.display(),
            t.key.display()
        )
    });
    let http2 = match (h2, tls.is_some()) {
        (false, _) => "",
        (true, true) => "server.h2proto = \"enable\"\n",
        (true, false) => "server.h2proto = \"enable\"\nserver.h2c = \"enable\"\n",
    };
    // lighttpd allows at most half its descriptors as connections.
    let fds = setup.fd_limit.min(65_535);
    let conns = setup.connection_cap().min(fds / 2);
    let deflate_cache = dir.join("deflate");
    let _ = fs::create_dir_all(&deflate_cache);
    let deflate_cache = deflate_cache.display();
    format!(
        r#"# Written by benches/compare (staticd's comparison harness).
server.document-root = "{r}"
server.bind = "127.0.0.1"
server.port = {port}
server.pid-file = "{d}/lighttpd.pid"
server.errorlog = "{d}/error.log"
server.max-worker = {cores}
server.max-fds = {fds}
server.max-connections = {conns}
server.listen-backlog = 4096
server.event-handler = "linux-sysepoll"
server.network-backend = "sendfile"
server.stat-cache-engine = "simple"
server.max-keep-alive-requests = 65535
server.max-keep-alive-idle = 60
server.tag = ""
mimetype.assign = ( ".bin" => "application/octet-stream", ".html" => "text/html", ".js" => "text/javascript" )
{http2}{ssl}
# The compression cell's script: compressed once, kept in the cache directory.
server.modules += ( "mod_deflate" )
deflate.mimetypes = ( "text/javascript" )
deflate.allowed-encodings = ( "br", "gzip" )
deflate.cache-dir = "{deflate_cache}"
"#
    )
}

/// apache2 with mpm_event: one child process per core, together with a
/// thread for every request of the largest concurrency (with fewer, a busy
/// mpm_event closes idle keep-alive connections: wrk sees read errors),
/// all started up front and never reaped, sendfile and mmap on,
/// mod_file_cache holding every file open, unlimited keep-alive requests,
/// no access log (no CustomLog).
/// Over HTTPS: mod_ssl, TLS 1.2 and 1.3, AEAD suites, a 10 MB shmcb
/// session cache (as nginx's), tickets on as by default.
fn apache_conf(
    dir: &Path,
    root: &Path,
    port: u16,
    cores: usize,
    setup: &Setup,
    tls: Option<&TlsFiles>,
) -> String {
    let d = dir.display();
    let r = root.display();
    let m = APACHE_MODULES;
    let ssl = tls.map_or(String::new(), |t| {
        format!(
            r#"
LoadModule socache_shmcb_module {m}/mod_socache_shmcb.so
LoadModule ssl_module {m}/mod_ssl.so
SSLSessionCache shmcb:{d}/ssl_scache(10485760)
SSLSessionCacheTimeout 3600
SSLEngine on
SSLCertificateFile {}
SSLCertificateKeyFile {}
SSLProtocol -all +TLSv1.2 +TLSv1.3
SSLCipherSuite {TLS12_CIPHERS}
"#,
            t.cert.display(),
            t.key.display()
        )
    });
    let (sizes, docroot) = (setup.sizes, setup.docroot);
    let threads = (setup.max_connections.max(2048) as usize).div_ceil(cores);
    let total = cores * threads;
    let file_cache = Path::new(m).join("mod_file_cache.so").is_file();
    // The compression cell's script: compressed on every request, in br
    // where the module is there, else gzip.
    let brotli = Path::new(m).join("mod_brotli.so").is_file();
    let compress = format!(
        "LoadModule filter_module {m}/mod_filter.so\nLoadModule deflate_module {m}/mod_deflate.so\n{}AddOutputFilterByType {}DEFLATE text/javascript application/javascript\n",
        if brotli { format!("LoadModule brotli_module {m}/mod_brotli.so\n") } else { String::new() },
        if brotli { "BROTLI_COMPRESS;" } else { "" },
    );
    let mut cache = String::new();
    if file_cache {
        let _ = writeln!(cache, "LoadModule file_cache_module {m}/mod_file_cache.so");
        for &size in sizes {
            let _ = writeln!(cache, "CacheFile {}", docroot.file(size).display());
        }
    }
    format!(
        r#"# Written by benches/compare (staticd's comparison harness).
ServerRoot "{d}"
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
ListenBacklog 4096
PidFile {d}/apache2.pid
DefaultRuntimeDir {d}
ErrorLog {d}/error.log
LogLevel warn
User www-data
Group www-data

LoadModule mpm_event_module {m}/mod_mpm_event.so
LoadModule authz_core_module {m}/mod_authz_core.so
LoadModule mime_module {m}/mod_mime.so
TypesConfig /etc/mime.types
{cache}{ssl}{compress}
ServerLimit {cores}
StartServers {cores}
ThreadLimit {threads}
ThreadsPerChild {threads}
MaxRequestWorkers {total}
MinSpareThreads 64
MaxSpareThreads {total}
MaxConnectionsPerChild 0

KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 60
EnableSendfile On
EnableMMAP On
ServerTokens Prod
HostnameLookups Off

DocumentRoot "{r}"
<Directory />
    Options None
    AllowOverride None
    Require all denied
</Directory>
<Directory "{r}">
    Options None
    AllowOverride None
    Require all granted
</Directory>
"#
    )
}

/// h2o 2.2: one thread per core. It has no sendfile and no access log
/// unless configured; its open-file cache is built in and always on. Over
/// HTTPS: TLS 1.2 and 1.3, AEAD suites; its session cache and tickets are
/// on by default. HTTP/2 needs nothing more: h2o offers h2 by ALPN and
/// takes h2c with prior knowledge on any listener (100 concurrent streams).
fn h2o_conf(
    dir: &Path,
    root: &Path,
    port: u16,
    cores: usize,
    setup: &Setup,
    tls: Option<&TlsFiles>,
) -> String {
    let d = dir.display();
    let r = root.display();
    let conns = setup.connection_cap();
    let ssl = tls.map_or(String::new(), |t| {
        format!(
            r#"
  ssl:
    certificate-file: {}
    key-file: {}
    minimum-version: TLSv1.2
    cipher-suite: "{TLS12_CIPHERS}""#,
            t.cert.display(),
            t.key.display()
        )
    });
    format!(
        r#"# Written by benches/compare (staticd's comparison harness).
listen:
  host: 127.0.0.1
  port: {port}{ssl}
num-threads: {cores}
max-connections: {conns}
error-log: {d}/error.log
http1-request-timeout: 60
hosts:
  "default":
    paths:
      "/":
        file.dir: {r}
        # The compression cell's script (and only it: no other file here
        # has a compressible type): compressed on every request.
        compress: ON
"#
    )
}

/// Caddy 2: a Caddyfile with no admin endpoint (it would listen on :2019),
/// no automatic HTTPS (it would bind :80 for redirects and ask the
/// internet for certificates), no certificate-trust install, and the
/// default logger at ERROR (no access log: none is configured). One
/// hostless site on 127.0.0.1 and the harness's port, `file_server` over
/// the document root (Go's sendfile for HTTP/1.1 in the clear), the
/// compression cell's script gzipped on every request (Caddy 2.6 has no
/// br). `servers { protocols }` per instance: h1 for HTTP/1.1 in the clear
/// and over TLS (ALPN http/1.1 only, as the other peers' HTTPS
/// instances), h1 h2 for h2, h1 h2c for h2c (Go's h2c needs h1 beside
/// it); h3 (with h1 h2, as Caddy's default) only for the h3 instance, the
/// one that opens a UDP port. Over TLS: the harness's
/// certificate, TLS 1.2 and 1.3, the same AEAD ECDSA suites; Go's session
/// tickets are on by default. Go's runtime uses every core.
fn caddyfile(root: &Path, port: u16, tls: Option<&TlsFiles>, proto: Proto) -> String {
    let protocols = match proto {
        Proto::Http | Proto::Https => "h1",
        Proto::H2 => "h1 h2",
        Proto::H2c => "h1 h2c",
        // UDP on the same port number, the same certificate.
        Proto::H3 => "h1 h2 h3",
    };
    let (scheme, tls) = match tls {
        None => ("http", String::new()),
        Some(t) => (
            "https",
            format!(
                "\n\ttls {} {} {{\n\t\tprotocols tls1.2 tls1.3\n\t\tciphers {}\n\t}}",
                t.cert.display(),
                t.key.display(),
                TLS12_CIPHERS_GO.join(" ")
            ),
        ),
    };
    let r = root.display();
    let script = crate::script::PATH;
    format!(
        r#"# Written by benches/compare (staticd's comparison harness).
{{
	admin off
	auto_https off
	skip_install_trust
	log default {{
		output stderr
		level ERROR
	}}
	servers {{
		protocols {protocols}
	}}
}}

{scheme}://:{port} {{
	bind 127.0.0.1{tls}
	root * {r}
	# The compression cell's script: compressed on every request.
	@script path {script}
	encode @script gzip
	file_server
}}
"#
    )
}

/// TLS12_CIPHERS by Go's names, for Caddy.
const TLS12_CIPHERS_GO: [&str; 3] = [
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
];
