//! Pebble, Let's Encrypt's small ACME test server (Debian package `pebble`), for the
//! ACME tests: [`Pebble`] starts it with `pebble-challtestsrv` as its DNS server, both
//! on loopback with free ports, and kills both on drop.
//!
//! The DNS server answers every A query with 127.0.0.1 (and AAAA with nothing), so for
//! any name such as `a.staticd.test` Pebble validates challenges against the staticd
//! under test, on the two ports the test chose: `httpPort` (HTTP-01) and `tlsPort`
//! (TLS-ALPN-01). Pebble's own HTTPS listener serves the test PKI's localhost
//! certificate, so staticd trusts it with `--acme-ca` [`Pki::root_file`]; the
//! certificates Pebble issues chain to a root it makes at start ([`Pebble::root_file`]).

use super::*;

use std::sync::OnceLock;

/// What the Debian package providing both programs is called.
const PACKAGE: &str = "pebble";

/// Options for a [`Pebble`]; [`Pebble::builder`] makes one.
#[derive(Clone, Debug)]
pub struct PebbleBuilder {
    http_port: u16,
    tls_port: u16,
    validity_secs: Option<u64>,
    blocklist: Vec<String>,
    nonce_reject: Option<u8>,
}

impl PebbleBuilder {
    /// Lifetime of the certificates Pebble issues (`certificateValidityPeriod`), so that
    /// a test sees a renewal within seconds.
    pub fn validity_secs(mut self, secs: u64) -> PebbleBuilder {
        self.validity_secs = Some(secs);
        self
    }

    /// The percentage of valid nonces Pebble rejects as badNonce (its default is 5).
    pub fn nonce_reject(mut self, percent: u8) -> PebbleBuilder {
        self.nonce_reject = Some(percent);
        self
    }

    /// A name Pebble refuses to issue for (`domainBlocklist`): a CA that says no.
    pub fn block(mut self, name: &str) -> PebbleBuilder {
        self.blocklist.push(name.to_string());
        self
    }

    /// Starts the DNS server and Pebble and waits until Pebble's directory answers; None
    /// (after [`skip`]) when either program is missing.
    pub fn start(self) -> Option<Pebble> {
        let pebble = tool("pebble", PACKAGE)?;
        let challtestsrv = tool("pebble-challtestsrv", PACKAGE)?;
        // A free port can be taken by another test before Pebble binds it: a few tries.
        let mut failures = Vec::new();
        for _ in 0..3 {
            match self.try_start(&pebble, &challtestsrv) {
                Ok(started) => return Some(started),
                Err(why) => failures.push(why),
            }
        }
        panic!("Pebble did not start: {failures:#?}");
    }

    fn try_start(&self, pebble: &Path, challtestsrv: &Path) -> Result<Pebble, String> {
        let dir = tempfile::tempdir().expect("temp dir for Pebble");
        let logs = Lines::default();

        let dns_port = unused_port();
        let dns_addr = SocketAddr::from(([127, 0, 0, 1], dns_port));
        let dns_management = format!("127.0.0.1:{}", unused_port());
        let mut dns = spawn_logged(
            Command::new(challtestsrv)
                .args(["-dns01", &dns_addr.to_string()])
                // Only the DNS server: staticd itself answers the challenges.
                .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
                .args(["-management", &dns_management])
                .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""]),
            &logs,
        );
        // It serves DNS over TCP on the same port as over UDP: once that accepts, both do.
        wait_listening(&mut dns, dns_addr, &logs)?;

        let acme = SocketAddr::from(([127, 0, 0, 1], unused_port()));
        let management = SocketAddr::from(([127, 0, 0, 1], unused_port()));
        let config = dir.path().join("pebble-config.json");
        fs::write(&config, self.config_json(acme, management)).unwrap();
        let mut process = spawn_logged(
            Command::new(pebble)
                .arg("-config")
                .arg(&config)
                .args(["-dnsserver", &dns_addr.to_string(), "-strict=false"])
                // No random sleep of up to 15 s before each validation.
                .env("PEBBLE_VA_NOSLEEP", "1")
                // Pebble's default 5% of rejected nonces stays unless a test asks for
                // another share: a client must retry badNonce.
                .env(
                    "PEBBLE_WFE_NONCEREJECT",
                    self.nonce_reject.unwrap_or(5).to_string(),
                )
                .env_remove("PEBBLE_VA_ALWAYS_VALID"),
            &logs,
        );
        wait_listening(&mut process, acme, &logs)?;
        wait_listening(&mut process, management, &logs)?;
        let started = Pebble {
            process,
            _dns: dns,
            acme,
            management,
            logs,
            root_file: OnceLock::new(),
            dir,
        };
        let resp = started.get(acme, "/dir");
        if resp.status != 200 || !resp.body_str().contains("newOrder") {
            return Err(format!("GET /dir answered {resp:#?}"));
        }
        Ok(started)
    }

    /// Pebble's JSON configuration (its listeners on `acme` and `management`).
    fn config_json(&self, acme: SocketAddr, management: SocketAddr) -> String {
        let listener = &Pki::shared().localhost().1;
        let mut config = serde_json::json!({
            "listenAddress": acme.to_string(),
            "managementListenAddress": management.to_string(),
            "certificate": listener.cert,
            "privateKey": listener.key,
            "httpPort": self.http_port,
            "tlsPort": self.tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
        });
        if let Some(secs) = self.validity_secs {
            config["certificateValidityPeriod"] = secs.into();
        }
        if !self.blocklist.is_empty() {
            config["domainBlocklist"] = self.blocklist.clone().into();
        }
        serde_json::json!({ "pebble": config }).to_string()
    }
}

/// A running Pebble and its DNS server; dropping it kills both.
pub struct Pebble {
    process: ChildGuard,
    _dns: ChildGuard,
    acme: SocketAddr,
    management: SocketAddr,
    /// What both programs printed (stdout and stderr), for failure messages.
    logs: Lines,
    root_file: OnceLock<PathBuf>,
    dir: tempfile::TempDir,
}

impl Pebble {
    /// Pebble validating HTTP-01 on `http_port` and TLS-ALPN-01 on `tls_port` of
    /// 127.0.0.1, where the test will start staticd.
    pub fn builder(http_port: u16, tls_port: u16) -> PebbleBuilder {
        PebbleBuilder {
            http_port,
            tls_port,
            validity_secs: None,
            blocklist: Vec::new(),
            nonce_reject: None,
        }
    }

    /// The ACME directory URL, for `--acme-directory`.
    pub fn directory_url(&self) -> String {
        format!("https://{}/dir", self.acme)
    }

    /// The root Pebble's listeners chain to, for `--acme-ca`.
    pub fn listener_ca(&self) -> PathBuf {
        Pki::shared().root_file()
    }

    /// A file with the root Pebble issues under (it makes a new one at each start), for
    /// `curl --cacert` and [`Pebble::client`].
    pub fn root_file(&self) -> &Path {
        self.root_file.get_or_init(|| {
            let resp = self.get(self.management, "/roots/0");
            assert_eq!(resp.status, 200, "GET /roots/0: {resp:#?}");
            let pem = resp.body_str();
            assert!(
                pem.starts_with("-----BEGIN CERTIFICATE-----"),
                "GET /roots/0 answered no PEM certificate: {pem:?}"
            );
            let path = self.dir.path().join("pebble-root.pem");
            fs::write(&path, pem).unwrap();
            path
        })
    }

    /// A rustls client trusting only Pebble's issuing root, sending SNI `name`.
    pub fn client(&self, name: &str) -> TlsClient {
        use rustls::pki_types::pem::PemObject;
        let root = rustls::pki_types::CertificateDer::from_pem_file(self.root_file())
            .expect("Pebble's root certificate");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(root).expect("trust Pebble's root");
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // Every handshake shows the certificate the server has now.
        config.resumption = rustls::client::Resumption::disabled();
        TlsClient::new(config, name)
    }

    /// What Pebble and its DNS server print, for failure messages (`harness: ...
    /// ended` when one of them exits).
    pub fn log(&self) -> Lines {
        self.logs.clone()
    }

    /// `GET path` from one of Pebble's HTTPS listeners.
    fn get(&self, addr: SocketAddr, path: &str) -> Response {
        let client = TlsClient::new(Pki::shared().client_config(), "127.0.0.1");
        Connector::new(addr, Some(client))
            .connect()
            .roundtrip(request("GET", path, &["Connection: close"]))
    }
}

/// Spawns `cmd` with stdout and stderr collected into `logs` (Pebble logs to stdout).
fn spawn_logged(cmd: &mut Command, logs: &Lines) -> ChildGuard {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let stdout = logs.drain(child.stdout.take().unwrap());
    logs.drain(child.stderr.take().unwrap());
    // The end of its output is the end of the program: said in the log, so that a
    // test waiting for a certificate shows that the CA died.
    let (program, ended) = (cmd.get_program().to_owned(), logs.clone());
    thread::spawn(move || {
        let _ = stdout.join();
        ended.push(format!("harness: {} ended", program.to_string_lossy()));
    });
    ChildGuard::new(child)
}

/// Waits until `addr` accepts TCP connections; an error if `child` exits first or after
/// [`IO_TIMEOUT`].
fn wait_listening(child: &mut ChildGuard, addr: SocketAddr, logs: &Lines) -> Result<(), String> {
    let deadline = Instant::now() + IO_TIMEOUT;
    while TcpStream::connect_timeout(&addr, IO_TIMEOUT).is_err() {
        if let Some(status) = child.try_status() {
            // Give the drain threads a moment to pick up the last words.
            thread::sleep(Duration::from_millis(100));
            return Err(format!(
                "exited ({}) before listening on {addr}: {:#?}",
                describe(status),
                logs.snapshot()
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not listening on {addr} within {IO_TIMEOUT:?}: {:#?}",
                logs.snapshot()
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A port free on 127.0.0.1 for TCP and UDP, below the kernel's ephemeral range.
///
/// The ports a test gives Pebble and staticd stay unbound for a second or so while
/// Pebble starts; a port from `free_port` (the ephemeral range) could meanwhile become
/// the local port of any outgoing connection on the machine (curl, Pebble's
/// validations, other tests), and staticd's bind would fail. Below the range only an
/// explicit bind can take it.
pub fn unused_port() -> u16 {
    use std::hash::BuildHasher;
    let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(32768);
    const FLOOR: u16 = 10_000;
    if low <= FLOOR + 1000 {
        return free_port();
    }
    // Never the same port twice in this process: the tests running beside this one
    // pick theirs the same way.
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap();
    // A random start (each RandomState has new keys), then the next ones in turn.
    let start = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    let span = u64::from(low - FLOOR);
    let port = (0..span)
        .map(|i| FLOOR + ((start + i) % span) as u16)
        .find(|port| {
            !given.contains(port)
                && TcpListener::bind(("127.0.0.1", *port)).is_ok()
                && std::net::UdpSocket::bind(("127.0.0.1", *port)).is_ok()
        })
        .expect("a free port below the ephemeral range");
    given.push(port);
    port
}
