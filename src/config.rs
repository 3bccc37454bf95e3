//! Every knob staticd has, with its default, in one struct, and the
//! types of the values it holds: the lowest layer above the system calls,
//! so every module may read it and it reads none of them.
//!
//! Each default the command line shows is a constant here, used both by
//! the flag (src/cli.rs) and by `Config::default()`.

mod trusted_proxy;

use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use trusted_proxy::{TrustedProxies, TrustedProxy};

/// `--root`.
pub const ROOT: &str = ".";
/// `--port`.
pub const PORT: u16 = 8080;
/// `--unix-mode`, as the flag takes it: any local user may connect, as to
/// a TCP port; a proxy's socket is usually guarded by its directory's
/// permissions instead.
pub const UNIX_MODE: &str = "666";
/// `--index`.
pub const INDEX: &str = "index.html";
/// `--max-connections-per-ip`.
pub const MAX_CONNECTIONS_PER_IP: u32 = 256;
/// `--ipv6-prefix`: one host usually holds a whole /64.
pub const IPV6_PREFIX: u32 = 64;
/// `--min-rate`, in bytes per second.
pub const MIN_RATE: u64 = 500;
/// `--cgi-timeout`, in seconds.
pub const CGI_TIMEOUT: u64 = 30;
/// `--cgi-max`.
pub const CGI_MAX: u32 = 16;
/// `--pretty-urls`.
pub const PRETTY_URLS: PrettyUrls = PrettyUrls::On;
/// `--log-format`.
pub const LOG_FORMAT: LogFormat = LogFormat::Common;
/// `--read-timeout`, in seconds.
pub const READ_TIMEOUT: u64 = 10;
/// `--keepalive-timeout`, in seconds.
pub const KEEPALIVE_TIMEOUT: u64 = 15;
/// `--send-timeout`, in seconds.
pub const SEND_TIMEOUT: u64 = 30;
/// `--shutdown-grace`, in seconds.
pub const SHUTDOWN_GRACE: u64 = 10;
/// `--compress-cache`, in megabytes.
pub const COMPRESS_CACHE: u32 = 64;
/// `--compress-max`, as the flag takes it.
pub const COMPRESS_MAX: &str = "4M";
/// `--h2-max-streams`.
pub const H2_MAX_STREAMS: u32 = 128;
/// `--h3-max-streams`: RFC 9114 §6.1's "at least 100 request streams". Not
/// HTTP/2's 128, because quinn-proto keeps a map entry for every stream a
/// client may open: 100 (with the 8 unidirectional) keeps both its maps at
/// 128 slots where 128 doubles them, 4.9 KiB more per connection, idle or not.
pub const H3_MAX_STREAMS: u32 = 100;
/// `--acme-dir`.
pub const ACME_DIR: &str = "/var/lib/staticd/acme";
/// `--acme-backoff`, in seconds.
pub const ACME_BACKOFF: u64 = 60;

/// How access-log lines are written (to stderr). The doc comments are the
/// `--log-format` help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// NCSA common log format
    Common,
    /// Apache combined: common plus referer and user agent
    Combined,
    /// fnord's `IP STATUS SIZE HOST USER_AGENT REFERER PATH`
    Fnord,
    /// one JSON object per line (Caddy's field names)
    Json,
    /// no access log
    Off,
}

/// Settings shared by every transport. Built once at start-up and never
/// changed.
#[derive(Clone, Debug)]
pub struct Config {
    pub root: PathBuf,
    pub port: u16,
    /// Where to listen; empty means every IPv4 and IPv6 address.
    pub bind: Vec<Bind>,
    /// Permission bits of the Unix-domain socket files bound.
    pub unix_mode: u32,
    /// `--reuse-port`: TCP addresses may be shared with another process
    /// (a new staticd taking over from this one); by default one that is
    /// taken is a start-up error.
    pub reuse_port: bool,
    pub threads: usize,
    pub inetd: bool,
    /// Standalone mode on io_uring (`serve::uring`) instead of epoll.
    pub io_uring: bool,
    /// Index file names for a directory request, tried in order.
    pub index: Vec<String>,
    pub features: Features,
    pub log_format: LogFormat,
    /// `--log-file`: the access log goes here instead of stderr.
    pub log_file: Option<PathBuf>,
    pub read_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    /// Copy file bytes through a buffer instead of sendfile(2).
    pub no_sendfile: bool,
    /// How long a CGI script may run.
    pub cgi_timeout: Duration,
    /// Most CGI scripts running at once.
    pub cgi_max: usize,
    /// Most connections open at once in standalone mode.
    pub max_connections: usize,
    /// Most connections open at once from one client address (standalone;
    /// 0: no bound).
    pub max_connections_per_ip: usize,
    /// `--per-ip-loopback`: loopback clients are held to
    /// `max_connections_per_ip` too (by default they are not: a benchmark
    /// or a proxy on the same machine is one address by design).
    pub per_ip_loopback: bool,
    /// IPv6 clients are counted by this many leading bits of their address.
    pub ipv6_prefix: u8,
    /// Bytes per second below which a request body or a response is given
    /// up on (see [`pace`](crate::pace)); 0: only the timeouts.
    pub min_rate: u64,
    /// Bytes of kernel memory raised unsent queues may hold together (see
    /// [`unsent`](crate::unsent)); None: the default share of physical memory.
    pub unsent_budget: Option<u64>,
    /// How long in-flight responses may run after SIGINT/SIGTERM.
    pub shutdown_grace: Duration,
    /// Who to become once the ports are bound and the certificates read.
    pub privileges: Privileges,
    /// HTTPS on the listeners (or stdin/stdout); None: cleartext.
    pub https: Option<Https>,
    /// HTTP/2 (ALPN h2 over TLS, h2c with prior knowledge in cleartext);
    /// None: HTTP/1.x only (`--no-http2`, or a build without it).
    pub http2: Option<Http2>,
    /// HTTP/3 over QUIC, on the HTTPS addresses' port numbers over UDP,
    /// when HTTPS is on (`--no-http3`, or a build without it: false).
    pub http3: bool,
    /// Request streams a client may have open at once on one HTTP/3
    /// connection (`--h3-max-streams`).
    pub h3_max_streams: u32,
    /// The UDP port HTTP/3 was bound on, advertised by `Alt-Svc` on HTTPS
    /// responses over TCP: set by start-up once bound (None: no HTTP/3).
    pub alt_svc_port: Option<u16>,
    /// Paths that need a user and password (`--auth`); empty without the
    /// auth feature.
    pub auth: Vec<AuthArea>,
    /// Where `--metrics` serves the Prometheus page (standalone only).
    pub metrics: Option<std::net::SocketAddr>,
    /// `--proxy-protocol`: every connection opens with a PROXY protocol
    /// header (v1 or v2) naming its client.
    pub proxy_protocol: bool,
    /// `--trusted-proxy`: peers whose `Forwarded` / `X-Forwarded-For`
    /// name the client.
    pub trusted_proxies: TrustedProxies,
}

/// `--user`, `--group` and `--chroot`; none: keep running as started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Privileges {
    /// A user name or uid.
    pub user: Option<String>,
    /// A group name or gid; None: the user's primary group.
    pub group: Option<String>,
    /// chroot(2) here; the root is then inside it.
    pub chroot: Option<PathBuf>,
}

/// What a site serves, beyond plain files.
#[derive(Clone, Debug, Default)]
pub struct Features {
    /// Pick a directory under the root by the Host header.
    pub vhosts: bool,
    /// Generate an index for directories without an index file.
    pub listing: bool,
    /// Run executable `*.cgi` files as CGI scripts.
    pub cgi: bool,
    /// `--health-path`: answered 200 while serving, 503 once a stop begins.
    pub health_path: Option<String>,
    /// Compress text on the fly (`--compress-*`); None: `--no-compress`,
    /// or a build without the feature.
    pub compress: Option<CompressSettings>,
    /// Netlify's and Cloudflare Pages' routing: pretty URLs, the nearest
    /// `404.html`, the single-page-app fallback.
    pub routes: Routes,
}

/// `--pretty-urls`, `--no-nearest-404` and `--spa`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Routes {
    pub pretty_urls: PrettyUrls,
    /// A 404 gets the `404.html` of the nearest directory above the path
    /// that has one, not only the root's (Cloudflare Pages).
    pub nearest_404: bool,
    /// A path that names nothing gets the root's index page with 200.
    pub spa: bool,
}

/// On by default, as both hosts have them.
impl Default for Routes {
    fn default() -> Self {
        Routes {
            pretty_urls: PRETTY_URLS,
            nearest_404: true,
            spa: false,
        }
    }
}

/// `/about` served from `about.html`. The doc comments are the
/// `--pretty-urls` help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PrettyUrls {
    /// `/about` and `/about/` are plain paths
    Off,
    /// `/about` serves `about.html` when nothing named `about` exists; `/about/` redirects to
    /// `/about`
    On,
    /// as `on`, and `/about.html` redirects to `/about`, `/about/index.html` to `/about/`
    /// (Cloudflare Pages)
    Redirect,
}

/// `--compress-cache` and `--compress-max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressSettings {
    /// Most bytes of compressed variants held in memory.
    pub cache_bytes: usize,
    /// Larger files are sent as they are.
    pub max_size: u64,
    /// Whether files too large to compress while a request waits are
    /// compressed by background threads (standalone), or while their own
    /// connection's process waits, up to a smaller size (inetd mode, where
    /// nothing outlives the connection to use the result).
    pub background: bool,
}

impl Default for CompressSettings {
    fn default() -> Self {
        CompressSettings {
            cache_bytes: megabytes(COMPRESS_CACHE),
            max_size: parse_size(COMPRESS_MAX).expect("COMPRESS_MAX is a size"),
            background: true,
        }
    }
}

/// `--compress-cache`'s megabytes in bytes.
pub fn megabytes(n: u32) -> usize {
    (n as usize) << 20
}

/// A byte count as `--compress-max` takes it: a number, or one followed by
/// K or M (KiB, MiB).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    let n: u64 = digits
        .parse()
        .ok()
        .filter(|_| !digits.starts_with('+'))
        .ok_or("not a size in bytes, or with K or M after it, e.g. 4M")?;
    n.checked_mul(unit)
        .filter(|&bytes| bytes <= 1 << 30)
        .ok_or_else(|| "more than 1G".to_string())
}

/// `--unix-mode`: permission bits in octal, as chmod(1) takes them.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(mode) if mode <= 0o777 && !s.starts_with('+') => Ok(mode),
        _ => Err("not an octal mode from 000 to 777, e.g. 660".to_string()),
    }
}

/// HTTP/2 settings (`--h2-max-streams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http2 {
    /// Streams a client may have open at once on one connection.
    pub max_streams: u32,
}

impl Default for Http2 {
    fn default() -> Self {
        Http2 {
            max_streams: H2_MAX_STREAMS,
        }
    }
}

/// Automatic HTTPS (`--acme*`): certificates from an ACME CA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acme {
    /// The names to obtain and renew certificates for, lower case.
    pub names: Vec<String>,
    /// `--acme-vhosts`: also the virtual-host directories' names.
    pub vhosts: bool,
    /// Account contact (`mailto:` is added).
    pub email: Option<String>,
    /// State: account, certificates and keys, the lock, challenges.
    pub dir: PathBuf,
    /// The CA's directory URL.
    pub directory: String,
    /// An extra root to trust for the CA's own HTTPS.
    pub ca: Option<PathBuf>,
    /// The challenge kinds allowed, in the order they are tried.
    pub challenges: Vec<Challenge>,
    /// The first retry delay after a failed attempt; it doubles after each
    /// further failure, up to a day.
    pub backoff: Duration,
}

/// How a CA checks that this server answers for a name. The doc comments
/// are the `--acme-challenge` help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Challenge {
    /// TLS-ALPN-01 (RFC 8737): answered by the HTTPS port itself
    #[value(name = "tls-alpn-01")]
    TlsAlpn01,
    /// HTTP-01: answered on the --redirect-http port (80)
    #[value(name = "http-01")]
    Http01,
}

impl Challenge {
    pub fn as_str(self) -> &'static str {
        match self {
            Challenge::TlsAlpn01 => "tls-alpn-01",
            Challenge::Http01 => "http-01",
        }
    }
}

/// Let's Encrypt's production directory: `--acme-directory`'s default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";
/// Let's Encrypt's staging directory (`--acme-staging`).
pub const LETS_ENCRYPT_STAGING: &str = "https://acme-staging-v02.api.letsencrypt.org/directory";

/// HTTPS settings (`--tls-*`, `--hsts`, `--redirect-http`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Https {
    /// A certificate chain and its key: for clients whose SNI names nothing
    /// in `dir`, and for those that send no SNI.
    pub pair: Option<(PathBuf, PathBuf)>,
    /// certbot's layout: `DIR/<name>/fullchain.pem` and `privkey.pem`.
    pub dir: Option<PathBuf>,
    /// Session-ticket key files; none: keys made and rotated in memory.
    pub ticket_keys: Vec<PathBuf>,
    /// `Strict-Transport-Security: max-age=` this, on every HTTPS response.
    pub hsts: Option<u64>,
    /// Also listen in cleartext on this port, redirecting to https.
    pub redirect_port: Option<u16>,
    /// `--acme`: certificates obtained and renewed from a CA, beside or
    /// instead of the files above.
    pub acme: Option<Acme>,
}

impl Default for Config {
    fn default() -> Self {
        let secs = Duration::from_secs;
        Config {
            root: PathBuf::from(ROOT),
            port: PORT,
            bind: Vec::new(),
            unix_mode: parse_mode(UNIX_MODE).expect("UNIX_MODE is a mode"),
            reuse_port: false,
            // The command line counts the cores; a library user says how many.
            threads: 1,
            inetd: false,
            io_uring: false,
            index: vec![INDEX.to_string()],
            features: Features::default(),
            log_format: LOG_FORMAT,
            log_file: None,
            read_timeout: secs(READ_TIMEOUT),
            keepalive_timeout: secs(KEEPALIVE_TIMEOUT),
            send_timeout: secs(SEND_TIMEOUT),
            no_sendfile: false,
            cgi_timeout: secs(CGI_TIMEOUT),
            cgi_max: CGI_MAX as usize,
            // The command line sizes it by the descriptor limit.
            max_connections: 1024,
            max_connections_per_ip: MAX_CONNECTIONS_PER_IP as usize,
            per_ip_loopback: false,
            ipv6_prefix: IPV6_PREFIX as u8,
            min_rate: MIN_RATE,
            unsent_budget: None,
            shutdown_grace: secs(SHUTDOWN_GRACE),
            privileges: Privileges::default(),
            https: None,
            http2: None,
            http3: false,
            h3_max_streams: H3_MAX_STREAMS,
            alt_svc_port: None,
            auth: Vec::new(),
            metrics: None,
            proxy_protocol: false,
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

/// One place to listen (`--bind`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bind {
    /// An IP address or a host name, resolved at start-up.
    Host(String),
    /// A Unix-domain stream socket at this path (`unix:PATH`).
    Unix(PathBuf),
}

/// The longest path a Unix socket address holds (sun_path less its NUL).
const UNIX_PATH_MAX: usize = 107;

impl FromStr for Bind {
    type Err = String;

    /// `unix:PATH`, an IPv4 or IPv6 address (brackets allowed), or a host
    /// name. Only the shape is checked here: names resolve at start-up.
    fn from_str(s: &str) -> Result<Bind, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            return unix_path(path).map(Bind::Unix);
        }
        let unbracketed = s
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(s);
        if unbracketed.parse::<IpAddr>().is_ok() || is_host_name(s) {
            return Ok(Bind::Host(unbracketed.to_string()));
        }
        let looks_like_a_port = s.contains(':') || s.bytes().all(|b| b.is_ascii_digit());
        let hint = if looks_like_a_port {
            " (the port goes in --port)"
        } else {
            ""
        };
        Err(format!("not an IP address, host name or unix:PATH{hint}"))
    }
}

fn unix_path(path: &str) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("unix: needs a path, e.g. unix:/run/staticd.sock".to_string());
    }
    if path.len() > UNIX_PATH_MAX {
        return Err(format!(
            "a Unix socket path has at most {UNIX_PATH_MAX} bytes"
        ));
    }
    Ok(PathBuf::from(path))
}

/// Letters, digits, `-`, `_` and dots between non-empty labels: what a
/// resolver may know, /etc/hosts included (hence `_`). The last label is
/// not all digits (RFC 1123 §2.1): `8080` or `127.1` is a mistake here, not
/// a name for the resolver to read as an IPv4 address.
fn is_host_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    let numeric = |label: &str| label.bytes().all(|b| b.is_ascii_digit());
    !s.is_empty()
        && s.len() <= 253
        && !s.rsplit('.').next().is_some_and(numeric)
        && s.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// A part of the site behind a password: `--auth PREFIX=HTPASSWD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthArea {
    /// A decoded URL path: `/private` covers `/private` and `/private/...`.
    pub prefix: String,
    /// An Apache htpasswd file.
    pub file: PathBuf,
}

impl AuthArea {
    /// A prefix is a path, and becomes the realm in a header: it starts
    /// with `/` and holds no control characters.
    pub fn check_prefix(prefix: &str) -> Result<(), String> {
        if !prefix.starts_with('/') {
            return Err(format!(
                "the prefix {prefix:?} does not start with /, e.g. /private=/etc/staticd/htpasswd"
            ));
        }
        if prefix.chars().any(char::is_control) {
            return Err("the prefix holds a control character".to_string());
        }
        Ok(())
    }
}

impl FromStr for AuthArea {
    type Err = String;

    /// `PREFIX=HTPASSWD`, split at the first `=`.
    fn from_str(s: &str) -> Result<AuthArea, String> {
        let Some((prefix, file)) = s.split_once('=') else {
            return Err(
                "no '=': use PREFIX=HTPASSWD, e.g. /private=/etc/staticd/htpasswd".to_string(),
            );
        };
        AuthArea::check_prefix(prefix)?;
        if file.is_empty() {
            return Err("no htpasswd file after '='".to_string());
        }
        Ok(AuthArea {
            prefix: prefix.to_string(),
            file: PathBuf::from(file),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_on_the_command_line() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("1024M"), Ok(1 << 30));
        for bad in [
            "",
            "M",
            "4G",
            "-1",
            "+4",
            "4 M",
            "1025M",
            "99999999999999999999",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn textual_defaults_parse() {
        assert!(parse_mode(UNIX_MODE).is_ok());
        assert!(parse_size(COMPRESS_MAX).is_ok());
    }

    #[test]
    fn bind_forms() {
        let host = |s: &str| Bind::Host(s.to_string());
        assert_eq!("127.0.0.1".parse(), Ok(host("127.0.0.1")));
        assert_eq!("::1".parse(), Ok(host("::1")));
        assert_eq!("[::1]".parse(), Ok(host("::1")));
        assert_eq!("localhost".parse(), Ok(host("localhost")));
        assert_eq!("web-1.example.org.".parse(), Ok(host("web-1.example.org.")));
        assert_eq!(
            "unix:/run/staticd.sock".parse(),
            Ok(Bind::Unix("/run/staticd.sock".into()))
        );
        assert_eq!("unix:rel.sock".parse(), Ok(Bind::Unix("rel.sock".into())));
    }

    #[test]
    fn bind_mistakes() {
        for bad in [
            "",
            "unix:",
            "127.0.0.1:8080",
            "8080",
            "127.1",
            "1.2.3.4.5",
            "a..b",
            "-a",
            "a b",
            "[::1",
            "/x.sock",
        ] {
            assert!(bad.parse::<Bind>().is_err(), "{bad:?}");
        }
        let long = format!("unix:/{}", "a".repeat(UNIX_PATH_MAX));
        assert!(long.parse::<Bind>().is_err());
        for port_mistake in ["127.0.0.1:8080", "8080"] {
            let hint = port_mistake.parse::<Bind>().unwrap_err();
            assert!(hint.contains("--port"), "{hint}");
        }
    }

    #[test]
    fn auth_area_forms_and_mistakes() {
        let area = |p: &str, f: &str| AuthArea {
            prefix: p.to_string(),
            file: PathBuf::from(f),
        };
        assert_eq!("/private=/etc/pw".parse(), Ok(area("/private", "/etc/pw")));
        assert_eq!("/=pw=x".parse(), Ok(area("/", "pw=x")));
        for (bad, why) in [
            ("/private", "no '='"),
            ("private=/etc/pw", "does not start with /"),
            ("=/etc/pw", "does not start with /"),
            ("/a\nb=/etc/pw", "control character"),
            ("/private=", "no htpasswd file"),
        ] {
            let err = bad.parse::<AuthArea>().unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
